"""One factory from a provider name to an embedder.

Documents are embedded by the ``chunk_embeddings`` asset and queries by the searcher; both
must build the same class with the same model and output size, or query vectors land in a
different space than the stored ones. So both call :func:`make_embedder`: the asset with its
resource's settings, the searcher with the provider, model and dimension recorded in the
index. The embedder modules are imported on call, so importing this module stays cheap for
the Dagster definitions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memory_pipeline.core.represent.providers.base import Embedder

# Each provider's model when none is configured.
DEFAULT_MODELS: dict[str, str] = {
    "local": "all-MiniLM-L6-v2",
    "openai": "text-embedding-3-small",
    "voyage": "voyage-3.5",
}
EMBEDDING_PROVIDERS: tuple[str, ...] = tuple(DEFAULT_MODELS)


class UnknownEmbeddingProvider(ValueError):
    """The provider name is none of :data:`EMBEDDING_PROVIDERS`."""


def make_embedder(
    provider: str,
    model: str | None = None,
    *,
    dimensions: int | None = None,
    api_key: str | None = None,
    base_url: str | None = None,
    batch_size: int = 32,
    timeout: float = 60.0,
) -> Embedder:
    """The embedder of ``provider`` (``local``, ``openai`` or ``voyage``).

    ``model`` defaults to the provider's :data:`DEFAULT_MODELS` entry. ``dimensions`` asks
    OpenAI for shortened vectors (Voyage and the local model ignore it); ``batch_size`` is the
    local encode batch; ``api_key``, ``base_url`` and ``timeout`` reach the remote clients.
    No key check here: a caller that must fail early without one (the asset) checks first.
    """
    if provider not in DEFAULT_MODELS:
        raise UnknownEmbeddingProvider(
            f"unknown embedding provider {provider!r} ({', '.join(EMBEDDING_PROVIDERS)})"
        )
    from memory_pipeline.core.represent.providers import embeddings as E

    model = model or DEFAULT_MODELS[provider]
    if provider == "local":
        return E.LocalEmbedder(model_name=model, batch_size=batch_size)
    if provider == "openai":
        return E.OpenAIEmbedder(
            model=model,
            dimensions=dimensions,
            api_key=api_key,
            base_url=base_url,
            timeout=timeout,
        )
    return E.VoyageEmbedder(model=model, api_key=api_key, base_url=base_url, timeout=timeout)
