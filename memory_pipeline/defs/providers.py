"""Provider resources: which summarizer and embedder the representation assets use.

Offline by default (extractive summaries, local MiniLM vectors). A remote provider is an
explicit choice — ``MEMORY_PIPELINE_SUMMARIZER=openai`` / ``MEMORY_PIPELINE_EMBEDDER=openai|voyage``
plus its key — never a side effect of an API key that happens to be in the environment,
because it sends chat text off the machine. Secrets reach the resources as ``EnvVar``s.
"""

import os
from collections.abc import Mapping

import dagster as dg

from memory_pipeline.config import provider_settings
from memory_pipeline.core.represent.providers.base import Embedder, Summarizer
from memory_pipeline.core.represent.providers.factory import (
    MissingExtra,
    UnknownEmbeddingProvider,
    make_embedder,
)
from memory_pipeline.defs.compute import RESOURCE_KEY as DASK_KEY
from memory_pipeline.defs.compute import dask_resource

# Every remote call goes through this pool, so concurrent runs cannot multiply the rate.
PROVIDER_POOL = "provider_api"

DEFAULT_LLM = "gpt-4o-mini"


class EmbeddingResource(dg.ConfigurableResource):
    """Dense vectors: ``local`` (a packaged model, offline; ``model`` picks USE v3, e5 or
    MiniLM), ``openai`` or ``voyage``."""

    provider: str = "local"
    model: str | None = None
    dimensions: int | None = None
    api_key: str | None = None
    base_url: str | None = None
    batch_size: int = 32
    redact: bool | None = None  # None: on for remote providers, off for local
    timeout_seconds: float = 60.0

    def build(self) -> Embedder:
        """The configured embedder (the core factory the searcher also builds from).

        A remote provider without a key fails here, before any chunk is read."""
        if self.provider != "local" and not self.api_key:
            raise dg.Failure(f"embedding provider {self.provider!r} needs an API key")
        try:
            return make_embedder(
                self.provider,
                self.model,
                dimensions=self.dimensions,
                api_key=self.api_key,
                base_url=self.base_url,
                batch_size=self.batch_size,
                timeout=self.timeout_seconds,
            )
        except (UnknownEmbeddingProvider, MissingExtra) as exc:
            raise dg.Failure(str(exc)) from None

    @property
    def redacts(self) -> bool:
        return self.provider != "local" if self.redact is None else self.redact


class SummarizerResource(dg.ConfigurableResource):
    """Chunk summaries: ``extractive`` (offline, deterministic) or ``openai`` (any
    OpenAI-compatible endpoint via ``base_url``)."""

    provider: str = "extractive"
    model: str | None = None
    api_key: str | None = None
    base_url: str | None = None
    temperature: float = 0.0
    timeout_seconds: float = 60.0
    redact: bool | None = None

    def build(self) -> Summarizer | None:
        """None means the built-in extractive summarizer."""
        if self.provider == "extractive":
            return None
        if self.provider != "openai":
            raise dg.Failure(f"unknown summarizer {self.provider!r} (extractive, openai)")
        if not self.api_key:
            raise dg.Failure("summarizer 'openai' needs an API key")
        from memory_pipeline.core.represent.providers.llm import OpenAICompatibleSummarizer

        return OpenAICompatibleSummarizer(
            model=self.model or DEFAULT_LLM,
            api_key=self.api_key,
            base_url=self.base_url,
            temperature=self.temperature,
            timeout=self.timeout_seconds,
        )

    @property
    def redacts(self) -> bool:
        return self.provider != "extractive" if self.redact is None else self.redact


class MemoryExtractorResource(dg.ConfigurableResource):
    """Memory extraction: ``rules`` (offline, deterministic, English and Japanese) or
    ``openai`` (any OpenAI-compatible endpoint; structured output with the same schema)."""

    provider: str = "rules"
    model: str | None = None
    api_key: str | None = None
    base_url: str | None = None
    timeout_seconds: float = 60.0
    redact: bool | None = None  # None: on (the text leaves the machine)

    def build(self, cache=None):
        """None means the built-in rules; ``cache`` (a ContentCache) keeps answers by content."""
        if self.provider == "rules":
            return None
        if self.provider != "openai":
            raise dg.Failure(f"unknown memory extractor {self.provider!r} (rules, openai)")
        if not self.api_key:
            raise dg.Failure("memory extractor 'openai' needs an API key")
        from memory_pipeline.core.memories.llm import LlmMemoryExtractor
        from memory_pipeline.core.represent.providers.llm import OpenAICompatibleLlm

        llm = OpenAICompatibleLlm(
            model=self.model or DEFAULT_LLM,
            api_key=self.api_key,
            base_url=self.base_url,
            timeout=self.timeout_seconds,
        )
        return LlmMemoryExtractor(llm, cache=cache, redact_text=self.redact is not False)


class DossierWriterResource(dg.ConfigurableResource):
    """Dossier pages: ``rules`` (the deterministic fold's page, offline, the default) or
    ``openai`` (any OpenAI-compatible endpoint rewrites the page from the previous page and
    the day's summaries and memories; kept only if it passes ``dossier.check_rewrite``)."""

    provider: str = "rules"
    model: str | None = None
    api_key: str | None = None
    base_url: str | None = None
    timeout_seconds: float = 120.0
    redact: bool | None = None  # None: on (the text leaves the machine)

    def build(self, cache=None):
        """None means the rule page; ``cache`` (a ContentCache) keeps answers by content."""
        if self.provider == "rules":
            return None
        if self.provider != "openai":
            raise dg.Failure(f"unknown dossier writer {self.provider!r} (rules, openai)")
        if not self.api_key:
            raise dg.Failure("dossier writer 'openai' needs an API key")
        from memory_pipeline.core.memories.llm import LlmDossierWriter
        from memory_pipeline.core.represent.providers.llm import OpenAICompatibleLlm

        llm = OpenAICompatibleLlm(
            model=self.model or DEFAULT_LLM,
            api_key=self.api_key,
            base_url=self.base_url,
            timeout=self.timeout_seconds,
        )
        return LlmDossierWriter(llm, cache=cache, redact_text=self.redact is not False)


def provider_resources(env: Mapping[str, str] | None = None) -> dict[str, dg.ConfigurableResource]:
    """Resources from the environment (see README, "Providers").

    Every variable is read through ``config.provider_settings``: a value outside its
    documented set (``MEMORY_PIPELINE_REDACT=of``, ``MEMORY_PIPELINE_EMBEDDER=opnai``) is a
    ``ConfigError`` naming it, never a silent default, and redaction is never switched off by
    anything but an explicit off."""
    env = os.environ if env is None else env
    s = provider_settings(env)
    key_var = {"openai": "OPENAI_API_KEY", "voyage": "VOYAGE_API_KEY"}.get(s.embedder)
    base_var = {"openai": "OPENAI_BASE_URL", "voyage": "VOYAGE_BASE_URL"}.get(s.embedder)
    base_url = s.llm_base_url or env.get("OPENAI_BASE_URL")
    return {
        "embedder": EmbeddingResource(
            provider=s.embedder,
            model=s.embedding_model,
            dimensions=s.embedding_dimensions,
            api_key=dg.EnvVar(key_var) if key_var else None,
            base_url=env.get(base_var) if base_var else None,
            redact=s.redact_flag,
        ),
        "summarizer": SummarizerResource(
            provider=s.summarizer,
            model=s.llm_model,
            api_key=dg.EnvVar("OPENAI_API_KEY") if s.summarizer == "openai" else None,
            base_url=base_url,
            redact=s.redact_flag,
        ),
        "memory_extractor": MemoryExtractorResource(
            provider=s.memory_extractor,
            model=s.llm_model,
            api_key=dg.EnvVar("OPENAI_API_KEY") if s.memory_extractor == "openai" else None,
            base_url=base_url,
            redact=s.redact_flag,
        ),
        "dossier_writer": DossierWriterResource(
            provider=s.dossier_writer,
            model=s.dossier_model or s.llm_model,
            api_key=dg.EnvVar("OPENAI_API_KEY") if s.dossier_writer == "openai" else None,
            base_url=base_url,
            redact=s.redact_flag,
        ),
        # where the heavy batches run (serial unless a Dask cluster is configured)
        DASK_KEY: dask_resource(env),
    }


class QueryRewriterResource(dg.ConfigurableResource):
    """Follow-up questions made standalone: ``rules`` (offline, the default: pronouns and
    あれ/それ resolved from the recent messages) or ``openai`` (any OpenAI-compatible
    endpoint; the question and messages redacted before sending, answers cached)."""

    provider: str = "rules"
    model: str | None = None
    api_key: str | None = None
    base_url: str | None = None
    timeout_seconds: float = 30.0
    redact: bool | None = None  # None: on (the text leaves the machine)

    def build(self, cache=None):
        """None means the rules; ``cache`` (a ContentCache) keeps rewrites by content."""
        if self.provider == "rules":
            return None
        if self.provider != "openai":
            raise dg.Failure(f"unknown query rewriter {self.provider!r} (rules, openai)")
        if not self.api_key:
            raise dg.Failure("query rewriter 'openai' needs an API key")
        from memory_pipeline.core.represent.providers.llm import OpenAICompatibleLlm
        from memory_pipeline.core.retrieval.rewrite import LlmQueryRewriter

        llm = OpenAICompatibleLlm(
            model=self.model or DEFAULT_LLM,
            api_key=self.api_key,
            base_url=self.base_url,
            timeout=self.timeout_seconds,
        )
        return LlmQueryRewriter(llm, cache=cache, redact_text=self.redact is not False)


def query_rewriter_resource(env: Mapping[str, str] | None = None) -> QueryRewriterResource:
    """``MEMORY_PIPELINE_QUERY_REWRITER`` (rules | openai; default rules), the key as an
    ``EnvVar`` (never read into the config), model and endpoint as for the extractor."""
    env = os.environ if env is None else env
    s = provider_settings(env)
    return QueryRewriterResource(
        provider=s.query_rewriter,
        model=s.llm_model,
        api_key=dg.EnvVar("OPENAI_API_KEY") if s.query_rewriter == "openai" else None,
        base_url=s.llm_base_url or env.get("OPENAI_BASE_URL"),
        redact=s.redact_flag,
    )
