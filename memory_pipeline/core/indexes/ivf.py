"""An inverted-file (IVF) index over a dense matrix: pure numpy, deterministic, exact scores.

Why not the HNSW graph: on all RealPersonaChat (230k piece vectors of 512-d) usearch's graph
build did not finish in 17 minutes on a loaded 2-core machine (graph inserts are latency-bound
and starve under load), and its graph depends on thread timing. An IVF build is a few BLAS
matrix products (spherical k-means on a seeded sample, then one assignment pass), so it
finishes in about a minute there and gives the same lists on every build of the same matrix
(up to float rounding in the products).

Search probes the ``nprobe`` lists whose centroids are nearest the query and scores every
vector in them exactly (the rows are stored list by list, so each probe is one contiguous
matrix-vector product). So the index is approximate only in which vectors it scores: a
returned score is the exact inner product.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["IvfIndex", "build_ivf", "default_lists", "default_probes", "load_ivf", "save_ivf"]

SEED = 20221105
ITERATIONS = 8
SAMPLE_PER_LIST = 48  # k-means trains on this many sampled rows per list
BLOCK = 16_384  # rows per assignment product (bounds the transient to BLOCK x lists floats)
PROBE_SHARE = 0.05  # lists probed per query, as a share of all lists (measured: README)
MIN_PROBES = 8


def default_lists(n: int) -> int:
    """~sqrt(n) lists (the usual IVF rule: list length and list count balance)."""
    return max(1, min(n, int(round(math.sqrt(n)))))


def default_probes(n_lists: int) -> int:
    """Lists probed per query: ``PROBE_SHARE`` of them, at least ``MIN_PROBES``."""
    return max(1, min(n_lists, max(MIN_PROBES, math.ceil(PROBE_SHARE * n_lists))))


@dataclass
class IvfIndex:
    """``vectors`` (list-ordered copy of the matrix) with ``rows`` (each one's row in the
    original matrix), list ``offsets`` (list i is ``offsets[i]:offsets[i + 1]``) and the
    unit ``centroids``; ``nprobe`` lists are scored per query."""

    centroids: np.ndarray
    offsets: np.ndarray
    rows: np.ndarray
    vectors: np.ndarray
    nprobe: int

    def search(self, q: np.ndarray, nprobe: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(original rows, exact inner products) of every vector in the probed lists."""
        probes = min(nprobe or self.nprobe, len(self.centroids))
        near = self.centroids @ q
        lists = np.argpartition(-near, probes - 1)[:probes] if probes < len(near) else None
        lists = np.sort(lists) if lists is not None else np.arange(len(near))
        parts, idx = [], []
        for i in lists.tolist():
            a, b = int(self.offsets[i]), int(self.offsets[i + 1])
            if b > a:
                parts.append(self.vectors[a:b] @ q)
                idx.append(self.rows[a:b])
        if not parts:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        return np.concatenate(idx).astype(np.int64, copy=False), np.concatenate(parts)


def _assign(matrix: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """Nearest centroid (largest inner product) of each row, in blocks."""
    out = np.empty(len(matrix), dtype=np.int64)
    ct = np.ascontiguousarray(centroids.T)
    for a in range(0, len(matrix), BLOCK):
        out[a : a + BLOCK] = np.argmax(np.asarray(matrix[a : a + BLOCK]) @ ct, axis=1)
    return out


def _unit(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms > 0, norms, 1.0)


def build_ivf(matrix: np.ndarray, n_lists: int | None = None, *, seed: int = SEED) -> IvfIndex:
    """Spherical k-means (``ITERATIONS`` rounds on a seeded sample of the rows), then every
    row assigned to its nearest centroid; a list left empty by training keeps its previous
    centroid (it may stay empty: search skips it)."""
    matrix = np.asarray(matrix, dtype=np.float32)
    n = len(matrix)
    if n == 0:
        raise ValueError("cannot build an IVF index over no vectors")
    k = default_lists(n) if n_lists is None else max(1, min(int(n_lists), n))
    rng = np.random.default_rng(seed)
    sample_n = min(n, k * SAMPLE_PER_LIST)
    sample = matrix[np.sort(rng.choice(n, sample_n, replace=False))]
    centroids = _unit(sample[np.sort(rng.choice(sample_n, k, replace=False))].copy())
    for _ in range(ITERATIONS):
        labels = _assign(sample, centroids)
        order = np.argsort(labels, kind="stable")
        sorted_labels = labels[order]
        starts = np.flatnonzero(np.r_[True, sorted_labels[1:] != sorted_labels[:-1]])
        # the sum of each non-empty list's rows (reduceat over the rows grouped by list)
        sums = np.add.reduceat(sample[order], starts, axis=0)
        centroids[sorted_labels[starts]] = _unit(sums)
    labels = _assign(matrix, centroids)
    order = np.argsort(labels, kind="stable")  # rows ascending within each list
    offsets = np.zeros(k + 1, dtype=np.int64)
    np.cumsum(np.bincount(labels, minlength=k), out=offsets[1:])
    return IvfIndex(
        centroids=centroids.astype(np.float32),
        offsets=offsets,
        rows=order.astype(np.int32),
        vectors=np.ascontiguousarray(matrix[order]),
        nprobe=default_probes(k),
    )


def save_ivf(index: IvfIndex, folder: Path, rep: str) -> dict:
    """``<rep>.ivf.npy`` (list-ordered vectors, memory-mappable) and ``<rep>.ivf.npz``
    (centroids, offsets, rows) in ``folder``; returns the metadata to record."""
    np.save(folder / f"{rep}.ivf.npy", index.vectors)
    np.savez(
        folder / f"{rep}.ivf.npz",
        centroids=index.centroids,
        offsets=index.offsets,
        rows=index.rows,
        params=np.array([json.dumps({"nprobe": index.nprobe})]),
    )
    return {"kind": "ivf", "lists": len(index.centroids), "nprobe": index.nprobe}


def load_ivf(folder: Path, rep: str) -> IvfIndex | None:
    """The saved index (vectors memory-mapped), or None when ``folder`` has none."""
    npz, npy = folder / f"{rep}.ivf.npz", folder / f"{rep}.ivf.npy"
    if not (npz.is_file() and npy.is_file()):
        return None
    with np.load(npz) as z:
        params = json.loads(str(z["params"][0]))
        return IvfIndex(
            centroids=z["centroids"],
            offsets=z["offsets"],
            rows=z["rows"],
            vectors=np.load(npy, mmap_mode="r"),
            nprobe=int(params["nprobe"]),
        )
