"""The turn index: one BM25 document per message, so turns are ranked on their own.

A LoCoMo answer usually sits in one or two messages, and ranking messages only inside the
top chunks (highlights) caps turn recall at what those few chunks hold. Here every message
is a document of its own: the message, its speaker and its session date, plus its
neighbours in the session as context (a reply is often only intelligible with the message
before it). Built from a version's own chunk and message lookups, so it is published in the
same index version and shares the chunk indexes' tokenizer.

Two documents per message keep the message and its context separable at query time:
``turn`` (speaker, date, message) and ``turn_ctx`` (the ``context`` messages either side).
Document ids are the message ids (content-derived at ingest), so the index is deterministic.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from memory_pipeline.core.indexes.bm25 import Bm25Index, build_index
from memory_pipeline.core.indexes.tokenize import Tokenizer

TURN_FOLDER = "turns"
TURN_REPS = ("turn", "turn_ctx")
TURN_META = "turns.json"
TURN_FORMAT = 1
CONTEXT = 1  # neighbours either side in ``turn_ctx`` (measured: see the evaluation report)


@dataclass(frozen=True)
class TurnLayout:
    """Every message of the indexed chunks in session order (no text: what search needs).

    ``chunk_rows[i]``: the rows (in the chunk lookup's order) of the chunks holding message
    ``i`` (two where windows overlap); ``position[i]``: its offset in its session, and
    ``session_length[i]`` the session's message count (features of the reranker)."""

    message_ids: list[str]
    session_ids: list[str]
    chunk_rows: list[list[int]]
    position: np.ndarray
    session_length: np.ndarray


def turn_layout(chunks: pa.Table) -> TurnLayout:
    """The messages of a chunk lookup (chunk_id order), session by session (sorted ids).

    A session's messages are its chunks' message lists in ``chunk_index`` order with the
    overlap removed; a message id seen in two sessions is kept in the first (it cannot
    happen with content-derived ids, but a bad input must not duplicate a document)."""
    sessions = chunks.column("session_id").to_pylist()
    index = chunks.column("chunk_index").to_pylist()
    mids = chunks.column("message_ids").to_pylist()
    rows_of: dict[str, list[int]] = {}
    for row, sid in enumerate(sessions):
        rows_of.setdefault(sid, []).append(row)
    ids: list[str] = []
    out_sessions: list[str] = []
    out_rows: list[list[int]] = []
    position: list[int] = []
    length: list[int] = []
    placed: dict[str, int] = {}
    for sid in sorted(rows_of):
        start = len(ids)
        for row in sorted(rows_of[sid], key=lambda r: (index[r], r)):
            for m in mids[row]:
                if m not in placed:
                    placed[m] = len(ids)
                    ids.append(m)
                    out_sessions.append(sid)
                    out_rows.append([])
                elif out_sessions[placed[m]] != sid:
                    continue
                if row not in out_rows[placed[m]]:
                    out_rows[placed[m]].append(row)
        n = len(ids) - start
        position += list(range(n))
        length += [n] * n
    return TurnLayout(
        ids,
        out_sessions,
        out_rows,
        np.asarray(position, dtype=np.int32),
        np.asarray(length, dtype=np.int32),
    )


def turn_documents(
    layout: TurnLayout, messages: pa.Table, context: int = CONTEXT
) -> dict[str, list[str]]:
    """``turn`` (speaker, session date, message) and ``turn_ctx`` (the ``context``
    neighbours either side within the session) documents, in ``layout`` order."""
    if context < 0:
        raise ValueError(f"context must be >= 0, got {context}")
    cols = messages.select(["message_id", "sender", "local_ts", "text"]).to_pylist()
    by_id = {r["message_id"]: r for r in cols}
    texts = [str((by_id.get(m) or {}).get("text") or "") for m in layout.message_ids]
    turn_docs, ctx_docs = [], []
    for i, m in enumerate(layout.message_ids):
        r = by_id.get(m) or {}
        ts = r.get("local_ts")
        day = ts.date().isoformat() if ts is not None else ""
        turn_docs.append(f"{r.get('sender') or ''} {day}: {texts[i]}")
        j = int(layout.position[i])
        first, n = i - j, int(layout.session_length[i])
        lo, hi = max(first, i - context), min(first + n, i + context + 1)
        ctx_docs.append(" ".join(texts[x] for x in range(lo, hi) if x != i))
    return {"turn": turn_docs, "turn_ctx": ctx_docs}


def build_turn_index(
    version: Path,
    chunks: pa.Table,
    messages: pa.Table,
    tokenizer: Tokenizer,
    context: int = CONTEXT,
) -> dict:
    """Write ``version/turns/{turn,turn_ctx}`` (bm25s) and ``turns.json``; returns stats.

    ``chunks`` must be the chunk lookup as written (chunk_id order), ``tokenizer`` the one
    the chunk indexes use, so a query is tokenized once for every granularity."""
    layout = turn_layout(chunks.sort_by("chunk_id"))
    docs = turn_documents(layout, messages, context)
    folder = Path(version) / TURN_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    stats: dict = {"turns": len(layout.message_ids), "turn_context": context}
    for rep in TURN_REPS:
        if not layout.message_ids:
            break
        idx = build_index(layout.message_ids, docs[rep], tokenizer=tokenizer)
        idx.save(folder / rep)
        stats[f"{rep}_vocabulary"] = len(idx.vocab)
    meta = {"format": TURN_FORMAT, "context": context, "turns": len(layout.message_ids)}
    (folder / TURN_META).write_text(json.dumps(meta), encoding="utf-8")
    return stats


def load_turn_indexes(version: Path, reps: Sequence[str] = TURN_REPS) -> dict[str, Bm25Index]:
    """The turn indexes of a version ({} for a version built before turns were indexed, or
    with a format this code does not read: search then ranks turns as highlights)."""
    folder = Path(version) / TURN_FOLDER
    try:
        meta = json.loads((folder / TURN_META).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    if meta.get("format") != TURN_FORMAT:
        return {}
    return {r: Bm25Index.load(folder / r, mmap=True) for r in reps if (folder / r).is_dir()}
