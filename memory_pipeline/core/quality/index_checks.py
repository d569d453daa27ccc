"""Invariants of a freshly built index version, checked before it is published.

Pure functions over the build's outputs (postings and timeline tables, build statistics,
loaded BM25 indexes), returning :data:`checks.Result`. The index asset publishes a version
only when all of them pass, so a reader never sees an index that fails one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from memory_pipeline.core.indexes.bm25 import Bm25Index
from memory_pipeline.core.quality.checks import Result

# postings are float32 and summed in another order than bm25s sums them
SCORE_TOLERANCE = 1e-3


def bm25_covers(stats: Mapping[str, Any], representations: Iterable[str], chunks: int) -> Result:
    """Each representation's BM25 index holds every chunk and a non-empty vocabulary.

    ``stats`` are the build statistics (``<rep>_docs``, ``<rep>_vocabulary``); an empty corpus
    has no vocabulary and still passes. A chunk missing from an index can never be found by
    that representation's keyword search.
    """
    representations = list(representations)
    covers = all(stats[f"{r}_docs"] == chunks for r in representations)
    vocab_ok = all(stats[f"{r}_vocabulary"] > 0 for r in representations) or chunks == 0
    return covers and vocab_ok, {"chunks": chunks, **stats}


def _rows_of(postings: pa.Table, rep: str) -> pa.Table:
    """The postings of one representation: a slice when they are one run of rows (a build
    concatenates the representations' tables), else a filter. Why: filtering ~3 M rows per
    representation copied every token string and was most of the check, which runs on the
    refresh's critical path."""
    mask = pc.fill_null(pc.equal(postings.column("representation"), rep), False)
    at = np.flatnonzero(mask.to_numpy(zero_copy_only=False))
    if at.size and at[-1] - at[0] + 1 == at.size:
        return postings.slice(int(at[0]), int(at.size))
    return postings.take(pa.array(at))


def postings_agree(
    postings: pa.Table, indexes: Mapping[str, Bm25Index], samples: int = 20
) -> Result:
    """Sum of postings per chunk equals bm25s's score, for sample queries made of real tokens.

    The postings table is what SQL apps rank with; if it drifted from the bm25s index, the
    warehouse and the search API would disagree. ``indexes`` maps each representation to its
    built index; ``postings`` has columns representation, token, chunk_id, score. Sampling is
    seeded, so the same build always checks the same queries.
    """
    worst = 0.0
    checked = 0
    for rep, index in indexes.items():
        part = _rows_of(postings, rep)
        if part.num_rows == 0:
            continue
        tokens = part.column("token")  # millions of rows: take the sampled ones only
        rng = np.random.default_rng(0)
        queries = [
            tokens.take(pa.array(rng.integers(0, len(tokens), size=3))).to_pylist()
            for _ in range(samples)
        ]
        # one scan of the postings for every sampled token, then each query sums its own
        # rows per chunk in Arrow (a Python loop over the postings of frequent tokens was
        # most of the check's CPU)
        wanted = sorted({t for q in queries for t in q})
        sub = part.filter(pc.is_in(part.column("token"), value_set=pa.array(wanted, pa.string())))
        doc_ids = pa.array(index.doc_ids, pa.string())
        for query in queries:
            # bm25s's score of every document: the ones above 0 are what rank_tokens ranks
            scores = index.token_scores(query)
            hits = np.flatnonzero(scores > 0)
            counts = {t: query.count(t) for t in set(query)}
            keys = pa.array(list(counts), pa.string())
            rows = sub.filter(pc.is_in(sub.column("token"), value_set=keys)).combine_chunks()
            weight = pc.index_in(rows.column("token"), value_set=keys)
            factor = pa.array(list(counts.values()), pa.float64()).take(weight)
            summed = (
                pa.table(
                    {
                        "chunk_id": rows.column("chunk_id"),
                        "s": pc.multiply(pc.cast(rows.column("score"), pa.float64()), factor),
                    }
                )
                .group_by("chunk_id")
                .aggregate([("s", "sum")])
            )
            # the summed postings per document, 0 where a document has none
            got = np.zeros(len(scores), dtype=np.float64)
            at = pc.index_in(summed.column("chunk_id"), value_set=doc_ids)
            known = pc.is_valid(at)
            got[pc.filter(at, known).to_numpy(zero_copy_only=False)] = pc.filter(
                summed.column("s_sum"), known
            ).to_numpy(zero_copy_only=False)
            if hits.size:
                diff = np.abs(got[hits] - scores[hits].astype(np.float64))
                worst = max(worst, float(diff.max()))
            checked += 1
    return worst < SCORE_TOLERANCE, {"queries_checked": checked, "max_abs_difference": float(worst)}


def vectors_indexed(embeddings: pa.Table | int | None, dense_stats: Mapping[str, int]) -> Result:
    """The dense index holds exactly the valid vectors (rows without a provider error).

    ``dense_stats`` are the build statistics (``<rep>_vectors`` per representation);
    ``embeddings`` is the stored table, or the number of its rows with a vector (counted
    from the stored partitions apart from the build), or None when no embedding partition
    exists yet (then nothing is indexed).
    """
    valid = 0
    if isinstance(embeddings, int):
        valid = embeddings
    elif embeddings is not None:
        valid = embeddings.num_rows - embeddings.column("vector").null_count
    indexed = sum(v for k, v in dense_stats.items() if k.endswith("_vectors"))
    return indexed == valid, {"indexed": indexed, "vectors": valid}


def timeline_valid(memories: pa.Table, timeline: pa.Table) -> Result:
    """Nothing lost or added by supersession, and every interval ends after it starts.

    Memory search and context packs read only the timeline, so a memory dropped here would
    be forgotten, and a backwards interval would hide a memory from every point in time.
    """
    same = sorted(memories.column("memory_id").to_pylist()) == sorted(
        timeline.column("memory_id").to_pylist()
    )
    ended = timeline.filter(pc.is_valid(timeline.column("valid_to")))
    backwards = (
        pc.sum(pc.less(ended.column("valid_to"), ended.column("valid_from"))).as_py() or 0
        if ended.num_rows
        else 0
    )
    return same and backwards == 0, {
        "memories": memories.num_rows,
        "timeline_rows": timeline.num_rows,
        "superseded": ended.num_rows,
        "intervals_ending_before_start": backwards,
    }
