"""The memories and dossiers stages over the table store (dossiers fold day after day)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from memory_pipeline.core.common import fs
from memory_pipeline.core.common import tables as T
from memory_pipeline.core.common.dates import split_by_date
from memory_pipeline.core.common.forget_list import privacy_dir
from memory_pipeline.core.common.storage import TableStore, write_text_atomic
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
    return {c: state for c, (state, _) in prior_dossiers(store, before).items()}


def prior_dossiers(
    store: TableStore, before: dt.date, contacts: Iterable[str] | None = None
) -> dict[str, tuple[str, str]]:
    """contact -> (state JSON, markdown) of its latest stored version before ``before``
    (the markdown is what an LLM writer rewrote, if one did); see prior_dossier_states.

    With ``contacts`` (the ones a run folds) only theirs: the partitions are read newest
    first and only while one of them is still unseen, each first by its contact column, so
    a night reads the few days since those contacts last spoke, not every dossier ever
    written (a contact seen for the first time still has every partition checked)."""
    built = set(store.dates(T.DOSSIERS))
    gaps = [d for d in store.dates(T.SESSIONS) if d < before and d not in built]
    if gaps:
        raise DossierChainBroken(
            f"dossiers for {before} start from the dossiers of every earlier day, but "
            f"{len(gaps)} earlier date(s) with sessions have none (first: {gaps[0]}); "
            f"materialize dossiers from {gaps[0]} to {before} in one run (a backfill)"
        )
    wanted = None if contacts is None else set(contacts)
    states: dict[str, tuple[str, str]] = {}
    for day in sorted((d for d in built if d < before), reverse=True):
        if wanted is not None:
            if not wanted:
                break
            present = store.read(T.DOSSIERS, [day], columns=["contact_id"]).column("contact_id")
            if wanted.isdisjoint(present.to_pylist()):
                continue
        table = store.read(T.DOSSIERS, [day], columns=["contact_id", "state", "markdown"])
        for contact, state, markdown in zip(
            table.column("contact_id").to_pylist(),
            table.column("state").to_pylist(),
            table.column("markdown").to_pylist(),
            strict=True,
        ):
            if wanted is None:
                states.setdefault(contact, (state, markdown))
            elif contact in wanted:
                states[contact] = (state, markdown)
                wanted.discard(contact)
    return states


# -- refold after a purge -----------------------------------------------------------------------
# A retention purge deletes every dossier partition (a retained version still quotes purged
# days) while the sessions and memories of the retained days stay. The chain then has a hole
# from the cutoff on, which the gap check above would refuse for ever: no later range can
# start from a state that no longer exists. The purge records where the hole starts; a fold
# that finds it starts from the empty state at the first retained partition and rebuilds
# every missing dossier partition from there, whatever range it was asked for.
REFOLD_FILE = "dossier_refold.json"


def _refold_path(store: TableStore) -> fs.Location:
    return fs.join(privacy_dir(store.root), REFOLD_FILE)


def mark_refold(store: TableStore, first: dt.date) -> None:
    """Record that the dossier partitions from ``first`` on were deleted on purpose (their
    inputs are kept), so the next fold rebuilds them from the empty state at ``first``."""
    body = json.dumps({"from": first.isoformat()}, sort_keys=True)
    write_text_atomic(_refold_path(store), body)


def refold_from(store: TableStore) -> dt.date | None:
    """The first date of a pending refold (see :func:`mark_refold`); None when the chain is
    whole."""
    try:
        return dt.date.fromisoformat(json.loads(fs.read_text(_refold_path(store)))["from"])
    except FileNotFoundError:
        return None


def fold_dates(store: TableStore, dates: Iterable[dt.date]) -> list[dt.date]:
    """The dates a fold asked for ``dates`` must cover: ``dates`` themselves, plus, while a
    refold is pending, every stored session date from the first one that lost its dossier
    partition (at or after the refold's start) to the last one, so the range asked for
    starts from the rebuilt state and no later hole stays behind.

    Only dates whose memories are stored are added: a day whose upstream was never built is
    left to the gap check (a clear error) rather than folded as if it had no memories.
    """
    days = sorted(set(dates))
    origin = refold_from(store)
    if not days or origin is None:
        return days
    built = set(store.dates(T.DOSSIERS))
    sessions = [d for d in store.dates(T.SESSIONS) if d >= origin]
    holes = [d for d in sessions if d not in built and d not in days]
    if not holes:
        return days
    first, last = min(holes[0], days[0]), max(holes[-1], days[-1])
    extra = [d for d in sessions if first <= d <= last and d not in days]
    before = [d for d in extra if d < days[0]]
    after = [d for d in extra if d > days[0]]
    # backwards every day is needed (else the gap check speaks); forwards stop at the
    # first day whose memories are missing
    unbuilt = [d for d in before if not store.has(T.MEMORIES, d)]
    kept = [d for d in before if not unbuilt or d > unbuilt[-1]]
    for day in after:
        if not store.has(T.MEMORIES, day):
            break
        kept.append(day)
    return sorted(set(days) | set(kept))


def _refold_done(store: TableStore) -> None:
    """Drop the refold mark once every session date from its start has a dossier partition."""
    origin = refold_from(store)
    if origin is None:
        return
    built = set(store.dates(T.DOSSIERS))
    if all(d in built for d in store.dates(T.SESSIONS) if d >= origin):
        fs.delete_file(_refold_path(store))


def build_dossiers(
    store: TableStore, dates: Iterable[dt.date], writer: Any | None = None
) -> Iterator[tuple[dt.date, pa.Table]]:
    """Dossier versions per date, folding each day onto the previous one, in date order.

    Yields (date, rows of the contacts whose dossier changed that day) so the caller writes
    each day before the next is computed; a range is the same fold as one day at a time.
    With a ``writer`` (memories.llm.LlmDossierWriter) each page is offered to the model,
    which sees the previous page and the day's summaries and memories; the rule page is kept
    unless the rewrite passes the checks. The state is always the rule fold's.
    """
    from memory_pipeline.core.memories.dossier import DossierState, build_day, dossier_rows

    days = sorted(set(dates))
    if not days:
        return
    sessions_all = store.read(T.SESSIONS, days)
    # only the contacts folded here: a day's states and pages are those of its sessions'
    # contacts (build_day returns no other)
    prior = prior_dossiers(store, days[0], sessions_all.column("contact_id").to_pylist())
    saved = {c: state for c, (state, _) in prior.items()}  # JSON, parsed only when seen
    pages = {c: markdown for c, (_, markdown) in prior.items()}
    states: dict[str, DossierState] = {}
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
        rows = dossier_rows(changed, day)
        if writer is not None:
            rows = _rewrite_rows(
                writer, rows, pages, sessions, per_enrichment[day], per_memories[day]
            )
        contacts, markdown = rows.column("contact_id"), rows.column("markdown")
        pages.update(zip(contacts.to_pylist(), markdown.to_pylist(), strict=True))
        yield day, rows


def _rewrite_rows(
    writer: Any,
    rows: pa.Table,
    pages: dict[str, str],
    sessions: pa.Table,
    enrichment: pa.Table,
    memories: pa.Table,
) -> pa.Table:
    """Offer each row's page to the writer; a refusal keeps the rule page and records the
    problem kinds in ``method`` (``deterministic; rejected <writer>: <kinds>``)."""
    from memory_pipeline.core.memories.dossier import cited_sessions
    from memory_pipeline.core.memories.llm import DossierSession

    cols = ["session_id", "title", "bullets"]
    info = {r["session_id"]: r for r in enrichment.select(cols).to_pylist()}
    said: dict[str, list[str]] = {}
    for sid, text in zip(
        memories.column("session_id").to_pylist(), memories.column("text").to_pylist(), strict=True
    ):
        said.setdefault(sid, []).append(text or "")
    by_contact: dict[str, list[dict]] = {}
    for r in sessions.select(["session_id", "contact_id", "local_date", "start_ts"]).to_pylist():
        by_contact.setdefault(r["contact_id"], []).append(r)
    out = []
    for row in rows.to_pylist():
        contact = row["contact_id"]
        today = sorted(by_contact.get(contact, []), key=lambda r: (r["start_ts"], r["session_id"]))
        result = writer.rewrite(
            contact_id=contact,
            date=row["local_date"].isoformat(),
            rule_markdown=row["markdown"],
            previous_markdown=pages.get(contact),
            sessions=[
                DossierSession(
                    r["session_id"],
                    r["local_date"].isoformat(),
                    (info.get(r["session_id"]) or {}).get("title") or "",
                    tuple((info.get(r["session_id"]) or {}).get("bullets") or ()),
                    tuple(said.get(r["session_id"], ())),
                )
                for r in today
            ],
            allowed_sessions=set(json.loads(row["state"]).get("counted") or []),
        )
        row["markdown"] = result.markdown
        row["cited_sessions"] = cited_sessions(result.markdown)
        row["method"] = (
            result.method
            if result.accepted
            else f"deterministic; rejected {writer.method}: {', '.join(result.problems)}"
        )
        out.append(row)
    return pa.Table.from_pylist(out, schema=rows.schema)


@dataclass
class DossierWrite:
    """What ``write_dossiers`` did: the contacts updated, later partitions (if any), and the
    dates outside the range asked for that a pending refold rebuilt."""

    contacts: list[str]
    later: list[dt.date]  # dossier partitions after the range: its files were left alone
    refolded: list[dt.date] = field(default_factory=list)


def write_dossiers(
    store: TableStore, dates: Iterable[dt.date], folder: Path, writer: Any | None = None
) -> DossierWrite:
    """Build and write the dossier partitions of ``dates`` in order, then the current files.

    The ``.md`` files are the latest versions; when later partitions exist (a past range was
    rebuilt) they hold the current versions, so the files are left alone. While a refold is
    pending (after a retention purge) the fold covers :func:`fold_dates`, not only ``dates``.
    """
    from memory_pipeline.core.memories.dossier import write_markdown_atomic

    asked = set(dates)
    days = fold_dates(store, asked)
    latest: dict[str, str] = {}
    for day, rows in build_dossiers(store, days, writer):
        store.write(T.DOSSIERS, rows, day)
        latest.update(
            zip(
                rows.column("contact_id").to_pylist(),
                rows.column("markdown").to_pylist(),
                strict=True,
            )
        )
    _refold_done(store)
    later = [d for d in store.dates(T.DOSSIERS) if days and d > days[-1]]
    if not later:
        for contact, markdown in latest.items():
            write_markdown_atomic(folder, contact, markdown)
    return DossierWrite(sorted(latest), later, [d for d in days if d not in asked])
