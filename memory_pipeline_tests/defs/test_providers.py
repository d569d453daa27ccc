"""The embedding resource and the searcher build the same embedder (one core factory).

Why: documents are embedded by the asset's resource and queries by the searcher from the
index's record; a drift between the two puts query vectors in another space.
"""

from __future__ import annotations

import dagster as dg
import pytest

from memory_pipeline.core.retrieval.searcher import embedder_for
from memory_pipeline.defs.providers import EmbeddingResource


def _same(a, b) -> bool:
    return (type(a), a.model, a.dim, a.params) == (type(b), b.model, b.dim, b.params)


@pytest.mark.parametrize(
    ("provider", "model", "dimensions"),
    [
        ("local", None, None),
        ("openai", "text-embedding-3-small", None),
        ("openai", "text-embedding-3-small", 512),
        ("voyage", "voyage-3.5", None),
    ],
)
def test_queries_are_embedded_like_the_documents(provider, model, dimensions):
    """The searcher, rebuilding from the index's record, gets the asset's embedder."""
    built = EmbeddingResource(
        provider=provider, model=model, dimensions=dimensions, api_key="k"
    ).build()
    meta = {"provider": built.provider, "model": built.model, "dim": built.dim}
    assert _same(embedder_for(meta, env={}), built)


def test_the_resource_and_the_searcher_keep_their_errors():
    with pytest.raises(dg.Failure, match="needs an API key"):
        EmbeddingResource(provider="openai").build()
    with pytest.raises(dg.Failure, match="unknown embedding provider 'x'"):
        EmbeddingResource(provider="x", api_key="k").build()
    with pytest.raises(ValueError, match="'x' in the index"):
        embedder_for({"provider": "x", "model": "m", "dim": 3}, env={})
