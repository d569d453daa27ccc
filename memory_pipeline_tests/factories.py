"""Small builders for hand-made messages (core tests)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from memory_pipeline.core.common.records import Message
from memory_pipeline.core.common.timeutil import to_utc
from memory_pipeline.core.ingest.columnar import ingest
from memory_pipeline.core.ingest.normalize import messages_table

TZ = "Asia/Tokyo"


def msg(
    local: str,
    text: str = "hello",
    sender: str = "A",
    conv: str = "c1",
    order: int = 0,
    type_: str = "text",
    source: str = "test",
) -> Message:
    """A message at local wall time ``local`` ("2024-03-01 23:50")."""
    ts_local = dt.datetime.fromisoformat(local)
    return Message(
        source=source,
        conversation_id=conv,
        contact_id=conv,
        sender=sender,
        is_owner=sender == "A",
        ts=to_utc(ts_local, TZ),
        local_ts=ts_local,
        tz=TZ,
        type=type_,
        text=text,
        source_order=order,
        source_ref=f"{conv}.json:{order + 1}",
        source_file=f"{conv}.json",
        source_line=order + 1,
    )


def table(*messages: Message) -> pa.Table:
    """Messages -> the canonical messages table via the real ingest path."""
    result = ingest(list(messages), start_date=dt.date(2000, 1, 1))
    assert not result.quarantine, [q.reason for q in result.quarantine]
    return messages_table(result.messages)


def series(conv: str, start: str, minutes: list[float], sender_cycle: str = "AB") -> list[Message]:
    """Messages in one conversation at ``start`` + cumulative ``minutes``."""
    t = dt.datetime.fromisoformat(start)
    out = []
    for i, m in enumerate(minutes):
        t = t + dt.timedelta(minutes=m)
        out.append(
            msg(t.isoformat(sep=" "), f"m{i}", sender_cycle[i % len(sender_cycle)], conv, order=i)
        )
    return out
