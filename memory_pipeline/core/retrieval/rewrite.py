"""An optional LLM query rewrite: a follow-up question made standalone by a chat model.

Off by default: the rules of ``retrieval.query.resolve_references`` resolve references to
the recent messages offline. Any OpenAI-compatible endpoint works (``OpenAICompatibleLlm``);
the question and the recent messages are redacted (``common.redact``) before they leave the
machine, and answers are cached by the content hash of the request, so the same follow-up
is paid for once. A failed or empty answer falls back to the rules, with a note.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memory_pipeline.core.common.ids import text_hash
from memory_pipeline.core.common.redact import redact
from memory_pipeline.core.represent.cache import ContentCache
from memory_pipeline.core.retrieval.query import (
    RecentMessage,
    normalize_recent,
    resolve_references,
)

REWRITE_SYSTEM = """\
You rewrite a user's question about their chat history into one standalone search query.
Replace pronouns and references such as "that", "it", "she", あれ, それ, あの件 with what they
refer to in the recent messages. Keep names, dates and time words ("yesterday", 昨日) as
written; do not answer the question and do not add anything the messages do not say. Write
in the language of the question. Output only the rewritten query."""
REWRITE_USER = """\
Recent messages (oldest first):
{recent}

Question: {question}"""
MAX_RECENT = 20  # only the last messages are sent
MAX_CHARS = 4000


class LlmQueryRewriter:
    """``rewrite(query, recent)`` by a chat model (``llm``: an ``OpenAICompatibleLlm``)."""

    def __init__(
        self, llm: Any, *, cache: ContentCache | None = None, redact_text: bool = True
    ) -> None:
        self.llm = llm
        self.cache = cache
        self.redact_text = redact_text
        self.cache_hits = 0
        self._key = (
            cache.key_for(
                llm.provider,
                llm.model,
                {
                    "task": "query_rewrite",
                    "prompt": text_hash(REWRITE_SYSTEM + REWRITE_USER),
                    "redact": redact_text,
                    **llm.params,
                },
            )
            if cache is not None
            else ""
        )

    def build_user(self, query: str, recent: Sequence[RecentMessage]) -> str:
        """The user message as sent: the last MAX_RECENT messages, redacted."""
        clean = (lambda t: redact(t)[0]) if self.redact_text else (lambda t: t)
        lines = [
            f"{clean(m.sender) + ': ' if m.sender else ''}{clean(m.text)}"
            for m in recent[-MAX_RECENT:]
        ]
        body = "\n".join(lines)[-MAX_CHARS:]
        return REWRITE_USER.format(recent=body, question=clean(query))

    def rewrite(self, query: str, recent: Any) -> tuple[str, list[str]]:
        """(rewritten query, notes). Any provider failure or empty answer falls back to
        the rules (``resolve_references``) and says so."""
        messages = normalize_recent(recent)
        if not messages:
            return query, []
        user = self.build_user(query, messages)
        digest = text_hash(user)
        try:
            answer = None
            if self.cache is not None:
                answer = self.cache.get_json(self._key, [digest]).get(digest)
                self.cache_hits += answer is not None
            if answer is None:
                answer = self.llm.complete(REWRITE_SYSTEM, user).strip().strip('"').strip()
                if not answer or "\n" in answer:
                    raise ValueError("not a one-line query")
                if self.cache is not None:
                    self.cache.put_json(self._key, {digest: answer})
            return answer, [f"query rewritten by {self.llm.provider}/{self.llm.model}"]
        except Exception as exc:  # a rewrite must never break a search
            r = resolve_references(query, messages)
            reason = f"{type(exc).__name__}"
            return r.query, [f"LLM rewrite failed ({reason}): rules used", *r.notes]


__all__ = ["REWRITE_SYSTEM", "LlmQueryRewriter"]
