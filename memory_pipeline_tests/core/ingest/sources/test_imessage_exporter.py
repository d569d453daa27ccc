"""imessage-exporter's TXT and HTML output: date lines with the space-padded hour and read
receipts, senders, multi-line bodies, reactions and effect notes left out, attachments
typed, thread replies shown twice read once, announcements as system, no false positives."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from memory_pipeline.core.common import records as R
from memory_pipeline.core.ingest.sources.auto import detect, detected_kind
from memory_pipeline.core.ingest.sources.exports import ExportFile
from memory_pipeline_tests.core.ingest.sources._helpers import (
    EXPORTS,
    merged,
    messages,
    quarantined,
    read,
    reasons,
    reconciles,
)

IE = EXPORTS / "imessage_exporter"


def test_txt() -> None:
    recs = read("auto", IE / "txt")
    assert {detected_kind(r) for r in recs} == {"imessage_exporter"}
    chat = [m for m in messages(recs) if m.conversation_id == "imessage_4155550123"]
    assert [(m.local_ts.strftime("%d %H:%M:%S"), m.sender, m.type) for m in chat] == [
        ("17 17:29:42", "+14155550123", "text"), ("17 17:30:10", "Yuki", "text"),
        ("17 17:31:00", "+14155550123", "photo"), ("17 17:32:00", "Yuki", "text"),
        ("17 17:33:02", "Yuki", "text"), ("17 22:01:00", "+14155550123", "file"),
        ("18 00:05:00", "", "system"), ("18 00:06:00", "", "system")]  # fmt: skip
    assert chat[1].text == "Yes! Booked the 9:10 train" and chat[1].is_owner  # no reactions
    assert chat[2].text == "The view from the office"  # the attachment path is not text
    assert chat[3].text == "First line\nsecond line of the same message\n\nThird after a blank line"
    assert chat[4].text == "Gorgeous"  # without the reply note
    assert chat[5].text == ""  # "Sent with Confetti" is no text
    assert chat[6].text == "You renamed the conversation to Kyoto trip"
    assert chat[0].ts == dt.datetime(2022, 5, 17, 8, 29, 42, tzinfo=dt.UTC)  # Asia/Tokyo
    assert reasons(recs) == {R.R_DUPLICATE: 1, R.R_EMPTY_TEXT: 1}  # the reply shown twice
    dup = next(q for q in quarantined(recs) if q.reason == R.R_DUPLICATE)
    assert dup.source_line == 16 and dup.source_file == "+14155550123.txt"
    assert {m.conversation_id for m in messages(recs)} == {
        "imessage_4155550123", "imessage_orphaned", "imessage_ana"}  # fmt: skip


def test_txt_newer_versions() -> None:
    """Tapbacks: blocks, edited messages (the latest text), the deleted-message note,
    stickers, voice messages with their transcription, shared locations."""
    ms = messages(read("imessage_exporter", IE / "txt" / "Ana.txt"))
    assert [(m.type, m.sender, m.text) for m in ms] == [
        ("text", "Ana Costa", "Bom dia!"),
        ("text", "Yuki", "Nos vemos às 10"),
        ("system", "", "Ana Costa: message deleted"),
        ("sticker", "Yuki", ""),
        ("audio", "Ana Costa", "Transcription: chego em cinco minutos"),
        ("system", "", "Ana Costa: Started sharing location!")]  # fmt: skip
    assert ms[0].local_ts == dt.datetime(2024, 1, 2, 9, 0)


def test_html() -> None:
    recs = read("imessage_exporter", IE / "html")
    ms = messages(recs)
    every = ms
    ms = [m for m in ms if m.source_file == "Ana Costa.html"]
    assert [(m.sender, m.type, m.text) for m in ms] == [
        ("Ana Costa", "text", "Thread starter & question\nsecond line"),
        ("Ana Costa", "text", "Only shown in the thread"),  # a reply shown only nested
        ("", "system", "You renamed the conversation to Hello World!"),
        ("Yuki", "text", "A reply in the thread"),
        ("Ana Costa", "photo", "Look at this"), ("Yuki", "video", ""),
        ("Ana Costa", "file", "")]  # fmt: skip
    assert ms[3].is_owner and not ms[0].is_owner
    assert ms[4].local_ts == dt.datetime(2021, 10, 18, 9, 0)
    assert reasons(recs) == {R.R_DUPLICATE: 1}
    assert {m.conversation_id for m in every} == {"imessage_ana_costa", "imessage_5550001111"}
    newer = [m for m in every if m.conversation_id == "imessage_5550001111"]
    assert [(m.sender, m.text) for m in newer] == [
        ("Yuki", "Hello <world>\ntwo lines"), ("+15550001111", "Noon")]  # tapbacks no text
    assert newer[1].local_ts == dt.datetime(2022, 5, 17, 12, 1)  # 12 PM is noon
    result = merged("auto", IE)
    reconciles(result, len(read("auto", IE)))


def test_sniff_is_precise(tmp_path: Path) -> None:
    """No other export fixture is taken for imessage-exporter's, and its files for no other."""
    others = [p for p in EXPORTS.rglob("*") if p.is_file() and IE not in p.parents
              and p.suffix.lower() in (".txt", ".html", ".md", ".csv", ".json")]  # fmt: skip
    assert others
    for p in others:
        kind = detect(ExportFile.of_bytes(p.name, p.read_bytes(), p.stem))
        assert kind != "imessage_exporter", p
    kakao = "2024. 3. 1. 오후 3:05, 민지 : 안녕\n"
    assert detect(ExportFile.of_bytes("k.txt", kakao.encode(), "k")) != "imessage_exporter"
    page = b"<html><body><div class=\"message\"><span class=\"timestamp\">12:00</span></div>"
    assert detect(ExportFile.of_bytes("p.html", page, "p")) is None
    body_only = b"May 17, 2022  5:29:42 PM\nMay 17, 2022  5:29:43 PM\n"
    assert detect(ExportFile.of_bytes("d.txt", body_only, "d")) != "imessage_exporter"


def test_hostile_html_costs_its_file_only(tmp_path: Path) -> None:
    """A page nesting 20,000 elements, or cut off mid-tag, is read without a crash; a
    message whose element lost its date is a row, not a silent drop."""
    good = (IE / "html" / "+15550001111.html").read_bytes()
    deep = good.replace(b"<body>", b"<body>" + b"<div>" * 20_000)
    (tmp_path / "deep.html").write_bytes(deep)
    (tmp_path / "cut.html").write_bytes(good[: good.index(b"Noon") - 30])
    recs = read("imessage_exporter", tmp_path)
    assert {r.source_file for r in recs} == {"deep.html", "cut.html"}
    assert len([r for r in recs if r.source_file == "deep.html"]) == 2
    assert any(m.text == "Noon" for m in messages(recs) if m.source_file == "deep.html")
    reconciles(merged("imessage_exporter", tmp_path), len(recs))
