"""LINE for PC / Mac exports: no header, space-separated senders, bare continuation lines,
24:MM after midnight, re-exports merging with each other and with the mobile export."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import pytest

from memory_pipeline.core.common import records as R
from memory_pipeline.core.common.records import SourceError
from memory_pipeline.core.ingest.sources.line_pc import clock_of, conversation_id
from memory_pipeline_tests.core.ingest.sources._helpers import (
    EXPORTS,
    merged,
    messages,
    quarantined,
    read,
    reasons,
    reconciles,
)

PC = EXPORTS / "line_pc"
JA = PC / "[LINE] 健太.txt"
EN = PC / "Chat history with Maria Silva.txt"
MAC = PC / "mac_陳小明.txt"


@pytest.mark.parametrize(
    ("field", "want"),
    [("24:53", (24, 53)), ("09:05", (9, 5)), ("午後9:05", (21, 5)), ("下午1:15", (13, 15)),
     ("午前12:30", (0, 30)), ("25:00", None), ("24:60", None)],
)  # fmt: skip
def test_clock(field: str, want: tuple[int, int] | None) -> None:
    assert clock_of(field) == want


def test_japanese_windows_export() -> None:
    ms = messages(read("line_pc", JA))
    got = [(m.local_ts, m.sender, m.type, m.text) for m in ms]
    d1, d2 = dt.date(2021, 1, 1), dt.date(2021, 1, 2)
    assert got[:4] == [
        (dt.datetime.combine(d1, dt.time(23, 58)), "健太", "text", "あけましておめでとう！"),
        (dt.datetime.combine(d1, dt.time(23, 59)), "田中 ゆき", "text",
         "今年もよろしく\nまだ起きてる？\n\n明日は初詣に行こう"),
        # 24:03 after 23:59 under the 1 January line: the next morning
        (dt.datetime.combine(d2, dt.time(0, 3)), "健太", "sticker", "[スタンプ]"),
        (dt.datetime.combine(d2, dt.time(0, 5)), "田中 ゆき", "text", "うん"),
    ]  # fmt: skip
    assert [m.type for m in ms[4:7]] == ["photo", "call", "text"]
    assert ms[6].text == "10:30 駅で"  # a text that starts with a time is not a new message
    assert {m.sender for m in ms if m.is_owner} == {"田中 ゆき"}  # via owner_aliases
    assert {m.conversation_id for m in ms} == {"健太"}
    assert not quarantined(read("line_pc", JA))


def test_english_export_names_with_spaces_and_events() -> None:
    ms = messages(read("line_pc", EN))
    assert ms[0].local_ts == dt.datetime(2021, 1, 1, 0, 10)  # 24:10 opens the day: same date
    assert {m.sender for m in ms} == {"Maria Silva", "Yuki Tanaka", ""}
    events = [m.text for m in ms if m.type == "system"]
    assert events == ["Maria Silva joined the group", "Maria Silva unsent a message."]
    assert ms[1].text == "Happy new year Maria\nsee you soon"
    assert {m.conversation_id for m in ms} == {"maria_silva"}


def test_mac_tab_layout_chinese_clock() -> None:
    ms = messages(read("line_pc", MAC))
    assert [(m.local_ts.hour, m.local_ts.minute) for m in ms] == [
        (10, 5), (13, 15), (13, 16), (23, 59), (0, 30)]  # fmt: skip
    assert ms[2].text == "謝謝\n第二行" and ms[2].is_owner
    assert ms[3].type == "system" and ms[3].sender == ""


def test_reexport_overlap_merges(tmp_path: Path) -> None:
    """A later PC export of the same chat (another file name) adds only its new messages;
    the genuine repeat (了解 twice in one minute) stays two messages."""
    first = JA.read_text(encoding="utf-8")
    later = first.split("2021.1.2")[0].replace("\r\n", "\n")  # older part, LF endings
    later += "2021.1.2 土曜日\n12:03 田中 ゆき 了解\n12:03 田中 ゆき 了解\n13:00 健太 またね\n"
    shutil.copy(JA, tmp_path / "[LINE] 健太.txt")
    (tmp_path / "健太とのトーク.txt").write_text(later, encoding="utf-8")
    result = merged("line_pc", tmp_path)
    n_first = len(messages(read("line_pc", JA)))
    n_later = len(messages(read("line_pc", tmp_path / "健太とのトーク.txt")))
    reconciles(result, n_first + n_later)
    assert len(result.messages) == n_first + 1  # only 13:00 またね is new
    assert reasons(result) == {R.R_DUPLICATE_EXPORT: n_later - 1}
    assert sum(m.text == "了解" for _, m in result.messages) == 2


def test_pc_and_mobile_exports_of_one_chat_merge(tmp_path: Path) -> None:
    result = merged("auto", EXPORTS / "auto" / "line")
    texts = sorted(m.text for _, m in result.messages)
    assert texts.count("Are you free next Saturday?") == 1
    assert "See you Saturday" in texts  # only in the PC export
    assert reasons(result) == {R.R_DUPLICATE_EXPORT: 3}
    assert {m.conversation_id for _, m in result.messages} == {"maria"}


def test_bad_input(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_bytes(
        "stray line\n2021.1.1 金曜日\n10:00 健太 ok\n25:61 健太 what\n".encode()
        + b"10:01 \xff\xfe broken\n"
        + "24:99 健太 what\n10:02 健太 fine\n".encode()
    )
    recs = read("line_pc", tmp_path)
    assert [m.text for m in messages(recs)] == ["ok\n25:61 健太 what", "fine"]
    # 25:61 right after a message continues it (PC exports do not quote multi-line text);
    # after the broken line there is no message to continue: a bad time
    assert reasons(recs) == {R.R_UNPARSEABLE_LINE: 1, R.R_ENCODING: 1, R.R_BAD_TIMESTAMP: 1}
    assert len(recs) == 5
    (tmp_path / "notes.txt").write_text("just some notes\n", encoding="utf-8")
    recs = read("line_pc", tmp_path)
    assert [q.reason for q in quarantined(recs) if q.source_file == "notes.txt"] == [
        R.R_NOT_AN_EXPORT]  # fmt: skip
    with pytest.raises(SourceError, match="no LINE date line"):
        read("line_pc", tmp_path / "notes.txt")


def test_conversation_id_from_file_names() -> None:
    assert conversation_id("[LINE] 健太") == conversation_id("健太とのトーク履歴") == "健太"
    assert conversation_id("Chat history with Maria") == "maria"
