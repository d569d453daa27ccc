"""Invariants of the representation tables (summaries, embedding texts, titles, vectors).

Pure functions over the tables as stored, returning :data:`checks.Result` like every other
check: the Dagster assets call them on what they just wrote (read back, so the storage is
what gets verified), and tests call them on hand-made tables to prove each can fail.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from memory_pipeline.core.quality.checks import Result
from memory_pipeline.core.represent.embedding_text import SUMMARY_LABEL, excerpt_of

# a vector further than this from unit length was not normalized (float32 rounding is ~1e-7)
NORM_TOLERANCE = 1e-3


def summaries_cover_chunks(summaries: pa.Table, chunks: pa.Table) -> Result:
    """Exactly one non-empty summary per chunk: search over summaries must see every chunk
    once, and an empty summary would make a chunk unfindable by that representation."""
    expected = set(chunks.column("chunk_id").to_pylist())
    got = summaries.column("chunk_id").to_pylist()
    empty = sum(1 for s in summaries.column("summary").to_pylist() if not s.strip())
    ok = set(got) == expected and len(got) == len(expected) and not empty
    return ok, {"chunks": len(expected), "summaries": len(got), "empty": empty}


def summaries_within_target(summaries: pa.Table) -> Result:
    """Every summary met its length target (``within_target``).

    A model missing the target is worth a warning, not a stopped run, so the asset declares
    this check non-blocking and reports it with WARN severity.
    """
    outside = summaries.num_rows - sum(summaries.column("within_target").to_pylist())
    return outside == 0, {"outside_length_target": outside, "summaries": summaries.num_rows}


def embedding_texts_valid(texts: pa.Table, chunks: pa.Table, summaries: pa.Table) -> Result:
    """One embedding_text per chunk, each containing its labelled summary and raw excerpt.

    The text is assembled by code, so a miss means the assembly or its inputs changed under
    it, and the dense representation would silently embed something else.
    """
    raw = dict(
        zip(
            chunks.column("chunk_id").to_pylist(),
            chunks.column("raw_text").to_pylist(),
            strict=True,
        )
    )
    summary = dict(
        zip(
            summaries.column("chunk_id").to_pylist(),
            summaries.column("summary").to_pylist(),
            strict=True,
        )
    )
    bad = 0
    for cid, text in zip(
        texts.column("chunk_id").to_pylist(),
        texts.column("embedding_text").to_pylist(),
        strict=True,
    ):
        if SUMMARY_LABEL + summary[cid] not in text or excerpt_of(raw[cid]) not in text:
            bad += 1
    ok = not bad and texts.num_rows == chunks.num_rows
    return ok, {"rows": texts.num_rows, "missing_summary_or_excerpt": bad}


def titles_cover_sessions(enrichment: pa.Table, sessions: pa.Table) -> Result:
    """Every session has exactly one row and a non-blank title (what lists and packs show)."""
    missing = set(sessions.column("session_id").to_pylist()) - set(
        enrichment.column("session_id").to_pylist()
    )
    empty = sum(1 for t in enrichment.column("title").to_pylist() if not t.strip())
    ok = not missing and not empty and enrichment.num_rows == sessions.num_rows
    return ok, {"sessions_without_title": len(missing), "empty_titles": empty}


def vectors_valid(vectors: pa.Table, chunks: pa.Table, representations: Iterable[str]) -> Result:
    """One vector per (chunk, representation, piece), constant dimension, no NaN, norms ~ 1.

    A text over the model window has pieces 0..k-1 (each (chunk, representation) must have
    piece 0 and no repeated piece).

    Dense search takes dot products as cosine similarity, which only holds for unit vectors.
    Rows with a provider error (null vector) are counted under ``provider_errors`` but do not
    fail the check: a permanently bad input is recorded, not fatal.
    """
    representations = list(representations)
    expected = {(c, r) for c in chunks.column("chunk_id").to_pylist() for r in representations}
    pieces = (
        vectors.column("piece").to_pylist()
        if "piece" in vectors.column_names
        else [0] * vectors.num_rows
    )
    rows = list(
        zip(
            vectors.column("chunk_id").to_pylist(),
            vectors.column("representation").to_pylist(),
            pieces,
            strict=True,
        )
    )
    keys = {(c, r) for c, r, p in rows if p == 0}
    problems: dict[str, int] = {
        "missing": len(expected - keys),
        "unexpected": len({(c, r) for c, r, _ in rows} - expected),
        "duplicates": len(rows) - len(set(rows)),
        "dimensions": len(set(vectors.column("dim").to_pylist())) if vectors.num_rows else 0,
    }
    problems["dimensions"] = max(0, problems["dimensions"] - 1)
    ok_rows = vectors.filter(pc.is_valid(vectors.column("vector")))
    if ok_rows.num_rows:
        dim = ok_rows.column("dim")[0].as_py()
        flat = pc.list_flatten(ok_rows.column("vector")).to_numpy(zero_copy_only=False)
        mat = flat.reshape(-1, dim)
        problems["nan"] = int(np.isnan(mat).any(axis=1).sum())
        norms = np.linalg.norm(mat, axis=1)
        problems["norm_not_1"] = int((np.abs(norms - 1.0) > NORM_TOLERANCE).sum())
    problems["provider_errors"] = vectors.num_rows - vectors.column("error").null_count
    bad = {k: v for k, v in problems.items() if v and k != "provider_errors"}
    return not bad, {"vectors": vectors.num_rows, "problems": problems}
