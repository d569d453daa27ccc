"""The search API over the published outputs: BM25, dense, hybrid, time-aware.

Reads only the CURRENT index version's folder (indexes and the chunk, message and session
lookups written with them), so a search during a run sees the previous complete index, and
never mixes index N with tables being rewritten for N+1.

This module holds the ``Searcher`` (loading a version, lookups, filters and ``search``);
its retrievers are in ``searcher_retrievers``, the answerability signals in
``searcher_answer``, the rankings and hit records in ``searcher_hits`` and the settings,
result types and helpers in ``searcher_parts``. The names other code uses are re-exported
here.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import numpy as np

from memory_pipeline.core.common import fs
from memory_pipeline.core.indexes.bm25 import document_frequencies
from memory_pipeline.core.indexes.hnsw import KeyRows
from memory_pipeline.core.indexes.ivf import IvfIndex
from memory_pipeline.core.indexes.publish import (
    current_version,
    has_lookups,
    load_bm25,
    read_lookups,
)
from memory_pipeline.core.indexes.turns import (
    load_message_tokens,
    load_turn_indexes,
    load_turn_layout,
    turn_layout,
)
from memory_pipeline.core.retrieval.answerability import AnswerModel
from memory_pipeline.core.retrieval.config import (
    FUSIONS,
    HARD_FILTER_CONFIDENCE,
    MODES,
    SearchConfig,
    for_language,
    language_of,
)
from memory_pipeline.core.retrieval.fusion import fold, idf_from_frequencies
from memory_pipeline.core.retrieval.message_rows import MessageRows
from memory_pipeline.core.retrieval.query import boost_turns, speakers_in, understood_rank
from memory_pipeline.core.retrieval.rerank import Reranker, load_packaged
from memory_pipeline.core.retrieval.searcher_answer import _Answerability
from memory_pipeline.core.retrieval.searcher_hits import _Hits
from memory_pipeline.core.retrieval.searcher_parts import (
    ANSWER_MODELS,
    DEFAULT,
    SESSION_FIELDS,
    TURN_ALPHA,
    TURN_CHUNKS,
    ChunkHit,
    Highlight,
    IndexNotBuilt,
    IndexOutdated,
    SearchResult,
    SessionHit,
    TurnHit,
    _filter_dict,
    embedder_for,
    turn_weights,
)
from memory_pipeline.core.retrieval.searcher_retrievers import _Retrievers
from memory_pipeline.core.retrieval.timeexpr import ParsedQuery, parse_query
from memory_pipeline.core.retrieval.timemask import SessionTimes
from memory_pipeline.core.retrieval.turns import TurnIndex, TurnScores

__all__ = [
    "ANSWER_MODELS",
    "DEFAULT",
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
    "turn_weights",
]


class Searcher(_Retrievers, _Answerability, _Hits):
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
        self._query_vectors: OrderedDict[tuple, np.ndarray] = OrderedDict()
        self._message_tokens: dict[str, list[str]] = {}
        self._token_memo: dict[tuple[int, str], tuple[str, ...]] = {}
        self._session_rows = {
            r["session_id"]: r for r in self.sessions.select(list(SESSION_FIELDS)).to_pylist()
        }
        self._session_chunks: dict[str, list[str]] | None = None
        names = {s for sp in self.speakers for s in sp}
        self.known_speakers = sorted(names, key=len, reverse=True)
        self._messages = MessageRows(msgs)  # rows built when read: a search reads a few
        self.latest = self._messages.latest()
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
        self._splade: Any = None
        self._splade_loaded = False
        self._splade_scorer: Any = None
        self._session_times: SessionTimes | None = None
        self.chunk_session_row = np.zeros(0, dtype=np.int64)
        self.reranker: Reranker | None = load_packaged()
        self.answer_models: dict[str, AnswerModel | None] = dict(ANSWER_MODELS)
        self._corpus_language: str | None = None
        self._doc_rows: dict[Any, Any] = {}  # doc id -> row per index; postings order
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
                self._turn_index = self._make_turn_index(indexes)
                self._turn_index.message_tokens = load_message_tokens(self.version)
            self._turns_loaded = True
        return self._turn_index

    @property
    def splade_index(self) -> Any:
        """The turns' SPLADE vectors (CSR, turn layout rows), loaded on first use; None
        when the version has none (not English, weights not packaged, an older build) or
        there is no turn index: the turn ranking is then BM25's alone."""
        if not self._splade_loaded:
            from memory_pipeline.core.indexes import splade as SP
            from memory_pipeline.core.indexes.turns import TURN_FOLDER

            ti = self.turn_index
            if ti is not None:
                self._splade = SP.load_splade_index(self.version / TURN_FOLDER, len(ti))
            encoder = SP.packaged() if self._splade is not None else None
            # what a query needs of this version, computed once: its vocabulary's columns
            self._splade_scorer = (
                SP.QueryScorer(encoder, self._splade) if encoder is not None else None
            )
            self._splade_loaded = True
        return self._splade

    def splade_scores(self, content: str, mask: np.ndarray | None) -> TurnScores | None:
        """The turns' SPLADE scores for an English ``content`` (the turns its terms reach
        inside ``mask``, a boolean array over chunk rows); None when the channel does not
        apply: no vectors, no packaged encoder, or a query in another language."""
        if self.splade_index is None or self._splade_scorer is None:
            return None
        if language_of(content, self.corpus_language) != "en":
            return None
        rows, values = self._splade_scorer.sparse_scores(content)
        if mask is not None:
            keep = mask[self.turn_index.first_chunk[rows]]
            rows, values = rows[keep], values[keep]
        return TurnScores(rows, values, len(self.turn_index))

    def _make_turn_index(self, indexes: Mapping[str, Any]) -> TurnIndex:
        """The turn index over the layout the version stores (memory-mapped arrays, written
        at publish), or, for a version published before them, the layout derived from the
        chunk lookup (a loop over every message: what the stored arrays save a load)."""
        stored = load_turn_layout(self.version, self._chunk_table.column("chunk_id"), indexes)
        if stored is not None:
            layout, chunks = stored.layout(), stored.chunks()
        else:
            layout, chunks = turn_layout(self._chunk_table), None
        fields = self._messages.senders_and_lengths  # read per query, for the reranked turns
        return TurnIndex(layout, indexes, len(self.chunk_ids), chunks=chunks, fields=fields)

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
        return self._messages.as_dict("source_ref")

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

    def speakers_of_chunk(self, chunk_id: str) -> list[str]:
        """The chunk's speakers (what the speaker boost reads for each candidate)."""
        return self.speakers[self.position[chunk_id]]

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
        shown = (
            self.highlights_of([cid for cid, _ in ranked[:k]], content)
            if config.highlights
            else {}
        )
        chunk_hits = [
            self.chunk_hit(r, cid, s, content, config.highlights, raw, shown.get(cid))
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
