"""Small text helpers of the dossier: cleaning a line, comparing two lines (near
duplicates), a Japanese point's lead sentence and the citation of sessions.

Shared by the fold, the timeline and the renderer, so a line is cleaned and compared the same
way wherever it appears.
"""

from __future__ import annotations

import datetime as dt
import functools
import re

from memory_pipeline.core.common.timelex import MONTH_NAME_PATTERN
from memory_pipeline.core.memories.dossier_state import MAX_TEXT_CHARS, NEAR_DUPLICATE, DossierState
from memory_pipeline.core.memories.dossier_text import (
    cut_words,
)

_JA_FILLER_SENTENCE = re.compile(
    r"^(?:じゃあ|では|うん|おけ|了解|助かる|ありがとう)[^。！!]{0,6}[。！!]\s*"
)
_JA_OPEN_QUESTION = re.compile(r"(?:何|どう|いつ|どこ|誰|どれ)[^。！!]*(?:思う|かな|の)$")
_JA_NO_PREDICATE = re.compile(r"[\d時分〜~ー]$")


def _ja_point(st: DossierState, text: str) -> str:
    """A Japanese point as a statement: a filler sentence after the name is dropped
    (健太は、じゃあそれで。13日に… -> 健太は13日に…); a question without its mark (何がいいと
    思う) or a line with no predicate (健太は10時〜17時) is no statement ("" = not shown)."""
    if not _JA_RUN.search(text):
        return text
    names = sorted((n for n in (*st.speakers, st.contact_id) if n), key=len, reverse=True)
    name = next((n for n in names if text.startswith(n)), "")
    head = ""
    body = text
    if name:
        found = re.match(rf"{re.escape(name)}(?:は|が|も)?[、,]?", text)
        head, body = text[: found.end()], text[found.end() :]
    rest = _JA_FILLER_SENTENCE.sub("", body)
    if not rest.strip() or _JA_OPEN_QUESTION.search(rest) or _JA_NO_PREDICATE.search(rest):
        return ""
    if rest == body:
        return text
    head = head.rstrip("、,")
    return (head if head.endswith(("は", "が", "も")) or not head else head + "は") + rest


def _cite(session_ids: list[str]) -> str:
    return f"[sessions: {', '.join(dict.fromkeys(session_ids))}]"


def _clean(text: str) -> str:
    """One line of plain text: whitespace collapsed, no citation look-alikes, bounded at a
    word boundary."""
    text = " ".join(text.split()).replace("[sessions:", "(sessions:")
    return cut_words(text, MAX_TEXT_CHARS)


def _norm(text: str) -> str:
    return " ".join(text.casefold().split())


def _us(ts: dt.datetime) -> int:
    """Aware datetime -> integer microseconds since the epoch (exact, no float)."""
    delta = ts - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


# -- near duplicates ---------------------------------------------------------------------------

_WORD = re.compile(r"[a-z0-9]+|[\u3040-\u30ff\u3400-\u9fff]+")
_JA_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")
# A resolved date and the word it replaced say the same ("on 9 March 2024" / "today").
_DAY_WORDS = re.compile(
    rf"\b(?:on\s+)?\d{{1,2}}\s+(?:{MONTH_NAME_PATTERN})\s+\d{{4}}\b"
    r"|\b(?:today|tonight|tomorrow|yesterday)\b",
    re.I,
)
_SMALL_WORDS = frozenset(
    "a an the and or but so to of at on in for with is are was were be will would can let s "
    "then just also really very too".split()
)


def _people(state: DossierState) -> tuple[str, ...]:
    """The names a comparison sets aside (see ``_words``): the contact-side speakers, the
    owner and the contact."""
    return (*state.speakers, state.owner_name, state.contact_id)


def _words(state: DossierState, text: str) -> frozenset[str]:
    """The words of a statement without the people's names ("Maria and others", "Maria and
    Yuki" are the same people), dates and small words: what two bullets are compared on."""
    return _words_of(text, _people(state))


@functools.lru_cache(maxsize=4096)
def _words_of(text: str, people: tuple[str, ...]) -> frozenset[str]:
    names = {"others", "other"}
    for n in people:
        names |= set(_WORD.findall((n or "").casefold()))
    for n in people:  # Japanese names are runs inside words: cut them out first
        if n and _JA_RUN.search(n):
            text = text.replace(n, " ")
    words: list[str] = []
    for w in _WORD.findall(_DAY_WORDS.sub(" ", text).casefold()):
        if _JA_RUN.match(w):  # Japanese has no spaces: its character bigrams are the words
            words += [w] if len(w) == 1 else [w[i : i + 2] for i in range(len(w) - 1)]
        else:
            words.append(w)
    return frozenset(w for w in words if w not in names and w not in _SMALL_WORDS)


def _similar(a: frozenset[str], b: frozenset[str]) -> bool:
    """Two non-empty word sets say the same: one inside the other, or a Jaccard overlap of
    at least ``NEAR_DUPLICATE`` (the one test every near-duplicate check makes)."""
    return a <= b or b <= a or len(a & b) / len(a | b) >= NEAR_DUPLICATE


def _near_duplicate(state: DossierState, text: str, said: list[str]) -> bool:
    """``text`` says what one of ``said`` says: one's words inside the other's, or a Jaccard
    overlap of at least ``NEAR_DUPLICATE``."""
    people = _people(state)  # once, not once per line compared
    a = _words_of(text, people)
    if not a:
        return False
    for other in said:
        b = _words_of(other, people)
        if b and _similar(a, b):
            return True
    return False


def _owner_said(state: DossierState, bullet: str) -> bool:
    """A summary bullet quoting the owner ("背景: Yuki: ...", "Commitment: Yuki: ..."): the
    owner's own line, kept off the contact's page (a dated commitment of theirs still shows
    under Ongoing, through its memory or the day's agenda)."""
    owner = state.owner_name
    if not owner:
        return False
    found = re.match(r"^(?:[^:：]{1,20}[:：]\s*)?(?P<who>[^:：]{1,40})[:：]\s", bullet.strip())
    return found is not None and found["who"].strip() == owner
