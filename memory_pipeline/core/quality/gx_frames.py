"""The derived frames the GX suites validate: one pandas frame per table (or cross-table
rule), computed here in Arrow/pandas so each expectation stays a plain column rule.

Pure: Arrow/pandas only, no GX and no Dagster. Only id, key, date and count columns are
kept (never message text): these frames are what GX sees.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from memory_pipeline.core.sessions.sessionize import MESSAGE_SORT, sort_messages

MESSAGE_KEY_COLUMNS = (
    "message_id",
    "conversation_id",
    "contact_id",
    "sender",
    "ts",
    "local_date",
    "source_ref",
)
QUARANTINE_KEY_COLUMNS = ("source", "source_file", "record_ref", "reason")

DAY = dt.timedelta(days=1)
US_PER_SECOND = 1_000_000


def as_arrow(data: pa.Table | pd.DataFrame) -> pa.Table:
    """Accept Arrow (what TableStore reads) or pandas (handy in tests)."""
    if isinstance(data, pa.Table):
        return data
    return pa.Table.from_pandas(data, preserve_index=False)


def as_days(partition_date: dt.date | Iterable[dt.date]) -> list[dt.date]:
    """One partition date or several (a partition range) -> sorted distinct dates."""
    if isinstance(partition_date, dt.date):
        return [partition_date]
    days = sorted(set(partition_date))
    if not days:
        raise ValueError("need at least one partition date")
    return days


def _pandas(columns: dict[str, Any]) -> pd.DataFrame:
    """Arrow columns -> pandas, dates kept as ``datetime.date`` (compared to partition dates)."""
    return pa.table(columns).to_pandas(date_as_object=True)


def _id_list_lengths(table: pa.Table) -> pa.Array:
    return pc.fill_null(pc.list_value_length(table.column("message_ids")), 0)


def messages_frame(messages: pa.Table) -> pd.DataFrame:
    """Key columns of raw_messages plus ``local_ts_date`` (the date the local time falls on)."""
    cols = {c: messages.column(c) for c in (*MESSAGE_KEY_COLUMNS, "source", "type")}
    cols["local_ts_date"] = pc.cast(messages.column("local_ts"), pa.date32())
    return _pandas(cols)


def quarantine_frame(quarantine: pa.Table) -> pd.DataFrame:
    """Id and locating columns of quarantine (``raw`` and ``detail`` stay out of GX)."""
    names = ("quarantine_id", *QUARANTINE_KEY_COLUMNS, "partition_date")
    return _pandas({c: quarantine.column(c) for c in names})


def audit_frame(audit: pa.Table) -> pd.DataFrame:
    """ingest_audit rows plus ``ingested_plus_quarantined`` (must equal ``records_read``)."""
    cols = {
        c: audit.column(c)
        for c in ("partition_date", "source", "records_read", "ingested", "quarantined")
    }
    cols["ingested_plus_quarantined"] = pc.add(
        audit.column("ingested"), audit.column("quarantined")
    )
    return _pandas(cols)


def audit_counts_frame(audit: pa.Table, messages: pa.Table, quarantine: pa.Table) -> pd.DataFrame:
    """Per (partition_date, source): what the audit claims vs the rows actually stored.

    An outer join, so a source present in only one of the three tables shows up with zeros
    on the other side instead of disappearing.
    """
    keys = ["partition_date", "source"]
    claimed = (
        _pandas({c: audit.column(c) for c in (*keys, "ingested", "quarantined")})
        .groupby(keys)
        .sum()
        .rename(columns={"ingested": "audit_ingested", "quarantined": "audit_quarantined"})
    )
    stored = _pandas(
        {"partition_date": messages.column("local_date"), "source": messages.column("source")}
    ).value_counts(keys)
    held = _pandas({c: quarantine.column(c) for c in keys}).value_counts(keys)
    joined = pd.concat(
        [claimed, stored.rename("stored_messages"), held.rename("stored_quarantined")], axis=1
    )
    counts = ["audit_ingested", "stored_messages", "audit_quarantined", "stored_quarantined"]
    joined = joined.reindex(columns=counts).fillna(0).astype("int64")
    return joined.reset_index().sort_values(keys, ignore_index=True)


def session_frame(sessions: pa.Table, messages: pa.Table) -> pd.DataFrame:
    """Session key columns plus derived columns that need the neighbouring messages.

    ``messages`` must hold the conversation's messages around every session (the day before
    its start to the day after its end). Derived:

    - ``gap_limit_seconds``: the row's ``gap_minutes`` * 60.
    - ``id_list_length``: length of ``message_ids`` (must equal ``message_count``).
    - ``gap_before_seconds`` / ``gap_after_seconds``: time from the previous message of the
      conversation to the session's first message, and from its last message to the next
      one, i.e. the gap to the neighbouring sessions (NaN when there is none in ``messages``).
    - ``messages_contiguous``: every id was found and they are consecutive in the
      conversation's message order (no message of another session in between).
    """
    ordered = sort_messages(messages.select([c for c, _ in MESSAGE_SORT]))
    n = ordered.num_rows
    ts = ordered.column("ts").cast(pa.int64()).to_numpy().astype(np.float64) / US_PER_SECOND
    conv = ordered.column("conversation_id").combine_chunks().dictionary_encode().indices
    conv = conv.to_numpy(zero_copy_only=False)
    same_prev = np.zeros(n, dtype=bool)
    same_prev[1:] = conv[1:] == conv[:-1]
    prev_gap = np.full(n, np.nan)
    prev_gap[1:] = np.where(same_prev[1:], np.diff(ts), np.nan)
    next_gap = np.full(n, np.nan)
    next_gap[:-1] = prev_gap[1:]
    position = {m: i for i, m in enumerate(ordered.column("message_id").to_pylist())}

    before, after, contiguous = [], [], []
    for ids in sessions.column("message_ids").to_pylist():
        pos = [position.get(m) for m in ids or []]
        if not pos or None in pos:
            before.append(np.nan)
            after.append(np.nan)
            contiguous.append(False)
            continue
        lo, hi = min(pos), max(pos)
        before.append(prev_gap[lo])
        after.append(next_gap[hi])
        contiguous.append(hi - lo + 1 == len(pos) and bool(same_prev[lo + 1 : hi + 1].all()))

    names = (
        "session_id",
        "conversation_id",
        "local_date",
        "message_count",
        "max_gap_seconds",
        "gap_minutes",
        "start_ts",
        "end_ts",
    )
    cols: dict[str, Any] = {c: sessions.column(c) for c in names}
    cols["gap_limit_seconds"] = pc.multiply(pc.cast(sessions.column("gap_minutes"), pa.int64()), 60)
    cols["id_list_length"] = _id_list_lengths(sessions)
    cols["gap_before_seconds"] = pa.array(before, pa.float64())
    cols["gap_after_seconds"] = pa.array(after, pa.float64())
    cols["messages_contiguous"] = pa.array(contiguous, pa.bool_())
    return _pandas(cols)


def chunk_frame(chunks: pa.Table, sessions: pa.Table) -> pd.DataFrame:
    """Chunk key columns plus derived neighbour columns, in (session, chunk_index) order.

    - ``id_list_length``: length of ``message_ids`` (must equal ``message_count``).
    - ``overlap_with_previous``: messages shared with the previous chunk of the session
      (NaN for a session's first chunk); must be ``chunk_size - chunk_stride``.
    - ``index_step``: chunk_index minus the previous chunk's (NaN first); must be 1, so a
      missing chunk in the middle is caught even when the overlap happens to fit.
    - ``session_known``: the chunk's session is one of the partition's sessions.
    """
    order = pc.sort_indices(
        chunks, sort_keys=[("session_id", "ascending"), ("chunk_index", "ascending")]
    )
    ordered = chunks.take(order)
    sids = ordered.column("session_id").to_pylist()
    index = ordered.column("chunk_index").to_pylist()
    id_lists = ordered.column("message_ids").to_pylist()
    overlap = np.full(len(sids), np.nan)
    step = np.full(len(sids), np.nan)
    for i in range(1, len(sids)):
        if sids[i] == sids[i - 1]:
            overlap[i] = len(set(id_lists[i] or []) & set(id_lists[i - 1] or []))
            if index[i] is not None and index[i - 1] is not None:
                step[i] = index[i] - index[i - 1]
    names = (
        "chunk_id",
        "session_id",
        "local_date",
        "chunk_index",
        "first_message_index",
        "message_count",
    )
    cols: dict[str, Any] = {c: ordered.column(c) for c in names}
    cols["id_list_length"] = _id_list_lengths(ordered)
    cols["overlap_with_previous"] = pa.array(overlap, pa.float64())
    cols["index_step"] = pa.array(step, pa.float64())
    cols["session_known"] = pc.fill_null(
        pc.is_in(ordered.column("session_id"), value_set=sessions.column("session_id")), False
    )
    return _pandas(cols)


def chunk_coverage_frame(chunks: pa.Table, sessions: pa.Table) -> pd.DataFrame:
    """One row per message of the sessions: in how many of its session's chunks it appears."""
    held: dict[tuple[str, str], int] = {}
    for sid, ids in zip(
        chunks.column("session_id").to_pylist(),
        chunks.column("message_ids").to_pylist(),
        strict=True,
    ):
        for m in set(ids or []):
            held[(sid, m)] = held.get((sid, m), 0) + 1
    sids, mids, counts = [], [], []
    for sid, ids in zip(
        sessions.column("session_id").to_pylist(),
        sessions.column("message_ids").to_pylist(),
        strict=True,
    ):
        for m in ids or []:
            sids.append(sid)
            mids.append(m)
            counts.append(held.get((sid, m), 0))
    return _pandas(
        {
            "session_id": pa.array(sids, pa.string()),
            "message_id": pa.array(mids, pa.string()),
            "chunk_count": pa.array(counts, pa.int64()),
        }
    )
