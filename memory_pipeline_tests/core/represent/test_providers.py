"""Providers against a local fake API through the real openai / voyageai clients (no network)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import numpy as np
import openai
import pytest
import voyageai.error

from memory_pipeline.core.represent.providers import (
    EstimateTokenCounter,
    LocalEmbedder,
    OpenAICompatibleLlm,
    OpenAICompatibleSummarizer,
    OpenAIEmbedder,
    ProviderHTTPError,
    VoyageEmbedder,
    call_with_retries,
    is_retryable,
    retry_after_seconds,
)
from memory_pipeline.core.represent.providers.base import Embedder, Llm, Summarizer, pack_batches
from memory_pipeline_tests.fake_servers import (
    FakeProviderServer,
    block_external_network,
    fake_vector,
)


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    block_external_network(monkeypatch)


@pytest.fixture
def server():
    with FakeProviderServer() as srv:
        yield srv


@pytest.fixture
def sleeps() -> list[float]:
    return []


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def assert_unit_rows(vectors: np.ndarray) -> None:
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


# --------------------------------------------------------------------------- retry policy


class Flaky:
    """Raises the given exceptions in order, then returns "ok"."""

    def __init__(self, *excs: BaseException) -> None:
        self.excs = list(excs)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.excs:
            raise self.excs.pop(0)
        return "ok"


def test_retry_after_seconds_is_honoured() -> None:
    sleeps: list[float] = []
    seen: list[tuple[int, float]] = []
    fn = Flaky(ProviderHTTPError(429, {"Retry-After": "2"}))
    out = call_with_retries(fn, sleep=sleeps.append, on_retry=lambda n, exc, d: seen.append((n, d)))
    assert out == "ok" and fn.calls == 2
    assert sleeps == [2.0] and seen == [(1, 2.0)]


def test_retry_after_http_date_and_cap() -> None:
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    date = format_datetime(now + timedelta(seconds=7), usegmt=True)
    assert retry_after_seconds({"retry-after": date}, now=now) == pytest.approx(7.0)
    assert retry_after_seconds({"retry-after-ms": "1500"}) == pytest.approx(1.5)
    assert retry_after_seconds({"retry-after": "garbage"}) is None
    assert retry_after_seconds(None) is None
    sleeps: list[float] = []
    call_with_retries(
        Flaky(ProviderHTTPError(503, {"Retry-After": "3600"})), sleep=sleeps.append, max_delay=30
    )
    assert sleeps == [30]


def test_backoff_is_exponential_capped_and_deterministic_with_seed() -> None:
    def run(seed: int) -> list[float]:
        sleeps: list[float] = []
        fn = Flaky(*[ProviderHTTPError(500) for _ in range(5)])
        call_with_retries(
            fn, sleep=sleeps.append, base_delay=1.0, max_delay=4.0, rng=random.Random(seed)
        )
        return sleeps

    a, b = run(7), run(7)
    assert a == b and len(a) == 5
    for attempt, delay in enumerate(a, start=1):
        ceiling = min(4.0, 2.0 ** (attempt - 1))
        assert ceiling / 2 <= delay <= ceiling
    assert run(8) != a


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
def test_permanent_errors_are_not_retried(status: int) -> None:
    fn = Flaky(ProviderHTTPError(status))
    with pytest.raises(ProviderHTTPError):
        call_with_retries(fn, sleep=lambda s: None)
    assert fn.calls == 1


def test_transient_errors_give_up_after_max_attempts() -> None:
    fn = Flaky(*[ProviderHTTPError(503) for _ in range(10)])
    with pytest.raises(ProviderHTTPError):
        call_with_retries(fn, max_attempts=3, sleep=lambda s: None)
    assert fn.calls == 3
    fn = Flaky(ConnectionResetError("reset"), TimeoutError("slow"))
    assert call_with_retries(fn, sleep=lambda s: None) == "ok" and fn.calls == 3
    fn = Flaky(ValueError("bug"))
    with pytest.raises(ValueError):
        call_with_retries(fn, sleep=lambda s: None)
    assert fn.calls == 1


def test_sdk_exception_classification() -> None:
    limited = voyageai.error.RateLimitError("slow down", http_status=429, headers={"x": "1"})
    assert is_retryable(limited)
    assert is_retryable(voyageai.error.ServerError("boom", http_status=500))
    assert is_retryable(voyageai.error.APIConnectionError("down"))
    assert not is_retryable(voyageai.error.InvalidRequestError("bad", http_status=400))
    assert not is_retryable(voyageai.error.AuthenticationError("no key"))  # no status: permanent


def test_pack_batches_respects_items_and_totals() -> None:
    assert pack_batches([1] * 5, max_items=2) == [[0, 1], [2, 3], [4]]
    assert pack_batches([5, 5, 5, 20, 1], max_items=10, max_total=10) == [[0, 1], [2], [3], [4]]


def test_estimate_token_counter_is_pessimistic_and_truncates() -> None:
    c = EstimateTokenCounter()
    assert c.count("") == 0
    assert c.count("abc def ghi") == 4  # 11 letters/spaces / 3
    assert c.count("日本語") == 5  # 9 UTF-8 bytes / 2
    cut = c.truncate("word " * 100, 30)
    assert c.count(cut) <= 30 and c.count(cut + "word ") > 30


# --------------------------------------------------------------------------- OpenAI


def test_openai_embeddings_roundtrip(server: FakeProviderServer) -> None:
    emb = OpenAIEmbedder(api_key="test-key", base_url=server.openai_base_url)
    assert isinstance(emb, Embedder) and emb.dim == 1536 and emb.remote
    texts = ["hello", "world", "こんにちは"]
    res = emb.embed(texts)
    assert res.vectors.shape == (3, 1536) and res.errors == [None] * 3
    assert res.truncated == [False] * 3
    assert_unit_rows(res.vectors)
    for row, text in zip(res.vectors, texts, strict=True):
        np.testing.assert_allclose(row, _unit(fake_vector(text, 1536)), rtol=1e-5, atol=1e-6)
    (req,) = server.embedding_requests("openai")
    assert req.body["input"] == texts and req.body["model"] == "text-embedding-3-small"
    assert req.body["encoding_format"] == "base64"
    assert req.headers["authorization"] == "Bearer test-key"
    assert emb.calls == 1


def test_openai_dimensions_and_float_encoding(server: FakeProviderServer) -> None:
    emb = OpenAIEmbedder(dimensions=256, api_key="k", base_url=server.openai_base_url)
    res = emb.embed(["a"])
    assert res.vectors.shape == (1, 256) and emb.params["dimensions"] == 256
    assert server.embedding_requests()[-1].body["dimensions"] == 256
    # The fake also answers plain float lists, as when a caller asks for them explicitly.
    client = openai.OpenAI(api_key="k", base_url=server.openai_base_url, max_retries=0)
    resp = client.embeddings.create(input="a", model="m", dimensions=8, encoding_format="float")
    np.testing.assert_allclose(resp.data[0].embedding, fake_vector("a", 8), rtol=1e-6)


def test_openai_429_retry_after_is_honoured(server: FakeProviderServer, sleeps) -> None:
    server.fail_next(429, retry_after="1")
    emb = OpenAIEmbedder(api_key="k", base_url=server.openai_base_url, sleep=sleeps.append)
    res = emb.embed(["x", "y"])
    assert res.errors == [None, None]
    assert sleeps == [1.0]  # the server's Retry-After, not our backoff
    assert [r.status for r in server.requests] == [429, 200]  # the SDK did not retry itself
    assert emb.calls == 2


def test_openai_500_is_retried_with_backoff(server: FakeProviderServer, sleeps) -> None:
    server.fail_next(500, times=2)
    emb = OpenAIEmbedder(
        api_key="k", base_url=server.openai_base_url, sleep=sleeps.append, base_delay=0.5
    )
    assert emb.embed(["x"]).errors == [None]
    assert len(sleeps) == 2 and 0.25 <= sleeps[0] <= 0.5 and 0.5 <= sleeps[1] <= 1.0
    assert [r.status for r in server.requests] == [500, 500, 200]


def test_openai_auth_error_fails_fast(server: FakeProviderServer, sleeps) -> None:
    server.fail_next(401)
    emb = OpenAIEmbedder(api_key="k", base_url=server.openai_base_url, sleep=sleeps.append)
    with pytest.raises(openai.AuthenticationError):
        emb.embed(["x", "y"])
    assert len(server.requests) == 1 and sleeps == []


def test_openai_bad_input_is_isolated(server: FakeProviderServer) -> None:
    server.reject_inputs_containing("BADINPUT")
    emb = OpenAIEmbedder(api_key="k", base_url=server.openai_base_url)
    texts = [f"text {i}" for i in range(16)]
    texts[5] = "some BADINPUT here"
    res = emb.embed(texts)
    assert [i for i, e in enumerate(res.errors) if e] == [5]
    assert "400" in res.errors[5]
    assert not res.vectors[5].any()
    good = np.delete(res.vectors, 5, axis=0)
    assert_unit_rows(good)
    assert len(server.requests) <= 1 + 2 * 4  # bisection: two requests per level, log2(16)
    assert sorted(server.sent_inputs()) == sorted(t for t in texts if "BAD" not in t)


def test_openai_request_limits(server: FakeProviderServer) -> None:
    emb = OpenAIEmbedder(api_key="k", base_url=server.openai_base_url)
    res = emb.embed([f"t{i}" for i in range(2100)])
    assert res.vectors.shape == (2100, 1536) and all(e is None for e in res.errors)
    assert [len(r.inputs) for r in server.embedding_requests()] == [2048, 52]

    server.reset()
    counter = EstimateTokenCounter()
    big = ["x" * 23_700 + str(i) for i in range(40)]  # ~7,900 estimated tokens each
    assert all(7_800 < counter.count(t) <= 8_192 for t in big)
    res = emb.embed(big)
    assert all(e is None for e in res.errors) and not any(res.truncated)
    reqs = server.embedding_requests()
    assert len(reqs) == 2
    assert all(sum(counter.count(t) for t in r.inputs) <= 300_000 for r in reqs)


def test_openai_overlong_input_is_truncated_and_flagged(server: FakeProviderServer) -> None:
    emb = OpenAIEmbedder(api_key="k", base_url=server.openai_base_url)
    counter = emb.token_counter
    long_text = "abc " * 6_750  # 27,000 characters: ~9,000 tokens by our count
    assert counter.count(long_text) > 8_192
    res = emb.embed(["short", long_text, ""])
    assert res.truncated == [False, True, False]
    assert res.errors[:2] == [None, None] and res.errors[2]  # empty text: error, not sent
    (req,) = server.embedding_requests()
    sent = req.inputs[1]
    assert long_text.startswith(sent) and counter.count(sent) <= 8_192 and len(req.inputs) == 2


# --------------------------------------------------------------------------- Voyage


def test_voyage_embeddings_roundtrip(server: FakeProviderServer) -> None:
    emb = VoyageEmbedder(api_key="vk", base_url=server.voyage_base_url)
    assert emb.dim == 1024 and emb.max_request_tokens == 320_000
    docs = emb.embed(["alpha", "beta"], input_type="document")
    query = emb.embed(["alpha"], input_type="query")
    assert_unit_rows(docs.vectors) and docs.vectors.shape == (2, 1024)
    np.testing.assert_allclose(docs.vectors[0], _unit(fake_vector("alpha", 1024)), atol=1e-6)
    np.testing.assert_allclose(query.vectors[0], docs.vectors[0], atol=1e-6)
    r1, r2 = server.embedding_requests("voyage")
    assert r1.path == "/v1/embeddings" and r1.headers["authorization"] == "Bearer vk"
    assert r1.body["input_type"] == "document" and r2.body["input_type"] == "query"
    assert r1.body["truncation"] is True and r1.body["model"] == "voyage-3.5"
    assert emb.key_params("query") != emb.key_params("document")
    lite = VoyageEmbedder("voyage-3.5-lite", api_key="vk", base_url=server.voyage_base_url)
    assert lite.max_request_tokens == 1_000_000 and lite.dim == 1024


def test_voyage_retries_are_ours(server: FakeProviderServer, sleeps) -> None:
    emb = VoyageEmbedder(api_key="vk", base_url=server.voyage_base_url, sleep=sleeps.append)
    server.fail_next(429, retry_after="2")
    server.fail_next(500)
    server.fail_next(503, retry_after="1")
    res = emb.embed(["a", "b"])
    assert res.errors == [None, None]
    assert [r.status for r in server.requests] == [429, 500, 503, 200]
    assert sleeps[0] == 2.0 and sleeps[2] == 1.0 and 0.5 <= sleeps[1] <= 1.0
    assert emb.calls == 4


def test_voyage_bad_input_and_limits(server: FakeProviderServer) -> None:
    server.reject_inputs_containing("BADINPUT")
    emb = VoyageEmbedder(api_key="vk", base_url=server.voyage_base_url)
    texts = [f"doc {i}" for i in range(1500)]
    texts[1200] = "BADINPUT doc"
    res = emb.embed(texts)
    assert [i for i, e in enumerate(res.errors) if e] == [1200]
    ok = [r for r in server.embedding_requests() if r.status == 200]
    assert max(len(r.inputs) for r in server.embedding_requests()) <= 1000
    assert sum(len(r.inputs) for r in ok) == 1499
    # Voyage truncates server-side: the long text is sent whole and only flagged.
    server.reset()
    long_text = "word " * 20_000  # 100,000 chars: over 32k tokens by our count
    res = emb.embed(["short", long_text])
    assert res.truncated == [False, True]
    assert server.embedding_requests()[0].inputs[1] == long_text


# --------------------------------------------------------------------------- chat models


def test_summarizer_prompts_and_input_cut(server: FakeProviderServer) -> None:
    summ = OpenAICompatibleSummarizer("gpt-test", api_key="k", base_url=server.openai_base_url)
    assert isinstance(summ, Summarizer)
    raw = "あ" * 7000 + "TAIL"
    out = summ.summarize(raw, "ja")
    assert out.startswith("summary-")
    (req,) = server.chat_requests()
    body = req.body
    assert body["model"] == "gpt-test" and body["temperature"] == 0.0
    system, user = body["messages"]
    assert system["role"] == "system" and user["role"] == "user"
    assert "200〜500文字" in user["content"] and "推測" in user["content"]
    assert "あ" * 7000 in user["content"] and "TAIL" not in user["content"]
    assert summ.summarize(raw, "ja") == out  # deterministic

    summ.summarize("Alice: see you Friday", "en")
    en_user = server.chat_requests()[-1].body["messages"][1]["content"]
    assert "60-120 words" in en_user and "Alice: see you Friday" in en_user
    summ.summarize("Bob: hi", "fr")  # unknown language: English prompt
    assert "60-120 words" in server.chat_requests()[-1].body["messages"][1]["content"]
    assert summ.calls == 4


def test_llm_complete_retries(server: FakeProviderServer, sleeps) -> None:
    llm = OpenAICompatibleLlm(
        "gpt-test", api_key="k", base_url=server.openai_base_url, sleep=sleeps.append
    )
    assert isinstance(llm, Llm)
    server.fail_next(429, retry_after="1", path="/chat/completions")
    out = llm.complete("You are terse.", "Say hi")
    assert out.startswith("summary-") and sleeps == [1.0] and llm.calls == 2


# --------------------------------------------------------------------------- local model


def test_local_model_offline() -> None:
    from memory_pipeline.core.represent.providers.factory import MissingExtra, require_minilm
    from memory_pipeline_tests._env import require_or_skip

    try:
        require_minilm("all-MiniLM-L6-v2")
        installed = True
    except MissingExtra:
        installed = False
    require_or_skip(installed, "the minilm extra is not installed")
    emb = LocalEmbedder()
    assert not emb.remote and emb.dim == 384
    texts = [
        "The cat sat on the mat.",
        "A cat is sitting on a rug.",
        "Quarterly revenue rose by ten percent.",
        "lorem " * 400,
    ]
    res = emb.embed(texts)
    assert res.vectors.shape == (4, 384)
    assert_unit_rows(res.vectors)
    assert res.truncated == [False, False, False, True]
    sims = res.vectors @ res.vectors.T
    assert sims[0, 1] > sims[0, 2] + 0.2
    # one model per process: a second embedder reuses the loaded weights
    other = LocalEmbedder()
    other.embed(["x"])
    assert other._st is emb._st
    np.testing.assert_allclose(other.embed(texts[:1]).vectors, res.vectors[:1], atol=1e-5)


def test_fake_server_leaves_no_threads() -> None:
    import threading

    before = set(threading.enumerate())
    with FakeProviderServer() as srv:
        OpenAIEmbedder(api_key="k", base_url=srv.openai_base_url).embed(["a"])
        assert len(srv.requests) == 1
    assert set(threading.enumerate()) <= before
