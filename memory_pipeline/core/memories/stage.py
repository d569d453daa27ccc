"""The memories and dossiers stages over the table store (dossiers fold day after day)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from memory_pipeline.core.common import tables as T
from memory_pipeline.core.common.dates import split_by_date
from memory_pipeline.core.common.storage import TableStore
from memory_pipeline.core.sessions.stage import session_messages


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
    from memory_pipeline.core.memories.extract import extract_memories

    days = sorted(set(dates))
    sessions = store.read(T.SESSIONS, days)
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
    built = set(store.dates(T.DOSSIERS))
    gaps = [d for d in store.dates(T.SESSIONS) if d < before and d not in built]
    if gaps:
        raise DossierChainBroken(
            f"dossiers for {before} start from the dossiers of every earlier day, but "
            f"{len(gaps)} earlier date(s) with sessions have none (first: {gaps[0]}); "
            f"materialize dossiers from {gaps[0]} to {before} in one run (a backfill)"
        )
    states: dict[str, str] = {}
    for day in sorted((d for d in built if d < before), reverse=True):
        table = store.read(T.DOSSIERS, [day], columns=["contact_id", "state"])
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
    from memory_pipeline.core.memories.dossier import DossierState, build_day, dossier_rows

    days = sorted(set(dates))
    if not days:
        return
    saved = prior_dossier_states(store, days[0])  # JSON, parsed only for contacts seen
    states: dict[str, DossierState] = {}
    sessions_all = store.read(T.SESSIONS, days)
    memories_all = store.read(T.MEMORIES, days)
    enrichment_all = store.read(T.SESSION_ENRICHMENT, days)
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
    from memory_pipeline.core.memories.dossier import write_markdown_atomic

    days = sorted(set(dates))
    latest: dict[str, str] = {}
    for day, rows in build_dossiers(store, days):
        store.write(T.DOSSIERS, rows, day)
        latest.update(
            zip(
                rows.column("contact_id").to_pylist(),
                rows.column("markdown").to_pylist(),
                strict=True,
            )
        )
    later = [d for d in store.dates(T.DOSSIERS) if days and d > days[-1]]
    if not later:
        for contact, markdown in latest.items():
            write_markdown_atomic(folder, contact, markdown)
    return DossierWrite(sorted(latest), later)
