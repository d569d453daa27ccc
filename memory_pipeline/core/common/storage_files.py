"""Reading and writing many partition files at once: overlapped reads (threads for remote
objects and for many local files), a table's parts conformed and concatenated, partition
files hard-linked into an index version and checked still linked, and writes in parallel.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from memory_pipeline.core.common.storage_memo import _identity
from memory_pipeline.core.common.tables import Table, table

R = TypeVar("R")
REMOTE_READERS = 8  # concurrent object reads of one table (latency-bound, not CPU-bound)
WRITE_THREADS = 2  # Parquet encoding releases the GIL: two writers on the 2-core target
# Parquet decoding releases the GIL too: a table of many local partition files is read by two
# threads (a nightly refresh reads ~700 files; one thread left the second core idle)
LOCAL_READERS = 2
PARALLEL_FROM = 8  # files: below this a pool costs more than it saves
# A table as callers name it: a registry constant (``tables.SESSIONS``) or its name.
TableRef = str | Table


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
