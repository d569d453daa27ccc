"""Representations through the real assets: offline defaults, OpenAI and Voyage over their
real client libraries against a local wire-format server, cache, retries, redaction."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pytest

from memory_pipeline.config import DEFAULT_DENSE
from memory_pipeline.core.represent.providers.factory import DEFAULT_MODELS, LOCAL_MODELS
from memory_pipeline.defs.providers import provider_resources
from memory_pipeline_tests.fake_servers import FakeProviderServer
from memory_pipeline_tests.paths import FIXTURES, ROOT
from memory_pipeline_tests.pipeline_helpers import (
    INGEST_KEYS,
    REPRESENTATION_KEYS,
    Runner,
    write_config,
)

DAYS = [dt.date(2024, 3, 1) + dt.timedelta(days=i) for i in range(14)]
PII = ["yuki.tanaka@example.com", "090-1234-5678", "4111 1111 1111 1111", "s3cr3tT0ken42"]
CONFIG = """
[pipeline]
owner = "Yuki"
timezone = "Asia/Tokyo"
start_date = "2024-03-01"
end_date = "2024-03-14"
output_dir = "out"

[[sources]]
name = "sample_line_json"
kind = "line_json"
path = "line_json"

[[sources]]
name = "sample_line_txt"
kind = "line_txt"
path = "line_txt"
"""


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    """The bundled sample plus one conversation full of personal data."""
    shutil.copytree(ROOT / "data" / "sample" / "line_json", tmp_path / "line_json")
    shutil.copytree(ROOT / "data" / "sample" / "line_txt", tmp_path / "line_txt")
    shutil.copytree(FIXTURES / "pii", tmp_path / "line_json" / "pat")
    return write_config(tmp_path, CONFIG)


def build(runner: Runner, days=DAYS):
    for keys in (INGEST_KEYS, ["sessions"], ["chunks"], REPRESENTATION_KEYS):
        runner.run(keys, days)
    return runner.run(["chunk_embeddings"], days)


def metadata(result, key: str) -> dict:
    """A range run records one event per partition; the run's own figures are range_*."""
    event = next(
        e for e in result.get_asset_materialization_events() if e.asset_key.to_user_string() == key
    )
    return {k: v.value for k, v in event.materialization.metadata.items()}


def remote(monkeypatch, server: FakeProviderServer, embedder: str, summarizer: str) -> dict:
    env = {
        "MEMORY_PIPELINE_EMBEDDER": embedder,
        "MEMORY_PIPELINE_SUMMARIZER": summarizer,
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_BASE_URL": server.openai_base_url,
        "VOYAGE_API_KEY": "pa-test",
        "VOYAGE_BASE_URL": server.voyage_base_url,
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)  # EnvVar secrets resolve from the process environment
    return provider_resources(env)


def test_offline_defaults(sample: Path, tmp_path: Path):
    runner = Runner(sample, tmp_path / "out")
    first = build(runner)
    t = runner.tables()
    chunks = t["chunks"].num_rows
    assert t["chunk_summaries"].num_rows == chunks == t["embedding_texts"].num_rows
    assert t["session_enrichment"].num_rows == t["sessions"].num_rows
    assert set(t["chunk_summaries"].column("method").to_pylist()) == {"extractive"}
    vectors = runner.store.read("chunk_embeddings")
    pieces = vectors.column("piece").to_pylist()
    reps = len(DEFAULT_DENSE)  # the representations the default search reads
    assert set(vectors.column("representation").to_pylist()) == set(DEFAULT_DENSE)
    assert pieces.count(0) == reps * chunks  # one first piece per chunk and representation
    assert vectors.num_rows > reps * chunks  # texts over the model window: more pieces, not cut
    assert not any(vectors.column("truncated").to_pylist())
    model = DEFAULT_MODELS["local"]
    dim = LOCAL_MODELS[model][0]
    assert set(vectors.column("dim").to_pylist()) == {dim}
    assert vectors.schema.field("vector").type.list_size == dim
    assert vectors.schema.metadata[b"model"] == model.encode()
    meta = metadata(first, "chunk_embeddings")
    # a fresh cache: only a piece whose text another representation already embedded (an
    # excerpt piece equal to a raw_text piece) can be a hit
    repeats = vectors.num_rows - len(set(vectors.column("text_hash").to_pylist()))
    assert meta["range_provider_calls"] > 0 and meta["range_cache_hits"] <= repeats
    # re-materializing unchanged partitions makes zero provider calls
    again = runner.run(["chunk_embeddings"], DAYS)
    meta = metadata(again, "chunk_embeddings")
    assert meta["range_provider_calls"] == 0 and meta["range_cache_hits"] == vectors.num_rows
    assert runner.store.read("chunk_embeddings").equals(vectors)


def test_openai_wire_format_cache_and_redaction(sample, tmp_path, monkeypatch):
    with FakeProviderServer() as server:
        runner = Runner(sample, tmp_path / "out", remote(monkeypatch, server, "openai", "openai"))
        build(runner)
        sent = [r for r in server.requests if r.status == 200]
        assert {r.path for r in sent} == {"/v1/embeddings", "/v1/chat/completions"}
        bodies = json.dumps([r.body for r in server.requests], ensure_ascii=False)
        for secret in PII:
            assert secret not in bodies
        assert "[EMAIL]" in bodies and "[PHONE]" in bodies and "[CARD]" in bodies
        assert all(r.headers.get("authorization") == "Bearer sk-test" for r in sent)
        summaries = runner.store.read("chunk_summaries")
        assert set(summaries.column("method").to_pylist()) == {"openai/gpt-4o-mini"}
        assert pc.sum(summaries.column("redactions")).as_py() >= 4
        vectors = runner.store.read("chunk_embeddings")
        assert set(vectors.column("dim").to_pylist()) == {1536}
        before = len(server.requests)
        for keys in (REPRESENTATION_KEYS, ["chunk_embeddings"]):
            runner.run(keys, DAYS)
        assert len(server.requests) == before  # unchanged chunks: zero provider calls


def test_voyage_wire_format_and_retry_after(sample, tmp_path, monkeypatch):
    # every representation embedded: enough requests for a 429 and a later 500
    monkeypatch.setenv("MEMORY_PIPELINE_DENSE_REPRESENTATIONS", "raw_text,summary,embedding_text")
    with FakeProviderServer() as server:
        runner = Runner(
            sample, tmp_path / "out", remote(monkeypatch, server, "voyage", "extractive")
        )
        server.fail_next(429, retry_after="0", path="/v1/embeddings")
        server.fail_next(500, path="/v1/embeddings", after=1)
        build(runner)
        statuses = [r.status for r in server.requests]
        assert 429 in statuses and 500 in statuses and statuses.count(200) >= 1
        assert {r.body["input_type"] for r in server.requests} == {"document"}
        vectors = runner.store.read("chunk_embeddings")
        assert set(vectors.column("dim").to_pylist()) == {1024}
        assert vectors.column("error").null_count == vectors.num_rows


def test_permanently_bad_input_is_recorded_not_fatal(sample, tmp_path, monkeypatch):
    with FakeProviderServer() as server:
        runner = Runner(
            sample, tmp_path / "out", remote(monkeypatch, server, "openai", "extractive")
        )
        server.reject_inputs_containing("Hikari Design")
        build(runner)
        vectors = runner.store.read("chunk_embeddings")
        bad = vectors.filter(pc.is_valid(vectors.column("error")))
        assert 0 < bad.num_rows < vectors.num_rows
        assert bad.column("vector").null_count == bad.num_rows
        good = vectors.filter(pc.is_null(vectors.column("error")))
        mat = np.asarray(pc.list_flatten(good.column("vector")).to_numpy()).reshape(-1, 1536)
        assert np.allclose(np.linalg.norm(mat, axis=1), 1.0, atol=1e-4)


def test_representations_incremental_equals_backfill(sample, tmp_path):
    full = Runner(sample, tmp_path / "full")
    build(full)
    one_by_one = Runner(sample, tmp_path / "daily")
    for keys in (INGEST_KEYS, ["sessions"], ["chunks"], REPRESENTATION_KEYS, ["chunk_embeddings"]):
        for day in DAYS:
            one_by_one.run(keys, [day])
    assert one_by_one.tables() == full.tables()
    a = full.store.read("chunk_embeddings").sort_by(
        [("chunk_id", "ascending"), ("representation", "ascending")]
    )
    b = one_by_one.store.read("chunk_embeddings").sort_by(
        [("chunk_id", "ascending"), ("representation", "ascending")]
    )
    assert a.select(["chunk_id", "representation", "text_hash"]).equals(
        b.select(["chunk_id", "representation", "text_hash"])
    )
    va = pc.list_flatten(a.column("vector")).to_numpy()
    vb = pc.list_flatten(b.column("vector")).to_numpy()
    assert np.allclose(va, vb, atol=1e-5)
