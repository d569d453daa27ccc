"""The dossier's Timeline: each session's most informative statements about the contact,
kept per month within a character budget and rendered as dated bullets.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from memory_pipeline.core.common.escape import escape_markdown as _md
from memory_pipeline.core.memories.dossier_state import (
    MAX_POINT_CHARS,
    MIN_TIMELINE_VALUE,
    TIMELINE_CHARS_PER_PERIOD,
    TIMELINE_LEAD_WORDS,
    TIMELINE_PER_SESSION,
    TIMELINE_PERIODS,
    DossierState,
)
from memory_pipeline.core.memories.dossier_text import (
    LIFE_EVENT,
    compact_event,
    cut_words,
    information_value,
    sentences_of,
)
from memory_pipeline.core.memories.dossier_words import (
    _JA_RUN,
    _cite,
    _ja_point,
    _near_duplicate,
    _people,
    _similar,
    _words_of,
)

# -- timeline ----------------------------------------------------------------------------------


def _add_timeline(st: DossierState, session: dict, statements: list[str], iso: str) -> None:
    """A session's ``TIMELINE_PER_SESSION`` most informative distinct statements about the
    contact side join the Timeline of its month (``information_value``; ties keep the
    caller's order: key events first, then by kind, then what the contact told). Of two
    wordings of one thing the more informative stays; English lines valued below
    ``MIN_TIMELINE_VALUE`` stay off."""
    names = (*st.speakers, st.owner_name, st.contact_id)
    leads: list[str] = []
    values: list[int] = []  # information_value of each lead
    for text in statements:
        text = cut_words(_lead(_ja_point(st, text), names), MAX_POINT_CHARS)
        if not text:
            continue
        value = information_value(text, names)
        same = next((i for i, t in enumerate(leads) if _near_duplicate(st, text, [t])), None)
        if same is None:
            leads.append(text)
            values.append(value)
        elif value > values[same]:
            leads[same], values[same] = text, value  # two wordings of one thing: the fuller stays
    ranked = sorted(range(len(leads)), key=lambda i: (-values[i], i))
    # a line that says little (a pronoun-opened remark, "Here's a photo …") is left out:
    # the Timeline lists what happened (English: the value has no Japanese signals)
    ranked = [i for i in ranked if _JA_RUN.search(leads[i]) or values[i] >= MIN_TIMELINE_VALUE]
    for rank, i in enumerate(ranked[:TIMELINE_PER_SESSION]):
        st.timeline.append(
            {
                "period": iso[:7],
                "date": iso,
                "session_id": session["session_id"],
                "start_us": session["start_us"],
                "rank": rank,
                "text": leads[i],
            }
        )


def _lead(text: str, names: tuple[str, ...] = ()) -> str:
    """The sentence of a statement that states its event, so a Timeline line is one compact
    sentence: the first sentence naming a life change, else the first sentences up to
    ``TIMELINE_LEAD_WORDS`` words (a Japanese statement: its first sentence); each sentence
    as the clause that states what happened (``compact_event``: no opener, no closing
    feeling)."""
    parts = [compact_event(p, names) for p in sentences_of(text)]
    for part in parts:
        if LIFE_EVENT.search(part) and len(part.split()) >= TIMELINE_LEAD_WORDS:
            return part
    lead = ""
    for part in parts:
        lead = f"{lead} {part}".strip()
        if len(lead.split()) >= TIMELINE_LEAD_WORDS or _JA_RUN.search(lead):
            break
    return lead or text


def _keep_timeline(entries: list[dict]) -> list[dict]:
    """The last ``TIMELINE_PERIODS`` months, each holding its best entries up to
    ``TIMELINE_CHARS_PER_PERIOD`` characters: every session's first statement before any
    session's second (so each conversation of a busy month is still there), earlier sessions
    first. The order is a
    fixed key of each entry alone, so folding night by night keeps what one run keeps."""
    periods = sorted({e["period"] for e in entries})[-TIMELINE_PERIODS:]
    out: list[dict] = []
    for period in periods:
        month = sorted(
            (e for e in entries if e["period"] == period),
            key=lambda e: (e["rank"], e["start_us"], e["session_id"]),
        )
        used = 0
        for e in month:  # a character budget: compact lines let more of a month's events in
            if used + len(e["text"]) > TIMELINE_CHARS_PER_PERIOD:
                break
            used += len(e["text"])
            out.append(e)
    return sorted(out, key=lambda e: (e["start_us"], e["session_id"], e["rank"]))


def _timeline_bullets(state: DossierState) -> list[str]:
    """One line per kept statement, oldest first, dated by its session, citing it; a
    statement the Timeline already holds in other words is shown once.

    A statement is left out when it is a near duplicate (``_similar``) of one shown before
    it. Whether two statements are near duplicates depends on their texts alone (and the
    names set aside), so the pairs are found once per text and kept in a process-local memo
    per contact (``_TimelineMemo``): a day's render compares only the statements new since
    the last render, then walks the list. Entries dropped since (months leaving the window,
    a month's budget, a forgotten session) just leave the memo, so what is shown is always
    what comparing each statement with every shown one before it gives, for any list."""
    people = _people(state)
    with _MEMO_LOCK:
        memo = _MEMOS.pop(people, None) or _TimelineMemo(people)
        _MEMOS[people] = memo  # most recently used last
        while len(_MEMOS) > MEMO_CONTACTS:
            _MEMOS.popitem(last=False)
        return memo.bullets(state.timeline)


# contacts whose Timeline pairs a process keeps (least recently used go): a Timeline holds
# a few hundred statements at most (``_keep_timeline``), so a memo is under a megabyte
# (0.66 MiB for the 431 of the longest in a 10-year, 100,000-message synthetic life)
MEMO_CONTACTS = 64


class _TimelineMemo:
    """One contact's Timeline texts, their words and which of them are near duplicates of
    which, for the names ``people`` (another set of names is another memo: the words
    differ); plus each entry's rendered line. Holds only what the last render's list held."""

    def __init__(self, people: tuple[str, ...]) -> None:
        self.people = people
        self.words: dict[str, frozenset[str]] = {}  # text -> its words (``_words_of``)
        self.dups: dict[str, set[str]] = {}  # text -> the other texts it near-duplicates
        self.lines: dict[tuple[str, str, str], str] = {}  # (date, text, session) -> line

    def _sync(self, texts: dict[str, None]) -> None:
        """Forget the texts no longer listed; compare each new text with every listed one."""
        words, dups = self.words, self.dups
        for gone in [t for t in words if t not in texts]:
            del words[gone]
            for other in dups.pop(gone):
                if other in dups:
                    dups[other].discard(gone)
        for text in texts:
            if text in words:
                continue
            a = _words_of(text, self.people)
            mine: set[str] = set()
            if a:
                for other, b in words.items():
                    if b and _similar(a, b):
                        mine.add(other)
                        dups[other].add(text)
            words[text], dups[text] = a, mine

    def bullets(self, timeline: list[dict]) -> list[str]:
        """``_timeline_bullets`` of ``timeline``: a walk of the list, the pairs known."""
        self._sync(dict.fromkeys(e["text"] for e in timeline))
        words, dups = self.words, self.dups
        kept: set[str] = set()  # texts shown so far
        lines: dict[tuple[str, str, str], str] = {}
        out: list[str] = []
        for e in timeline:
            text = e["text"]
            if words[text] and (text in kept or not kept.isdisjoint(dups[text])):
                continue  # the same text, or a near duplicate of one, is shown already
            kept.add(text)
            key = (e["date"], text, e["session_id"])
            line = self.lines.get(key)
            if line is None:
                line = f"- {_md(e['date'])} — {_md(text)} {_cite([e['session_id']])}"
            lines[key] = line
            out.append(line)
        self.lines = lines
        return out


_MEMOS: OrderedDict[tuple[str, ...], _TimelineMemo] = OrderedDict()
_MEMO_LOCK = threading.Lock()
