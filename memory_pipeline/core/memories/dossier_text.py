"""Text helpers of the dossier fold: quotes into statements, dates in messages, whole words.

A dossier is a briefing, so a bullet must read as a statement about someone ("Maria got the
job at Hikari Design"), not as a copied chat line ("Maria: Guess what, I got the job ..."). The
memory extractor may already write statements; :func:`statement` leaves those alone and turns
a quoted line ("<speaker>: <message>") into one by rule: the speaker label and leading fillers
are dropped, English first and second person become names, Japanese first person becomes the
speaker and sentence-final particles are dropped. Rules, not a model: the result is
deterministic and never adds a fact the message did not state.

:func:`find_dates` finds explicit calendar days in a message ("the 23rd", "March 30",
"Saturday 23rd to Monday 25th", "3月20日", "17日") resolved forward from the message's date,
so the fold can collect what is coming up even when no memory was extracted for it.
"""

from __future__ import annotations

import datetime as dt
import re

from memory_pipeline.core.common.timelex import (
    MONTH_NUMBERS,
    MONTH_PATTERN,
    WEEKDAY_ABBREVIATIONS,
    WEEKDAY_PATTERN,
)
from memory_pipeline.core.memories.rewrite import LY_ADVERB

__all__ = [
    "booked_items",
    "compact_event",
    "cut_words",
    "disclosure_score",
    "find_dates",
    "information_value",
    "is_question",
    "sentences_of",
    "statement",
    "whole_word_title",
]

_JA = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")
_KANJI = re.compile(r"[\u4e00-\u9fff]")
_HIRAGANA = re.compile(r"[\u3040-\u309f]")
_EMOJI = re.compile(
    "[\U0001f000-\U0001faff\u2600-\u27bf\u2b00-\u2bff\ufe0f\u200d]+|"
    r"\((?:笑|泣)\)|[ｗw]{2,}$|(?<=\S)笑$"
)
_SPEAKER = re.compile(r"^(?P<who>[^:：\s][^:：]{0,40}?)[:：]\s+(?P<rest>.+)$", re.S)
_FILLER_EN = re.compile(
    r"^(?:(?:guess what|got everything|thank you so much|thanks so much|no way|oh my god|omg|"
    r"of course|thank you|thanks|got it|please|"
    r"okay important question|important question|ok(?:ay)?|yes|yeah|yep|yay|haha+|lol|oh|wow|"
    r"hey|hi|so|and|also|anyway|well|sure|perfect|great|amazing|nice|right|fair|deal|morning|"
    r"sorry|ah|noted|cool|reminder|big news(?: from [\w ]+)?)\b[\s,.!?:;~-]*)+",
    re.I,
)
_FILLER_JA = re.compile(
    r"^(?:(?:じゃあそれで|じゃあ|あと|えっと|そういえば|うん|そう|ありがとう|了解|やろう|いいね|"
    r"あ|え|まじで?|ほんと|よかった|OK|オッケー)[、。！!？?\s]*)+"
)
_FINAL_JA = re.compile(r"(?:んだ|よね|かな|ね|よ|わ|ぞ|な|の|ー|〜|~)*[。！!？?…\s]*$")
_SENTENCE_EN = re.compile(r"(?<!\bMr\.)(?<!\bMs\.)(?<!\bDr\.)(?<!\bMrs\.)(?<=[.!?])\s+")
_QUESTION = re.compile(r"[?？]\s*$")

# English pronouns of the speaker (S) and of the one spoken to (L, the other party).
_EN_SWAPS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p), r)
    for p, r in (
        (r"\bI(?:'m|’m| am)\b", "{S} is"),
        (r"\bI(?:'ve|’ve)\b", "{S} has"),
        (r"\bI(?:'ll|’ll)\b", "{S} will"),
        (r"\bI(?:'d|’d)\b", "{S} would"),
        (r"\b[Ll]et(?:'s|’s)\b", "{S} and {L} will"),
        (r"\b[Ww]e(?:'re|’re)\b", "{S} and {L} are"),
        (r"\b[Ww]e(?:'ll|’ll)\b", "{S} and {L} will"),
        (r"\b[Ww]e\b", "{S} and {L}"),
        (r"\b[Mm]y\b", "{S}'s"),
        (r"\b[Mm]ine\b", "{S}'s"),
        (r"\b[Mm]yself\b", "{S}"),
        (r"\b(?<![A-Za-z'])me\b", "{S}"),
        (r"\b[Oo]ur\b", "their"),
        (r"\bus\b", "{S} and {L}"),
        (r"\b[Yy]ou(?:'re|’re)\b", "{L} is"),
        (r"\b[Yy]ou(?:'ll|’ll)\b", "{L} will"),
        (r"\b[Yy]our\b", "{L}'s"),
        (r"\b[Yy]ou\b", "{L}"),
    )
)
# "I generally play": the -ly adverb stays and the verb after it agrees; "I didn't" is whole.
_I_VERB = re.compile(rf"\bI(?P<adv>\s+{LY_ADVERB})?\s+(?P<verb>[a-z]+)\b(?!['’])")
_I_ALONE = re.compile(r"\bI\b")
# After a name, these stay as they are ("Maria can", "Maria got"); others take -s.
_NO_S = frozenset(
    "can could will would should shall may might must did was had got went made took saw "
    "bought found left met sent told came gave paid thought knew felt kept lost won ran "
    "brought heard said sold spent taught wrote read put set cut let hit just also really "
    "still never always already often finally only even do does is are not".split()
)
_IRREGULAR = {"have": "has", "do": "does", "go": "goes", "am": "is", "be": "is"}
_PARTICLES = frozenset("のはがをにでともへやかねよなだ")  # after a noun: not a torn word
_JA_FIRST = re.compile(r"(?:私|わたし|あたし|俺|オレ|僕|ぼく|自分)(?P<p>は|が|も)?")


def is_question(text: str) -> bool:
    """A message that asks rather than states (ends with a question mark)."""
    return bool(_QUESTION.search(text.strip()))


def _third_person_verb(verb: str) -> str:
    if verb in _IRREGULAR:
        return _IRREGULAR[verb]
    if verb in _NO_S or verb.endswith("ed"):
        return verb
    if re.search(r"(?:s|sh|ch|x|z|o)$", verb):
        return verb + "es"
    if re.search(r"[^aeiou]y$", verb):
        return verb[:-1] + "ies"
    return verb + "s"


def _english(text: str, speaker: str, listener: str) -> str:
    text = _I_VERB.sub(lambda m: f"{{S}}{m['adv'] or ''} {_third_person_verb(m['verb'])}", text)
    for pattern, repl in _EN_SWAPS:
        text = pattern.sub(repl, text)
    text = _I_ALONE.sub("{S}", text)
    text = text.replace("{S}", speaker).replace("{L}", listener)
    return text[:1].upper() + text[1:]


def _japanese(text: str, speaker: str, listener: str) -> str:
    text = _FILLER_JA.sub("", text)
    if listener:
        text = re.sub(rf"^{re.escape(listener)}[、,!！\s]+", "", text)
    text = _JA_FIRST.sub(lambda m: speaker + (m["p"] or ""), text, count=1)
    sentences = [s for s in re.split(r"(?<=[。！!])", text) if s.strip()]
    body = "".join(
        _FINAL_JA.sub("", s) + ("。" if i < len(sentences) - 1 else "")
        for i, s in enumerate(sentences)
    )
    body = body.strip() or text.strip()
    if speaker and speaker not in body:
        body = f"{speaker}は{body}"
    return body


def statement(
    text: str,
    *,
    subject: str = "",
    owner: str = "",
    contact: str = "",
    speakers: tuple[str, ...] | list[str] = (),
) -> str:
    """A chat line as a statement; text that is not a quote ("<who>: ...") is returned as is.

    ``owner`` and ``contact`` name the two parties, so "you" in the contact's line becomes the
    owner and vice versa; ``speakers`` are further known senders (a group's members).
    Questions inside the quote are dropped when a statement remains.
    """
    text = " ".join(text.split())
    found = _SPEAKER.match(text)
    if not found:
        return text
    speaker, body = found["who"].strip(), found["rest"].strip()
    if speaker not in {owner, contact, subject, *speakers} and not subject:
        return text  # "Note: ..." or a time like "18:15" is not a speaker label
    listener = contact if speaker == owner else (owner or "you")
    body = _EMOJI.sub("", body).strip()
    if _JA.search(body):
        parts = [p for p in re.split(r"(?<=[。！!？?])", body) if p.strip()]
        kept = [p for p in parts if not is_question(p)] or parts
        return _japanese("".join(kept), speaker, listener)
    parts = [p.strip() for p in _SENTENCE_EN.split(body) if p.strip()]
    said = _english_sentences([p for p in parts if not is_question(p)], speaker, listener)
    if said:
        return said
    asked = _english_sentences([p for p in parts if is_question(p)], speaker, listener)
    if asked:
        return f"{speaker} asked: {asked[:1].lower() + asked[1:]}"
    return f"{speaker} said: {body}"


def _english_sentences(parts: list[str], speaker: str, listener: str) -> str:
    """The sentences with fillers dropped and persons replaced; those left with < 2 words go."""
    sentences = []
    for p in parts:
        p = _FILLER_EN.sub("", p).strip()
        p = re.sub(rf"^{re.escape(listener)}\b[!,.\s]*", "", p) if listener else p
        p = re.sub(r"\s*\blol\b\s*", " ", p).strip()
        if len(re.findall(r"\w+", p)) >= 2:
            sentences.append(_english(p, speaker, listener))
    return " ".join(sentences)


# -- dates --------------------------------------------------------------------------------------

_ORD = r"(?:st|nd|rd|th)"
_EN_DAY = (
    rf"(?:(?P<mon>{MONTH_PATTERN})\.?\s+(?:the\s+)?(?P<d1>\d{{1,2}}){_ORD}?\b"
    rf"|(?P<d2>\d{{1,2}}){_ORD}?\s+(?:of\s+)?(?P<mon2>{MONTH_PATTERN})\b"
    rf"|\b(?P<d3>\d{{1,2}}){_ORD}\b)"
)
_JA_DAY = r"(?:(?P<jm>\d{1,2})月)?(?P<jd>\d{1,2})日(?!間|分|前|後|ぶり)"
_DAY = re.compile(rf"{_EN_DAY}|{_JA_DAY}", re.I)
_WEEKDAYS = rf"(?:\s*(?:{WEEKDAY_PATTERN}|{'|'.join(WEEKDAY_ABBREVIATIONS)})\.?\s*)?"
_RANGE_SEP = re.compile(
    r"^\s*(?:\([^)]{0,8}\)|（[^）]{0,8}）)?\s*(?:to|until|till|through|-|–|〜|~|から)\s*", re.I
)


def _resolve(day: int, month: int | None, today: dt.date) -> dt.date | None:
    """The next date on or after ``today`` with that day (and month); None when impossible."""
    for offset in range(0, 13):
        y, m = today.year, (month or today.month)
        if month is None:
            m = today.month + offset
            y, m = y + (m - 1) // 12, (m - 1) % 12 + 1
        else:
            y += offset
        try:
            cand = dt.date(y, m, day)
        except ValueError:
            if month is not None:
                return None
            continue
        if cand >= today:
            return cand
        if month is not None and (today - cand).days <= 60:
            return None  # a recent past date ("I started on March 4"), not next year's
    return None


def find_dates(text: str, today: dt.date) -> list[tuple[dt.date, dt.date]]:
    """Explicit days in ``text`` on or after ``today`` as (start, end) spans, in text order.

    "Saturday 23rd to Monday 25th" is one span (23..25); a lone day is a one-day span.
    """
    found: list[tuple[int, int, dt.date]] = []
    for m in _DAY.finditer(text):
        mon = m["mon"] or m["mon2"]
        month = MONTH_NUMBERS.get(mon.lower().rstrip(".")) if mon else None
        if m["jd"]:
            month = int(m["jm"]) if m["jm"] else None
        day = int(m["d1"] or m["d2"] or m["d3"] or m["jd"])
        if not 1 <= day <= 31 or (month is not None and not 1 <= month <= 12):
            continue
        date = _resolve(day, month, today)
        if date is not None:
            found.append((m.start(), m.end(), date))
    spans: list[tuple[dt.date, dt.date]] = []
    i = 0
    while i < len(found):
        start, end, date = found[i]
        if i + 1 < len(found):
            between = text[end : found[i + 1][0]]
            nxt = found[i + 1][2]
            joined = _RANGE_SEP.match(re.sub(rf"^\s*(?:{_WEEKDAYS})?", "", between, flags=re.I))
            if joined and 0 < (nxt - date).days <= 14:
                spans.append((date, nxt))
                i += 2
                continue
        spans.append((date, date))
        i += 1
    return spans


_BOOKED_EN = (
    re.compile(r"\b(?:booked|reserved)\s+(?:the\s+|a\s+|our\s+|my\s+)?(?P<x>[A-Za-z][\w-]*)", re.I),
    re.compile(r"\b(?P<x>[A-Za-z][\w-]*)\s+(?:is\s+|are\s+)?(?:booked|reserved)\b", re.I),
)
_BOOKED_JA = re.compile(
    r"(?:「(?P<q>[^」]{1,20})」|(?P<j>[\u30a0-\u30ff\u4e00-\u9fff]{1,12}))(?:を|は|も|で)?"
    r"(?:予約した|予約済|予約しておいた|予約できた|取った|取れた)"
)
_BOOKED_STOP = frozenset("i we you he she they it just already finally also and".split())


def booked_items(text: str) -> list[str]:
    """What a message says was booked ("Shinkansen booked!", "I booked the ryokan: ...")."""
    if is_question(text):
        return []
    out = []
    for pattern in _BOOKED_EN:
        for m in pattern.finditer(text):
            item = m["x"].lower()
            if item not in _BOOKED_STOP and item not in out:
                out.append(item)
    for m in _BOOKED_JA.finditer(text):
        item = m["q"] or m["j"]
        if item not in out:
            out.append(item)
    return out


# -- whole words ----------------------------------------------------------------------------------


def cut_words(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters at a word (or Japanese phrase) boundary."""
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    if _JA.search(head[-1:]):
        cut = max(head.rfind(c) for c in "、。！？・ ）」")
    else:
        cut = head.rfind(" ")
    if cut >= limit // 2:
        head = head[: cut + (1 if head[cut] in "、。！？・）」" else 0)]
    return head.rstrip(" ,;:、") + "…"


def whole_word_title(title: str, texts: list[str]) -> str:
    """Repair Japanese title terms cut inside a word ("軍手持" from "軍手持って" -> "軍手").

    A term ending in a kanji that, everywhere the session says it, is followed by hiragana is
    a verb or adjective stem torn from its ending; the kanji is dropped (down to 2 chars).
    """
    if not _JA.search(title):
        return title
    joined = "\n".join(texts)

    def fix(term: str) -> str:
        while len(term) > 2 and _KANJI.fullmatch(term[-1]):
            hits = [m.end() for m in re.finditer(re.escape(term), joined)]
            if not hits or not all(
                i < len(joined) and _HIRAGANA.match(joined[i]) and joined[i] not in _PARTICLES
                for i in hits
            ):
                break
            term = term[:-1]
        return term

    return re.sub(r"[^：・（）、\s]+", lambda m: fix(m.group(0)), title)


# -- self-disclosures -----------------------------------------------------------------------------

_FIRST_EN = re.compile(r"\b(?:I|I'm|I’m|I've|I’ve|I'll|I’ll|I'd|my|we|we're|we've|our|me)\b")
_FIRST_JA = re.compile(r"私|わたし|あたし|俺|僕|ぼく|自分|うち")
_PAST_EN = re.compile(
    r"\b(?:\w{3,}ed|got|went|made|took|bought|found|met|began|started|joined|won|ran|saw|"
    r"gave|told|became|came|left|moved|finished|signed|just|finally|recently|last\s+\w+)\b",
    re.I,
)
_I_DID = re.compile(
    r"\b(?:I|we)\s+(?:just\s+|finally\s+|recently\s+|also\s+)?(?:\w+ed|got|went|made|took|"
    r"bought|found|met|began|started|joined|won|ran|saw|became|moved|finished|signed|have been|"
    r"had)\b|\b(?:my|our)\s+\w+",
    re.I,
)
_PLAN_EN = re.compile(r"\b(?:I'll|I’ll|I'm going to|I’m going to|planning|plan to|will)\b", re.I)
# A life change a statement names (what a person lists when asked what happened to them).
LIFE_EVENT = re.compile(
    r"\b(?:passed away|died|born|married|engaged|divorc\w*|adopt\w*|moved|started|opened|"
    r"launched|joined|bought|lost|quit|graduat\w*|won|finished|signed|promoted|accepted|"
    r"got (?:married|engaged|hired|promoted|accepted|into)|got (?:a |the |my )?(?:new |first )?"
    r"(?:job|promotion|degree|licen[cs]e|place|house|apartment|car|dog|puppy|cat)|"
    r"hired|injur\w*|broke|wedding|funeral|pregnan\w*|retired|proposed|surgery)\b"
    r"|始め|決まっ|結婚|婚約|引っ越|転職|入社|退職|卒業|入学|生まれ|亡くな|合格|買っ|付き合",
    re.I,
)
_EVENT_JA = re.compile(
    r"(?:した|しました|始めた|始めました|行った|行きました|買った|決まった|予定|つもり|です|ている|てます)"
)


def disclosure_score(sentence: str) -> int:
    """How much a sentence tells about its speaker: first person, an event or a plan, and
    specific words (names, long words); 0 for questions, fillers and short lines."""
    s = sentence.strip()
    if is_question(s):
        return 0
    if _JA.search(s):
        if len(s) < 8 or not (_FIRST_JA.search(s) or _EVENT_JA.search(s)):
            return 0
        event, first = bool(_EVENT_JA.search(s)), bool(_FIRST_JA.search(s))
        return 2 * event + 2 * first + min(len(s) // 8, 6)
    words = re.findall(r"[A-Za-z][\w'’-]*", s)
    if len(words) < 5 or not _FIRST_EN.search(s):
        return 0
    specific = sum(1 for w in words[1:] if w[:1].isupper() and w not in {"I", "I'm", "I've"})
    long_words = len({w.lower() for w in words if len(w) >= 5})
    past, plan = bool(_PAST_EN.search(s)), bool(_PLAN_EN.search(s))
    own = bool(_I_DID.search(s))  # "I started…", "my sister…": about the speaker
    about_listener = bool(re.search(r"\b(?:you|your)\b", s, re.I))  # about the other one
    return 3 * past + 2 * plan + 2 * specific + min(long_words, 8) + 3 * own - 3 * about_listener


def sentences_of(text: str) -> list[str]:
    """A message split into sentences (English or Japanese punctuation)."""
    text = " ".join(_EMOJI.sub("", text).split())
    if _JA.search(text):
        return [p for p in re.split(r"(?<=[。！!？?])", text) if p.strip()]
    return [p for p in _SENTENCE_EN.split(text) if p.strip()]


MIN_DISCLOSURE = 6  # below this a sentence says too little about its speaker to keep


# -- compact event lines -------------------------------------------------------------------

# A discourse opener before what happened ("As for Maria, ...", "On a different note, ...",
# "Check it out, ..."): it says how the news was told, not the news.
_OPENER_EN = re.compile(
    r"^(?:as for \w+|besides that|on a different note|by the way|btw|actually|anyway|plus|also|"
    r"so|oh|woah|whoa|wow|hey|man|look at that|check it out|guess what|good news|great news|"
    r"big news|crazy thing happened|(?:here's|here is) something [\w ]{0,40})"
    r"(?:\s+[A-Z][a-z]+)?\s*(?:,|!|--+|\s[-–—]\s?|-\s|—)\s*",
    re.I,
)
# A clause split off by a dash: "<how it was> - <what happened>", "<what happened> - <feeling>".
_DASH = re.compile(r"\s*(?:--+|\s[-–—]\s|—|(?<=\w)-\s)\s*")
# A closing feeling after the event: ", and it was awesome!", "- it was so rewarding!".
_FEELING_TAIL = re.compile(
    r"(?:,?\s+and|,)\s+it(?:'s| was| is| has been| felt)\s+(?:\w+\s+){0,3}\w+[!.]*$", re.I
)
# Emphasis that adds no fact ("Nate really enjoys" = "Nate enjoys"); not after a negation,
# where it does ("not really", "not just a hobby").
_EMPHASIS = re.compile(
    r"(?<!\bnot)(?<!n't)(?<!n’t)(?<!\bnever)\s+(?:really|actually|totally|definitely|truly|"
    r"literally|basically|seriously)\b(?=\s)",
    re.I,
)
_SPECIFIC = re.compile(r"(?<!^)(?<![.!?]\s)\b[A-Z][\w'’]*|\d")


def _specific_words(text: str, names: tuple[str, ...]) -> int:
    """Names (capitalized words past the first), numbers and dates, the people named aside."""
    people = {w for n in names for w in re.findall(r"\w+", n)} | {"I"}
    found = [m.group(0) for m in _SPECIFIC.finditer(text.strip())]
    return sum(1 for w in found if re.sub(r"['’]s$", "", w) not in people)


def compact_event(sentence: str, names: tuple[str, ...] = ()) -> str:
    """An English sentence as the clause that states what happened: a discourse opener
    ("As for Maria, ", "Good news - ") and a short clause of feeling before or after a dash
    ("Nate has been doing great - Nate won ...", "... at a shelter - it was so rewarding!")
    are dropped, so the line is shorter and carries the event. Why: a Timeline line is read
    at a glance, and its month holds a fixed number of characters; emphasis adverbs
    ("really", "actually") go too, unless they follow a negation. A clause is dropped only
    when it names nothing (no name, number or life change) and what stays has 5+ words (a
    dropped head is at most 6 words, and the clause kept after it names its person);
    Japanese is returned as is."""
    s = sentence.strip()
    if _JA.search(s):
        return s
    rest = _OPENER_EN.sub("", s, count=1).lstrip("-–— ")
    if len(rest.split()) >= 5:
        s = rest[:1].upper() + rest[1:]
    parts = [p for p in _DASH.split(s) if p.strip()]
    if len(parts) == 2:
        head, tail = parts
        told = any(n and n in tail for n in names)  # the tail says who did what
        if _plain(head, names) and len(head.split()) <= 6 and told and len(tail.split()) >= 5:
            s = tail[:1].upper() + tail[1:]
        elif _plain(tail, names) and len(tail.split()) <= 6 and len(head.split()) >= 5:
            s = head.rstrip(" ,;:") + ("" if head.rstrip()[-1:] in ".!?" else ".")
    tail = _FEELING_TAIL.search(s)
    if tail and len(s[: tail.start()].split()) >= 5:
        s = s[: tail.start()].rstrip(" ,;:") + "."
    return _EMPHASIS.sub("", s)


def _plain(clause: str, names: tuple[str, ...]) -> bool:
    """A clause that names nothing: no name, number or date, and no life change."""
    return not _specific_words(clause, names) and not LIFE_EVENT.search(clause)


_VAGUE_START = re.compile(r"^(?:it|that|this|those|these|they|there|here)\b(?:'s|’s)?", re.I)


def information_value(text: str, names: tuple[str, ...] = ()) -> int:
    """How much a statement tells a reader who was not there: names, numbers and dates
    (2 each), a named life change (4) and its distinct content words (up to 12); a line that
    opens on a pronoun ("That's why ...", "It was ...") or names no one of the people says
    less (-4). Why: a session says more than its Timeline keeps, and the kept lines should be
    the ones a person would list when asked what happened. Japanese: 0, so the caller's
    order stands (key events first, then by kind): these signals are English ones, and a
    length or life-change score lost a RealPersonaChat persona statement (0.276 -> 0.271)."""
    if _JA.search(text):
        return 0
    life = 4 if LIFE_EVENT.search(text) else 0
    people = {w.casefold() for n in names for w in re.findall(r"\w+", n)}
    words = {w.casefold() for w in re.findall(r"[A-Za-z][\w'’-]*", text) if len(w) >= 4}
    content = len({w for w in words if re.sub(r"['’]s$", "", w) not in people})
    named = any(n and n in text for n in names)
    vague = 4 if _VAGUE_START.match(text.strip()) or (names and not named) else 0
    return 2 * _specific_words(text, names) + life + min(content, 12) - vague
