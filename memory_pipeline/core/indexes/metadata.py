"""Index-time time metadata: per-session and per-message dates, weekdays and spans that
time-aware queries filter on (published with the search index).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from memory_pipeline.core.common.timelex import WEEKDAY_NAMES


def session_metadata(sessions: pa.Table) -> pa.Table:
    """Per session: its 1-based index in its conversation and calendar fields for filters.

    Whole-column Arrow and numpy, like :func:`message_metadata` (every refresh rebuilds it
    over every session)."""
    ordered = sessions.sort_by(
        [("conversation_id", "ascending"), ("start_ts", "ascending"), ("session_id", "ascending")]
    ).combine_chunks()
    n = ordered.num_rows
    conv = ordered.column("conversation_id").combine_chunks().dictionary_encode("encode")
    codes = conv.indices.to_numpy(zero_copy_only=False)
    new_conv = np.ones(n, dtype=bool)
    new_conv[1:] = codes[1:] != codes[:-1]  # sorted: a conversation's sessions are adjacent
    starts = np.flatnonzero(new_conv)
    group = np.cumsum(new_conv) - 1
    index = np.arange(n, dtype=np.int64) - starts[group] + 1
    counts = np.diff(np.append(starts, n))[group]
    starts_ts = ordered.column("start_local_ts")
    return pa.table(
        {
            "session_id": ordered.column("session_id"),
            "conversation_id": ordered.column("conversation_id"),
            "contact_id": ordered.column("contact_id"),
            "session_index": pa.array(index, pa.int32()),
            "sessions_in_conversation": pa.array(counts, pa.int32()),
            "local_date": ordered.column("local_date"),
            "start_local_ts": starts_ts,
            "end_local_ts": ordered.column("end_local_ts"),
            # Monday = 0, as datetime.weekday(); the ISO week, as isocalendar()[1]
            "day_name": pa.array(WEEKDAY_NAMES, pa.string()).take(pc.day_of_week(starts_ts)),
            "iso_week": pc.cast(pc.iso_week(starts_ts), pa.int32()),
            "participants": ordered.column("participants"),
        }
    )


def message_metadata(messages: pa.Table, sessions: pa.Table, session_meta: pa.Table) -> pa.Table:
    """Per message: its session, session index, response index (position in the session),
    speaker and calendar fields (Alonso et al.'s metadata for time filters).

    Whole-column Arrow work (no Python object per message: a refresh rebuilds this over
    every message). A message listed by two sessions takes the last one, as a dict would."""
    lists = sessions.column("message_ids").combine_chunks()
    flat_ids = pc.cast(pc.list_flatten(lists), pa.string())
    parent = pc.list_parent_indices(lists)
    starts = pc.list_value_length(lists).to_numpy(zero_copy_only=False).astype(np.int64)
    starts = np.cumsum(starts) - starts
    parent_np = parent.to_numpy(zero_copy_only=False).astype(np.int64)
    position = np.arange(len(flat_ids), dtype=np.int64) - starts[parent_np] + 1
    # last occurrence wins: look up in the reversed arrays
    rev = pa.array(np.arange(len(flat_ids) - 1, -1, -1, dtype=np.int64))
    mids = pc.cast(messages.column("message_id"), pa.string())
    at = pc.index_in(mids, value_set=flat_ids.take(rev))
    at_np = at.to_numpy(zero_copy_only=False)  # float with NaN for nulls
    found = pc.is_valid(at).to_numpy(zero_copy_only=False)
    row = np.where(found, len(flat_ids) - 1 - np.nan_to_num(at_np, nan=0).astype(np.int64), 0)
    session_of_row = sessions.column("session_id").combine_chunks()
    sids = session_of_row.take(pa.array(parent_np[row] if len(flat_ids) else row, mask=~found))
    resp = pa.array(position[row] if len(flat_ids) else row, pa.int32(), mask=~found)
    meta_ids = session_meta.column("session_id")
    meta_rev = pa.array(np.arange(len(meta_ids) - 1, -1, -1, dtype=np.int64))
    at_meta = pc.index_in(sids, value_set=meta_ids.take(meta_rev))
    session_index = session_meta.column("session_index").take(
        pc.subtract(len(meta_ids) - 1, at_meta)
    )
    stamps = messages.column("local_ts")
    return pa.table(
        {
            "message_id": pc.cast(mids, pa.string()),
            "session_id": pc.cast(sids, pa.string()),
            "session_index": pc.cast(session_index, pa.int32()),
            "response_index": resp,
            "speaker": messages.column("sender"),
            "local_date": messages.column("local_date"),
            "local_time": pc.strftime(stamps, format="%H:%M"),
            "day_name": pa.array(WEEKDAY_NAMES, pa.string()).take(pc.day_of_week(stamps)),
            "iso_week": pc.cast(pc.iso_week(stamps), pa.int32()),
            "conversation_id": messages.column("conversation_id"),
            "source_ref": messages.column("source_ref"),
        }
    )
