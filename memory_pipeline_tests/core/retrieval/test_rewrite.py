"""The optional LLM query rewrite against a local fake OpenAI-compatible server: redacted
before sending, cached by content, falling back to the rules on failure; and its resource
(off by default, the key an EnvVar)."""

from __future__ import annotations

import dagster as dg
import pytest

from memory_pipeline.core.represent.cache import ContentCache
from memory_pipeline.core.represent.providers import OpenAICompatibleLlm
from memory_pipeline.core.retrieval.rewrite import REWRITE_SYSTEM, LlmQueryRewriter
from memory_pipeline.defs.providers import QueryRewriterResource, query_rewriter_resource
from memory_pipeline_tests.fake_servers import FakeProviderServer, block_external_network


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    block_external_network(monkeypatch)


@pytest.fixture
def server():
    with FakeProviderServer() as srv:
        yield srv


def _llm(server: FakeProviderServer) -> OpenAICompatibleLlm:
    return OpenAICompatibleLlm(
        "gpt-test", api_key="k", base_url=server.openai_base_url, max_attempts=1
    )


RECENT = [
    {"text": "Mail me at hanako@example.com about the Kyoto trip", "sender": "Hanako"},
    "call 090-1234-5678 tonight",
]


def test_rewrite_is_redacted_and_cached(server: FakeProviderServer, tmp_path) -> None:
    server.script_chat("When is the Kyoto trip?")
    cache = ContentCache(tmp_path / "cache.sqlite")
    rewriter = LlmQueryRewriter(_llm(server), cache=cache)
    text, notes = rewriter.rewrite("When is that?", RECENT)
    assert text == "When is the Kyoto trip?"
    assert notes == ["query rewritten by openai/gpt-test"]
    (request,) = server.chat_requests()
    system, user = request.body["messages"]
    assert system["content"] == REWRITE_SYSTEM
    sent = user["content"]
    assert "hanako@example.com" not in sent and "090-1234-5678" not in sent
    assert "[EMAIL]" in sent and "[PHONE]" in sent and "Question: When is that?" in sent
    # the same request again: answered from the cache, no second call
    again = LlmQueryRewriter(_llm(server), cache=cache)
    assert again.rewrite("When is that?", RECENT)[0] == "When is the Kyoto trip?"
    assert again.cache_hits == 1 and len(server.chat_requests()) == 1
    cache.close()


def test_a_failed_rewrite_falls_back_to_the_rules(server: FakeProviderServer) -> None:
    server.fail_next(500)
    rewriter = LlmQueryRewriter(_llm(server))
    text, notes = rewriter.rewrite("When is that?", ["about the Kyoto trip"])
    assert text == "When is Kyoto trip?"
    assert notes[0].startswith("LLM rewrite failed (") and "rules used" in notes[0]


def test_no_recent_no_call(server: FakeProviderServer) -> None:
    assert LlmQueryRewriter(_llm(server)).rewrite("When is that?", []) == ("When is that?", [])
    assert server.chat_requests() == []


def test_the_resource_is_off_by_default_and_takes_its_key_from_the_environment() -> None:
    assert query_rewriter_resource(env={}).build() is None
    on = query_rewriter_resource(env={"MEMORY_PIPELINE_QUERY_REWRITER": "openai"})
    assert isinstance(on.api_key, dg.EnvVar) and on.api_key.env_var_name == "OPENAI_API_KEY"
    with pytest.raises(dg.Failure, match="needs an API key"):
        QueryRewriterResource(provider="openai").build()
    with pytest.raises(dg.Failure, match="unknown query rewriter"):
        QueryRewriterResource(provider="magic").build()
    built = QueryRewriterResource(provider="openai", api_key="k", model="m").build()
    assert isinstance(built, LlmQueryRewriter) and built.redact_text
