"""Searching with the turn layout stored at publish, derived at load, or built as before the
layout was stored: the same results, on a small published corpus whose chunk windows overlap
(a message in two or three chunks: what the layout's chunk rows and pairs are about)."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from memory_pipeline.core.indexes.metadata import session_metadata
from memory_pipeline.core.indexes.publish import (
    SESSION_LOOKUP,
    build_bm25,
    current_version,
    index_root,
    new_version,
    publish,
    representation_table,
    write_lookups,
)
from memory_pipeline.core.indexes.tokenize import get_tokenizer
from memory_pipeline.core.indexes.turn_arrays import LAYOUT_FOLDER, CsrRows
from memory_pipeline.core.indexes.turns import TURN_FOLDER, build_turn_index, turn_layout
from memory_pipeline.core.represent.build import embedding_texts, summarize_chunks
from memory_pipeline.core.retrieval.config import SearchConfig
from memory_pipeline.core.retrieval.searcher import Searcher
from memory_pipeline.core.retrieval.turns import TurnIndex
from memory_pipeline.core.sessions.chunking import chunk_sessions
from memory_pipeline.core.sessions.sessionize import sessionize
from memory_pipeline_tests.factories import msg, table

TEXTS = [
    "we adopted a beagle puppy from the shelter",
    "what is the puppy called?",
    "his name is Biscuit",
    "the shelter was near the river",
    "did you book the ryokan in Kyoto?",
    "yes, two nights in March",
    "the train leaves at nine",
    "bring the camera for the temples",
    "my sister starts her new job on Monday",
    "which company hired her?",
    "a bakery downtown, she bakes bread",
    "Biscuit chewed my running shoes",
    "pottery class moved to Thursday",
    "I made a blue bowl last week",
    "the concert was loud but fun",
]
CONFIGS = [
    SearchConfig(mode="bm25", turns="index"),
    SearchConfig(mode="bm25", turns="index", lift=0.5),
    SearchConfig(mode="bm25", turns="index", rerank=True),
    SearchConfig(mode="bm25", turns="index", speaker_boost=0.5),
    SearchConfig(mode="bm25", turns="index", rerank=True, use_time=False),
]
QUERIES = ["beagle puppy shelter", "Kyoto ryokan train", "sister job bakery", "Biscuit",
           "what did B say about pottery last week?", "concert"]  # fmt: skip


def _publish(out: Path, size: int, stride: int) -> Path:
    """A published version of two conversations over two days, windows of ``size`` every
    ``stride`` messages (the pipeline's core steps, no dense vectors)."""
    messages = table(
        *[
            msg(f"2024-03-0{day} 10:{i:02d}", text, "AB"[i % 2], conv=f"c{conv}", order=i)
            for day in (1, 2)
            for conv in (1, 2)
            for i, text in enumerate(TEXTS[conv - 1 :: 1 + conv % 2])
        ]
    )
    sessions = sessionize(messages, 30)
    chunks = chunk_sessions(sessions, messages, size, stride)
    summaries = summarize_chunks(chunks)
    root = index_root(out)
    version = new_version(root)
    build_bm25(
        representation_table(chunks, summaries, embedding_texts(chunks, summaries)),
        version,
        "english",
    )
    pq.write_table(session_metadata(sessions), version / SESSION_LOOKUP)
    write_lookups(version, chunks, messages)
    build_turn_index(version, chunks, messages, get_tokenizer("english"))
    publish(root, version)
    return out


def _as_before(s: Searcher) -> Searcher:
    """``s`` with its turn index built as before the layout was stored: the loop over the
    chunk lookup, every sender and text length read at load."""
    loaded = s.turn_index
    layout = turn_layout(s._chunk_table)
    ids = layout.message_ids
    s._turn_index = TurnIndex(
        layout,
        loaded.indexes,
        len(s.chunk_ids),
        senders=[x or "" for x in s._messages.column("sender", ids)],
        lengths=s._messages.text_lengths(ids),
        message_tokens=loaded.message_tokens,
    )
    return s


@pytest.mark.parametrize(("size", "stride"), [(5, 2), (4, 3), (4, 4)])
def test_stored_derived_and_former_turn_index_rank_the_same(tmp_path, size, stride):
    out = _publish(tmp_path / "out", size, stride)
    assert (current_version(out) / TURN_FOLDER / LAYOUT_FOLDER).is_dir()
    old = tmp_path / "old"
    shutil.copytree(out, old)
    shutil.rmtree(current_version(old) / TURN_FOLDER / LAYOUT_FOLDER)
    stored, derived, before = Searcher(out), Searcher(old), _as_before(Searcher(old))
    ti = stored.turn_index
    assert isinstance(ti.layout.chunk_rows, CsrRows)
    assert isinstance(derived.turn_index.layout.chunk_rows, list)
    in_two = sum(len(r) > 1 for r in ti.layout.chunk_rows)
    assert (in_two > 0) == (stride < size)
    assert bool(ti.extra_chunks) == (size > 2 * stride)  # a message in three windows
    as_of = dt.datetime(2024, 3, 2, 12, 0)
    for q in QUERIES:
        for cfg in CONFIGS:
            for scope in ({}, {"contact": "c2"}):
                x = stored.search(q, 6, cfg, as_of=as_of, **scope).to_dict()
                y = derived.search(q, 6, cfg, as_of=as_of, **scope).to_dict()
                z = before.search(q, 6, cfg, as_of=as_of, **scope).to_dict()
                assert x == y == z, (q, cfg, scope)
    assert stored.search("beagle puppy", 3, CONFIGS[0]).turns  # turns ranked at all
    b = before.turn_index
    for t in (ti, derived.turn_index):
        assert t.message_ids == b.message_ids and list(t.layout.chunk_rows) == b.layout.chunk_rows
        assert t.extra_chunks == b.extra_chunks and t.senders.tolist() == b.senders.tolist()
        for name in ("session_code", "first_chunk", "last_chunk", "pair_chunk", "pair_turn",
                     "chunk_start", "chunk_session", "lengths"):  # fmt: skip
            assert getattr(t, name).tolist() == getattr(b, name).tolist(), name
