"""Telegram Desktop result.json: one chat and a whole account, entity-list text, service
messages, date_unixtime over date, re-exports merging, bad input."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from memory_pipeline.core.common import records as R
from memory_pipeline.core.common.records import SourceError
from memory_pipeline.core.ingest.sources.auto import detected_kind
from memory_pipeline.core.ingest.sources.telegram import flatten_text
from memory_pipeline_tests.core.ingest.sources._helpers import (
    EXPORTS,
    merged,
    messages,
    quarantined,
    read,
    reasons,
    reconciles,
)

TG = EXPORTS / "telegram"
ONE = TG / "ChatExport_2024-03-01" / "result.json"


def test_single_chat() -> None:
    ms = messages(read("telegram", ONE))
    assert ms[0].type == "system" and ms[0].sender == ""
    assert ms[1].ts == dt.datetime(2024, 3, 1, 0, 1, tzinfo=dt.UTC)  # from date_unixtime
    assert ms[1].local_ts == dt.datetime(2024, 3, 1, 9, 1)
    assert ms[2].text == "Look at https://example.org/trip please" and ms[2].is_owner
    assert [m.type for m in ms[3:6]] == ["photo", "sticker", "video"]
    assert ms[4].text == "😂" and ms[5].text == "Caption of a video"
    assert ms[6].local_ts == dt.datetime(2024, 3, 5, 23, 30)  # no date_unixtime: date in tz
    assert ms[1].source_ref == "telegram:4242/2"
    assert {m.conversation_id for m in ms} == {"telegram_4242"}


def test_full_account_and_bad_entries() -> None:
    recs = read("telegram", TG / "account" / "result.json", owner_aliases=[])
    ms = messages(recs)
    assert {m.conversation_id for m in ms} == {"telegram_5151", "telegram_111", "telegram_777"}
    # the account's own user id marks the owner even under another display name
    assert [m.is_owner for m in ms if m.conversation_id == "telegram_5151"] == [False, True]
    assert reasons(recs) == {R.R_DUPLICATE: 1, R.R_BAD_TIMESTAMP: 1, R.R_MISSING_TIMESTAMP: 1}


def test_reexport_overlap_merges() -> None:
    a = len(read("telegram", ONE))
    b = len(read("telegram", TG / "ChatExport_2024-03-09" / "result.json"))
    result = merged("telegram", TG)
    total = sum(len(read("telegram", p)) for p in sorted(TG.glob("*/result.json")))
    reconciles(result, total)
    chat = [m for _, m in result.messages if m.conversation_id == "telegram_4242"]
    assert len(chat) == 11  # ids 1..11, each once
    assert reasons(result)[R.R_DUPLICATE_EXPORT] == a + b - 11


def test_flatten_text() -> None:
    assert flatten_text(["a ", {"type": "bold", "text": "b"}, 3]) == "a b"
    assert flatten_text(None) == ""


def test_bad_input(tmp_path: Path) -> None:
    (tmp_path / "result.json").write_text('{"name": "x", "messages": [', encoding="utf-8")
    (tmp_path / "other.json").write_text('{"conversations": []}', encoding="utf-8")
    recs = read("telegram", tmp_path)
    assert {q.source_file: q.reason for q in recs} == {
        "result.json": R.R_MALFORMED_JSON, "other.json": R.R_NOT_AN_EXPORT}  # fmt: skip
    with pytest.raises(SourceError, match="not valid JSON"):
        read("telegram", tmp_path / "result.json")


TV = EXPORTS / "telegram_variants"


def test_account_export_minimal_shapes() -> None:
    """"Export Telegram data" without personal_information (about, then other sections),
    a hand-trimmed chat without ids or types,
    text as a string and as entity lists, service messages without text, a null ``from``,
    ``date`` without ``date_unixtime``, an ``unsupported`` entry, a nameless saved-messages
    chat, left channels; an old single-chat export; an account export without chats."""
    recs = read("auto", TV)
    assert {detected_kind(r) for r in recs} == {"telegram"}
    assert reasons(recs) == {R.R_UNKNOWN_TYPE: 1, R.R_NO_RECORDS: 1}
    ms = {m.source_ref: m for m in messages(recs)}
    assert len(ms) == 13
    assert ms["telegram:Kenta/#1"].text == "with entities"  # no ids, no types at all
    assert ms["telegram:Kenta/#0"].conversation_id == "telegram_kenta"
    assert ms["telegram:777/2"].text == "See https://example.org and bring snacks"
    assert ms["telegram:777/2"].is_owner
    assert (ms["telegram:777/3"].type, ms["telegram:777/3"].text) == ("call", "phone call (95 s)")
    assert ms["telegram:777/4"].sender == "Deleted Account"
    assert ms["telegram:777/4"].local_ts == dt.datetime(2023, 4, 30, 21, 3)
    assert ms["telegram:777/6"].type == "photo"
    assert ms["telegram:555/1"].text == "Yuki invite members Ana"
    assert ms["telegram:555/2"].text == "Yuki edit group title Hiking 2023"
    assert ms["telegram:9001/7"].conversation_id == "telegram_9001"
    assert ms["telegram:31337/2"].text == "@kenta ok"
    empty = next(q for q in quarantined(recs) if q.reason == R.R_NO_RECORDS)
    assert empty.source_file == "DataExport_contacts_only/result.json"
    reconciles(merged("auto", TV), len(recs))


def test_sniff_account_export_with_chats_after_the_head() -> None:
    from memory_pipeline.core.ingest.sources.auto import detect
    from memory_pipeline.core.ingest.sources.exports import ExportFile

    contacts = [{"first_name": f"n{i}", "phone_number": "+1", "date": "2020-01-01T00:00:00"}
                for i in range(2000)]  # fmt: skip
    doc = {"about": "Here is the data you requested.", "contacts": {"about": "", "list": contacts},
           "chats": {"about": "", "list": [{"name": "A", "type": "personal_chat", "id": 1,
                                            "messages": []}]}}  # fmt: skip
    data = json.dumps(doc, indent=1).encode()
    assert len(data) > 65536
    assert detect(ExportFile.of_bytes("result.json", data, "result")) == "telegram"
    empty_chat = b'{"name": "A", "type": "personal_chat", "id": 5, "messages": []}'
    assert detect(ExportFile.of_bytes("result.json", empty_chat, "result")) == "telegram"
    other = b'{"about": "my app", "version": 2, "items": []}'
    assert detect(ExportFile.of_bytes("settings.json", other, "settings")) is None
