"""Messenger "Download your information" JSON: mojibake repaired, newest-first files split
over message_N, media/sticker/share/call/unsent typed, reactions ignored, a later export of
the same thread merging, a group thread, bad input."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from memory_pipeline.core.common import records as R
from memory_pipeline.core.common.records import SourceError
from memory_pipeline.core.ingest.sources.auto import detected_kind
from memory_pipeline.core.ingest.sources.messenger import fix_mojibake
from memory_pipeline_tests.core.ingest.sources._helpers import (
    EXPORTS,
    merged,
    messages,
    quarantined,
    read,
    reasons,
    reconciles,
)

FB = EXPORTS / "messenger"
MARCH = FB / "facebook-yukitanaka-2024-03-02"
THREAD = "your_facebook_activity/messages/inbox/mariamuller_10158123456789012"


def _count(root: Path) -> int:
    return sum(len(json.loads(p.read_text("utf-8"))["messages"]) for p in root.rglob("*.json"))


def test_thread_split_newest_first() -> None:
    recs = read("messenger", MARCH)
    assert len(recs) == _count(MARCH) == 9
    ms = sorted(messages(recs), key=lambda m: m.ts)
    assert ms[0].text == "Hallo Yuki! Bist du schon in München? 😊"  # mojibake repaired
    assert ms[0].sender == "Maria Müller" and ms[0].contact_id == "Maria Müller"
    assert ms[0].ts == dt.datetime(2024, 3, 1, tzinfo=dt.UTC)
    assert ms[0].local_ts == dt.datetime(2024, 3, 1, 9, 0)
    assert [m.type for m in ms] == [
        "text", "text", "photo", "text", "sticker", "text", "call", "system", "text"]  # fmt: skip
    assert ms[1].is_owner and ms[1].sender == "Yuki Tanaka"  # via owner_aliases
    assert ms[5].text == "Maria sent a link.\nhttps://maps.example.org/cafe-luitpold"
    assert ms[6].text == "call (95 s)" and ms[7].text == "Maria Müller: message unsent"
    assert ms[8].text == "ありがとう！また明日 👋"  # its reaction is no message
    assert {m.conversation_id for m in ms} == {"messenger_mariamuller_10158123456789012"}


def test_reexport_merges_and_group() -> None:
    result = merged("messenger", FB)
    reconciles(result, _count(FB))
    r = reasons(result)
    assert r[R.R_DUPLICATE_EXPORT] == 9 and r[R.R_EMPTY_TEXT] == 1
    thread = [m for _, m in result.messages if m.conversation_id.startswith("messenger_maria")]
    assert len(thread) == 10 and thread[-1].sender == "Facebook User"
    group = [m for _, m in result.messages if m.conversation_id.startswith("messenger_viaje")]
    assert {m.contact_id for m in group} == {"Viaje a Barcelona 🇪🇸"}
    assert [m.type for m in group] == ["text", "text", "text", "video", "audio", "system"]
    assert group[-1].text == "Jonas Weber left the group." and group[-1].sender == ""


def test_fix_mojibake() -> None:
    assert fix_mojibake("M\u00c3\u00bcller \u00f0\u009f\u0098\u00b1") == "Müller 😱"
    assert fix_mojibake("Müller") == "Müller"  # already right: does not round-trip, kept
    assert fix_mojibake("日本") == "日本"
    assert fix_mojibake({"a": ["\u00c3\u00a9"]}) == {"a": ["é"]}


def test_bad_input(tmp_path: Path) -> None:
    src = MARCH / THREAD / "message_1.json"
    (tmp_path / "message_1.json").write_bytes(src.read_bytes()[:300])
    (tmp_path / "message_2.json").write_text('{"participants": [], "messages": 3}', "utf-8")
    (tmp_path / "conversations.json").write_bytes(
        (EXPORTS / "claude" / "2024-03-01" / "conversations.json").read_bytes()
    )
    bad = src.read_bytes().replace(b"sent a link.", b"sent a link\xe9")  # a cp1252 byte
    (tmp_path / "message_3.json").write_bytes(bad)
    recs = read("messenger", tmp_path)
    files = {q.source_file: q.reason for q in quarantined(recs) if q.record_ref == "file"}
    assert files == {"message_1.json": R.R_MALFORMED_JSON, "message_2.json": R.R_NOT_AN_EXPORT,
                     "conversations.json": R.R_NOT_AN_EXPORT}  # fmt: skip
    third = [r for r in recs if r.source_file == "message_3.json"]
    assert len(third) == 4 and reasons(third) == {R.R_ENCODING: 1}
    with pytest.raises(SourceError, match="Meta"):
        read("messenger", tmp_path / "message_2.json")
    assert {detected_kind(r) for r in read("auto", FB)} == {"messenger"}
