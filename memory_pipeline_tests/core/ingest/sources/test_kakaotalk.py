"""KakaoTalk exports: Android and iOS Korean, English (three stamp orders), Windows/PC date
lines with [Name] [오후 H:MM], Mac CSV; placeholders, events, the exporter 회원님/you as
owner, multi-line messages, an Android and an iOS export of one chat merging, bad input."""

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

KK = EXPORTS / "kakaotalk"
ANDROID = KK / "KakaoTalk_20240305_1422_33_123_민지.txt"
IOS = KK / "Talk_2024.3.5 14:40-1.txt"
EN = KK / "KakaoTalk_Chats_2024-03-05_Jonas.txt"


def test_android_korean() -> None:
    recs = read("kakaotalk", ANDROID)
    ms = messages(recs)
    assert len(recs) == 9  # stamped lines with a sender or an event; headers are none
    assert [(m.type, m.sender, m.is_owner) for m in ms] == [
        ("text", "민지", False), ("text", "회원님", True), ("photo", "민지", False),
        ("text", "민지", False), ("sticker", "회원님", True), ("text", "민지", False),
        ("system", "", False), ("system", "", False)]  # fmt: skip
    assert ms[3].text == "여기서 만나자\n두 번째 줄도 있어"
    assert ms[0].local_ts == dt.datetime(2024, 3, 1, 15, 5)
    assert ms[0].ts == dt.datetime(2024, 3, 1, 6, 5, tzinfo=dt.UTC)  # Asia/Tokyo = KST
    assert ms[5].local_ts == dt.datetime(2024, 3, 2, 0, 3)  # 오전 12:03
    assert ms[7].text == "민지님이 나갔습니다."
    assert {m.conversation_id for m in ms} == {"kakaotalk_민지"}
    assert reasons(recs) == {R.R_BAD_TIMESTAMP: 1}  # month 13


def test_english_pc_and_mac() -> None:
    en = messages(read("kakaotalk", EN))
    assert [m.local_ts.strftime("%d %H:%M") for m in en] == [
        "01 15:05", "01 15:06", "01 15:07", "01 15:08", "02 09:00", "02 09:01",
        "02 09:02"]  # fmt: skip
    assert en[1].is_owner and en[2].type == "photo" and en[3].type == "system"
    assert en[6].type == "file" and en[6].text == "slides.pdf"
    pc = messages(read("kakaotalk", KK / "pc"))
    assert [(m.local_ts, m.sender) for m in pc][:2] == [
        (dt.datetime(2024, 3, 1, 15, 5), "민지"),
        (dt.datetime(2024, 3, 1, 15, 6), "Yuki")]  # fmt: skip
    assert pc[1].is_owner and pc[2].text == "월요일 좋은 아침\n여러 줄 메시지"
    assert pc[3].type == "file" and pc[3].text == "회의록.docx"
    mac = read("kakaotalk", KK / "mac")
    assert [m.text for m in messages(mac)] == ["내일 시간 돼?", "응!\n몇 시?", ""]
    assert messages(mac)[0].local_ts == dt.datetime(2024, 3, 1, 15, 5, 12)  # seconds
    assert messages(mac)[0].conversation_id == "kakaotalk_민지"
    assert reasons(mac) == {R.R_BAD_TIMESTAMP: 1}


def test_android_and_ios_exports_merge(tmp_path: Path) -> None:
    for p in (ANDROID, IOS):
        (tmp_path / p.name).write_bytes(p.read_bytes())
    result = merged("kakaotalk", tmp_path)
    n = len(read("kakaotalk", ANDROID)) + len(read("kakaotalk", IOS))
    reconciles(result, n)
    assert reasons(result)[R.R_DUPLICATE_EXPORT] == 6  # 3/1 and 3/2 are in both
    assert len([m for _, m in result.messages]) == 8 + 2


def test_bad_input(tmp_path: Path) -> None:
    data = ANDROID.read_bytes().replace("잘 자~".encode(), b"\xc0\xc1 \xc0~")
    (tmp_path / "a.txt").write_bytes(data)
    (tmp_path / "b.txt").write_text("just some notes\nnothing here\n", encoding="utf-8")
    (tmp_path / "c.txt").write_text('{"messages": []}', encoding="utf-8")
    recs = read("kakaotalk", tmp_path)
    a = [r for r in recs if r.source_file == "a.txt"]
    assert len(a) == 9 and reasons(a) == {R.R_ENCODING: 1, R.R_BAD_TIMESTAMP: 1}
    files = {q.source_file: q.reason for q in quarantined(recs) if q.record_ref == "file"}
    assert files == {"b.txt": R.R_NOT_AN_EXPORT, "c.txt": R.R_NOT_AN_EXPORT}
    with pytest.raises(SourceError, match="KakaoTalk"):
        read("kakaotalk", tmp_path / "b.txt")
    assert {detected_kind(r) for r in read("auto", KK)} == {"kakaotalk"}
