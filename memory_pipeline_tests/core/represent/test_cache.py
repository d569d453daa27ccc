"""ContentCache and the cached_embed / cached_summarize helpers (no network)."""

from __future__ import annotations

import multiprocessing
import pickle
import sqlite3
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from memory_pipeline.core.common.ids import text_hash
from memory_pipeline.core.represent.cache import (
    ContentCache,
    cached_embed,
    cached_summarize,
    key_for,
)
from memory_pipeline.core.represent.providers import (
    EmbedResult,
    OpenAICompatibleSummarizer,
    OpenAIEmbedder,
    VoyageEmbedder,
    l2_normalize,
)
from memory_pipeline.core.represent.providers.retry import ProviderHTTPError
from memory_pipeline_tests.fake_servers import (
    FakeProviderServer,
    block_external_network,
    fake_vector,
)


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    block_external_network(monkeypatch)


@pytest.fixture
def cache(tmp_path: Path):
    with ContentCache(tmp_path / "cache.sqlite") as c:
        yield c


@pytest.fixture
def server():
    with FakeProviderServer() as srv:
        yield srv


class CountingEmbedder:
    """In-memory embedder recording every text it was asked for; "BAD" texts are rejected."""

    provider = "fake"
    model = "fake-8"
    dim = 8
    params: dict = {"v": 1}
    max_batch = 3
    remote = False

    def __init__(self, fail_after_calls: int | None = None) -> None:
        self.calls = 0
        self.sent: list[str] = []
        self.fail_after_calls = fail_after_calls

    def embed(self, texts: list[str], input_type: str = "document") -> EmbedResult:
        if self.fail_after_calls is not None and self.calls >= self.fail_after_calls:
            raise ProviderHTTPError(503, message="provider down")
        self.calls += 1
        self.sent.extend(texts)
        vectors = l2_normalize(np.stack([fake_vector(t, self.dim) for t in texts]))
        errors = ["rejected" if "BAD" in t else None for t in texts]
        vectors[[i for i, e in enumerate(errors) if e]] = 0
        return EmbedResult(vectors, [len(t) > 20 for t in texts], errors)


def test_key_for_is_canonical() -> None:
    a = key_for("openai", "m", {"dimensions": 256, "truncate": "x"})
    b = key_for("openai", "m", {"truncate": "x", "dimensions": 256})
    assert a == b and a.startswith("openai/m/")
    assert key_for("openai", "m", {"dimensions": 512, "truncate": "x"}) != a
    assert key_for("voyage", "m", {"dimensions": 256, "truncate": "x"}) != a


def test_vectors_and_texts_roundtrip(cache: ContentCache) -> None:
    key = cache.key_for("p", "m", {"a": 1})
    vecs = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    assert cache.put_vectors(key, ["h1", "h2", "h3"], vecs, [False, True, False]) == 3
    got = cache.get_vectors(key, ["h3", "h1", "missing"])
    assert set(got) == {"h1", "h3"}
    np.testing.assert_array_equal(got["h3"], vecs[2])
    assert got["h1"].dtype == np.float32
    assert cache.get_vector_entries(key, ["h2"])["h2"][1] is True
    assert cache.get_vectors(cache.key_for("p", "m", {"a": 2}), ["h1"]) == {}

    tkey = cache.key_for("llm", "g", {})
    cache.put_texts(tkey, {"x": "要約です", "y": "summary"})
    assert cache.get_texts(tkey, ["x", "y", "z"]) == {"x": "要約です", "y": "summary"}
    cache.put_json(tkey, {"j": {"k": [1, 2]}})
    assert cache.get_json(tkey, ["j"]) == {"j": {"k": [1, 2]}}
    assert cache.get_texts(tkey, ["j"]) == {}  # kinds do not mix

    stats = {(s["provider"], s["kind"]): s["entries"] for s in cache.stats()}
    assert stats == {("llm", "json"): 1, ("llm", "text"): 2, ("p", "vector"): 3}
    table = cache.export_table()
    assert table.num_rows == 6
    assert table.schema.field("created_at").type == pa.timestamp("ms", tz="UTC")
    assert table.column_names == [
        "provider",
        "model",
        "params",
        "text_hash",
        "kind",
        "dim",
        "created_at",
    ]
    assert set(table.column("params").to_pylist()) == {'{"a":1}', "{}"}

    clone = pickle.loads(pickle.dumps(cache))  # resources may be pickled into run workers
    np.testing.assert_array_equal(clone.get_vectors(key, ["h1"])["h1"], vecs[0])
    clone.close()
    assert sqlite3.connect(cache.path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_cached_embed_second_call_is_free_and_dedupes(cache: ContentCache) -> None:
    emb = CountingEmbedder()
    texts = ["a", "b", "a", "c", "d", "b", "a long text over twenty chars"]
    vecs, hits, truncated, errors = cached_embed(cache, emb, texts)
    assert emb.sent == ["a", "b", "c", "d", "a long text over twenty chars"]
    assert emb.calls == 2  # 5 unique texts in batches of max_batch=3
    assert not hits.any() and errors == [None] * 7
    assert truncated == [False] * 6 + [True]
    np.testing.assert_array_equal(vecs[0], vecs[2])

    again = cached_embed(cache, emb, texts)
    assert emb.calls == 2 and again.hit_mask.all()
    np.testing.assert_array_equal(again.vectors, vecs)
    assert again.truncated == truncated

    cached_embed(cache, emb, ["a", "new"])
    assert emb.sent[-1:] == ["new"] and emb.calls == 3


def test_cached_embed_errors_are_not_cached(cache: ContentCache) -> None:
    emb = CountingEmbedder()
    res = cached_embed(cache, emb, ["ok1", "BAD one", "ok2"])
    assert res.errors[1] and res.errors[0] is None and not res.vectors[1].any()
    emb.sent.clear()
    res = cached_embed(cache, emb, ["ok1", "BAD one", "ok2"])
    assert emb.sent == ["BAD one"]  # only the failed text is retried
    assert list(res.hit_mask) == [True, False, True]


def test_cached_embed_resumes_after_failure_halfway(cache: ContentCache) -> None:
    texts = [f"text {i}" for i in range(10)]
    failing = CountingEmbedder(fail_after_calls=2)
    with pytest.raises(ProviderHTTPError):
        cached_embed(cache, failing, texts)
    assert failing.sent == texts[:6]  # two batches of 3 were done and stored
    resumed = CountingEmbedder()
    res = cached_embed(cache, resumed, texts)
    assert resumed.sent == texts[6:]
    assert list(res.hit_mask) == [True] * 6 + [False] * 4


def test_cached_embed_with_openai_resumes_only_the_rest(cache: ContentCache, server) -> None:
    sleeps: list[float] = []
    emb = OpenAIEmbedder(
        api_key="k", base_url=server.openai_base_url, sleep=sleeps.append, max_attempts=3
    )
    texts = [f"chunk {i}" for i in range(2100)]
    server.fail_next(500, times=3, after=1)  # first request fine, the second never succeeds
    with pytest.raises(Exception, match="500"):
        cached_embed(cache, emb, texts)
    assert len(sleeps) == 2
    key = cache.key_for(emb.provider, emb.model, emb.params)
    assert len(cache.get_vectors(key, [text_hash(t) for t in texts])) == 2048  # kept
    server.reset()
    res = cached_embed(cache, emb, texts)
    assert server.sent_inputs() == texts[2048:]
    assert res.hit_mask.sum() == 2048 and all(e is None for e in res.errors)
    np.testing.assert_allclose(np.linalg.norm(res.vectors, axis=1), 1.0, atol=1e-5)
    server.reset()
    assert cached_embed(cache, emb, texts).hit_mask.all() and server.requests == []


def test_input_type_is_keyed_only_where_it_matters(cache: ContentCache, server) -> None:
    oa = OpenAIEmbedder(api_key="k", base_url=server.openai_base_url)
    cached_embed(cache, oa, ["q"], "document")
    assert cached_embed(cache, oa, ["q"], "query").hit_mask.all()
    vo = VoyageEmbedder(api_key="k", base_url=server.voyage_base_url)
    cached_embed(cache, vo, ["q"], "document")
    assert not cached_embed(cache, vo, ["q"], "query").hit_mask.any()


def test_cached_summarize(cache: ContentCache, server) -> None:
    summ = OpenAICompatibleSummarizer("gpt-test", api_key="k", base_url=server.openai_base_url)
    server.reject_inputs_containing("BADINPUT")
    items = [
        ("太郎: 明日会おう", "ja"),
        ("Alice: hi", "en"),
        ("BADINPUT", "en"),
        ("Alice: hi", "en"),
    ]
    out, hits, errors = cached_summarize(cache, summ, items)
    assert summ.calls == 3 and not hits.any()
    assert out[1] == out[3] and out[0].startswith("summary-") and out[2] is None
    assert errors[2] and "400" in errors[2]
    again = cached_summarize(cache, summ, items, workers=2)
    assert summ.calls == 4  # only the rejected item is tried again
    assert list(again.hit_mask) == [True, True, False, True] and again.summaries[:2] == out[:2]
    # the language is part of the key: the same text in another language is a new summary
    cached_summarize(cache, summ, [("Alice: hi", "ja")])
    assert summ.calls == 5


def _writer(path: str, worker: int, n: int) -> None:
    """Child process: write overlapping and private vectors in many small transactions."""
    cache = ContentCache(Path(path))
    key = cache.key_for("proc", "m", {"shared": True})
    for start in range(0, n, 25):
        ids = range(start, min(n, start + 25))
        shared = [f"shared-{i}" for i in ids]
        own = [f"w{worker}-{i}" for i in ids]
        hashes = shared + own
        vecs = np.stack([fake_vector(h, 16) for h in hashes])
        cache.put_vectors(key, hashes, vecs)
        assert len(cache.get_vectors(key, shared)) == len(shared)
    cache.close()


def test_two_processes_share_one_cache(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    ContentCache(path).close()
    ctx = multiprocessing.get_context("spawn")  # fork is unsafe once torch threads exist
    procs = [ctx.Process(target=_writer, args=(str(path), w, 400)) for w in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
    assert [p.exitcode for p in procs] == [0, 0]
    with ContentCache(path) as cache:
        conn = sqlite3.connect(path)
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.close()
        key = key_for("proc", "m", {"shared": True})
        names = [f"shared-{i}" for i in range(400)] + [
            f"w{w}-{i}" for w in (0, 1) for i in range(400)
        ]
        got = cache.get_vectors(key, names)
        assert len(got) == 1200
        for name in names[::37]:
            np.testing.assert_array_equal(got[name], fake_vector(name, 16))
        assert {s["entries"] for s in cache.stats() if s["provider"] == "proc"} == {1200}
