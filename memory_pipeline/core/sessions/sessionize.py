"""Split conversations into sessions at inactivity gaps (the LINE paper's rule).

A gap *strictly longer* than the threshold starts a new session; a gap exactly at the
threshold does not. Sessions are never cut at midnight: a session belongs to the local date
of its first message (its partition) and may end on a later date.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from memory_pipeline.core.common.schema import MESSAGES, SESSIONS
from memory_pipeline.core.sessions.chunking import ID_SEP, hashed_ids, sorted_distinct

MESSAGE_SORT = [
    ("conversation_id", "ascending"),
    ("ts", "ascending"),
    ("source_order", "ascending"),
    ("message_id", "ascending"),
]

# The previous day is enough look-back only while a gap is shorter than a day.
MAX_GAP_MINUTES = 1440


def sort_messages(messages: pa.Table) -> pa.Table:
    """The one message order every stage uses: conversation, time, source position, id."""
    return messages.sort_by(MESSAGE_SORT)


def session_bounds(messages: pa.Table, gap_minutes: int) -> np.ndarray:
    """Row offsets where sessions start (plus the end), for messages in MESSAGE_SORT order."""
    if not 0 < gap_minutes <= MAX_GAP_MINUTES:
        raise ValueError(f"gap_minutes must be in 1..{MAX_GAP_MINUTES}, got {gap_minutes}")
    n = messages.num_rows
    if n == 0:
        return np.zeros(1, dtype=np.int64)
    conv = messages.column("conversation_id").combine_chunks()
    ts = messages.column("ts").combine_chunks().cast(pa.int64()).to_numpy()
    new = np.empty(n, dtype=bool)
    new[0] = True
    conv_codes = conv.dictionary_encode().indices.to_numpy()
    new[1:] = (conv_codes[1:] != conv_codes[:-1]) | (np.diff(ts) > gap_minutes * 60_000_000)
    return np.append(np.flatnonzero(new), n)


def sessionize(messages: pa.Table, gap_minutes: int) -> pa.Table:
    """Every session in ``messages`` (which must hold whole conversations' stretches)."""
    messages = sort_messages(messages)
    bounds = session_bounds(messages, gap_minutes)
    starts, ends = bounds[:-1], bounds[1:]
    if len(starts) == 0:
        return SESSIONS.empty_table()
    last = ends - 1
    col = {name: messages.column(name).combine_chunks() for name in MESSAGES.names}
    ts_us = col["ts"].cast(pa.int64()).to_numpy()
    owner_cum = np.concatenate([[0], np.cumsum(col["is_owner"].to_numpy(zero_copy_only=False))])
    # the longest gap inside each session: gaps at session starts count as 0
    gaps = np.diff(ts_us, prepend=ts_us[0])
    gaps[starts] = 0
    max_gap = np.maximum.reduceat(gaps, starts).astype(np.int64)
    take_first = pa.array(starts)
    take_last = pa.array(last)
    n_sessions = len(starts)
    session_of = np.repeat(np.arange(n_sessions), ends - starts)
    keys = pc.binary_join_element_wise(
        col["conversation_id"].take(take_first), col["message_id"].take(take_first), ID_SEP
    )
    table = pa.table(
        {
            "session_id": hashed_ids("ses", keys),
            "source": col["source"].take(take_first),
            "conversation_id": col["conversation_id"].take(take_first),
            "contact_id": col["contact_id"].take(take_first),
            "local_date": col["local_date"].take(take_first),
            "end_local_date": col["local_date"].take(take_last),
            "start_ts": col["ts"].take(take_first),
            "end_ts": col["ts"].take(take_last),
            "start_local_ts": col["local_ts"].take(take_first),
            "end_local_ts": col["local_ts"].take(take_last),
            "tz": col["tz"].take(take_first),
            "message_count": pa.array(ends - starts, pa.int32()),
            "owner_message_count": pa.array(owner_cum[ends] - owner_cum[starts], pa.int32()),
            "duration_seconds": pa.array((ts_us[last] - ts_us[starts]) // 1_000_000),
            "max_gap_seconds": pa.array(-(-max_gap // 1_000_000)),  # ceil: never hides a gap
            "gap_minutes": pa.array(np.full(n_sessions, gap_minutes), pa.int32()),
            "participants": sorted_distinct(session_of, col["sender"], n_sessions),
            "message_ids": pa.ListArray.from_arrays(
                pa.array(bounds, pa.int32()), col["message_id"]
            ),
        },
        schema=SESSIONS,
    )
    return table


def owned_by(sessions: pa.Table, dates: Iterable[dt.date]) -> pa.Table:
    """Sessions whose first message falls on one of ``dates`` (their owning partitions)."""
    wanted = pa.array(sorted(set(dates)), pa.date32())
    return sessions.filter(pc.is_in(sessions.column("local_date"), value_set=wanted))
