"""The searcher's answerability signals: how likely the memory holds the answer to a query.

Read from the retrievers' raw scores of the last ranking and the BM25 indexes' token
columns, each normalized by the query itself (``retrieval.answerability``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from memory_pipeline.core.retrieval.answerability import (
    COVER_CHUNKS,
    COVER_TURNS,
    MARGIN_DEPTH,
    idf_share,
)
from memory_pipeline.core.retrieval.config import SearchConfig
from memory_pipeline.core.retrieval.query import speakers_in
from memory_pipeline.core.retrieval.searcher_parts import ChunkHit, TurnHit


class _Answerability:
    """The ``Searcher``'s corpus language and answerability features (a mixin)."""

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
        tokens = self.query_tokens(tokenizer, content)
        names = speakers_in(content, self.known_speakers)
        name_tokens = {t for n in names for t in self.query_tokens(tokenizer, n)}
        words = list(dict.fromkeys(t for t in tokens if t not in name_tokens))
        top_idf = math.log(1.0 + (len(self.chunk_ids) + 0.5) / 0.5)
        idf = self._idf
        most = sum(idf.get(t, top_idf) for t in tokens)
        last = getattr(self._last, "raw", None)
        if last is not None and last[0] == content and last[1] == "raw_text" and last[5] is mask:
            best = last[2][:1]  # this search's own BM25 list: its best is the best
        else:
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
            if rep == "turn" and ti.in_layout_order(rep):  # its row_of: no second map
                rows_of = ti.row_of
            else:
                rows_of = {d: i for i, d in enumerate(index.doc_ids)}
            self._doc_rows[rep] = rows_of
        rows = [rows_of.get(d) for d in doc_ids]
        if any(r is None for r in rows):
            return []
        csc = index.retriever.scores
        indptr, indices = csc["indptr"], csc["indices"]
        vocab = index.vocab
        held: list[set[str]] = [set() for _ in rows]
        wanted = np.asarray(rows, dtype=np.int64)
        ordered = self._doc_rows.get(("sorted", rep))
        if ordered is None:  # each token's documents ascending (bm25s writes them so)
            starts = np.zeros(len(indices), dtype=bool)
            starts[np.asarray(indptr[:-1])[np.asarray(indptr[:-1]) < len(indices)]] = True
            ordered = bool(np.all((np.diff(indices) > 0) | starts[1:]))
            self._doc_rows[("sorted", rep)] = ordered
        for w in words:
            if w not in vocab:
                continue
            t = vocab[w]
            docs = indices[indptr[t] : indptr[t + 1]]
            if ordered:  # a binary search per hit, not a sort of the token's documents
                at = np.minimum(np.searchsorted(docs, wanted), max(len(docs) - 1, 0))
                found = docs[at] == wanted if len(docs) else np.zeros(len(wanted), dtype=bool)
            else:
                found = np.isin(wanted, docs)
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
