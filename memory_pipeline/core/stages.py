"""Stage functions over the table store: what each asset does, minus Dagster.

Each takes the dates to build and returns the tables per date, so the Dagster assets, the
CLI and the benchmarks share one implementation. Partition dependencies:

- ``raw_messages[D]``: the source records dated D (plus undated/early ones on start_date).
- ``sessions[D]``: sessions whose first message is on D. Needs ``raw_messages`` D-1 (is the
  first message of D a continuation?) and D+1 (does a late session run past midnight?);
  a session still open at the end of D+1 reads further days that exist.
- ``chunks[D]``: the chunks of ``sessions[D]``, reading the messages of every day they span.
"""

from __future__ import annotations

import datetime as dt
import gc
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from memory_pipeline.core.chunking import chunk_sessions
from memory_pipeline.core.ingest import (
    IngestResult,
    audit_table,
    ingest,
    messages_table,
    quarantine_table,
)
from memory_pipeline.core.quality import count_by
from memory_pipeline.core.records import Message
from memory_pipeline.core.sessionize import owned_by, sessionize
from memory_pipeline.core.sources import SourceSpec, read_source
from memory_pipeline.core.storage import TableStore

DAY = dt.timedelta(days=1)


@dataclass
class IngestTables:
    """The three tables ingest writes for one date."""

    messages: pa.Table
    quarantine: pa.Table
    audit: pa.Table


def read_all(
    sources: Sequence[SourceSpec], dates: Iterable[dt.date], start_date: dt.date
) -> IngestResult:
    """Read every source once and keep the records of ``dates``."""
    wanted = sorted(set(dates))

    def records():
        for spec in sources:
            yield from read_source(spec, wanted)

    with gc_paused():
        return ingest(records(), start_date=start_date, dates=wanted)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic GC while building ~10^6 acyclic record objects.

    Measured on RealPersonaChat: the collector's repeated full passes over the live records
    cost ~1.3 s of 7.7 s. Freezing afterwards keeps later passes from re-scanning the
    survivors; they are still freed by reference counting.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def split_ingest(result: IngestResult, dates: Iterable[dt.date]) -> dict[dt.date, IngestTables]:
    """Per-date tables (an empty table for a date with no records, so the partition exists)."""
    days = sorted(set(dates))
    with gc_paused():
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


def build_sessions(
    store: TableStore, dates: Iterable[dt.date], gap_minutes: int
) -> dict[dt.date, pa.Table]:
    """Sessions owned by each of ``dates``, from the stored raw_messages."""
    days = sorted(set(dates))
    if not days:
        return {}
    lo, hi = days[0] - DAY, days[-1] + DAY
    while True:
        window = _date_range(lo, hi)
        sessions = owned_by(sessionize(store.read("raw_messages", window), gap_minutes), days)
        still_open = pc.any(pc.equal(sessions.column("end_local_date"), pa.scalar(hi))).as_py()
        if not still_open or not store.has("raw_messages", hi + DAY):
            break
        hi += DAY  # a session runs on past the window: read one more day
    return split_by_date(sessions, "local_date", days)


def build_chunks(
    store: TableStore, dates: Iterable[dt.date], size: int, stride: int
) -> dict[dt.date, pa.Table]:
    """Chunks of the stored sessions of each of ``dates``."""
    days = sorted(set(dates))
    sessions = store.read("sessions", days)
    messages = session_messages(store, sessions)
    return split_by_date(chunk_sessions(sessions, messages, size, stride), "local_date", days)


def session_messages(store: TableStore, sessions: pa.Table) -> pa.Table:
    """The stored messages of every day the given sessions span (a session may pass midnight)."""
    spans = {
        d
        for s, e in zip(
            sessions.column("local_date").to_pylist(),
            sessions.column("end_local_date").to_pylist(),
            strict=True,
        )
        for d in _date_range(s, e)
    }
    return store.read("raw_messages", sorted(spans))


def _date_range(lo: dt.date, hi: dt.date) -> list[dt.date]:
    return [lo + dt.timedelta(days=i) for i in range((hi - lo).days + 1)]


def split_by_date(table: pa.Table, column: str, days: list[dt.date]) -> dict[dt.date, pa.Table]:
    """Rows per date, each in its original order (one stable sort, then slices)."""
    ordered = table.take(pc.sort_indices(table, [(column, "ascending")]))
    keys = ordered.column(column).cast(pa.int32()).to_numpy(zero_copy_only=False)
    out = {}
    for d in days:
        ordinal = (d - _EPOCH).days
        lo, hi = np.searchsorted(keys, ordinal, "left"), np.searchsorted(keys, ordinal, "right")
        out[d] = ordered.slice(lo, hi - lo)
    return out


_EPOCH = dt.date(1970, 1, 1)


def discover_dates(sources: Sequence[SourceSpec], start_date: dt.date) -> list[dt.date]:
    """The partition dates that hold any record (a run plans its range from these)."""
    found: set[dt.date] = set()
    for spec in sources:
        for rec in read_source(spec):
            day = rec.local_date if isinstance(rec, Message) else rec.partition_date
            found.add(start_date if day is None or day < start_date else day)
    return sorted(found)


# -- memories and dossiers ---------------------------------------------------------------------
@dataclass
class MemoryBuild:
    """(memories, rejected candidates) per date, and the inputs they came from (the asset's
    source check reuses them instead of reading sessions and messages again)."""

    per_day: dict[dt.date, tuple[pa.Table, pa.Table]]
    sessions: pa.Table
    messages: pa.Table


def build_memories(
    store: TableStore, dates: Iterable[dt.date], extractor: object | None = None
) -> MemoryBuild:
    """Memories of the stored sessions of each of ``dates``."""
    from memory_pipeline.core.memories import extract_memories

    days = sorted(set(dates))
    sessions = store.read("sessions", days)
    messages = session_messages(store, sessions)
    memories, rejects = extract_memories(sessions, messages, extractor=extractor)
    per_mem = split_by_date(memories, "local_date", days)
    per_rej = split_by_date(rejects, "local_date", days)
    return MemoryBuild({d: (per_mem[d], per_rej[d]) for d in days}, sessions, messages)


class DossierChainBroken(RuntimeError):
    """An earlier date's dossiers were never built, so today's cannot start from them."""


def prior_dossier_states(store: TableStore, before: dt.date) -> dict[str, str]:
    """The latest stored dossier state (JSON) of every contact, from partitions before ``before``.

    Raises DossierChainBroken when a date that has sessions has no dossier partition: a
    dossier is a fold over every earlier day, so building on a gap would silently lose days.
    """
    built = set(store.dates("dossiers"))
    gaps = [d for d in store.dates("sessions") if d < before and d not in built]
    if gaps:
        raise DossierChainBroken(
            f"dossiers for {before} start from the dossiers of every earlier day, but "
            f"{len(gaps)} earlier date(s) with sessions have none (first: {gaps[0]}); "
            f"materialize dossiers from {gaps[0]} to {before} in one run (a backfill)"
        )
    states: dict[str, str] = {}
    for day in sorted((d for d in built if d < before), reverse=True):
        table = store.read("dossiers", [day], columns=["contact_id", "state"])
        for contact, state in zip(
            table.column("contact_id").to_pylist(), table.column("state").to_pylist(), strict=True
        ):
            states.setdefault(contact, state)
    return states


def build_dossiers(
    store: TableStore, dates: Iterable[dt.date]
) -> Iterator[tuple[dt.date, pa.Table]]:
    """Dossier versions per date, folding each day onto the previous one, in date order.

    Yields (date, rows of the contacts whose dossier changed that day) so the caller writes
    each day before the next is computed; a range is the same fold as one day at a time.
    """
    from memory_pipeline.core.dossier import DossierState, build_day, dossier_rows

    days = sorted(set(dates))
    if not days:
        return
    saved = prior_dossier_states(store, days[0])  # JSON, parsed only for contacts seen
    states: dict[str, DossierState] = {}
    sessions_all = store.read("sessions", days)
    memories_all = store.read("memories", days)
    enrichment_all = store.read("session_enrichment", days)
    per_sessions = split_by_date(sessions_all, "local_date", days)
    per_memories = split_by_date(memories_all, "local_date", days)
    per_enrichment = split_by_date(enrichment_all, "local_date", days)
    for day in days:
        sessions = per_sessions[day]
        for contact in set(sessions.column("contact_id").to_pylist()):
            if contact not in states and contact in saved:
                states[contact] = DossierState.from_json(saved[contact])
        changed = build_day(
            states,
            day,
            sessions,
            session_messages(store, sessions),
            per_enrichment[day],
            per_memories[day],
        )
        states.update(changed)
        yield day, dossier_rows(changed, day)


@dataclass
class DossierWrite:
    """What ``write_dossiers`` did: the contacts updated, and later partitions (if any)."""

    contacts: list[str]
    later: list[dt.date]  # dossier partitions after the range: its files were left alone


def write_dossiers(store: TableStore, dates: Iterable[dt.date], folder: Path) -> DossierWrite:
    """Build and write the dossier partitions of ``dates`` in order, then the current files.

    The ``.md`` files are the latest versions; when later partitions exist (a past range was
    rebuilt) they hold the current versions, so the files are left alone.
    """
    from memory_pipeline.core.dossier import write_markdown_atomic

    days = sorted(set(dates))
    latest: dict[str, str] = {}
    for day, rows in build_dossiers(store, days):
        store.write("dossiers", rows, day)
        latest.update(
            zip(
                rows.column("contact_id").to_pylist(),
                rows.column("markdown").to_pylist(),
                strict=True,
            )
        )
    later = [d for d in store.dates("dossiers") if days and d > days[-1]]
    if not later:
        for contact, markdown in latest.items():
            write_markdown_atomic(folder, contact, markdown)
    return DossierWrite(sorted(latest), later)
