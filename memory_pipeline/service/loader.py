"""The index versions a server answers from: one pinned snapshot per request.

Each request reads the owner's ``indexes/CURRENT`` pointer (a small local file, or one GET
on object storage) and gets the :class:`Snapshot` of that version: a loaded ``Searcher``
and, on first use, the ``MemoryIndex`` published with it. A new version is loaded by the
first request that sees it (the others that see it wait for that load, under a per-owner
lock); requests that started on the previous version keep their snapshot and finish on it,
so one request never mixes two versions. There is no fallback to an older snapshot: when
the pointer is gone (a ``forget`` deletes every version before it rebuilds) the request
fails with "index not built" instead of serving what was forgotten.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_pipeline.config import PipelineConfig, object_store_options
from memory_pipeline.core.common import fs
from memory_pipeline.core.common.owners import resolve_owner_dir
from memory_pipeline.core.indexes.publish import CURRENT, index_root
from memory_pipeline.core.retrieval.searcher import IndexNotBuilt, Searcher

MAX_OWNERS_LOADED = 16  # owners whose current snapshot stays in memory (least recent dropped)


@dataclass
class Snapshot:
    """One published index version of one owner, loaded."""

    owner: str
    version: str
    searcher: Any
    _memories: Any = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def memories(self) -> Any:
        """The MemoryIndex of this version (built on first use: search alone never pays)."""
        if self._memories is None:
            from memory_pipeline.core.context.packs import MemoryIndex

            with self._lock:
                if self._memories is None:
                    self._memories = MemoryIndex.for_searcher(self.searcher)
        return self._memories


class OwnerUnavailable(LookupError):
    """The key's owner has no memory in this deployment (never built, or deleted)."""


def read_pointer(out: fs.Location) -> str | None:
    """The version name ``CURRENT`` holds, None when nothing is published. The only I/O of
    a request that finds its version loaded: one small read (local) or one GET (s3)."""
    root = index_root(out)
    try:
        if fs.is_remote(root):
            text = fs.read_text(fs.join(root, CURRENT))
        else:
            with open(os.path.join(root, CURRENT), encoding="utf-8") as f:
                text = f.read()
    except FileNotFoundError:
        return None
    return text.strip() or None


def _same_model(a: dict, b: dict) -> bool:
    keys = ("provider", "model", "dim")
    return {r: tuple(m.get(k) for k in keys) for r, m in a.items()} == {
        r: tuple(m.get(k) for k in keys) for r, m in b.items()
    }


class IndexLoader:
    """Current snapshots per owner for a deployment (local folder or ``s3://`` prefix)."""

    def __init__(self, cfg: PipelineConfig) -> None:
        self.cfg = cfg
        if cfg.output_uri:
            fs.configure_s3(object_store_options())
        self.root: fs.Location = cfg.storage_root
        if not fs.is_remote(self.root):
            self.root = Path(self.root).resolve()
        self._owner_dirs: dict[str, fs.Location] = {}
        self._current: OrderedDict[str, Snapshot] = OrderedDict()
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self.loads = 0  # versions loaded since start (health, tests)
        one_blas_thread()

    def owner_dir(self, owner: str) -> fs.Location:
        """The owner's folder (or prefix), checked against the owners present; cached once
        found (owner folders never move)."""
        found = self._owner_dirs.get(owner)
        if found is not None:
            return found
        mine = self.cfg.owner_id if not self.cfg.multi_owner else None
        try:
            found = resolve_owner_dir(self.root, owner, owner_id=mine)
        except ValueError:
            raise OwnerUnavailable(f"no memory for owner {owner!r} in this deployment") from None
        if self.cfg.multi_owner and found == self.root:
            raise OwnerUnavailable(f"no memory for owner {owner!r} yet: run the pipeline")
        self._owner_dirs[owner] = found
        return found

    def _lock_for(self, owner: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(owner, threading.Lock())

    def snapshot(self, owner: str) -> Snapshot:
        """The snapshot of the version published now for ``owner``; raises IndexNotBuilt
        when none is, OwnerUnavailable for an owner without a folder."""
        out = self.owner_dir(owner)
        name = read_pointer(out)
        if name is None:
            self.drop(owner)
            raise IndexNotBuilt("no search index published yet: run `memory-pipeline run`")
        snap = self._current.get(owner)
        if snap is not None and snap.version == name:
            return snap
        with self._lock_for(owner):
            snap = self._current.get(owner)
            if snap is not None and snap.version == name:
                return snap
            snap = self._load(owner, out, snap)
            with self._guard:
                self._current[owner] = snap
                self._current.move_to_end(owner)
                while len(self._current) > MAX_OWNERS_LOADED:
                    self._current.popitem(last=False)
            return snap

    def _load(self, owner: str, out: fs.Location, previous: Snapshot | None) -> Snapshot:
        """Load the version published now; the query embedder of ``previous`` is reused when
        the vectors come from the same model (a switch does not reload the model)."""
        embedder = None
        if previous is not None:
            old = previous.searcher
            meta = _dense_meta(out)
            if meta is not None and _same_model(old.dense_meta, meta):
                embedder = old._embedder
        searcher = Searcher(out, embedder=embedder)  # follows CURRENT itself: keyed below
        snap = Snapshot(owner, searcher.version.name, searcher)
        prime(snap, memories=fs.is_remote(out))
        self.loads += 1
        return snap

    def drop(self, owner: str) -> None:
        """Forget the owner's loaded snapshot (after a forget: never serve it again)."""
        with self._guard:
            self._current.pop(owner, None)

    def loaded(self) -> dict[str, str]:
        """{owner: version} of the snapshots in memory."""
        return {o: s.version for o, s in list(self._current.items())}


def one_blas_thread() -> None:
    """BLAS (and any other native thread pool) on one thread in this serving process. A
    search's matmuls are small (a query against a few thousand columns or vectors):
    OpenBLAS's extra threads mostly spin, which doubled a search's CPU time, and a server's
    parallelism is its request threads and worker processes."""
    import numpy  # noqa: F401 - its BLAS loaded, so the limit reaches it
    import scipy.sparse  # noqa: F401
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1)


def prime(snap: Snapshot, *, memories: bool) -> None:
    """Read now what a request would otherwise read lazily from the version's folder: the
    turn index, the default search's vectors (one search) and, with ``memories``, the
    memory timeline. Then a snapshot no longer needs its folder: on object storage the
    local copy of a version is pruned as soon as a newer one is fetched (by this process or
    another worker sharing the cache), while requests may still be running on it. It also
    keeps the first search after a switch as fast as the others."""
    from memory_pipeline import search_with

    snap.searcher.turn_index  # noqa: B018 - loads on first access
    search_with(snap.searcher, "warm up", 1)
    if memories:
        snap.memories  # noqa: B018


def _dense_meta(out: fs.Location) -> dict | None:
    """The dense metadata of the version published now (local only; None elsewhere: the
    model is then loaded again, as a fresh process would)."""
    import json

    if fs.is_remote(out):
        return None
    name = read_pointer(out)
    path = Path(index_root(out)) / (name or "") / "dense" / "meta.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
