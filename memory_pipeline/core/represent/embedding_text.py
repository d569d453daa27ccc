"""The LINE paper's ``embedding_text``: who/when sentence + summary + raw excerpt.

A chunk is embedded as one text so that a query about a person, a date or a topic can match
it: a FIXED identifying sentence written by code (never by a model, so it cannot drift or
hallucinate), then the chunk's extractive summary, then a labelled excerpt of its raw text
(the first ``max_excerpt`` characters, cut at a message or line boundary when possible).
``SUMMARY_LABEL``, ``EXCERPT_LABEL`` and ``excerpt_of`` are public so a data-quality check can
verify that an embedding_text contains exactly its summary and excerpt.

Layout (English; Japanese uses the Japanese identifying sentence, same labels)::

    Conversation with Maria (maria) on Friday, March 1, 2024, 20:10–20:24, between Maria and Yuki.
    Summary: Maria: Yuki!! Guess what, I got the job at Hikari Design 🎉
    Maria: Perfect. Let's meet at Sangenjaya station, south exit, 9:40
    Raw excerpt:
    [2024-03-01 20:10] Maria: Yuki!! Guess what, I got the job at Hikari Design 🎉
    …
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

# Fixed tables, not strftime("%A"/"%B"): output must not depend on the process locale.
from memory_pipeline.core.common.timelex import JA_WEEKDAYS, MONTH_NAMES, WEEKDAY_NAMES

SUMMARY_LABEL = "Summary: "
EXCERPT_LABEL = "Raw excerpt:"
DEFAULT_MAX_EXCERPT = 4000


def excerpt_of(raw_text: str, max_excerpt: int = DEFAULT_MAX_EXCERPT) -> str:
    """The first ≤ ``max_excerpt`` characters of ``raw_text``, cut where a message starts.

    Preference: the last message boundary (a newline followed by ``[``) within the limit, then
    the last line boundary, as long as either keeps at least half of the limit; otherwise a
    hard cut at ``max_excerpt`` (one huge message must not shrink the excerpt to nothing).
    Deterministic, and ``raw_text.startswith(excerpt_of(raw_text, n))`` always holds.
    """
    if max_excerpt <= 0:
        return ""
    if len(raw_text) <= max_excerpt:
        return raw_text
    window = raw_text[: max_excerpt + 1]  # a boundary right after the limit still counts
    floor = max_excerpt // 2
    cut = window.rfind("\n[")
    if cut >= floor:
        return raw_text[:cut]
    cut = window.rfind("\n")
    if cut >= floor:
        return raw_text[:cut]
    return raw_text[:max_excerpt]


def _join_en(names: list[str]) -> str:
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]


def _en_day(ts: datetime) -> str:
    return f"{WEEKDAY_NAMES[ts.weekday()]}, {MONTH_NAMES[ts.month - 1]} {ts.day}, {ts.year}"


def _hm(ts: datetime) -> str:
    return f"{ts.hour:02d}:{ts.minute:02d}"


def _en_range(start: datetime, end: datetime) -> str:
    if start.date() == end.date():
        return f"{_en_day(start)}, {_hm(start)}–{_hm(end)}"
    return f"{_en_day(start)}, {_hm(start)} to {_en_day(end)}, {_hm(end)}"


def _ja_day(ts: datetime, with_year: bool = True) -> str:
    year = f"{ts.year}年" if with_year else ""
    return f"{year}{ts.month}月{ts.day}日({JA_WEEKDAYS[ts.weekday()]})"


def _ja_range(start: datetime, end: datetime) -> str:
    if start.date() == end.date():
        return f"{_ja_day(start)} {_hm(start)}〜{_hm(end)}"
    return f"{_ja_day(start)} {_hm(start)}〜{_ja_day(end, end.year != start.year)} {_hm(end)}"


def _unique(names: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for n in names:
        n = n.strip() if n else ""
        if n:
            seen.setdefault(n, None)
    return list(seen)


def identity_sentence(
    *,
    contact_id: str,
    conversation_id: str,
    start_local: datetime,
    end_local: datetime,
    speakers: list[str],
    lang: str,
) -> str:
    """The fixed first sentence: who the chat is with, which conversation, when, who spoke."""
    names = _unique(speakers)
    if lang == "ja":
        who = "、".join(names) if names else "不明"
        period = _ja_range(start_local, end_local)
        return f"{contact_id}とのトーク（{conversation_id}）、{period}、参加者: {who}。"
    period = _en_range(start_local, end_local)
    if len(names) >= 2:
        people = f"between {_join_en(names)}"
    elif names:
        people = f"messages from {names[0]}"
    else:
        people = "participants unknown"
    return f"Conversation with {contact_id} ({conversation_id}) on {period}, {people}."


def build_embedding_text(
    *,
    contact_id: str,
    conversation_id: str,
    start_local: datetime,
    end_local: datetime,
    speakers: list[str],
    summary: str,
    raw_text: str,
    lang: str,
    max_excerpt: int = DEFAULT_MAX_EXCERPT,
) -> str:
    """Identity sentence + ``SUMMARY_LABEL`` summary + ``EXCERPT_LABEL`` raw excerpt.

    ``lang`` "ja" gives the Japanese identity sentence, anything else the English one; the
    labels are the same in both languages so checks and parsers need one rule. The excerpt is
    ``excerpt_of(raw_text, max_excerpt)``; the summary is included verbatim.
    """
    head = identity_sentence(
        contact_id=contact_id,
        conversation_id=conversation_id,
        start_local=start_local,
        end_local=end_local,
        speakers=speakers,
        lang=lang,
    )
    excerpt = excerpt_of(raw_text, max_excerpt)
    return f"{head}\n{SUMMARY_LABEL}{summary}\n{EXCERPT_LABEL}\n{excerpt}"
