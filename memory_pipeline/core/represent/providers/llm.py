"""Chat-model providers: session summaries for retrieval and a plain chat completion.

Any OpenAI-compatible endpoint works (OpenAI itself, vLLM, Ollama, a test fake) through the
official ``openai`` client with its own retries off; ``retry.call_with_retries`` decides.
The summary prompt follows the LINE memory paper: summarize for later semantic search,
keep names, relationships, topics, emotions, commitments and events, never speculate, and
read only the first 7,000 characters of the session.
"""

from __future__ import annotations

import hashlib
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from memory_pipeline.core.represent.providers.retry import call_with_retries

SUMMARY_SYSTEM_JA = "あなたはチャット履歴を検索用に要約するアシスタントです。"
SUMMARY_PROMPT_JA = """\
以下の会話を、後でセマンティック検索（意味検索）で見つけられるように要約してください。

- 登場人物の名前、人物同士の関係、話題、感情、約束や予定、出来事を必ず残してください。
- 会話に書かれていないことを推測したり補ったりしないでください。
- 日本語で200〜500文字で書いてください。要約本文のみを出力してください。

会話:
{text}"""

SUMMARY_SYSTEM_EN = "You summarize chat history so that it can be retrieved later."
SUMMARY_PROMPT_EN = """\
Summarize the following conversation so that it can be found later by semantic search.

- Keep the people's names, their relationships, the topics, emotions, commitments or plans,
  and events.
- Do not speculate or add anything the conversation does not state.
- Write 60-120 words in English. Output only the summary.

Conversation:
{text}"""

#: lang -> (system message, user template with ``{text}``).
DEFAULT_SUMMARY_PROMPTS: dict[str, tuple[str, str]] = {
    "ja": (SUMMARY_SYSTEM_JA, SUMMARY_PROMPT_JA),
    "en": (SUMMARY_SYSTEM_EN, SUMMARY_PROMPT_EN),
}


class EmptyCompletionError(ValueError):
    """The model answered with no text (content filter, length 0): an error for that item."""


def _prompts_version(prompts: Mapping[str, tuple[str, str]]) -> str:
    """Short hash of the prompts, so editing a prompt invalidates cached summaries."""
    h = hashlib.blake2b(digest_size=6)
    for lang in sorted(prompts):
        system, user = prompts[lang]
        h.update(f"{lang}\x1f{system}\x1f{user}\x1e".encode())
    return h.hexdigest()


class OpenAICompatibleLlm:
    """A chat model behind an OpenAI-compatible ``/chat/completions`` endpoint."""

    remote = True

    def __init__(
        self,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        temperature: float = 0.0,
        timeout: float = 60,
        *,
        provider: str = "openai",
        max_output_tokens: int | None = None,
        max_attempts: int = 6,
        base_delay: float = 0.5,
        max_delay: float = 30.0,
        sleep: Callable[[float], Any] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.provider = provider
        self.model = model
        self.temperature = temperature
        self.max_output_tokens = max_output_tokens
        self.params: dict[str, Any] = {
            "temperature": temperature,
            "max_output_tokens": max_output_tokens,
        }
        self.calls = 0
        self._client_args = {"api_key": api_key, "base_url": base_url, "timeout": timeout}
        self._client: Any = None
        self._retry = {
            "max_attempts": max_attempts,
            "base_delay": base_delay,
            "max_delay": max_delay,
            "sleep": sleep,
            "rng": rng,
        }
        self._lock = threading.Lock()

    @property
    def client(self) -> Any:
        """The ``openai.OpenAI`` client, created on first use, with SDK retries off."""
        if self._client is None:
            from openai import OpenAI

            self._client = OpenAI(max_retries=0, **self._client_args)
        return self._client

    def complete(self, system: str, user: str) -> str:
        """One chat turn at the fixed temperature; transient failures are retried."""
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        kwargs: dict[str, Any] = {"temperature": self.temperature}
        if self.max_output_tokens:
            kwargs["max_tokens"] = self.max_output_tokens

        def once() -> str:
            with self._lock:
                self.calls += 1
            resp = self.client.chat.completions.create(
                model=self.model, messages=messages, **kwargs
            )
            content = resp.choices[0].message.content if resp.choices else None
            if not content:
                raise EmptyCompletionError(f"{self.provider}/{self.model} returned no text")
            return content.strip()

        return call_with_retries(once, **self._retry)


class OpenAICompatibleSummarizer:
    """Session summaries for retrieval (Japanese 200-500 characters, English 60-120 words).

    Only the first ``max_input_chars`` characters of the raw text are sent, as in the paper;
    unknown ``lang`` values fall back to English.
    """

    remote = True

    def __init__(
        self,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        temperature: float = 0.0,
        timeout: float = 60,
        max_input_chars: int = 7000,
        prompts: Mapping[str, tuple[str, str]] | None = None,
        **llm_kwargs: Any,
    ) -> None:
        self._llm = OpenAICompatibleLlm(
            model, api_key, base_url, temperature, timeout, **llm_kwargs
        )
        self.provider = self._llm.provider
        self.model = model
        self.max_input_chars = max_input_chars
        self.prompts: dict[str, tuple[str, str]] = dict(prompts or DEFAULT_SUMMARY_PROMPTS)
        self.params: dict[str, Any] = {
            **self._llm.params,
            "max_input_chars": max_input_chars,
            "prompts": _prompts_version(self.prompts),
        }

    @property
    def calls(self) -> int:
        """Provider requests made so far (retries included)."""
        return self._llm.calls

    def build_messages(self, raw_text: str, lang: str) -> tuple[str, str]:
        """(system, user) messages for ``raw_text`` cut to ``max_input_chars``."""
        system, template = self.prompts.get(lang) or self.prompts["en"]
        return system, template.replace("{text}", raw_text[: self.max_input_chars])

    def summarize(self, raw_text: str, lang: str) -> str:
        """Summary of one session's raw text in ``lang``."""
        system, user = self.build_messages(raw_text, lang)
        return self._llm.complete(system, user)
