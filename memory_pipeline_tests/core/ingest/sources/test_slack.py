"""Slack workspace export (folder and zip): names from users.json, mentions and links
resolved, bot messages, joins as system, files typed, ts to the microsecond, an overlapping
zip export merging, workspace files holding no records, bad input."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from memory_pipeline.core.common import records as R
from memory_pipeline.core.common.records import SourceError
from memory_pipeline.core.ingest.sources.auto import detected_kind
from memory_pipeline.core.ingest.sources.slack import parse_ts
from memory_pipeline_tests.core.ingest.sources._helpers import (
    EXPORTS,
    merged,
    messages,
    quarantined,
    read,
    reasons,
    reconciles,
)

SL = EXPORTS / "slack"
FOLDER = SL / "Acme Slack export Mar 1 2024"
ZIP = SL / "Acme Slack export Mar 1 2024 - Mar 2 2024.zip"


def _count(folder: Path) -> int:
    return sum(len(json.loads(p.read_text("utf-8"))) for p in folder.glob("*/*.json"))


def test_folder_export() -> None:
    recs = read("slack", FOLDER)
    assert len(recs) == _count(FOLDER)  # users.json and channels.json hold no records
    ms = [m for m in messages(recs) if m.conversation_id == "slack_general"]
    assert [(m.type, m.sender) for m in ms] == [
        ("system", ""), ("text", "Maria"), ("text", "田中 ゆき"), ("text", "CI Bot"),
        ("photo", "Maria")]  # fmt: skip
    assert ms[0].text == "@jonas.w has joined the channel"
    assert ms[1].text == (
        "Morning all! Release notes are in #tokyo-office and the wiki "
        "(https://wiki.example.org/rn) & @here"
    )
    assert ms[2].text == "Thanks @Maria! I'll check <today>" and ms[2].is_owner
    assert ms[1].ts == dt.datetime(2024, 3, 1, 0, 1, 0, 200, tzinfo=dt.UTC)
    assert ms[1].source_ref == "slack:general/1709251260.000200"
    assert {m.contact_id for m in ms} == {"#general"}
    assert reasons(recs) == {R.R_EMPTY_TEXT: 1, R.R_BAD_TIMESTAMP: 1}
    tokyo = [m for m in messages(recs) if m.conversation_id == "slack_tokyo-office"]
    assert [m.type for m in tokyo] == ["text", "text", "call"]


def test_owner_by_user_id() -> None:
    ms = messages(read("slack", FOLDER, owner_aliases=["U02YUKI"]))
    assert {m.sender for m in ms if m.is_owner} == {"田中 ゆき"}


def test_zip_reexport_merges() -> None:
    zipped = messages(read("slack", ZIP))
    assert any(m.sender == "Maria" for m in zipped)  # users.json found inside the zip
    result = merged("slack", SL)
    reconciles(result, _count(FOLDER) + len(read("slack", ZIP)))
    assert reasons(result)[R.R_DUPLICATE_EXPORT] == 5
    assert len(result.messages) == 8 + 2


def test_parse_ts() -> None:
    assert parse_ts("1709251200.5") == dt.datetime(2024, 3, 1, 0, 0, 0, 500000, tzinfo=dt.UTC)
    assert parse_ts("x") is None and parse_ts(None) is None


def test_bad_input(tmp_path: Path) -> None:
    (tmp_path / "general").mkdir()
    day = FOLDER / "general" / "2024-03-01.json"
    (tmp_path / "general" / "2024-03-01.json").write_bytes(day.read_bytes()[:400])
    (tmp_path / "general" / "2024-03-02.json").write_text('{"ok": true}', encoding="utf-8")
    (tmp_path / "general" / "2024-03-03.json").write_bytes(
        day.read_bytes().replace(b"Morning all", b"Morning \xe0ll")
    )
    recs = read("slack", tmp_path)
    files = {q.source_file: q.reason for q in quarantined(recs) if q.record_ref == "file"}
    assert files == {"general/2024-03-01.json": R.R_MALFORMED_JSON,
                     "general/2024-03-02.json": R.R_NOT_AN_EXPORT}  # fmt: skip
    third = [r for r in recs if r.source_file.endswith("03-03.json")]
    assert len(third) == 7 and reasons(third)[R.R_ENCODING] == 1
    with pytest.raises(SourceError, match="Slack"):
        read("slack", tmp_path / "general" / "2024-03-02.json")
    assert {detected_kind(r) for r in read("auto", SL)} == {"slack"}
