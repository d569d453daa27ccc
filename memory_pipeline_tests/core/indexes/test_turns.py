"""The turn index: one document per message, in session order, with its context."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from memory_pipeline.core.indexes.tokenize import get_tokenizer
from memory_pipeline.core.indexes.turns import (
    build_turn_index,
    load_turn_indexes,
    turn_documents,
    turn_layout,
)


def _tables():
    """Two sessions; session A has two overlapping windows (m2 is in both)."""
    chunks = pa.table(
        {
            "chunk_id": ["c-a0", "c-a1", "c-b0"],
            "session_id": ["A", "A", "B"],
            "chunk_index": [0, 1, 0],
            "message_ids": [["m1", "m2"], ["m2", "m3"], ["m4"]],
        }
    )
    ts = dt.datetime(2024, 3, 1, 10, 0)
    messages = pa.table(
        {
            "message_id": ["m1", "m2", "m3", "m4"],
            "sender": ["Ann", "Bob", "Ann", "Cid"],
            "local_ts": [ts, ts, ts, ts + dt.timedelta(days=40)],
            "text": ["I adopted a puppy", "what breed?", "a beagle", "hello there"],
        }
    )
    return chunks, messages


def test_layout_orders_each_session_once_and_keeps_overlap_rows():
    chunks, _ = _tables()
    lay = turn_layout(chunks)
    assert lay.message_ids == ["m1", "m2", "m3", "m4"]
    assert lay.session_ids == ["A", "A", "A", "B"]
    assert lay.chunk_rows == [[0], [0, 1], [1], [2]]  # m2 sits in both windows
    assert lay.position.tolist() == [0, 1, 2, 0]
    assert lay.session_length.tolist() == [3, 3, 3, 1]


def test_documents_carry_speaker_date_and_neighbours_within_the_session():
    chunks, messages = _tables()
    docs = turn_documents(turn_layout(chunks), messages, context=1)
    assert docs["turn"][1] == "Bob 2024-03-01: what breed?"
    assert docs["turn_ctx"][1] == "I adopted a puppy a beagle"
    assert docs["turn_ctx"][2] == "what breed?"  # never crosses into session B
    assert docs["turn_ctx"][3] == ""
    assert turn_documents(turn_layout(chunks), messages, context=0)["turn_ctx"][1] == ""


def test_build_and_load_round_trip(tmp_path):
    chunks, messages = _tables()
    stats = build_turn_index(tmp_path, chunks, messages, get_tokenizer("regex"))
    assert stats["turns"] == 4
    idx = load_turn_indexes(tmp_path)
    assert set(idx) == {"turn", "turn_ctx"}
    assert idx["turn"].search("beagle", 2)[0][0] == "m3"
    # the answer to "what breed" is found through its neighbour's document
    assert idx["turn_ctx"].search("beagle", 1)[0][0] == "m2"


def test_a_version_without_turns_loads_nothing(tmp_path):
    assert load_turn_indexes(tmp_path) == {}
    chunks, messages = _tables()
    build_turn_index(tmp_path, chunks, messages, get_tokenizer("regex"))
    (tmp_path / "turns" / "turns.json").write_text('{"format": 99}', encoding="utf-8")
    assert load_turn_indexes(tmp_path) == {}
