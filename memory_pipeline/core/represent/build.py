"""Chunk and session representations: summaries, embedding_text, titles, vectors.

Pure functions over Arrow tables. Providers and the cache come in as arguments, so the
offline default (extractive + local MiniLM) and remote providers share one code path, and
tests can count provider calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import numpy as np
import pyarrow as pa

from memory_pipeline.core.common.ids import text_hash
from memory_pipeline.core.common.lang import detect_lang
from memory_pipeline.core.common.parallel import batched, is_serial, map_tasks
from memory_pipeline.core.common.redact import redact
from memory_pipeline.core.common.representations import REPRESENTATIONS
from memory_pipeline.core.common.schema import (
    CHUNK_SUMMARIES,
    EMBEDDING_TEXTS,
    SESSION_ENRICHMENT,
    embeddings_schema,
)
from memory_pipeline.core.represent.cache import (
    ContentCache,
    cached_embed,
    cached_summarize,
    embed_key_params,
)
from memory_pipeline.core.represent.embedding_text import build_embedding_text, excerpt_of
from memory_pipeline.core.represent.providers.base import Embedder, Summarizer
from memory_pipeline.core.represent.summarize import (
    Line,
    extractive_summary,
    parse_raw_text,
    session_bullets,
    session_title,
    source_length,
    summary_length,
    within_target,
)

EXTRACTIVE = "extractive"


def _fallback(lines: list[Line]) -> str:
    """A non-empty summary for a chunk without text messages (stickers, photos only)."""
    kinds = sorted({ln.type for ln in lines}) or ["message"]
    return f"[{len(lines)} messages without text: {', '.join(kinds)}]"


def summarize_chunks(
    chunks: pa.Table,
    *,
    summarizer: Summarizer | None = None,
    cache: ContentCache | None = None,
    redact_text: bool = False,
    workers: int = 1,
) -> pa.Table:
    """One summary per chunk: extractive offline, or a provider (cached by content hash)."""
    raw = chunks.column("raw_text").to_pylist()
    lines = [parse_raw_text(t) for t in raw]
    langs = [detect_lang(t) for t in raw]
    summaries: list[str] = []
    errors: list[str | None] = [None] * len(raw)
    redactions = [0] * len(raw)
    if summarizer is None:
        method = EXTRACTIVE
        summaries = [extractive_summary(ls, lang) for ls, lang in zip(lines, langs, strict=True)]
    else:
        if cache is None:
            raise ValueError("a provider summarizer needs the content cache")
        method = f"{summarizer.provider}/{summarizer.model}"
        sent = []
        for i, text in enumerate(raw):
            if redact_text:
                text, counts = redact(text)
                redactions[i] = sum(counts.values())
            sent.append((text, langs[i]))
        result = cached_summarize(cache, summarizer, sent, workers=workers)
        summaries = [s or "" for s in result.summaries]
        errors = list(result.errors)
    out_summary, out_len, src_len, ok = [], [], [], []
    for ls, lang, summary in zip(lines, langs, summaries, strict=True):
        summary = summary.strip() or _fallback(ls)
        n_src = source_length(ls, lang)
        out_summary.append(summary)
        out_len.append(summary_length(summary, lang))
        src_len.append(n_src)
        ok.append(within_target(summary, lang, n_src))
    return pa.table(
        {
            "chunk_id": chunks.column("chunk_id"),
            "session_id": chunks.column("session_id"),
            "local_date": chunks.column("local_date"),
            "lang": langs,
            "summary": out_summary,
            "method": [method] * len(raw),
            "summary_length": out_len,
            "source_length": src_len,
            "within_target": ok,
            "redactions": redactions,
            "error": errors,
        },
        schema=CHUNK_SUMMARIES,
    )


def embedding_texts(chunks: pa.Table, summaries: pa.Table) -> pa.Table:
    """The LINE paper's embedding_text: identity sentence + summary + labelled raw excerpt."""
    by_id = dict(
        zip(
            summaries.column("chunk_id").to_pylist(),
            zip(
                summaries.column("summary").to_pylist(),
                summaries.column("lang").to_pylist(),
                strict=True,
            ),
            strict=True,
        )
    )
    rows = chunks.select(["chunk_id", "contact_id", "conversation_id", "speakers", "raw_text"])
    texts, langs, excerpt_chars = [], [], []
    for r in rows.to_pylist():
        summary, lang = by_id[r["chunk_id"]]
        lines = parse_raw_text(r["raw_text"])
        start = lines[0].local_ts if lines else None
        end = lines[-1].local_ts if lines else None
        texts.append(
            build_embedding_text(
                contact_id=r["contact_id"],
                conversation_id=r["conversation_id"],
                start_local=start,
                end_local=end,
                speakers=r["speakers"],
                summary=summary,
                raw_text=r["raw_text"],
                lang=lang,
            )
        )
        langs.append(lang)
        excerpt_chars.append(len(excerpt_of(r["raw_text"])))
    return pa.table(
        {
            "chunk_id": chunks.column("chunk_id"),
            "local_date": chunks.column("local_date"),
            "lang": langs,
            "embedding_text": texts,
            "excerpt_chars": excerpt_chars,
        },
        schema=EMBEDDING_TEXTS,
    )


def session_lines(sessions: pa.Table, messages: pa.Table) -> list[list[Line]]:
    """Each session's messages as summarizer lines, in session order."""
    index = {m: i for i, m in enumerate(messages.column("message_id").to_pylist())}
    senders = messages.column("sender").to_pylist()
    texts = messages.column("text").to_pylist()
    stamps = messages.column("local_ts").to_pylist()
    types = messages.column("type").to_pylist()
    out = []
    for ids in sessions.column("message_ids").to_pylist():
        rows = [index[m] for m in ids]
        out.append([Line(senders[i], texts[i], stamps[i], types[i]) for i in rows])
    return out


def enrich_sessions(sessions: pa.Table, messages: pa.Table) -> pa.Table:
    """A 3-6 word title and bullets of decisions, commitments and context per session."""
    all_lines = session_lines(sessions, messages)
    langs = [detect_lang("\n".join(ln.text for ln in lines[:200])) for lines in all_lines]
    return pa.table(
        {
            "session_id": sessions.column("session_id"),
            "local_date": sessions.column("local_date"),
            "lang": langs,
            "title": [session_title(ls, lang) for ls, lang in zip(all_lines, langs, strict=True)],
            "bullets": [
                session_bullets(ls, lang) for ls, lang in zip(all_lines, langs, strict=True)
            ],
            "method": [EXTRACTIVE] * sessions.num_rows,
        },
        schema=SESSION_ENRICHMENT,
    )


def representation_texts(
    chunks: pa.Table, summaries: pa.Table, texts: pa.Table, representation: str
) -> list[str]:
    """The text of one representation for every chunk, in ``chunks`` order."""
    ids = chunks.column("chunk_id").to_pylist()
    if representation == "raw_text":
        return chunks.column("raw_text").to_pylist()
    table, column = {
        "summary": (summaries, "summary"),
        "embedding_text": (texts, "embedding_text"),
    }[representation]
    lookup = dict(
        zip(table.column("chunk_id").to_pylist(), table.column(column).to_pylist(), strict=True)
    )
    return [lookup[i] for i in ids]


# texts per splitting task on a cluster: token counting is ~1 ms per text, so a few hundred
# make a task worth its round trip
SPLIT_BATCH = 256


def _split_batch(embedder: Embedder, texts: Sequence[str]) -> list[list[str]]:
    """``split_for`` of one batch: the work unit a Dask worker runs (module level: pickles)."""
    split = embedder.split  # type: ignore[attr-defined]
    return [split(t) for t in texts]


def split_for(embedder: Embedder, texts: Sequence[str], runner: object = None) -> list[list[str]]:
    """Each text as the pieces ``embedder`` can take whole (``[text]`` when it fits).

    Local models say their window through ``split``; remote providers (8k+ token windows)
    get the text as it is and flag a cut themselves. With a ``runner`` (a Dask client) a
    local model's texts are split on the cluster in batches; a text's pieces do not
    depend on its batch."""
    split = getattr(embedder, "split", None)
    if not callable(split):
        return [[t] for t in texts]
    if is_serial(runner) or getattr(embedder, "remote", False) or not texts:
        return [split(t) for t in texts]
    parts = map_tasks(partial(_split_batch, embedder), batched(texts, SPLIT_BATCH), runner)
    return [pieces for part in parts for pieces in part]


SPLIT_FORMAT = 1  # bump when split_to_window cuts differently: old entries are not read


def piece_offsets(text: str, pieces: Sequence[str]) -> list[list[int]] | None:
    """``pieces`` as [start, end) offsets into ``text`` (each piece is a substring, in
    order), or None when they are not (then they are not cached)."""
    out, at = [], 0
    for piece in pieces:
        start = text.find(piece, at)
        if start < 0:
            return None
        out.append([start, start + len(piece)])
        at = start + len(piece)
    return out


def cached_split(
    embedder: Embedder,
    texts: Sequence[str],
    cache: ContentCache,
    keys: Sequence[str] | None = None,
    runner: object = None,
    variant: str = "",
) -> tuple[list[list[str]], int]:
    """:func:`split_for` through the content cache: (pieces per text, how many texts'
    cuts were read back).

    Why: splitting counts a text's tokens about three times over (the whole text, its lines,
    the pieces) and a local model's tokenizer is pure Python, so it cost as much as
    embedding a piece; a night re-chunks yesterday's partition too, whose pieces only the
    split could name (the vectors are cached per piece). A text's cut depends only on the
    text and the model's tokenizer and window (``embed_key_params``), so it is kept as
    offsets (no text) under the text hash of ``keys[i]`` (default the text itself; the
    text before redaction, with ``variant`` saying which redaction: forget and retention
    delete every entry under a purged text's hash)."""
    if not callable(getattr(embedder, "split", None)) or getattr(embedder, "remote", False):
        return split_for(embedder, texts, runner), 0
    params = {"format": SPLIT_FORMAT, "variant": variant}
    key = cache.key_for(
        f"split:{embedder.provider}",
        embedder.model,
        params | embed_key_params(embedder, "document"),
    )
    hashes = [text_hash(k) for k in (keys if keys is not None else texts)]
    found = cache.get_json(key, hashes)
    out: list[list[str] | None] = [None] * len(texts)
    todo: dict[str, int] = {}  # hash -> first text index that needs the split
    hits = 0
    for i, (h, text) in enumerate(zip(hashes, texts, strict=True)):
        spans = found.get(h)
        if spans is not None and (not spans or spans[-1][1] <= len(text)):
            out[i] = [text[a:b] for a, b in spans]
            hits += 1
        else:
            todo.setdefault(h, i)
    if todo:
        firsts = list(todo.values())
        fresh = split_for(embedder, [texts[i] for i in firsts], runner)
        store = {}
        for i, pieces in zip(firsts, fresh, strict=True):
            out[i] = pieces
            spans = piece_offsets(texts[i], pieces)
            if spans is not None:
                store[hashes[i]] = spans
        cache.put_json(key, store)
        for i, h in enumerate(hashes):
            if out[i] is None:
                out[i] = out[todo[h]]
    return [list(p) for p in out if p is not None], hits


def embed_chunks(
    chunks: pa.Table,
    summaries: pa.Table,
    texts: pa.Table,
    *,
    embedder: Embedder,
    cache: ContentCache,
    representations: Sequence[str] = REPRESENTATIONS,
    redact_text: bool = False,
    runner: object = None,
) -> tuple[pa.Table, dict]:
    """L2-normalized vectors per chunk and representation (cache first, then provider).

    A text over the model's window is split into pieces that fit (one row per piece, search
    takes the best piece), so no tail is silently dropped. Returns the table and log-safe
    stats (cache hits, provider calls, texts split, pieces, truncations, errors).
    ``runner`` (a Dask client, ``core/common/parallel.py``) splits and embeds on the
    cluster, in the same batches and representation order as serially, so the vectors are
    the same bits. The cache and the table stay here.
    """
    calls_before = embedder.calls
    redacted_n, split_n = 0, 0
    schema = embeddings_schema(embedder.dim, embedder.provider, embedder.model)
    chunk_ids = chunks.column("chunk_id").to_pylist()
    dates = chunks.column("local_date").to_pylist()
    jobs = []
    splits_cached = 0
    for rep in representations:
        values = originals = representation_texts(chunks, summaries, texts, rep)
        if redact_text:
            cleaned = [redact(v) for v in values]
            values = [c[0] for c in cleaned]
            redacted_n += sum(sum(c[1].values()) for c in cleaned)
        variant = "redacted" if redact_text else ""
        pieces, hits = cached_split(embedder, values, cache, originals, runner, variant)
        splits_cached += hits
        split_n += sum(len(p) > 1 for p in pieces)
        jobs.append((rep, pieces))

    def embed_one(job: tuple[str, list[list[str]]]) -> tuple[pa.Table, list[int]]:
        rep, pieces = job
        flat = [p for ps in pieces for p in ps]
        owner = [i for i, ps in enumerate(pieces) for _ in ps]
        piece_no = [k for ps in pieces for k in range(len(ps))]
        result = cached_embed(cache, embedder, flat, input_type="document", runner=runner)
        dim = int(embedder.dim)
        vectors = np.asarray(result.vectors, dtype=np.float32).reshape(len(flat), dim)
        counts = [
            int(np.sum(result.hit_mask)),
            sum(result.truncated),
            sum(e is not None for e in result.errors),
        ]
        flat_values = pa.array(vectors.reshape(-1), pa.float32())
        vector_col = pa.FixedSizeListArray.from_arrays(flat_values, dim)
        if any(e is not None for e in result.errors):
            mask = pa.array([e is not None for e in result.errors])
            vector_col = pa.compute.if_else(mask, pa.nulls(len(flat), vector_col.type), vector_col)
        n = len(flat)
        part = pa.table(
            {
                "chunk_id": pa.array([chunk_ids[i] for i in owner], pa.string()),
                "local_date": pa.array([dates[i] for i in owner], pa.date32()),
                "representation": [rep] * n,
                "piece": pa.array(piece_no, pa.int32()),
                "provider": [embedder.provider] * n,
                "model": [embedder.model] * n,
                "dim": pa.array([dim] * n, pa.int32()),
                "vector": vector_col,
                "text_hash": [text_hash(v) for v in flat],
                "truncated": list(result.truncated),
                "error": list(result.errors),
            },
            schema=schema,
        )
        return part, counts

    # One representation after another, also on a cluster: a text an earlier representation
    # embedded is read back from the cache, as serially; embedding it again in another batch
    # would give different last bits (batch composition changes the model's sums).
    done = [embed_one(job) for job in jobs]
    parts = [part for part, _ in done]
    hits, truncated_n, errors_n = (sum(c[k] for _, c in done) for k in range(3))
    table = pa.concat_tables(parts) if parts else schema.empty_table()
    stats = {
        "vectors": table.num_rows,
        "cache_hits": hits,
        "provider_calls": embedder.calls - calls_before,
        "split": split_n,
        "splits_cached": splits_cached,
        "window": int(getattr(embedder, "window", 0) or 0),
        "truncated": truncated_n,
        "errors": errors_n,
        "redactions": redacted_n,
    }
    return table, stats
