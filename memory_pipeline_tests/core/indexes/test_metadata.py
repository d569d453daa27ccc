"""message_metadata over whole columns equals the per-message reference it replaced."""

from __future__ import annotations

import datetime as dt
import random

import pyarrow as pa
import pyarrow.compute as pc

from memory_pipeline.core.common.timelex import WEEKDAY_NAMES
from memory_pipeline.core.indexes.metadata import message_metadata, session_metadata


def _reference(messages: pa.Table, sessions: pa.Table, session_meta: pa.Table) -> pa.Table:
    """The per-message implementation (one dict entry and datetime per message)."""
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


def _tables(seed: int, n_sessions: int):
    rng = random.Random(seed)
    sessions, messages = [], []
    base = dt.datetime(2022, 12, 25, 21, 0)  # ISO weeks 51, 52 and 1 of the next year
    for s in range(n_sessions):
        conv = f"conv{rng.randrange(3)}"
        start = base + dt.timedelta(hours=rng.randrange(0, 24 * 12))
        ids = [f"m{s}-{k}" for k in range(rng.randrange(0, 6))]
        for k, m in enumerate(ids):
            ts = start + dt.timedelta(minutes=50 * k)
            messages.append(
                {
                    "message_id": m,
                    "sender": rng.choice(["Ann", None]),
                    "local_ts": ts,
                    "local_date": ts.date(),
                    "conversation_id": conv,
                    "source_ref": f"ref{s}:{k}",
                }
            )
        if sessions and rng.random() < 0.2:  # a message two sessions list: the last wins
            ids = ids + [sessions[-1]["message_ids"][0]] if sessions[-1]["message_ids"] else ids
        sessions.append(
            {
                "session_id": f"s{rng.randrange(10**6):06d}",
                "conversation_id": conv,
                "contact_id": "c",
                "start_ts": start,
                "start_local_ts": start,
                "end_local_ts": start,
                "local_date": start.date(),
                "participants": ["Ann"],
                "message_ids": ids,
            }
        )
    ts = base + dt.timedelta(days=3)
    messages.append(  # in no session
        {
            "message_id": "orphan",
            "sender": "Bob",
            "local_ts": ts,
            "local_date": ts.date(),
            "conversation_id": "conv0",
            "source_ref": "x",
        }
    )
    rng.shuffle(messages)
    return pa.Table.from_pylist(messages), pa.Table.from_pylist(sessions)


def test_message_metadata_equals_the_per_message_reference():
    for seed, n in ((0, 40), (1, 3), (2, 1)):
        messages, sessions = _tables(seed, n)
        smeta = session_metadata(sessions)
        got = message_metadata(messages, sessions, smeta)
        want = _reference(messages, sessions, smeta)
        # (the reference types an all-null column as null; the columns stay typed here)
        assert got.schema == want.schema or want.schema.field("session_id").type == pa.null()
        assert got.to_pylist() == want.to_pylist(), seed
    assert message_metadata(messages.slice(0, 0), sessions, smeta).num_rows == 0


def _session_reference(sessions: pa.Table) -> pa.Table:
    """The per-session implementation session_metadata replaced (a Python counter and a
    datetime per session)."""
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


def test_session_metadata_equals_the_per_session_reference():
    """Session indexes per conversation, weekday names and ISO weeks (across a year's end)
    as the per-session code gave them, table for table."""
    for seed, n in ((0, 40), (1, 3), (2, 1), (3, 200)):
        _, sessions = _tables(seed, n)
        assert session_metadata(sessions).equals(_session_reference(sessions)), seed
