"""Parquet storage of record: one file per table and partition date, written atomically.

Layout: ``<root>/parquet/<table>/<YYYY-MM-DD>.parquet`` (unpartitioned tables:
``<root>/parquet/<table>/all.parquet``). The root is a local folder or an ``s3://`` URI
(``fs.py``). Locally a file is written to a temporary name in the same folder and renamed
over the old one; on object storage the partition is serialized in memory and sent as one
completed upload. Either way a reader sees the old partition or the new one, never half of
either, and re-running a partition replaces it (idempotent).

This module holds the store (``TableStore``) and its staged writes; reading and writing many
files at once is in ``storage_files``, the in-process memos of written and read partitions in
``storage_memo``, and the content digests of stored files in ``storage_digests``. The names
other code uses are re-exported here.
"""

from __future__ import annotations

import datetime as dt
import os
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from memory_pipeline.core.common import fs
from memory_pipeline.core.common.fs import Location
from memory_pipeline.core.common.storage_digests import (
    _BOOKS,
    _DIGESTS,
    _DIGESTS_LOCK,
    DIGESTS_FILE,
    file_digest,
    flush_digests,
    forget_digest,
)
from memory_pipeline.core.common.storage_files import (
    LOCAL_READERS,
    PARALLEL_FROM,
    REMOTE_READERS,
    WRITE_THREADS,
    TableRef,
    _conformed,
    _read_local,
    _read_open,
    concat,
    link_partitions,
    map_files,
    read_files,
    still_linked,
    write_partitions,
)
from memory_pipeline.core.common.storage_memo import MEMO_BYTES, ReadMemo, WriteMemo
from memory_pipeline.core.common.tables import table

__all__ = [
    "DIGESTS_FILE",
    "LOCAL_READERS",
    "MEMO_BYTES",
    "PARALLEL_FROM",
    "REMOTE_READERS",
    "UNPARTITIONED",
    "WRITE_MEMO",
    "WRITE_THREADS",
    "ReadMemo",
    "Staged",
    "StagedWrites",
    "TableRef",
    "TableStore",
    "WriteMemo",
    "clear_process_memos",
    "concat",
    "file_digest",
    "forget_digest",
    "link_partitions",
    "map_files",
    "read_files",
    "still_linked",
    "write_partitions",
    "write_text_atomic",
]

UNPARTITIONED = "all"
WRITE_MEMO = WriteMemo(MEMO_BYTES)


def clear_process_memos() -> None:
    """Forget what this process memoized about stored files (digests, written tables), as
    a new process starts: what a benchmark calls before each run, as production starts a
    new process per run. The digests not yet written to their books are written first, as
    the process ending would."""
    flush_digests()
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


def write_text_atomic(path: Location, text: str) -> None:
    """Replace ``path`` by ``text``: locally through a temp file in the same folder +
    ``os.replace``, on object storage as one completed upload; a reader (or a crash) sees
    the old file or the new one, never half of it."""
    fs.write_text_atomic(path, text)
