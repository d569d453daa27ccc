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


VARIANTS = EXPORTS / "slack_variants"


def test_archive_variants_are_each_read_or_classified() -> None:
    """Sorted keys and a large first file share (ts far from the bracket), joins without
    text, blocks-only and attachments-only messages, thread replies and broadcasts, edit and
    thread events, deletions, old single-file shares, hidden files, tombstones, a DM folder
    and workspace files of other shapes (integration_logs.json is an object)."""
    recs = read("auto", VARIANTS)
    assert {detected_kind(r) for r in recs} == {"slack"}
    assert len(recs) == 15 + 3 + 1  # every entry of every day file, workspace files none
    assert R.R_NOT_AN_EXPORT not in reasons(recs)
    assert reasons(recs) == {R.R_DUPLICATE: 3, R.R_UNKNOWN_TYPE: 1, R.R_EMPTY_TEXT: 1,
                             R.R_MISSING_TIMESTAMP: 1}  # fmt: skip
    details = sorted(q.detail for q in quarantined(recs))
    assert any("message_deleted event" in d for d in details)
    assert sum("read into that message" in d for d in details) == 2
    ms = {m.source_ref.split("/")[-1]: m for m in messages(recs)}
    t0 = 1672560000
    assert (ms[f"{t0}.000100"].type, ms[f"{t0}.000100"].text) == ("photo", "Moodboard v2")
    assert (ms[f"{t0 + 60}.000000"].type, ms[f"{t0 + 60}.000000"].text) == (
        "system", "Yuki Tanaka joined the channel")  # fmt: skip
    assert ms[f"{t0 + 120}.000000"].text == "Kickoff at the usual room"
    assert ms[f"{t0 + 180}.000000"].sender == "Jira"
    assert "DES-12 Logo refresh" in ms[f"{t0 + 180}.000000"].text
    assert ms[f"{t0 + 240}.000000"].text == "Draft ready for review"  # the edit read in
    assert ms[f"{t0 + 300}.000000"].text == "Looks great!!"  # latest edit, from day 2
    assert ms[f"{t0 + 360}.000000"].text == "Shipping it today"
    assert ms[f"{t0 + 480}.000000"].type == "file"
    assert ms[f"{t0 + 600}.000000"].type == "system"
    dm = ms[f"{t0 + 2 * 86400}.000000"]
    assert (dm.conversation_id, dm.contact_id) == ("slack_d0dm1", "Ana")  # named by its people
    result = merged("auto", VARIANTS)
    reconciles(result, len(recs))
    assert len(result.messages) == 13 - 1  # the day-1 "Looks great" yields to its edit
    assert [m.text for _, m in result.messages if m.source_ref.endswith(f"{t0 + 540}.000000")
            ] == ["[file]"]  # fmt: skip


def test_sniff_day_files_without_type_near_the_start(tmp_path: Path) -> None:
    from memory_pipeline.core.ingest.sources.auto import detect
    from memory_pipeline.core.ingest.sources.exports import ExportFile

    big = [{"blocks": [{"type": "rich_text", "text": "y" * 70_000}], "client_msg_id": "x",
            "text": "hi", "ts": "1672560000.000100", "type": "message", "user": "U01ANA"}]
    data = json.dumps(big, sort_keys=True).encode()
    assert detect(ExportFile.of_bytes("general/2023-01-01.json", data, "x")) == "slack"
    assert detect(ExportFile.of_bytes("general/notes.json", data, "x")) is None
    logs = b'{"logs": [{"user_id": "U1", "change_type": "added"}]}'
    assert detect(ExportFile.of_bytes("integration_logs.json", logs, "x")) == "slack"
    assert detect(ExportFile.of_bytes("other_logs.json", logs, "x")) is None
    canvases = b'[{"id": "F1", "created": 1672560000, "title": "Roadmap"}]'
    assert detect(ExportFile.of_bytes("canvases.json", canvases, "x")) == "slack"
    assert detect(ExportFile.of_bytes("users.json", b'[{"login": "x"}]', "x")) is None
    assert detect(ExportFile.of_bytes("2023-01-01.json", b'[{"date": "x"}]', "x")) is None
    numeric = b'[{"text": "hi", "ts": 1672560000.0001, "type": "message"}]'  # ts as a number
    assert detect(ExportFile.of_bytes("general/2023-01-01.json", numeric, "x")) == "slack"
