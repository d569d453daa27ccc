"""Embedding and chat-model providers behind small protocols, plus the shared retry policy.

Nothing here imports Dagster: resources wrap these classes, tests use them directly.
"""

from memory_pipeline.core.represent.providers.base import (
    Embedder,
    EmbedResult,
    Llm,
    Summarizer,
    l2_normalize,
)
from memory_pipeline.core.represent.providers.embeddings import (
    EstimateTokenCounter,
    LocalEmbedder,
    OpenAIEmbedder,
    VoyageEmbedder,
)
from memory_pipeline.core.represent.providers.llm import (
    OpenAICompatibleLlm,
    OpenAICompatibleSummarizer,
)
from memory_pipeline.core.represent.providers.retry import (
    ProviderHTTPError,
    call_with_retries,
    is_retryable,
    retry_after_seconds,
)

__all__ = [
    "EmbedResult",
    "Embedder",
    "EstimateTokenCounter",
    "Llm",
    "LocalEmbedder",
    "OpenAICompatibleLlm",
    "OpenAICompatibleSummarizer",
    "OpenAIEmbedder",
    "ProviderHTTPError",
    "Summarizer",
    "VoyageEmbedder",
    "call_with_retries",
    "is_retryable",
    "l2_normalize",
    "retry_after_seconds",
]
