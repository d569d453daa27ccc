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


SH = EXPORTS / "signal_html"


def test_index_html() -> None:
    """sigexport's HTML page, older (date/time spans, prettified) and newer (day dividers,
    <time datetime>, grouped follow-ups without meta, call events, deleted messages,
    "not exported" placeholders); an index.html beside its chat.md is one file row."""
    recs = read("auto", SH)
    assert {detected_kind(r) for r in recs} == {"signal"}
    ms = messages(recs)
    ana = [m for m in ms if m.conversation_id == "signal_ana_costa"]
    assert [(m.type, m.sender, m.is_owner, m.text) for m in ana] == [
        ("text", "Ana Costa", False, "Vamos à praia amanhã?\nLeva o guarda-sol"),
        ("text", "Yuki", True, "Sim! Às 10h"),  # "Me"; the quote and reactions are no text
        ("photo", "Ana Costa", False, ""), ("sticker", "Ana Costa", False, "😎"),
        ("audio", "Yuki", True, "")]  # fmt: skip
    assert ana[0].local_ts == dt.datetime(2023, 2, 10, 18, 4, 5)
    praia = [m for m in ms if m.conversation_id == "signal_grupo_praia"]
    assert [(m.local_ts.strftime("%d %H:%M:%S"), m.sender, m.type, m.ts_inferred)
            for m in praia] == [
        ("01 14:00:00", "Bea", "text", False), ("01 14:00:00", "Bea", "text", True),
        ("01 14:03:10", "Yuki", "text", False), ("01 15:00:00", "", "call", False),
        ("02 09:00:00", "", "system", False), ("02 09:05:00", "Caio", "photo", False),
        ("02 09:06:00", "Caio", "file", False)]  # fmt: skip
    assert praia[2].text == "Me! https://example.org/ball"
    assert praia[3].text == "Incoming voice call (accepted)"
    assert praia[4].text == "Bea: This message was deleted"
    assert praia[5].text == "pic"
    kenta = [r for r in recs if r.source_file.startswith("Kenta/")]
    assert [getattr(r, "reason", "msg") for r in kenta] == ["msg", "msg", R.R_DUPLICATE_EXPORT]
    assert reasons(recs) == {R.R_EMPTY_TEXT: 1, R.R_DUPLICATE_EXPORT: 1}
    reconciles(merged("auto", SH), len(recs))


def test_html_sniff_is_precise(tmp_path: Path) -> None:
    from memory_pipeline.core.ingest.sources.auto import detect
    from memory_pipeline.core.ingest.sources.exports import ExportFile

    ie = EXPORTS / "imessage_exporter" / "html" / "Ana Costa.html"
    assert detect(ExportFile.of_bytes(ie.name, ie.read_bytes(), ie.stem)) == "imessage_exporter"
    page = b"<html><body><div class='msgbox'><p class='body'>hi</p></div></body></html>"
    assert detect(ExportFile.of_bytes("x.html", page, "x")) is None
    undated = b"<html><body><div class='msg'><p class='body'>hi</p></div></body></html>"
    assert detect(ExportFile.of_bytes("u.html", undated, "u")) == "signal"
    (tmp_path / "index.html").write_bytes(undated)
    rows = read("signal", tmp_path)
    assert [(q.reason, q.record_ref) for q in quarantined(rows)] == [
        (R.R_NOT_AN_EXPORT, "file")]  # one row for the file, not one per element
    chatgpt = b"<html><body><div class='message'><p>hi</p></div></body></html>"
    assert detect(ExportFile.of_bytes("chat.html", chatgpt, "chat")) is None
