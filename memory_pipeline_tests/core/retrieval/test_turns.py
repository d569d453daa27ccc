"""Granularity fusion over the turn index (pure: tiny hand-made tables)."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pytest

from memory_pipeline.core.indexes.tokenize import get_tokenizer
from memory_pipeline.core.indexes.turns import build_turn_index, load_turn_indexes, turn_layout
from memory_pipeline.core.retrieval.config import SearchConfig
from memory_pipeline.core.retrieval.rerank import FEATURES
from memory_pipeline.core.retrieval.turns import TurnIndex, TurnWeights

TOK = get_tokenizer("regex")


@pytest.fixture
def index(tmp_path) -> tuple[TurnIndex, list[str]]:
    chunk_ids = ["c0", "c1", "c2"]
    chunks = pa.table(
        {
            "chunk_id": chunk_ids,
            "session_id": ["A", "A", "B"],
            "chunk_index": [0, 1, 0],
            "message_ids": [["m1", "m2"], ["m3", "m4"], ["m5", "m6"]],
        }
    )
    ts = dt.datetime(2024, 3, 1, 10, 0)
    texts = ["we went hiking", "nice weather", "my sister visited", "she brought cake",
             "the concert was loud", "I lost my keys"]
    messages = pa.table(
        {
            "message_id": ["m1", "m2", "m3", "m4", "m5", "m6"],
            "sender": ["Ann", "Bob", "Ann", "Bob", "Ann", "Bob"],
            "local_ts": [ts] * 6,
            "text": texts,
        }
    )
    build_turn_index(tmp_path, chunks, messages, TOK)
    ti = TurnIndex(
        turn_layout(chunks),
        load_turn_indexes(tmp_path),
        3,
        senders=messages.column("sender").to_pylist(),
        lengths=[len(t) for t in texts],
    )
    return ti, chunk_ids


def _fuse(ti, chunk_ids, ranked, query, w, mask=None, n=6):
    toks = TOK.tokenize(query)
    own, ctx = ti.scores(toks, "turn", mask), ti.scores(toks, "turn_ctx", mask)
    return ti.fuse(ranked, {c: i for i, c in enumerate(chunk_ids)}, chunk_ids, own, ctx, w, n)


def test_the_matching_turn_ranks_first_even_outside_the_top_chunk(index):
    ti, ids = index
    # the chunk ranking prefers c0, but the only message about keys is in c2
    ranked = [("c0", 3.0), ("c1", 2.0), ("c2", 1.0)]
    fused = _fuse(ti, ids, ranked, "keys", TurnWeights(0.6, 0.1, 0.3, 0.0))
    assert fused.turns[0][0] == "m6"
    assert fused.chunks == ranked  # no lift: the chunk ranking is unchanged


def test_lift_moves_the_chunk_of_the_best_turn_up(index):
    ti, ids = index
    ranked = [("c0", 3.0), ("c1", 2.9), ("c2", 2.8)]
    lifted = _fuse(ti, ids, ranked, "keys", TurnWeights(0.6, 0.1, 0.3, 0.5)).chunks
    assert lifted[0][0] == "c2"
    assert sorted(c for c, _ in lifted) == ["c0", "c1", "c2"]  # same chunks, new order


def test_context_weight_finds_a_reply_through_its_neighbour(index):
    ti, ids = index
    # "cake" is in m4; with only context weight, its neighbour m3 is the top turn
    fused = _fuse(ti, ids, [], "cake", TurnWeights(0.0, 1.0, 0.0, 0.0))
    assert fused.turns[0][0] == "m3"


def test_scope_mask_keeps_turns_out(index):
    ti, ids = index
    mask = np.array([True, True, False])  # chunk c2 (session B) out of scope
    fused = _fuse(ti, ids, [("c0", 1.0)], "keys concert", TurnWeights(), mask)
    assert {"m5", "m6"}.isdisjoint(m for m, _ in fused.turns)


def test_features_have_the_reranker_columns(index):
    ti, ids = index
    fused = _fuse(ti, ids, [("c2", 1.0)], "Bob keys", TurnWeights())
    x = ti.features(fused, 4, speakers=["Bob"], time_ok=np.array([False, False, True]))
    assert x.shape == (min(4, len(fused.turns)), len(FEATURES))
    col = dict(zip(FEATURES, x[0], strict=True))
    assert fused.turns[0][0] == "m6"
    assert (col["own"], col["speaker"], col["time"], col["position"]) == (1.0, 1.0, 1.0, 0.5)


def test_weights_and_config_are_validated():
    with pytest.raises(ValueError):
        TurnWeights(1.5, 0, 0, 0)
    with pytest.raises(ValueError):
        SearchConfig(turns="paragraphs")
    with pytest.raises(ValueError):
        SearchConfig(lift=-0.1)
    cfg = SearchConfig(turns="index", lift=0.15)
    assert cfg.name.endswith("turns=0.50/0.20/0.30 lift=0.15")
    assert cfg.chunk_name == SearchConfig().name


def test_fused_maxima_equal_brute_force_with_messages_in_three_windows():
    """The vectorized maxima (first/last window, reduceat) equal a plain loop, also when a
    short stride puts one message in three windows."""
    chunks = pa.table(
        {
            "chunk_id": ["c0", "c1", "c2", "c3"],
            "session_id": ["A", "A", "A", "B"],
            "chunk_index": [0, 1, 2, 0],
            "message_ids": [["m1", "m2", "m3"], ["m2", "m3", "m4"], ["m3", "m4"], ["m5"]],
        }
    )
    lay = turn_layout(chunks)
    ti = TurnIndex(lay, {}, 4)
    rng = np.random.default_rng(3)
    own = rng.random(len(lay.message_ids))
    ranked = [("c0", 0.2), ("c1", 0.9), ("c2", 0.5), ("c3", 0.4)]
    fused = ti.fuse(ranked, {f"c{i}": i for i in range(4)}, ["c0", "c1", "c2", "c3"],
                    own, np.zeros_like(own), TurnWeights(0.5, 0.0, 0.5, 0.5), 5)
    c = {f"c{i}": s / 0.9 for i, (_, s) in enumerate(ranked)}
    for t, rows in enumerate(lay.chunk_rows):
        assert fused.chunk[t] == pytest.approx(max(c[f"c{r}"] for r in rows))
    unit = own / own.max()
    lifted = {
        f"c{r}": 0.5 * c[f"c{r}"]
        + 0.5 * max(unit[t] for t, rows in enumerate(lay.chunk_rows) if r in rows)
        for r in range(4)
    }
    assert [cid for cid, _ in fused.chunks] == sorted(lifted, key=lambda k: -lifted[k])
    assert fused.session[lay.session_ids.index("B")] == pytest.approx(c["c3"])
