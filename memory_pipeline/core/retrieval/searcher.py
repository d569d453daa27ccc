"""The search API over the published outputs: BM25, dense, hybrid, time-aware.

Reads only the CURRENT index version's folder (indexes and the chunk, message and session
lookups written with them), so a search during a run sees the previous complete index, and
never mixes index N with tables being rewritten for N+1.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from memory_pipeline.core.common import fs
from memory_pipeline.core.common.redact import redact
from memory_pipeline.core.indexes.bm25 import document_frequencies
from memory_pipeline.core.indexes.hnsw import KEYS_SUFFIX, KeyRows, load_pending
from memory_pipeline.core.indexes.ivf import IvfIndex, load_ivf
from memory_pipeline.core.indexes.publish import (
    current_version,
    has_lookups,
    load_bm25,
    read_lookups,
)
from memory_pipeline.core.indexes.segments import load_matrix
from memory_pipeline.core.indexes.turns import (
    load_message_tokens,
    load_turn_indexes,
    turn_layout,
)
from memory_pipeline.core.represent.providers.base import Embedder
from memory_pipeline.core.represent.providers.factory import (
    UnknownEmbeddingProvider,
    make_embedder,
)
from memory_pipeline.core.retrieval.answerability import (
    COVER_CHUNKS,
    COVER_TURNS,
    MARGIN_DEPTH,
    AnswerModel,
    idf_share,
    load_model,
)
from memory_pipeline.core.retrieval.config import (
    FUSIONS,
    HARD_FILTER_CONFIDENCE,
    MODES,
    PRESETS,
    SELECTION,
    SearchConfig,
    for_language,
    language_of,
)
from memory_pipeline.core.retrieval.fusion import (
    Ranked,
    fold,
    highlight_scores,
    idf_from_frequencies,
    linear_fusion,
    rrf,
)
from memory_pipeline.core.retrieval.query import boost_turns, speakers_in, understood_rank
from memory_pipeline.core.retrieval.rerank import CANDIDATES as RERANK_CANDIDATES
from memory_pipeline.core.retrieval.rerank import Reranker, load_packaged, rerank
from memory_pipeline.core.retrieval.timeexpr import ParsedQuery, parse_query
from memory_pipeline.core.retrieval.timemask import SessionTimes
from memory_pipeline.core.retrieval.turns import TurnIndex, TurnWeights

__all__ = [
    "FUSIONS",
    "HARD_FILTER_CONFIDENCE",
    "MODES",
    "TURN_ALPHA",
    "TURN_CHUNKS",
    "ChunkHit",
    "Highlight",
    "IndexNotBuilt",
    "IndexOutdated",
    "SearchConfig",
    "SearchResult",
    "Searcher",
    "SessionHit",
    "TurnHit",
    "embedder_for",
]

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


class Searcher:
    """Loads one published index version and answers queries against it.

    ``output_dir`` is a local folder or an ``s3://`` URI: a remote version is the one its
    ``CURRENT`` pointer names, loaded from a verified local copy (``publish.py``)."""

    def __init__(self, output_dir: fs.Location, embedder=None) -> None:
        version = current_version(output_dir)
        if version is None:
            raise IndexNotBuilt(
                f"no search index under {fs.join(output_dir, 'indexes')}: run `memory-pipeline run`"
            )
        if not has_lookups(version):
            raise IndexOutdated(
                f"index version {version} has no chunk/message lookups: rebuild it with "
                "`memory-pipeline run`"
            )
        self.version = version
        chunks, msgs, self.sessions = read_lookups(version)
        self.chunk_ids: list[str] = chunks.column("chunk_id").to_pylist()
        self.position = {c: i for i, c in enumerate(self.chunk_ids)}
        self.session_of = chunks.column("session_id").to_pylist()
        self.chunk_index: list[int] = chunks.column("chunk_index").to_pylist()
        self.conversation = np.array(chunks.column("conversation_id").to_pylist(), dtype=object)
        self.contact = np.array(chunks.column("contact_id").to_pylist(), dtype=object)
        self.speakers = chunks.column("speakers").to_pylist()
        self.message_ids = chunks.column("message_ids").to_pylist()
        self.raw_text = chunks.column("raw_text").to_pylist()
        self.start_ts = chunks.column("start_ts").to_pylist()
        self.end_ts = chunks.column("end_ts").to_pylist()
        self.bm25 = load_bm25(version)
        self._dense: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._dense_starts: dict[str, np.ndarray | None] = {}
        self._hnsw: dict[str, Any] = {}
        self._hnsw_rows: dict[str, KeyRows] = {}
        self._pending: dict[str, tuple[np.ndarray, Any, np.ndarray]] = {}
        self._ivf: dict[str, IvfIndex | None] = {}
        self._bm25_pos: dict[str, np.ndarray] = {}
        meta_path = version / "dense" / "meta.json"
        self.dense_meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
        self._embedder = embedder
        self._query_vectors: dict[tuple, np.ndarray] = {}
        self._message_tokens: dict[str, list[str]] = {}
        self._session_rows = {
            r["session_id"]: r for r in self.sessions.select(list(SESSION_FIELDS)).to_pylist()
        }
        self._session_chunks: dict[str, list[str]] | None = None
        names = {s for sp in self.speakers for s in sp}
        self.known_speakers = sorted(names, key=len, reverse=True)
        self._messages = {r["message_id"]: r for r in msgs.to_pylist()}
        self.latest = max((r["local_ts"] for r in self._messages.values()), default=None)
        # what highlights weigh words by: the raw_text index's document frequencies
        raw_index = self.bm25.get("raw_text")
        self._idf = (
            idf_from_frequencies(document_frequencies(raw_index), len(self.chunk_ids))
            if raw_index is not None
            else {}
        )
        self._chunk_table = chunks
        self._turn_index: TurnIndex | None = None
        self._turns_loaded = False
        self._session_times: SessionTimes | None = None
        self.chunk_session_row = np.zeros(0, dtype=np.int64)
        self.reranker: Reranker | None = load_packaged()
        self.answer_models: dict[str, AnswerModel | None] = dict(ANSWER_MODELS)
        self._corpus_language: str | None = None
        self._doc_rows: dict[str, dict[str, int]] = {}
        # what the last ranking on this thread computed and the answerability reads (raw
        # retriever lists, the turns' own BM25): no second retrieval per search
        self._last = threading.local()

    @property
    def turn_index(self) -> TurnIndex | None:
        """The version's turn index, loaded on first use (a search that never ranks turns
        does not pay for it); None for a version built before turns were indexed: turns are
        then highlights."""
        if not self._turns_loaded:
            indexes = load_turn_indexes(self.version)
            if indexes:
                self._turn_index = self._make_turn_index(turn_layout(self._chunk_table), indexes)
                self._turn_index.message_tokens = load_message_tokens(self.version)
            self._turns_loaded = True
        return self._turn_index

    def _make_turn_index(self, layout, indexes) -> TurnIndex:
        rows = [self._messages.get(m) or {} for m in layout.message_ids]
        return TurnIndex(
            layout,
            indexes,
            len(self.chunk_ids),
            senders=[r.get("sender") or "" for r in rows],
            lengths=[len(r.get("text") or "") for r in rows],
        )

    # -- lookups (what callers read instead of the searcher's internals) -------------------
    def message(self, message_id: str) -> Mapping[str, Any]:
        """The message's sender, local_ts, text and source_ref (KeyError when the version
        does not hold it)."""
        return self._messages[message_id]

    def has_message(self, message_id: str) -> bool:
        """Whether the published version holds the message (memories may cite newer ones)."""
        return message_id in self._messages

    def source_refs(self) -> dict[str, str]:
        """Every message's source_ref by message id (evaluation gold is in source refs)."""
        return {m: r["source_ref"] for m, r in self._messages.items()}

    def session(self, session_id: str) -> Mapping[str, Any]:
        """The session's conversation, contact, index in its conversation and local span
        (KeyError when the version does not hold it)."""
        return self._session_rows[session_id]

    def has_session(self, session_id: str) -> bool:
        """Whether the published version holds the session."""
        return session_id in self._session_rows

    def session_ids(self) -> list[str]:
        """Every session of the version, in session metadata order."""
        return list(self._session_rows)

    def chunk(self, chunk_id: str) -> dict[str, Any]:
        """The chunk's session, index in its session, scope, speakers, messages, text and
        UTC span (KeyError when the version does not hold it)."""
        i = self.position[chunk_id]
        return {
            "chunk_id": chunk_id,
            "session_id": self.session_of[i],
            "chunk_index": self.chunk_index[i],
            "conversation_id": str(self.conversation[i]),
            "contact_id": str(self.contact[i]),
            "speakers": self.speakers[i],
            "message_ids": self.message_ids[i],
            "raw_text": self.raw_text[i],
            "start_ts": self.start_ts[i],
            "end_ts": self.end_ts[i],
        }

    def session_of_chunk(self, chunk_id: str) -> str:
        """The session a chunk belongs to."""
        return self.session_of[self.position[chunk_id]]

    def messages_of_chunk(self, chunk_id: str) -> list[str]:
        """The chunk's message ids, in order."""
        return self.message_ids[self.position[chunk_id]]

    def chunks_of_session(self, session_id: str) -> list[str]:
        """The session's chunk ids in chunk_index order (ties by chunk id); [] when unknown."""
        if self._session_chunks is None:
            by_session: dict[str, list[str]] = {}
            for cid, sid in zip(self.chunk_ids, self.session_of, strict=True):
                by_session.setdefault(sid, []).append(cid)
            self._session_chunks = {
                sid: sorted(cids, key=lambda c: (self.chunk_index[self.position[c]], c))
                for sid, cids in by_session.items()
            }
        return list(self._session_chunks.get(session_id, ()))

    @property
    def idf(self) -> Mapping[str, float]:
        """Smoothed idf of the raw_text BM25 tokens (what highlights weigh words by)."""
        return self._idf

    def query_embedder(self, rep: str) -> Any:
        """The embedder that embeds queries for ``rep``'s stored vectors (made on first use)."""
        if self._embedder is None:
            self._embedder = embedder_for(self.dense_meta[rep])
        return self._embedder

    def forget_query_vectors(self) -> None:
        """Empty the query-vector memo, so the next search pays its query embedding again
        (benchmarks time new queries)."""
        self._query_vectors.clear()

    # -- retrievers -------------------------------------------------------------------------
    def bm25_ranked(self, query: str, rep: str, mask: np.ndarray | None, n: int) -> Ranked:
        index = self.bm25[rep]
        vocab = index.vocab
        ids = [vocab[t] for t in index.tokenizer.tokenize(query) if t in vocab]
        if not ids:
            return []
        scores = np.asarray(index.retriever.get_scores_from_ids(ids), dtype=np.float64)
        doc_pos = self._doc_positions(rep)
        if mask is not None:
            scores = np.where(mask[doc_pos], scores, 0.0)
        return _top(index.doc_ids, scores, n, positive_only=True)

    def _doc_positions(self, rep: str) -> np.ndarray:
        """Row of each BM25 document in the chunk arrays (computed once per index)."""
        if rep not in self._bm25_pos:
            self._bm25_pos[rep] = np.array([self.position[d] for d in self.bm25[rep].doc_ids])
        return self._bm25_pos[rep]

    def dense_matrix(self, rep: str) -> tuple[np.ndarray, np.ndarray]:
        """(vectors, chunk position of each row); a chunk split into pieces has several
        consecutive rows (the index stores each partition's rows in chunk_id, piece order,
        the partitions in date order). The vectors are memory-mapped: one array, or the
        version's monthly segments read as one (``segments.SegmentedMatrix``)."""
        if rep not in self._dense:
            folder = self.version / "dense"
            matrix = load_matrix(folder, rep)  # monthly segments (core/indexes/segments.py)
            ids = json.loads((folder / f"{rep}.ids.json").read_text())
            pos = np.array([self.position[i] for i in ids], dtype=np.int64)
            starts = np.flatnonzero(np.r_[True, pos[1:] != pos[:-1]]) if len(pos) else pos
            self._dense[rep] = (matrix, pos)
            self._dense_starts[rep] = starts if len(starts) < len(pos) else None
        return self._dense[rep]

    def embed_query(self, query: str, rep: str) -> np.ndarray:
        """The query vector in the space of ``rep``'s stored vectors (memoized: hybrid and
        sweeps ask for the same query once per representation)."""
        meta = self.dense_meta[rep]
        key = (query, meta["provider"], meta["model"], meta["dim"])
        cached = self._query_vectors.get(key)
        if cached is not None:
            return cached
        embedder = self.query_embedder(rep)
        result = embedder.embed(_outgoing(embedder, [query]), input_type="query")
        vector = np.asarray(result.vectors[0], dtype=np.float32)
        if len(self._query_vectors) > 100_000:
            self._query_vectors.clear()
        self._query_vectors[key] = vector
        return vector

    def prime_queries(self, queries: list[str], rep: str) -> None:
        """Embed many queries in one batch into the query-vector memo (evaluation sweeps)."""
        if rep not in self.dense_meta:
            return
        meta = self.dense_meta[rep]
        todo = [
            q
            for q in dict.fromkeys(queries)
            if (q, meta["provider"], meta["model"], meta["dim"]) not in self._query_vectors
        ]
        if not todo:
            return
        embedder = self.query_embedder(rep)
        vectors = embedder.embed(_outgoing(embedder, todo), input_type="query").vectors
        for q, v in zip(todo, vectors, strict=True):
            self._query_vectors[(q, meta["provider"], meta["model"], meta["dim"])] = np.asarray(
                v, dtype=np.float32
            )

    def hnsw(self, rep: str) -> Any:
        """``rep``'s HNSW index (usearch, memory-mapped), or None: below the build's
        ``hnsw_threshold`` there is none and search stays exact."""
        if rep not in self._hnsw:
            path = self.version / "dense" / f"{rep}.usearch"
            index = None
            if self.dense_meta.get(rep, {}).get("hnsw") and path.is_file():
                from usearch.index import Index

                index = Index.restore(str(path), view=True)
            self._hnsw[rep] = index
        return self._hnsw[rep]

    def hnsw_rows(self, rep: str) -> KeyRows:
        """Maps ``rep``'s graph keys to matrix rows (stable piece keys via
        ``<rep>.keys.npy``; a version built before them has row numbers as keys)."""
        if rep not in self._hnsw_rows:
            matrix, _ = self.dense_matrix(rep)
            keys = self.version / "dense" / f"{rep}{KEYS_SUFFIX}"
            self._hnsw_rows[rep] = KeyRows(keys, len(matrix))
        return self._hnsw_rows[rep]

    def pending_rows(self, rep: str) -> np.ndarray:
        """The matrix rows (ascending) of the pieces ``rep``'s carried-over graph does not
        hold as they are now (a deferred merge, ``hnsw.MAX_PENDING_SHARE``): scored exactly
        by every ANN search."""
        return self._pending_block(rep)[0]

    def _pending_block(self, rep: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(pending rows ascending, their vectors as one contiguous array, the first row of
        each chunk among them): one matrix product per query scores them all (gathered
        from the memory-mapped segments per query, 5 % of the pieces took ~17 ms)."""
        if rep not in self._pending:
            keys = load_pending(self.version / "dense", rep)
            rows = self.hnsw_rows(rep).rows(keys.astype(np.uint64)) if len(keys) else keys
            rows = np.sort(np.asarray(rows, dtype=np.int64))
            matrix, pos = self.dense_matrix(rep)
            vectors = np.ascontiguousarray(matrix[rows], dtype=np.float32) if len(rows) else None
            chunk = pos[rows]
            starts = np.flatnonzero(np.r_[True, chunk[1:] != chunk[:-1]]) if len(rows) else rows
            self._pending[rep] = (rows, vectors, starts)
        return self._pending[rep]

    def ivf(self, rep: str) -> IvfIndex | None:
        """``rep``'s IVF index (vectors memory-mapped), or None: below the build's
        ``hnsw_threshold`` there is none and search stays exact."""
        if rep not in self._ivf:
            ann = self.dense_meta.get(rep, {}).get("ann") or {}
            found = ann.get("kind") == "ivf"
            self._ivf[rep] = load_ivf(self.version / "dense", rep) if found else None
        return self._ivf[rep]

    def _dense_ivf(self, index: IvfIndex, pos: np.ndarray, q: np.ndarray, n: int) -> Ranked:
        """The top ``n`` chunks among the pieces in the IVF lists nearest the query, each
        chunk by its best scored piece (the scores are exact inner products; approximate
        only in which pieces are scored). A filtered search stays exact."""
        rows, scores = index.search(q)
        if rows.size == 0:
            return []
        chunk, best = _best_per_chunk(pos[rows], np.asarray(scores, dtype=np.float64))
        return _top(_Names(self.chunk_ids, chunk), best, n, positive_only=False)

    def dense_ranked(self, query: str, rep: str, mask: np.ndarray | None, n: int) -> Ranked:
        if rep not in self.dense_meta:
            return []
        matrix, pos = self.dense_matrix(rep)
        if mask is None:  # the build judged the matrix too big to scan per query
            ivf = self.ivf(rep)
            if ivf is not None:
                return self._dense_ivf(ivf, pos, self.embed_query(query, rep), n)
            index = self.hnsw(rep)
            if index is not None:
                q = self.embed_query(query, rep)
                pending = self._pending_block(rep)
                return self._dense_ann(index, self.hnsw_rows(rep), matrix, pos, q, n, pending)
        q = self.embed_query(query, rep)
        if mask is not None:
            keep = mask[pos]
            n_keep = int(np.count_nonzero(keep))
            if n_keep == 0:
                return []
            if n_keep <= SUBSET_SCAN * len(pos):
                # a filter (time, scope) that keeps a part of the corpus: score only its rows
                # (a chunk's pieces are consecutive and kept together: max-sim per run)
                rows = np.flatnonzero(keep)
                scores = np.asarray(matrix[rows] @ q, dtype=np.float64)
                chunk = pos[rows]
                first = np.flatnonzero(np.r_[True, chunk[1:] != chunk[:-1]])
                scores = np.maximum.reduceat(scores, first)
                return _top(_Names(self.chunk_ids, chunk[first]), scores, n, positive_only=False)
        scores = np.asarray(matrix @ q, dtype=np.float64)
        starts = self._dense_starts.get(rep)
        if starts is not None:  # max-sim: a split chunk scores by its best piece
            scores = np.maximum.reduceat(scores, starts)
            pos = pos[starts]
        if mask is not None:
            scores = np.where(mask[pos], scores, -np.inf)
        return _top(_Names(self.chunk_ids, pos), scores, n, positive_only=False)

    def _dense_ann(
        self,
        index: Any,
        key_rows: KeyRows,
        matrix: np.ndarray,
        pos: np.ndarray,
        q: np.ndarray,
        n: int,
        pending: tuple[np.ndarray, Any, np.ndarray] | None = None,
    ) -> Ranked:
        """The top ``n`` chunks from the HNSW index: its nearest ``ANN_PIECES * n`` pieces,
        rescored exactly against the matrix (the same scores as the exact path), each chunk
        by its best retrieved piece. Approximate only in which pieces come back; a filtered
        search (scope, time) stays exact (the graph knows nothing of the filter). The
        ``pending`` pieces (a deferred merge left them out of the graph: ``_pending_block``)
        are all scored, each chunk by its best one: exact for the newest pieces."""
        count = min(len(pos), ANN_PIECES * n)
        index.expansion_search = max(count, 64)
        rows = np.unique(key_rows.rows(index.search(q, count).keys))
        chunk = pos[rows]
        scores = np.asarray(matrix[rows] @ q, dtype=np.float64)
        if pending is not None and len(pending[0]):
            p_rows, p_vectors, p_starts = pending
            best = np.maximum.reduceat(np.asarray(p_vectors @ q, dtype=np.float64), p_starts)
            chunk = np.concatenate([chunk, pos[p_rows[p_starts]]])
            scores = np.concatenate([scores, best])
        if chunk.size == 0:
            return []
        chunk, best = _best_per_chunk(chunk, scores)
        return _top(_Names(self.chunk_ids, chunk), best, n, positive_only=False)

    # -- filters ----------------------------------------------------------------------------
    def scope_mask(self, contact: str | None, conversation: str | None) -> np.ndarray | None:
        mask = None
        if contact:
            mask = self.contact == contact
        if conversation:
            m = self.conversation == conversation
            mask = m if mask is None else mask & m
        return mask

    def time_mask(
        self, parsed: ParsedQuery, min_confidence: float = HARD_FILTER_CONFIDENCE
    ) -> tuple[np.ndarray | None, list[str]]:
        """Chunks of the sessions matching every filter of at least ``min_confidence``
        (None: no such filter), a note per softer filter left as content, and a note when
        the hard filters match no session at all (the result is then empty by design)."""
        hard = [f for f in parsed.filters if f.confidence >= min_confidence]
        notes = [f"soft filter ignored: {f.text!r}" for f in parsed.filters if f not in hard]
        if not hard:
            return None, notes
        ok = self.session_times.allowed(hard)
        if not ok.any():  # an empty answer says why: the filter, not the content, ruled out all
            notes.append("time filter matched no session: " + ", ".join(repr(f.text) for f in hard))
        # row -1 (a chunk whose session the metadata lacks) reads the appended False
        return np.append(ok, False)[self.chunk_session_row], notes

    @property
    def session_times(self) -> SessionTimes:
        """The sessions' timestamps coded for ``time_mask`` (built on first use): a filter is
        evaluated once per distinct date / hour / (index, count), not per session."""
        if self._session_times is None:
            rows = list(self._session_rows.values())
            self._session_times = SessionTimes(
                [r["start_local_ts"] for r in rows],
                [r["end_local_ts"] for r in rows],
                [r["session_index"] for r in rows],
                [r["sessions_in_conversation"] for r in rows],
            )
            row_of = {sid: i for i, sid in enumerate(self._session_rows)}
            # a chunk of a session the metadata lacks matches no filter (row -1)
            self.chunk_session_row = np.array(
                [row_of.get(s, -1) for s in self.session_of], dtype=np.int64
            )
        return self._session_times

    # -- the API ----------------------------------------------------------------------------
    def search(
        self,
        query: str,
        k: int = 5,
        config: SearchConfig = DEFAULT,
        *,
        contact: str | None = None,
        conversation: str | None = None,
        as_of: dt.datetime | None = None,
        language: str | None = None,
    ) -> SearchResult:
        """Best chunks (with highlighted messages) and sessions for ``query``, ranked as
        ``config`` says, within the ``contact`` / ``conversation`` scope; ``as_of`` is "now"
        for relative time expressions (default: the latest message of the version).

        The default ``config`` stands for the default of the search's ``language``
        (``config.language_of``: the query's, else the corpus's; ``en`` or ``ja``), each
        selected on that language's dev data; a config the caller changed is kept."""
        language = language or language_of(query, self.corpus_language)
        config = for_language(config, language)
        unbuilt = None
        if config.uses_dense and self.dense_meta and config.dense_rep not in self.dense_meta:
            unbuilt = (
                f"dense_rep {config.dense_rep!r} has no vectors in this index (embedded: "
                f"{', '.join(sorted(self.dense_meta))}); add it to [representations] dense"
            )
            if config.dense_rep != DEFAULT.dense_rep:  # named by the caller: not silently dropped
                raise ValueError(unbuilt)
        now = as_of or self.latest or dt.datetime.now()
        parsed = parse_query(query, now=now, speakers=self.known_speakers)
        notes = list(parsed.notes)
        if unbuilt:  # the default's vectors, on a deployment that embeds other representations
            notes.append(f"ranked without dense vectors: {unbuilt}")
        mask = self.scope_mask(contact, conversation)
        use_time = config.use_time
        kind = parsed.kind if use_time else "content_only"
        if use_time and parsed.filters:
            tmask, tnotes = self.time_mask(parsed, config.hard_filter_confidence)
            kept = mask if tmask is None else tmask if mask is None else mask & tmask
            if (
                config.time_fallback
                and kind == "time_content"
                and kept is not None
                and not kept.any()
            ):
                # no chat in scope is from then: the words date the event asked about ("the
                # rainy season starts in May"), not the chat, so they stay content
                kind = "content_only"
                tnotes = [n for n in tnotes if not n.startswith("time filter matched no")]
                tnotes.append(
                    "time filter matched no session: searched without it ("
                    + ", ".join(repr(f.text) for f in parsed.filters)
                    + ")"
                )
                kept = mask
            notes += tnotes
            mask = kept
        content = parsed.content if kind == "time_content" else query
        self._last.raw = None
        if kind == "time_only" and mask is not None:
            rows = [i for i in np.flatnonzero(mask)]
            rows.sort(key=lambda i: (self.start_ts[i], self.chunk_ids[i]))
            ranked = [(self.chunk_ids[i], 1.0) for i in rows]
        else:  # query understanding (retrieval.query); plain self.rank when its options are off
            ranked = understood_rank(self, content, config, mask)
        # the boost reorders a deeper list, as the evaluation scores it (2 x 20 turns)
        # (with the reranker on, its speaker feature does this: the evaluation measures the
        # reranked turns without the boost)
        boost = config.speaker_boost if not config.rerank else 0.0
        depth = max(k, 40) if boost else k
        lifted, turns = self.rank_turns(content, config, mask, ranked, depth, parsed)
        if boost:  # the named speakers' turns first
            names = speakers_in(content, self.known_speakers)
            turns = boost_turns(turns, lambda m: self.message(m)["sender"], names, boost)
        if kind != "time_only":  # a time-only answer stays in chronological order
            ranked = lifted
        raw = self._raw_scores(content, config)
        chunk_hits = [
            self.chunk_hit(r, cid, s, content, config.highlights, raw)
            for r, (cid, s) in enumerate(ranked[:k], 1)
        ]
        parent = {c: self.session_of[self.position[c]] for c, _ in ranked}
        folded = fold(ranked, parent)
        best_chunk = {}
        for c, _ in ranked:
            best_chunk.setdefault(parent[c], c)
        session_hits = [
            self.session_hit(r, sid, s, raw, best_chunk.get(sid))
            for r, (sid, s) in enumerate(folded[:k], 1)
        ]
        turn_hits = [self.turn_hit(r, m, sc) for r, (m, sc) in enumerate(turns[:k], 1)]
        reranked = bool(getattr(self._last, "turns", None) and self._last.turns[1])
        result = SearchResult(
            query=query,
            kind=kind,
            mode=config.mode,
            filters=[_filter_dict(f) for f in parsed.filters],
            notes=notes,
            chunks=chunk_hits,
            sessions=session_hits,
            turns=turn_hits,
            language=language,
            config=config.name,
        )
        model = self.answer_models.get(language)
        if kind == "time_only" or model is None:
            # a time-only question is answered by the sessions the filter keeps, if any
            result.confidence = 1.0 if chunk_hits else 0.0
        else:
            result.features = self.answer_features(
                content, config, mask, raw, chunk_hits, turn_hits, reranked
            )
            result.confidence = round(model.confidence(result.features), 6)
        threshold = model.threshold if model is not None else 0.5
        result.answerable = bool(chunk_hits) and result.confidence >= threshold
        return result

    @property
    def corpus_language(self) -> str:
        """``ja`` when most chunks are Japanese, else ``en`` (read once per version, on a
        sample of at most 2,000 chunks): the language of a query that has no letters."""
        if self._corpus_language is None:
            from memory_pipeline.core.common.lang import detect_lang

            step = max(1, len(self.raw_text) // 2000)
            sample = self.raw_text[::step]
            ja = sum(detect_lang(t or "", max_chars=400) == "ja" for t in sample)
            self._corpus_language = "ja" if sample and ja * 2 > len(sample) else "en"
        return self._corpus_language

    def _raw_scores(
        self, content: str, config: SearchConfig
    ) -> tuple[dict[str, float], dict[str, float]]:
        """(raw BM25 by chunk, raw dense cosine by chunk) of this thread's last ranking
        (empty when it ranked something else: a time-only listing, a PRF-expanded query)."""
        last = getattr(self._last, "raw", None)
        if last is None or last[0] != content:
            return {}, {}
        return dict(last[2]), dict(last[4])

    def answer_features(
        self,
        content: str,
        config: SearchConfig,
        mask: np.ndarray | None,
        raw: tuple[dict[str, float], dict[str, float]],
        chunks: Sequence[ChunkHit],
        turns: Sequence[TurnHit],
        reranked: bool,
    ) -> dict[str, float | None]:
        """The answerability signals of one search (``retrieval.answerability``), each
        normalized by the query itself so they compare across queries and corpora; None
        for a signal this search cannot give (no dense vectors, no reranker)."""
        index = self.bm25.get("raw_text")
        if index is None:
            return {}
        tokenizer = index.tokenizer
        tokens = tokenizer.tokenize(content)
        names = speakers_in(content, self.known_speakers)
        name_tokens = {t for n in names for t in tokenizer.tokenize(n)}
        words = list(dict.fromkeys(t for t in tokens if t not in name_tokens))
        top_idf = math.log(1.0 + (len(self.chunk_ids) + 0.5) / 0.5)
        idf = self._idf
        most = sum(idf.get(t, top_idf) for t in tokens)
        best = self.bm25_ranked(content, "raw_text", mask, 1)
        feats: dict[str, float | None] = {
            "bm25_norm": (best[0][1] / most) if best and most > 0 else 0.0,
            "present": idf_share(words, self._present(index, words, mask), idf, top_idf),
        }
        turn_tokens = self._held("turn", [t.message_id for t in turns[:COVER_TURNS]], words) or [
            set(tokenizer.tokenize(t.text)) for t in turns[:COVER_TURNS]
        ]
        chunk_tokens = self._held(
            "raw_text", [c.chunk_id for c in chunks[:COVER_CHUNKS]], words
        ) or [set(tokenizer.tokenize(c.text)) for c in chunks[:COVER_CHUNKS]]
        cover = [idf_share(words, held, idf, top_idf) for held in turn_tokens]
        feats["cov_turn"] = max(cover, default=0.0)
        cover = [idf_share(words, held, idf, top_idf) for held in chunk_tokens]
        feats["cov_chunk"] = max(cover, default=0.0)
        feats["dense_top"] = feats["dense_margin"] = None
        if config.uses_dense and config.dense_rep in self.dense_meta:
            last = getattr(self._last, "raw", None)
            if last is not None and last[0] == content and last[3] == config.dense_rep:
                dense = last[4]
            else:
                dense = self.dense_ranked(content, config.dense_rep, mask, MARGIN_DEPTH)
            if dense:
                top = [s for _, s in dense[:MARGIN_DEPTH]]
                feats["dense_top"] = top[0]
                feats["dense_margin"] = top[0] - float(np.median(top))
        feats["rerank_top"] = turns[0].score if reranked and turns else None
        return feats

    def _held(self, rep: str, doc_ids: Sequence[str], words: Sequence[str]) -> list[set[str]]:
        """Which of ``words`` each document holds, read from the BM25 index's token columns
        (``raw_text``: chunks; ``turn``: the turn index's messages) instead of tokenizing the
        hits' texts again (that was most of the answerability's cost); [] when the index is
        absent or does not hold one of the documents (the caller tokenizes then)."""
        if rep == "turn":
            ti = self.turn_index
            index = ti.indexes.get("turn") if ti is not None else None
        else:
            index = self.bm25.get(rep)
        if index is None or not doc_ids:
            return []
        rows_of = self._doc_rows.get(rep)
        if rows_of is None:
            rows_of = self._doc_rows[rep] = {d: i for i, d in enumerate(index.doc_ids)}
        rows = [rows_of.get(d) for d in doc_ids]
        if any(r is None for r in rows):
            return []
        csc = index.retriever.scores
        indptr, indices = csc["indptr"], csc["indices"]
        vocab = index.vocab
        held: list[set[str]] = [set() for _ in rows]
        wanted = np.asarray(rows, dtype=np.int64)
        for w in words:
            if w not in vocab:
                continue
            t = vocab[w]
            found = np.isin(wanted, indices[indptr[t] : indptr[t + 1]])
            for k in np.flatnonzero(found):
                held[int(k)].add(w)
        return held

    def _present(self, index: Any, words: Sequence[str], mask: np.ndarray | None) -> set[str]:
        """The ``words`` (tokens) that occur in at least one chunk in ``mask`` (None: any
        chunk), read from the BM25 index's token columns."""
        vocab = index.vocab
        known = [w for w in words if w in vocab]
        if mask is None or not known:
            return set(known)
        csc = index.retriever.scores
        indptr, indices = csc["indptr"], csc["indices"]
        doc_pos = self._doc_positions("raw_text")
        out = set()
        for w in known:
            t = vocab[w]
            docs = indices[indptr[t] : indptr[t + 1]]
            if len(docs) and bool(mask[doc_pos[docs]].any()):
                out.add(w)
        return out

    def rank_turns(
        self,
        content: str,
        config: SearchConfig,
        mask: np.ndarray | None,
        ranked: Ranked,
        n: int,
        parsed: ParsedQuery | None = None,
    ) -> tuple[Ranked, Ranked]:
        """(the chunk ranking, lifted by its turns, and the top ``n`` turns) for ``config``:
        from the turn index when ``config.turns`` is ``index`` and the version has one
        (reordered by the packaged reranker when ``config.rerank`` and it loads), else the
        chunks unchanged and the highlights of their top chunks."""
        self._last.turns = None
        if config.turns != "index" or self.turn_index is None:
            return ranked, self.ranked_turns(ranked, content)[:n] if config.highlights else []
        ti = self.turn_index
        tokens = self.bm25["raw_text"].tokenizer.tokenize(content)
        own = ti.scores(tokens, "turn", mask)
        ctx = ti.scores(tokens, "turn_ctx", mask)
        model = self.reranker if config.rerank else None
        self._last.turns = (own, model is not None)
        depth = max(n, RERANK_CANDIDATES) if model is not None else n
        fused = ti.fuse(
            ranked, self.position, self.chunk_ids, own, ctx, turn_weights(config), depth
        )
        if model is None:
            return fused.chunks, fused.turns[:n]
        speakers = parsed.speakers if parsed is not None else ()
        time_ok = self.time_mask(parsed, 0.0)[0] if parsed is not None else None
        x = ti.features(fused, RERANK_CANDIDATES, speakers, time_ok)
        return fused.chunks, rerank(fused.turns, x, model)[:n]

    def turn_hit(self, rank: int, message_id: str, score: float) -> TurnHit:
        """Message ``message_id`` as the ``rank``-th turn hit."""
        m = self._messages[message_id]
        ti = self.turn_index
        row = ti.row_of.get(message_id) if ti is not None else None
        sid = ti.layout.session_ids[row] if row is not None else ""
        last = getattr(self._last, "turns", None)
        own = float(last[0][row]) if last is not None and row is not None else None
        return TurnHit(
            rank=rank,
            message_id=message_id,
            score=round(float(score), 6),
            session_id=sid,
            sender=m["sender"],
            local_ts=m["local_ts"].isoformat(" ", "minutes"),
            text=m["text"],
            source_ref=m["source_ref"],
            raw_bm25=None if own is None else round(own, 6),
        )

    def rank(
        self, content: str, config: SearchConfig = DEFAULT, mask: np.ndarray | None = None
    ) -> Ranked:
        """The fused chunk ranking of ``config`` (each retriever's top ``candidates``) over
        the chunks in ``mask`` (None: all)."""
        mode, n = config.mode, config.candidates
        lexical = self.bm25_ranked(content, config.bm25_rep, mask, n) if mode != "dense" else []
        dense = self.dense_ranked(content, config.dense_rep, mask, n) if mode != "bm25" else []
        self._last.raw = (content, config.bm25_rep, lexical, config.dense_rep, dense)
        if mode == "bm25":
            return lexical
        if mode == "dense":
            return dense
        if config.fusion == "linear":
            return linear_fusion(lexical, dense, config.beta)
        return rrf([lexical, dense], k=config.rrf_k)

    def ranked_messages(self, chunk_ids: list[str], query: str) -> list[tuple[str, float]]:
        """Messages of the given chunks, ranked against the query within each chunk, chunks
        in order (turn-level results); a message repeated by overlapping chunks counts once."""
        tokenizer = self.bm25["raw_text"].tokenizer
        q = tokenizer.tokenize(query)
        ti = self.turn_index
        seen, out = set(), []
        for cid in chunk_ids:
            ids = self.message_ids[self.position[cid]]
            # the index's stored message tokens (same tokenizer), else tokenize them now
            stored = ti.highlight_scores(ids, q, self._idf) if ti is not None else None
            if stored is not None:
                scores = stored.tolist()
            else:
                texts = [self._messages[m]["text"] for m in ids]
                scores = highlight_scores(q, tokenizer.tokenize_many(texts), self._idf)
            for i in sorted(range(len(ids)), key=lambda i: (-scores[i], i)):
                if ids[i] not in seen:
                    seen.add(ids[i])
                    out.append((ids[i], scores[i]))
        return out

    def ranked_turns(
        self, ranked: Ranked, query: str, n_chunks: int = TURN_CHUNKS, alpha: float = TURN_ALPHA
    ) -> list[tuple[str, float]]:
        """Turn-level results: the messages of the top ``n_chunks`` chunks, each scored
        ``alpha * chunk score (min-max over those chunks) + (1 - alpha) * its highlight score
        (relative to the best message of its chunk)``; a message in several chunks keeps its
        best score. Context (the chunk) and the message itself both count."""
        top = ranked[:n_chunks]
        if not top:
            return []
        tokenizer = self.bm25["raw_text"].tokenizer
        q = tokenizer.tokenize(query)
        lo = min(sc for _, sc in top)
        hi = max(sc for _, sc in top)
        best: dict[str, float] = {}
        for cid, cscore in top:
            cn = 1.0 if hi == lo else (cscore - lo) / (hi - lo)
            ids = self.message_ids[self.position[cid]]
            hs = highlight_scores(q, [self._tokens(m, tokenizer) for m in ids], self._idf)
            mx = max(hs) or 1.0
            for m, h in zip(ids, hs, strict=True):
                v = alpha * cn + (1 - alpha) * h / mx
                if v > best.get(m, -1.0):
                    best[m] = v
        return sorted(best.items(), key=lambda p: (-p[1], p[0]))

    def _tokens(self, message_id: str, tokenizer) -> list[str]:
        toks = self._message_tokens.get(message_id)
        if toks is None:
            toks = tokenizer.tokenize(self._messages[message_id]["text"])
            self._message_tokens[message_id] = toks
        return toks

    def chunk_hit(
        self,
        rank: int,
        cid: str,
        score: float,
        query: str,
        n: int,
        raw: tuple[Mapping[str, float], Mapping[str, float]] = ({}, {}),
    ) -> ChunkHit:
        """Chunk ``cid`` as the ``rank``-th hit, with its ``n`` best messages for ``query``
        and its raw retriever scores from ``raw`` (BM25 by chunk, dense by chunk)."""
        i = self.position[cid]
        hl = []
        if n:
            ranked = self.ranked_messages([cid], query)[:n]
            for mid, s in ranked:
                m = self._messages[mid]
                hl.append(
                    Highlight(
                        mid,
                        m["sender"],
                        m["local_ts"].isoformat(" ", "minutes"),
                        m["text"],
                        m["source_ref"],
                        round(float(s), 4),
                    )
                )
        srow = self._session_rows[self.session_of[i]]
        return ChunkHit(
            rank=rank,
            chunk_id=cid,
            score=round(float(score), 6),
            session_id=self.session_of[i],
            conversation_id=str(self.conversation[i]),
            contact_id=str(self.contact[i]),
            start=srow["start_local_ts"].isoformat(" ", "minutes"),
            end=srow["end_local_ts"].isoformat(" ", "minutes"),
            speakers=self.speakers[i],
            highlights=hl,
            text=self.raw_text[i],
            raw_bm25=_rounded(raw[0].get(cid)),
            raw_dense=_rounded(raw[1].get(cid)),
        )

    def session_hit(
        self,
        rank: int,
        sid: str,
        score: float,
        raw: tuple[Mapping[str, float], Mapping[str, float]] = ({}, {}),
        chunk: str | None = None,
    ) -> SessionHit:
        """Session ``sid`` as the ``rank``-th session hit (raw scores of its ``chunk``)."""
        r = self._session_rows[sid]
        return SessionHit(
            rank=rank,
            session_id=sid,
            score=round(float(score), 6),
            conversation_id=r["conversation_id"],
            contact_id=r["contact_id"],
            session_index=r["session_index"],
            start=r["start_local_ts"].isoformat(" ", "minutes"),
            end=r["end_local_ts"].isoformat(" ", "minutes"),
            raw_bm25=_rounded(raw[0].get(chunk)) if chunk else None,
            raw_dense=_rounded(raw[1].get(chunk)) if chunk else None,
        )


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
    order = sorted(valid.tolist(), key=lambda i: (-scores[i], ids[i]))
    return [(ids[i], float(scores[i])) for i in order]


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(float(value), 6)


def _filter_dict(f) -> dict:
    d = asdict(f)
    return {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in d.items()}
