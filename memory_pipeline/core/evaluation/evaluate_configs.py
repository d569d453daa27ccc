"""The configurations an evaluation sweeps: fusion weights, RRF constants, cut-offs, and
the turn-index grid.

Every configuration is a :class:`SearchConfig` with a name, so the one the sweep selects is a
preset the searcher can run as it is; ``sweep_columns`` describes one for the report.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import replace

from memory_pipeline.core.common.representations import REPRESENTATIONS
from memory_pipeline.core.evaluation import metrics as M
from memory_pipeline.core.retrieval.config import SearchConfig

BETAS = tuple(round(0.05 * i, 2) for i in range(21))
RRF_KS = (10, 30, 60, 100)
KS = M.KS
POOL = 200
SWEEP_KS = (5, 10)
DEFAULT = SearchConfig()
# templated time queries rank with the SearchConfig field defaults (the search before the
# selection; their gold is the sessions in the window); their highlights are not scored
TIME_SEARCH = SearchConfig(highlights=0)


# One retrieval configuration of the sweep is a SearchConfig (its ``family`` and ``name``
# are what the tables report); ``Config`` is the sweep's historical name for it.
Config = SearchConfig


# Granularity fusion (SearchConfig.turns = "index"): the weights swept, over the chunk
# rankings the turn index is crossed with (BM25[raw_text] alone and linear fusions of it)
TURN_SELF = (0.4, 0.6)
TURN_CTX = (0.1, 0.2)
TURN_CHUNK = (0.3, 0.45)
LIFTS = (0.0, 0.2, 0.35)
TURN_BETAS = (0.9, 0.95)
TURN_DENSE_REPS = ("embedding_text", "summary")
TURN_BM25_REP = "raw_text"


def turn_configs(
    chunk_configs: Sequence[SearchConfig], splade: Sequence[float] = (0.0,)
) -> list[SearchConfig]:
    """The turn-index configurations of the sweep: the turn weights x lifts x SPLADE weights
    over a few chunk rankings of ``chunk_configs``, and the turn index alone (its own BM25
    only: the single turn retriever the report compares with).

    ``splade`` is swept only where the corpus has SPLADE vectors (the caller knows): on
    other corpora a non-zero weight ranks exactly like 0 and would only add twins."""
    bases = [
        c
        for c in chunk_configs
        if c.bm25_rep == TURN_BM25_REP
        and (
            c.family == "bm25"
            or (c.family == "linear" and c.beta in TURN_BETAS and c.dense_rep in TURN_DENSE_REPS)
        )
    ]
    out = []
    for b in bases:
        for ts, tc, tk, lift, sp in itertools.product(
            TURN_SELF, TURN_CTX, TURN_CHUNK, LIFTS, splade
        ):
            out.append(
                replace(
                    b, turns="index", turn_self=ts, turn_ctx=tc, turn_chunk=tk, lift=lift, splade=sp
                )
            )
    out += [
        replace(b, turns="index", turn_self=1.0, turn_ctx=0.0, turn_chunk=0.0, lift=0.0)
        for b in bases[:1]
    ]
    return out


def turn_alone(configs: Sequence[SearchConfig]) -> str | None:
    """The name of the turn index alone in ``configs`` (None when not swept)."""
    for c in configs:
        if c.turns == "index" and c.turn_self == 1.0 and c.turn_ctx == c.turn_chunk == 0.0:
            return c.name
    return None


def sweep_configs(
    reps: Sequence[str] = REPRESENTATIONS,
    dense_reps: Sequence[str] = REPRESENTATIONS,
    base: SearchConfig = DEFAULT,
    turns: bool = True,
    splade: Sequence[float] = (0.0,),
) -> list[SearchConfig]:
    """Single retrievers, linear fusion over every pairing x beta, RRF over every pairing x k,
    each as ``base`` with its ranking fields replaced (so a sweep point is a search the API
    can run as it is); with ``turns``, the granularity fusions of ``turn_configs`` (with
    the SPLADE weights ``splade``) too."""
    chunk = _chunk_configs(reps, dense_reps, base)
    return chunk + turn_configs(chunk, splade) if turns else chunk


def _chunk_configs(
    reps: Sequence[str], dense_reps: Sequence[str], base: SearchConfig
) -> list[SearchConfig]:
    out = [replace(base, mode="bm25", bm25_rep=r) for r in reps]
    out += [replace(base, mode="dense", dense_rep=r) for r in dense_reps]
    for b, d in itertools.product(reps, dense_reps):
        pair = replace(base, mode="hybrid", bm25_rep=b, dense_rep=d)
        out += [replace(pair, fusion="linear", beta=beta) for beta in BETAS]
        out += [replace(pair, fusion="rrf", rrf_k=k) for k in RRF_KS]
    return out


def sweep_columns(cfg: SearchConfig) -> dict:
    """The fields of ``cfg`` its family ranks by (None for the others), as the sweep table
    lists them: a bm25 configuration has no dense representation, beta or RRF k (family
    ``turns``: a granularity fusion over that chunk ranking)."""
    return {
        # a granularity fusion is its own family: the fusion plot's beta curves stay chunk-only
        "family": "turns" if cfg.turns == "index" else cfg.family,
        "bm25_rep": cfg.bm25_rep if cfg.uses_bm25 else None,
        "dense_rep": cfg.dense_rep if cfg.uses_dense else None,
        "beta": cfg.beta if cfg.family == "linear" else None,
        "rrf_k": cfg.rrf_k if cfg.family == "rrf" else None,
        "speaker_boost": cfg.speaker_boost,
        "strip_question": cfg.strip_question,
        "prf_terms": cfg.prf_terms if cfg.uses_bm25 else 0,
    }
