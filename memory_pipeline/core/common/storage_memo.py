"""What the store keeps in memory within one process: the partitions it just wrote (so the
reads that follow skip decoding them again) and, per body, the partitions it already read.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pyarrow as pa

# Arrow bytes of just-written partitions kept for reads in the same process (WriteMemo)
MEMO_BYTES = 512 * 2**20


class WriteMemo:
    """The local partitions this process wrote last, as written, for reads that follow.

    Why: a stage reads what the stage before it wrote (sessions read raw_messages, chunks
    read sessions and raw_messages), and ``memory-pipeline run`` runs the stages one after
    another in one process; decoding those Parquet files again cost about as much as
    writing them. An entry is the table handed to ``pq.write_table`` and the file's
    identity (device, inode, size, mtime in ns), taken from the temporary file before it is
    renamed into place: a read serves the entry only while the file at that path still has
    that identity, so a file another writer replaced (a new inode), rewrote or deleted is
    read from disk. Bounded: the oldest entries go when ``budget`` bytes are exceeded.
    Local stores only (an object store's write is not a file to stat).
    """

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.bytes = 0  # of the distinct Arrow buffers the entries hold
        self._items: OrderedDict[str, tuple[tuple[int, ...], pa.Table, dict[int, int]]] = (
            OrderedDict()
        )
        self._refs: dict[int, list[int]] = {}  # buffer address -> [size, entries holding it]
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def paths(self) -> list[Path]:
        """The files held, oldest first."""
        with self._lock:
            return [Path(p) for p in self._items]

    def put(self, path: Path, data: pa.Table, stat: os.stat_result) -> None:
        # per-date partitions are slices of one table: they share its buffers, which count once
        buffers = _buffers(data)
        with self._lock:
            self._pop(str(path))
            self._items[str(path)] = (_identity(stat), data, buffers)
            for address, size in buffers.items():
                ref = self._refs.setdefault(address, [size, 0])
                if ref[1] == 0:
                    self.bytes += size
                ref[1] += 1
            while self.bytes > self.budget and self._items:
                self._pop(next(iter(self._items)))

    def get(self, path: Path) -> pa.Table | None:
        """The table written to ``path`` if the file is still the one written, else None."""
        key = str(path)
        with self._lock:
            entry = self._items.get(key)
        if entry is None:
            return None
        try:
            now = _identity(os.stat(key))
        except OSError:
            now = None
        if now != entry[0]:
            self.drop(path)
            return None
        return entry[1]

    def drop(self, path: Path) -> None:
        with self._lock:
            self._pop(str(path))

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._refs.clear()
            self.bytes = 0

    def _pop(self, key: str) -> None:
        entry = self._items.pop(key, None)
        if entry is None:
            return
        for address in entry[2]:
            ref = self._refs[address]
            ref[1] -= 1
            if ref[1] == 0:
                self.bytes -= ref[0]
                del self._refs[address]


def _buffers(data: pa.Table) -> dict[int, int]:
    """address -> size of every Arrow buffer ``data`` holds (children included)."""
    out: dict[int, int] = {}
    for column in data.columns:
        for chunk in column.chunks:
            for buf in chunk.buffers():
                if buf is not None:
                    out[buf.address] = buf.size
    return out


def _identity(stat: os.stat_result) -> tuple[int, ...]:
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)


class ReadMemo:
    """A store whose reads of the same partitions (and columns) are read once: a body's check
    reads what its core stage read, not the files again. Everything else is the store's."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self._reads: dict[tuple, pa.Table] = {}

    def read(self, name: Any, days: Any = None, columns: list[str] | None = None) -> pa.Table:
        key = (
            getattr(name, "name", name),
            None if days is None else tuple(sorted(set(days))),
            None if columns is None else tuple(columns),
        )
        if key not in self._reads:
            self._reads[key] = self._store.read(name, days, columns=columns)
        return self._reads[key]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)
