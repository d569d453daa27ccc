"""ChatGPT conversations.json: the current branch of the mapping tree, edited and regenerated
versions as superseded rows, the assistant as a participant, epoch floats as UTC, media
parts, a re-export (in a zip) merging, bad input."""

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

GPT = EXPORTS / "chatgpt"
ONE = GPT / "2024-03-01" / "conversations.json"


def _visible_nodes(doc: list[dict]) -> int:
    """The records of a file by its own structure: nodes whose message shows something."""
    n = 0
    for conv in doc:
        for node in conv["mapping"].values():
            m = node["message"]
            if not m or m["metadata"].get("is_visually_hidden_from_conversation"):
                continue
            c = m["content"]
            if c["content_type"] == "thoughts":
                continue
            parts = c.get("parts") or []
            if (
                any(isinstance(p, str) and p for p in parts)
                or c.get("text")
                or any(isinstance(p, dict) and "asset_pointer" in p for p in parts)
            ):
                n += 1
    return n


def test_current_branch_in_order() -> None:
    recs = read("chatgpt", ONE)
    assert len(recs) == _visible_nodes(json.loads(ONE.read_text("utf-8")))
    ms = [m for m in messages(recs) if m.conversation_id.startswith("chatgpt_6601")]
    assert [(m.sender, m.type) for m in ms] == [
        ("Yuki", "text"), ("ChatGPT", "text"), ("Yuki", "text"), ("", "system"),
        ("ChatGPT", "text"), ("Yuki", "photo"), ("ChatGPT", "text")]  # fmt: skip
    assert ms[1].text.startswith("雨の日なら")  # the regenerated answer the user kept
    assert ms[2].text == "鉄道博物館の入館料と開館時間は？"  # the edited prompt
    assert [m.is_owner for m in ms] == [True, False, True, False, False, True, False]
    assert ms[0].ts == dt.datetime(2024, 3, 1, 0, 0, 0, 500000, tzinfo=dt.UTC)
    assert ms[0].local_ts == dt.datetime(2024, 3, 1, 9, 0, 0, 500000)
    assert ms[5].text == "この写真の駅はどこ？" and ms[5].ts_inferred  # no create_time
    assert ms[5].ts == ms[4].ts
    assert {m.contact_id for m in ms} == {"ChatGPT"}
    assert ms[0].source_ref == "chatgpt:6601a0c2-1b2c-4d3e-8f90-a1b2c3d4e5f6/aaaa0002-u1"
    assert reasons(recs) == {R.R_SUPERSEDED: 2}  # the first answer and the first prompt


def test_reexport_zip_merges() -> None:
    result = merged("chatgpt", GPT)
    total = len(read("chatgpt", ONE)) + len(read("chatgpt", GPT / "chatgpt-export-2024-04-01.zip"))
    reconciles(result, total)
    assert len(result.messages) == 9 + 2  # the first export's 9, the 2 new ones
    r = reasons(result)
    assert r[R.R_DUPLICATE_EXPORT] == 9 and r[R.R_NOT_AN_EXPORT] == 1  # chat.html


def test_bad_input(tmp_path: Path) -> None:
    (tmp_path / "conversations.json").write_bytes(ONE.read_bytes()[:3000])  # truncated
    (tmp_path / "other.json").write_text('[{"chat_messages": []}]', encoding="utf-8")
    latin1 = ONE.read_text("utf-8").replace("Sourdough", "Café").replace("acetone", "acétone")
    (tmp_path / "latin1.json").write_bytes(latin1.encode("utf-8").replace("é".encode(), b"\xe9"))
    recs = read("chatgpt", tmp_path)
    files = {q.source_file: q.reason for q in quarantined(recs) if q.record_ref == "file"}
    assert files == {"conversations.json": R.R_MALFORMED_JSON, "other.json": R.R_NOT_AN_EXPORT}
    # a byte that is not UTF-8 spoils its message only; the title is no record
    bad = [r for r in recs if r.source_file == "latin1.json"]
    assert len(bad) == len(read("chatgpt", ONE)) and reasons(bad)[R.R_ENCODING] == 1
    with pytest.raises(SourceError, match="expected ChatGPT"):
        read("chatgpt", tmp_path / "conversations.json")
    auto = read("auto", GPT)
    assert {detected_kind(r) for r in auto} == {"chatgpt", None}  # None: chat.html
