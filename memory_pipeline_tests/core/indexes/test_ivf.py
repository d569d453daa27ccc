"""The IVF index: exact scores, every row reachable, deterministic, near-exact on clusters."""

from __future__ import annotations

import numpy as np
import pytest

from memory_pipeline.core.indexes.ivf import (
    build_ivf,
    default_lists,
    default_probes,
    load_ivf,
    save_ivf,
)


def _clustered(n: int, dim: int = 64, clusters: int = 40, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((clusters, dim)).astype(np.float32)
    x = centers[rng.integers(0, clusters, n)] + 0.35 * rng.standard_normal((n, dim)).astype(
        np.float32
    )
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def test_scores_are_exact_and_all_lists_cover_every_row():
    m = _clustered(3000)
    ix = build_ivf(m)
    assert len(ix.centroids) == default_lists(3000) and ix.nprobe == default_probes(55)
    assert ix.offsets[-1] == 3000 and sorted(ix.rows.tolist()) == list(range(3000))
    q = m[17]
    rows, scores = ix.search(q)
    assert 0 < rows.size < 3000  # probes a part
    assert np.allclose(scores, m[rows] @ q, atol=1e-6)
    assert 17 in rows.tolist()  # a stored vector finds itself
    rows_all, _ = ix.search(q, nprobe=len(ix.centroids))
    assert sorted(rows_all.tolist()) == list(range(3000))


def test_recall_on_clustered_vectors_and_determinism(tmp_path):
    m = _clustered(6000, seed=5)
    rng = np.random.default_rng(9)
    queries = m[rng.choice(len(m), 50, replace=False)] + 0.2 * rng.standard_normal(
        (50, m.shape[1])
    ).astype(np.float32)
    ix = build_ivf(m)
    recall = []
    for q in queries:
        exact = set(np.argsort(-(m @ q))[:10].tolist())
        rows, scores = ix.search(q)
        got = set(rows[np.argsort(-scores)[:10]].tolist())
        recall.append(len(exact & got) / 10)
    assert np.mean(recall) >= 0.9, np.mean(recall)
    again = build_ivf(m)
    assert np.array_equal(again.rows, ix.rows) and np.array_equal(again.offsets, ix.offsets)
    meta = save_ivf(ix, tmp_path, "rep")
    assert meta == {"kind": "ivf", "lists": len(ix.centroids), "nprobe": ix.nprobe}
    loaded = load_ivf(tmp_path, "rep")
    assert loaded is not None and isinstance(loaded.vectors, np.memmap)
    for q in queries[:5]:
        a, b = ix.search(q), loaded.search(q)
        assert np.array_equal(a[0], b[0]) and np.allclose(a[1], b[1])
    assert load_ivf(tmp_path, "other") is None


def test_small_and_empty_inputs():
    m = _clustered(5)
    ix = build_ivf(m)
    rows, scores = ix.search(m[0])
    assert sorted(rows.tolist()) == list(range(5))  # fewer lists than probes: all scored
    with pytest.raises(ValueError, match="no vectors"):
        build_ivf(np.zeros((0, 8), np.float32))
