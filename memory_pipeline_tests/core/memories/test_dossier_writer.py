"""The LLM dossier writer against the local OpenAI-wire fake: accepted and rejected rewrites,
provider failure, redaction and the content cache (no network)."""

from __future__ import annotations

import datetime as dt

import pytest

from memory_pipeline.core.memories.dossier import SECTIONS, cited_sessions, render_markdown
from memory_pipeline.core.memories.llm import DossierSession, LlmDossierWriter
from memory_pipeline.core.represent.cache import ContentCache
from memory_pipeline.core.represent.providers import OpenAICompatibleLlm
from memory_pipeline_tests.core.memories.test_dossier import Sample, fold, version
from memory_pipeline_tests.fake_servers import FakeProviderServer, block_external_network

D = dt.date


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    block_external_network(monkeypatch)


@pytest.fixture
def server():
    with FakeProviderServer() as srv:
        yield srv


@pytest.fixture(scope="module")
def sample() -> Sample:
    return Sample()


@pytest.fixture(scope="module")
def pages(sample):
    states, versions = fold(sample)
    return {
        "previous": version(versions, "Maria", D(2024, 3, 12)),
        "rule": render_markdown(states["Maria"]),
        "maria": {s["session_id"] for s in sample.by_contact["Maria"]},
        "kenta": sample.by_contact["健太"][0]["session_id"],
        "today": sample.by_contact["Maria"][-1]["session_id"],
    }


def _writer(server: FakeProviderServer, cache: ContentCache | None = None) -> LlmDossierWriter:
    llm = OpenAICompatibleLlm(
        "gpt-test", api_key="k", base_url=server.openai_base_url, provider="openai", max_attempts=1
    )
    return LlmDossierWriter(llm, cache=cache)


def _rewrite(writer: LlmDossierWriter, pages: dict, **kw):
    sessions = [
        DossierSession(
            pages["today"],
            "2024-03-14",
            "Zepp Haneda",
            ("Decision: Maria: write to maria.k@example.com for the tickets",),
            ("Maria reminds Yuki to bring an ID",),
        )
    ]
    return writer.rewrite(
        contact_id="Maria",
        date="2024-03-14",
        rule_markdown=pages["rule"],
        previous_markdown=pages["previous"],
        sessions=sessions,
        allowed_sessions=pages["maria"],
        **kw,
    )


def test_an_accepted_rewrite_replaces_the_page_and_the_request_is_redacted(server, pages):
    reworded = pages["rule"].replace("- Messages:", "- In total, messages:")
    server.script_chat(reworded)
    writer = _writer(server)
    result = _rewrite(writer, pages)
    assert result.accepted and result.markdown == reworded and result.method == "openai/gpt-test"
    assert writer.accepted == 1 and writer.rejected == []
    (request,) = server.chat_requests()
    user = request.body["messages"][-1]["content"]
    assert pages["rule"].splitlines()[4] in user  # today's rule page is the input
    assert "Previous dossier:\n# Dossier: Maria\nLast Updated: 2024-03-12" in user
    assert "Maria reminds Yuki to bring an ID" in user and "Zepp Haneda" in user
    assert "maria.k@example.com" not in user  # redacted before sending
    assert request.body["temperature"] == 0


def _drop_first_citation(md: str) -> str:
    first = cited_sessions(md)[0]
    return "\n".join(ln for ln in md.splitlines() if first not in ln) + "\n"


@pytest.mark.parametrize(
    ("edit", "kinds"),
    [
        (_drop_first_citation, ("dropped citation",)),
        (lambda md: md.replace(f"## {SECTIONS[2]}\n", ""), ("missing section",)),
        (lambda md: md + "A closing remark with no citation.\n", ("uncited line",)),
    ],
)
def test_a_rewrite_that_fails_the_checks_keeps_the_rule_page(server, pages, edit, kinds):
    server.script_chat(edit(pages["rule"]))
    writer = _writer(server)
    result = _rewrite(writer, pages)
    assert not result.accepted and result.markdown == pages["rule"]
    assert result.method == "deterministic" and result.problems == kinds
    assert writer.rejected == [("Maria", "2024-03-14", kinds)]


def test_citing_another_contacts_session_is_refused(server, pages):
    foreign = pages["rule"] + f"- Kenta moves on the 20th [sessions: {pages['kenta']}]\n"
    server.script_chat(foreign)
    result = _rewrite(_writer(server), pages)
    assert not result.accepted and result.markdown == pages["rule"]
    assert result.problems == ("invented citation", "other contact's session")


def test_a_provider_failure_is_a_rejection_not_a_crash(server, pages):
    server.fail_next(500, times=1)
    result = _rewrite(_writer(server), pages)
    assert not result.accepted and result.markdown == pages["rule"]
    assert result.problems[0].startswith("provider error: ")


def test_answers_are_cached_by_content(server, pages, tmp_path):
    reworded = pages["rule"].replace("- Messages:", "- Overall, messages:")
    server.script_chat(reworded)
    with ContentCache(tmp_path / "cache.sqlite") as cache:
        first = _rewrite(_writer(server, cache), pages)
        again = _writer(server, cache)
        second = _rewrite(again, pages)
        assert first.accepted and second.accepted and second.markdown == reworded
        assert second.cached and again.cache_hits == 1
        assert len(server.chat_requests()) == 1
        # another input is another request
        server.script_chat(reworded)
        other = dict(pages, previous=pages["previous"].replace("2024-03-12", "2024-03-11"))
        assert _rewrite(again, other).accepted and len(server.chat_requests()) == 2
