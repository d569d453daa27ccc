"""Overlapping message windows inside one session (the LINE paper's 42/36 setting).

Windows start every ``stride`` messages and hold at most ``size``; the last window is the
first one that reaches the session's end, so no window is contained in its predecessor and
every message is in at least one chunk. Windows never cross a session boundary.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from memory_pipeline.core.common.ids import stable_id
from memory_pipeline.core.common.schema import CHUNKS

DEFAULT_SIZE = 42
DEFAULT_STRIDE = 36


def chunk_windows(
    n: int, size: int = DEFAULT_SIZE, stride: int = DEFAULT_STRIDE
) -> list[tuple[int, int]]:
    """[start, end) offsets of the windows over a session of ``n`` messages."""
    if not 0 < stride <= size:
        raise ValueError(f"need 0 < stride <= size, got size={size} stride={stride}")
    out: list[tuple[int, int]] = []
    start = 0
    while start < n:
        end = min(start + size, n)
        out.append((start, end))
        if end == n:
            break
        start += stride
    return out


def render_lines(messages: pa.Table) -> list[str]:
    """One line per message: ``[YYYY-MM-DD HH:MM] sender: text`` (continuations indented)."""
    # numpy formats minutes ~3x faster than pc.strftime (0.3 s on 400k messages)
    minutes = messages.column("local_ts").combine_chunks().to_numpy(zero_copy_only=False)
    stamp = pa.array(
        np.char.replace(np.datetime_as_string(minutes.astype("datetime64[m]"), unit="m"), "T", " ")
    )
    text = pc.replace_substring(messages.column("text"), "\n", "\n  ")
    lines = pc.binary_join_element_wise(
        pc.binary_join_element_wise("[", stamp, "] ", messages.column("sender"), ": ", ""),
        text,
        "",
    )
    return lines.to_pylist()


def chunk_sessions(
    sessions: pa.Table,
    messages: pa.Table,
    size: int = DEFAULT_SIZE,
    stride: int = DEFAULT_STRIDE,
) -> pa.Table:
    """Chunks of every session in ``sessions``; ``messages`` must contain all their messages."""
    if sessions.num_rows == 0:
        return CHUNKS.empty_table()
    flat_ids = pc.list_flatten(sessions.column("message_ids"))
    rows = pc.index_in(flat_ids, value_set=messages.column("message_id").combine_chunks())
    if rows.null_count:
        missing = flat_ids.filter(pc.is_null(rows))[0].as_py()
        raise ValueError(f"session message {missing} missing from the messages given")
    ordered = messages.take(rows)
    lines = render_lines(ordered)
    ids = ordered.column("message_id").to_pylist()
    senders = ordered.column("sender").to_pylist()
    ts = ordered.column("ts").combine_chunks()
    counts = sessions.column("message_count").to_numpy()
    offsets = np.concatenate([[0], np.cumsum(counts)])

    out: dict[str, list] = {name: [] for name in CHUNKS.names}
    takes: list[int] = []  # session row per chunk
    firsts: list[int] = []
    lasts: list[int] = []
    session_ids = sessions.column("session_id").to_pylist()
    for row, (sid, base, n) in enumerate(
        zip(session_ids, offsets[:-1].tolist(), counts.tolist(), strict=True)
    ):
        for k, (a, b) in enumerate(chunk_windows(n, size, stride)):
            lo, hi = base + a, base + b
            mids = ids[lo:hi]
            out["chunk_id"].append(stable_id("chk", sid, *mids))
            out["chunk_index"].append(k)
            out["first_message_index"].append(a)
            out["message_count"].append(b - a)
            out["speakers"].append(sorted(set(senders[lo:hi])))
            out["message_ids"].append(mids)
            out["raw_text"].append("\n".join(lines[lo:hi]))
            takes.append(row)
            firsts.append(lo)
            lasts.append(hi - 1)
    take = pa.array(takes, pa.int64())
    for name in ("session_id", "source", "conversation_id", "contact_id", "local_date"):
        out[name] = sessions.column(name).take(take)
    out["start_ts"] = ts.take(pa.array(firsts, pa.int64()))
    out["end_ts"] = ts.take(pa.array(lasts, pa.int64()))
    return pa.table(out, schema=CHUNKS)
