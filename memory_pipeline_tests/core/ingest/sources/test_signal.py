"""signal-export Markdown: seconds and the older minute stamps, quotes and further lines,
reactions removed, stickers and attachments typed, a later export merging, and a WhatsApp
export with the same stamp layout staying WhatsApp's under auto."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from memory_pipeline.core.common import records as R
from memory_pipeline.core.common.records import SourceError
from memory_pipeline.core.ingest.sources.auto import detected_kind
from memory_pipeline_tests.core.ingest.sources._helpers import (
    EXPORTS,
    merged,
    messages,
    quarantined,
    read,
    reasons,
    reconciles,
)

SIG = EXPORTS / "signal"
MARCH = SIG / "2024-03-05" / "Maria Silva" / "chat.md"


def test_chat_md() -> None:
    recs = read("signal", MARCH)
    ms = messages(recs)
    assert len(recs) == 7  # one per stamped line
    assert [(m.type, m.sender, m.is_owner) for m in ms] == [
        ("text", "Maria Silva", False), ("text", "Yuki", True), ("text", "Maria Silva", False),
        ("photo", "Yuki", True), ("sticker", "Maria Silva", False),
        ("photo", "Maria Silva", False)]  # fmt: skip
    assert ms[0].text == "Bom dia! Chegaste bem a Tóquio?"  # the reaction is no text
    assert ms[0].local_ts == dt.datetime(2024, 3, 1, 9, 0, 12)
    assert ms[2].text == "> Cheguei! Muito cansada 😴\nDescansa bem\ne liga-me amanhã"
    assert ms[3].text == "a vista do hotel" and ms[4].text == "😍" and ms[5].text == ""
    assert {m.conversation_id for m in ms} == {"signal_maria_silva"}
    assert reasons(recs) == {R.R_BAD_TIMESTAMP: 1}


def test_later_export_merges_and_old_stamps() -> None:
    result = merged("signal", SIG)
    n = sum(len(read("signal", p)) for p in SIG.rglob("chat.md"))
    reconciles(result, n)
    assert reasons(result)[R.R_DUPLICATE_EXPORT] == 2
    fam = [m for _, m in result.messages if m.conversation_id == "signal_familie"]
    assert [m.local_ts for m in fam][0] == dt.datetime(2024, 3, 3, 18, 0)
    assert fam[2].type == "file" and fam[2].text == "[file]"  # ingest names an empty media


def test_bad_input_and_auto(tmp_path: Path) -> None:
    (tmp_path / "chat.md").write_text("# Notes\n\nsome markdown\n", encoding="utf-8")
    wa = "[2024-03-01 12:00:00] Maria: Hej!\n[2024-03-01 12:01:00] Yuki: Hej hej\n"
    (tmp_path / "WhatsApp Chat - Maria.txt").write_text(wa, encoding="utf-8")
    (tmp_path / "wa.md").write_bytes(MARCH.read_bytes().replace(b"Descansa", b"Desc\xe1nsa"))
    recs = read("auto", tmp_path)
    kinds = {r.source_file: detected_kind(r) for r in recs}
    assert kinds["WhatsApp Chat - Maria.txt"] == "whatsapp" and kinds["wa.md"] == "signal"
    assert kinds["chat.md"] is None
    assert reasons([r for r in recs if r.source_file == "wa.md"]) == {
        R.R_ENCODING: 1, R.R_BAD_TIMESTAMP: 1}  # fmt: skip
    assert {q.reason for q in quarantined(read("signal", tmp_path)) if q.record_ref == "file"} == {
        R.R_NOT_AN_EXPORT}  # fmt: skip
    with pytest.raises(SourceError, match="signal-export"):
        read("signal", tmp_path / "chat.md")
