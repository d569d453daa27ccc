"""Claude conversations.json: one conversation per chat, human = owner, assistant = Claude,
ISO times with offsets, content blocks and attachment-only messages, a re-export merging,
repeated uuids and bad timestamps, bad input."""

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
    read,
    reasons,
    reconciles,
)

CL = EXPORTS / "claude"
ONE = CL / "2024-03-01" / "conversations.json"


def _count(path: Path) -> int:
    return sum(len(c["chat_messages"]) for c in json.loads(path.read_text("utf-8")))


def test_conversations() -> None:
    recs = read("claude", ONE)
    assert len(recs) == _count(ONE)
    ms = messages(recs)
    de = [m for m in ms if m.conversation_id == "claude_0b1e7c2a-5d4f-4e3a-9c8b-7a6f5e4d3c2b"]
    assert [(m.sender, m.is_owner, m.type) for m in de] == [
        ("Yuki", True, "text"), ("Claude", False, "text"), ("Yuki", True, "file"),
        ("Claude", False, "text"), ("Yuki", True, "text")]  # fmt: skip
    assert de[0].ts == dt.datetime(2024, 3, 1, 8, 15, 2, 771522, tzinfo=dt.UTC)
    assert de[0].local_ts == dt.datetime(2024, 3, 1, 17, 15, 2, 771522)
    assert de[2].text == "grundriss.png"  # attachment only
    assert de[3].text == "The floor plan shows two rooms,\na kitchen and a balcony."  # blocks
    ja = [m for m in ms if m.conversation_id.startswith("claude_5f5f")]
    assert ja[1].ts == dt.datetime(2024, 3, 2, 16, 0, 15, tzinfo=dt.UTC)  # +09:00 offset
    assert {m.contact_id for m in ms} == {"Claude"}
    assert reasons(recs) == {R.R_BAD_TIMESTAMP: 1, R.R_MISSING_TIMESTAMP: 1, R.R_DUPLICATE: 1}


def test_reexport_merges() -> None:
    result = merged("claude", CL)
    reconciles(result, _count(ONE) + _count(CL / "2024-04-01" / "conversations.json"))
    assert reasons(result)[R.R_DUPLICATE_EXPORT] == 5
    assert len(result.messages) == 7 + 1


def test_bad_input(tmp_path: Path) -> None:
    (tmp_path / "conversations.json").write_bytes(ONE.read_bytes()[:500])
    (tmp_path / "gpt.json").write_bytes((EXPORTS / "chatgpt" / "2024-03-01" /
                                         "conversations.json").read_bytes())  # fmt: skip
    (tmp_path / "utf16.json").write_bytes(ONE.read_text("utf-8").encode("utf-16"))
    recs = read("claude", tmp_path)
    rows = {q.source_file: q.reason for q in recs if q.source_file != "utf16.json"}
    assert rows == {"conversations.json": R.R_MALFORMED_JSON, "gpt.json": R.R_NOT_AN_EXPORT}
    assert len(messages(recs)) == 7  # the UTF-16 copy (with its BOM) reads
    with pytest.raises(SourceError, match="not valid JSON"):
        read("claude", tmp_path / "conversations.json")
    assert {detected_kind(r) for r in read("auto", CL)} == {"claude"}
