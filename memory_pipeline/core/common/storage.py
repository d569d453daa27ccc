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

from memory_pipeline.core.common.schema import TABLES

UNPARTITIONED = "all"


class TableStore:
    """Reads and writes the pipeline's Parquet tables under one root folder."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.parquet_root = self.root / "parquet"

    def table_dir(self, table: str) -> Path:
        return self.parquet_root / table

    def path(self, table: str, day: dt.date | None = None) -> Path:
        name = UNPARTITIONED if day is None else day.isoformat()
        return self.table_dir(table) / f"{name}.parquet"

    def has(self, table: str, day: dt.date | None = None) -> bool:
        return self.path(table, day).is_file()

    def dates(self, table: str) -> list[dt.date]:
        """Partition dates present on disk, sorted."""
        folder = self.table_dir(table)
        if not folder.is_dir():
            return []
        out = []
        for p in folder.glob("*.parquet"):
            try:
                out.append(dt.date.fromisoformat(p.stem))
            except ValueError:
                continue
        return sorted(out)

    def write(self, table: str, data: pa.Table, day: dt.date | None = None) -> Path:
        """Atomically replace one partition (or the whole unpartitioned table)."""
        schema = TABLES[table][0] if table in TABLES else data.schema
        data = data.select(schema.names).cast(schema) if table in TABLES else data
        target = self.path(table, day)
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
        table: str,
        days: Iterable[dt.date] | None = None,
        columns: list[str] | None = None,
    ) -> pa.Table:
        """Concatenate the partitions of ``days`` that exist (all when None); empty if none.

        ``columns`` reads only those (a nightly check over every partition stays cheap)."""
        schema = TABLES[table][0] if table in TABLES else None
        if schema is not None and columns is not None:
            schema = pa.schema([schema.field(c) for c in columns])
        if days is None:
            paths = [self.path(table, d) for d in self.dates(table)]
            if not paths and self.has(table):
                paths = [self.path(table)]
        else:
            paths = [p for d in sorted(set(days)) if (p := self.path(table, d)).is_file()]
        parts = [pq.read_table(p, columns=columns) for p in paths]
        if not parts:
            if schema is None:
                raise FileNotFoundError(
                    f"table {table!r} has no data under {self.table_dir(table)}"
                )
            return schema.empty_table()
        return (
            pa.concat_tables(parts)
            if schema is None
            else pa.concat_tables([t.cast(schema) for t in parts])
        )
