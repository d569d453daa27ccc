"""Table invariants, as pure functions returning (passed, log-safe metadata).

The Dagster asset checks call these on the tables they just wrote; tests call them
directly on hand-made bad tables to prove each one can fail.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from memory_pipeline.core.common.dates import count_by  # noqa: F401  (re-exported)
from memory_pipeline.core.sessions.chunking import chunk_windows

Result = tuple[bool, dict]


def all_of(*results: Result) -> Result:
    """One check made of several: passes when every part passes; metadata of all parts.

    Dagster shows one check per invariant the user cares about, even when proving it takes
    two functions; later parts win on a shared metadata key (none share one today).
    """
    ok = all(r[0] for r in results)
    meta: dict = {}
    for _, m in results:
        meta.update(m)
    return ok, meta


def unique(table: pa.Table, column: str) -> Result:
    """No id appears twice."""
    n = table.num_rows
    distinct = pc.count_distinct(table.column(column)).as_py() if n else 0
    return distinct == n, {"rows": n, "duplicates": n - distinct}


def not_null(table: pa.Table, columns: Iterable[str]) -> Result:
    """Key columns are never null."""
    nulls = {c: table.column(c).null_count for c in columns}
    return not any(nulls.values()), {"null_counts": nulls}


def dates_within(table: pa.Table, column: str, days: Iterable[dt.date]) -> Result:
    """Every row's partition column is one of the partitions being written."""
    allowed = pa.array(sorted(set(days)), pa.date32())
    bad = (
        table.num_rows - pc.sum(pc.is_in(table.column(column), value_set=allowed)).as_py()
        if (table.num_rows)
        else 0
    )
    return bad == 0, {"rows_outside_partition": bad}


def local_ts_matches_date(messages: pa.Table) -> Result:
    """``local_date`` is the date of ``local_ts`` (the partition is by local wall time)."""
    if messages.num_rows == 0:
        return True, {"mismatches": 0}
    derived = pc.cast(messages.column("local_ts"), pa.date32())
    bad = pc.sum(pc.not_equal(derived, messages.column("local_date"))).as_py()
    return bad == 0, {"mismatches": bad}


def conservation(audit: pa.Table, messages: pa.Table, quarantine: pa.Table) -> Result:
    """Per partition and source: records read = messages stored + records quarantined."""
    read = count_by(audit, "partition_date", "records_read")
    stored = count_by(messages, "local_date")
    for key, n in count_by(quarantine, "partition_date").items():
        stored[key] = stored.get(key, 0) + n
    keys = sorted(set(read) | set(stored))
    off = {
        f"{d}/{s}": {"read": read.get((d, s), 0), "stored": stored.get((d, s), 0)}
        for d, s in keys
        if read.get((d, s), 0) != stored.get((d, s), 0)
    }
    return not off, {
        "records_read": sum(read.values()),
        "ingested": messages.num_rows,
        "quarantined": quarantine.num_rows,
        "mismatched_partitions": off,
    }


def messages_in_partition(messages: pa.Table, days: Iterable[dt.date]) -> Result:
    """Every message sits in a partition being written, and that partition is the date of its
    local wall time: a message filed under the wrong day would be missed by time filters."""
    return all_of(dates_within(messages, "local_date", days), local_ts_matches_date(messages))


def sessions_respect_gap(sessions: pa.Table, messages: pa.Table, gap_minutes: int) -> Result:
    """Inside a session no gap exceeds the threshold; between consecutive sessions of a
    conversation the gap does exceed it; start <= end; counts match the id lists."""
    problems: Counter[str] = Counter()
    if sessions.num_rows == 0:
        return True, {"sessions": 0}
    limit = gap_minutes * 60
    limit_us = limit * 1_000_000
    problems["gap_inside_too_long"] = int(
        pc.sum(pc.greater(sessions.column("max_gap_seconds"), limit)).as_py() or 0
    )
    problems["end_before_start"] = int(
        pc.sum(pc.less(sessions.column("end_ts"), sessions.column("start_ts"))).as_py() or 0
    )
    lens = pc.list_value_length(sessions.column("message_ids"))
    problems["count_mismatch"] = int(
        pc.sum(pc.not_equal(lens, sessions.column("message_count"))).as_py() or 0
    )
    ordered = sessions.sort_by([("conversation_id", "ascending"), ("start_ts", "ascending")])
    conv = ordered.column("conversation_id").to_pylist()
    start = ordered.column("start_ts").cast(pa.int64()).to_numpy()
    end = ordered.column("end_ts").cast(pa.int64()).to_numpy()
    for i in range(1, len(conv)):
        if conv[i] == conv[i - 1] and start[i] - end[i - 1] <= limit_us:
            problems["consecutive_sessions_too_close"] += 1
    if messages.num_rows:
        ids = pc.list_flatten(sessions.column("message_ids"))
        problems["unknown_message_ids"] = int(
            len(ids) - pc.sum(pc.is_in(ids, value_set=messages.column("message_id"))).as_py()
        )
    bad = {k: v for k, v in problems.items() if v}
    return not bad, {"sessions": sessions.num_rows, "problems": bad}


def sessions_valid(
    sessions: pa.Table, messages: pa.Table, gap_minutes: int, days: Iterable[dt.date]
) -> Result:
    """The sessions of ``days`` respect the gap (see :func:`sessions_respect_gap`) and each is
    owned by one of those days: the session asset's single blocking invariant.

    ``messages`` must cover the day before and after ``days``: a session may start right after
    yesterday's last session or run past midnight.
    """
    return all_of(
        sessions_respect_gap(sessions, messages, gap_minutes),
        dates_within(sessions, "local_date", days),
    )


def every_message_in_one_session(sessions: pa.Table, messages: pa.Table) -> Result:
    """Each message of the given partitions belongs to exactly one session."""
    ids = pc.list_flatten(sessions.column("message_ids")).to_pylist()
    counts = Counter(ids)
    multi = sum(1 for c in counts.values() if c > 1)
    missing = sum(1 for m in messages.column("message_id").to_pylist() if m not in counts)
    return multi == 0 and missing == 0, {"in_several_sessions": multi, "in_no_session": missing}


def chunk_invariants(chunks: pa.Table, sessions: pa.Table, size: int, stride: int) -> Result:
    """Chunks are exactly the planned windows of each session: size <= ``size``, starts every
    ``stride``, ``size - stride`` overlap, all messages covered, nothing across sessions."""
    problems: Counter[str] = Counter()
    by_session: dict[str, list[tuple[int, list[str]]]] = {}
    for sid, first, mids in zip(
        chunks.column("session_id").to_pylist(),
        chunks.column("first_message_index").to_pylist(),
        chunks.column("message_ids").to_pylist(),
        strict=True,
    ):
        by_session.setdefault(sid, []).append((first, mids))
        if len(mids) > size:
            problems["chunk_too_large"] += 1
    for sid, ids in zip(
        sessions.column("session_id").to_pylist(),
        sessions.column("message_ids").to_pylist(),
        strict=True,
    ):
        got = sorted(by_session.pop(sid, []), key=lambda p: p[0])
        want = [(a, ids[a:b]) for a, b in chunk_windows(len(ids), size, stride)]
        if got != want:
            problems["windows_differ_from_plan"] += 1
        covered = {m for _, mids in got for m in mids}
        problems["messages_not_in_any_chunk"] += len(set(ids) - covered)
        for (_, prev), (_, cur) in zip(got, got[1:], strict=False):
            if len(set(prev) & set(cur)) != min(size - stride, len(cur)):
                problems["bad_overlap"] += 1
    problems["chunks_without_session"] += sum(len(v) for v in by_session.values())
    ok, meta = unique(chunks, "chunk_id")
    problems["duplicate_chunk_ids"] += meta["duplicates"]
    bad = {k: v for k, v in problems.items() if v}
    sizes = (
        np.asarray(chunks.column("message_count").to_numpy()) if chunks.num_rows else np.zeros(1)
    )
    return not bad, {
        "chunks": chunks.num_rows,
        "problems": bad,
        "max_messages": int(sizes.max()),
        "mean_messages": round(float(sizes.mean()), 2),
    }


def memories_cite_sources(memories: pa.Table, sessions: pa.Table, message_ids: set[str]) -> Result:
    """Every memory cites >= 1 stored message, all of its own session and contact.

    The second half is contact isolation: a memory can only come from a conversation with
    the contact it is filed under.
    """
    by_session = {
        s: (c, set(m))
        for s, c, m in zip(
            sessions.column("session_id").to_pylist(),
            sessions.column("contact_id").to_pylist(),
            sessions.column("message_ids").to_pylist(),
            strict=True,
        )
    }
    problems: Counter[str] = Counter()
    for sid, contact, mids in zip(
        memories.column("session_id").to_pylist(),
        memories.column("contact_id").to_pylist(),
        memories.column("message_ids").to_pylist(),
        strict=True,
    ):
        found = by_session.get(sid)
        if found is None:
            problems["unknown_session"] += 1
        elif found[0] != contact:
            problems["other_contact"] += 1
        elif not mids:
            problems["no_source"] += 1
        elif not set(mids) <= found[1]:
            problems["message_outside_session"] += 1
        elif not set(mids) <= message_ids:
            problems["unknown_message"] += 1
    return not problems, {"memories": memories.num_rows, "problems": dict(problems)}


def dossiers_valid(dossiers: pa.Table, session_contact: dict[str, str]) -> dict[str, Result]:
    """Per check name: sections present; every bullet cited by existing sessions; isolation.

    ``session_contact`` maps every stored session id to its contact.
    """
    from memory_pipeline.core.memories.dossier import (
        cited_sessions,
        missing_sections,
        uncited_bullets,
    )

    missing: dict[str, list[str]] = {}
    uncited: dict[str, int] = {}
    unknown: dict[str, int] = {}
    foreign: dict[str, int] = {}
    for contact, day, markdown in zip(
        dossiers.column("contact_id").to_pylist(),
        dossiers.column("local_date").to_pylist(),
        dossiers.column("markdown").to_pylist(),
        strict=True,
    ):
        key = f"{contact}@{day}"
        if gone := missing_sections(markdown):
            missing[key] = gone
        if bad := uncited_bullets(markdown):
            uncited[key] = len(bad)
        cited = cited_sessions(markdown)
        if n := sum(1 for s in cited if s not in session_contact):
            unknown[key] = n
        if n := sum(1 for s in cited if s in session_contact and session_contact[s] != contact):
            foreign[key] = n
    n = dossiers.num_rows
    return {
        "sections": (
            not missing,
            {"dossiers": n, "missing_sections": dict(list(missing.items())[:20])},
        ),
        "citations": (
            not uncited and not unknown,
            {
                "dossiers": n,
                "uncited_bullets": dict(list(uncited.items())[:20]),
                "unknown_sessions": dict(list(unknown.items())[:20]),
            },
        ),
        "isolation": (
            not foreign,
            {"dossiers": n, "other_contact_sessions": dict(list(foreign.items())[:20])},
        ),
    }
