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

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from memory_pipeline.core.indexes.bm25 import DOC_IDS_FILE, Bm25Index, build_index
from memory_pipeline.core.indexes.tokenize import Tokenizer
from memory_pipeline.core.indexes.turn_arrays import (
    LAYOUT_FOLDER,
    TurnArrays,
    TurnLayout,
    load_turn_arrays,
    turn_layout,
    write_turn_arrays,
)

TURN_FOLDER = "turns"
TURN_REPS = ("turn", "turn_ctx")
TURN_META = "turns.json"
MESSAGE_TOKENS = "message_tokens.npz"
TURN_FORMAT = 1
CONTEXT = 1  # neighbours either side in ``turn_ctx`` (measured: see the evaluation report)


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


def _prefix(sender: str | None, day: str) -> str:
    """The head of a ``turn`` document; the message follows after one space."""
    return f"{sender or ''} {day}:"


def turn_token_lists(
    layout: TurnLayout, messages: pa.Table, tokenizer: Tokenizer, context: int = CONTEXT
) -> tuple[dict[str, list[list[str]]], list[list[str]]]:
    """The token lists of the ``turn`` / ``turn_ctx`` documents of :func:`turn_documents`
    (layout order), and each message's own tokens, with every message text tokenized once.

    A ``turn_ctx`` document is its neighbours joined by spaces and a ``turn`` document is
    ``"<speaker> <date>:"`` and the message joined by a space, so their tokens are the parts'
    tokens concatenated: 4x less text through the tokenizer than tokenizing each document
    (the context repeats every message twice) and, through a ``CachedTokenizer``, a refresh
    tokenizes only new messages. For the regex-based tokenizers (``english``, ``regex``,
    ``cjk_bigram``) a space never sits inside a token, so the lists equal the documents'
    tokens exactly (tested); Sudachi reads each message alone, as queries and highlights do.
    """
    if context < 0:
        raise ValueError(f"context must be >= 0, got {context}")
    cols = messages.select(["message_id", "sender", "local_ts", "text"])
    row_of = {m: i for i, m in enumerate(cols.column("message_id").to_pylist())}
    senders = cols.column("sender").to_pylist()
    days = [d.isoformat() if d is not None else "" for d in _dates(cols.column("local_ts"))]
    all_texts = cols.column("text").to_pylist()
    rows = [row_of.get(m) for m in layout.message_ids]
    texts = [str(all_texts[r] or "") if r is not None else "" for r in rows]
    heads = [_prefix(senders[r], days[r]) if r is not None else _prefix("", "") for r in rows]
    # each distinct text and head once (repeated greetings, one head per speaker and day)
    unique_texts = list(dict.fromkeys(texts))
    text_tokens = dict(zip(unique_texts, tokenizer.tokenize_many(unique_texts), strict=True))
    unique_heads = list(dict.fromkeys(heads))
    head_tokens = dict(zip(unique_heads, tokenizer.tokenize_many(unique_heads), strict=True))
    own = [text_tokens[t] for t in texts]
    turn = [head_tokens[h] + toks for h, toks in zip(heads, own, strict=True)]
    n = len(own)
    first = np.arange(n) - layout.position
    end = first + layout.session_length
    ctx: list[list[str]] = []
    for i in range(n):
        lo, hi = max(int(first[i]), i - context), min(int(end[i]), i + context + 1)
        ctx.append([t for x in range(lo, hi) if x != i for t in own[x]])
    return {"turn": turn, "turn_ctx": ctx}, own


def _dates(ts: pa.ChunkedArray) -> list:
    """The calendar date of each timestamp (None for a null), without a Python datetime per
    row: the wall-clock date of the stored value, as ``datetime.date()`` gives it."""
    import pyarrow.compute as pc

    if pa.types.is_timestamp(ts.type) and ts.type.tz is not None:
        # the stored value is UTC; ``.date()`` of the aware datetime to_pylist would give is
        # the date in that zone
        ts = pc.local_timestamp(ts)
    return pc.cast(ts, pa.date32()).to_pylist() if len(ts) else []


class _Pretokenized:
    """A tokenizer stand-in whose ``tokenize_many`` returns lists computed beforehand, so
    :func:`build_index` indexes them; it carries the real tokenizer's identity, which the
    saved index records (queries are tokenized by the real one)."""

    def __init__(self, inner: Tokenizer, lists: list[list[str]]) -> None:
        self.name = inner.name
        self.params = inner.params
        self._inner = inner
        self._lists = lists

    def tokenize(self, text: str) -> list[str]:
        return self._inner.tokenize(text)

    def tokenize_many(self, texts) -> list[list[str]]:
        texts = list(texts)
        if len(texts) != len(self._lists):
            raise ValueError(f"{len(texts)} texts for {len(self._lists)} token lists")
        return self._lists


def build_turn_index(
    version: Path,
    chunks: pa.Table,
    messages: pa.Table,
    tokenizer: Tokenizer,
    context: int = CONTEXT,
    parts: Path | None = None,
    sources: Mapping[dt.date, str] | None = None,
) -> dict:
    """Write ``version/turns/{turn,turn_ctx}`` (bm25s), the messages' own tokens and
    ``turns.json``; returns stats.

    ``chunks`` must be the chunk lookup as written (chunk_id order), ``tokenizer`` the one
    the chunk indexes use (or a ``CachedTokenizer`` around it), so a query is tokenized once
    for every granularity. The message tokens (ids in the ``turn`` vocabulary, CSR arrays)
    let search score highlights without tokenizing messages per query.

    With ``parts`` (a folder), each chunk partition's token lists are cached there by
    content hash and the index is assembled from them (:func:`_build_from_parts`): the same
    files, and a refresh tokenizes and converts only changed partitions. Inputs the parts
    cannot reproduce exactly (a message in sessions of two partitions) take the path below.
    With ``sources`` (each stored ``raw_messages`` partition's file digest), a part whose
    messages all lie in its day's window of partitions is keyed by those files' digests
    instead of a hash of every message's head and text (:func:`_turn_part`).
    """
    if context < 0:
        raise ValueError(f"context must be >= 0, got {context}")
    if parts is not None:
        stats = _build_from_parts(
            Path(version), chunks, messages, tokenizer, context, parts, sources
        )
        if stats is not None:
            return stats | _store_layout(Path(version), chunks, stats)
    layout = turn_layout(chunks.sort_by("chunk_id"))
    lists, own = turn_token_lists(layout, messages, tokenizer, context)
    folder = Path(version) / TURN_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    stats: dict = {"turns": len(layout.message_ids), "turn_context": context}
    for rep in TURN_REPS:
        if not layout.message_ids:
            break
        blank = [""] * len(lists[rep])  # the texts are not read: the lists are the tokens
        idx = build_index(layout.message_ids, blank, tokenizer=_Pretokenized(tokenizer, lists[rep]))
        idx.save(folder / rep)
        stats[f"{rep}_vocabulary"] = len(idx.vocab)
        if rep == "turn":
            write_message_tokens(folder, own, idx.vocab)
    meta = {"format": TURN_FORMAT, "context": context, "turns": len(layout.message_ids)}
    (folder / TURN_META).write_text(json.dumps(meta), encoding="utf-8")
    return stats | _store_layout(Path(version), chunks, stats)


def _store_layout(version: Path, chunks: pa.Table, stats: Mapping) -> dict:
    """The turn layout's arrays beside the index (``turn_arrays``): a load maps them instead
    of deriving them from the chunk lookup; nothing for an index without turns."""
    if not stats.get("turns"):
        return {}
    return write_turn_arrays(Path(version) / TURN_FOLDER / LAYOUT_FOLDER, chunks)


def load_turn_layout(
    version: Path, chunk_ids: pa.Array | pa.ChunkedArray, indexes: Mapping[str, Bm25Index]
) -> TurnArrays | None:
    """The turn layout a version stores (``turn_arrays.load_turn_arrays``; None: derive it),
    its message ids the ``turn`` index's own list when the two files agree."""
    folder = Path(version) / TURN_FOLDER
    turn = indexes.get(TURN_REPS[0])
    return load_turn_arrays(
        folder / LAYOUT_FOLDER,
        chunk_ids,
        turn.doc_ids if turn is not None else None,
        folder / TURN_REPS[0] / DOC_IDS_FILE,
    )


def write_message_tokens(folder: Path, own: list[list[str]], vocab: dict[str, int]) -> None:
    """Each message's tokens (layout order) as ids in ``vocab``: ``message_tokens.npz``
    with ``indptr`` (n + 1) and ``ids``, a CSR list that loads in milliseconds."""
    lengths = np.fromiter((len(t) for t in own), np.int64, len(own))
    indptr = np.zeros(len(own) + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    ids = np.fromiter((vocab[t] for toks in own for t in toks), np.int32, int(indptr[-1]))
    np.savez(folder / MESSAGE_TOKENS, indptr=indptr, ids=ids)


def load_message_tokens(version: Path) -> tuple[np.ndarray, np.ndarray] | None:
    """(indptr, ids) of a version's message tokens (None for a version built before them)."""
    path = Path(version) / TURN_FOLDER / MESSAGE_TOKENS
    if not path.is_file():
        return None
    with np.load(path) as z:
        return z["indptr"], z["ids"]


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
    out: dict[str, Bm25Index] = {}
    seen: tuple[bytes, list[str]] | None = None
    for r in reps:
        if not (folder / r).is_dir():
            continue
        # ``turn`` and ``turn_ctx`` index the same messages in the same order: one parse of
        # the ids (400k of them on a large corpus) when the two files are byte for byte equal
        raw = (folder / r / DOC_IDS_FILE).read_bytes()
        if seen is None or seen[0] != raw:
            seen = (raw, json.loads(raw.decode("utf-8")))
        out[r] = Bm25Index.load(folder / r, mmap=True, doc_ids=seen[1])
    return out


_ROWS = "__message_rows"  # a column the parts path adds to its chunks


def _message_columns(messages: pa.Table) -> tuple[pa.Array, pa.Table] | None:
    """(message ids, the columns a ``turn`` head and text are made of), row for row over
    ``messages``; None when an id repeats (the per-document path then decides which row
    wins). Heads and texts are derived only for the rows a part needs (:func:`_heads_texts`):
    a refresh that finds its parts by file digest derives none."""
    names = ["message_id", "sender", "local_ts", "text", "local_date"]
    cols = messages.select([c for c in names if c in messages.column_names])
    ids = pc.cast(cols.column("message_id"), pa.string()).combine_chunks()
    if pc.count_distinct(ids, mode="all").as_py() != len(ids):
        return None
    # one chunk per column: a part takes its rows (``_heads_texts``), and a take from a table
    # of one chunk per day re-assembles every chunk (a first build over 1,884 days: ~25 s)
    return ids, cols.drop_columns(["message_id"]).combine_chunks()


def _heads_texts(cols: pa.Table, rows: pa.Array) -> tuple[pa.Array, pa.Array]:
    """Each row's ``turn`` head (``"<speaker> <date>:"``) and text, as
    :func:`turn_token_lists` derives them; null where ``rows`` is null (a listed message
    that is not stored)."""
    taken = cols.take(rows)  # a null row takes a null row (an empty table included)
    ts = taken.column("local_ts")
    if pa.types.is_timestamp(ts.type) and ts.type.tz is not None:
        ts = pc.local_timestamp(ts)
    day = pc.cast(pc.cast(ts, pa.date32()), pa.string()).fill_null("")
    sender = pc.cast(taken.column("sender"), pa.string()).fill_null("")
    head = pc.binary_join_element_wise(pc.binary_join_element_wise(sender, day, " "), "", ":")
    text = pc.cast(taken.column("text"), pa.string()).fill_null("")
    head, text = head.combine_chunks(), text.combine_chunks()
    if rows.null_count:
        valid = pc.is_valid(rows)
        head = pc.if_else(valid, head, pa.scalar(None, pa.string()))
        text = pc.if_else(valid, text, pa.scalar(None, pa.string()))
    return head, text


def _file_key_content(
    day: object, cols: pa.Table, rows: pa.Array, sources: Mapping[dt.date, str]
) -> list[pa.Array] | None:
    """The digests of the ``raw_messages`` files a part's messages are read from (its day
    and the days either side: a session reads its neighbours), or None when a listed
    message is missing or outside them (the part is then keyed by its messages' content)."""
    if not isinstance(day, dt.date) or rows.null_count or "local_date" not in cols.column_names:
        return None
    window = [day + dt.timedelta(days=k) for k in (-1, 0, 1)]
    if len(rows):
        dates = cols.column("local_date").take(rows)
        lo, hi = pc.min_max(dates).values()
        if dates.null_count or lo.as_py() < window[0] or hi.as_py() > window[-1]:
            return None
    return [pa.array([d.isoformat() for d in window]), pa.array([sources.get(d) for d in window])]


def _turn_part(
    day: object,
    chunks: pa.Table,
    cols: pa.Table,
    tokenizer: Tokenizer,
    folder: Path,
    sources: Mapping[dt.date, str] | None = None,
) -> tuple[pa.Table, str, bool]:
    """One partition's turn rows (session, message, position, session length, own tokens,
    head tokens), read from ``folder`` by key or computed and stored; (table, key,
    computed). The key hashes the chunks' ids, sessions, windows and listed messages, and
    either the digests of the ``raw_messages`` files they are read from (``sources``: the
    files hold every head and text) or, without them, every listed message's head and
    text; so a hit needs no layout, and with ``sources`` no message text (what the rows
    are derived from)."""
    from memory_pipeline.core.indexes import parts as P

    chunks = chunks.sort_by("chunk_id")
    lists = chunks.column("message_ids").combine_chunks()
    flat = pc.cast(pc.list_flatten(lists), pa.string())
    rows = pc.list_flatten(chunks.column(_ROWS))  # each listed message's row in messages
    if isinstance(rows, pa.ChunkedArray):
        rows = rows.combine_chunks()
    identity = {"kind": "turn", "tokenizer": tokenizer.name, "params": tokenizer.params}
    content = [
        chunks.column("chunk_id"),
        chunks.column("session_id"),
        pc.cast(chunks.column("chunk_index"), pa.int64()),
        pc.list_value_length(lists),
        flat,
    ]
    files = _file_key_content(day, cols, rows, sources) if sources is not None else None
    texts = None
    if files is not None:
        key = P.part_key(day, P.digest(identity | {"messages": "files"}, content + files))
    else:
        texts = _heads_texts(cols, rows)
        key = P.part_key(day, P.digest(identity, content + list(texts)))
    table = P.read_part(folder, key)
    if table is not None:
        return table, key, False
    layout = turn_layout(chunks)
    mids = pa.array(layout.message_ids, pa.string())
    at = dict(zip(flat.to_pylist(), range(len(flat)), strict=True))
    pick = pa.array([at[m] for m in layout.message_ids], pa.int64())
    heads_all, texts_all = texts if texts is not None else _heads_texts(cols, rows)
    head_list = heads_all.take(pick).fill_null(_prefix("", "")).to_pylist()
    text_list = texts_all.take(pick).fill_null("").to_pylist()
    unique_texts = list(dict.fromkeys(text_list))
    text_tokens = dict(zip(unique_texts, tokenizer.tokenize_many(unique_texts), strict=True))
    unique_heads = list(dict.fromkeys(head_list))
    head_tokens = dict(zip(unique_heads, tokenizer.tokenize_many(unique_heads), strict=True))
    table = pa.table(
        {
            "session_id": pa.array(layout.session_ids, pa.string()),
            "message_id": mids,
            "position": pa.array(layout.position, pa.int32()),
            "session_length": pa.array(layout.session_length, pa.int32()),
            "own": P.token_list_array([text_tokens[t] for t in text_list]),
            "head": P.token_list_array([head_tokens[h] for h in head_list]),
        }
    )
    P.write_part(folder, key, table)
    return table, key, True


def _build_from_parts(
    version: Path,
    chunks: pa.Table,
    messages: pa.Table,
    tokenizer: Tokenizer,
    context: int,
    folder: Path,
    sources: Mapping[dt.date, str] | None = None,
) -> dict | None:
    """:func:`build_turn_index` from per-partition part files (None: not reproducible
    exactly from parts, or nothing to index; the caller takes the per-document path).

    The global layout is every session in id order, so sorting the concatenated parts by
    (session, position) gives it back when no session spans two partitions (checked; a
    message two partitions list is kept once, as turn_layout keeps it). Documents are then
    ranges of one dictionary-encoded token array: ``turn`` = head + own tokens,
    ``turn_ctx`` = the neighbours' own tokens, as turn_token_lists concatenates them."""
    from memory_pipeline.core.indexes import parts as P
    from memory_pipeline.core.indexes.bm25 import fast_index_ids, new_retriever

    folder = Path(folder) / TURN_FOLDER
    columns = _message_columns(messages)
    if columns is None:
        return None
    # every listed message's row, looked up once (a lookup per partition rebuilt the hash
    # of all message ids each time: most of a warm refresh)
    lists = chunks.column("message_ids").combine_chunks()
    lengths = pc.list_value_length(lists).fill_null(0).to_numpy(zero_copy_only=False)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    rows = pc.index_in(pc.cast(pc.list_flatten(lists), pa.string()), value_set=columns[0])
    chunks = chunks.append_column(_ROWS, pa.ListArray.from_arrays(pa.array(offsets), rows))
    needed = ["chunk_id", "session_id", "chunk_index", "message_ids", "local_date", _ROWS]
    chunks = chunks.select([c for c in needed if c in chunks.column_names])  # no text copied
    built = [
        _turn_part(d, c, columns[1], tokenizer, folder, sources) for d, c in P.by_partition(chunks)
    ]
    tables = [t for t, _, _ in built if t.num_rows]
    if not tables:
        return None
    n_sessions = sum(pc.count_distinct(t.column("session_id")).as_py() for t in tables)
    table = pa.concat_tables(tables)
    if pc.count_distinct(table.column("session_id")).as_py() != n_sessions:
        return None  # a session cut into two partitions: no part holds its whole layout
    table = table.take(
        pc.sort_indices(table, [("session_id", "ascending"), ("position", "ascending")])
    )
    # A message listed by sessions of two partitions (a session re-cut across midnight
    # while the other partition was not rebuilt) stays in the first session by id, as in
    # turn_layout; positions and lengths are then recounted over what each session keeps.
    codes_m = table.column("message_id").combine_chunks().dictionary_encode().indices
    _, first_seen = np.unique(codes_m.to_numpy(zero_copy_only=False), return_index=True)
    dropped = table.num_rows - len(first_seen)
    if dropped:
        keep = np.zeros(table.num_rows, dtype=bool)
        keep[first_seen] = True
        table = table.filter(pa.array(keep))
    n = table.num_rows
    sess = table.column("session_id").combine_chunks()
    new_session = np.ones(n, dtype=bool)
    if n > 1:
        new_session[1:] = pc.not_equal(sess.slice(1), sess.slice(0, n - 1)).to_numpy(
            zero_copy_only=False
        )
    starts_at = np.flatnonzero(new_session)
    group = np.cumsum(new_session) - 1
    position = np.arange(n, dtype=np.int64) - starts_at[group]
    session_length = np.diff(np.append(starts_at, n))[group]
    own = table.column("own").combine_chunks()
    head = table.column("head").combine_chunks()
    own_len = pc.list_value_length(own).to_numpy(zero_copy_only=False).astype(np.int64)
    head_len = pc.list_value_length(head).to_numpy(zero_copy_only=False).astype(np.int64)
    own_off = np.cumsum(own_len) - own_len
    head_off = np.cumsum(head_len) - head_len
    own_values = pc.list_flatten(own)
    n_own = len(own_values)
    encoded = pa.concat_arrays([own_values, pc.list_flatten(head)]).dictionary_encode()
    codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    words = encoded.dictionary
    # turn: head then own tokens
    starts = np.empty(2 * n, dtype=np.int64)
    lens = np.empty(2 * n, dtype=np.int64)
    starts[0::2], starts[1::2] = n_own + head_off, own_off
    lens[0::2], lens[1::2] = head_len, own_len
    docs = {"turn": (codes[P.gather_ranges(starts, lens)], head_len + own_len)}
    # turn_ctx: the own tokens of the neighbours in [i - context, i + context], same session
    i = np.arange(n, dtype=np.int64)
    first = i - position
    end = first + session_length
    offsets = [d for d in range(-context, context + 1) if d != 0]
    seg_start = np.zeros((n, len(offsets)), dtype=np.int64)
    seg_len = np.zeros((n, len(offsets)), dtype=np.int64)
    for k, d in enumerate(offsets):
        x = i + d
        ok = (x >= first) & (x < end)
        xs = np.clip(x, 0, n - 1)
        seg_start[:, k] = own_off[xs]
        seg_len[:, k] = np.where(ok, own_len[xs], 0)
    docs["turn_ctx"] = (
        codes[P.gather_ranges(seg_start.ravel(), seg_len.ravel())],
        seg_len.sum(axis=1),
    )
    doc_ids = table.column("message_id").to_pylist()
    out = Path(version) / TURN_FOLDER
    stats: dict = {"turns": n, "turn_context": context}
    indexes = {}
    for rep in TURN_REPS:
        flat, lengths = docs[rep]
        vocab, rank = P.first_seen_ids(flat, words)
        retriever = new_retriever()
        if not fast_index_ids(retriever, vocab, rank[flat], lengths):
            return None  # an index without tokens: the per-document path handles it
        indexes[rep] = (Bm25Index(doc_ids=doc_ids, tokenizer=tokenizer, retriever=retriever), rank)
    out.mkdir(parents=True, exist_ok=True)
    for rep, (idx, rank) in indexes.items():
        idx.save(out / rep)
        stats[f"{rep}_vocabulary"] = len(idx.vocab)
        if rep == "turn":
            indptr = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(own_len, out=indptr[1:])
            ids = rank[codes[:n_own]].astype(np.int32)
            np.savez(out / MESSAGE_TOKENS, indptr=indptr, ids=ids)
    meta = {"format": TURN_FORMAT, "context": context, "turns": n}
    (out / TURN_META).write_text(json.dumps(meta), encoding="utf-8")
    keys = [k for _, k, _ in built]
    stats["turn_parts"] = len(keys)
    stats["turn_parts_computed"] = sum(1 for _, _, c in built if c)
    stats["turn_parts_pruned"] = P.prune(folder, keys)
    stats["turn_duplicates_dropped"] = dropped
    return stats
