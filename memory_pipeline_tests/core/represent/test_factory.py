"""One embedder factory: provider name -> embedder class, default model and settings."""

from __future__ import annotations

import pytest

from memory_pipeline.core.represent.providers import embeddings as E
from memory_pipeline.core.represent.providers import local_models as L
from memory_pipeline.core.represent.providers.factory import (
    DEFAULT_MODELS,
    EMBEDDING_PROVIDERS,
    UnknownEmbeddingProvider,
    make_embedder,
)


def test_each_provider_gets_its_class_and_default_model():
    kinds = {"local": L.UseEmbedder, "openai": E.OpenAIEmbedder, "voyage": E.VoyageEmbedder}
    assert set(EMBEDDING_PROVIDERS) == set(kinds)
    for provider, cls in kinds.items():
        embedder = make_embedder(provider, api_key="k")
        assert type(embedder) is cls
        assert embedder.model == DEFAULT_MODELS[provider]


def test_settings_reach_the_embedder():
    local = make_embedder("local", "all-MiniLM-L6-v2", batch_size=8)
    assert local.batch_size == 8
    openai = make_embedder("openai", "text-embedding-3-small", dimensions=256, timeout=5)
    assert (openai.dim, openai.dimensions) == (256, 256)
    assert openai._client_args["timeout"] == 5


def test_unknown_provider_is_a_value_error_naming_the_choices():
    with pytest.raises(UnknownEmbeddingProvider, match="'cohere'.*local, openai, voyage"):
        make_embedder("cohere")
    assert issubclass(UnknownEmbeddingProvider, ValueError)
