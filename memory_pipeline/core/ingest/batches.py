"""The reader step of ingest: one source's export parsed into batches of one record schema.

Why: ingest used to have a row entrance (records through ``columnar.ingest``) and a columnar
one (``ingest_tables``), each with its own cache path and its own forget / retention checks.
Now every source takes one road:

    read_batches (this module: parse only)
      -> file_cache.cached_batches (optional: the same batches, kept per source file content)
      -> columnar.ingest_tables (the one step: validate, dedupe, forget, retention, dates)

A reader only parses. A source with a columnar reader (``register_tables``) hands over Arrow
columns directly; a row reader's ``Message`` / ``QuarantineRecord`` objects are converted to
the same ``CANDIDATES`` columns here, so whatever a reader yields, the step after it sees one
shape. Nothing here looks at the forget list, retention or dates beyond the reader's own hint.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

import pyarrow as pa

from memory_pipeline.core.common.records import Message, QuarantineRecord, Record, gc_paused
from memory_pipeline.core.ingest.sources import TABLE_READERS, SourceSpec, read_source
from memory_pipeline.core.ingest.sources.base import CANDIDATES, SourceTables

__all__ = ["SourceTables", "read_batches", "records_to_tables"]


def records_to_tables(records: Iterable[Record]) -> SourceTables:
    """A row reader's records as ``SourceTables``: messages as ``CANDIDATES`` columns in read
    order, the reader's quarantine records as they are (they are few)."""
    msgs: list[Message] = []
    quar: list[QuarantineRecord] = []
    for rec in records:
        (msgs if isinstance(rec, Message) else quar).append(rec)
    cols = {name: [getattr(m, name) for m in msgs] for name in CANDIDATES.names}
    return SourceTables(pa.Table.from_pydict(cols, schema=CANDIDATES), quar, columnar=False)


def read_batches(spec: SourceSpec, dates: Iterable[dt.date] | None = None) -> SourceTables:
    """Parse one source: its columnar reader when it has one and accepts the input, else its
    row reader's records converted (same content either way, tested).

    ``dates`` is only the row readers' skip hint (see ``read_source``); the result may hold
    other dates too, which the ingest step filters.
    """
    table_reader = TABLE_READERS.get(spec.kind)
    if table_reader is not None and spec.path.exists():
        tables = table_reader(spec)
        if tables is not None:
            return tables
    with gc_paused():
        return records_to_tables(read_source(spec, dates))
