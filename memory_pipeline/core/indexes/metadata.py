"""Index-time time metadata: per-session and per-message dates, weekdays and spans that
time-aware queries filter on (published with the search index).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from memory_pipeline.core.common.timelex import WEEKDAY_NAMES


def session_metadata(sessions: pa.Table) -> pa.Table:
    """Per session: its 1-based index in its conversation and calendar fields for filters."""
    ordered = sessions.sort_by(
        [("conversation_id", "ascending"), ("start_ts", "ascending"), ("session_id", "ascending")]
    )
    convs = ordered.column("conversation_id").to_pylist()
    index, counts = [], {}
    for c in convs:
        counts[c] = counts.get(c, 0) + 1
        index.append(counts[c])
    starts = ordered.column("start_local_ts").to_pylist()
    return pa.table(
        {
            "session_id": ordered.column("session_id"),
            "conversation_id": ordered.column("conversation_id"),
            "contact_id": ordered.column("contact_id"),
            "session_index": pa.array(index, pa.int32()),
            "sessions_in_conversation": pa.array([counts[c] for c in convs], pa.int32()),
            "local_date": ordered.column("local_date"),
            "start_local_ts": ordered.column("start_local_ts"),
            "end_local_ts": ordered.column("end_local_ts"),
            "day_name": [WEEKDAY_NAMES[s.weekday()] for s in starts],
            "iso_week": pa.array([s.isocalendar()[1] for s in starts], pa.int32()),
            "participants": ordered.column("participants"),
        }
    )


def message_metadata(messages: pa.Table, sessions: pa.Table, session_meta: pa.Table) -> pa.Table:
    """Per message: its session, session index, response index (position in the session),
    speaker and calendar fields (Alonso et al.'s metadata for time filters)."""
    sid_of: dict[str, str] = {}
    pos_of: dict[str, int] = {}
    for sid, ids in zip(
        sessions.column("session_id").to_pylist(),
        sessions.column("message_ids").to_pylist(),
        strict=True,
    ):
        for i, m in enumerate(ids, 1):
            sid_of[m] = sid
            pos_of[m] = i
    index_of = dict(
        zip(
            session_meta.column("session_id").to_pylist(),
            session_meta.column("session_index").to_pylist(),
            strict=True,
        )
    )
    mids = messages.column("message_id").to_pylist()
    stamps = messages.column("local_ts").to_pylist()
    sids = [sid_of.get(m) for m in mids]
    return pa.table(
        {
            "message_id": mids,
            "session_id": sids,
            "session_index": pa.array([index_of.get(s) for s in sids], pa.int32()),
            "response_index": pa.array([pos_of.get(m) for m in mids], pa.int32()),
            "speaker": messages.column("sender"),
            "local_date": messages.column("local_date"),
            "local_time": pc.strftime(messages.column("local_ts"), format="%H:%M"),
            "day_name": [WEEKDAY_NAMES[s.weekday()] for s in stamps],
            "iso_week": pa.array([s.isocalendar()[1] for s in stamps], pa.int32()),
            "conversation_id": messages.column("conversation_id"),
            "source_ref": messages.column("source_ref"),
        }
    )
