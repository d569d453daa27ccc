"""The LLM memory extractor against a local OpenAI-wire fake (no network)."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from memory_pipeline.core.memories.extract import (
    R_EXTRACTOR_ERROR,
    R_UNKNOWN_MESSAGE,
    extract_memories,
)
from memory_pipeline.core.memories.llm import LlmMemoryExtractor
from memory_pipeline.core.represent.providers import OpenAICompatibleLlm
from memory_pipeline.core.sessions.sessionize import sessionize
from memory_pipeline_tests.factories import msg, table
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
        "gpt-test",
        api_key="test-key",
        base_url=server.openai_base_url,
        provider="openai",
        max_attempts=1,
    )


def _chat():
    messages = table(
        msg("2024-03-04 21:10", "引っ越しの日決まった！3月20日", "B", order=0),
        msg("2024-03-04 21:11", "高円寺から武蔵小杉だっけ？", "A", order=1),
        msg("2024-03-04 21:12", "そう。会社に近くなる", "B", order=2),
        msg("2024-03-04 21:13", "[スタンプ]", "A", order=3, type_="sticker"),
    )
    return messages, sessionize(messages, 180)


def _memory(text: str, indexes: list, **kw) -> dict:
    return {
        "subject": kw.get("subject", "B"),
        "kind": kw.get("kind", "plan"),
        "attribute": kw.get("attribute", "residence"),
        "value": kw.get("value", "武蔵小杉"),
        "text": text,
        "event_date": kw.get("event_date", "2024-03-20"),
        "message_indexes": indexes,
    }


def test_structured_request_and_index_mapping(server: FakeProviderServer) -> None:
    messages, sessions = _chat()
    answer = {
        "memories": [
            _memory("B: 3月20日に高円寺から武蔵小杉へ引っ越す", [0, 1, 2]),
            _memory("B: hallucinated source", [0, 99], kind="fact", attribute=""),
        ]
    }
    server.script_chat(json.dumps(answer, ensure_ascii=False))
    extractor = LlmMemoryExtractor(_llm(server))
    mem, rej = extract_memories(sessions, messages, extractor=extractor)

    (request,) = server.chat_requests()
    body = request.body
    assert body["model"] == "gpt-test" and body["temperature"] == 0
    assert body["response_format"]["type"] == "json_schema"
    user = body["messages"][-1]["content"]
    assert "[0] 2024-03-04 21:10 B: 引っ越しの日決まった！3月20日" in user
    assert "[3]" not in user  # the sticker is not sent

    ids = messages.column("message_id").to_pylist()
    assert mem.num_rows == 1
    row = mem.to_pylist()[0]
    assert row["method"] == "openai/gpt-test"
    assert row["message_ids"] == ids[:3]
    assert row["event_date"] == dt.date(2024, 3, 20)
    assert row["attribute"] == "residence" and row["value"] == "武蔵小杉"
    assert row["subject_is_owner"] is False  # B is not the owner ("A" is, in the factories)
    # valid_from is the latest cited message's time, never the model's
    assert row["valid_from"] == dt.datetime(2024, 3, 4, 12, 12, tzinfo=dt.UTC)

    # the memory citing a message index the session does not have is quarantined
    assert rej.num_rows == 1
    bad = rej.to_pylist()[0]
    assert bad["reason"] == R_UNKNOWN_MESSAGE and bad["text"] == "B: hallucinated source"
    assert bad["message_ids"][0] == ids[0] and bad["method"] == "openai/gpt-test"


def test_no_index_means_no_source(server: FakeProviderServer) -> None:
    messages, sessions = _chat()
    server.script_chat(json.dumps({"memories": [_memory("B moves", [])]}))
    mem, rej = extract_memories(sessions, messages, extractor=LlmMemoryExtractor(_llm(server)))
    assert mem.num_rows == 0
    assert rej.column("reason").to_pylist() == ["no_source"]


@pytest.mark.parametrize("content", ['{"memories": [', '{"facts": []}', "not json at all"])
def test_malformed_answer_is_an_error_not_a_crash(server: FakeProviderServer, content: str) -> None:
    messages, sessions = _chat()
    server.script_chat(content)
    extractor = LlmMemoryExtractor(_llm(server))
    mem, rej = extract_memories(sessions, messages, extractor=extractor)
    assert mem.num_rows == 0
    assert rej.num_rows == 1
    assert rej.column("reason")[0].as_py().startswith(R_EXTRACTOR_ERROR)
    assert (
        len(extractor.errors) == 1 and extractor.errors[0][0] == sessions["session_id"][0].as_py()
    )


def test_provider_failure_is_recorded(server: FakeProviderServer) -> None:
    messages, sessions = _chat()
    server.fail_next(500, path="/chat/completions")
    extractor = LlmMemoryExtractor(_llm(server))
    mem, rej = extract_memories(sessions, messages, extractor=extractor)
    assert mem.num_rows == 0 and len(server.chat_requests()) == 1
    assert rej.column("reason")[0].as_py().startswith(R_EXTRACTOR_ERROR)


def test_answers_are_cached_by_content_and_text_is_redacted(server: FakeProviderServer, tmp_path):
    from memory_pipeline.core.represent.cache import ContentCache

    messages = table(
        msg("2024-03-04 21:10", "I moved to Osaka, mail me at ken@example.com", "B", order=0),
        msg("2024-03-04 21:11", "nice!", "A", order=1),
    )
    sessions = sessionize(messages, 180)
    answer = {"memories": [_memory("B moved to Osaka", [0], kind="fact", value="Osaka")]}
    server.script_chat(json.dumps(answer))
    with ContentCache(tmp_path / "cache.sqlite") as cache:
        first = LlmMemoryExtractor(_llm(server), cache=cache)
        mem1, _ = extract_memories(sessions, messages, extractor=first)
        second = LlmMemoryExtractor(_llm(server), cache=cache)
        mem2, _ = extract_memories(sessions, messages, extractor=second)
    (request,) = server.chat_requests()  # the second run made no call
    assert "ken@example.com" not in request.body["messages"][-1]["content"]
    assert first.llm.calls == 1 and second.llm.calls == 0 and second.cache_hits == 1
    assert mem1 == mem2 and mem1.num_rows == 1
