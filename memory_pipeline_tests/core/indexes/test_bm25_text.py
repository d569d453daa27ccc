"""The text BM25 indexes for raw_text: message headers reduced, message words untouched."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from memory_pipeline.core.indexes.bm25 import build_index
from memory_pipeline.core.indexes.bm25_text import (
    DEFAULT_PREFIX,
    PREFIXES,
    bm25_raw_text,
    bm25_raw_texts,
)
from memory_pipeline.core.indexes.publish import representation_table
from memory_pipeline.core.sessions.chunking import render_lines

RAW = (
    "[2024-03-01 10:00] Yuki: the shelter: Saturday at 10\n"
    "  second line [2024-03-01 10:00] Maria: quoted\n"
    "[2024-03-01 10:05] Maria Lopez: ok"
)


def test_each_prefix_keeps_what_it_says():
    assert bm25_raw_text(RAW, "full") == RAW
    assert bm25_raw_text(RAW, "sender") == (
        "Yuki: the shelter: Saturday at 10\n"
        "  second line [2024-03-01 10:00] Maria: quoted\n"  # continuation: message text
        "Maria Lopez: ok"
    )
    assert bm25_raw_text(RAW, "none") == (
        "the shelter: Saturday at 10\n  second line [2024-03-01 10:00] Maria: quoted\nok"
    )
    assert DEFAULT_PREFIX in PREFIXES
    with pytest.raises(ValueError, match="prefix"):
        bm25_raw_text(RAW, "date")
    with pytest.raises(ValueError, match="prefix"):
        bm25_raw_texts([], "date")


def test_it_strips_exactly_what_the_chunk_rendering_writes():
    messages = pa.table(
        {
            "local_ts": pa.array(
                [dt.datetime(2024, 3, 1, 23, 59), dt.datetime(2024, 3, 2, 0, 1)],
                pa.timestamp("us"),
            ),
            "sender": ["Yuki", "健太"],
            "text": ["see you: tomorrow\n2024-03-02 then", "了解"],
        }
    )
    raw = "\n".join(render_lines(messages))
    assert bm25_raw_text(raw, "none") == "see you: tomorrow\n  2024-03-02 then\n了解"
    assert bm25_raw_text(raw, "sender") == "Yuki: see you: tomorrow\n  2024-03-02 then\n健太: 了解"


def test_the_index_no_longer_holds_stamp_tokens():
    """On the sample the most frequent raw_text tokens were 2024, 03 and the owner's name."""
    texts = [
        "[2024-03-01 10:00] Yuki: dog shelter\n[2024-03-01 10:02] Maria: blankets",
        "[2024-03-02 09:00] Yuki: train tickets",
    ]
    vocab = {
        p: set(build_index(["a", "b"], bm25_raw_texts(texts, p), "english").vocab)
        for p in PREFIXES
    }
    assert {"2024", "03", "yuki"} <= vocab["full"]
    assert "2024" not in vocab["sender"] and "03" not in vocab["sender"]
    assert "yuki" in vocab["sender"] and "maria" in vocab["sender"]
    assert vocab["none"] == {"dog", "shelter", "blanket", "train", "ticket"}


def test_representation_table_hands_bm25_the_reduced_raw_text():
    chunks = pa.table({"chunk_id": ["c1"], "raw_text": [RAW]})
    summaries = pa.table({"chunk_id": ["c1"], "summary": ["[2024-03-01 10:00] s"]})
    texts = pa.table({"chunk_id": ["c1"], "embedding_text": ["e"]})
    reps = representation_table(chunks, summaries, texts)
    assert reps["raw_text"] == (["c1"], [bm25_raw_text(RAW, DEFAULT_PREFIX)])
    assert reps["summary"][1] == ["[2024-03-01 10:00] s"]  # other representations as stored
    assert representation_table(chunks, summaries, texts, "full")["raw_text"][1] == [RAW]
