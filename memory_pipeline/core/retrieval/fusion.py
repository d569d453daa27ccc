"""Query-time fusion: score normalization, linear and reciprocal-rank fusion, folding chunk
scores onto sessions, message highlights.

Pure functions; ``searcher.py`` assembles them over the published index files.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

Ranked = list[tuple[str, float]]


def minmax(ranked: Ranked) -> dict[str, float]:
    """Scores scaled to [0, 1] within one list (all-equal scores become 1)."""
    if not ranked:
        return {}
    scores = [s for _, s in ranked]
    lo, hi = min(scores), max(scores)
    span = hi - lo
    return {d: (1.0 if span == 0 else (s - lo) / span) for d, s in ranked}


def by_score(pairs: Sequence[tuple[str, float]]) -> Ranked:
    """``sorted(pairs, key=lambda p: (-p[1], p[0]))`` (best first, ties by id), in numpy
    for a long list: a search sorts a few hundred candidates several times."""
    if len(pairs) < 32:
        return sorted(pairs, key=lambda p: (-p[1], p[0]))
    try:
        ids = np.array([p[0] for p in pairs])
        scores = np.fromiter((p[1] for p in pairs), np.float64, len(pairs))
        if ids.dtype.kind != "U" or np.isnan(scores).any():
            raise TypeError("not str ids and real scores")
        order = np.lexsort((ids, -scores))
    except (TypeError, ValueError):
        return sorted(pairs, key=lambda p: (-p[1], p[0]))
    return [pairs[i] for i in order.tolist()]


def linear_fusion(bm25: Ranked, dense: Ranked, beta: float) -> Ranked:
    """The LINE paper's fusion: each list min-max normalized, union of candidates,
    ``beta * bm25 + (1 - beta) * dense`` (a candidate missing from a list scores 0 there)."""
    if not 0.0 <= beta <= 1.0:
        raise ValueError(f"beta must be in [0, 1], got {beta}")
    a, b = minmax(bm25), minmax(dense)
    fused = {d: beta * a.get(d, 0.0) + (1 - beta) * b.get(d, 0.0) for d in a.keys() | b.keys()}
    return by_score(list(fused.items()))


def rrf(rankings: Sequence[Ranked], k: int = 60) -> Ranked:
    """Reciprocal Rank Fusion: sum of 1 / (k + rank) over the lists (rank 1-based)."""
    if k <= 0:
        raise ValueError(f"RRF k must be positive, got {k}")
    fused: dict[str, float] = {}
    for ranked in rankings:
        for rank, (doc, _) in enumerate(ranked, 1):
            fused[doc] = fused.get(doc, 0.0) + 1.0 / (k + rank)
    return by_score(list(fused.items()))


def fold(ranked: Ranked, parent_of: Mapping[str, str]) -> Ranked:
    """Chunk hits folded into their parents (sessions): a parent scores its best chunk."""
    best: dict[str, float] = {}
    order: list[str] = []
    for doc, score in ranked:
        parent = parent_of[doc]
        if parent not in best:
            best[parent] = score
            order.append(parent)
    return [(p, best[p]) for p in order]


def highlight_scores(
    query_tokens: Iterable[str], message_tokens: Sequence[list[str]], idf: Mapping[str, float]
) -> list[float]:
    """How much each message matches the query: summed idf of the query tokens it contains,
    damped by message length so a long message does not win by size alone."""
    q = set(query_tokens)
    out = []
    for toks in message_tokens:
        present = q.intersection(toks)
        score = sum(idf.get(t, 0.0) for t in present)
        out.append(score / (1.0 + 0.05 * max(0, len(toks) - 20)))
    return out


def idf_from_frequencies(frequencies: Mapping[str, int], n_docs: int) -> dict[str, float]:
    """Smoothed idf per token from its document frequency (``bm25.document_frequencies``)."""
    return {t: math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5)) for t, df in frequencies.items()}
