"""The searcher's rankings and hits: fused chunk rankings, turns, and the hit records.

The chunk ranking of a config, the turn ranking (turn index, reranker, or the highlights
of the top chunks) and the ``ChunkHit`` / ``SessionHit`` / ``TurnHit`` a search returns."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from memory_pipeline.core.retrieval.config import SearchConfig
from memory_pipeline.core.retrieval.fusion import Ranked, highlight_scores, linear_fusion, rrf
from memory_pipeline.core.retrieval.rerank import CANDIDATES as RERANK_CANDIDATES
from memory_pipeline.core.retrieval.rerank import rerank
from memory_pipeline.core.retrieval.searcher_parts import (
    DEFAULT,
    TURN_ALPHA,
    TURN_CHUNKS,
    ChunkHit,
    Highlight,
    SessionHit,
    TurnHit,
    _rounded,
    turn_weights,
)
from memory_pipeline.core.retrieval.timeexpr import ParsedQuery
from memory_pipeline.core.retrieval.turns import mix_splade


class _Hits:
    """The ``Searcher``'s rankings and hit records (a mixin: state is set by ``Searcher``)."""

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
        tokens = self.query_tokens(self.bm25["raw_text"].tokenizer, content)
        own = ti.scores(tokens, "turn", mask)
        if config.splade:  # the learned sparse channel in the turn's own share (English)
            own = mix_splade(own, self.splade_scores(content, mask), config.splade)
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
        own = last[0].get(row) if last is not None and row is not None else None
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
        # the lists and what they were ranked over (the mask: answerability reuses BM25's)
        lexical_rep = config.bm25_rep if mode != "dense" else None
        self._last.raw = (content, lexical_rep, lexical, config.dense_rep, dense, mask)
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
        q = self.query_tokens(tokenizer, query)
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

    def highlights_of(self, chunk_ids: list[str], query: str) -> dict[str, list[tuple[str, float]]]:
        """``ranked_messages([c], query)`` of each chunk, the stored message tokens of all
        of them scored in one pass (a search's k hits: one set of array operations, not
        k)."""
        ti = self.turn_index
        if ti is None or not chunk_ids:
            return {c: self.ranked_messages([c], query) for c in chunk_ids}
        q = self.query_tokens(self.bm25["raw_text"].tokenizer, query)
        lists = [self.message_ids[self.position[c]] for c in chunk_ids]
        stored = ti.highlight_scores([m for ids in lists for m in ids], q, self._idf)
        if stored is None:
            return {c: self.ranked_messages([c], query) for c in chunk_ids}
        out: dict[str, list[tuple[str, float]]] = {}
        at = 0
        all_scores = stored.tolist()
        for cid, ids in zip(chunk_ids, lists, strict=True):
            scores = all_scores[at : at + len(ids)]
            at += len(ids)
            seen: set[str] = set()
            ranked = []
            for i in sorted(range(len(ids)), key=lambda i: (-scores[i], i)):
                if ids[i] not in seen:
                    seen.add(ids[i])
                    ranked.append((ids[i], scores[i]))
            out.setdefault(cid, ranked)
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
        q = self.query_tokens(tokenizer, query)
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
        messages: list[tuple[str, float]] | None = None,
    ) -> ChunkHit:
        """Chunk ``cid`` as the ``rank``-th hit, with its ``n`` best messages for ``query``
        (``messages``: its ``ranked_messages`` when already computed) and its raw retriever
        scores from ``raw`` (BM25 by chunk, dense by chunk)."""
        i = self.position[cid]
        hl = []
        if n:
            if messages is None:
                messages = self.ranked_messages([cid], query)
            ranked = messages[:n]
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
