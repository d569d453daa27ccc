"""Sparse turn scores (``TurnScores``) are the dense computation's bits: BM25 against bm25s's
own scores, and ``fuse`` / ``mix_splade`` against the dense implementations they replaced
(kept below as references), on a few thousand turns in overlapping chunk windows."""

from __future__ import annotations

import datetime as dt
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp

from memory_pipeline.core.indexes import splade as SP
from memory_pipeline.core.indexes.bm25 import build_index
from memory_pipeline.core.indexes.tokenize import get_tokenizer
from memory_pipeline.core.indexes.turns import (
    build_turn_index,
    load_turn_indexes,
    turn_documents,
    turn_layout,
)
from memory_pipeline.core.retrieval.turns import (
    Fused,
    TurnIndex,
    TurnScores,
    TurnWeights,
    _top_rows,
    _unit,
    mix_splade,
)

TOK = get_tokenizer("regex")
WORDS = [f"w{i}" for i in range(300)]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict:
    """~3,000 turns in 150 sessions, chunk windows of 6 every 2 to 6 messages (a message
    in up to three windows), Zipf-distributed words (some in most turns)."""
    rng = np.random.default_rng(7)
    p = 1.0 / np.arange(1, len(WORDS) + 1)
    p /= p.sum()
    chunk_rows, messages = [], []
    ts = dt.datetime(2024, 3, 1, 10, 0)
    for k in range(150):
        n = int(rng.integers(1, 40))
        ids = [f"m{k:03d}-{i:03d}" for i in range(n)]
        for i, m in enumerate(ids):
            words = rng.choice(WORDS, size=int(rng.integers(1, 15)), p=p)
            messages.append((m, "AB"[i % 2], ts + dt.timedelta(days=k, minutes=i), " ".join(words)))
        stride = int(rng.integers(2, 7))
        starts = list(range(0, max(n - 6, 0) + 1, stride))
        if starts[-1] + 6 < n:
            starts.append(n - 6)
        for j, s in enumerate(starts):
            chunk_rows.append((f"c{k:03d}-{j:03d}", f"s{k:03d}", j, ids[s : s + 6]))
    chunks = pa.table(
        {
            "chunk_id": [c[0] for c in chunk_rows],
            "session_id": [c[1] for c in chunk_rows],
            "chunk_index": [c[2] for c in chunk_rows],
            "message_ids": [c[3] for c in chunk_rows],
        }
    )
    msgs = pa.table(
        {
            "message_id": [m[0] for m in messages],
            "sender": [m[1] for m in messages],
            "local_ts": [m[2] for m in messages],
            "text": [m[3] for m in messages],
        }
    )
    folder = tmp_path_factory.mktemp("turns")
    build_turn_index(folder, chunks, msgs, TOK)
    layout = turn_layout(chunks)
    indexes = load_turn_indexes(folder)
    ti = TurnIndex(layout, indexes, chunks.num_rows)
    # the same documents indexed in another order: scores are scattered to layout rows
    docs = turn_documents(layout, msgs)
    order = rng.permutation(len(layout.message_ids))
    shuffled = {
        rep: build_index([layout.message_ids[i] for i in order], [docs[rep][i] for i in order], TOK)
        for rep in ("turn", "turn_ctx")
    }
    ti_shuffled = TurnIndex(layout, shuffled, chunks.num_rows)
    chunk_ids = chunks.column("chunk_id").to_pylist()
    return {"ti": ti, "shuffled": ti_shuffled, "chunk_ids": chunk_ids, "rng": rng}


QUERIES = [
    "w0",  # in most turns
    "w1 w2 w3",
    "w5 w5 w5 w17",  # repeated tokens count once per occurrence
    "w40 nosuchword w41 w40 alsonot",  # tokens outside the vocabulary add nothing
    "nosuchword",
    "",
    "w250 w299 w120 w0 w0",
    " ".join(WORDS[::7]),
]


def _masks(corpus) -> list[np.ndarray | None]:
    n = len(corpus["chunk_ids"])
    rng = np.random.default_rng(11)
    return [None, rng.random(n) < 0.3, np.zeros(n, bool), np.ones(n, bool)]


# -- the dense implementations the sparse ones replaced ----------------------------------------


def dense_scores(ti: TurnIndex, tokens, rep: str, chunk_mask) -> np.ndarray:
    out = np.zeros(len(ti), dtype=np.float64)
    index = ti.indexes.get(rep)
    if index is None:
        return out
    vocab = index.vocab
    ids = [vocab[t] for t in tokens if t in vocab]
    if ids:
        scores = np.asarray(index.retriever.get_scores_from_ids(ids), dtype=np.float64)
        pos = ti._positions(rep)
        if pos is None:
            out = scores
        else:
            out[pos] = scores
    if chunk_mask is not None:
        out = np.where(chunk_mask[ti.first_chunk], out, 0.0)
    return out


def dense_fuse(ti: TurnIndex, chunk_ranked, chunk_row, chunk_ids, own, ctx, weights, n_turns):
    c = np.zeros(ti.n_chunks, dtype=np.float64)
    rows = np.zeros(0, np.int64)
    seg = np.zeros(0, np.int64)
    if chunk_ranked:
        rows = np.fromiter((chunk_row[d] for d, _ in chunk_ranked), np.int64, len(chunk_ranked))
        vals = np.fromiter((s for _, s in chunk_ranked), np.float64, len(chunk_ranked))
        c[rows] = _unit(vals)
        seg = np.concatenate(
            [ti.pair_turn[ti.chunk_start[r] : ti.chunk_start[r + 1]] for r in rows]
        )
    is_live = (own > 0) | (ctx > 0)
    is_live[seg] = True
    live = np.flatnonzero(is_live)
    best_chunk = np.maximum(c[ti.first_chunk[live]], c[ti.last_chunk[live]])
    for t, row in ti.extra_chunks:
        i = np.searchsorted(live, t)
        if i < live.size and live[i] == t:
            best_chunk[i] = max(best_chunk[i], c[row])
    own_max = float(own.max()) if own.size else 0.0
    ctx_max = float(ctx.max()) if ctx.size else 0.0
    t_own = own[live] / own_max if own_max > 0 else np.zeros(live.size)
    t_ctx = ctx[live] / ctx_max if ctx_max > 0 else np.zeros(live.size)
    turn = weights.w_self * t_own + weights.w_ctx * t_ctx + weights.w_chunk * best_chunk
    turns = _top_rows(ti.message_ids, live, turn, n_turns)
    session_best = np.zeros(int(ti.session_code.max()) + 1 if len(ti) else 0)
    if rows.size:
        np.maximum.at(session_best, ti.chunk_session[rows], c[rows])
    session = session_best[ti.session_code[live]] if live.size else np.zeros(0)

    def result(chunks):
        return Fused(chunks, turns, live, t_own, t_ctx, own[live], best_chunk, session)

    if weights.lift <= 0 or not chunk_ranked:
        return result(chunk_ranked)
    lengths = ti.chunk_start[rows + 1] - ti.chunk_start[rows]
    offsets = np.r_[0, np.cumsum(lengths)[:-1]]
    own_seg = own[seg] / own_max if own_max > 0 else np.zeros(seg.size)
    lifted = np.zeros(ti.n_chunks, dtype=np.float64)
    lifted[rows] = np.maximum.reduceat(own_seg, offsets)
    score = (1 - weights.lift) * c[rows] + weights.lift * lifted[rows]
    return result(_top_rows(chunk_ids, rows, score, len(chunk_ranked)))


def dense_mix(own: np.ndarray, splade: np.ndarray | None, weight: float) -> np.ndarray:
    if weight <= 0 or splade is None or splade.size != own.size:
        return own
    own = np.asarray(own, dtype=np.float64)
    top = float(own.max()) if own.size else 0.0
    best = float(splade.max()) if splade.size else 0.0
    if best <= 0:
        return own
    splade = np.asarray(splade, dtype=np.float64)
    scale = top if top > 0 else 1.0
    return (own / scale + weight * np.maximum(splade, 0.0) / best) * scale


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _assert_same_fused(a: Fused, b: Fused) -> None:
    assert a.chunks == b.chunks
    assert a.turns == b.turns
    for name in ("rows", "own", "ctx", "own_raw", "chunk", "session"):
        assert _same_bits(getattr(a, name), getattr(b, name)), name


# -- tests --------------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["ti", "shuffled"])
def test_sparse_bm25_is_bm25s_bit_for_bit(corpus, which):
    ti = corpus[which]
    assert (ti._positions("turn") is None) == (which == "ti")  # both orders are covered
    for rep in ("turn", "turn_ctx"):
        for q in QUERIES:
            toks = TOK.tokenize(q)
            for mask in _masks(corpus):
                got = ti.scores(toks, rep, mask)
                want = dense_scores(ti, toks, rep, mask)
                assert got.n == len(ti)
                assert np.all(np.diff(got.rows) > 0)  # sorted, distinct
                assert np.all(got.values != 0)  # only the matches
                assert _same_bits(got.dense(), want), (rep, q)
    # the buffer is clean between queries: a query repeated scores the same
    a = ti.scores(TOK.tokenize("w3 w9"), "turn", None)
    ti.scores(TOK.tokenize("w0 w1 w2"), "turn", None)
    b = ti.scores(TOK.tokenize("w3 w9"), "turn", None)
    assert _same_bits(a.rows, b.rows) and _same_bits(a.values, b.values)


def test_a_column_holds_each_document_once(corpus):
    """What makes ``buf[rows] += column`` exact (bm25s adds with np.add.at)."""
    for rep in ("turn", "turn_ctx"):
        s = corpus["ti"].indexes[rep].retriever.scores
        indices, indptr = s["indices"], s["indptr"]
        for t in range(len(indptr) - 1):
            col = indices[indptr[t] : indptr[t + 1]]
            assert np.unique(col).size == col.size


@pytest.mark.parametrize("which", ["ti", "shuffled"])
def test_fuse_on_sparse_scores_equals_the_dense_fusion(corpus, which):
    ti, chunk_ids = corpus[which], corpus["chunk_ids"]
    chunk_row = {c: i for i, c in enumerate(chunk_ids)}
    rng = np.random.default_rng(5)
    weights = [TurnWeights(), TurnWeights(0.6, 0.1, 0.3, 0.5), TurnWeights(0.0, 1.0, 0.0, 1.0)]
    for q in QUERIES:
        toks = TOK.tokenize(q)
        for mask in _masks(corpus):
            pool = [c for i, c in enumerate(chunk_ids) if mask is None or mask[i]]
            picked = rng.permutation(len(pool))[: int(rng.integers(0, 30))]
            # ties included: scores on a coarse grid
            ranked = [(pool[i], float(rng.integers(0, 5)) / 4) for i in picked]
            ranked.sort(key=lambda p: (-p[1], p[0]))
            own, ctx = ti.scores(toks, "turn", mask), ti.scores(toks, "turn_ctx", mask)
            d_own = dense_scores(ti, toks, "turn", mask)
            d_ctx = dense_scores(ti, toks, "turn_ctx", mask)
            for w in weights:
                for n in (5, 50):
                    args = (chunk_row, chunk_ids)
                    want = dense_fuse(ti, ranked, *args, d_own, d_ctx, w, n)
                    _assert_same_fused(ti.fuse(ranked, *args, own, ctx, w, n), want)
                    # dense arrays in (the evaluation's float32 candidates): the same too
                    o32, c32 = d_own.astype(np.float32), d_ctx.astype(np.float32)
                    want32 = dense_fuse(ti, ranked, *args, o32, c32, w, n)
                    _assert_same_fused(ti.fuse(ranked, *args, o32, c32, w, n), want32)


def test_mix_splade_on_sparse_scores_equals_the_dense_mix(corpus):
    ti = corpus["ti"]
    n = len(ti)
    rng = np.random.default_rng(9)
    for q in QUERIES:
        own = ti.scores(TOK.tokenize(q), "turn", None)
        for k in (0, 1, 40, 800):
            rows = np.sort(rng.choice(n, size=k, replace=False)).astype(np.int64)
            vals = rng.random(k) * 5
            spl = TurnScores(rows, vals, n)
            for weight in (0.0, 1.0, 3.0):
                want = dense_mix(own.dense(), spl.dense(), weight)
                got = mix_splade(own, spl, weight)
                assert isinstance(got, TurnScores)
                assert _same_bits(got.dense(), want), (q, k, weight)
                # dense in, dense out (the evaluation's float32 arrays included)
                o32, s32 = own.dense(np.float32), spl.dense(np.float32)
                assert _same_bits(mix_splade(o32, s32, weight), dense_mix(o32, s32, weight))
    assert mix_splade(own, None, 3.0) is own


def test_splade_sparse_scores_are_the_bincount_over_every_turn():
    """``QueryScorer.sparse_scores`` sums a turn's entries as np.bincount over all turns."""
    rng = np.random.default_rng(3)
    turns, columns = 2000, 60
    m = (rng.random((turns, columns)) < 0.05) * rng.random((turns, columns)).astype(np.float32)
    csc = sp.csc_matrix(m.astype(np.float32))
    scorer = SP.QueryScorer.__new__(SP.QueryScorer)
    scorer.turns = turns
    scorer.indptr, scorer.rows, scorer.data = csc.indptr, csc.indices, csc.data
    for nz in ([], [3], [1, 5, 9, 30], list(range(columns))):
        nz = np.asarray(nz, dtype=np.int64)
        weights = rng.random(nz.size) + 0.1
        scorer.query_terms = lambda q, nz=nz, weights=weights: (nz, weights)
        lo, hi = scorer.indptr[nz], scorer.indptr[nz + 1]
        sizes = hi - lo
        want = np.zeros(turns)
        if sizes.sum():
            at = np.repeat(lo - np.r_[0, np.cumsum(sizes)[:-1]], sizes) + np.arange(sizes.sum())
            w = np.repeat(weights, sizes) * scorer.data[at]
            want = np.bincount(scorer.rows[at], weights=w, minlength=turns)
        rows, values = scorer.sparse_scores("q")
        assert np.all(np.diff(rows) > 0)
        assert _same_bits(scorer.scores("q"), want)
        assert _same_bits(TurnScores(rows, values, turns).dense(), want)


def test_threads_scoring_at_once_get_the_serial_results(corpus):
    """Each thread has its own scratch vectors: searches on the service's threads at once
    score and fuse as one after the other."""
    ti, chunk_ids = corpus["shuffled"], corpus["chunk_ids"]
    chunk_row = {c: i for i, c in enumerate(chunk_ids)}
    mask = _masks(corpus)[1]
    ranked = [(c, 1.0 / (k + 1)) for k, c in enumerate(chunk_ids[::40])]
    jobs = [(q, m) for q in QUERIES for m in (None, mask)]

    def run(job):
        q, m = job
        toks = TOK.tokenize(q)
        own, ctx = ti.scores(toks, "turn", m), ti.scores(toks, "turn_ctx", m)
        f = ti.fuse(ranked, chunk_row, chunk_ids, own, ctx, TurnWeights(0.5, 0.2, 0.3, 0.5), 30)
        arrays = (f.rows, f.own, f.ctx, f.own_raw, f.chunk, f.session)
        return (own.rows.tobytes(), own.values.tobytes(), ctx.values.tobytes(), f.chunks,
                f.turns, tuple(a.tobytes() for a in arrays))  # fmt: skip

    serial = [run(j) for j in jobs]
    with ThreadPoolExecutor(4) as pool:
        for _ in range(5):
            assert list(pool.map(run, jobs * 3)) == serial * 3


def test_turn_scores_read_as_the_dense_array():
    dense = np.array([0.0, -1.5, 0.0, 2.0, 0.5, 0.0])
    s = TurnScores.of(dense)
    assert s.rows.tolist() == [1, 3, 4]
    assert _same_bits(s.dense(), dense)
    assert [s.get(r) for r in range(6)] == dense.tolist()
    assert s.max() == dense.max()
    assert TurnScores.of(-np.ones(3)).max() == -1.0  # every turn scored: no implicit 0
    assert TurnScores.of(dense[:2]).max() == 0.0  # an absent turn is 0
    assert TurnScores.of(np.zeros(0)).max() == 0.0
    assert TurnScores.of(np.zeros(4)).get(3) == 0.0


def test_fuse_reads_scores_at_or_below_zero_as_the_dense_fusion(corpus):
    """Not BM25's (its sums are positive), but a dense caller's arrays may hold them: a
    turn scoring <= 0 is live only through another part, and then reads its own score."""
    ti, chunk_ids = corpus["ti"], corpus["chunk_ids"]
    chunk_row = {c: i for i, c in enumerate(chunk_ids)}
    rng = np.random.default_rng(13)
    n = len(ti)
    for density in (0.01, 0.3, 0.9):
        own = np.where(rng.random(n) < density, rng.normal(size=n), 0.0)
        ctx = np.where(rng.random(n) < density, rng.normal(size=n), 0.0)
        ranked = [
            (chunk_ids[i], float(5 - k))
            for k, i in enumerate(rng.choice(len(chunk_ids), 5, replace=False))
        ]
        for w in (TurnWeights(), TurnWeights(0.6, 0.1, 0.3, 0.5)):
            want = dense_fuse(ti, ranked, chunk_row, chunk_ids, own, ctx, w, 20)
            got = ti.fuse(ranked, chunk_row, chunk_ids, own, ctx, w, 20)
            _assert_same_fused(got, want)
            sparse = TurnScores.of(own), TurnScores.of(ctx)
            _assert_same_fused(ti.fuse(ranked, chunk_row, chunk_ids, *sparse, w, 20), want)
