"""What the searcher is built from: its settings, errors, result types and small helpers.

The answerability models of each language's selection, the turn-ranking and dense-search
settings, the hit dataclasses a search returns, the query embedder and the ranking helpers
the ``Searcher`` and its parts share (``searcher`` re-exports the public names)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from memory_pipeline.core.common.redact import redact
from memory_pipeline.core.represent.providers.base import Embedder
from memory_pipeline.core.represent.providers.factory import UnknownEmbeddingProvider, make_embedder
from memory_pipeline.core.retrieval.answerability import AnswerModel, load_model
from memory_pipeline.core.retrieval.config import PRESETS, SELECTION, SearchConfig
from memory_pipeline.core.retrieval.fusion import Ranked, by_score
from memory_pipeline.core.retrieval.turns import TurnWeights

DEFAULT = PRESETS["default"]  # the evaluation's recorded selection (selection.json)
# the answerability model recorded with each language's selection (a language without one:
# every result with hits is answerable, confidence 1.0, as before calibration)
ANSWER_MODELS: dict[str, AnswerModel | None] = {
    "en": load_model(SELECTION),
    **{lang: load_model(rec) for lang, rec in (SELECTION.get("languages") or {}).items()},
}
# Turn ranking: messages of the top 5 chunks, half chunk context, half the message itself.
# Chosen on the LoCoMo dev conversations only (turn evidence R@5 0.453 -> 0.532 on dev).
TURN_CHUNKS = 5
TURN_ALPHA = 0.5
# Above the build's hnsw_threshold, dense search asks the HNSW graph for this many pieces per
# wanted chunk (a chunk has several pieces; they are rescored exactly). Measured (benchmarks/
# README.md): chunk recall@10 vs the exact scan on real USE vectors of 400 RPC dialogues
# 0.9985 / 0.9955 / 0.991 for 4 / 2 / 1, dense CPU p50 on all RPC 5.5 / 2.7 / 1.5 ms.
ANN_PIECES = 2
# A filtered dense search scores only the kept rows when they are at most this share of the
# matrix (gathering more rows costs more than scanning all and masking).
SUBSET_SCAN = 0.5
SESSION_FIELDS = (
    "session_id",
    "conversation_id",
    "contact_id",
    "session_index",
    "sessions_in_conversation",
    "start_local_ts",
    "end_local_ts",
)


class IndexNotBuilt(RuntimeError):
    """No published index yet: run the pipeline first."""


class IndexOutdated(IndexNotBuilt):
    """The published version predates self-contained versions (no lookups in its folder):
    rebuild the index; reading the live tables instead could mix two snapshots."""


@dataclass
class Highlight:
    message_id: str
    sender: str
    local_ts: str
    text: str
    source_ref: str
    score: float


@dataclass
class ChunkHit:
    rank: int
    chunk_id: str
    score: float
    session_id: str
    conversation_id: str
    contact_id: str
    start: str
    end: str
    speakers: list[str]
    highlights: list[Highlight] = field(default_factory=list)
    text: str = ""
    # the retrievers' own scores (``score`` is the fused display score, min-max based):
    # BM25 of the ranked representation and the dense cosine; None when the chunk was not
    # among that retriever's candidates (or the search did not use it)
    raw_bm25: float | None = None
    raw_dense: float | None = None


@dataclass
class SessionHit:
    rank: int
    session_id: str
    score: float
    conversation_id: str
    contact_id: str
    session_index: int
    start: str
    end: str
    raw_bm25: float | None = None  # its best chunk's raw retriever scores (as ChunkHit)
    raw_dense: float | None = None


@dataclass
class TurnHit:
    """One message as a ranked result of its own (``SearchConfig.turns``)."""

    rank: int
    message_id: str
    score: float
    session_id: str
    sender: str
    local_ts: str
    text: str
    source_ref: str
    raw_bm25: float | None = None  # the turn's own BM25 (the turn index), not normalized


@dataclass
class SearchResult:
    """What a search found, and how likely it is that the memory holds the answer.

    ``confidence`` (in [0, 1], comparable across queries and corpora) comes from signals
    that do not depend on the per-query normalization of the display scores
    (``retrieval.answerability``); ``answerable`` is ``confidence`` at or above the
    threshold recorded with the selection. An app should not answer from the hits of an
    unanswerable result: they are the least bad chunks, not evidence."""

    query: str
    kind: str  # time_only | content_only | time_content
    mode: str
    filters: list[dict]
    notes: list[str]
    chunks: list[ChunkHit]
    sessions: list[SessionHit]
    turns: list[TurnHit] = field(default_factory=list)
    confidence: float = 0.0
    answerable: bool = False
    features: dict[str, float | None] = field(default_factory=dict)
    language: str = "en"  # whose default ranked it (and whose answerability model judged)
    config: str = ""  # the ranking's name (``SearchConfig.name``)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def embedder_for(meta: Mapping[str, Any], env: Mapping[str, str] | None = None) -> Embedder:
    """The embedder that made the stored vectors, to embed queries in the same space.

    Built by the same factory as the ``chunk_embeddings`` asset, from the provider, model and
    dimension recorded in the index; keys and endpoints come from ``env``."""
    env = os.environ if env is None else env
    provider, model = meta["provider"], meta["model"]
    keys = {"openai": "OPENAI", "voyage": "VOYAGE"}.get(provider, "")
    try:
        return make_embedder(
            provider,
            model,
            # text-embedding-3-small's native size needs no shortening request
            dimensions=meta["dim"] if provider == "openai" and meta["dim"] != 1536 else None,
            api_key=env.get(f"{keys}_API_KEY") if keys else None,
            base_url=env.get(f"{keys}_BASE_URL") if keys else None,
        )
    except UnknownEmbeddingProvider:
        raise ValueError(f"unknown embedding provider {provider!r} in the index") from None


def _outgoing(embedder: Any, queries: list[str]) -> list[str]:
    """The query texts as ``embedder`` receives them: redacted when it is remote.

    A query is the user's own text and may hold an e-mail, a phone number or an address; a
    remote embedder (OpenAI, Voyage) would send it off the machine. The local model never
    leaves it, so its queries go unchanged and the retrieval figures stay as measured. The
    memo keys on the original query, so each query is still embedded once."""
    if getattr(embedder, "remote", False):
        return [redact(q)[0] for q in queries]
    return queries


def turn_weights(config: SearchConfig) -> TurnWeights:
    """The granularity-fusion weights of ``config``."""
    return TurnWeights(config.turn_self, config.turn_ctx, config.turn_chunk, config.lift)


def _best_per_chunk(chunk: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each chunk of ``chunk`` (pieces in any order) once, with its best piece's score: sort
    by (chunk, -score) and keep each chunk's first row (chunks ascending)."""
    order = np.lexsort((-scores, chunk))
    chunk, scores = chunk[order], scores[order]
    first = np.r_[True, chunk[1:] != chunk[:-1]]
    return chunk[first], scores[first]


class _Names:
    """``chunk_ids[rows[i]]`` on demand: ``_top`` reads the ids of its few candidates only,
    so a query does not build a list of every chunk id."""

    __slots__ = ("ids", "rows")

    def __init__(self, ids: list[str], rows: np.ndarray) -> None:
        self.ids, self.rows = ids, rows

    def __getitem__(self, i: int) -> str:
        return self.ids[int(self.rows[i])]


def _top(ids: Sequence[str], scores: np.ndarray, n: int, *, positive_only: bool) -> Ranked:
    valid = np.flatnonzero(scores > 0) if positive_only else np.flatnonzero(np.isfinite(scores))
    if valid.size == 0:
        return []
    if valid.size > n:
        part = np.argpartition(-scores[valid], n - 1)[:n]
        valid = valid[part]
    return by_score([(ids[i], float(scores[i])) for i in valid.tolist()])


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(float(value), 6)


def _filter_dict(f) -> dict:
    d = asdict(f)
    return {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in d.items()}
