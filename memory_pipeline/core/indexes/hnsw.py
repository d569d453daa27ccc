"""The dense HNSW graph (usearch): built once, then carried from version to version.

A full build of the graph is the dense index's main cost (measured below: 13-23 CPU s per
representation at 80k pieces), while a night adds ~1 % new chunks. So the graph's keys are
*stable*: each piece's key is a 63-bit hash of its content identity (``chunk_id`` is a
content hash, plus the piece number), not its matrix row, which shifts whenever a chunk is
inserted before it. The keys are written beside the matrix (``<rep>.keys.npy``, int64,
aligned with the rows) and the searcher maps returned keys back to rows (``KeyRows``).

A refresh with a small change does not touch the graph: the previous version's file is
hard-linked and the pieces it lacks are listed beside it (a deferred merge, see
``MAX_PENDING_SHARE``; the searcher scores them exactly). Once they add up, a refresh
restores the previous version's graph (an in-memory copy: the previous folder is never
written, readers may have it open), removes the entries that are gone or outdated, adds the
pending pieces and saves the result into the new version. It falls
back to a full build when there is no compatible previous graph, when the change is large,
or when removals have piled up since the last full build (a removed node stays in the
graph as a tombstone routing searches: too many of them degrade it; the count is kept in the
ann metadata as ``removed_since_full``). A tombstone also keeps its int8 vector in the file
until the next full build; forget and retention delete every index version
(``core/privacy``), so the build after them is a full one and keeps nothing purged.

usearch 2.26 semantics this relies on, checked by experiment (the first two also by
``test_dense_incremental``): ``remove`` excludes a key from every later search, also after
save/restore (the file records it as deleted); ``Index.restore(path)`` without ``view``
is a mutable in-memory copy (adding to a ``view=True`` index segfaults); ``add`` with a key
already present raises ("Duplicate keys not allowed"), a removed key can be added again;
``restore`` does *not* bring back ``expansion_add`` (it comes back as the default 128), so
it is set again before adding.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

# The HNSW graph over the piece vectors: int8 in the graph, exact float32 re-scoring of what
# it returns (searcher._dense_ann). Measured on real USE vectors of RealPersonaChat (6,952
# pieces, 150 utterances; benchmarks/README.md): chunk recall@10 vs the exact scan 0.999 for
# f32/128 and i8/64, with ~6x less build CPU for i8/64; an IVF index (ivf.py) reached only
# 0.74 at 10 % of the lists probed, 0.90 at 30 %.
HNSW_DTYPE = "i8"
HNSW_CONNECTIVITY = 16
HNSW_EXPANSION_ADD = 64
HNSW_METRIC = "ip"

# When an incremental update is allowed (else: a full build). Measured 2026-12-02 by
# benchmarks/bench_hnsw_incremental.py on synthetic 80,000 x 512 unit vectors (not real
# embeddings: uniformly random, and clustered around 2,000 random centres), i8/16/64, on
# 2 shared cores (load 4.2-5.0), process CPU s:
#   full build: random 20.2-23.3, clustered 12.9-14.9 CPU s;
#   incremental night (restore + remove 400 = 0.5 % + add 800 = 1 % + save): random 0.44,
#   clustered 0.39 CPU s; ten nights in a row 0.36-0.78 CPU s each (~30-50x less).
# Top-10 recall vs the exact scan (200 queries, ask 20, rescore exactly as the searcher
# does), full night 0 / incremental night 1 / full night 1 / incremental night 10 / full
# night 10 (5 % of n removed since the full build):
#   clustered, queries = stored vector + noise: 0.9995 / 0.9995 / 0.9995 / 0.9945 / 0.9995;
#   clustered, random queries: 0.29 / 0.29 / 0.27 / 0.30 / 0.31;
#   random vectors (neighbours are near-ties that an i8 graph cannot rank, whatever the
#   build): near queries 0.21 / 0.20 / 0.19 / 0.20 / 0.185, random queries 0.065-0.08.
# So an incremental graph searches like a full one, with a small loss as tombstones pile
# up (0.9995 -> 0.9945 at 5 %); 10 % bounds it, and a full build is also taken for large
# changes, where it costs little next to the change.
MAX_CHANGE_SHARE = 0.20  # added + removed (a changed vector counts twice) vs n
MAX_REMOVED_SHARE = 0.10  # removals accumulated since the last full build vs n

# Inserts run on one thread: usearch's multi-threaded add makes a different graph on every
# build of the same matrix (thread timing decides the links; 4 builds of 5,000 vectors gave
# 4 different files, on one thread 4 identical ones), so which pieces an approximate search
# returns, and a test comparing it with the exact scan, changed from run to run. One thread
# costs wall time only (the CPU seconds are the same), on the full build.
ADD_THREADS = 1

# Deferred merges (an LSM-style delta): a night whose change is small does not touch the
# graph at all. The previous version's graph file is hard-linked into the new version, and
# the pieces it does not hold as they are now (new since the graph was saved, or re-embedded)
# are listed in ``<rep>.pending.npy`` (int64 keys); the searcher scores those exactly beside
# what the graph returns, and keys the graph returns that are no longer in the matrix map to
# no row (``KeyRows``). The graph is merged (restored, its outdated entries removed, the
# pending pieces added, saved) once the pending pieces and the graph's outdated entries
# exceed MAX_PENDING_SHARE of the pieces. Why: restoring and saving the 184 MB graph of all
# RealPersonaChat holds the GIL (usearch) for ~0.5-1 s each and was the largest single cost
# of a nightly refresh (~1-1.7 s wall, ~1.2-2 s CPU of a ~7.8 s refresh, measured by
# hard-linking instead). The exact scan of the pending rows costs a query a matrix product
# over at most 5 % of the pieces (contiguous rows of the newest days).
MAX_PENDING_SHARE = 0.05
PENDING_SUFFIX = ".pending.npy"

KEYS_SUFFIX = ".keys.npy"
_KEY_MASK = (1 << 63) - 1


def piece_keys(chunk_ids: Sequence[str], pieces: Sequence[int]) -> np.ndarray:
    """The graph key of each piece: 63 bits of splitmix64(blake2b(chunk_id) + piece), int64.

    Derived from content identity (not the row), so a piece keeps its key across versions
    and an unchanged piece need not be re-inserted. The chunk id is hashed once per chunk
    (a chunk has ~20 pieces; hashing every piece's string was 1.5 s of a 276k-piece refresh)
    and the piece number mixed in by splitmix64's finalizer, in numpy. 63 bits:
    non-negative as int64 and as usearch's uint64 keys alike."""
    if len(chunk_ids) != len(pieces):
        raise ValueError(f"{len(chunk_ids)} chunk ids but {len(pieces)} pieces")
    first: dict[str, int] = {}
    where = np.fromiter(
        (first.setdefault(c, len(first)) for c in chunk_ids), np.int64, len(chunk_ids)
    )
    base = np.fromiter(
        (
            int.from_bytes(hashlib.blake2b(c.encode(), digest_size=8).digest(), "little")
            for c in first
        ),
        np.uint64,
        len(first),
    )
    z = base[where] + np.asarray(pieces, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return (z & np.uint64(_KEY_MASK)).astype(np.int64)


def _new_index(dim: int) -> Any:
    from usearch.index import Index

    return Index(
        ndim=dim,
        metric=HNSW_METRIC,
        dtype=HNSW_DTYPE,
        connectivity=HNSW_CONNECTIVITY,
        expansion_add=HNSW_EXPANSION_ADD,
    )


def params() -> dict:
    """The parameters a graph is built with: a previous graph is reused only if they match."""
    return {
        "kind": "hnsw",
        "metric": HNSW_METRIC,
        "dtype": HNSW_DTYPE,
        "connectivity": HNSW_CONNECTIVITY,
        "expansion_add": HNSW_EXPANSION_ADD,
    }


def save_full(matrix: Any, path: Path, keys: np.ndarray | None = None) -> dict:
    """Build ``matrix``'s graph from scratch and save it; returns the ann metadata. Without
    ``keys`` the keys are the row numbers (the layout before stable keys; no keys file)."""
    index = _new_index(matrix.shape[1])
    index.add(
        np.arange(matrix.shape[0], dtype=np.uint64) if keys is None else keys.astype(np.uint64),
        np.ascontiguousarray(np.asarray(matrix), dtype=np.float32),
        threads=ADD_THREADS,
    )
    index.save(str(path))
    ann = {k: v for k, v in params().items() if k != "metric"} if keys is None else params()
    if keys is not None:
        ann |= {
            "keys": "content",
            "build": "full",
            "added": int(matrix.shape[0]),
            "removed": 0,
            "count_at_full": int(matrix.shape[0]),
            "added_since_full": 0,
            "removed_since_full": 0,
        }
    return ann


@dataclass
class Previous:
    """The previous version's graph of one representation, if it can be carried over."""

    graph: Path
    keys: np.ndarray  # int64, aligned with matrix rows
    matrix: Any  # memory-mapped float32 (one array or segments.SegmentedMatrix)
    ann: dict
    # int64 keys of the pieces whose current vector the graph does not hold (deferred)
    pending: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


def pending_path(dense: Path, rep: str) -> Path:
    """Where a version lists the pieces its (carried-over) graph does not hold."""
    return Path(dense) / f"{rep}{PENDING_SUFFIX}"


def load_pending(dense: Path, rep: str) -> np.ndarray:
    """The keys a version's graph does not hold as they are now (none: empty)."""
    path = pending_path(dense, rep)
    return np.load(path) if path.is_file() else np.zeros(0, dtype=np.int64)


def usable_previous(
    previous: Path | None, rep: str, identity: Mapping[str, Any]
) -> tuple[Previous | None, str]:
    """The previous version's graph for ``rep`` and "" when it was built with the same
    parameters, for the same provider, model and dim, with stable keys; else None and why
    not (recorded in the stats)."""
    if previous is None:
        return None, "no previous version"
    dense = Path(previous) / "dense"
    try:
        meta = json.loads((dense / "meta.json").read_text(encoding="utf-8")).get(rep)
    except (OSError, ValueError):
        return None, "no previous dense metadata"
    ann = (meta or {}).get("ann") or {}
    if ann.get("keys") != "content":
        return None, "previous graph has no stable keys"
    if any(ann.get(k) != v for k, v in params().items()):
        return None, "ann parameters changed"
    if any(meta.get(k) != v for k, v in identity.items()):
        return None, "provider, model or dim changed"
    graph, keys_path = dense / f"{rep}.usearch", dense / f"{rep}{KEYS_SUFFIX}"
    if not (graph.is_file() and keys_path.is_file()):
        return None, "previous graph files missing"
    from usearch.index import Index

    from memory_pipeline.core.indexes.segments import load_matrix

    try:
        matrix = load_matrix(dense, rep)
    except (OSError, ValueError):
        return None, "previous graph files missing"
    info = Index.metadata(str(graph)) or {}
    keys = np.load(keys_path)
    try:
        pending = load_pending(dense, rep)
    except (OSError, ValueError):
        return None, "previous pending list unreadable"
    if (
        info.get("dimensions") != identity.get("dim")
        or info.get("count_present") != ann.get("graph_count", len(keys))
        or matrix.shape != (len(keys), identity.get("dim"))
    ):
        return None, "previous graph does not match its keys or matrix"
    return Previous(graph, keys, matrix, ann, pending), ""


def _changed_rows(
    new: np.ndarray, new_i: np.ndarray, old: np.ndarray, old_i: np.ndarray, block: int = 8192
) -> np.ndarray:
    """Whether ``new[new_i[j]]`` differs from ``old[old_i[j]]`` (a chunk re-embedded under
    the same chunk_id, e.g. a regenerated summary); gathered in blocks, so no full copy of
    either matrix is made."""
    out = np.zeros(len(new_i), dtype=bool)
    for s in range(0, len(new_i), block):
        a, b = new[new_i[s : s + block]], np.asarray(old[old_i[s : s + block]])
        out[s : s + block] = (a != b).any(axis=1)
    return out


def save_graph(
    matrix: Any,
    keys: np.ndarray,
    path: Path,
    prev: Previous | None,
    fresh: np.ndarray | None = None,
) -> dict:
    """Save ``matrix``'s graph (keys ``keys``) at ``path``: carried over from ``prev`` when
    the change is small enough (deferred: the previous file hard-linked and the pieces it
    lacks listed beside it; or merged into a copy of it), else built in full; returns the
    ann metadata (``build`` = deferred / incremental / full, ``added``, ``removed``, the
    counts since the last full build, ``pending``, and ``full_reason``).

    ``fresh`` (bool per row, optional) marks the rows that may differ from the previous
    version's under the same key (segments.py: the rows of the days decoded this build; the
    others are the previous version's bytes): only those are compared."""
    n = int(matrix.shape[0])
    pending_file = pending_path(path.parent, path.stem)  # path: <dense>/<rep>.usearch
    pending_file.unlink(missing_ok=True)
    if prev is None:
        return save_full(matrix, path, keys) | {"graph_count": n, "pending": 0}
    _, new_i, old_i = np.intersect1d(keys, prev.keys, assume_unique=True, return_indices=True)
    in_file = np.argsort(old_i)  # read the previous (memory-mapped) matrix in file order
    new_i, old_i = new_i[in_file], old_i[in_file]
    changed = np.zeros(len(new_i), dtype=bool)
    check = np.ones(len(new_i), dtype=bool) if fresh is None else np.asarray(fresh)[new_i]
    changed[check] = _changed_rows(matrix, new_i[check], prev.matrix, old_i[check])
    kept_new = np.zeros(n, dtype=bool)
    kept_new[new_i[~changed]] = True
    kept_old = np.zeros(len(prev.keys), dtype=bool)
    kept_old[old_i[~changed]] = True
    add_rows = np.flatnonzero(~kept_new)
    remove_keys = prev.keys[~kept_old]
    # what the carried-over graph does not hold as it is now: this night's new and changed
    # pieces, and the pieces still pending from the nights before (unchanged since)
    still = prev.pending[np.isin(prev.pending, keys)] if len(prev.pending) else prev.pending
    pending = np.union1d(keys[add_rows], still)
    # graph entries that no longer describe a current piece (gone or re-embedded): an
    # upper bound (a piece added and removed while pending never entered the graph)
    stale = int(prev.ann.get("graph_stale", 0)) + len(remove_keys)
    removed_full = int(prev.ann.get("removed_since_full", 0))
    reason = ""
    if len(add_rows) + len(remove_keys) > MAX_CHANGE_SHARE * n:
        reason = "large change"
    elif removed_full + stale > MAX_REMOVED_SHARE * n:
        reason = "removals since the last full build"
    if reason:
        return save_full(matrix, path, keys) | {
            "full_reason": reason,
            "graph_count": n,
            "pending": 0,
        }
    at_full = int(prev.ann.get("count_at_full", len(prev.keys)))
    added_full = int(prev.ann.get("added_since_full", 0))  # inserted into the graph
    if len(pending) + stale <= MAX_PENDING_SHARE * n:
        _link(prev.graph, path)  # the previous file is only read: a link, not a copy
        if len(pending):
            np.save(pending_file, pending.astype(np.int64))
        return params() | {
            "keys": "content",
            "build": "deferred",
            "added": len(add_rows),
            "removed": len(remove_keys),
            "count_at_full": at_full,
            "added_since_full": added_full,
            "removed_since_full": removed_full,
            "pending": len(pending),
            "graph_stale": stale,
            "graph_count": int(prev.ann.get("graph_count", len(prev.keys))),
        }
    from usearch.index import Index

    index = Index.restore(str(prev.graph))  # an in-memory copy: prev is not written
    index.expansion_add = HNSW_EXPANSION_ADD  # not stored in the file
    held = np.asarray(index.keys, dtype=np.uint64).astype(np.int64)
    current = np.setdiff1d(keys, pending, assume_unique=True)  # up to date where held
    remove = np.setdiff1d(held, current, assume_unique=True)  # gone or outdated entries
    if len(remove):
        index.remove(remove.astype(np.uint64))
    add = np.flatnonzero(~np.isin(keys, np.intersect1d(held, current, assume_unique=True)))
    if len(add):
        index.add(
            keys[add].astype(np.uint64),
            np.ascontiguousarray(matrix[add]),
            threads=ADD_THREADS,
        )
    if len(index) != n:  # never publish a graph that disagrees with the matrix
        return save_full(matrix, path, keys) | {
            "full_reason": "graph count mismatch",
            "graph_count": n,
            "pending": 0,
        }
    index.save(str(path))
    return params() | {
        "keys": "content",
        "build": "incremental",
        "added": len(add),
        "removed": len(remove),
        "count_at_full": at_full,
        "added_since_full": added_full + len(add),
        "removed_since_full": removed_full + len(remove),
        "pending": 0,
        "graph_stale": 0,
        "graph_count": n,
    }


def _link(src: Path, dest: Path) -> None:
    """``dest`` as a hard link to ``src`` (a copy where links are not possible)."""
    import shutil

    dest.unlink(missing_ok=True)
    try:
        dest.hardlink_to(src)
    except OSError:
        shutil.copyfile(src, dest)


class KeyRows:
    """Maps graph keys back to matrix rows: through ``<rep>.keys.npy`` when the version has
    one (stable keys), else the keys are the rows (versions built before stable keys)."""

    def __init__(self, keys_path: Path, n: int) -> None:
        self.n = n
        self._sorted: np.ndarray | None = None
        self._order: np.ndarray | None = None
        if keys_path.is_file():
            keys = np.load(keys_path, mmap_mode="r")
            self._order = np.argsort(keys, kind="stable")
            self._sorted = np.asarray(keys[self._order])

    def rows(self, keys: np.ndarray) -> np.ndarray:
        """The rows of the returned ``keys`` (uint64 from usearch), unknown keys dropped."""
        keys = np.asarray(keys, dtype=np.uint64)
        if self._sorted is None:
            rows = keys.astype(np.int64)  # the "no result" sentinel 2**64-1 becomes -1
            return rows[(rows >= 0) & (rows < self.n)]
        keys = keys[keys <= _KEY_MASK].astype(np.int64)
        at = np.searchsorted(self._sorted, keys)
        at = np.minimum(at, len(self._sorted) - 1) if len(self._sorted) else at
        found = (self._sorted[at] == keys) if len(self._sorted) else np.zeros(0, bool)
        return self._order[at[found]]
