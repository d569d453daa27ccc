"""The dense side of an index version: the embedding matrices per representation and their
approximate-nearest-neighbour graphs (HNSW or IVF), reusing the previous version's graph when
its vectors are unchanged.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

from memory_pipeline.core.indexes import hnsw as H
from memory_pipeline.core.indexes.ivf import build_ivf, save_ivf
from memory_pipeline.core.indexes.segments import (
    DensePart,
    RepRows,
    SplitChunk,
    assemble,
    same_as_previous,
)

ANN_KINDS = ("hnsw", "ivf")  # the graph's code and parameters: hnsw.py


# the chunk_embeddings columns build_dense reads (the vectors are ~93 % of the table's bytes,
# but the rest is decoded on every refresh too when read)
DENSE_COLUMNS = ("chunk_id", "representation", "piece", "provider", "model", "dim", "vector")


def build_dense(
    embeddings: pa.Table | Sequence[DensePart],
    folder: Path,
    hnsw_threshold: int = 50_000,
    ann_kind: str = "hnsw",
    previous: Path | None = None,
) -> dict:
    """Per representation: an (n, dim) float32 matrix (exact search), and an approximate
    index when n >= ``hnsw_threshold``: the HNSW graph (``ann_kind="hnsw"``, usearch, int8,
    re-scored exactly) or an IVF index (``"ivf"``, ``ivf.py``: faster to build, lower recall
    on USE vectors; kept for measurement). Rows with a provider error are left out. A chunk
    whose text exceeded the model window has one row per piece (its id repeats in
    ``<rep>.ids.json``; search scores it by its best piece). The metadata records provider,
    model, dimension and, for a packaged local model, its window, so queries are embedded by
    the same model.

    ``embeddings`` is one table (its rows in (chunk_id, piece) order, one segment) or the
    stored partitions as :class:`~memory_pipeline.core.indexes.segments.DensePart` (monthly
    segments, ``segments.py``): with ``previous`` (the published version folder, only read)
    a refresh decodes and writes only the changed days, and a representation whose previous
    graph was built alike is updated from it (the new and gone pieces only) instead of
    rebuilt: the nightly refresh adds ~1 % of the pieces. ``<rep>_ann_build`` in the stats
    says which ("full"/"incremental", with the counts and, for a full build, why)."""
    from memory_pipeline.core.represent.providers.factory import local_model_info

    if ann_kind not in ANN_KINDS:
        raise ValueError(f"ann_kind must be one of {ANN_KINDS}, got {ann_kind!r}")
    dense = folder / "dense"
    dense.mkdir(parents=True, exist_ok=True)
    if isinstance(embeddings, pa.Table):
        table = embeddings
        parts = [DensePart("all", None, lambda: table)]
    else:
        parts = list(embeddings)
    try:
        rows, stats = assemble(parts, dense, previous, H.piece_keys)
    except SplitChunk:  # a chunk in two partitions: one table, one segment, as before parts
        for stale in dense.iterdir():
            stale.unlink()
        table = pa.concat_tables([p.load() for p in parts]) if parts else None
        rows, stats = assemble([DensePart("all", None, lambda: table)], dense, None, H.piece_keys)
    meta = {}
    for rep, r in sorted(rows.items()):
        (dense / f"{rep}.ids.json").write_text(json.dumps(r.ids), encoding="utf-8")
        np.save(dense / f"{rep}{H.KEYS_SUFFIX}", r.keys)
        ann = None
        if len(r.ids) >= hnsw_threshold:  # too big to scan per query
            t0, c0 = time.perf_counter(), time.process_time()
            if ann_kind == "ivf":
                ann = save_ivf(build_ivf(np.asarray(r.matrix)), dense, rep)
            else:
                ann = _dense_graph(r, dense, rep, previous)
                shown = ("build", "added", "removed", "removed_since_full", "pending")
                shown += ("full_reason",)
                stats |= {f"{rep}_ann_{k}": ann[k] for k in shown if k in ann}
            stats[f"{rep}_ann_build_s"] = round(time.perf_counter() - t0, 3)
            stats[f"{rep}_ann_build_cpu_s"] = round(time.process_time() - c0, 3)
        info = local_model_info(r.model) if r.provider == "local" else None
        meta[rep] = {
            "count": len(r.ids),
            "chunks": len(set(r.ids)),
            "split_chunks": _split_chunks(r.ids),
            "dim": r.dim,
            "provider": r.provider,
            "model": r.model,
            "window": info[1] if info else None,
            "hnsw": bool(ann) and ann["kind"] == "hnsw",
            "ann": ann,
        }
        stats[f"{rep}_vectors"] = len(r.ids)
    (dense / "meta.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
    stats["hnsw_threshold"] = hnsw_threshold
    return stats


def _split_chunks(ids: Sequence[str]) -> int:
    """Chunks with more than one piece (a chunk's pieces are consecutive rows): the runs
    of equal ids longer than one, counted on whole columns (a Python loop over every piece
    held the GIL for the other threads of the refresh)."""
    same = same_as_previous(pa.array(ids, pa.string()))
    # a run starts where a row equals the one before and that one did not equal its own
    starts = same.copy()
    starts[1:] &= ~same[:-1]
    return int(starts.sum())


def _dense_graph(r: RepRows, dense: Path, rep: str, previous: Path | None) -> dict:
    """``rep``'s HNSW graph with stable piece keys, carried over from ``previous`` when it
    can be (``hnsw.save_graph``: same parameters and identity, i.e. provider, model and
    dim; only the rows decoded this build are compared); returns the ann metadata. Keys
    that collide (a repeated (chunk_id, piece)) fall back to row keys and a full build, as
    before stable keys."""
    if len(np.unique(r.keys)) != len(r.keys):
        (dense / f"{rep}{H.KEYS_SUFFIX}").unlink(missing_ok=True)
        ann = H.save_full(r.matrix, dense / f"{rep}.usearch")
        return ann | {"build": "full", "full_reason": "duplicate piece keys"}
    identity = {"dim": r.dim, "provider": r.provider, "model": r.model}
    prev, why = H.usable_previous(previous, rep, identity)
    ann = H.save_graph(r.matrix, r.keys, dense / f"{rep}.usearch", prev, r.fresh)
    return ann | {"full_reason": why} if prev is None else ann
