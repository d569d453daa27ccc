"""The ingest stage over the sources: read (reader, cache), one ingest step, per-date tables.

Used by the Dagster ``raw_messages`` asset, the CLI's planning and the benchmarks.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from memory_pipeline.core.common import tables as T
from memory_pipeline.core.common.contacts import ContactBook
from memory_pipeline.core.common.dates import count_by, split_by_date
from memory_pipeline.core.common.forget_list import ForgetList
from memory_pipeline.core.common.records import Record, gc_paused
from memory_pipeline.core.common.storage import TableStore
from memory_pipeline.core.ingest.batches import read_batches, records_to_tables
from memory_pipeline.core.ingest.columnar import TableIngestResult, ingest_tables, to_records
from memory_pipeline.core.ingest.file_cache import cached_batches
from memory_pipeline.core.ingest.normalize import (
    IngestResult,
    audit_table,
    messages_table,
    quarantine_table,
)
from memory_pipeline.core.ingest.sources import SourceSpec

read_source_tables = read_batches  # the earlier name of the reader step


@dataclass
class IngestTables:
    """The three tables ingest writes for one date."""

    messages: pa.Table
    quarantine: pa.Table
    audit: pa.Table


def read_all_tables(
    sources: Sequence[SourceSpec],
    dates: Iterable[dt.date],
    start_date: dt.date,
    forget: ForgetList | None = None,
    retain_from: dt.date | None = None,
    cache_dir: Path | None = None,
    contacts: ContactBook | None = None,
) -> TableIngestResult:
    """Read every source once and keep the records of ``dates``: the ingest entrance.

    One road per source: its reader parses it into batches (core/ingest/batches.py), from
    the parsed-record cache when ``cache_dir`` (the pipeline's cache folder) holds an entry
    for its unchanged files (core/ingest/file_cache.py: a nightly run of a few days reads
    only those days' cached rows instead of re-parsing whole exports), then one step
    validates, de-duplicates, applies ``forget`` and ``retain_from`` and assigns the dates
    (core/ingest/columnar.py: ``ingest_tables``). ``split_ingest`` makes the per-date
    tables. ``contacts`` (the ``[[contacts]]`` table) maps each person's spellings across
    apps to one contact id, in that step."""
    wanted = sorted(set(dates))
    fills: list = []  # cache entries to write: on a thread, while the ingest runs
    if cache_dir is None:
        hint = _reader_hint(wanted, start_date, retain_from)
        batches = [read_batches(spec, hint) for spec in sources]
    else:
        batches = [
            cached_batches(
                spec,
                wanted,
                cache_dir=cache_dir,
                start_date=start_date,
                forget=forget,
                retain_from=retain_from,
                writes=fills,
                contacts=contacts,
            )
            for spec in sources
        ]
    if not fills:
        return ingest_tables(
            batches,
            start_date=start_date,
            dates=wanted,
            forget=forget,
            retain_from=retain_from,
            contacts=contacts,
        )
    # Parquet encoding releases the GIL: a cold build writes its cache entry while it ingests
    with ThreadPoolExecutor(1) as pool:
        written = pool.submit(lambda: [fill() for fill in fills])
        result = ingest_tables(
            batches,
            start_date=start_date,
            dates=wanted,
            forget=forget,
            retain_from=retain_from,
            contacts=contacts,
        )
        written.result()  # a failed cache write fails the read, as when written in line
    return result


def read_all(
    sources: Sequence[SourceSpec],
    dates: Iterable[dt.date],
    start_date: dt.date,
    forget: ForgetList | None = None,
    retain_from: dt.date | None = None,
    cache_dir: Path | None = None,
    contacts: ContactBook | None = None,
) -> IngestResult:
    """:func:`read_all_tables` with the kept messages as ``(message_id, Message)`` pairs, for
    callers that work on objects (evaluation, benchmarks); the same road, the same tables."""
    with gc_paused():
        return to_records(
            read_all_tables(sources, dates, start_date, forget, retain_from, cache_dir, contacts)
        )


def read_all_with(
    records: Sequence[Record],
    sources: Sequence[SourceSpec],
    dates: Iterable[dt.date],
    start_date: dt.date,
    forget: ForgetList | None = None,
    retain_from: dt.date | None = None,
    contacts: ContactBook | None = None,
) -> TableIngestResult:
    """:func:`read_all_tables` (no cache) over ``sources`` plus ``records`` read before (an
    owner's share of a source read once for many owners), taken first, as one batch."""
    wanted = sorted(set(dates))
    with gc_paused():
        batches = [records_to_tables(records), *(read_batches(s, wanted) for s in sources)]
    return ingest_tables(
        batches,
        start_date=start_date,
        dates=wanted,
        forget=forget,
        retain_from=retain_from,
        contacts=contacts,
    )


def _reader_hint(
    wanted: list[dt.date], start_date: dt.date, retain_from: dt.date | None
) -> list[dt.date] | None:
    """The dates hint a reader may skip input by, or None: read everything.

    The first kept partition also takes every record dated before it (``out_of_range``,
    ``expired``), so when it is wanted no reader may skip a file for its early date: the
    hint used to drop those records unaccounted (the parsed-record cache, which reads
    everything, accounted them), so the two entrances disagreed."""
    first = start_date if retain_from is None else max(start_date, retain_from)
    return None if first in wanted else wanted


def split_ingest(
    result: IngestResult | TableIngestResult, dates: Iterable[dt.date]
) -> dict[dt.date, IngestTables]:
    """Per-date tables (an empty table for a date with no records, so the partition exists)."""
    days = sorted(set(dates))
    with gc_paused():
        if isinstance(result, TableIngestResult):
            msgs = result.messages
        else:
            msgs = messages_table(result.messages)
        quar = quarantine_table(result.quarantine)
    ingested = count_by(msgs, "local_date")
    quarantined = count_by(quar, "partition_date")
    audit = audit_table(
        [
            {
                "partition_date": d,
                "source": s,
                "records_read": n,
                "ingested": ingested.get((d, s), 0),
                "quarantined": quarantined.get((d, s), 0),
            }
            for (d, s), n in sorted(result.read_counts.items())
        ]
    )
    per = [split_by_date(t, c, days) for t, c in ((msgs, "local_date"), (quar, "partition_date"))]
    audits = split_by_date(audit, "partition_date", days)
    return {d: IngestTables(per[0][d], per[1][d], audits[d]) for d in days}


def discover_dates(sources: Sequence[SourceSpec], start_date: dt.date) -> list[dt.date]:
    """The partition dates that hold any record (a run plans its range from these).

    Through the reader step (the same batches ingest reads, so the same dates).
    """
    found: set[dt.date] = set()
    for spec in sources:
        tables = read_batches(spec)
        local = pc.unique(pc.cast(tables.messages.column("local_ts"), pa.date32()))
        days = [*local.to_pylist(), *(q.partition_date for q in tables.quarantine)]
        found.update(start_date if day is None or day < start_date else day for day in days)
    return sorted(found)


def stored_dates(store: TableStore) -> list[dt.date]:
    """The partition dates whose stored ingest audit counts a record read.

    Every record ingest reads is counted in the audit of its partition, so these are the
    dates a previous run stored anything on. A run must rebuild them as well as the dates
    its sources now hold: one whose records went away (an export removed or trimmed) is
    then rewritten empty, as a full rebuild would leave it. An empty partition left by an
    older calendar-wide run counts nothing and is not listed, so it is not rebuilt."""
    audit = store.read(T.INGEST_AUDIT, columns=["partition_date"])
    return sorted(set(pc.unique(audit.column("partition_date")).to_pylist()))


def plan_days(
    found: Iterable[dt.date],
    stored: Iterable[dt.date],
    first: dt.date,
    last: dt.date,
    clear_from: dt.date | None = None,
) -> list[dt.date]:
    """The partitions a run builds: the dates with data in ``first..last``, plus the stored
    dates in ``clear_from..last`` (default ``first``) that may need rewriting.

    Never a calendar day with nothing on it: an empty day costs nothing (no Parquet file,
    no Dagster event). Sessions read the days before and after theirs from storage, so a
    session crossing midnight joins its next day whenever both hold messages, and an empty
    neighbour contributes nothing either way."""
    lo = first if clear_from is None else clear_from
    days = {d for d in found if first <= d <= last}
    days |= {d for d in stored if lo <= d <= last}
    return sorted(days)
