"""BM25 indexes over chunk texts with bm25s, and the same scores as an SQL-queryable table.

bm25s precomputes, at index time, the BM25 contribution of every (token, document) pair
(``idf(token) * tf-saturation(token, doc)``) into a sparse CSC matrix, so ranking a query is
a sum of matrix columns. :func:`postings` exports that matrix as rows ``(token, doc_id,
score)``; ``sql/bm25_search.sql`` sums them with ``GROUP BY`` and gives bm25s's scores in
plain DuckDB, with no extension (``fts`` cannot be installed offline).

Duplicate query tokens: bm25s looks up every query token, duplicates included, and adds its
column once per occurrence, so ``coffee coffee`` scores exactly twice ``coffee``. The SQL
mirrors this by *joining* the unnested token list (not ``IN``), and :func:`query_tokens`
keeps duplicates. Tokens outside the vocabulary add nothing on either side.

Ranking ties are broken by ``doc_id`` ascending (byte order, as DuckDB sorts VARCHAR), and
only documents that share at least one token with the query are returned (score > 0), in
Python and in SQL alike.

Only ``method`` lucene (default), robertson and atire are accepted: bm25l and bm25+ add a
per-query constant to *every* document, which a postings table cannot carry.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib.resources import files
from importlib.resources.abc import Traversable
from itertools import chain
from pathlib import Path
from typing import Any

import bm25s
import numpy as np
import pyarrow as pa
from bm25s import scoring
from bm25s.tokenization import Tokenized

from memory_pipeline.core.indexes.tokenize import Tokenizer, get_tokenizer

__all__ = [
    "METHODS",
    "POSTINGS_SCHEMA",
    "SQL_SEARCH_FILE",
    "Bm25Index",
    "build_index",
    "load_index",
    "postings",
    "query_tokens",
    "search_sql",
]

METHODS = ("lucene", "robertson", "atire")
# The BM25 parameters every index of the project is built with (build_index's defaults, and
# the token-id paths of parts.py / turns.py, which must build the same files).
K1, B, METHOD = 1.5, 0.75, "lucene"
FORMAT_VERSION = 1
META_FILE = "memory_pipeline_bm25.json"
DOC_IDS_FILE = "doc_ids.json"
POSTINGS_SCHEMA = pa.schema(
    [("token", pa.string()), ("doc_id", pa.string()), ("score", pa.float32())]
)
# The query apps run as-is (see search_sql). Package data, so an installed wheel has it; the
# repository's sql/bm25_search.sql is an identical copy for readers (test_docs keeps them equal).
SQL_SEARCH_FILE: Traversable = files(__package__).joinpath("bm25_search.sql")


@dataclass
class Bm25Index:
    """A bm25s index plus what makes it usable alone: doc ids and the tokenizer."""

    doc_ids: list[str]
    tokenizer: Tokenizer
    retriever: bm25s.BM25
    _order: np.ndarray | None = field(default=None, init=False, repr=False)

    @property
    def vocab(self) -> dict[str, int]:
        """Token -> column of the score matrix."""
        return self.retriever.vocab_dict

    @property
    def params(self) -> dict[str, Any]:
        """BM25 parameters (k1, b, method)."""
        r = self.retriever
        return {"k1": r.k1, "b": r.b, "method": r.method}

    def __len__(self) -> int:
        return len(self.doc_ids)

    def _doc_order(self) -> np.ndarray:
        """Rank of each document by doc_id, the tie-breaker SQL uses (``ORDER BY chunk_id``)."""
        if self._order is None:
            order = np.empty(len(self.doc_ids), dtype=np.int64)
            order[sorted(range(len(self.doc_ids)), key=self.doc_ids.__getitem__)] = np.arange(
                len(self.doc_ids)
            )
            self._order = order
        return self._order

    def _rank(self, tokens: list[str], k: int) -> list[tuple[str, float]]:
        vocab = self.vocab
        ids = [vocab[t] for t in tokens if t in vocab]
        if not ids or k <= 0:
            return []
        scores = self.retriever.get_scores_from_ids(ids)
        hits = np.flatnonzero(scores > 0)
        if hits.size > k:  # keep everything tied with the k-th score, then break ties by id
            kth = np.partition(scores[hits], hits.size - k)[hits.size - k]
            hits = hits[scores[hits] >= kth]
        hit_scores = scores[hits]
        hits = hits[np.lexsort((self._doc_order()[hits], -hit_scores))][:k]
        doc_ids = self.doc_ids
        return [(doc_ids[i], float(scores[i])) for i in hits.tolist()]

    def token_scores(self, tokens: list[str]) -> np.ndarray:
        """bm25s's score of every document (``doc_ids`` order) for already tokenized
        ``tokens``, as :meth:`rank_tokens` scores them (zeros when none is in the
        vocabulary): for checks over every document, without ranking them."""
        vocab = self.vocab
        ids = [vocab[t] for t in tokens if t in vocab]
        if not ids:
            return np.zeros(len(self.doc_ids), dtype=np.float32)
        return np.asarray(self.retriever.get_scores_from_ids(ids))

    def rank_tokens(self, tokens: list[str], k: int) -> list[tuple[str, float]]:
        """Top ``k`` (doc_id, score) for an already tokenized query, best first.

        For callers that hold tokens rather than text, e.g. a check comparing the postings
        table with bm25s on queries made of indexed tokens. A repeated token counts once per
        occurrence and tokens outside the vocabulary add nothing, exactly as in :meth:`search`.
        """
        return self._rank(tokens, k)

    def search(self, query: str, k: int = 10) -> list[tuple[str, float]]:
        """Top ``k`` (doc_id, score), best first; [] when no query token is in the corpus."""
        return self._rank(self.tokenizer.tokenize(query), k)

    def search_many(self, queries: Sequence[str], k: int = 10) -> list[list[tuple[str, float]]]:
        """``search`` for many queries (tokenized in one batch)."""
        return [self._rank(tokens, k) for tokens in self.tokenizer.tokenize_many(queries)]

    def save(self, directory: str | Path) -> Path:
        """Write bm25s's arrays + vocab, the doc ids and the tokenizer identity (JSON)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.retriever.save(str(directory), show_progress=False)
        (directory / DOC_IDS_FILE).write_text(
            json.dumps(self.doc_ids, ensure_ascii=False), encoding="utf-8"
        )
        meta = {
            "format_version": FORMAT_VERSION,
            "num_docs": len(self.doc_ids),
            "tokenizer": {"name": self.tokenizer.name, "params": self.tokenizer.params},
            "bm25": self.params,
            "bm25s_version": bm25s.__version__,
        }
        (directory / META_FILE).write_text(
            json.dumps(meta, ensure_ascii=False, indent=2), encoding="utf-8"
        )
        return directory

    @classmethod
    def load(
        cls, directory: str | Path, mmap: bool = True, doc_ids: list[str] | None = None
    ) -> Bm25Index:
        """Open a saved index; ``mmap`` maps the score arrays instead of reading them.
        ``doc_ids``: the ids its doc ids file holds, when the caller has parsed that file's
        bytes already (indexes over the same documents share one list)."""
        directory = Path(directory)
        meta = json.loads((directory / META_FILE).read_text(encoding="utf-8"))
        if meta.get("format_version") != FORMAT_VERSION:
            raise ValueError(
                f"{directory}: index format {meta.get('format_version')!r}, "
                f"expected {FORMAT_VERSION}: rebuild the index"
            )
        if doc_ids is None:
            doc_ids = json.loads((directory / DOC_IDS_FILE).read_text(encoding="utf-8"))
        tokenizer = get_tokenizer(meta["tokenizer"]["name"], **meta["tokenizer"]["params"])
        retriever = bm25s.BM25.load(str(directory), mmap=mmap, show_progress=False)
        if retriever.scores["num_docs"] != len(doc_ids):
            raise ValueError(
                f"{directory}: {len(doc_ids)} doc ids for a bm25s index of "
                f"{retriever.scores['num_docs']} documents"
            )
        return cls(doc_ids=doc_ids, tokenizer=tokenizer, retriever=retriever)


def load_index(directory: str | Path, mmap: bool = True) -> Bm25Index:
    """Same as :meth:`Bm25Index.load`."""
    return Bm25Index.load(directory, mmap=mmap)


def build_index(
    doc_ids: Sequence[str],
    texts: Sequence[str],
    tokenizer: Tokenizer | str = "auto",
    k1: float = K1,
    b: float = B,
    method: str = METHOD,
) -> Bm25Index:
    """Tokenize ``texts`` with ``tokenizer`` (a name, ``"auto"`` samples ``texts``) and index.

    bm25s gets our token lists as a ``Tokenized(ids, vocab)`` built here (vocabulary in
    first-seen order), so its own English-only tokenizer is never involved. ``doc_ids`` must
    be unique: they are the keys the postings table and the SQL return.
    """
    doc_ids = [str(d) for d in doc_ids]
    if len(doc_ids) != len(texts):
        raise ValueError(f"{len(doc_ids)} doc_ids for {len(texts)} texts")
    if len(set(doc_ids)) != len(doc_ids):
        raise ValueError("doc_ids must be unique")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS} (postings need it), got {method!r}")
    if isinstance(tokenizer, str):
        tokenizer = get_tokenizer(tokenizer, sample_texts=texts)
    token_lists = tokenizer.tokenize_many(texts)
    retriever = new_retriever(k1, b, method)
    if not fast_index(retriever, token_lists):
        vocab: dict[str, int] = {}
        ids = [[vocab.setdefault(t, len(vocab)) for t in toks] for toks in token_lists]
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            # An empty corpus (or one with no token at all) makes numpy warn about the mean
            # length; the index is still valid and simply matches nothing.
            warnings.simplefilter("ignore", RuntimeWarning)
            retriever.index(
                Tokenized(ids=ids, vocab=vocab), create_empty_token=False, show_progress=False
            )
    return Bm25Index(doc_ids=doc_ids, tokenizer=tokenizer, retriever=retriever)


def new_retriever(k1: float = K1, b: float = B, method: str = METHOD) -> bm25s.BM25:
    """An empty bm25s retriever with the project's parameters (numpy backend)."""
    return bm25s.BM25(k1=k1, b=b, method=method, backend="numpy")


def _vocabulary(token_lists: Sequence[Sequence[str]]) -> tuple[dict[str, int], np.ndarray]:
    """(token -> id in first-seen order, the flat token ids of every document in order)."""
    flat = pa.array(list(chain.from_iterable(token_lists)), pa.string()).dictionary_encode()
    words = flat.dictionary.to_pylist()
    return dict(zip(words, range(len(words)), strict=True)), flat.indices.to_numpy()


def fast_index(retriever: bm25s.BM25, token_lists: Sequence[Sequence[str]]) -> bool:
    """Fill ``retriever`` as ``retriever.index(Tokenized(...), create_empty_token=False)``
    would, with whole-corpus numpy instead of bm25s's per-document Python loops (~10x faster
    on 400k turn documents: a refresh rebuilds every index over the whole corpus).

    The arrays are bm25s's own, bit for bit (tested): the vocabulary in first-seen order,
    document frequencies, bm25s's idf function per distinct df, its tfc formula in float64
    on the same operands, scores cast to float32, CSC order (token, then document).
    False (nothing done) for an empty corpus or a method this does not reproduce.
    """
    if retriever.method not in METHODS or retriever.idf_method != retriever.method:
        return False
    n_docs = len(token_lists)
    lengths = np.fromiter((len(t) for t in token_lists), dtype=np.int64, count=n_docs)
    if n_docs == 0 or not lengths.any():
        return False
    vocab, flat = _vocabulary(token_lists)
    return fast_index_ids(retriever, vocab, flat, lengths)


def fast_index_ids(
    retriever: bm25s.BM25, vocab: dict[str, int], flat: np.ndarray, lengths: np.ndarray
) -> bool:
    """:func:`fast_index` from token ids: ``vocab`` (token -> id, ids ``0..n-1`` in
    first-seen order), ``flat`` (every document's token ids, documents in order) and
    ``lengths`` (tokens per document). For callers that assemble token ids from cached
    arrays (``core/indexes/parts.py``) instead of holding one Python list per document;
    the same arrays as ``fast_index`` on the equivalent token lists, bit for bit."""
    if retriever.method not in METHODS or retriever.idf_method != retriever.method:
        return False
    lengths = np.asarray(lengths, dtype=np.int64)
    n_docs = len(lengths)
    if n_docs == 0 or not lengths.any():
        return False
    n_vocab = len(vocab)
    rows, tf, indptr = _term_counts(np.asarray(flat), lengths, n_vocab)
    df = np.diff(indptr)  # documents per token
    tok = np.repeat(np.arange(n_vocab, dtype=np.int64), df)
    idf_fn = scoring._select_idf_scorer(retriever.idf_method)
    distinct = np.unique(df[df > 0])
    by_df = dict(
        zip(distinct.tolist(), (idf_fn(d, N=n_docs) for d in distinct.tolist()), strict=True)
    )
    idf = np.zeros(n_vocab, dtype=retriever.dtype)
    idf[df > 0] = [by_df[d] for d in df[df > 0].tolist()]
    l_avg = lengths.mean()
    tfc = scoring._select_tfc_scorer(retriever.method)(
        tf_array=tf.astype(retriever.dtype),
        l_d=lengths[rows].astype(np.float64),
        l_avg=l_avg,
        k1=retriever.k1,
        b=retriever.b,
        delta=retriever.delta,
    )
    data = (idf[tok].astype(np.float64) * tfc).astype(retriever.dtype)
    retriever.nonoccurrence_array = None
    retriever.scores = {
        "data": data,
        "indices": rows.astype(retriever.int_dtype),
        "indptr": indptr,
        "num_docs": n_docs,
    }
    retriever.vocab_dict = vocab
    retriever.unique_token_ids_set = set(vocab.values())
    return True


def _term_counts(
    flat: np.ndarray, lengths: np.ndarray, n_vocab: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(document of each posting, its term frequency, the postings' CSC ``indptr``) of the
    token ids ``flat`` (documents of ``lengths`` tokens, in order): postings in CSC order,
    token by token and, within a token, by document.

    A counting sort (scipy's COO -> CSC conversion, C, linear in the tokens) instead of
    ``np.unique`` over one ``token * n_docs + doc`` key per token: the sort was the largest
    single cost of a refresh's five BM25 builds (~30 M tokens; ~1.4 CPU s per 10 M here,
    0.16 s this way). Documents are visited in order, so each token's column comes out
    with its documents ascending and the duplicates (a token repeated in a document)
    adjacent; ``sum_duplicates`` folds them into the term frequency. The same arrays as
    the sort, value for value (tested against ``np.unique``)."""
    import scipy.sparse as sp

    n_docs = len(lengths)
    doc = np.repeat(np.arange(n_docs, dtype=np.int32), lengths)
    ones = np.ones(len(doc), dtype=np.int32)
    matrix = sp.csc_matrix((ones, (doc, flat)), shape=(n_docs, n_vocab))
    matrix.sum_duplicates()
    return matrix.indices, matrix.data, matrix.indptr.astype(np.int64)


def query_tokens(index: Bm25Index, query: str) -> list[str]:
    """The query's tokens that are in the index vocabulary, in order, duplicates kept.

    This is the ``$tokens`` parameter of ``sql/bm25_search.sql``: passing it gives the same
    ranking as ``index.search(query)``.
    """
    vocab = index.vocab
    return [t for t in index.tokenizer.tokenize(query) if t in vocab]


def postings(index: Bm25Index) -> pa.Table:
    """Every stored (token, doc_id, score): a query's score is the SUM over its tokens.

    Pairs whose contribution is 0 (robertson/atire give idf 0 to very common tokens) are
    left out: they cannot change a sum, and leaving them out keeps "score > 0" meaning "the
    document matches".
    """
    scores = index.retriever.scores
    data = np.asarray(scores["data"], dtype=np.float32)
    doc_idx = np.asarray(scores["indices"])
    indptr = np.asarray(scores["indptr"])
    tokens_by_id = [""] * len(index.vocab)
    for token, i in index.vocab.items():
        tokens_by_id[i] = token
    token_idx = np.repeat(np.arange(len(tokens_by_id), dtype=np.int64), np.diff(indptr))
    keep = data != 0
    if not keep.all():
        data, doc_idx, token_idx = data[keep], doc_idx[keep], token_idx[keep]
    return pa.table(
        [
            pa.array(tokens_by_id, pa.string()).take(pa.array(token_idx)),
            pa.array(index.doc_ids, pa.string()).take(pa.array(doc_idx.astype(np.int64))),
            pa.array(data, pa.float32()),
        ],
        schema=POSTINGS_SCHEMA,
    )


def document_frequencies(index: Bm25Index) -> dict[str, int]:
    """Documents per token with a non-zero score: the rows per token of :func:`postings`,
    counted on the index's score matrix (a searcher gets its idf without the postings)."""
    scores = index.retriever.scores
    indptr = np.asarray(scores["indptr"], dtype=np.int64)
    nonzero = np.zeros(len(scores["data"]) + 1, dtype=np.int64)
    np.cumsum(np.asarray(scores["data"]) != 0, out=nonzero[1:])
    df = nonzero[indptr[1:]] - nonzero[indptr[:-1]]
    return {t: int(df[i]) for t, i in index.vocab.items() if i < len(df) and df[i]}


def search_sql() -> str:
    """The text of ``bm25_search.sql`` ($tokens, $representation, $k), shipped with the package."""
    return SQL_SEARCH_FILE.read_text(encoding="utf-8")
