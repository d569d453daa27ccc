"""General statements: first-person sentences no kind rule matched, kept as facts.

A subjectless English sentence ("Just finished the marathon") or a declarative Japanese
one becomes a general statement; short neighbours are folded together and anaphoric ones
("that was fun") are dropped, since they do not stand alone as a memory.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence

from memory_pipeline.core.common.lang import detect_lang
from memory_pipeline.core.memories.extract_dates import _FUTURE, _PAST
from memory_pipeline.core.memories.extract_ja import (
    _JA_HYPO,
    _JA_PLAN_NOT,
    _JA_REPORTED,
    _ja_first_person_ok,
)
from memory_pipeline.core.memories.extract_text import (
    MAX_STATEMENT_SENTENCES,
    MIN_STATEMENT_WORDS,
    _short,
    _statement_size,
)
from memory_pipeline.core.memories.extract_types import MemoryCandidate, _Hit
from memory_pipeline.core.memories.rewrite import en_statement_kind
from memory_pipeline.core.memories.rewrite_ja import ja_statement_kind, ja_strip_lead

# ----------------------------------------------------------------------------- general statements

_EN_SUBJECTLESS = re.compile(
    r"^(?:(?P<adv>Just|Finally|Recently|Also|Still)\s+(?P<low>[a-z]+ed|got|went|made|took|bought|"
    r"found|saw|met|had|spent|started|began|ran|won|lost|left|came|wrote|built)\b"
    r"|(?P<verb>[A-Z][a-z]+ed|Got|Went|Made|Took|Bought|Found|Saw|Met|Had|Spent|Began|Ran|Won|"
    r"Lost|Left|Came|Wrote|Built|Been|Gonna|Going\s+to|Planning\s+(?:to|on)|Working\s+on|"
    r"Looking\s+forward|Thinking\s+(?:of|about))\b)"
    r"(?!\s+(?:by|to\s+you|ages|a\s+while|forever|so\s+long|too\s+long|a\s+long|me|us)\b)"
    # "Been a busy week", "Gonna be a great night": the dropped subject is "it", not "I".
    r"(?<!Been(?=\s(?:a|an|the|such|quite|so|really|pretty)\b))"
    r"(?!(?<=Gonna)\s+be\s+(?:a|an|the|so|such|fun|great|awesome|amazing|epic|tough|hard)\b)"
)


def _en_subjectless(s: str) -> str:
    """ "Started learning Python today." -> "I started learning Python today.": chat drops
    the subject of a statement about oneself."""
    m = _EN_SUBJECTLESS.match(s)
    if m is None:
        return s
    verb = m["verb"] or ""
    first = verb.split()[0] if verb else ""
    progressive = first.endswith("ing") or first == "Gonna"
    lead = "I've" if first == "Been" else "I'm" if progressive else "I"
    return f"{lead} {s[0].lower()}{s[1:]}"


def _en_statement(s: str) -> _Hit | None:
    """The general rule: any first-person declarative sentence that is not a reaction."""
    if not _en_clause_start_ok(s):
        return None
    kind = en_statement_kind(s)
    if kind is None:
        return None
    direction = _FUTURE if kind == "plan" else _PAST if kind == "event" else 0
    return _Hit(kind, "", "", 0.55, direction, general=True)


_EN_ANAPHORA = re.compile(
    r"^(?:it|it['’]s|that['’]s|they|they['’]re|he|she|them|there|so(?!\s+(?:much|many|far)\b))\b"
    # "This necklace is ...", "These figurines I bought ...": a demonstrative before a noun
    # names its thing; before a verb ("That was so fun", "This means a lot") it points back.
    r"|^(?:this|that|these|those)\b"
    r"(?=\s*(?:[.!,;:]|$)|\s+(?:is|was|are|were|has|had|have|sounds?|looks?|seems?|means?|must|"
    r"will|would|can|could|makes?|made|really|so|one|kind|sort|part|feels?|felt|gives?|keeps?|"
    r"helps?|reminds?|brings?|taught|shows?|got|just|all|too|also|always|definitely|totally|"
    r"sure|truly|actually|did|does|do|stuff|thing|time|moment|way)\b)",
    re.I,
)


def _en_anaphoric(s: str) -> bool:
    """The sentence leans on an earlier one ("It was so powerful.")."""
    return _EN_ANAPHORA.match(s) is not None


_JA_ANAPHORA = re.compile(
    r"^(?:でも|だから|それで)|それ|そこ|あれ|その|この|あの|どっちも|どちらも|そっち"
    r"|^(?:そういう|こういう|ああいう|そう思)"  # 「そういうかき氷機ありました」
)


def _ja_anaphoric(s: str) -> bool:
    """The sentence points at something said before (その3つ, それ, どっちも)."""
    return _JA_ANAPHORA.search(s) is not None


# "I'm off to bake some cakes.": a short plan for right after the chat, still a plan.
_EN_OFF_TO = re.compile(r"\b(?:is|am)\s+off\s+to\s+(?:go\s+)?[a-z]+\s+\w+", re.I)


def _merge_statements(
    general: Sequence[tuple[_Hit, str, dt.date | None, bool]], lang: str, name: str
) -> list[tuple[_Hit, str, dt.date | None, int]]:
    """The statement memories of one message from its general-rule sentences, each with
    the index in ``general`` of its first sentence.

    A message says one thing in a few sentences ("I went to a support group yesterday. It
    was so powerful."): kept together they make one self-contained statement, split they
    make fragments whose "it" points nowhere. A sentence that leans on an earlier one is
    kept only after a kept sentence; a statement holds at most MAX_STATEMENT_SENTENCES
    sentences, and a long message goes on in a next statement (its later sentences say
    other things: they were lost when only the first three were kept); a statement under
    MIN_STATEMENT_WORDS words says too little to remember.
    """
    out: list[tuple[_Hit, str, dt.date | None, int]] = []
    kept: list[tuple[_Hit, str, dt.date | None]] = []
    first = 0
    sep = "" if lang == "ja" else " "
    stop = "。" if lang == "ja" else "."

    def flush() -> None:
        if not kept:
            return
        text = sep.join(
            st.rstrip() + ("" if st.rstrip()[-1:] in ".!。！" else stop) for _, st, _ in kept
        )
        if _statement_size(text, lang, name) >= MIN_STATEMENT_WORDS or _EN_OFF_TO.search(text):
            when = next((w for _, _, w in kept if w is not None), None)
            out.append((kept[0][0], _short(text), when, first))
        kept.clear()

    for i, (hit, statement, when, leans) in enumerate(general):
        if leans and not kept:
            continue
        if not kept:
            first = i
        kept.append((hit, statement, when))
        if len(kept) == MAX_STATEMENT_SENTENCES:
            flush()
    flush()
    return out


FOLD_STATEMENT_WORDS = MIN_STATEMENT_WORDS + 1


def _joined(head: str, tail: str, lang: str) -> str:
    """``tail`` after ``head`` as the next sentence (a stop added unless ``head`` ends in
    one): a rule memory going on, a short memory folded into its neighbour."""
    h = head.rstrip()
    end = "" if h[-1:] in ".!…。！" else ("。" if lang == "ja" else ".")
    return f"{h}{end}{'' if lang == 'ja' else ' '}{tail.strip()}"


def _may_join(short: MemoryCandidate, other: MemoryCandidate) -> bool:
    """``short`` may fold into ``other``: the same subject, and no second date."""
    return other.subject == short.subject and (
        short.event_date is None or other.event_date in (None, short.event_date)
    )


def _fold_short(
    found: list[MemoryCandidate], at: Sequence[int], lang: str
) -> list[MemoryCandidate]:
    """One message's memories with each short one (at most FOLD_STATEMENT_WORDS content
    words, no attribute) joined to the memory of the same subject said just before it in
    the message (else just after).

    "I love cooking! My favorite recipe is Chicken Pot Pie. It's so cozy ...": two memories
    of one message, the first saying little on its own ("Audrey loves cooking!"); together
    they are one statement a reader takes in at once, and a short remainder of a long
    message ("Plus, I picked up a few new recipes!") stays beside what it adds to. A short
    memory alone in its message stays as it is, a memory with an attribute (employer,
    residence, ...) is never folded (supersession reads it), and a dated one joins only a
    memory of no other date ("I'm working late Thursday, but I'll make it to the concert on
    Saturday": two days, two commitments).
    """
    if len(found) < 2:
        return found
    order = sorted(range(len(found)), key=lambda i: (at[i], i))
    alive = list(order)
    for i in order:
        c = found[i]
        if c.attribute or _statement_size(c.text, lang, c.subject) > FOLD_STATEMENT_WORDS:
            continue
        pos = alive.index(i)
        before = [j for j in alive[:pos] if _may_join(c, found[j])]
        after = [j for j in alive[pos + 1 :] if _may_join(c, found[j])]
        if not before and not after:
            continue
        t = found[before[-1] if before else after[0]]
        head, tail = (t, c) if before else (c, t)
        t.text = _short(_joined(head.text, tail.text, lang))
        if t.event_date is None:
            t.event_date = c.event_date
        alive.remove(i)
    keep = set(alive)
    return [c for i, c in enumerate(found) if i in keep]


# "When I was younger, ..." dates a memory in the past; any other "when" may be hypothetical.
_EN_GENERAL_HYPO = re.compile(
    r"^(?:if|when(?!\s+(?:I|we)\s+was|\s+(?:I|we)\s+were)|once|unless|whether|wish|maybe|perhaps)\b",
    re.I,
)


def _en_clause_start_ok(s: str) -> bool:
    """Not a hypothetical or conditional clause ("If I win, ...")."""
    return not _EN_GENERAL_HYPO.match(s)


# 「今日は学生時代のお話がしたいな」: a wish about the conversation, not about the speaker
_JA_COURTESY_WISH = re.compile(r"お願い|聞きたい|知りたい|話(?:が|を)?したい|伺いたい|教えて")
# 「研究しようと思えばできますね」: what could be done, not a plan
_JA_COND = re.compile(r"もし|たら|れば|と思えば|なら(?!ず)|夢")
# 「将来、猫を飼ってみたいです」: what the speaker wants is theirs (not a conditional).
_JA_WISH_END = re.compile(
    r"(?:たい|たいな|たいです|たいですね|たいと思って(?:い)?(?:ます|る)|たいと思います|たいなと思って(?:い)?ます)"
    r"[。！!〜ー笑w…]*$"
)


def _ja_statement(s: str) -> _Hit | None:
    """The general Japanese rule: a declarative sentence about the speaker (or what they
    wish for: a preference)."""
    if _JA_REPORTED.search(s) or not _ja_first_person_ok(s, len(s)):
        return None
    if _JA_HYPO.search(s):
        s = ja_strip_lead(s)
        if _JA_COND.search(s) or not _JA_WISH_END.search(s) or len(s) < 8:
            return None
        if _JA_COURTESY_WISH.search(s):
            return None  # 「よろしくお願いしたいです」
        return _Hit("preference", "", "", 0.5, general=True)
    kind = ja_statement_kind(s)
    if kind is None or (kind == "plan" and _JA_PLAN_NOT.search(s)):
        return None  # 明日は予定なしです: no plan
    direction = _FUTURE if kind == "plan" else _PAST if kind == "event" else 0
    return _Hit(kind, "", "", 0.5, direction, general=True)


# ----------------------------------------------------------------------------- rule extractor


def _lang_of(text: str) -> str:
    return "en" if text.isascii() else detect_lang(text)
