"""Sentence and statement helpers the English and Japanese memory rules share.

Cleaning a chat message (captions out, emoji as sentence ends), splitting it into sentences
and measuring a statement (its content words) mean the same thing for both languages.
"""

from __future__ import annotations

import re

from memory_pipeline.core.memories.extract_types import MAX_TEXT_CHARS

# ----------------------------------------------------------------------------- text helpers

_BRACKETED = re.compile(r"\[[^\]]{0,400}\]")
_EMOJI = re.compile(
    "[\U0001f000-\U0001faff\u2600-\u27bf\u2b00-\u2bff\ufe0f\u200d\u3030\u303d\u3297\u3299]+"
)
_SENT_EN = re.compile(
    r"(?<![MD]r\.)(?<!Mrs\.)(?<!Ms\.)(?<!Mt\.)(?<!St\.)(?<=[.!?])\s+|\n+|(?<=[a-z][.!?])(?=[A-Z])"
    r"|;\s+|,\s+but\s+"
)
_SENT_JA = re.compile(r"(?<=[。！？!?])|\n+|(?<=[ｗw笑])(?=\s)")


_HSPACES = re.compile(r"[ \t\u3000]+")


def _clean(text: str) -> str:
    """No [image: ...] captions; an emoji ends a sentence (chat uses it as punctuation)."""
    return _HSPACES.sub(" ", _EMOJI.sub("\n", _BRACKETED.sub("", text))).strip()


def _sentences(text: str, lang: str) -> list[str]:
    rx = _SENT_JA if lang == "ja" else _SENT_EN
    return [s for s in (p.strip() for p in rx.split(text)) if s]


def _short(sentence: str) -> str:
    s = sentence.strip(" ,、")
    return s if len(s) <= MAX_TEXT_CHARS - 40 else s[: MAX_TEXT_CHARS - 41] + "…"


MAX_STATEMENT_SENTENCES = 3
MIN_STATEMENT_WORDS = 4  # content words (English) / 8 characters (Japanese), name excluded
_FUNCTION_WORDS = frozenset(
    "the and but for with that this was were are has have had its it's his her their them they "
    "she him who what when where which there then than from into onto about just so too very "
    "really also and others is be been being will would can could not all any some out off".split()
)


def _statement_size(text: str, lang: str, name: str) -> float:
    """How much a statement says: its content words (English words of three letters or more
    that are not function words or the speaker's name), or half its characters (Japanese)."""
    if lang == "ja":
        return len(text.replace(name, "")) / 2
    return len(_content_words(text, name))


def _content_words(text: str, *names: str) -> list[str]:
    """The English words of three letters or more of ``text`` that are neither function words
    nor part of one of ``names`` (lower-cased, in order, repeats kept)."""
    skip = {w.lower() for n in names for w in re.findall(r"[A-Za-z]+", n)}
    words = re.findall(r"[A-Za-z]{3,}", text.lower())
    return [w for w in words if w not in _FUNCTION_WORDS and w not in skip]
