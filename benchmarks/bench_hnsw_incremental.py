"""The HNSW graph: full build vs the incremental nightly update (core/indexes/hnsw.py).

Synthetic vectors (not real embeddings): 80,000 x 512 unit vectors, ``random`` (uniform on
the sphere) or ``clustered`` (around 2,000 random centres). One full build, then a night
(-0.5 %, +1 %) applied incrementally and, for comparison, the same night built in full;
then nine more incremental nights and a full build of the last. Process CPU seconds of each
build; top-10 recall vs the exact scan on 200 random queries and 200 queries near stored
vectors, searched as the searcher does (ask 20, map keys to rows, rescore exactly).

Usage (from the repository root; ~2 min per kind on 2 cores)::

    PYTHONPATH=. /work/main/.venv/bin/python benchmarks/bench_hnsw_incremental.py clustered
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from memory_pipeline.core.indexes import hnsw as H

N, DIM = 80_000, 512
# this bench times the merge itself (restore, remove, add, save) every night: no deferral
H.MAX_PENDING_SHARE = -1.0


def main(kind: str) -> dict:
    from usearch.index import Index

    rng = np.random.default_rng(0)
    tmp = Path(tempfile.mkdtemp())

    def unit(n: int) -> np.ndarray:
        x = rng.standard_normal((n, DIM)).astype(np.float32)
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    centers = unit(2000)

    def data(n: int) -> np.ndarray:
        if kind == "random":
            return unit(n)
        x = centers[rng.integers(0, len(centers), n)]
        x = x + rng.standard_normal((n, DIM)).astype(np.float32) / np.sqrt(DIM)
        return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)

    def keys_of(prefix: str, n: int) -> np.ndarray:
        return H.piece_keys([f"{prefix}{i}" for i in range(n)], [0] * n)

    matrix, keys = data(N), keys_of("c", N)
    near = matrix[rng.choice(N, 200, replace=False)]
    near = near + 0.5 * rng.standard_normal(near.shape).astype(np.float32) / np.sqrt(DIM)
    queries = {"random_q": unit(200), "near_q": near / np.linalg.norm(near, axis=1)[:, None]}

    def recall(path: Path, m: np.ndarray, k_: np.ndarray, k: int = 10) -> dict:
        np.save(tmp / "k.npy", k_)
        rows_of = H.KeyRows(tmp / "k.npy", len(m))
        index = Index.restore(str(path), view=True)
        index.expansion_search = 64
        out = {}
        for name, qs in queries.items():
            exact = np.argsort(-(qs @ m.T), axis=1)[:, :k]
            got = []
            for q, ex in zip(qs, exact, strict=True):
                rows = np.unique(rows_of.rows(index.search(q, 2 * k).keys))
                top = rows[np.argsort(-(m[rows] @ q))][:k]
                got.append(len(set(top.tolist()) & set(ex.tolist())) / k)
            out[name] = round(float(np.mean(got)), 4)
        return out

    def night(m: np.ndarray, k_: np.ndarray, label: str) -> tuple[np.ndarray, np.ndarray]:
        keep = np.setdiff1d(np.arange(len(m)), rng.choice(len(m), len(m) // 200, replace=False))
        add = len(m) // 100
        new = np.ascontiguousarray(np.vstack([m[keep], data(add)]))
        return new, np.concatenate([k_[keep], keys_of(label, add)])

    def timed(fn, *a) -> tuple[dict, float]:
        c0 = time.process_time()
        out = fn(*a)
        return out, round(time.process_time() - c0, 2)

    res: dict = {"kind": kind, "load_before": os.getloadavg()[0]}
    ann, res["full_cpu_s"] = timed(H.save_full, matrix, tmp / "v0.usearch", keys)
    res["recall_full"] = recall(tmp / "v0.usearch", matrix, keys)
    cur, cur_k, path = matrix, keys, tmp / "v0.usearch"
    cpus = []
    for i in range(1, 11):
        np.save(tmp / "prev.npy", cur)
        prev = H.Previous(path, cur_k, np.load(tmp / "prev.npy", mmap_mode="r"), ann)
        cur, cur_k = night(cur, cur_k, f"n{i}_")
        path = tmp / f"v{i}.usearch"
        ann, cpu = timed(H.save_graph, cur, cur_k, path, prev)
        assert ann["build"] == "incremental", ann
        cpus.append(cpu)
        if i in (1, 10):
            res[f"recall_incremental_night{i}"] = recall(path, cur, cur_k)
            _, res[f"full_night{i}_cpu_s"] = timed(H.save_full, cur, tmp / "full.usearch", cur_k)
            res[f"recall_full_night{i}"] = recall(tmp / "full.usearch", cur, cur_k)
    res["incremental_cpu_s"] = cpus
    res["removed_since_full_night10"] = ann["removed_since_full"]
    res["load_after"] = os.getloadavg()[0]
    return res


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1] if len(sys.argv) > 1 else "clustered"), indent=1))
