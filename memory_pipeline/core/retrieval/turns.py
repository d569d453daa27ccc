"""Turns as a first-class retriever, and fusion across granularities (turn, chunk, session).

Ranking messages only inside the top five chunks (highlights) caps turn recall at what those
chunks hold, and a chunk that mentions the answer once among 42 messages is ranked by the
other 41. Here every message is scored on its own BM25 documents (``turn``: speaker, session
date and the message; ``turn_ctx``: its neighbours), then the granularities lift each other:

- a turn scores ``w_self * its own BM25 + w_ctx * its context's BM25 + w_chunk * its best
  chunk's fused score`` (each part scaled by its best value for the query, so the weights
  mean the same on every corpus);
- a chunk scores ``(1 - lift) * its fused score + lift * its best turn`` (scaled the same
  way), and sessions fold the lifted chunks as before.

Pure numpy over precomputed arrays: one query costs a few vector operations per granularity.
Per-turn scores are sparse (``TurnScores``: the turns with a match): a RealPersonaChat
message as a query matches ~3 % of its 408k turns' BM25 documents (~5 % of their contexts),
and the ranking then costs 20-25 % less CPU than with arrays over every turn
(benchmarks/bench_turn_ranking.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from memory_pipeline.core.indexes.bm25 import Bm25Index
from memory_pipeline.core.indexes.turn_arrays import TurnChunks, TurnLayout, derive_turn_chunks
from memory_pipeline.core.retrieval.fusion import by_score

Ranked = list[tuple[str, float]]
# (senders, text lengths) of message ids: what the reranker reads of a turn's message
Fields = Callable[[Sequence[str]], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class TurnScores:
    """One score per turn, stored sparsely: ``values`` at layout ``rows`` (sorted, unique)
    and 0 for every other of the ``n`` turns. A query's BM25 or SPLADE matches a few
    percent of the turns: a dense array would be mostly zeros written and read back."""

    rows: np.ndarray  # int64
    values: np.ndarray
    n: int

    @classmethod
    def of(cls, scores: TurnScores | np.ndarray) -> TurnScores:
        """``scores`` as given, or a dense array's non-zero entries (dtype kept)."""
        if isinstance(scores, TurnScores):
            return scores
        a = np.asarray(scores)
        rows = np.flatnonzero(a)
        return cls(rows, a[rows], a.size)

    def get(self, row: int) -> float:
        """The score of layout row ``row`` (0 without one)."""
        i = int(np.searchsorted(self.rows, row))
        return float(self.values[i]) if i < self.rows.size and self.rows[i] == row else 0.0

    def max(self) -> float:
        """The maximum over all ``n`` turns (the absent ones are 0), 0 when there are none."""
        if not self.values.size:
            return 0.0
        top = float(self.values.max())
        return top if self.rows.size == self.n else max(top, 0.0)

    def positive(self) -> np.ndarray:
        """The rows scoring above 0 (sorted)."""
        return self.rows[self.values > 0]

    def dense(self, dtype: np.dtype | type | None = None) -> np.ndarray:
        """Every turn's score, layout order (``dtype``: default the values')."""
        out = np.zeros(self.n, dtype=self.values.dtype if dtype is None else dtype)
        out[self.rows] = self.values
        return out


@dataclass(frozen=True)
class TurnWeights:
    """How a turn and a chunk are scored from the three granularities (see module doc)."""

    w_self: float = 0.5
    w_ctx: float = 0.2
    w_chunk: float = 0.3
    lift: float = 0.0

    def __post_init__(self) -> None:
        parts = (self.w_self, self.w_ctx, self.w_chunk, self.lift)
        if any(not 0.0 <= p <= 1.0 for p in parts):
            raise ValueError(f"turn weights and lift must be in [0, 1], got {parts}")


@dataclass(frozen=True)
class Fused:
    """One query's granularity fusion: the lifted chunks, the top turns, and the per-turn
    arrays they came from (what the reranker's features read), over the live turns only
    (``rows``: layout rows, sorted, of the turns that match or sit in a ranked chunk)."""

    chunks: Ranked
    turns: Ranked
    rows: np.ndarray
    own: np.ndarray  # turn BM25 / the query's best
    ctx: np.ndarray  # neighbours' BM25 / the query's best
    own_raw: np.ndarray  # turn BM25
    chunk: np.ndarray  # best chunk's fused score / the query's best
    session: np.ndarray  # best chunk of the turn's session / the query's best


class TurnIndex:
    """The turn documents of one index version, aligned with its chunk rows.

    ``senders`` and ``lengths`` (characters) per turn, in layout order, are what the
    reranker's speaker and length features read (empty / zero when not given)."""

    def __init__(
        self,
        layout: TurnLayout,
        indexes: Mapping[str, Bm25Index],
        n_chunks: int,
        senders: Sequence[str] | None = None,
        lengths: Sequence[int] | None = None,
        message_tokens: tuple[np.ndarray, np.ndarray] | None = None,
        chunks: TurnChunks | None = None,
        fields: Fields | None = None,
    ) -> None:
        """``chunks``: the layout's chunk arrays as the version stores them
        (``turn_arrays``); derived from ``layout`` when not given (a loop over turns).
        ``fields``: instead of ``senders`` / ``lengths``, a function giving the sender and
        text length of message ids, asked for the turns a query's reranker scores: a lookup
        per message of the version at load cost more than building the rest of the index."""
        self.layout = layout
        # each message's tokens as ids in the ``turn`` vocabulary (CSR: indptr, ids), written
        # by the index build; None for an older version (highlights then tokenize per query)
        self.message_tokens = message_tokens
        n = len(layout.message_ids)
        self._fields = fields
        self._senders: np.ndarray | None = None
        self._lengths: np.ndarray | None = None
        if fields is None:
            self._senders = np.array(list(senders) if senders is not None else [""] * n, object)
            self._lengths = np.asarray(lengths if lengths is not None else np.zeros(n), np.float64)
        if chunks is None:
            chunks = derive_turn_chunks(layout)
        self.session_code = chunks.session_code
        change = np.r_[True, self.session_code[1:] != self.session_code[:-1]] if n else []
        self.session_starts = np.flatnonzero(change)
        self.indexes = dict(indexes)
        self.message_ids = layout.message_ids
        self.row_of = dict(zip(layout.message_ids, range(n), strict=True))
        # a message's chunks share its session, so one row answers scope and time masks
        self.first_chunk = chunks.first_chunk
        # Per-query maxima without np.maximum.at (slow on 400k turns): a turn is in at most
        # two overlapping windows (first / last chunk row), turns are grouped by session in
        # layout order, and (chunk, turn) pairs sorted by chunk reduce with reduceat.
        self.last_chunk = chunks.last_chunk
        self.extra_chunks = chunks.extra_chunks
        self.pair_chunk = chunks.pair_chunk
        self.pair_turn = chunks.pair_turn
        # turns of chunk row r: pair_turn[chunk_start[r] : chunk_start[r + 1]]
        self.chunk_start = np.searchsorted(self.pair_chunk, np.arange(n_chunks + 1))
        self.chunk_session = np.zeros(n_chunks, dtype=np.int64)
        self.n_chunks = n_chunks
        if n:
            self.chunk_session[self.first_chunk] = self.session_code
            self.chunk_session[self.last_chunk] = self.session_code
        self._doc_pos: dict[str, np.ndarray | None] = {}
        # per thread (the service searches on several threads over one index): a float32
        # accumulator per rep, all zeros between queries (see _bm25)
        self._scratch = threading.local()
        self._ordered: dict[str, dict[int, bool]] = {}  # rep -> token -> documents in order

    def __len__(self) -> int:
        return len(self.message_ids)

    @property
    def senders(self) -> np.ndarray:
        """Every turn's sender (layout order; read through ``fields`` on first use)."""
        if self._senders is None:
            senders, lengths = self._fields(self.message_ids)
            # lengths first: a search on another thread reads both once senders is set
            self._lengths = np.asarray(lengths, np.float64)
            self._senders = senders
        return self._senders

    @property
    def lengths(self) -> np.ndarray:
        """Every turn's text length in characters (layout order, float)."""
        if self._lengths is None:
            self.senders  # noqa: B018 - reads both
        return self._lengths

    def _fields_of(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(senders, lengths as floats) of the turns at layout ``rows``."""
        if self._senders is not None:
            return self._senders[rows], self._lengths[rows]
        senders, lengths = self._fields([self.message_ids[r] for r in rows.tolist()])
        return senders, np.asarray(lengths, np.float64)

    def _positions(self, rep: str) -> np.ndarray | None:
        """Row (in layout order) of each document of ``rep``'s bm25s index; None when that
        is the identity (the build writes the documents in layout order), so scores need
        no scatter over every turn per query."""
        if rep not in self._doc_pos:
            doc_ids = self.indexes[rep].doc_ids
            # one compare (none when the version's layout took the index's own list), not a
            # lookup per turn
            if doc_ids is self.message_ids or list(doc_ids) == list(self.message_ids):
                self._doc_pos[rep] = None  # (the layout's ids are distinct: row_of[id_i] = i)
                return None
            pos = np.array([self.row_of[d] for d in doc_ids], dtype=np.int64)
            same = len(pos) == len(self) and bool(np.array_equal(pos, np.arange(len(pos))))
            self._doc_pos[rep] = None if same else pos
        return self._doc_pos[rep]

    def in_layout_order(self, rep: str) -> bool:
        """Whether ``rep``'s documents are the turns in layout order (as the build writes
        them): a document's row in that index is then its turn's row."""
        return self._positions(rep) is None

    def scores(self, tokens: Sequence[str], rep: str, chunk_mask: np.ndarray | None) -> TurnScores:
        """BM25 of the turns (layout rows) for already tokenized ``tokens``: the turns with
        a match inside ``chunk_mask`` (a boolean array over chunk rows; None: all)."""
        index = self.indexes.get(rep)
        none = TurnScores(np.zeros(0, np.int64), np.zeros(0), len(self))
        if index is None:
            return none
        vocab = index.vocab
        ids = [vocab[t] for t in tokens if t in vocab]
        if not ids:
            return none
        rows, values = self._bm25(rep, index, ids)
        pos = self._positions(rep)
        if pos is not None:
            rows = pos[rows]
            order = np.argsort(rows)
            rows, values = rows[order], values[order]
        if chunk_mask is not None:
            keep = chunk_mask[self.first_chunk[rows]]
            rows, values = rows[keep], values[keep]
        return TurnScores(rows, values, len(self))

    def _bm25(self, rep: str, index: Bm25Index, ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """(sorted document rows, float64 scores) of the documents of ``rep`` matching
        token ids ``ids``: bm25s's ``get_scores_from_ids`` bit for bit, without a pass over
        every document. bm25s adds each token's column (repeats included, in query order) to
        a float32 zero vector; here the same additions go into this thread's zeroed
        scratch vector, and only the rows touched are read out and reset."""
        r = index.retriever
        # plain arrays over the memory-mapped ones: a memmap's every slice and item goes
        # through its Python-level __getitem__, which cost more than the additions
        data, indices, indptr = (np.asarray(r.scores[k]) for k in ("data", "indices", "indptr"))
        dtype = np.dtype(r.dtype)
        if r.nonoccurrence_array is not None or data.dtype != dtype:
            # a method adding a constant to every document (bm25l, bm25+), which the
            # project's builds do not make: every document scores, sparse saves nothing
            dense = np.asarray(r.get_scores_from_ids(ids), dtype=np.float64)
            rows = np.flatnonzero(dense)
            return rows, dense[rows]
        bufs = self._scratch.__dict__.setdefault("bufs", {})
        buf = bufs.get(rep)
        if buf is None or buf.size != r.scores["num_docs"] or buf.dtype != dtype:
            buf = bufs[rep] = np.zeros(int(r.scores["num_docs"]), dtype=dtype)
        parts = []
        try:
            for t in ids:  # bm25s's own additions (np.add.at), in the same order
                lo, hi = int(indptr[t]), int(indptr[t + 1])
                docs = indices[lo:hi]
                if hi - lo >= FANCY_ADD_MIN and self._listed_once(rep, t, docs):
                    # each document once (bm25s stores a token's documents in order): a
                    # fancy-index add makes the same float32 additions, several times faster
                    buf[docs] += data[lo:hi]
                else:
                    np.add.at(buf, docs, data[lo:hi])
                parts.append(docs)
            if sum(p.size for p in parts) * 8 > buf.size:
                # common tokens: one pass over the vector beats merging their columns (a
                # sum of exactly 0 is left out: absent reads as the same 0)
                rows = np.flatnonzero(buf != 0)
                values = buf[rows].astype(np.float64)
                buf.fill(0)
            else:
                rows = _union(parts, buf.size)
                values = buf[rows].astype(np.float64)
                buf[rows] = 0
        except BaseException:
            del bufs[rep]  # possibly left dirty: the next query allocates a zeroed one
            raise
        return rows, values

    def _listed_once(self, rep: str, token: int, docs: np.ndarray) -> bool:
        """Whether ``token``'s documents in ``rep`` are in increasing order, hence each
        listed once (checked once per token: a query may repeat a word hundreds of times)."""
        seen = self._ordered.setdefault(rep, {})
        found = seen.get(token)
        if found is None:
            found = seen[token] = bool((docs[1:] > docs[:-1]).all())
        return found

    def highlight_scores(
        self, message_ids: Sequence[str], tokens: Sequence[str], idf: Mapping[str, float]
    ) -> np.ndarray | None:
        """``fusion.highlight_scores`` of the messages for already tokenized query
        ``tokens``, from the stored message tokens (no tokenizing per query); None when the
        version has no stored tokens or does not hold one of the messages.

        Same formula: the summed idf of the distinct query tokens a message contains (in
        sorted token order, so the sum is reproducible), over ``1 + 0.05 * max(0, n - 20)``
        for a message of ``n`` tokens."""
        if self.message_tokens is None or "turn" not in self.indexes:
            return None
        rows = [self.row_of.get(m) for m in message_ids]
        if any(r is None for r in rows):
            return None
        indptr, ids = self.message_tokens
        r = np.asarray(rows, dtype=np.int64)
        starts, ends = indptr[r], indptr[r + 1]
        n_tokens = (ends - starts).astype(np.float64)
        vocab = self.indexes["turn"].vocab
        q = sorted({t for t in tokens if t in vocab})
        out = np.zeros(len(r), dtype=np.float64)
        lengths = ends - starts
        total = int(lengths.sum()) if r.size else 0
        if q and total:
            qids = np.fromiter((vocab[t] for t in q), np.int64, len(q))
            weights = np.fromiter((idf.get(t, 0.0) for t in q), np.float64, len(q))
            # every token of every message at once: owner message and query-token match
            owner = np.repeat(np.arange(r.size), lengths)
            offset = np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)
            toks = ids[np.repeat(starts, lengths) + offset]
            order = np.argsort(qids)
            at = np.minimum(np.searchsorted(qids[order], toks), len(q) - 1)
            hit = qids[order][at] == toks
            present = np.zeros((r.size, len(q)), dtype=bool)
            present[owner[hit], order[at[hit]]] = True  # a repeated token counts once
            out = np.where(present, weights, 0.0).sum(axis=1)
        return out / (1.0 + 0.05 * np.maximum(0.0, n_tokens - 20))

    def fuse(
        self,
        chunk_ranked: Ranked,
        chunk_row: Mapping[str, int],
        chunk_ids: Sequence[str],
        own: TurnScores | np.ndarray,
        ctx: TurnScores | np.ndarray,
        weights: TurnWeights,
        n_turns: int,
    ) -> Fused:
        """The chunks re-ranked with their turns' lift and the top ``n_turns`` turns, both
        best first, ties by id. ``own`` / ``ctx``: ``scores`` of ``turn`` / ``turn_ctx``
        (or the same as dense arrays over every turn).

        Only the live turns (a BM25 match, or in a ranked chunk) are scored, and nothing
        passes over every turn but the union of the live rows when they are many."""
        own, ctx = TurnScores.of(own), TurnScores.of(ctx)
        c = np.zeros(self.n_chunks, dtype=np.float64)
        rows = np.zeros(0, np.int64)
        seg = np.zeros(0, np.int64)
        if chunk_ranked:
            rows = np.fromiter((chunk_row[d] for d, _ in chunk_ranked), np.int64, len(chunk_ranked))
            vals = np.fromiter((s for _, s in chunk_ranked), np.float64, len(chunk_ranked))
            c[rows] = _unit(vals)
            # the ranked chunks' turns, chunk after chunk (each chunk has at least one)
            starts = self.chunk_start[rows]
            lengths = self.chunk_start[rows + 1] - starts
            offsets = np.r_[0, np.cumsum(lengths)[:-1]]
            seg = self.pair_turn[np.repeat(starts - offsets, lengths) + np.arange(lengths.sum())]
        # sorted unique rows of (a match) or (in a ranked chunk)
        live = _union([own.positive(), ctx.positive(), seg], len(self))
        slot = _slots(live, len(self))  # row -> its index in live, read at live rows only
        # a turn outside every ranked chunk has no chunk score: only seg's turns read c
        best_chunk = np.zeros(live.size)
        best_chunk[slot[seg]] = np.maximum(c[self.first_chunk[seg]], c[self.last_chunk[seg]])
        for t, row in self.extra_chunks:  # a message in 3+ windows (short stride): rare
            i = np.searchsorted(live, t)
            if i < live.size and live[i] == t:
                best_chunk[i] = max(best_chunk[i], c[row])
        own_max, ctx_max = own.max(), ctx.max()
        own_raw = _spread(own, live, slot)
        t_own = own_raw / own_max if own_max > 0 else np.zeros(live.size)
        t_ctx = _spread(ctx, live, slot) / ctx_max if ctx_max > 0 else np.zeros(live.size)
        turn = weights.w_self * t_own + weights.w_ctx * t_ctx + weights.w_chunk * best_chunk
        turns = _top_rows(self.message_ids, live, turn, n_turns)
        session_best = np.zeros(int(self.session_code.max()) + 1 if len(self) else 0)
        if rows.size:
            np.maximum.at(session_best, self.chunk_session[rows], c[rows])
        session = session_best[self.session_code[live]] if live.size else np.zeros(0)

        def result(chunks: Ranked) -> Fused:
            return Fused(chunks, turns, live, t_own, t_ctx, own_raw, best_chunk, session)

        if weights.lift <= 0 or not chunk_ranked:
            return result(chunk_ranked)
        # a ranked chunk's best turn: reduceat over its turns
        own_seg = own_raw[slot[seg]] / own_max if own_max > 0 else np.zeros(seg.size)
        lifted = np.zeros(self.n_chunks, dtype=np.float64)
        lifted[rows] = np.maximum.reduceat(own_seg, offsets)
        # lifting re-orders the ranked chunks only: the scope and time filters made that list
        score = (1 - weights.lift) * c[rows] + weights.lift * lifted[rows]
        return result(_top_rows(chunk_ids, rows, score, len(chunk_ranked)))

    def features(
        self,
        fused: Fused,
        n: int,
        speakers: Sequence[str] = (),
        time_ok: np.ndarray | None = None,
    ) -> np.ndarray:
        """The reranker's feature matrix (``rerank.FEATURES`` order) of the top ``n`` fused
        turns. ``speakers``: names the query mentions; ``time_ok``: per chunk row, whether
        it matches the query's time filters (None: the query has none)."""
        top = fused.turns[:n]
        rows = np.fromiter((self.row_of[m] for m, _ in top), np.int64, len(top))
        at = np.searchsorted(fused.rows, rows)  # each top turn is live
        named = {s.casefold() for s in speakers}
        senders, lengths = self._fields_of(rows)
        if named:
            speaker = np.array([1.0 if str(x).casefold() in named else 0.0 for x in senders])
        else:
            speaker = np.zeros(len(rows))
        time = (
            time_ok[self.first_chunk[rows]].astype(np.float64)
            if time_ok is not None
            else np.zeros(len(rows))
        )
        pos = self.layout.position[rows].astype(np.float64)
        length = self.layout.session_length[rows].astype(np.float64)
        return np.column_stack(
            [
                fused.own[at],
                fused.ctx[at],
                np.log1p(fused.own_raw[at]),
                fused.chunk[at],
                fused.session[at],
                np.array([s for _, s in top], dtype=np.float64),
                1.0 / np.arange(1, len(rows) + 1),
                speaker,
                time,
                pos / np.maximum(length, 1.0),
                (pos == 0).astype(np.float64),
                np.log1p(lengths),
            ]
        ).reshape(len(rows), 12)


def mix_splade(
    own: TurnScores | np.ndarray, splade: TurnScores | np.ndarray | None, weight: float
) -> TurnScores | np.ndarray:
    """A turn's own share with the learned sparse channel: ``(own / max own + weight *
    splade / max splade) * max own``. Each part is scaled by its best value for the query
    (as ``fuse`` scales its parts) and the sum goes back to BM25's scale, so ``own_raw``
    and the reranker's features keep their range. Unchanged when ``weight`` is 0 or there
    are no SPLADE scores; a query without a BM25 match keeps SPLADE's order (scale 1).
    Dense arrays in, a dense array out (float64 once mixed).

    Measured on LoCoMo dev (benchmarks/results/splade.md): weight 3 chosen in every
    leave-one-conversation-out fold."""
    if weight <= 0 or splade is None:
        return own  # as given (its dtype too: the ranking without the channel is unchanged)
    o, sp = TurnScores.of(own), TurnScores.of(splade)
    if sp.n != o.n:
        return own
    top, best = o.max(), sp.max()  # maxima over every turn (an absent one is 0)
    if best <= 0:
        mixed = TurnScores(o.rows, o.values.astype(np.float64), o.n)
    else:
        # a turn with neither score stays 0: (0 / scale + weight * 0 / best) * scale
        rows = _union([o.rows, sp.rows], o.n)
        slot = _slots(rows, o.n)
        ov, sv = np.zeros(rows.size), np.zeros(rows.size)
        ov[slot[o.rows]] = o.values
        sv[slot[sp.rows]] = sp.values
        scale = top if top > 0 else 1.0
        mixed = TurnScores(rows, (ov / scale + weight * np.maximum(sv, 0.0) / best) * scale, o.n)
    return mixed if isinstance(own, TurnScores) else mixed.dense()


# a token column this long or longer is added with a fancy index (np.add.at is as cheap on a
# few entries, and needs no check)
FANCY_ADD_MIN = 64

_SLOTS = threading.local()


def _slots(rows: np.ndarray, n: int) -> np.ndarray:
    """This thread's index array over ``n`` turns holding each of ``rows``' index in
    ``rows`` at that row (other entries undefined: read only at ``rows``). Kept, not
    allocated per query: a fresh array of 400k rows costs its page faults on first write,
    more than the scatter itself."""
    a = getattr(_SLOTS, "a", None)
    if a is None or a.size < n:
        a = _SLOTS.a = np.empty(n, dtype=np.int64)
    a[rows] = np.arange(rows.size)
    return a


def _spread(scores: TurnScores, live: np.ndarray, slot: np.ndarray) -> np.ndarray:
    """``scores`` at the sorted rows ``live`` (which hold every row scoring above 0;
    ``slot``: each live row's index in ``live``), 0 where it has none."""
    out = np.zeros(live.size, dtype=scores.values.dtype)
    pos = scores.values > 0
    if pos.all():  # BM25's: every score is positive
        out[slot[scores.rows]] = scores.values
        return out
    out[slot[scores.rows[pos]]] = scores.values[pos]
    if live.size:  # a score <= 0 is read where another part made its row live
        rows, values = scores.rows[~pos], scores.values[~pos]
        i = np.minimum(np.searchsorted(live, rows), live.size - 1)
        hit = live[i] == rows
        out[i[hit]] = values[hit]
    return out


def _union(parts: Sequence[np.ndarray], n: int) -> np.ndarray:
    """The sorted distinct values (int64) of integer arrays of values in [0, n). A stable
    sort (timsort) merges the already sorted runs (a bm25s column, a score's rows) in about
    linear time, in the parts' own dtype (int32 sorts faster); np.unique and np.union1d
    hash, over ten times slower on 100k rows. When the arrays hold more than a quarter of
    ``n`` values, one mark per value is cheaper."""
    total = sum(len(p) for p in parts)
    if total * 4 > n:
        mark = np.zeros(n, dtype=bool)
        for p in parts:
            mark[p] = True
        return np.flatnonzero(mark)
    if not total:
        return np.zeros(0, np.int64)
    cat = np.concatenate(parts)
    cat.sort(kind="stable")
    return cat[np.r_[True, cat[1:] != cat[:-1]]].astype(np.int64, copy=False)


def _unit(v: np.ndarray) -> np.ndarray:
    """``v`` scaled by its maximum (all-zero stays zero): scale-free, order-preserving."""
    hi = float(v.max()) if v.size else 0.0
    return v / hi if hi > 0 else np.zeros_like(v)


def _top_rows(ids: Sequence[str], rows: np.ndarray, scores: np.ndarray, n: int) -> Ranked:
    """The top ``n`` of ``scores`` (aligned with ``rows``, indexes into ``ids``), best
    first, ties by id (everything tied with the n-th is kept for the tie-break)."""
    if rows.size == 0 or n <= 0:
        return []
    keep = np.arange(rows.size)
    if rows.size > n:
        kth = np.partition(-scores, n - 1)[n - 1]
        keep = np.flatnonzero(-scores <= kth)
    return by_score([(ids[rows[i]], float(scores[i])) for i in keep.tolist()])[:n]
