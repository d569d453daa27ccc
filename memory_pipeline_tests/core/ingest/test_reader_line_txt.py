"""line_txt reader: JA/EN exports and their variants, bad lines, encodings, the bundled sample."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from memory_pipeline.core.common.records import (
    MAX_MESSAGE_CHARS,
    MESSAGE_TYPES,
    Message,
    QuarantineRecord,
    SourceError,
)
from memory_pipeline.core.ingest.sources import SourceSpec, read_source
from memory_pipeline.core.ingest.sources.line_txt import (
    conversation_id_from_stem,
    parse_clock,
    parse_date_line,
    read_line_txt,
)
from memory_pipeline_tests.paths import FIXTURES, ROOT

SAMPLE = ROOT / "data" / "sample" / "line_txt"
FIX = FIXTURES / "line_txt"
D = dt.date
T = dt.datetime


def spec_for(path: Path, tz: str = "Asia/Tokyo", owner: str = "Yuki") -> SourceSpec:
    return SourceSpec(name="t_txt", kind="line_txt", path=path, timezone=tz, owner=owner)


def read(path: Path, dates: set[dt.date] | None = None, **kw: str) -> list:
    return list(read_source(spec_for(path, **kw), dates))


def summary(recs: list) -> list[tuple]:
    """(line, local time or partition date, sender or reason, type or '', text or '')."""
    out = []
    for r in recs:
        if isinstance(r, Message):
            out.append((r.source_line, r.local_ts, r.sender, r.type, r.text))
        else:
            out.append((r.source_line, r.partition_date, r.reason, "", ""))
    return out


# -- unit helpers -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "want"),
    [
        ("19:02", dt.time(19, 2)),
        ("9:02", dt.time(9, 2)),
        ("7:05 PM", dt.time(19, 5)),
        ("7:05pm", dt.time(19, 5)),
        ("12:00 AM", dt.time(0, 0)),
        ("12:30 PM", dt.time(12, 30)),
        ("AM 9:05", dt.time(9, 5)),
        ("午前9:05", dt.time(9, 5)),
        ("午後9:05", dt.time(21, 5)),
        ("午後 9:05", dt.time(21, 5)),
        ("午前0:05", dt.time(0, 5)),
        ("午後0:30", dt.time(12, 30)),
        ("24:00", None),
        ("9:60", None),
        ("13:00 PM", None),
        ("午後9:05 PM", None),
        ("19.02", None),
        ("", None),
    ],
)
def test_parse_clock(field: str, want: dt.time | None) -> None:
    assert parse_clock(field) == want


@pytest.mark.parametrize(
    ("line", "want"),
    [
        ("2024/03/05(火)", D(2024, 3, 5)),
        ("2024/3/5（火）", D(2024, 3, 5)),
        ("2024/03/05(Tue)", D(2024, 3, 5)),
        ("2024.03.05 Tuesday", D(2024, 3, 5)),
        ("2024.03.05 火曜日", D(2024, 3, 5)),
        ("2024-03-05", D(2024, 3, 5)),
        ("Tue, 3/5/2024", D(2024, 3, 5)),
        ("Tuesday, 3/5/2024", D(2024, 3, 5)),
        ("Tue, 5/3/2024", D(2024, 3, 5)),  # day-first: the weekday settles it
        ("Fri, 5/3/2024", D(2024, 5, 3)),
        ("Sat, 3/25/2024", D(2024, 3, 25)),  # no valid day-first reading; weekday not checked
        ("2024/02/30(金)", None),
        ("2024/03/05 foo bar", None),
        ("保存日時：2024/03/15 22:10", None),
        ("Tue, 3/5", None),
    ],
)
def test_parse_date_line(line: str, want: dt.date | None) -> None:
    assert parse_date_line(line) == want


@pytest.mark.parametrize(
    ("stem", "want"),
    [
        ("family_group", "family_group"),
        ("Sam", "sam"),
        ("[LINE] 家族", "家族"),
        ("a b (1)", "a_b_1"),
    ],
)
def test_conversation_id_from_stem(stem: str, want: str) -> None:
    assert conversation_id_from_stem(stem) == want


# -- variants ---------------------------------------------------------------------------------


def test_japanese_export_variants() -> None:
    recs = read(FIX / "ja_variants.txt")
    assert all(isinstance(r, Message) for r in recs)
    assert {(r.conversation_id, r.contact_id) for r in recs} == {("大学のみんな", "大学のみんな")}
    multi = '起きてるよ\n19:02\tこれは時刻っぽいけど本文\n2024/03/06(水)\n\n"引用"も入ってる'
    assert summary(recs) == [
        (5, T(2024, 3, 5, 23, 50), "健太", "text", "まだ起きてる？"),
        (6, T(2024, 3, 5, 23, 58), "Yuki", "text", multi),
        (11, T(2024, 3, 5, 23, 59), "健太", "sticker", "[スタンプ]"),
        (14, T(2024, 3, 6, 0, 5), "健太", "photo", "[写真]"),
        (15, T(2024, 3, 6, 0, 6), "健太", "video", "[動画]"),
        (16, T(2024, 3, 6, 0, 7), "健太", "file", "[ファイル]"),
        (17, T(2024, 3, 6, 0, 8), "健太", "audio", "[ボイスメッセージ]"),
        (18, T(2024, 3, 6, 0, 9), "健太", "location", "[位置情報]"),
        (19, T(2024, 3, 6, 0, 10), "健太", "contact", "[連絡先]"),
        (20, T(2024, 3, 6, 0, 11), "健太", "call", "☎ 通話時間 0:42"),
        (21, T(2024, 3, 6, 0, 12), "健太", "text", "明日通話しよう"),
        (22, T(2024, 3, 6, 0, 13), "", "system", "健太がアルバム「旅行」を作成しました"),
        (23, T(2024, 3, 6, 0, 14), "", "system", "健太がメッセージの送信を取り消しました"),
        (24, T(2024, 3, 6, 12, 30), "美咲", "text", "お昼！"),
        (27, T(2024, 3, 7, 9, 0), "美咲", "text", "おはよう"),
    ]
    assert [r.source_order for r in recs] == list(range(15))
    assert [r.is_owner for r in recs][:3] == [False, True, False]
    assert recs[0].ts == dt.datetime(2024, 3, 5, 14, 50, tzinfo=dt.UTC)


def test_english_export_variants_with_bom_and_crlf() -> None:
    recs = read(FIX / "en_variants.txt")
    assert all(isinstance(r, Message) for r in recs)
    assert {(r.conversation_id, r.contact_id) for r in recs} == {("maria", "Maria")}
    assert summary(recs) == [
        (5, T(2024, 3, 5, 19, 2), "Maria", "text", "Are you free next Saturday?"),
        (6, T(2024, 3, 5, 19, 5), "Yuki", "sticker", "[Sticker]"),
        (7, T(2024, 3, 5, 0, 0), "Maria", "text", "midnight exactly"),
        (8, T(2024, 3, 5, 12, 30), "Maria", "text", "half past noon"),
        (9, T(2024, 3, 5, 9, 5), "Yuki", "text", "no space before AM"),
        (10, T(2024, 3, 5, 21, 6), "Yuki", "text", "prefix PM"),
        (11, T(2024, 3, 5, 19, 9), "Maria", "text", "quoted on one line"),
        (12, T(2024, 3, 5, 19, 10), "Maria", "text", '"Hi" she said'),
        (13, T(2024, 3, 5, 19, 11), "Maria", "text", 'a single "quoted" line'),
        (14, T(2024, 3, 5, 19, 12), "Yuki", "photo", "[Photo]"),
        (15, T(2024, 3, 5, 19, 13), "Yuki", "audio", "[Voice message]"),
        (16, T(2024, 3, 5, 19, 14), "Maria", "call", "☎ Missed call"),
        (19, T(2024, 3, 5, 8, 0), "Maria", "text", "day-first date, the weekday settles it"),
        (22, T(2024, 3, 8, 8, 0), "Maria", "text", "dotted date line"),
        (24, T(2024, 3, 9, 8, 0), "Maria", "text", "ymd with English weekday"),
    ]
    assert all("\r" not in r.text and "\ufeff" not in r.text for r in recs)
    assert [r.source_ref for r in recs][:2] == ["en_variants.txt:5", "en_variants.txt:6"]


def test_utf16_export() -> None:
    (m,) = read(FIX / "utf16.txt")
    assert (m.source_line, m.local_ts, m.text) == (4, T(2024, 3, 8, 10, 0), "utf-16 works")


# -- bad input --------------------------------------------------------------------------------


def test_unparseable_lines_are_quarantined_one_each() -> None:
    recs = read(FIX / "bad_lines.txt")
    day = D(2024, 3, 8)
    assert summary(recs) == [
        (1, None, "unparseable_line", "", ""),  # junk before the header
        (2, None, "unparseable_line", "", ""),  # a message before any date line
        (7, T(2024, 3, 8, 10, 0), "Kim", "text", "good line"),
        (8, day, "unparseable_line", "", ""),
        (9, day, "bad_timestamp", "", ""),  # 25:00 is shaped like a time but out of range
        (10, T(2024, 3, 8, 10, 5), "Kim", "text", "good again"),
        # a quote that never closes is literal text and cannot swallow the next message
        (11, T(2024, 3, 8, 10, 6), "Kim", "text", '"an unclosed quote that never ends'),
        (12, T(2024, 3, 8, 10, 7), "Kim", "text", "after the stray quote"),
    ]
    # positions count every record, so fixing a bad line later shifts no other message
    assert [r.source_order for r in recs if isinstance(r, Message)] == [2, 5, 6, 7]
    q = recs[3]
    assert (q.record_ref, q.conversation_id, q.raw) == (
        "line 8",
        "kim",  # the header's chat name, not the file name
        "this line fits no pattern",
    )
    assert "fits no pattern" not in q.detail
    assert recs[2].contact_id == "Kim"


def test_invalid_utf8_quarantines_only_the_affected_record() -> None:
    recs = read(FIX / "bad_utf8.txt")
    day = D(2024, 3, 8)
    assert summary(recs) == [
        (4, day, "encoding_error", "", ""),
        (5, T(2024, 3, 8, 10, 1), "Kim", "text", "fine"),
        (6, day, "encoding_error", "", ""),  # multi-line message with a bad continuation line
        (9, day, "encoding_error", "", ""),
        (10, T(2024, 3, 8, 10, 3), "Kim", "text", "last"),
    ]
    multi = recs[2]
    assert multi.raw.count("\n") == 2 and "line 7" in multi.detail
    assert all(
        "caf" not in r.detail and "multi" not in r.detail for r in (recs[0], recs[2], recs[3])
    )


def test_not_a_line_export_is_a_source_error() -> None:
    with pytest.raises(SourceError, match=r"not_line\.txt is not a LINE chat export"):
        read(FIX / "not_line.txt")


def test_missing_path_empty_dir_and_bad_utf16(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="does not exist"):
        list(read_line_txt(spec_for(tmp_path / "nope.txt"), None))
    (tmp_path / "notes.md").write_text("x", encoding="utf-8")
    with pytest.raises(SourceError, match=r"no \*\.txt LINE exports"):
        read(tmp_path)
    broken = tmp_path / "broken.txt"
    broken.write_bytes(b"\xff\xfe" + "[LINE] x".encode("utf-16-le") + b"\x00")
    with pytest.raises(SourceError, match="broken.txt starts with a UTF-16 BOM"):
        read(broken)


# -- bundled sample ---------------------------------------------------------------------------


def test_sample_reads_without_quarantine_one_record_per_message_line() -> None:
    recs = read(SAMPLE)
    assert recs and all(isinstance(r, Message) for r in recs)
    # Independent count: every message starts on a line with a tab; continuation lines have none.
    lines = {p.name: p.read_text(encoding="utf-8").split("\n") for p in SAMPLE.glob("*.txt")}
    assert len(recs) == sum(sum("\t" in s for s in ls) for ls in lines.values())
    assert {(r.conversation_id, r.contact_id) for r in recs} == {
        ("家族", "家族"),  # from the header 「家族のトーク履歴」, not family_group.txt
        ("sam", "Sam"),
    }
    for r in recs:
        raw = lines[r.source_file][r.source_line - 1]
        assert r.source_ref == f"{r.source_file}:{r.source_line}"
        assert raw.split("\t")[1] == r.sender and parse_clock(raw.split("\t")[0]) is not None
        assert r.type in MESSAGE_TYPES and r.text.strip() and len(r.text) <= MAX_MESSAGE_CHARS
        assert r.is_owner == (r.sender == "Yuki")
        assert D(2024, 3, 1) <= r.local_date <= D(2024, 3, 14)
    assert {"sticker", "photo", "call", "system"} <= {r.type for r in recs}
    sam = [r for r in recs if r.conversation_id == "sam"]
    packing = next(r for r in sam if r.text.startswith("Packing list"))
    assert packing.text.count("\n") == 4 and 'the "blue" one' in packing.text
    late, after = sam[-3], sam[-2]  # 11:56 PM on 3/13, then 12:03 AM on 3/14
    assert late.local_date == D(2024, 3, 13) and after.local_date == D(2024, 3, 14)
    assert dt.timedelta(0) < after.ts - late.ts < dt.timedelta(minutes=10)


def test_deterministic_and_dates_hint_keeps_positions() -> None:
    full = read(SAMPLE)
    assert full == read(SAMPLE)
    want = {D(2024, 3, 9)}
    assert read(SAMPLE, want) == [r for r in full if r.local_date in want]
    # records of unknown date are always yielded: the caller decides where they go
    bad = read(FIX / "bad_lines.txt", {D(2024, 3, 9)})
    assert [(r.source_line, r.partition_date) for r in bad] == [(1, None), (2, None)]


def test_dropped_nothing_on_a_large_export(tmp_path: Path) -> None:
    """A 6,000-message export reads completely (and quickly: no per-line regex compilation)."""
    body = ["[LINE] Chat history with Big", ""]
    for day in range(1, 31):
        body.append(D(2024, 3, day).strftime("%a, %-m/%-d/%Y"))
        body.extend(
            f"{h}:{m:02d}\tBig\tmessage {day}-{h}-{m}" for h in range(10) for m in range(20)
        )
    (tmp_path / "big.txt").write_text("\n".join(body), encoding="utf-8")
    recs = read(tmp_path)
    assert len(recs) == 6000 and all(isinstance(r, Message) for r in recs)
    assert not any(isinstance(r, QuarantineRecord) for r in recs)
    assert recs[-1].source_order == 5999
