"""Parquet storage of record: one file per table and partition date, written atomically.

Layout: ``<root>/parquet/<table>/<YYYY-MM-DD>.parquet`` (unpartitioned tables:
``<root>/parquet/<table>/all.parquet``). A file is written to a temporary name in the same
folder and renamed over the old one, so a reader sees the old partition or the new one,
never half of either, and re-running a partition replaces it (idempotent).
"""

from __future__ import annotations

import datetime as dt
import os
import uuid
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from memory_pipeline.core.common.tables import Table, table

UNPARTITIONED = "all"
# A table as callers name it: a registry constant (``tables.SESSIONS``) or its name.
TableRef = str | Table


class TableStore:
    """Reads and writes the pipeline's Parquet tables under one root folder.

    Every method takes a registered table (or its name, resolved through the registry, so a
    misspelt name fails at once instead of writing a new folder); schema and partitioning
    come from the registry: a fixed-schema table is written and read in its schema.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.parquet_root = self.root / "parquet"

    def table_dir(self, name: TableRef) -> Path:
        return self.parquet_root / table(name).name

    def path(self, name: TableRef, day: dt.date | None = None) -> Path:
        file = UNPARTITIONED if day is None else day.isoformat()
        return self.table_dir(name) / f"{file}.parquet"

    def has(self, name: TableRef, day: dt.date | None = None) -> bool:
        return self.path(name, day).is_file()

    def dates(self, name: TableRef) -> list[dt.date]:
        """Partition dates present on disk, sorted."""
        folder = self.table_dir(name)
        if not folder.is_dir():
            return []
        out = []
        for p in folder.glob("*.parquet"):
            try:
                out.append(dt.date.fromisoformat(p.stem))
            except ValueError:
                continue
        return sorted(out)

    def write(self, name: TableRef, data: pa.Table, day: dt.date | None = None) -> Path:
        """Atomically replace one partition (or the whole unpartitioned table).

        A partitioned table needs ``day`` and an unpartitioned one takes none: a file in the
        wrong place would be invisible to readers of that table."""
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
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
        try:
            pq.write_table(data, tmp, compression="zstd")
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        return target

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
            paths = [p for d in sorted(set(days)) if (p := self.path(name, d)).is_file()]
        parts = [pq.read_table(p, columns=columns) for p in paths]
        if not parts:
            if schema is None:
                raise FileNotFoundError(
                    f"table {str(name)!r} has no data under {self.table_dir(name)}"
                )
            return schema.empty_table()
        return (
            pa.concat_tables(parts)
            if schema is None
            # select first: a file may carry more columns (OwnerStore's owner_id)
            else pa.concat_tables([t.select(schema.names).cast(schema) for t in parts])
        )


def write_text_atomic(path: Path, text: str) -> None:
    """Replace ``path`` by ``text`` through a temp file in the same folder + ``os.replace``:
    a reader (or a crash) sees the old file or the new one, never half of it."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
