"""An LLM memory extractor: structured output from any OpenAI-compatible chat endpoint.

The model sees a session's messages, each with a short numeric index, and answers JSON that
cites those indexes. Indexes are mapped back to message ids here; an index the session does
not have becomes an id that cannot resolve, so the shared source validation in
``memories.extract_memories`` quarantines that memory instead of storing a hallucinated
source. A malformed or failed answer yields no candidates and an ``error`` (the run goes on).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from typing import Any

from memory_pipeline.core.common.ids import text_hash
from memory_pipeline.core.common.redact import redact
from memory_pipeline.core.memories.extract import (
    KINDS,
    MAX_TEXT_CHARS,
    MemoryCandidate,
    SessionExtraction,
    SessionMessages,
)
from memory_pipeline.core.represent.cache import ContentCache
from memory_pipeline.core.represent.providers.llm import OpenAICompatibleLlm
from memory_pipeline.core.represent.providers.retry import call_with_retries

#: Placeholder id for a cited index outside the session (never a real message id).
UNKNOWN_INDEX_PREFIX = "unknown-index:"

SYSTEM_PROMPT = """\
You extract long-term memories about people from a chat session. A memory is one
self-contained statement that is explicitly stated in the chat: a fact (job, employer,
residence, school...), a preference, a plan or commitment (with its date if stated), an
event, a relationship, or a possession. Never guess or add anything not stated. Skip
questions, greetings and small talk. Write "text" in the language of the chat, at most one
sentence. "subject" is the name of the person the memory is about (a sender name when it is
about a sender). "attribute" is a short key for single-valued facts (residence, employer,
job_title, school, relationship_status, or a relation such as manager), otherwise "".
"event_date" is the date the plan or event is for (YYYY-MM-DD, resolved from the message
times shown), or null. "message_indexes" lists the [index] of every message it comes from."""

USER_TEMPLATE = """\
Messages (index, local time, sender: text):
{messages}

Answer with JSON only."""

MEMORY_JSON_SCHEMA: dict[str, Any] = {
    "name": "memories",
    "strict": True,
    "schema": {
        "type": "object",
        "additionalProperties": False,
        "required": ["memories"],
        "properties": {
            "memories": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": [
                        "subject",
                        "kind",
                        "attribute",
                        "value",
                        "text",
                        "event_date",
                        "message_indexes",
                    ],
                    "properties": {
                        "subject": {"type": "string"},
                        "kind": {"type": "string", "enum": list(KINDS)},
                        "attribute": {"type": "string"},
                        "value": {"type": "string"},
                        "text": {"type": "string"},
                        "event_date": {"type": ["string", "null"]},
                        "message_indexes": {"type": "array", "items": {"type": "integer"}},
                    },
                },
            }
        },
    },
}


def complete(llm: Any, messages: list[dict[str, str]], method: str, **extra: Any) -> str:
    """One chat completion at temperature 0 through ``llm`` (an OpenAICompatibleLlm), with
    its retry policy (attempts, backoff, sleep) and call count; an empty answer is an error
    (the memory extractor and the dossier writer both call it)."""
    kwargs: dict[str, Any] = {"temperature": 0, **extra}
    if llm.max_output_tokens:
        kwargs["max_tokens"] = llm.max_output_tokens

    def once() -> str:
        llm.calls += 1
        resp = llm.client.chat.completions.create(model=llm.model, messages=messages, **kwargs)
        content = resp.choices[0].message.content if resp.choices else None
        if not content:
            raise ValueError(f"{method} returned no content")
        return content

    return call_with_retries(once, **getattr(llm, "_retry", {}))


def format_session(session: SessionMessages, max_chars: int) -> str:
    """``[i] YYYY-MM-DD HH:MM sender: text`` lines, text messages only, cut at ``max_chars``."""
    lines: list[str] = []
    total = 0
    for i, m in enumerate(session.messages):
        if m.type != "text" or not m.text:
            continue
        line = f"[{i}] {m.local_ts:%Y-%m-%d %H:%M} {m.sender}: {' '.join(m.text.split())}"
        total += len(line) + 1
        if total > max_chars and lines:
            break
        lines.append(line)
    return "\n".join(lines)


def _parse_date(value: Any) -> dt.date | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return dt.date.fromisoformat(value[:10])
    except ValueError:
        return None


def _index_to_id(session: SessionMessages, index: Any) -> str:
    """The cited message's id; an index outside the session maps to an unresolvable id."""
    if isinstance(index, bool) or not isinstance(index, int):
        return f"{UNKNOWN_INDEX_PREFIX}{index!r}"
    if 0 <= index < len(session.messages):
        return session.messages[index].message_id
    return f"{UNKNOWN_INDEX_PREFIX}{index}"


def parse_answer(session: SessionMessages, content: str) -> list[MemoryCandidate]:
    """Candidates from the model's JSON; raises ValueError when it is not the expected shape."""
    try:
        data = json.loads(content)
    except json.JSONDecodeError as exc:
        raise ValueError(f"malformed JSON: {exc.msg} at {exc.pos}") from None
    items = data.get("memories") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise ValueError('answer has no "memories" list')
    out: list[MemoryCandidate] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        indexes = item.get("message_indexes")
        indexes = indexes if isinstance(indexes, list) else []
        ids: list[str] = []
        for idx in indexes:
            mid = _index_to_id(session, idx)
            if mid not in ids:
                ids.append(mid)
        out.append(
            MemoryCandidate(
                subject=str(item.get("subject") or "").strip(),
                kind=str(item.get("kind") or "").strip(),
                attribute=str(item.get("attribute") or "").strip(),
                value=str(item.get("value") or "").strip(),
                text=str(item.get("text") or "").strip()[:MAX_TEXT_CHARS],
                message_ids=tuple(ids),
                event_date=_parse_date(item.get("event_date")),
                confidence=0.7,
            )
        )
    return out


class LlmMemoryExtractor:
    """Memories proposed by a chat model (temperature 0, JSON-schema structured output)."""

    def __init__(
        self,
        llm: OpenAICompatibleLlm,
        *,
        max_input_chars: int = 12000,
        cache: ContentCache | None = None,
        redact_text: bool = True,
    ) -> None:
        self.llm = llm
        self.max_input_chars = max_input_chars
        self.method = f"{llm.provider}/{llm.model}"
        self.errors: list[tuple[str, str]] = []  # (session_id, error), also in the rejects
        self.cache = cache
        self.redact_text = redact_text
        self.cache_hits = 0
        # the answer depends on the prompt, schema and model: all of them key the cache
        self._cache_key = (
            cache.key_for(
                llm.provider,
                llm.model,
                {
                    "task": "memories",
                    "prompt": text_hash(SYSTEM_PROMPT + USER_TEMPLATE),
                    "schema": text_hash(json.dumps(MEMORY_JSON_SCHEMA, sort_keys=True)),
                    "max_input_chars": max_input_chars,
                    "redact": redact_text,
                    **llm.params,
                },
            )
            if cache is not None
            else ""
        )

    def build_messages(self, session: SessionMessages) -> list[dict[str, str]]:
        """The chat request's messages for one session."""
        if self.redact_text:  # chat text leaves the machine: mask e-mails, phones, cards
            session = dataclasses.replace(
                session,
                messages=tuple(
                    dataclasses.replace(m, text=redact(m.text)[0]) for m in session.messages
                ),
            )
        body = format_session(session, self.max_input_chars)
        return [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": USER_TEMPLATE.format(messages=body)},
        ]

    def _complete(self, messages: list[dict[str, str]]) -> str:
        schema = {"type": "json_schema", "json_schema": MEMORY_JSON_SCHEMA}
        return complete(self.llm, messages, self.method, response_format=schema)

    def extract_session(self, session: SessionMessages) -> SessionExtraction:
        """Candidates for one session; any provider or parsing failure becomes ``error``."""
        if not any(m.type == "text" and m.text for m in session.messages):
            return SessionExtraction([])
        try:
            messages = self.build_messages(session)
            content = None
            digest = text_hash(messages[-1]["content"])
            if self.cache is not None:
                content = self.cache.get_json(self._cache_key, [digest]).get(digest)
                self.cache_hits += content is not None
            if content is None:
                content = self._complete(messages)
                candidates = parse_answer(session, content)  # only a parsable answer is kept
                if self.cache is not None:
                    self.cache.put_json(self._cache_key, {digest: content})
                return SessionExtraction(candidates)
            return SessionExtraction(parse_answer(session, content))
        except Exception as exc:  # one bad session must not stop the run
            error = f"{type(exc).__name__}: {exc}"[:300]
            self.errors.append((session.session_id, error))
            return SessionExtraction([], error)


# -- the dossier writer -------------------------------------------------------------------------

DOSSIER_SYSTEM_PROMPT = """\
You keep a living dossier about one contact: a Markdown briefing the user reads before
talking to them. You get the previous dossier, today's rule-built dossier (the facts and
their sources) and today's new sessions (summaries and memories). Write today's dossier:
plain statements (not quotes), upcoming plans with their dates and context, what the
contact says about themselves in the profile (never other people's news). Keep exactly the
title line, the "Last Updated:" line and the five sections of the rule-built dossier, in
its order, with the same headings. Every content line is a bullet that ends with
" [sessions: ses_..., ...]" citing only session ids of the rule-built dossier; every session
id it cites must still be cited. Never add facts the inputs do not state. Answer with the
Markdown only."""

DOSSIER_USER_TEMPLATE = """\
Previous dossier:
{previous}

Today's rule-built dossier (keep its sections and citations):
{rule}

New sessions (id, date, title, summary bullets, memories):
{sessions}"""

NO_PREVIOUS = "(none: this is the first version)"


@dataclasses.dataclass(frozen=True)
class DossierSession:
    """What the writer is told about one of today's sessions (no raw message text)."""

    session_id: str
    date: str
    title: str
    bullets: tuple[str, ...] = ()
    memories: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class DossierRewrite:
    """The writer's outcome: the markdown to store, its method, and why a rewrite was
    refused (problem kinds only, never text: they end up in metadata and logs)."""

    markdown: str
    method: str
    accepted: bool
    problems: tuple[str, ...] = ()
    cached: bool = False


def problem_kinds(problems: list[str]) -> tuple[str, ...]:
    """``["dropped citation: ses_x", "uncited line: ..."]`` -> ``("dropped citation",
    "uncited line")``: a rejection is recorded without the text it quotes."""
    return tuple(sorted({p.split(":", 1)[0] for p in problems}))


class LlmDossierWriter:
    """Rewrites the rule fold's dossier with a chat model; keeps it only when it passes
    ``dossier.check_rewrite`` against the rule version (same sections, no dropped or
    invented citations, every line cited, only this contact's sessions).

    The rule fold's state stays the record, so the fold is the same with or without the
    writer; the writer only changes the stored page. Answers are cached by the request's
    content (prompt, model, parameters and the redacted inputs)."""

    def __init__(
        self,
        llm: OpenAICompatibleLlm,
        *,
        cache: ContentCache | None = None,
        redact_text: bool = True,
        max_input_chars: int = 16000,
    ) -> None:
        self.llm = llm
        self.cache = cache
        self.redact_text = redact_text
        self.max_input_chars = max_input_chars
        self.method = f"{llm.provider}/{llm.model}"
        self.cache_hits = 0
        self.accepted = 0
        self.rejected: list[tuple[str, str, tuple[str, ...]]] = []  # (contact, date, kinds)
        self._cache_key = (
            cache.key_for(
                llm.provider,
                llm.model,
                {
                    "task": "dossier",
                    "prompt": text_hash(DOSSIER_SYSTEM_PROMPT + DOSSIER_USER_TEMPLATE),
                    "max_input_chars": max_input_chars,
                    "redact": redact_text,
                    **llm.params,
                },
            )
            if cache is not None
            else ""
        )

    def _mask(self, text: str) -> str:
        return redact(text)[0] if self.redact_text else text

    def build_messages(
        self, rule_markdown: str, previous_markdown: str | None, sessions: list[DossierSession]
    ) -> list[dict[str, str]]:
        """The chat request: system rules, then previous + rule dossier + new sessions."""
        lines = []
        for s in sessions:
            lines.append(f"- {s.session_id} ({s.date}): {self._mask(s.title)}")
            lines += [f"  - summary: {self._mask(b)}" for b in s.bullets]
            lines += [f"  - memory: {self._mask(m)}" for m in s.memories]
        body = "\n".join(lines)[: self.max_input_chars]
        user = DOSSIER_USER_TEMPLATE.format(
            previous=self._mask(previous_markdown) if previous_markdown else NO_PREVIOUS,
            rule=self._mask(rule_markdown),
            sessions=body,
        )
        return [
            {"role": "system", "content": DOSSIER_SYSTEM_PROMPT},
            {"role": "user", "content": user},
        ]

    def _complete(self, messages: list[dict[str, str]]) -> str:
        return complete(self.llm, messages, self.method)

    def rewrite(
        self,
        *,
        contact_id: str,
        date: str,
        rule_markdown: str,
        previous_markdown: str | None,
        sessions: list[DossierSession],
        allowed_sessions: set[str] | None = None,
    ) -> DossierRewrite:
        """Today's page: the model's rewrite when it passes the checks, else the rule one.

        ``allowed_sessions`` (the contact's sessions) is checked on top of ``check_rewrite``
        so a citation of another contact's session is refused even if the rule page had it.
        A provider failure is a rejection too: the run goes on with the rule page.
        """
        from memory_pipeline.core.memories.dossier import check_rewrite, cited_sessions

        cached = False
        try:
            messages = self.build_messages(rule_markdown, previous_markdown, sessions)
            digest = text_hash(messages[-1]["content"])
            content = None
            if self.cache is not None:
                content = self.cache.get_json(self._cache_key, [digest]).get(digest)
                cached = content is not None
                self.cache_hits += cached
            if content is None:
                content = self._complete(messages)
                if self.cache is not None:
                    self.cache.put_json(self._cache_key, {digest: content})
        except Exception as exc:  # one contact's failure must not stop the run
            kinds = (f"provider error: {type(exc).__name__}",)
            self.rejected.append((contact_id, date, kinds))
            return DossierRewrite(rule_markdown, "deterministic", False, kinds)
        answer = content.strip() + "\n"
        problems = check_rewrite(rule_markdown, answer)
        if allowed_sessions is not None:
            foreign = sorted(set(cited_sessions(answer)) - allowed_sessions)
            problems += [f"other contact's session: {s}" for s in foreign]
        if problems:
            kinds = problem_kinds(problems)
            self.rejected.append((contact_id, date, kinds))
            return DossierRewrite(rule_markdown, "deterministic", False, kinds, cached)
        self.accepted += 1
        return DossierRewrite(answer, self.method, True, (), cached)
