"""The searcher's retrievers: BM25 and dense rankings over one published index version.

The dense side loads the memory-mapped matrix, the HNSW or IVF index and the pieces a
deferred merge left out of the graph on first use; query vectors are memoized."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from memory_pipeline.core.indexes.hnsw import KEYS_SUFFIX, KeyRows, load_pending
from memory_pipeline.core.indexes.ivf import IvfIndex, load_ivf
from memory_pipeline.core.indexes.segments import load_matrix
from memory_pipeline.core.retrieval.fusion import Ranked
from memory_pipeline.core.retrieval.searcher_parts import (
    ANN_PIECES,
    SUBSET_SCAN,
    _best_per_chunk,
    _Names,
    _outgoing,
    _top,
    embedder_for,
)

QUERY_MEMO = 20_000  # query vectors kept per searcher (~40 MB at 512-d)
TOKEN_MEMO = 4_096  # tokenized query texts kept per searcher


class _Retrievers:
    """The ``Searcher``'s BM25 and dense rankings (a mixin: state is set by ``Searcher``)."""

    def query_embedder(self, rep: str) -> Any:
        """The embedder that embeds queries for ``rep``'s stored vectors (made on first use)."""
        if self._embedder is None:
            self._embedder = embedder_for(self.dense_meta[rep])
        return self._embedder

    def forget_query_vectors(self) -> None:
        """Empty the query-vector memo, so the next search pays its query embedding again
        (benchmarks time new queries)."""
        self._query_vectors.clear()

    def query_tokens(self, tokenizer: Any, text: str) -> list[str]:
        """``tokenizer.tokenize(text)`` memoized for query texts (a search tokenizes its
        query for BM25, the turns, the highlights and the answerability: once is enough)."""
        key = (id(tokenizer), text)
        memo = self.__dict__.setdefault("_token_memo", {})
        hit = memo.get(key)
        if hit is None:
            hit = memo[key] = tuple(tokenizer.tokenize(text))
            if len(memo) > TOKEN_MEMO:
                try:
                    memo.pop(next(iter(memo)))
                except (KeyError, RuntimeError, StopIteration):  # another thread's change
                    pass
        return list(hit)

    # -- retrievers -------------------------------------------------------------------------
    def bm25_ranked(self, query: str, rep: str, mask: np.ndarray | None, n: int) -> Ranked:
        index = self.bm25[rep]
        vocab = index.vocab
        ids = [vocab[t] for t in self.query_tokens(index.tokenizer, query) if t in vocab]
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
        """The query vector in the space of ``rep``'s stored vectors, memoized by the query
        as the model sees it (least recently used dropped past ``QUERY_MEMO``): hybrid and
        sweeps ask for the same query once per representation, users repeat queries."""
        meta = self.dense_meta[rep]
        embedder = self.query_embedder(rep)
        normalized = getattr(embedder, "query_key", None)
        text = normalized(query) if normalized is not None else query
        key = (text, meta["provider"], meta["model"], meta["dim"])
        memo = self._query_vectors
        cached = memo.get(key)
        if cached is not None:
            try:
                memo.move_to_end(key)
            except (KeyError, AttributeError):  # dropped by another thread; a plain dict
                pass
            return cached
        one = getattr(embedder, "query_vector", None)
        if one is not None and not getattr(embedder, "remote", False):
            vector = np.asarray(one(query), dtype=np.float32)
        else:
            result = embedder.embed(_outgoing(embedder, [query]), input_type="query")
            vector = np.asarray(result.vectors[0], dtype=np.float32)
        memo[key] = vector
        while len(memo) > QUERY_MEMO:
            try:
                memo.popitem(last=False)
            except (KeyError, TypeError):  # emptied meanwhile; a plain dict
                memo.clear()
        return vector

    def prime_queries(self, queries: list[str], rep: str) -> None:
        """Embed many queries in one batch into the query-vector memo (evaluation sweeps)."""
        if rep not in self.dense_meta:
            return
        meta = self.dense_meta[rep]
        embedder = self.query_embedder(rep)
        normalized = getattr(embedder, "query_key", None) or (lambda q: q)
        todo = [
            q
            for q in dict.fromkeys(queries)
            if (normalized(q), meta["provider"], meta["model"], meta["dim"])
            not in self._query_vectors
        ]
        if not todo:
            return
        vectors = embedder.embed(_outgoing(embedder, todo), input_type="query").vectors
        for q, v in zip(todo, vectors, strict=True):
            key = (normalized(q), meta["provider"], meta["model"], meta["dim"])
            self._query_vectors[key] = np.asarray(v, dtype=np.float32)

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
