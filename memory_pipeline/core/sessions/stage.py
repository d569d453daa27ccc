"""The sessions and chunks stages over the table store.

- ``sessions[D]``: sessions whose first message is on D. Needs ``raw_messages`` D-1 (is the
  first message of D a continuation?) and D+1 (does a late session run past midnight?);
  a session still open at the end of D+1 reads further days that exist.
- ``chunks[D]``: the chunks of ``sessions[D]``, reading the messages of every day they span.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

import pyarrow as pa
import pyarrow.compute as pc

from memory_pipeline.core.common import tables as T
from memory_pipeline.core.common.dates import DAY, date_range, split_by_date
from memory_pipeline.core.common.storage import TableStore
from memory_pipeline.core.sessions.chunking import chunk_sessions
from memory_pipeline.core.sessions.sessionize import owned_by, sessionize


def build_sessions(
    store: TableStore, dates: Iterable[dt.date], gap_minutes: int
) -> dict[dt.date, pa.Table]:
    """Sessions owned by each of ``dates``, from the stored raw_messages."""
    days = sorted(set(dates))
    if not days:
        return {}
    lo, hi = days[0] - DAY, days[-1] + DAY
    while True:
        window = date_range(lo, hi)
        sessions = owned_by(sessionize(store.read(T.RAW_MESSAGES, window), gap_minutes), days)
        still_open = pc.any(pc.equal(sessions.column("end_local_date"), pa.scalar(hi))).as_py()
        if not still_open or not store.has(T.RAW_MESSAGES, hi + DAY):
            break
        hi += DAY  # a session runs on past the window: read one more day
    return split_by_date(sessions, "local_date", days)


def build_chunks(
    store: TableStore, dates: Iterable[dt.date], size: int, stride: int
) -> dict[dt.date, pa.Table]:
    """Chunks of the stored sessions of each of ``dates``."""
    days = sorted(set(dates))
    sessions = store.read(T.SESSIONS, days)
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
        for d in date_range(s, e)
    }
    return store.read(T.RAW_MESSAGES, sorted(spans))
