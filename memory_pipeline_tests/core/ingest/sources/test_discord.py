"""DiscordChatExporter JSON: guild channel and DM, nickname over name, replies, attachments,
stickers, embeds, calls and system events, offsets to UTC, an overlapping later export,
repeated ids, bad input."""

from __future__ import annotations

import datetime as dt
import json
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

DC = EXPORTS / "discord"
GENERAL = DC / "Hiking Club Tokyo - Trips - general [1100000000000000100].json"
DM = DC / "Direct Messages - Private - kenta [1190000000000000777].json"


def _count(path: Path) -> int:
    return len(json.loads(path.read_text("utf-8"))["messages"])


def test_guild_channel() -> None:
    recs = read("discord", GENERAL)
    assert len(recs) == _count(GENERAL)
    ms = messages(recs)
    assert [(m.type, m.sender) for m in ms] == [
        ("system", ""), ("text", "Maria 🌻"), ("text", "Yuki"), ("photo", "健太"),
        ("sticker", "Maria 🌻"), ("system", ""), ("call", "Maria 🌻"),
        ("text", "Carl-bot")]  # fmt: skip
    assert ms[0].text == "健太: joined the server" and ms[5].text == "Yuki: Pinned a message."
    assert ms[1].ts == dt.datetime(2024, 3, 1, 0, 5, 10, 500000, tzinfo=dt.UTC)
    assert ms[2].is_owner and not ms[5].is_owner
    assert ms[3].text == "ルートの地図です" and ms[4].text == "Wave"
    assert ms[6].text == "call (12 min)"
    assert ms[7].text == "Weather: Takao, Sat\nhttps://example.org/weather/takao"  # embed only
    assert {m.contact_id for m in ms} == {"Hiking Club Tokyo / #general"}
    assert ms[1].source_ref == "discord:1100000000000000100/1213000000000000002"
    assert reasons(recs) == {R.R_DUPLICATE: 1, R.R_EMPTY_TEXT: 1, R.R_BAD_TIMESTAMP: 1}


def test_dm_and_owner_by_account_name(tmp_path: Path) -> None:
    ms = messages(read("discord", DM))
    assert [m.contact_id for m in ms] == ["kenta"] * 3
    assert [m.is_owner for m in ms] == [False, True, False]
    assert ms[2].type == "audio"
    # a nickname that is none of the owner's names: the account name in owner_aliases
    renamed = tmp_path / "dm.json"
    renamed.write_text(
        DM.read_text("utf-8").replace('"nickname": "Yuki"', '"nickname": "ゆっきー"')
    )
    assert [m.is_owner for m in messages(read("discord", renamed))] == [False] * 3
    ms2 = messages(read("discord", renamed, owner_aliases=["yuki_t"]))
    assert ms2[1].is_owner and ms2[1].sender == "ゆっきー"


def test_overlapping_exports_merge() -> None:
    result = merged("discord", DC)
    reconciles(result, sum(_count(p) for p in DC.glob("*.json")))
    assert reasons(result)[R.R_DUPLICATE_EXPORT] == 2  # the call and the bot message
    general = [m for _, m in result.messages if m.conversation_id.endswith("0100")]
    assert len(general) == 8 + 2


def test_bad_input(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_bytes(GENERAL.read_bytes()[:1200])
    (tmp_path / "b.json").write_text('{"guild": 1, "channel": "x", "messages": {}}', "utf-8")
    (tmp_path / "c.json").write_bytes(
        (EXPORTS / "telegram" / "ChatExport_2024-03-01" / "result.json").read_bytes()
    )
    recs = read("discord", tmp_path)
    assert {q.source_file: q.reason for q in quarantined(recs)} == {
        "a.json": R.R_MALFORMED_JSON, "b.json": R.R_NOT_AN_EXPORT,
        "c.json": R.R_NOT_AN_EXPORT}  # fmt: skip
    with pytest.raises(SourceError, match="DiscordChatExporter"):
        read("discord", tmp_path / "c.json")
    assert {detected_kind(r) for r in read("auto", DC)} == {"discord"}
