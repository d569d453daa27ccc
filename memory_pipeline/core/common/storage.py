"""Parquet storage of record: one file per table and partition date, written atomically.

Layout: ``<root>/parquet/<table>/<YYYY-MM-DD>.parquet`` (unpartitioned tables:
``<root>/parquet/<table>/all.parquet``). The root is a local folder or an ``s3://`` URI
(``fs.py``). Locally a file is written to a temporary name in the same folder and renamed
over the old one; on object storage the partition is serialized in memory and sent as one
completed upload. Either way a reader sees the old partition or the new one, never half of
either, and re-running a partition replaces it (idempotent).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from memory_pipeline.core.common import fs
from memory_pipeline.core.common.fs import Location
from memory_pipeline.core.common.tables import Table, table

R = TypeVar("R")

UNPARTITIONED = "all"
REMOTE_READERS = 8  # concurrent object reads of one table (latency-bound, not CPU-bound)
WRITE_THREADS = 2  # Parquet encoding releases the GIL: two writers on the 2-core target
# Parquet decoding releases the GIL too: a table of many local partition files is read by two
# threads (a nightly refresh reads ~700 files; one thread left the second core idle)
LOCAL_READERS = 2
PARALLEL_FROM = 8  # files: below this a pool costs more than it saves
# A table as callers name it: a registry constant (``tables.SESSIONS``) or its name.
TableRef = str | Table
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


WRITE_MEMO = WriteMemo(MEMO_BYTES)

# file identity (device, inode, size, mtime) -> sha256 of its bytes: a partition is only ever
# replaced by a rename (a new inode), so an unchanged identity means unchanged bytes. Kept in
# this process and, per folder, in ``DIGESTS_FILE`` (file name -> identity + sha256): each
# Dagster run is a new process, and without the file every refresh re-hashed every stored
# byte (~0.7 GB on RealPersonaChat) to fingerprint its inputs and find changed partitions.
DIGESTS_FILE = ".digests.json"
_DIGESTS: dict[tuple[str, tuple[int, ...]], str] = {}
_DIGESTS_LOCK = threading.Lock()
_BOOKS: dict[Path, tuple[tuple[int, ...] | None, dict[str, list]]] = {}


def _book(folder: Path) -> dict[str, list]:
    """The folder's recorded digests (call under ``_DIGESTS_LOCK``), re-read when the file
    changed (another process recorded some)."""
    path = folder / DIGESTS_FILE
    try:
        ident: tuple[int, ...] | None = _identity(os.stat(path))
    except OSError:
        ident = None
    cached = _BOOKS.get(folder)
    if cached is not None and cached[0] == ident:
        return cached[1]
    entries: dict[str, list] = {}
    if ident is not None:
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
            entries = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError):
            entries = {}  # unreadable: recomputed and rewritten
    _BOOKS[folder] = (ident, entries)
    return entries


def _save_book(folder: Path, entries: dict[str, list]) -> None:
    """Write the folder's digests atomically (call under ``_DIGESTS_LOCK``)."""
    path = folder / DIGESTS_FILE
    tmp = folder / f".{DIGESTS_FILE}.{uuid.uuid4().hex}.tmp"
    try:
        tmp.write_text(json.dumps(entries, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)
        _BOOKS[folder] = (_identity(os.stat(path)), entries)
    except OSError:
        tmp.unlink(missing_ok=True)  # a read-only store: the digest is still returned
        _BOOKS.pop(folder, None)


def forget_digest(path: Path) -> None:
    """Drop ``path``'s recorded digest (its file is replaced or deleted): a digest of a
    partition's old bytes does not outlive them."""
    path = Path(path)
    with _DIGESTS_LOCK:
        if not (path.parent / DIGESTS_FILE).is_file():
            return
        entries = _book(path.parent)
        if path.name in entries:
            entries = {k: v for k, v in entries.items() if k != path.name}
            _save_book(path.parent, entries)


def file_digest(path: Location) -> str:
    """sha256 of a stored file's bytes; a local file's is computed once per file identity
    (``_identity``: a rewrite renames a new file into place) and recorded beside it
    (``DIGESTS_FILE``), so asking again, in this process or the next, is a stat."""
    if fs.is_remote(path):
        return hashlib.sha256(fs.read_bytes(path)).hexdigest()
    path = Path(path)
    stat = os.stat(path)
    ident = _identity(stat)
    key = (str(path), ident)
    with _DIGESTS_LOCK:
        known = _DIGESTS.get(key)
        if known is None:
            entry = _book(path.parent).get(path.name)
            if entry is not None and tuple(entry[:-1]) == ident:
                known = _DIGESTS[key] = entry[-1]
    if known is not None:
        return known
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    sha = h.hexdigest()
    with _DIGESTS_LOCK:
        if len(_DIGESTS) > 100_000:
            _DIGESTS.clear()
        _DIGESTS[key] = sha
        entries = dict(_book(path.parent))
        entries[path.name] = [*ident, sha]
        _save_book(path.parent, entries)
    return sha


def clear_process_memos() -> None:
    """Forget what this process memoized about stored files (digests, written tables), as
    a new process starts: what a benchmark calls before each run, as production starts a
    new process per run."""
    with _DIGESTS_LOCK:
        _DIGESTS.clear()
        _BOOKS.clear()
    WRITE_MEMO.clear()


@dataclass(frozen=True)
class Staged:
    """A write encoded and not yet visible (:meth:`TableStore.stage`)."""

    commit: Callable[[], Location]  # replace the partition; returns where it is
    discard: Callable[[], None]  # drop the encoded file (nothing was replaced)


class StagedWrites:
    """Store writes encoded on a thread of their own as their data is ready, made visible
    together by :meth:`commit` (after what they describe is published); :meth:`close`
    drops whatever was not committed, so an error or a failed check replaces nothing.

    Use as a context manager: ``with StagedWrites(store) as w: w.stage(...); w.commit()``."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="store")
        self._futures: list[Any] = []

    def stage(self, name: TableRef, data: pa.Table, day: dt.date | None = None) -> None:
        self._futures.append(self._pool.submit(self._store.stage, name, data, day))

    def commit(self) -> list[Location]:
        """Wait for every encoding (the first failure is raised), then replace them all."""
        done = [f.result() for f in self._futures]
        return [w.commit() for w in done]

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        for f in self._futures:
            if f.exception() is None:
                f.result().discard()  # a committed write's file is gone: a no-op
        self._futures = []

    def __enter__(self) -> StagedWrites:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class TableStore:
    """Reads and writes the pipeline's Parquet tables under one root folder (or URI).

    ``path``/``table_dir`` return a ``Path`` for a local root and an ``s3://`` string for a
    remote one; read them through ``fs`` (never ``open``) when the root may be remote. Every
    method takes a registered table (or its name, resolved through the registry, so a
    misspelt name fails at once instead of writing a new folder); schema and partitioning
    come from the registry: a fixed-schema table is written and read in its schema.
    """

    def __init__(self, root: Location) -> None:
        self.root = fs.normalize(root)
        self.remote = fs.is_remote(self.root)
        self.parquet_root = fs.join(self.root, "parquet")

    def table_dir(self, name: TableRef) -> Location:
        return fs.join(self.parquet_root, table(name).name)

    def path(self, name: TableRef, day: dt.date | None = None) -> Location:
        file = UNPARTITIONED if day is None else day.isoformat()
        return fs.join(self.table_dir(name), f"{file}.parquet")

    def has(self, name: TableRef, day: dt.date | None = None) -> bool:
        path = self.path(name, day)
        return fs.is_file(path) if self.remote else Path(path).is_file()

    def dates(self, name: TableRef) -> list[dt.date]:
        """Partition dates present in the store, sorted."""
        out = []
        for rel, _ in fs.list_files(self.table_dir(name), ".parquet"):
            try:
                out.append(dt.date.fromisoformat(rel[: -len(".parquet")]))
            except ValueError:
                continue
        return sorted(out)

    def digest(self, name: TableRef, day: dt.date | None = None) -> str:
        """A content digest of one stored partition (sha256 of the file's bytes; a local
        file's is memoized per file identity, see :func:`file_digest`)."""
        return file_digest(self.path(name, day))

    def files(self, name: TableRef) -> list[tuple[str, int]]:
        """(file name, bytes) of the table's Parquet files (the storage report sizes them)."""
        return fs.list_files(self.table_dir(name), ".parquet")

    def delete(self, name: TableRef, day: dt.date | None = None) -> bool:
        """Remove one partition (retention, forget); True if it existed."""
        path = self.path(name, day)
        if not self.remote:
            WRITE_MEMO.drop(Path(path))
            forget_digest(Path(path))
        return fs.delete_file(path)

    def write(self, name: TableRef, data: pa.Table, day: dt.date | None = None) -> Location:
        """Atomically replace one partition (or the whole unpartitioned table).

        A partitioned table needs ``day`` and an unpartitioned one takes none: a file in the
        wrong place would be invisible to readers of that table."""
        return self.stage(name, data, day).commit()

    def stage(self, name: TableRef, data: pa.Table, day: dt.date | None = None) -> Staged:
        """:meth:`write` in two steps: encode now (a hidden temporary file, or bytes for
        object storage), replace the partition at ``commit()``; ``discard()`` drops it.

        Why: a refresh encodes its tables while other work still runs and makes them
        visible only after the index version they describe is published."""
        t = table(name)
        if t.partitioned != (day is not None):
            raise ValueError(
                f"table {t.name!r} is {'' if t.partitioned else 'un'}partitioned: "
                f"write it {'per day' if t.partitioned else 'without a day'}"
            )
        schema = t.schema
        if schema is not None:
            data = data.select(schema.names).cast(schema)
        target = self.path(name, day)
        if self.remote:
            # serialized whole first: an encoding failure never reaches the store
            sink = pa.BufferOutputStream()
            pq.write_table(data, sink, compression="zstd")
            payload = sink.getvalue()

            def upload() -> Location:
                fs.write_bytes_atomic(target, payload)
                return target

            return Staged(upload, lambda: None)
        local = Path(target)
        local.parent.mkdir(parents=True, exist_ok=True)
        tmp = local.with_name(f".{local.name}.{uuid.uuid4().hex}.tmp")
        try:
            pq.write_table(data, tmp, compression="zstd")
            written = os.stat(tmp)  # a rename keeps inode, size and mtime
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise

        def replace() -> Location:
            try:
                WRITE_MEMO.drop(local)
                os.replace(tmp, local)
                forget_digest(local)
                if schema is not None:  # read back in this schema anyway: as written
                    WRITE_MEMO.put(local, data, written)
            finally:
                tmp.unlink(missing_ok=True)
            return local

        return Staged(replace, lambda: tmp.unlink(missing_ok=True))

    def read(
        self,
        name: TableRef,
        days: Iterable[dt.date] | None = None,
        columns: list[str] | None = None,
    ) -> pa.Table:
        """Concatenate the partitions of ``days`` that exist (all when None); empty if none.

        ``columns`` reads only those (a nightly check over every partition stays cheap)."""
        t = table(name)
        schema = t.schema
        if schema is not None and columns is not None:
            schema = pa.schema([schema.field(c) for c in columns])
        if not t.partitioned:
            paths = [self.path(name)] if self.has(name) else []
        elif days is None:
            paths = [self.path(name, d) for d in self.dates(name)]
        else:
            wanted = sorted(set(days))
            if self.remote:  # one listing instead of a request per day
                present = set(self.dates(name))
                paths = [self.path(name, d) for d in wanted if d in present]
            else:
                paths = [p for d in wanted if (p := Path(self.path(name, d))).is_file()]
        parts = map_files(lambda p: self._read_file(p, columns), paths, self.remote)
        if not parts:
            if schema is None:
                raise FileNotFoundError(
                    f"table {str(name)!r} has no data under {self.table_dir(name)}"
                )
            return schema.empty_table()
        return _conformed(schema, parts)

    def _read_file(self, path: Location, columns: list[str] | None) -> pa.Table:
        if not self.remote:
            held = WRITE_MEMO.get(Path(path))
            if held is not None:
                return held if columns is None else held.select(columns)
            return _read_local(Path(path), columns)
        filesystem, key = fs.resolve(path)
        return pq.read_table(key, columns=columns, filesystem=filesystem)

    def read_file_with(
        self, name: TableRef, path: Location, columns: list[str] | None, extra: str
    ) -> tuple[pa.Table, bool]:
        """One stored file of ``name`` in its registry schema: ``columns`` (all when None)
        plus the column ``extra`` when the file has it, and whether it had it. Locally the
        file is opened once for both (a schema read, then a read, opened it twice)."""
        t = table(name)

        def wanted_of(names: list[str]) -> tuple[bool, list[str] | None]:
            has = extra in names
            return has, columns if columns is None or not has else [*columns, extra]

        if not self.remote and WRITE_MEMO.get(Path(path)) is None:
            with pq.ParquetFile(path) as file:
                names = file.schema_arrow.names  # converted on every access: once
                has, wanted = wanted_of(names)
                part = _read_open(file, Path(path), wanted, names)
        else:  # remote, or just written (both answered without opening a local file)
            has, wanted = wanted_of(self.file_schema(path).names)
            part = self._read_file(path, wanted)
        schema = t.schema
        if schema is not None and has and extra not in schema.names:
            schema = schema.append(pa.field(extra, pa.string()))
        if schema is not None and wanted is not None:
            schema = pa.schema([schema.field(c) for c in wanted])
        return _conformed(schema, [part]), has

    def file_schema(self, path: Location) -> pa.Schema:
        """The schema of one stored file (of a just-written one without opening it)."""
        if not self.remote:
            held = WRITE_MEMO.get(Path(path))
            if held is not None:
                return held.schema
        where, at = fs.resolve(path)
        return pq.read_schema(at, filesystem=where)


def map_files(fn: Callable[[Any], R], paths: Sequence[Any], remote: bool) -> list[R]:
    """``[fn(p) for p in paths]``, in order, overlapped: remote objects on
    ``REMOTE_READERS`` threads (one round trip each), many local files on ``LOCAL_READERS``
    (decoding releases the GIL), a few local files in this thread."""
    workers = REMOTE_READERS if remote else LOCAL_READERS
    if len(paths) < (2 if remote else PARALLEL_FROM) or workers < 2:
        return [fn(p) for p in paths]
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(fn, paths))


def link_partitions(store: Any, name: TableRef, dest: Path) -> dict[str, tuple] | None:
    """Hard-link every stored partition file of ``name`` into the new folder ``dest``;
    returns {file name: file identity}.

    Why: a stored file is never rewritten in place (a write renames a new file over it), so
    a link is a snapshot of the partition for as long as the link exists, at the cost of a
    directory entry: an index version carries the rows it was built from without encoding
    a copy of them every night. None (``dest`` removed) on object storage, or when a link is
    refused (another file system) or a file vanishes meanwhile: the caller writes a copy."""
    if getattr(store, "remote", False):
        return None
    out: dict[str, tuple] = {}
    try:
        dest.mkdir(parents=True)
        for day in store.dates(name):
            src = Path(store.path(name, day))
            os.link(src, dest / src.name)
            out[src.name] = _identity(os.stat(dest / src.name))
    except OSError:
        shutil.rmtree(dest, ignore_errors=True)
        return None
    return out


def still_linked(store: Any, name: TableRef, linked: dict[str, tuple]) -> bool:
    """Whether ``name``'s partition files are still the ones :func:`link_partitions`
    linked: the same file names, each the same file (identity). Checked after the table
    was read, so what was read is what the links hold."""
    if getattr(store, "remote", False):
        return False
    if {f"{d.isoformat()}.parquet" for d in store.dates(name)} != set(linked):
        return False
    folder = Path(store.table_dir(name))
    try:
        return all(_identity(os.stat(folder / f)) == ident for f, ident in linked.items())
    except FileNotFoundError:
        return False


def read_files(paths: Sequence[Path], name: TableRef, columns: Sequence[str]) -> pa.Table:
    """``columns`` of local Parquet files of table ``name`` (in the registry's types), as one
    table in the order of ``paths``; a column a file lacks raises."""
    schema = table(name).schema
    wanted = list(columns)
    if schema is not None:
        schema = pa.schema([schema.field(c) for c in wanted])
    parts = map_files(lambda p: _read_local(Path(p), wanted), list(paths), False)
    if not parts:
        return schema.empty_table() if schema is not None else pa.table({})
    return _conformed(schema, parts)


def _read_local(path: Path, columns: list[str] | None) -> pa.Table:
    """One local Parquet file, as ``pq.read_table`` reads it, through ``ParquetFile``: the
    dataset machinery of ``read_table`` cost more than the decoding for most partition
    files (~1 ms of CPU per file; a refresh reads ~900). ``ParquetFile.read`` skips a
    column the file lacks, so a request for one goes to ``read_table``, which raises."""
    with pq.ParquetFile(path) as file:
        return _read_open(file, path, columns)


def _read_open(
    file: pq.ParquetFile, path: Path, columns: list[str] | None, names: list[str] | None = None
) -> pa.Table:
    """``columns`` of the open ``file`` at ``path``; a column it lacks raises, as
    ``pq.read_table`` does (``ParquetFile.read`` would skip it). ``names``: the file's
    column names when the caller has them."""
    if names is None and columns is not None:
        names = file.schema_arrow.names
    if columns is not None and not set(columns) <= set(names or ()):
        return pq.read_table(path, columns=columns)  # raises
    return file.read(columns=columns)


def _conformed(schema: pa.Schema | None, parts: list[pa.Table]) -> pa.Table:
    """Non-empty ``parts`` as one table in ``schema`` (None: as they are)."""
    if schema is None:
        return pa.concat_tables(parts)
    # select first: a file may carry more columns (OwnerStore's owner_id)
    return pa.concat_tables([t.select(schema.names).cast(schema) for t in parts])


def concat(name: TableRef, parts: list[pa.Table]) -> pa.Table:
    """In-memory partitions as one table in the registry schema: what a read of them gives
    once written (a check runs on the tables it just wrote, not on a read of the files)."""
    schema = table(name).schema
    if not parts:
        return schema.empty_table() if schema is not None else pa.table({})
    return _conformed(schema, parts)


def write_partitions(store: Any, writes: list[tuple[TableRef, dt.date, pa.Table]]) -> None:
    """Write ``(table, day, data)`` partitions through ``store`` (a TableStore or an owner's
    store), a few at a time: each write is atomic and to its own file, so the order does not
    matter; the first failure is raised."""
    if len(writes) < 2:
        for name, day, data in writes:
            store.write(name, data, day)
        return
    with ThreadPoolExecutor(WRITE_THREADS) as pool:
        for future in [pool.submit(store.write, name, data, day) for name, day, data in writes]:
            future.result()


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


def write_text_atomic(path: Location, text: str) -> None:
    """Replace ``path`` by ``text``: locally through a temp file in the same folder +
    ``os.replace``, on object storage as one completed upload; a reader (or a crash) sees
    the old file or the new one, never half of it."""
    fs.write_text_atomic(path, text)
