"""Search queries are redacted before a remote embedder sees them; the local model's are not."""

from __future__ import annotations

import json

import numpy as np

from memory_pipeline.core.represent.providers.base import EmbedResult
from memory_pipeline.core.retrieval.searcher import Searcher, embedder_for
from memory_pipeline_tests.fake_servers import FakeProviderServer

QUERY = "what did I send to hanako＠example．com and 090-1234-5678?"
META = {"provider": "openai", "model": "text-embedding-3-small", "dim": 1536}


def searcher_with(embedder, meta: dict) -> Searcher:
    """A Searcher with only what query embedding needs (no index on disk is involved)."""
    searcher = Searcher.__new__(Searcher)
    searcher.dense_meta = {"raw": meta}
    searcher._embedder = embedder
    searcher._query_vectors = {}
    return searcher


def test_remote_embedder_receives_the_placeholder_not_the_email():
    with FakeProviderServer() as server:
        env = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": server.openai_base_url}
        searcher = searcher_with(embedder_for(META, env), META)
        vector = searcher.embed_query(QUERY, "raw")
        searcher.prime_queries([QUERY, "call me at john dot doe at gmail dot com"], "raw")
        bodies = json.dumps([r.body for r in server.embedding_requests()], ensure_ascii=False)
    assert vector.shape == (1536,)
    assert len(server.embedding_requests()) == 2  # the memo keys on the original query
    assert "[EMAIL]" in bodies and "[PHONE]" in bodies
    for secret in ("hanako", "example", "090-1234-5678", "john", "gmail"):
        assert secret not in bodies


class RecordingLocal:
    """A stand-in for the local model: records what it was asked to embed."""

    provider, model, dim, params, max_batch, remote, calls = "local", "m", 4, {}, 32, False, 0

    def __init__(self) -> None:
        self.seen: list[str] = []

    def embed(self, texts: list[str], input_type: str = "document") -> EmbedResult:
        self.seen += texts
        return EmbedResult(vectors=np.ones((len(texts), 4), dtype=np.float32) / 2)


def test_local_embedder_receives_the_query_unchanged():
    local = RecordingLocal()
    searcher = searcher_with(local, {"provider": "local", "model": "m", "dim": 4})
    searcher.embed_query(QUERY, "raw")
    searcher.prime_queries(["mail a@b.io"], "raw")
    assert local.seen == [QUERY, "mail a@b.io"]


class KeyedLocal(RecordingLocal):
    """A local stand-in with USE's memo key (whitespace runs as one, trimmed) and a
    one-query path, recording which path embedded what."""

    def query_key(self, text: str) -> str:
        return " ".join(text.split())

    def query_vector(self, text: str) -> np.ndarray:
        self.seen.append(f"one:{text}")
        return np.full(4, 0.5, dtype=np.float32)


def test_query_vectors_are_memoized_by_the_models_key_least_recent_dropped(monkeypatch):
    from collections import OrderedDict

    from memory_pipeline.core.retrieval import searcher_retrievers as SR

    local = KeyedLocal()
    searcher = searcher_with(local, {"provider": "local", "model": "m", "dim": 4})
    searcher._query_vectors = OrderedDict()
    monkeypatch.setattr(SR, "QUERY_MEMO", 2)
    searcher.embed_query("when is  the trip ", "raw")
    searcher.embed_query("when is the trip", "raw")  # the same text for the model: memoized
    assert local.seen == ["one:when is  the trip "]
    searcher.embed_query("b", "raw")
    searcher.embed_query("when is the trip", "raw")  # used again: now the most recent
    searcher.embed_query("c", "raw")  # drops "b", the least recently used
    searcher.embed_query("when is the trip", "raw")
    searcher.embed_query("b", "raw")
    assert local.seen == ["one:when is  the trip ", "one:b", "one:c", "one:b"]
    assert len(searcher._query_vectors) == 2
