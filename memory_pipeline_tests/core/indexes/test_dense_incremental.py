"""The HNSW graph carried over from the previous version: stable keys, incremental updates
that search like the exact scan, full rebuilds when the previous graph does not fit."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from memory_pipeline.core.indexes import hnsw as H
from memory_pipeline.core.indexes.publish import build_dense

DIM = 32
THRESHOLD = 100


def _vectors(n: int, seed: int, dim: int = DIM) -> np.ndarray:
    """Unit vectors around 30 cluster centres (text embeddings cluster; pure noise in few
    dimensions would make every neighbour list a tie)."""
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((30, dim))
    x = centers[rng.integers(0, 30, n)] + 0.5 * rng.standard_normal((n, dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _table(pieces: dict[tuple[str, int], np.ndarray], model: str = "m") -> pa.Table:
    items = sorted(pieces.items())
    dim = len(items[0][1])
    return pa.table(
        {
            "chunk_id": [c for (c, _), _ in items],
            "representation": ["summary"] * len(items),
            "piece": pa.array([p for (_, p), _ in items], pa.int32()),
            "provider": ["test"] * len(items),
            "model": [model] * len(items),
            "dim": [dim] * len(items),
            "vector": pa.array([v.tolist() for _, v in items], pa.list_(pa.float32())),
        }
    )


def _corpus(n_chunks: int, seed: int, start: int = 0, dim: int = DIM) -> dict:
    """``n_chunks`` chunks, every 10th split into two pieces."""
    names = [(f"c{start + i:06d}", p) for i in range(n_chunks) for p in range(1 + (i % 10 == 0))]
    return dict(zip(names, _vectors(len(names), seed, dim), strict=True))


def _queries(pieces: dict, n: int = 100, seed: int = 9) -> np.ndarray:
    """Queries near the stored vectors (as real queries are near some texts): every stored
    vector's ``len/n``-th, plus noise 0.3 (per dimension, before normalizing)."""
    data = np.array([pieces[k] for k in sorted(pieces)])
    data = data[:: max(1, len(data) // n)][:n]
    q = data + 0.2 * np.random.default_rng(seed).standard_normal(data.shape)
    return (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)


def _build(tmp: Path, name: str, pieces: dict, previous: Path | None = None, **kw) -> tuple:
    folder = tmp / name
    folder.mkdir()
    stats = build_dense(_table(pieces, **kw), folder, THRESHOLD, previous=previous)
    meta = json.loads((folder / "dense" / "meta.json").read_text())["summary"]
    return folder, stats, meta


def _digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _search(folder: Path, q: np.ndarray, k: int = 10, keys_file: bool = True) -> np.ndarray:
    """Rows of the top ``k`` as the searcher finds them: ask the graph for 2k pieces, map
    keys to rows, rescore exactly (searcher._dense_ann)."""
    from usearch.index import Index

    dense = folder / "dense"
    matrix = np.load(dense / "summary.npy")
    index = Index.restore(str(dense / "summary.usearch"), view=True)
    index.expansion_search = 64
    keys_path = dense / f"summary{H.KEYS_SUFFIX}" if keys_file else dense / "none"
    key_rows = H.KeyRows(keys_path, len(matrix))
    pending = key_rows.rows(H.load_pending(dense, "summary").astype(np.uint64))
    rows = np.unique(np.concatenate([key_rows.rows(index.search(q, 2 * k).keys), pending]))
    return rows[np.argsort(-(matrix[rows] @ q), kind="stable")][:k]


def _recall(folder: Path, queries: np.ndarray, k: int = 10) -> float:
    matrix = np.load(folder / "dense" / "summary.npy")
    got = []
    for q in queries:
        exact = set(np.argsort(-(matrix @ q))[:k].tolist())
        got.append(len(exact & set(_search(folder, q, k).tolist())) / k)
    return float(np.mean(got))


@pytest.fixture
def merge_every_night(monkeypatch):
    """No deferred merge: every carried-over graph is updated in place (the mechanics the
    deferral runs when its pending share is reached)."""
    monkeypatch.setattr(H, "MAX_PENDING_SHARE", -1.0)


def test_incremental_update_searches_like_the_exact_scan_and_leaves_the_previous_alone(
    tmp_path, merge_every_night
):
    base = _corpus(3000, seed=1)
    v1, s1, m1 = _build(tmp_path, "v1", base)
    assert m1["ann"]["build"] == "full" and m1["ann"]["keys"] == "content"
    assert s1["summary_ann_build"] == "full" and s1["summary_ann_full_reason"]
    before = _digest(v1)
    names = sorted(base)
    gone = {names[i] for i in range(0, len(names), 200)}  # ~0.5 %
    changed = names[7]  # same chunk_id, a re-embedded text
    night = {k: v for k, v in base.items() if k not in gone}
    night |= _corpus(30, seed=2, start=5000)  # ~1 %
    night[changed] = _vectors(1, seed=3)[0]
    v2, s2, m2 = _build(tmp_path, "v2", night, previous=v1)
    ann = m2["ann"]
    new_pieces = 30 + 3  # every 10th of the 30 new chunks has two pieces
    assert ann["build"] == "incremental" and s2["summary_ann_build"] == "incremental"
    assert ann["added"] == new_pieces + 1 and ann["removed"] == len(gone) + 1
    assert ann["removed_since_full"] == len(gone) + 1 and "summary_ann_full_reason" not in s2
    assert _digest(v1) == before  # readers may have the previous version open
    keys = np.load(v2 / "dense" / f"summary{H.KEYS_SUFFIX}")
    assert len(keys) == m2["count"] == len(night)
    assert np.array_equal(
        keys, H.piece_keys([c for c, _ in sorted(night)], [p for _, p in sorted(night)])
    )

    queries = _queries(night)
    recall = _recall(v2, queries)
    scratch, _, _ = _build(tmp_path, "scratch", night)  # the same night, built in full
    # measured over 12 builds (the graph depends on thread timing): incremental mean 0.9935,
    # min 0.972; the same night built in full mean 0.995, at most 0.025 better. Noise 0.3
    # gave 0.963 / min 0.95 (full 0.955 / 0.943): too close for a bound. A lost key mapping
    # gives 0.0, a graph worse than a full build's fails the second bound
    assert recall >= 0.95, recall
    assert recall >= _recall(scratch, queries) - 0.05
    # a content-keyed graph read as if keys were rows finds nothing: the mapping matters
    assert _search(v2, queries[0], keys_file=False).size == 0

    # removed pieces never come back, even asked with their own vectors
    matrix2 = np.load(v2 / "dense" / "summary.npy")
    gone_keys = set(H.piece_keys([c for c, _ in gone], [p for _, p in gone]).tolist())
    for name in gone:
        rows = _search(v2, base[name], k=10)
        assert not gone_keys & set(keys[rows].tolist())
        assert np.allclose(matrix2[rows] @ base[name], np.sort(matrix2 @ base[name])[::-1][:10])
    # the changed piece is found by its new vector, at its own row
    row = sorted(night).index(changed)
    assert _search(v2, night[changed], k=1).tolist() == [row]

    # a night without change is an incremental no-op
    v3, s3, m3 = _build(tmp_path, "v3", night, previous=v2)
    assert (m3["ann"]["build"], m3["ann"]["added"], m3["ann"]["removed"]) == ("incremental", 0, 0)
    assert m3["ann"]["removed_since_full"] == ann["removed_since_full"]


@pytest.mark.parametrize("what", ["model", "dim", "params", "large change", "no keys"])
def test_a_previous_graph_that_does_not_fit_means_a_full_build(tmp_path, monkeypatch, what):
    base = _corpus(1000, seed=4)
    if what == "no keys":  # a version built before stable keys: keys are rows
        v1 = tmp_path / "v1"
        build_dense(_table(base), v1, THRESHOLD)
        dense = v1 / "dense"
        (dense / f"summary{H.KEYS_SUFFIX}").unlink()
        meta = json.loads((dense / "meta.json").read_text())
        meta["summary"]["ann"] = H.save_full(
            np.load(dense / "summary.npy"), dense / "summary.usearch"
        )
        (dense / "meta.json").write_text(json.dumps(meta))
        # and it still searches: keys are rows without the keys file
        q = _vectors(1, seed=8)[0]
        matrix = np.load(dense / "summary.npy")
        assert _search(v1, q, keys_file=False)[0] == int(np.argmax(matrix @ q))
    else:
        v1, _, _ = _build(tmp_path, "v1", base)
    before = _digest(v1)
    night, kw = dict(base), {}
    if what == "model":
        kw = {"model": "m2"}
    elif what == "dim":
        night = {k: _vectors(1, seed=i, dim=DIM + 8)[0] for i, k in enumerate(base)}
    elif what == "params":
        monkeypatch.setattr(H, "HNSW_EXPANSION_ADD", 32)
    elif what == "large change":
        names = sorted(base)
        night = {k: v for k, v in base.items() if k not in set(names[:150])}
        night |= _corpus(100, seed=5, start=9000)  # 150+ removed + 110 added > 20 % of n
    v2, stats, meta = _build(tmp_path, "v2", night, previous=v1, **kw)
    assert meta["ann"]["build"] == "full" and stats["summary_ann_build"] == "full"
    assert meta["ann"]["removed_since_full"] == 0
    reasons = {
        "model": "provider, model or dim changed",
        "dim": "provider, model or dim changed",
        "params": "ann parameters changed",
        "large change": "large change",
        "no keys": "previous graph has no stable keys",
    }
    assert stats["summary_ann_full_reason"] == reasons[what]
    assert _digest(v1) == before
    assert _recall(v2, _queries(night, 30)) >= 0.95


def test_removals_accumulate_until_a_full_build_resets_them(tmp_path, merge_every_night):
    pieces = _corpus(1000, seed=7)
    n = len(pieces)
    prev, _, _ = _build(tmp_path, "v0", pieces)
    builds = []
    for night in range(1, 5):  # ~4 % removed a night: the third crosses 10 % since full
        names = sorted(pieces)
        pieces = {k: v for k, v in pieces.items() if k not in set(names[: n // 25])}
        pieces |= _corpus(n // 25, seed=10 + night, start=10_000 * night)
        prev, stats, meta = _build(tmp_path, f"v{night}", pieces, previous=prev)
        builds.append((meta["ann"]["build"], meta["ann"]["removed_since_full"]))
    assert [b for b, _ in builds] == ["incremental", "incremental", "full", "incremental"]
    assert builds[2][1] == 0 and 0 < builds[3][1] <= H.MAX_REMOVED_SHARE * n
    assert stats["summary_ann_build"] == "incremental"


def test_key_rows_maps_keys_to_rows_and_drops_unknown(tmp_path):
    keys = np.array([50, 7, 99, 3], dtype=np.int64)
    np.save(tmp_path / "k.npy", keys)
    m = H.KeyRows(tmp_path / "k.npy", 4)
    got = m.rows(np.array([99, 3, 12345, 2**64 - 1], dtype=np.uint64))
    assert got.tolist() == [2, 3]
    rows = H.KeyRows(tmp_path / "missing.npy", 4)
    assert rows.rows(np.array([1, 3, 4, 2**64 - 1], dtype=np.uint64)).tolist() == [1, 3]
    assert H.piece_keys(["a", "a"], [0, 1]).min() >= 0
    assert len(set(H.piece_keys(["a", "a", "b"], [0, 1, 0]).tolist())) == 3


def test_a_small_night_defers_the_merge_and_search_still_finds_every_new_piece(tmp_path):
    """Below MAX_PENDING_SHARE a night leaves the graph file alone (a hard link to the
    previous version's) and lists the pieces the graph lacks; search scores those exactly,
    so a new or re-embedded piece is found by its own vector and a gone one never comes
    back. Nights accumulate pending pieces until the share is reached: that night merges
    them into a copy of the graph (remove the outdated entries, add the pending pieces) and
    the list is empty again."""
    base = _corpus(2000, seed=21)
    v1, _, m1 = _build(tmp_path, "v1", base)
    n = m1["count"]
    names = sorted(base)
    gone = {names[i] for i in range(5, len(names), 400)}
    changed = names[11]
    night = {k: v for k, v in base.items() if k not in gone}
    night |= _corpus(10, seed=22, start=7000)  # 11 new pieces
    night[changed] = _vectors(1, seed=23)[0]
    v2, s2, m2 = _build(tmp_path, "v2", night, previous=v1)
    ann = m2["ann"]
    assert ann["build"] == "deferred" and s2["summary_ann_build"] == "deferred"
    assert (ann["added"], ann["removed"]) == (11 + 1, len(gone) + 1)
    assert ann["pending"] == 12 and ann["graph_count"] == n
    graph = v2 / "dense" / "summary.usearch"
    assert graph.stat().st_ino == (v1 / "dense" / "summary.usearch").stat().st_ino
    keys = np.load(v2 / "dense" / f"summary{H.KEYS_SUFFIX}")
    new = [k for k in sorted(night) if k not in base or k == changed]
    want = H.piece_keys([c for c, _ in new], [p for _, p in new])
    assert np.array_equal(H.load_pending(v2 / "dense", "summary"), np.sort(want))
    order = sorted(night)
    for name in new:  # found by its own vector, at its own row, best first
        assert _search(v2, night[name], k=1).tolist() == [order.index(name)]
    gone_keys = set(H.piece_keys([c for c, _ in gone], [p for _, p in gone]).tolist())
    for name in gone:
        assert not gone_keys & set(keys[_search(v2, base[name], k=10)].tolist())
    assert _recall(v2, _queries(night)) >= 0.95

    # the pending pieces carry over night after night, then one night merges them
    prev, builds, pieces = v2, [], night
    for k in range(1, 8):
        pieces = pieces | _corpus(20, seed=30 + k, start=8000 + 100 * k)
        prev, _, meta = _build(tmp_path, f"n{k}", pieces, previous=prev)
        builds.append((meta["ann"]["build"], meta["ann"]["pending"]))
        if meta["ann"]["build"] == "incremental":
            break
    *deferred, (merged, pending_after) = builds
    assert merged == "incremental" and pending_after == 0 and deferred
    assert all(b == "deferred" for b, _ in deferred)
    assert [p for _, p in deferred] == sorted(p for _, p in deferred)  # they accumulate
    assert deferred[-1][1] + len(gone) + 1 <= H.MAX_PENDING_SHARE * len(pieces)
    assert not H.pending_path(prev / "dense", "summary").exists()
    from usearch.index import Index

    merged_graph = Index.restore(str(prev / "dense" / "summary.usearch"), view=True)
    assert len(merged_graph) == len(pieces)  # outdated entries removed, pending ones added
    assert _recall(prev, _queries(pieces)) >= 0.95
    for name in new:
        assert _search(prev, pieces[name], k=1).tolist() == [sorted(pieces).index(name)]
