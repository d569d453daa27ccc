"""Long-term memories from chat sessions: rule extraction, source validation, supersession.

A memory is one self-contained statement about a person (a fact, preference, plan, event,
relationship or possession) that cites the messages it came from. Extractors (the
deterministic rules here, or an LLM in ``memory_llm``) only *propose* candidates; every
candidate goes through the same source validation, so a memory can only cite messages of its
own session - hence of its own conversation and contact. Candidates that fail it are kept in
MEMORY_REJECTS for inspection and never become memories.

The rules favour precision over recall: a statement must be first person (or about a named
person) and declarative; questions, reactions ("so you live in Osaka?", 住んでるんですね),
reported speech, hypotheticals and non-text messages are skipped. Dates of plans and events
are resolved against the stating message's local time (see ``resolve_date``).
"""

from __future__ import annotations

import datetime as dt
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import pyarrow as pa

from memory_pipeline.core.common.ids import stable_id
from memory_pipeline.core.common.lang import detect_lang
from memory_pipeline.core.common.schema import MEMORIES, MEMORY_REJECTS, MEMORY_TIMELINE
from memory_pipeline.core.common.timelex import (
    JA_WEEKDAY_NUMBERS,
    JA_WEEKDAYS,
    MONTH_NUMBERS,
    MONTH_PATTERN,
    WEEKDAY_NUMBERS,
    WEEKDAY_PATTERN,
)
from memory_pipeline.core.memories.rewrite import (
    en_continuation_ok,
    en_is_reaction,
    en_resolve_dates,
    en_statement_kind,
    en_third_person,
    ja_statement_kind,
    ja_strip_lead,
    ja_third_person,
)

KINDS = ("fact", "preference", "plan", "event", "relationship", "possession")
RULES_METHOD = "rules"
MAX_TEXT_CHARS = 300

# Reject reasons (MEMORY_REJECTS.reason).
R_NO_SOURCE = "no_source"
R_UNKNOWN_MESSAGE = "unknown_message"
R_OUTSIDE_SESSION = "message_outside_session"
R_EMPTY_TEXT = "empty_text"
R_BAD_KIND = "bad_kind"
R_EXTRACTOR_ERROR = "extractor_error"


# ----------------------------------------------------------------------------- data types


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One message of a session as extractors see it."""

    message_id: str
    sender: str
    is_owner: bool
    ts: dt.datetime  # UTC
    local_ts: dt.datetime  # naive local wall time: relative dates resolve against it
    type: str
    text: str


@dataclass(frozen=True, slots=True)
class SessionMessages:
    """A session with its messages in session order: the unit every extractor works on."""

    session_id: str
    conversation_id: str
    contact_id: str
    local_date: dt.date
    messages: tuple[ChatMessage, ...]


@dataclass(slots=True)
class MemoryCandidate:
    """What an extractor proposes; it becomes a memory only if its sources validate.

    ``message_ids`` cite the stating message (and e.g. the question it answers).
    ``subject_is_owner=None`` lets ``extract_memories`` decide from the session's senders.
    """

    subject: str
    kind: str
    attribute: str
    value: str
    text: str
    message_ids: tuple[str, ...]
    event_date: dt.date | None = None
    lang: str = ""  # "" = detected from the text
    subject_is_owner: bool | None = None
    confidence: float = 0.5


@dataclass(slots=True)
class SessionExtraction:
    """An extractor's answer for one session; ``error`` when it could not extract."""

    candidates: list[MemoryCandidate] = field(default_factory=list)
    error: str | None = None


class MemoryExtractor(Protocol):
    """Anything that proposes memory candidates for one session (rules, an LLM)."""

    method: str

    def extract_session(self, session: SessionMessages) -> SessionExtraction: ...


# ----------------------------------------------------------------------------- dates

_MONTH_RX = f"(?:{MONTH_PATTERN})"
_WD_RX = f"(?:{WEEKDAY_PATTERN})"
_ORD = r"(?:st|nd|rd|th)"

_DATE_EN = re.compile(
    rf"""(?P<iso>\b\d{{4}}-\d{{2}}-\d{{2}}\b)
    |\b(?P<wdmod>this|next|last|coming)?\s*(?P<wd>{_WD_RX})s?\b
        (?:,?\s*(?:the\s+)?(?P<wddom>\d{{1,2}}){_ORD}\b
          |,?\s*(?P<wdmon>{_MONTH_RX})\.?\s+(?P<wdmd>\d{{1,2}})(?:{_ORD})?\b)?
    |\b(?P<mon>{_MONTH_RX})\.?\s+(?P<md>\d{{1,2}})(?:{_ORD})?\b(?!:)
    |\b(?P<md2>\d{{1,2}})(?:{_ORD})?\s+(?:of\s+)?(?P<mon2>{_MONTH_RX})\b
    |\bthe\s+(?P<dom>\d{{1,2}}){_ORD}\b
    |\b(?P<dayafter>the\s+day\s+after\s+tomorrow)\b
    |\b(?P<tomorrow>tomorrow|tmrw)\b
    |\b(?P<today>today|tonight|this\s+(?:morning|afternoon|evening))\b
    |\b(?P<yesterday>yesterday|last\s+night)\b
    |\b(?P<weekend>(?:this|the)\s+weekend)\b
    |\bin\s+(?P<inn>\d{{1,2}}|a|one|two|three|four|five|six|seven|a\s+couple\s+of)\s+
        (?P<inunit>days?|weeks?)\b
    |\b(?P<ago>\d{{1,2}}|a|one|two|three|four|five|six|seven)\s+(?P<agounit>days?|weeks?)\s+ago\b
    |\b(?P<vague>next\s+(?:week|month|year|weekend|summer|spring|fall|autumn|winter)
        |this\s+(?:week|month|year|summer|spring|fall|autumn|winter)
        |last\s+(?:week|month|year|weekend|summer|spring|fall|autumn|winter)
        |the\s+other\s+day|later\s+this\s+(?:week|month))\b
    """,
    re.I | re.X,
)
_EN_NUMS = {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7}

_DATE_JA = re.compile(
    r"(?P<md>(?<!\d)(?P<m>\d{1,2})月(?P<d>\d{1,2})日)"
    r"|(?P<slash>(?<![\d/:.])(?P<sm>1[0-2]|0?[1-9])/(?P<sd>[12]\d|3[01]|0?[1-9])(?![\d/:]))"
    r"|(?P<dom>(?<![\d月毎])(?P<dd>[12]\d|3[01]|0?[1-9])日(?![間目中本分]|に\d))"
    r"|(?P<dayafter>明後日|あさって)"
    r"|(?P<tomorrow>明日|あした|あす)"
    r"|(?P<today>今日|今夜|今晩|本日|今朝)"
    r"|(?P<yesterday>昨日|昨夜|きのう)"
    rf"|(?P<wdmod>来週の?|今週の?|先週の?|今度の)?(?<!毎週)(?<!毎週の)(?P<wd>[{JA_WEEKDAYS}])曜日?"
    r"|(?P<monfrom>(?<![\d毎])(?P<mf>1[0-2]|0?[1-9])月(?P<mfsuf>から|に入|中|末|上旬|中旬|下旬|頭)?)"
    r"|(?P<vague>再来週|来週|今週末|週末|来月|今週|今月|先週|先月|年末|夏休み|冬休み|連休)"
)

_FUTURE, _PAST = 1, -1


def _safe_date(y: int, m: int, d: int) -> dt.date | None:
    try:
        return dt.date(y, m, d)
    except ValueError:
        return None


def _month_day(today: dt.date, m: int, d: int, direction: int) -> dt.date | None:
    """The nearest month/day on or after (future) / on or before (past) ``today``."""
    for k in range(0, 5):
        y = today.year + k * direction
        cand = _safe_date(y, m, d)
        if cand is not None and (cand - today).days * direction >= 0:
            return cand
    return None


def _day_of_month(today: dt.date, d: int, direction: int) -> dt.date | None:
    y, m = today.year, today.month
    for _ in range(13):
        cand = _safe_date(y, m, d)
        if cand is not None and (cand - today).days * direction >= 0:
            return cand
        m += direction
        if m == 13:
            y, m = y + 1, 1
        elif m == 0:
            y, m = y - 1, 12
    return None


def _weekday(today: dt.date, wd: int, direction: int, mod: str) -> dt.date:
    """Next (future, strictly after today) or last (past, strictly before) such weekday.

    ``next``/``来週`` means the weekday of next calendar week only in Japanese (来週の土曜);
    English "next Saturday" is taken as the coming one, its most common reading in chat.
    """
    if mod.startswith("来週"):
        monday = today - dt.timedelta(days=today.weekday()) + dt.timedelta(days=7)
        return monday + dt.timedelta(days=wd)
    if mod.startswith("今週") or mod == "this" and direction == _FUTURE:
        monday = today - dt.timedelta(days=today.weekday())
        cand = monday + dt.timedelta(days=wd)
        if cand >= today:
            return cand
    if mod.startswith("先週"):
        monday = today - dt.timedelta(days=today.weekday()) - dt.timedelta(days=7)
        return monday + dt.timedelta(days=wd)
    delta = (wd - today.weekday()) % 7 or 7
    return (
        today + dt.timedelta(days=delta)
        if direction == _FUTURE
        else today - dt.timedelta(days=(today.weekday() - wd) % 7 or 7)
    )


def resolve_date(m: re.Match[str], today: dt.date, direction: int = _FUTURE) -> dt.date | None:
    """The calendar date a matched EN/JA date expression denotes, or None when it is a range.

    ``direction`` +1 (plans) reads year-less dates as the next such day on/after ``today``;
    -1 (events) as the last one on/before it. "next week", 来週, bare months are ranges: None,
    except 4月から (from April) which is the 1st of that month.
    """
    g = m.groupdict()
    if g.get("iso"):
        y, mo, d = map(int, g["iso"].split("-"))
        return _safe_date(y, mo, d)
    if g.get("md"):
        if g.get("m"):
            return _month_day(today, int(g["m"]), int(g["d"]), direction)
        return _month_day(today, MONTH_NUMBERS[g["mon"].lower()], int(g["md"]), direction)
    if g.get("md2"):
        return _month_day(today, MONTH_NUMBERS[g["mon2"].lower()], int(g["md2"]), direction)
    if g.get("slash"):
        return _month_day(today, int(g["sm"]), int(g["sd"]), direction)
    if g.get("wd"):
        if g.get("wddom"):
            return _day_of_month(today, int(g["wddom"]), direction)
        if g.get("wdmon"):
            return _month_day(today, MONTH_NUMBERS[g["wdmon"].lower()], int(g["wdmd"]), direction)
        wd = g["wd"]
        idx = JA_WEEKDAY_NUMBERS[wd] if wd in JA_WEEKDAY_NUMBERS else WEEKDAY_NUMBERS[wd.lower()]
        mod = (g.get("wdmod") or "").lower()
        if mod == "last":
            direction = _PAST
        return _weekday(today, idx, direction, mod)
    if g.get("dom"):
        return _day_of_month(today, int(g.get("dd") or g["dom"]), direction)
    if g.get("dayafter"):
        return today + dt.timedelta(days=2)
    if g.get("tomorrow"):
        return today + dt.timedelta(days=1)
    if g.get("today"):
        return today
    if g.get("yesterday"):
        return today - dt.timedelta(days=1)
    if g.get("weekend"):
        return today + dt.timedelta(days=(5 - today.weekday()) % 7)  # the coming Saturday
    if g.get("inn"):
        n = 2 if "couple" in g["inn"].lower() else _EN_NUMS.get(g["inn"].lower()) or int(g["inn"])
        return today + dt.timedelta(days=n * (7 if g["inunit"].lower().startswith("w") else 1))
    if g.get("ago"):
        n = _EN_NUMS.get(g["ago"].lower()) or int(g["ago"])
        if g["agounit"].lower().startswith("d"):
            return today - dt.timedelta(days=n)
        return None
    if g.get("monfrom") and g.get("mfsuf") == "から":
        mo = int(g["mf"])
        return _month_day(today, mo, 1, direction) if direction == _FUTURE else None
    return None


_PAST_EXPR = re.compile(r"^(?:last|the\sother|yesterday|先週|先月|昨日|昨夜|きのう)|ago$", re.I)


def _find_date(
    rx: re.Pattern[str], text: str, today: dt.date, direction: int
) -> tuple[bool, dt.date | None]:
    """(has a date expression, the most specific resolved date).

    Looking forward (plans), expressions that can only point back ("last year", 先週) do not
    count as a date expression.
    """
    found = False
    best: dt.date | None = None
    best_rank = 99
    for m in rx.finditer(text):
        if direction == _FUTURE and _PAST_EXPR.search(m[0].strip()):
            continue
        found = True
        name = m.lastgroup or ""
        g = m.groupdict()
        rank = (
            0
            if (g.get("md") or g.get("md2") or g.get("iso") or g.get("slash"))
            else (1 if (g.get("dom") or g.get("wddom") or g.get("wdmon")) else 2)
        )
        if name == "vague":
            rank = 5
        d = resolve_date(m, today, direction)
        if d is not None and rank < best_rank:
            best, best_rank = d, rank
    return found, best


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


# ----------------------------------------------------------------------------- English rules

_EN_TRIGGER = re.compile(
    r"\b(?:I|I'm|I’m|I've|I’ll|I'll|we|we'll|we're|let's|my|me|myself|mine|our|us|got|moved|"
    r"moving|been|started|went)\b",
    re.I,
)
_EN_QUESTION = re.compile(r"\?\s*$|\?")
# A clause must start where a new statement can start (not inside "if I ...", "you think I ...").
_EN_HYPO = re.compile(
    r"\b(?:if|wish|hope|hoping|unless|whether|would|could|maybe|perhaps|imagine|pretend|when|"
    r"once|until|before|after|dream|dreamed|dreaming|thought|think|guess|wonder|said|says|told|"
    r"wanted|want|wants|need|needed|should|can't believe|never)\b|\byou\b",
    re.I,
)
_I = r"(?:I|i)"
_WE = r"(?:[Ww]e)"
_IM = r"(?:I'm|I’m|I am|Im)"
_CAP_WORD = r"(?:[A-Z][\w&'’.-]*)"
_CAP_NAME = (
    rf"(?:(?:the\s)?{_CAP_WORD}(?:\s(?:of|and|&|de|du|la)\s{_CAP_WORD}|\s{_CAP_WORD}){{0,4}})"
)
_OCCUPATIONS = (
    r"teacher|nurse|doctor|physician|surgeon|engineer|designer|developer|programmer|student|"
    r"lawyer|attorney|accountant|artist|painter|illustrator|writer|author|novelist|poet|musician|"
    r"chef|cook|baker|photographer|scientist|researcher|consultant|barista|waiter|waitress|"
    r"bartender|cashier|firefighter|police officer|pilot|flight attendant|mechanic|electrician|"
    r"plumber|carpenter|farmer|architect|dentist|pharmacist|therapist|counselor|counsellor|"
    r"social worker|veterinarian|vet|librarian|professor|lecturer|tutor|coach|personal trainer|"
    r"athlete|dancer|singer|actor|actress|journalist|editor|analyst|entrepreneur|freelancer|"
    r"intern|paramedic|soldier|veteran|salesman|saleswoman|realtor|banker|translator|"
    r"interpreter|streamer|youtuber|influencer|game developer|data scientist|"
    r"basketball player|soccer player|football player|player|animator|filmmaker|"
    r"software engineer|web developer|ux designer|graphic designer|fashion designer"
)
_EN_JOB_IS = re.compile(
    rf"\b{_IM}\s(?:now\s|currently\s|still\s)?(?:a|an)\s(?P<title>(?:(?:full-time|part-time|"
    rf"freelance|professional|senior|junior|high\s?school|college|university|grad|graduate|"
    rf"[A-Z][\w-]*|[a-z]+)\s){{0,2}}(?:{_OCCUPATIONS}))\b(?!\s(?:friend|at heart|wannabe))",
)
_EN_WORK_AS = re.compile(
    rf"\b{_I}\s(?:currently\s|now\s|still\s)?work\sas\s(?:a|an)\s(?P<title>[a-zA-Z -]{{3,40}}?)"
    r"(?=$|[,.!;]|\s(?:at|for|in|and|but|so|now|since)\b)"
)
_EN_WORK_AT = re.compile(
    rf"\b{_I}\s(?:currently\s|now\s|still\s)?work\s(?:at|for)\s(?P<org>{_CAP_NAME})"
)
_EN_GOT_JOB = re.compile(
    rf"\b(?:{_I}|{_I}'ve|{_I}’ve)\s(?:just\s|finally\s|recently\s|officially\s)?"
    r"(?:got|landed|accepted|started|began|start|am starting|'m starting)\s"
    r"(?:a|the|my|an)\s(?:new\s|dream\s|first\s)?(?:job|position|role|internship)"
    r"(?:\s(?:as\s(?:an?\s)?(?P<title>[a-zA-Z ]{3,40}?)))?"
    rf"(?:\s(?:at|with)\s(?P<org>{_CAP_NAME}))?"
    r"(?=$|[,.!;]|\s(?:at|with|last|this|in|on|and|but|yesterday|today|recently)\b|\s[-–—])"
)
_EN_LIVE = re.compile(
    rf"\b(?:{_I}\s(?:currently\s|now\s|still\s)?live|{_IM}\s(?:currently\s|now\s)?living)\s"
    rf"in\s(?P<place>{_CAP_NAME})"
)
_EN_MOVED = re.compile(
    rf"\b(?:{_I}|{_WE})\s(?:just\s|recently\s|finally\s)?(?:moved|relocated)\s(?:back\s)?"
    rf"(?:to|into)\s(?P<place>{_CAP_NAME}|(?:a|an|my|our)\snew\s(?:place|apartment|house|"
    r"home|flat|city))",
)
_EN_MOVING = re.compile(
    rf"\b(?:{_IM}|[Ww]e're|[Ww]e are)\s(?:going\sto\smove|moving|relocating)\s(?:back\s)?to\s"
    rf"(?P<place>{_CAP_NAME})"
)
_EN_FROM = re.compile(
    rf"\b(?:{_IM}\s(?:originally\s)?from|{_I}\sgrew\sup\sin)\s(?P<place>{_CAP_NAME})"
)
_EN_AGE = re.compile(rf"\b{_IM}\s(?P<age>\d{{1,2}})\s(?:years?\sold|yrs?\sold|y/o)\b")
_EN_SCHOOL = re.compile(
    rf"\b(?:{_I}\s(?:go\sto|attend|study\sat)|{_IM}\s(?:a\s(?:student|freshman|sophomore|junior|"
    rf"senior)\sat|studying\s[a-z ]{{3,30}}\sat))\s(?P<school>{_CAP_NAME})"
)
_EN_STATUS = re.compile(
    rf"\b{_IM}\s(?:now\s|happily\s)?(?P<st>married|engaged|single|divorced|widowed)\b"
)
_EN_GOT_STATUS = re.compile(
    rf"\b(?:{_I}|{_WE})\s(?:just\s|finally\s|recently\s)?(?:got\s(?P<st>married|engaged|divorced)"
    r"|(?P<bu>broke\sup))\b"
)
_EN_DIET = re.compile(rf"\b{_IM}\s(?:a\s)?(?P<diet>vegetarian|vegan|pescatarian)\b")
_EN_ALLERGY = re.compile(
    rf"\b{_IM}\s(?:(?:very|super|really|also|so|deathly)\s)?allergic\sto\s"
    r"(?P<x>[a-z][a-z ,-]{2,40}?)(?=$|[.!;]|\s(?:and|but|so)\b)"
)
_EN_VOLUNTEER = re.compile(
    rf"\b(?:{_I}\s(?:still\s)?volunteer|{_IM}\s(?:still\s)?volunteering)\s(?:at|with|for)\s"
    r"(?P<org>(?:a|an|the|my)\s[a-z][a-z -]{2,40}?|[A-Z][\w' -]{2,40}?)"
    r"(?=$|[.,!;]|\s(?:and|but|so)\b)"
)
_SINGLE_REL = (
    "manager|boss|supervisor|wife|husband|boyfriend|girlfriend|partner|fiance|fiancee|fiancé|"
    "fiancée|mom|mother|dad|father|roommate|landlord|therapist|mentor|coach"
)
_MULTI_REL = (
    "sister|brother|son|daughter|best friend|friend|cousin|aunt|uncle|coworker|co-worker|"
    "colleague|neighbor|neighbour|grandma|grandmother|grandpa|grandfather|niece|nephew|"
    "teammate|classmate|kid|baby|stepdad|stepmom|stepson|stepdaughter"
)
_PETS = (
    "dog|dogs|cat|cats|puppy|puppies|kitten|kittens|turtle|turtles|bird|birds|parrot|hamster|"
    "hamsters|rabbit|rabbits|bunny|fish|snake|snakes|horse|horses|guinea pig|guinea pigs|"
    "lizard|gecko|tortoise"
)
_NOT_NAMES = frozenset(
    "I The A An So Very Super Really Always Also Just Still Such Quite Pretty Mom Dad My Our "
    "Your His Her Their And But Or Not Now Then Yes No Ok Okay Sure Thanks It This That".split()
)
_EN_REL = re.compile(
    rf"\b[Mm]y\s(?P<rel>{_SINGLE_REL}|{_MULTI_REL}|{_PETS})(?:'s\sname\sis|,?\s(?:named|called)"
    rf"|\sis\s(?:named|called)|\sis|,)?\s(?P<name>(?:(?:Ms|Mr|Mrs|Dr)\.?\s)?[A-Z][\w’'-]+"
    r"(?:\s[A-Z][\w’'-]+)?)(?![\w’'])"
)
_EN_HAVE_REL = re.compile(
    rf"\b{_I}\s(?:have|'ve\sgot|’ve\sgot)\s(?P<n>a|an|one|two|three|four|five|\d)\s"
    r"(?P<rel>kids?|children|sons?|daughters?|sisters?|brothers?|siblings?|grandkids?|"
    r"grandchildren|granddaughters?|grandsons?)\b"
)
_EN_HAVE_POSS = re.compile(
    rf"\b(?:{_I}\s(?:have|own|'ve\sgot|’ve\sgot)|we\s(?:have|own))\s(?P<n>a|an|one|two|three|"
    rf"four|five|\d|my\sown)\s(?:(?:new|little|big|pet|rescue|old|black|white|sweet|cute|"
    rf"[A-Z][a-z]+)\s){{0,2}}(?P<thing>{_PETS}|car|bike|motorcycle|house|apartment|condo|boat|"
    r"piano|guitar|garden|farm)\b(?!\s(?:shelter|food|park|walker|sitter|show|class|lesson|"
    r"ride|trip|wash|loan|payment|accident|seat|keys?|lessons?|bed|toy|friendly|store|race|"
    r"repair|insurance|dealer|party|tour|and\sa\s(?:half|bit)))"
)
_EN_ACQUIRE = re.compile(
    rf"\b(?:{_I}|{_WE})\s(?:just\s|finally\s|recently\s)?(?P<verb>adopted|bought|got|rescued)\s"
    rf"(?:a|an|another|my\sfirst|our\sfirst|a\snew|two|three)\s(?:(?:new|little|rescue|"
    rf"[a-z]+)\s){{0,2}}(?P<thing>{_PETS}|car|bike|motorcycle|house|apartment|condo|boat|"
    r"piano|guitar|camera|laptop)\b(?!\s(?:shelter|food|park|walker|sitter|toy|bed))"
)
_EN_GOT_ADOPTED = re.compile(r"\b(?P<name>[A-Z][a-z]+)\s(?:finally\s|just\s)?got\sadopted\b")
_EN_EVENT = re.compile(
    rf"\b(?:{_I}|{_WE})\s(?:just\s|finally\s|recently\s|officially\s)?(?P<ev>"
    r"graduated(?:\sfrom\s[A-Z][\w ]{2,40}?)?|passed\s(?:my|the|our)\s[a-z][\w ]{2,30}?"
    r"|won\s(?:a|an|the|first|second|third|my|our)\s[\w ]{2,40}?|got\spromoted"
    r"|had\s(?:a|our|my)\s(?:baby|son|daughter)|finished\s(?:my|our)\s(?:first\s)?"
    r"(?:marathon|degree|thesis|novel|book|album|painting)|ran\s(?:a|my\sfirst)\s[\w ]{2,30}?"
    r"|published\s(?:a|my|our)\s[\w ]{2,40}?|signed\s(?:a|the|my)\s(?:contract|deal|lease)"
    r"|opened\s(?:a|my|our)\s(?:own\s)?[\w ]{2,30}?|quit\smy\sjob|lost\smy\sjob"
    r"|got\sa\spromotion|joined\s(?:a|the)\s[\w ]{2,30}?\s(?:club|team|group|band|gym|class))"
    r"(?=$|[.,!;]|\s(?:and|but|so|last|this|yesterday|today|on|in|at)\b)"
)
_EN_PREF = re.compile(
    rf"\b(?:{_I}\s(?:really\s|absolutely\s|totally\s|just\s|also\s|still\s|truly\s|"
    r"genuinely\s|do\s|actually\s){0,2}(?P<verb>love|like|enjoy|adore|hate|prefer|dislike|"
    rf"can't\sstand|can’t\sstand)|{_IM}\s(?:really\s|totally\s|also\s)?(?P<verb2>obsessed\swith"
    r"|into|a\s(?:big\s|huge\s)?fan\sof|passionate\sabout))\s(?P<obj>[^.!?;:]{2,120})"
)
_EN_PREF_BAD_OBJ = re.compile(
    r"^(?:it|that|this|these|those|them|you|your|yours|him|her|how|what|when|where|who|why|"
    r"the\sway|the\sidea|to\s(?:hear|see|know|think)|hearing|seeing|the\ssound|that\sidea|"
    r"talking|chatting|our\s(?:talk|chat|convo)|us|it's|it’s|everything|anything|something|"
    r"both|all|each|lots|a\slot|so\smuch|too|very|more|less|most|least|the\sfact|reading"
    r"\syour|being\sable|having\syou|the\sphoto|the\spic|the\spicture|ur)\b",
    re.I,
)
_EN_FAV = re.compile(
    r"\b[Mm]y\s(?:all-time\s|absolute\s|new\s)?(?:favorite|favourite|fav)\s(?P<what>[a-z]+(?:\s"
    r"[a-z]+)?)\s(?:is|has\sto\sbe|would\sbe)\s(?P<val>[^.,!?;]{2,60})"
)
_EN_PLAN = re.compile(
    rf"\b(?:{_I}'ll|{_I}’ll|{_I}\swill|{_IM}\s(?:going\sto|gonna|planning\s(?:to|on))|{_I}"
    r"\splan\sto|[Ww]e'll|[Ww]e’ll|[Ww]e\swill|[Ww]e're\s(?:going\sto|gonna|planning\sto)|"
    r"[Ww]e’re\s(?:going\sto|gonna|planning\sto)|[Ww]e\sare\s(?:going\sto|planning\sto)|"
    r"[Ll]et's|[Ll]et’s|[Ww]e\sshould|(?:I|[Ww]e)\shave\sto|I'm\sstarting|I\sstart|I\sleave|"
    r"I'm\sleaving|"
    rf"{_I}\s(?:have|'ve\sgot|’ve\sgot)\s(?:a|an|my)\s(?:[\w-]+\s)?(?:shift|appointment|meeting|"
    rf"class|exam|test|interview|game|match|date|flight|concert|party|recital|trip)"
    rf"|{_IM}\s(?:flying|heading|traveling|travelling|visiting|hosting|attending|going|"
    r"meeting|seeing|taking|starting|leaving|playing|running|performing|working|bringing|"
    r"moving|going\sback))\b"
)
_EN_PLAN_NOT = re.compile(r"\b(?:never|not|n't|n’t|no)\b", re.I)
# "Oh, and btw - I've been ...", "Guess what - I got ...": the lead and its dash go.
_EN_LEAD = re.compile(
    r"^(?:(?i:and|also|oh|oh and|so|well|anyway|anyways|plus|but|yeah|yes|yep|yay|wow|haha+|"
    r"lol|hey|hi|omg|ok|okay|sure|right|btw|thanks|thank you|by the way|actually|"
    r"speaking of which|perfect|great|cool|nice|awesome|amazing)(?:[,!:.]|\s+[-–—])?\s+"
    # "Mel, ..." is a vocative; "Books, movies, and ..." is a list (not stripped)
    r"|[A-Z][a-z]+[,!:]\s+(?![a-z-]+(?:\s+[a-z-]+)?,?\s+(?:and|or)\s)"
    r"|(?i:you\swon['’]t\sbelieve\s(?:it|this)|guess\swhat|on\sanother\snote|fun\sfact)"
    r"\s*[-–—:,!]\s*)+",
)
# "I'll tell them.": a statement whose object is in another message goes on with nothing.
_EN_POINTS_BACK = re.compile(r"\b(?:it|them|her|him|that|this|one)\W*$", re.I)
_EN_THANKS_FOR = re.compile(
    r"^(?:\W*(?:and|oh|yeah|yes|wow|hey)\W+)*(?:thanks|thank\s+you|thx)\W*(?:so\s+much\W*|a\s+lot\W*)?"
    r"(?:for|,?\s*\w+\W*\s*for)\b",
    re.I,
)
# "..., I had a mentor too": a reaction or thanks before the comma says nothing; the clause
# after it, starting with the speaker, is the statement.
_EN_REACTION_CLAUSE = re.compile(r"^(?P<r>[^,;]{2,60}),\s+(?=(?:I|I['’](?:m|ve|ll)|my|we)\b)", re.I)
# "- pretty cool, huh?", ", right?": a tag question after a statement does not make it one.
_EN_AFTER_THANKS = re.compile(r"[,;:]\s+|\s*[-–—]\s*(?=(?:I|my|we|our)\b)")
# "I finished another pottery project - want to see a pic?": the question after the dash
# asks about the statement before it.
_EN_DASH_QUESTION = re.compile(r"\s+[-–—]+\s+[^-–—]*\?+\s*$")
_EN_TAG_QUESTION = re.compile(
    r"\s*(?:[-–—,]\s*)(?:pretty\s+\w+|right|huh|isn['’]t\s+it|don['’]t\s+you\s+think|"
    r"you\s+know|can\s+you\s+believe\s+it|crazy|cool)(?:,\s*(?:huh|right|eh))?\s*\?+$",
    re.I,
)


_EN_FIRST_WORD = re.compile(r"\b(?:I|I['’](?:m|ve|ll|d)|my|we|our)\b")


# "Here's a photo of my horse painting I did recently.": pointing at a photo of one's own
# life says what the speaker shared (and what the photo shows is theirs).
_EN_PHOTO = re.compile(
    r"^(?:here['’]?s|here\s+(?:is|are))\s+(?P<what>(?:a|an|the|my|our|some)\s+(?:[\w-]+\s+)?"
    r"(?:photos?|pics?|pictures?|snaps?|shots?|selfies?|peek)\b)",
    re.I,
)


def _en_shared_photo(s: str) -> str:
    """ "Here's a pic of my family" -> "I shared a pic of my family" when the photo is of the
    speaker's own life (a first person follows); other sentences unchanged."""
    m = _EN_PHOTO.match(s)
    if m is None or not _EN_FIRST_WORD.search(s, m.end()):
        return s
    return f"I shared {m['what']}{s[m.end() :]}"


def _en_statement_part(s: str) -> str:
    """``s`` without a leading reaction clause or a trailing tag question."""
    s = _EN_TAG_QUESTION.sub(".", s)
    if "?" in s and _EN_FIRST_WORD.search(s.split("?")[0].rsplit(" - ", 1)[0]):
        s = _EN_DASH_QUESTION.sub(".", s)
    m = _EN_REACTION_CLAUSE.match(s)
    if m is not None and en_is_reaction(m["r"]):
        s = s[m.end() :]
    return s


# What the speaker feels about the other person ("I'm so proud of you for ...", "Your support
# means a lot to me", "I admire what you do"): in a one-to-one chat "you" is the other person,
# so the sentence is a statement about the two of them, not a courtesy to drop.
_EN_ATTITUDE = re.compile(
    r"^(?:I(?:['’]m|\s+am)\s+(?:so\s+|really\s+|very\s+|super\s+|truly\s+|just\s+|always\s+)*"
    r"(?:proud\s+of\s+you|impressed\s+(?:by|with)\s+(?:you|your)|inspired\s+by\s+(?:you|your)|"
    r"(?:grateful|thankful)\s+(?:for|to)\s+(?:you|your|our)|rooting\s+for\s+you|"
    r"here\s+to\s+support\s+you|lucky\s+to\s+have\s+(?:you|a\s+friend)))\b"
    r"|^I\s+(?:really\s+|truly\s+|seriously\s+|totally\s+|so\s+|also\s+|do\s+)*"
    r"(?:admire|appreciate|value|respect)\s+(?:you|your|our|what\s+you|how\s+you)\b"
    r"|^(?:your|our)\s+(?:[\w'’-]+\s+){1,4}(?:means?|meant)\s+(?:a\s+lot|so\s+much|the\s+world|"
    r"everything)\s+to\s+me\b"
    r"|^your\s+(?:[\w'’-]+\s+){1,4}(?:really\s+)?(?:inspires?|inspired|motivates?|motivated|"
    r"keeps?\s+me\s+motivated|encourages?)\s+me\b",
    re.I,
)


# The words every thank-you shares: an attitude memory must say something beyond them.
_ATTITUDE_WORDS = frozenset(
    "proud impressed inspired inspires inspire inspiring grateful thankful rooting support "
    "supporting lucky friend friends friendship admire admires appreciate appreciates value "
    "respect means meant lot much world everything words kind help encouragement belief "
    "always here you your our thanks thank motivate motivates motivated motivating keeps keep "
    "encourages encourage truly seriously super totally".split()
)
MIN_ATTITUDE_WORDS = 1


def _en_attitude(s: str, name: str, other: str) -> str | None:
    """ "I appreciate our friendship too, Caroline." -> "Melanie appreciates Melanie and
    Caroline's friendship too.": an attitude to the other person, both named."""
    if _EN_ATTITUDE.match(s) is None:
        return None
    said = set(_content_words(s, name, other)) - _ATTITUDE_WORDS
    if len(said) < MIN_ATTITUDE_WORDS:
        return None  # "I appreciate your support": thanks, with nothing to remember
    s = re.sub(rf",\s*{re.escape(other)}\W*$", ".", s)
    s = re.sub(r"\bour\b", f"{name} and {other}'s", s, flags=re.I)
    return en_third_person(s, name, other)


def _en_clause_ok(sentence: str, start: int) -> bool:
    """The match starts a statement: no hypothetical/reported/you-words before it."""
    return not _EN_HYPO.search(sentence, 0, start)


_EN_EXCLAMATION = re.compile(r"^(?:\W*[\w'’]+){1,4}\W*!+\W*$")
_EN_TRAIL = re.compile(r"(?:\s+(?:lol|haha+|lmao|too|though|so much|a lot))+$", re.I)


def _en_value(text: str) -> str:
    return _EN_TRAIL.sub("", text.strip(" ,.;:!-")).rstrip("'’ ")


@dataclass(slots=True)
class _Hit:
    kind: str
    attribute: str
    value: str
    confidence: float
    date_direction: int = 0  # 0: no date; +1 plan-like; -1 event-like
    subject: str | None = None  # None = the sender
    require_date: bool = False
    future_only: bool = False
    general: bool = False  # the general statement rule: merged per message


def _en_rules(s: str) -> _Hit | None:
    """The first (highest-priority) English rule matching sentence ``s``."""
    for rx, build in _EN_RULES:
        for m in rx.finditer(s):
            if not _en_clause_ok(s, m.start()):
                continue
            hit = build(m)
            if hit is not None:
                return hit
    return None


def _got_job(m: re.Match[str]) -> _Hit | None:
    org, title = m["org"], m["title"]
    if org and org.split()[0] not in _NOT_NAMES:
        return _Hit("event", "employer", _en_value(org), 0.85, _PAST)
    if title:
        return _Hit("event", "job_title", _en_value(title), 0.8, _PAST)
    return _Hit("event", "", "new job", 0.7, _PAST)


def _rel(m: re.Match[str]) -> _Hit | None:
    rel, name = m["rel"].lower(), re.sub(r"['’]s?$", "", m["name"])
    first = name.split()[0].rstrip(".")
    if first in _NOT_NAMES or name in _NOT_NAMES:
        return None
    if re.match(r"\s(?:and|&)\s(?:I|me)\b", m.string[m.end() :]):
        return None  # "my girlfriend, Toby and I": a list, not an apposition
    if re.fullmatch(_PETS, rel):
        return _Hit("possession", "", f"{rel} {name}", 0.8)
    attr = rel.replace("fiancée", "fiance").replace("fiancé", "fiance").replace("fiancee", "fiance")
    attr = attr if re.fullmatch(_SINGLE_REL, rel) else ""
    return _Hit("relationship", attr, name, 0.85)


_EN_OBJ_END = re.compile(
    r"\s(?:but|because|since|cause|so|when|though|while|as|is|was)\s|\s[-–—]\s|\s(?:and|but)\s"
    r"(?=(?:it|that|this|they|he|she|I|we|my)\b)|,\s(?=(?:the|it|this|that|they|he|she|we|I|so|which"
    r"|but|it's|especially|because|escaping|and\s(?:it|I))\b)"
)
_EN_OBJ_VAGUE = re.compile(
    r"^(?:makes?|is|was|are|were|has|gives|brings|to\sdo|doing\sthat)\b|\b(?:them|it|that|this|those"
    r"|these|there|here)$|\b(?:that|those|this|these|them|it)\b|^(?:his|her|their|every\s?day|each)\b",
    re.I,
)


def _pref(m: re.Match[str]) -> _Hit | None:
    obj = _en_value(_EN_OBJ_END.split(m["obj"])[0])
    if _EN_PREF_BAD_OBJ.match(obj) or _EN_OBJ_VAGUE.search(obj):
        return None
    if obj.startswith("the ") and obj.islower():
        return None  # "the color and texture": of what is in another message
    if len(obj) < 3 or len(obj.split()) > 12:
        return None
    verb = (m["verb"] or m["verb2"] or "").lower()
    if verb == "like" and re.match(r"(?:to\s)?(?:a|the)?\s?(?:bit|lot)\b", obj):
        return None
    return _Hit("preference", "", obj, 0.8)


_EN_PLAN_VAGUE = re.compile(
    r"\s*(?:\w+\s){1,2}?(?:it|that|this|them)\b|\s*make\s(?:tomorrow|today)"
)


def _plan(m: re.Match[str]) -> _Hit | None:
    if _EN_PLAN_VAGUE.match(m.string, m.end()):
        return None  # "let's do it next month": what "it" is lives in another message
    return _Hit(
        "plan",
        "",
        "",
        0.75,
        _FUTURE,
        require_date=True,
        future_only="'m " in m[0] or "’m " in m[0] or " am " in m[0],
    )


def _status(m: re.Match[str]) -> _Hit:
    st = "single" if m.groupdict().get("bu") else m["st"].lower()
    return _Hit(
        "event" if "got" in m[0] or "broke" in m[0] else "fact",
        "relationship_status",
        st,
        0.85,
        _PAST,
    )


_EN_RULES: list[tuple[re.Pattern[str], Callable[[re.Match[str]], _Hit | None]]] = [
    (_EN_GOT_JOB, _got_job),
    (
        _EN_WORK_AT,
        lambda m: (
            _Hit("fact", "employer", _en_value(m["org"]), 0.85)
            if m["org"].split()[0] not in _NOT_NAMES
            else None
        ),
    ),
    (_EN_WORK_AS, lambda m: _Hit("fact", "job_title", _en_value(m["title"]), 0.8)),
    (_EN_JOB_IS, lambda m: _Hit("fact", "job_title", _en_value(m["title"]).lower(), 0.8)),
    (_EN_MOVING, lambda m: _Hit("plan", "residence", _en_value(m["place"]), 0.8, _FUTURE)),
    (
        _EN_MOVED,
        lambda m: _Hit(
            "event",
            "residence" if m["place"][0].isupper() else "",
            _en_value(m["place"]),
            0.8,
            _PAST,
        ),
    ),
    (_EN_LIVE, lambda m: _Hit("fact", "residence", _en_value(m["place"]), 0.85)),
    (_EN_FROM, lambda m: _Hit("fact", "hometown", _en_value(m["place"]), 0.8)),
    (_EN_SCHOOL, lambda m: _Hit("fact", "school", _en_value(m["school"]), 0.8)),
    (_EN_AGE, lambda m: _Hit("fact", "age", m["age"], 0.8)),
    (_EN_GOT_STATUS, _status),
    (_EN_STATUS, _status),
    (_EN_DIET, lambda m: _Hit("fact", "diet", m["diet"].lower(), 0.8)),
    (_EN_ALLERGY, lambda m: _Hit("fact", "", f"allergic to {_en_value(m['x'])}", 0.8)),
    (_EN_VOLUNTEER, lambda m: _Hit("fact", "", f"volunteers at {_en_value(m['org'])}", 0.75)),
    (
        _EN_GOT_ADOPTED,
        lambda m: (
            _Hit("event", "", "got adopted", 0.75, _PAST, subject=m["name"])
            if m["name"] not in _NOT_NAMES
            else None
        ),
    ),
    (_EN_EVENT, lambda m: _Hit("event", "", _en_value(m["ev"]), 0.75, _PAST)),
    (_EN_ACQUIRE, lambda m: _Hit("event", "", m[0].split(None, 1)[1], 0.75, _PAST)),
    (_EN_REL, _rel),
    (_EN_HAVE_REL, lambda m: _Hit("relationship", "", f"{m['n']} {m['rel']}", 0.8)),
    (_EN_HAVE_POSS, lambda m: _Hit("possession", "", f"{m['n']} {m['thing']}", 0.75)),
    (
        _EN_FAV,
        lambda m: _Hit(
            "preference", "favorite_" + m["what"].replace(" ", "_"), _en_value(m["val"]), 0.8
        ),
    ),
    (_EN_PREF, _pref),
    (_EN_PLAN, _plan),
]


# ----------------------------------------------------------------------------- Japanese rules

_JA_TRIGGER = re.compile(
    r"住ん|引っ越|引越|働い|勤め|転勤|就職|入社|転職|退職|好き|嫌い|苦手|ハマ|はま|飼|持って|予定"
    r"|つもり|結婚|合格|買|彼氏|彼女|夫|妻|旦那|嫁|上司|後輩|先輩|子供|子ども|娘|息子|生まれ|卒業"
    r"|独身|既婚|明日|明後日|あした|来週|週末|曜|日|月|[おこそとのほもよろごぞどぼぽ]う"
    r"|出身|趣味|好物|ことが多|てみたい"
)
_JA_QUESTION = re.compile(
    r"[?？]|(?:か|かな|かね|かしら|っけ|の|ん)[。！!〜ー…w笑]*$|(?:です|ます|でしょう|ません|ました"
    r"|んです|のです)か"
)
_JA_REACTION = re.compile(
    r"(?:んです|のです|んだ|のだ|なんです|なのです|んですって|てるん|でるん|ているん|でいるん)"
    r"(?:ね|か)|ですって|(?:いらっしゃ|されて|なさって|おられ)|ということ|ってこと"
)
_JA_REPORTED = re.compile(
    r"って(?:言|い)っ|と(?:言|い)っ|らしい|そうです|(?<![てで])みたいです|だって|とのこと"
    # hearsay: 「…って聞いたことがあります」 is what the speaker heard, not about them
    r"|って聞|と聞い|と聞き|とか聞"
    # 「お休みの日は割と家事してくれますね」: the other person does it (for the speaker)
    r"|てくれ(?:ます|る|まし|てい|てる)"
)
_JA_HYPO = re.compile(
    r"もし|たら|れば|と思えば|なら(?!ず)|たい(?:です|な|けど|と)|ほしい|欲しい|夢"
)
_OTHER_SUBJ = re.compile(
    r"(?:あなた|そちら|お宅|貴方|君|<[A-Z]{2}>|[\w・]{1,8}さん|夫|妻|主人|旦那|嫁|彼氏|彼女|彼|姉|兄|弟|妹"
    r"|父|母|親|両親|息子|娘|子供|子ども|子|友達|友人|友だち|同僚|上司|祖母|祖父|おばあちゃん"
    r"|おじいちゃん|家族|夫婦|みんな|皆|周り|先輩|後輩|奥さん|義母|義父|孫)(?:さん|ちゃん|くん)?"
    r"(?:は|も|が|の(?!で|に))"
)
_FIRST_PERSON = re.compile(r"(?:私|わたし|僕|ぼく|俺|おれ|自分|うち|あたし|わたくし)(?:は|も|が)")
_NOUN = r"[一-龥々〆ヵヶァ-ヴーA-Za-z0-9・＆&]"
# A noun run; kanji okurigana (唐揚げ, 焼き鳥) may continue it, other hiragana ends it.
_NOUN_WORD = rf"{_NOUN}+(?:(?<=[一-龥])[げきみしりけ]{_NOUN}*)?"
_NOUN_CHUNK = rf"(?:{_NOUN_WORD}の)?{_NOUN_WORD}"
# Predicate tails after the verb stem: present/continuing statements only, optional softeners.
_TAIL = (
    r"(?:ん?です|んだ|の|ので|から|けど|けれど|が|し|よ|ね|な|わ|さ|ー|〜|笑|w|ｗ|。|！|!|、|,|\s|…"
    r"|\.|よね|ですよ|ますよ|ますね|んですよ|んですけど|んですが)*$"
)
_IRU = r"(?:い(?:ます|る)|ます|る|おります)"
_JA_LIVE = re.compile(rf"(?P<place>{_NOUN_CHUNK})に住ん(?:で{_IRU}|でる|でます){_TAIL}")
_JA_MOVE = re.compile(
    rf"(?:(?P<from>{_NOUN}+)から)?(?P<place>{_NOUN}+)(?:に|へ)引っ?越(?:す|します|した|しました"
    rf"|してきた|してきました|すこと|すことになった|すことになりました|し(?:の)?予定|すつもり)(?!たい){_TAIL}"
)
_JA_WORK = re.compile(
    rf"(?P<org>{_NOUN_CHUNK})で(?:働いて|勤めて|勤務して|パートして|バイトして){_IRU}{_TAIL}"
)
_JOB_SUFFIX = (
    r"(?:員|師|士|医|者|マン|職|業|生|アルバイト|パート|エンジニア|デザイナー|ナース|講師|教員|主婦|主夫"
    r"|プログラマー|ライター|トレーナー)"
)
_JA_JOB = re.compile(
    rf"(?:仕事は|職業は|(?:私|僕|俺|自分|わたし)は)(?P<job>{_NOUN}*{_JOB_SUFFIX})"
    r"(?:です|だ|をしています|をしてます|やってます|をやっています)"
)
_JA_TRANSFER = re.compile(
    rf"(?:(?P<name>{_NOUN}{{1,6}}?)(?P<hon>さん|くん|君|ちゃん|先輩|先生)?(?:が|は|も))?"
    rf"(?:(?P<when>\d{{1,2}}月)から)?(?P<place>{_NOUN}+)(?:に|へ)転勤"
)
_JA_NEWJOB = re.compile(
    rf"(?P<org>{_NOUN_CHUNK})(?:に|へ)(?P<what>就職|入社|転職)(?:しました|した|します|する|が決まり"
    r"ました|が決まった|決まった|決まりました|することになりました|することになった)"
)
_JA_PREF = re.compile(
    rf"(?P<obj>{_NOUN_CHUNK})(?:が|も|は)?(?:大|一番|特に|すごく|とても|結構|少々|少し|ちょっと|かなり|本当に|めっちゃ|超)?(?P<p>好き|大好き|嫌い"
    r"|大嫌い|苦手|大好物|好物)(?:です|だ|なんです|なんだ|なの|で(?![しは])|。|！|!|$|、|よ|ね|w|笑|ー)"
)
_JA_FROM = re.compile(
    rf"(?P<place>{_NOUN_CHUNK})(?:の)?出身(?:です|だ|で|なんです|なので|。|！|!|$)"
    rf"|生まれ(?:は|も)(?P<born>{_NOUN_CHUNK})(?:で|です|だ|、|。|$)"
    rf"|(?P<at>{_NOUN_CHUNK})(?:で|に)生まれ(?:ました|た|て|育ち|育った)"
)
_JA_PREF_ACT = re.compile(
    r"(?P<act>[一-龥ぁ-んァ-ヴー々]{1,24}?[うくぐすつぬぶむるた](?:こと|の))(?:が|も|は)"
    r"(?:大|一番|特に|すごく|とても|本当に)?(?P<p>好き|大好き|嫌い|苦手|趣味)"
)
_JA_HOBBY = re.compile(
    r"趣味は(?P<obj>[^、。！？!?\s]{2,20}?)(?:です|だ|で|かな|とか|、|。|！|!|$)"
)
_JA_HOOKED = re.compile(
    rf"(?P<obj>{_NOUN_CHUNK})(?:に|へ)(?:ハマ|はま)って(?:い)?(?:ます|る|ますね|て|て、){_TAIL}"
)
_JA_PET = re.compile(
    rf"(?P<obj>{_NOUN_WORD})(?:を|も)?(?:[\d一二三四五六七八九十]+(?:匹|羽|頭))?飼って(?:い)?(?:ます|る)"
    rf"{_TAIL}"
)
_JA_OWN = re.compile(
    r"(?P<obj>車|バイク|自転車|一軒家|持ち家|マンション|ピアノ|別荘|家)を?持って(?:い)?(?:ます|る)"
    + _TAIL
)
_JA_HAVE_REL = re.compile(
    r"(?P<rel>彼氏|彼女|夫|妻|旦那|嫁|子供|子ども|娘|息子|姉|兄|弟|妹|孫)(?:さん)?が"
    r"(?P<num>\d+人|一人|二人|三人|四人|ひとり|ふたり)?(?:い(?:ます|る)|おります)" + _TAIL
)
_JA_STATUS = re.compile(
    r"(?P<st>結婚して(?:い)?(?:ます|る)|既婚(?:です|者です)|独身(?:です|だ))" + _TAIL
)
_JA_EVENT = re.compile(
    rf"(?:(?P<obj>{_NOUN_CHUNK})(?:に|を|が))?(?P<ev>合格|結婚|卒業|就職|退職|出産|入籍|婚約|購入)"
    r"(?:しました|した|できました|できた)(?!ら|い|ら)" + _TAIL
)
_JA_BOUGHT = re.compile(
    rf"(?P<obj>{_NOUN_CHUNK})を(?:買い?ました|買った|購入しました|購入した)(?:んです)?(?:よ|！|!|。|$)"
)
_JA_NAMED_EVENT = re.compile(
    rf"(?P<name>{_NOUN}{{1,6}}?)(?P<hon>さん|くん|君|ちゃん|先輩|先生)(?:の|が|は)(?P<ev>結婚|婚約|出産|転勤)"
)
_JA_BIRTHDAY = re.compile(
    rf"(?:(?P<name>{_NOUN}{{1,6}}?)(?P<hon>さん|くん|君|ちゃん|先輩|先生)?|(?P<me>私|僕|俺|自分))の誕生日"
    r"(?:は|も|が)?(?:(?P<m>\d{1,2})月)?(?P<d>\d{1,2})日"
)
_JA_PLAN_MARK = re.compile(
    r"予定|つもり|(?:[一-龥][ぁ-ん]?[こごとよろもぼ]|しよ|やろ|[渡話返探貸試回残干]そ|ましょ)う"
    r"(?:か(?![?？])|よ|ね|！|!|。|〜|ー|w|笑|$)"
    r"|ましょう|(?:行く|いく|来る|くる|帰る|会う|渡す|送る|買う|書く|手伝う|参加する|する|やる|出かける"
    r"|持って行く|持っていく|遊ぶ|泊まる|観る|見る|食べる|飲む|行ける)(?:ね|よ|わ|から)?[！!。〜ー笑w]*$"
    r"|(?:行きます|来ます|帰ります|会います|渡します|送ります|買います|書きます|します|やります"
    r"|出かけます|遊びます|泊まります)(?:ね|よ)?[！!。〜ー笑w]*$"
    r"|(?:てくる|てきます|ておく|ておきます|とく|ときます|てくるね|ておくね|とくね)"
)
_JA_PLAN_NOT = re.compile(
    r"(?:予定|つもり)(?:でした|だった)|ない|ません|なかった|なし|無し|毎日|毎週|毎月|毎年|いつも|よく|ありがとう|おめでとう|おはよう"
    r"|思う|だろう|よろしく|宜しく|お願い|失礼|おやすみ|こんにちは|はじめまして|初めまして"
)
_KIN = frozenset("夫 妻 主人 旦那 嫁 彼氏 彼女 姉 兄 弟 妹 父 母 息子 娘 子供 子ども 孫".split())
_NOT_JA_NAMES = frozenset(
    "私 僕 俺 自分 うち 会社 職場 仕事 家族 友達 友人 みんな 皆 誰 "
    "今 今日 来月 先月 今年 来年 去年 "
    "彼 彼女 父 母 夫 妻 人 方 上司 同僚 子供 子ども".split()
)


_NOT_A_NAME = re.compile(r"(?:女優|俳優|芸能人|歌手|選手|有名人|人|者|家|員|会社|店|先|方)$")


def _ja_first_person_ok(s: str, start: int) -> bool:
    """No other person is the explicit subject before the predicate at ``start``."""
    return not _OTHER_SUBJ.search(s, 0, start)


_JA_TIME_PREFIX = re.compile(
    r"^(?:この前|少し前|先日|最近|昨日|今日|こないだ|前|今|昔|先週|先月|去年)(?:に|は)?"
)
_JA_VAGUE = frozenset(
    "所 場所 地域 県内 市内 近く 近所 辺 辺り 方 隣 同じ 一番 大 結構 特に 本当 "
    "全部 全員 超 割と 最近 昔 今 実は 元々 普通 物 もの 事 こと 何 どれ どこ それ これ "
    "あれ 色々 いろいろ みんな 皆 子 人 大変 苦手 好き 嫌い 一緒 一人 自分 私 僕 俺 彼 "
    "彼女 前 次 他 あと 後 中 外 時 日 結局 必死 少々 少し かなり 本当に めっちゃ".split()
)
_JA_SINGLE_OK = frozenset(
    "犬 猫 亀 魚 鳥 蛇 酒 海 山 肉 夏 冬 春 秋 雨 雪 本 花 車 虫 米 茶 麺 服 靴 家".split()
)
_JA_BAD_PART = re.compile(r"苦手|好き|嫌い|大変|必死|一生懸命|元気|笑顔|全力|仕事")


def _ja_specific(value: str) -> bool:
    """A value worth remembering: not vague (所, 物), not a truncated word, not a kin word."""
    if not value or value in _JA_VAGUE or value in _KIN or _JA_BAD_PART.search(value):
        return False
    return len(value) > 1 or value in _JA_SINGLE_OK


_JA_PRONOUN_PREFIX = re.compile(r"^(?:私|僕|俺|自分)(?:は|も)?")
_JA_OBJ_TAIL = re.compile(r"(?:の方|大|私|僕|俺|自分|一番|特に)+$")


def _ja_obj(obj: str) -> str:
    obj = _JA_TIME_PREFIX.sub("", _JA_OBJ_TAIL.sub("", obj))
    obj = _JA_PRONOUN_PREFIX.sub("", obj)
    return obj.strip("・ ").lstrip("ー")


def _ja_rules(s: str) -> _Hit | None:
    """The first Japanese rule matching normalized sentence ``s`` (a statement)."""
    b = _JA_BIRTHDAY.search(s) if "誕生日" in s else None
    if b is not None and (b["me"] or b["name"] not in _NOT_JA_NAMES):
        day = f"{b['m']}月{b['d']}日" if b["m"] else f"{b['d']}日"
        subject = None if b["me"] else b["name"] + (b["hon"] or "")
        return _Hit("fact", "birthday", day, 0.75, subject=subject)
    m = None
    if any(k in s for k in _NAMED_KEYS):
        m = _JA_NAMED_EVENT.search(s) or _JA_TRANSFER.search(s)
    if (
        m is not None
        and m.groupdict().get("name")
        and m["name"] not in _NOT_JA_NAMES
        and not _NOT_A_NAME.search(m["name"])
    ):
        name = m["name"] + (m["hon"] or "")
        if m.re is _JA_TRANSFER:
            return _Hit("event", "work_location", m["place"], 0.8, _FUTURE, subject=name)
        if not _JA_REPORTED.search(s) or m["ev"] == "結婚":
            attr = "relationship_status" if m["ev"] in ("結婚", "婚約") else ""
            return _Hit("event", attr, m["ev"], 0.7, _PAST, subject=name)
    reported = _JA_REPORTED.search(s) is not None
    hypo = _JA_HYPO.search(s) is not None
    if reported or hypo:
        return None
    for rx, build in _JA_RULES:
        if not any(k in s for k in _JA_RULE_KEYS[rx]):
            continue
        m = rx.search(s)
        if m is None or not _ja_first_person_ok(s, m.start()):
            continue
        hit = build(m)
        if hit is not None:
            return hit
    if _JA_PLAN_MARK.search(s) and not _JA_PLAN_NOT.search(s):
        return _Hit("plan", "", "", 0.65, _FUTURE, require_date=True)
    return None


def _ja_pref(m: re.Match[str]) -> _Hit | None:
    obj = _ja_obj(m["obj"])
    if not _ja_specific(obj) or obj in _NOT_JA_NAMES:
        return None
    return _Hit("preference", "", f"{obj}が{m['p']}", 0.75)


def _ja_from(m: re.Match[str]) -> _Hit | None:
    place = _ja_obj(m["place"] or m["born"] or m["at"] or "")
    if not _ja_specific(place) or place in _NOT_JA_NAMES:
        return None
    return _Hit("fact", "hometown", place, 0.8)


def _ja_pref_act(m: re.Match[str]) -> _Hit | None:
    act = _ja_obj(m["act"])
    if len(act) < 4 or _JA_BAD_PART.search(act):
        return None  # 「見るのが好き」 says what; 「るのが好き」 is a cut word
    return _Hit("preference", "", f"{act}が{m['p']}", 0.75)


def _ja_event(m: re.Match[str]) -> _Hit | None:
    ev, obj = m["ev"], _ja_obj(m["obj"] or "")
    if not _ja_specific(obj):
        if ev in ("合格", "購入", "卒業"):
            return None
        obj = ""
    attr = "relationship_status" if ev in ("結婚", "婚約", "入籍") else ""
    value = f"{obj}{'に' if ev == '合格' else 'を' if ev == '購入' else ''}{ev}" if obj else ev
    return _Hit("event", attr, value, 0.75, _PAST)


def _ja_move(m: re.Match[str]) -> _Hit | None:
    if not _ja_specific(m["place"]):
        return None
    return _Hit("event", "residence", m["place"], 0.8, _PAST)


def _ja_transfer_self(m: re.Match[str]) -> _Hit | None:
    name = m["name"]
    if name and name not in ("私", "僕", "俺", "自分", "わたし"):
        return None
    return _Hit("event", "work_location", m["place"], 0.8, _FUTURE)


_JA_RULES: list[tuple[re.Pattern[str], Callable[[re.Match[str]], _Hit | None]]] = [
    (
        _JA_LIVE,
        lambda m: _Hit("fact", "residence", m["place"], 0.8) if _ja_specific(m["place"]) else None,
    ),
    (_JA_MOVE, _ja_move),
    (_JA_TRANSFER, _ja_transfer_self),
    (_JA_NEWJOB, lambda m: _Hit("event", "employer", m["org"], 0.8, _PAST)),
    (
        _JA_WORK,
        lambda m: _Hit("fact", "employer", m["org"], 0.75) if _ja_specific(m["org"]) else None,
    ),
    (_JA_JOB, lambda m: _Hit("fact", "job_title", m["job"], 0.75)),
    (
        _JA_STATUS,
        lambda m: _Hit("fact", "relationship_status", "独身" if "独身" in m["st"] else "既婚", 0.8),
    ),
    (_JA_EVENT, _ja_event),
    (
        _JA_HAVE_REL,
        lambda m: _Hit(
            "relationship",
            "partner" if m["rel"] in ("彼氏", "彼女", "夫", "妻", "旦那", "嫁") else "",
            m["rel"] + (m["num"] or ""),
            0.75,
        ),
    ),
    (
        _JA_PET,
        lambda m: (
            _Hit("possession", "", f"{m['obj']}を飼っている", 0.75)
            if _ja_specific(m["obj"]) and len(m["obj"]) <= 12
            else None
        ),
    ),
    (_JA_OWN, lambda m: _Hit("possession", "", f"{m['obj']}を持っている", 0.75)),
    (
        _JA_BOUGHT,
        lambda m: (
            _Hit("event", "", f"{_ja_obj(m['obj'])}を買った", 0.7, _PAST)
            if _ja_specific(_ja_obj(m["obj"]))
            else None
        ),
    ),
    (
        _JA_HOOKED,
        lambda m: (
            _Hit("preference", "", f"{_ja_obj(m['obj'])}にハマっている", 0.75)
            if _ja_specific(_ja_obj(m["obj"]))
            else None
        ),
    ),
    (_JA_PREF_ACT, _ja_pref_act),
    (_JA_PREF, _ja_pref),
    (
        _JA_HOBBY,
        lambda m: (
            _Hit("preference", "hobby", m["obj"], 0.75)
            if _ja_specific(m["obj"]) or len(m["obj"]) > 2
            else None
        ),
    ),
    (_JA_FROM, _ja_from),
]
# Substrings a sentence must contain for a rule to be tried: most sentences skip every regex.
_NAMED_KEYS = ("結婚", "婚約", "出産", "転勤")
_JA_RULE_KEYS: dict[re.Pattern[str], tuple[str, ...]] = {
    _JA_LIVE: ("住ん",),
    _JA_MOVE: ("越",),
    _JA_TRANSFER: ("転勤",),
    _JA_NEWJOB: ("就職", "入社", "転職"),
    _JA_WORK: ("働いて", "勤めて", "勤務して", "パートして", "バイトして"),
    _JA_JOB: ("仕事は", "職業は", "は"),
    _JA_STATUS: ("結婚して", "既婚", "独身"),
    _JA_EVENT: ("合格", "結婚", "卒業", "就職", "退職", "出産", "入籍", "婚約", "購入"),
    _JA_HAVE_REL: ("がい", "がお", "人い", "人お", "りい"),
    _JA_PET: ("飼って",),
    _JA_OWN: ("持って",),
    _JA_BOUGHT: ("買", "購入"),
    _JA_HOOKED: ("ハマって", "はまって"),
    _JA_PREF: ("好き", "嫌い", "苦手", "好物"),
    _JA_PREF_ACT: ("ことが", "のが", "ことも", "のも", "ことは", "のは"),
    _JA_HOBBY: ("趣味は",),
    _JA_FROM: ("出身", "生まれ"),
}

# Session-level: "XからYだっけ？" asked about someone who announced a move, answered "そう".
_JA_MOVE_ANNOUNCE = re.compile(r"引っ?越")
_JA_FROM_TO = re.compile(
    rf"(?P<from>{_NOUN}+)から(?P<to>{_NOUN}+)(?:に|へ)?(?:引っ?越|だっけ|でしょ|だよね)"
)
_AFFIRM = re.compile(
    r"^(?:そう|うん|はい|ええ|そうそう|そうだよ|そうです|yes|yeah|yep|right)", re.I
)


def _dated_plan(hit: _Hit, s: str, date_rx: re.Pattern[str], today: dt.date, lang: str) -> bool:
    """A plan rule's hit holds: the sentence dates it, in the future, and is not negated."""
    has_date, when = _find_date(date_rx, s, today, hit.date_direction or 1)
    if not has_date or (lang == "en" and _EN_PLAN_NOT.search(s)):
        return False
    if hit.future_only and (when is None or when <= today):
        return False
    return when is None or when >= today  # a past date in a plan sentence dates something else


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


_EN_ANAPHORA = re.compile(
    r"^(?:it|it['’]s|that['’]s|they|they['’]re|he|she|them|there|so)\b"
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


class RuleMemoryExtractor:
    """Deterministic EN/JA memory rules (no model, no I/O): the offline default."""

    method = RULES_METHOD

    def extract_session(self, session: SessionMessages) -> SessionExtraction:
        """Candidates for one session, in message order."""
        out: list[MemoryCandidate] = []
        msgs = session.messages
        used_move: set[str] = set()
        senders = {m.sender for m in msgs if m.sender}
        for i, msg in enumerate(msgs):
            if msg.type != "text" or not msg.text:
                continue
            text = msg.text
            lang = _lang_of(text)
            if lang == "ja":
                if not _JA_TRIGGER.search(text):
                    continue
                move = self._ja_confirmed_move(msgs, i)
                if move is not None:
                    out.append(move)
                    used_move.update(move.message_ids)
                    continue
                if msg.message_id in used_move:
                    continue
            elif not _EN_TRIGGER.search(text):
                continue
            others = senders - {msg.sender}
            other = next(iter(others)) if len(others) == 1 else None
            out.extend(self._message(msg, lang, other))
        return SessionExtraction(out)

    def _message(
        self, msg: ChatMessage, lang: str, other: str | None = None
    ) -> list[MemoryCandidate]:
        today = msg.local_ts.date()
        found: list[MemoryCandidate] = []
        cleaned = _clean(msg.text)
        sentences = _sentences(cleaned, lang)
        general: list[tuple[_Hit, str, dt.date | None, bool]] = []
        general_at: list[int] = []  # the sentence index of each ``general`` entry
        found_at: list[int] = []  # the sentence index of each ``found`` candidate
        anaphoric = _ja_anaphoric if lang == "ja" else _en_anaphoric
        last_general = -2  # index of the sentence last added to ``general``
        context: tuple[int, str] = (-2, "")  # the last sentence that could be an antecedent
        last_rule = (-2, -1)  # (sentence index, index in ``found``) of the last rule memory
        for n, raw in enumerate(sentences):
            if lang == "ja":
                s = unicodedata.normalize("NFKC", raw)
                if _JA_QUESTION.search(s) or _JA_REACTION.search(s):
                    continue
                hit = _ja_rules(s)
                if hit is None:
                    hit = _ja_statement(s)
                date_rx = _DATE_JA
            else:
                if _EN_THANKS_FOR.match(raw):
                    # "Thanks for having my back": a courtesy, not a statement; what follows a
                    # comma or dash ("thanks for asking, we got another cat") may be one.
                    after = _EN_AFTER_THANKS.search(raw)
                    if after is None:
                        continue
                    raw = raw[after.end() :]
                s = _EN_LEAD.sub("", raw) if raw[:1] != "I" else raw
                s = _en_subjectless(_en_statement_part(s))
                if _EN_QUESTION.search(s):
                    continue
                s = _en_shared_photo(s)
                attitude = _en_attitude(s, msg.sender, other) if other and msg.sender else None
                if attitude is not None:
                    found.append(
                        MemoryCandidate(
                            subject=msg.sender,
                            kind="relationship",
                            attribute="",
                            value="",
                            text=_short(attitude),
                            message_ids=(msg.message_id,),
                            lang=lang,
                            subject_is_owner=msg.is_owner,
                            confidence=0.6,
                        )
                    )
                    found_at.append(n)
                    continue
                hit = _en_rules(s)
                if hit is None:
                    hit = _en_statement(s)
                date_rx = _DATE_EN
                if hit is None and en_continuation_ok(s) and not _en_anaphoric(s):
                    context = (n, s)  # may name what a following "It ..." points at
                if hit is None and last_general == n - 1 and _EN_EXCLAMATION.match(s):
                    # "We went to the beach. It was awesome! The kids had a blast.": a short
                    # exclamation says nothing, but the statement goes on after it.
                    last_general = n
                    continue
                if (
                    hit is None
                    and last_general == n - 1
                    and en_continuation_ok(s)
                    and not _EN_POINTS_BACK.search(general[-1][1])
                ):
                    # "I went to the beach. The kids had a blast.": the sentence right after a
                    # statement goes on with it; kept only with it (it leans).
                    statement = en_resolve_dates(s, today)[0]
                    statement = en_third_person(statement, msg.sender, other)
                    general.append((_Hit("fact", "", "", 0.5, general=True), statement, None, True))
                    general_at.append(n)
                    last_general = n
                    continue
                if (
                    hit is None
                    and last_rule[0] == n - 1
                    and en_continuation_ok(s)
                    and not _EN_POINTS_BACK.search(found[last_rule[1]].text)
                ):
                    # "I got a puppy two weeks ago! Her name's Coco.": a rule's statement goes
                    # on in the next sentence just as a general one does.
                    more = en_third_person(en_resolve_dates(s, today)[0], msg.sender, other)
                    kept = found[last_rule[1]]
                    kept.text = _short(_joined(kept.text, more, lang))
                    last_rule = (n, last_rule[1])
                    continue
            if hit is None:
                continue
            event_date = None
            if hit.require_date and not _dated_plan(hit, s, date_rx, today, lang):
                # not a dated plan: it may still be a plain statement ("We're gonna take the
                # dogs to the park.")
                hit = _ja_statement(s) if lang == "ja" else _en_statement(s)
                if hit is None:
                    continue
            if hit.date_direction or hit.require_date:
                has_date, event_date = _find_date(date_rx, s, today, hit.date_direction or 1)
                if hit.kind == "event" and event_date is not None and event_date > today:
                    hit.kind = "plan"
            subject = hit.subject or msg.sender
            if not subject:
                continue
            if lang == "ja":
                statement = s
                if hit.kind == "plan" and len(statement) < 20 and n > 0:
                    prev = unicodedata.normalize("NFKC", sentences[n - 1])
                    if len(prev) >= 6:  # "了解!" adds nothing; "いちご送ったよ。" says what arrives
                        statement = prev + statement
                statement = (
                    ja_third_person(statement, msg.sender, other) if msg.sender else statement
                )
            else:
                statement, day = en_resolve_dates(s, today)
                if event_date is None and day is not None and hit.kind in ("event", "plan"):
                    event_date = day
                statement = en_third_person(statement, msg.sender, other) if msg.sender else s
            if hit.general:
                leans = anaphoric(s)
                if leans and not general and lang == "en" and context[0] == n - 1:
                    # "Flowers bring joy. They remind me of my wedding.": the sentence before
                    # says what "they" are; it opens the statement.
                    ctx = en_third_person(en_resolve_dates(context[1], today)[0], msg.sender, other)
                    general.append((hit, ctx, None, False))
                    general_at.append(n - 1)
                general.append((hit, statement, event_date, leans))
                general_at.append(n)
                last_general = n
                continue
            statement = _short(statement)
            if lang == "en":
                last_rule = (n, len(found))
            found_at.append(n)
            found.append(
                MemoryCandidate(
                    subject=subject,
                    kind=hit.kind,
                    attribute=hit.attribute,
                    value=hit.value,
                    text=statement,
                    message_ids=(msg.message_id,),
                    event_date=event_date,
                    lang=lang,
                    subject_is_owner=msg.is_owner if hit.subject is None else None,
                    confidence=hit.confidence,
                )
            )
        for merged in _merge_statements(general, lang, msg.sender):
            hit, statement, event_date, first = merged
            found_at.append(general_at[first])
            found.append(
                MemoryCandidate(
                    subject=msg.sender,
                    kind=hit.kind,
                    attribute="",
                    value="",
                    text=statement,
                    message_ids=(msg.message_id,),
                    event_date=event_date,
                    lang=lang,
                    subject_is_owner=msg.is_owner,
                    confidence=hit.confidence,
                )
            )
        return _fold_short(found, found_at, lang)

    @staticmethod
    def _ja_confirmed_move(msgs: Sequence[ChatMessage], i: int) -> MemoryCandidate | None:
        """健太「引っ越しの日決まった！3月20日」 Yuki「高円寺から武蔵小杉だっけ？」 健太「そう。」.

        A move announced by one sender, whose destination the other asks back and the
        announcer confirms: the residence memory cites all three messages.
        """
        ann = msgs[i]
        text = unicodedata.normalize("NFKC", ann.text)
        if not _JA_MOVE_ANNOUNCE.search(text) or _JA_QUESTION.search(text.split("!")[0]):
            return None
        today = ann.local_ts.date()
        has_date, when = _find_date(_DATE_JA, text, today, _FUTURE)
        for j in range(i + 1, min(i + 4, len(msgs))):
            q = msgs[j]
            if q.sender == ann.sender or q.type != "text":
                continue
            qt = unicodedata.normalize("NFKC", q.text)
            m = _JA_FROM_TO.search(qt)
            if m is None or not _JA_QUESTION.search(qt):
                return None
            for k in range(j + 1, min(j + 3, len(msgs))):
                a = msgs[k]
                if a.sender != ann.sender or a.type != "text":
                    continue
                if not _AFFIRM.match(unicodedata.normalize("NFKC", a.text).strip()):
                    return None
                kind = "plan" if when is not None and when > a.local_ts.date() else "event"
                when_txt = f"{when.month}月{when.day}日に" if when is not None else ""
                return MemoryCandidate(
                    subject=ann.sender,
                    kind=kind,
                    attribute="residence",
                    value=m["to"],
                    text=f"{ann.sender}: {when_txt}{m['from']}から{m['to']}へ引っ越し",
                    message_ids=(ann.message_id, q.message_id, a.message_id),
                    event_date=when if has_date else None,
                    lang="ja",
                    subject_is_owner=ann.is_owner,
                    confidence=0.8,
                )
            return None
        return None


# ----------------------------------------------------------------------------- extraction

_SESSION_COLS = ("session_id", "conversation_id", "contact_id", "local_date", "message_ids")
_MESSAGE_COLS = ("message_id", "sender", "is_owner", "ts", "local_ts", "type", "text")


def _session_inputs(
    sessions: pa.Table, messages: pa.Table
) -> tuple[list[dict], dict[str, ChatMessage]]:
    rows = sessions.select(list(_SESSION_COLS)).to_pylist()
    cols = {c: messages.column(c).to_pylist() for c in _MESSAGE_COLS if "ts" not in c}
    # Arrow's timestamp -> datetime conversion is ~6x slower than building them from ints.
    for c, tz in (("ts", dt.UTC), ("local_ts", None)):
        us = messages.column(c).cast(pa.int64()).to_pylist()
        epoch = dt.datetime(1970, 1, 1, tzinfo=tz)
        cols[c] = [None if x is None else epoch + dt.timedelta(microseconds=x) for x in us]
    by_id = {
        mid: ChatMessage(mid, sender or "", bool(own), ts, lts, typ or "", text or "")
        for mid, sender, own, ts, lts, typ, text in zip(
            *(cols[c] for c in _MESSAGE_COLS), strict=True
        )
    }
    return rows, by_id


def _validate(
    c: MemoryCandidate, known: dict[str, ChatMessage], in_session: frozenset[str]
) -> str | None:
    """Why ``c`` cannot be stored, or None: every cited message must exist in this session."""
    if not c.message_ids:
        return R_NO_SOURCE
    if any(mid not in known for mid in c.message_ids):
        return R_UNKNOWN_MESSAGE
    if any(mid not in in_session for mid in c.message_ids):
        return R_OUTSIDE_SESSION
    if c.kind not in KINDS:
        return R_BAD_KIND
    if not (c.text or "").strip():
        return R_EMPTY_TEXT
    return None


def memory_id(session_id: str, c: MemoryCandidate) -> str:
    """Content-derived id: the same statement in the same session always gets the same id."""
    return stable_id("mem", session_id, c.kind, c.attribute, c.text, *c.message_ids)


def extract_memories(
    sessions: pa.Table,
    messages: pa.Table,
    *,
    extractor: MemoryExtractor | None = None,
    owner: str | None = None,
) -> tuple[pa.Table, pa.Table]:
    """(MEMORIES, MEMORY_REJECTS) for ``sessions``; ``messages`` holds at least theirs.

    ``extractor=None`` uses the rules. Every candidate is validated against its own session
    (see ``_validate``); ``valid_from`` is the time of the latest cited message, so no
    extractor can date a memory itself. ``owner`` (a sender name) also marks memories about
    the owner that were stated by someone else. Output is sorted by session order, then the
    position of the stating message, then id; duplicate ids within a session are dropped.
    """
    extractor = extractor or RuleMemoryExtractor()
    rows, by_id = _session_inputs(sessions, messages)
    method = extractor.method
    mem: list[tuple[tuple, dict]] = []
    rej: list[tuple[tuple, dict]] = []
    for s_idx, srow in enumerate(rows):
        mids = srow["message_ids"] or []
        in_session = frozenset(mids)
        pos = {mid: k for k, mid in enumerate(mids)}
        chat = tuple(by_id[m] for m in mids if m in by_id)
        session = SessionMessages(
            srow["session_id"],
            srow["conversation_id"],
            srow["contact_id"],
            srow["local_date"],
            chat,
        )
        owners = {m.sender for m in chat if m.is_owner and m.sender}
        if owner:
            owners.add(owner)
        result = extractor.extract_session(session)
        base = {
            "session_id": session.session_id,
            "contact_id": session.contact_id,
            "local_date": session.local_date,
        }
        if result.error:
            rej.append(
                (
                    (s_idx, -1, ""),
                    {
                        **base,
                        "kind": "",
                        "text": "",
                        "message_ids": [],
                        "method": method,
                        "reason": f"{R_EXTRACTOR_ERROR}: {result.error}"[:500],
                    },
                )
            )
        seen: set[str] = set()
        for c in result.candidates:
            c.message_ids = tuple(str(x) for x in c.message_ids)
            reason = _validate(c, by_id, in_session)
            if reason is not None:
                rej.append(
                    (
                        (s_idx, len(mids), c.text or ""),
                        {
                            **base,
                            "kind": c.kind,
                            "text": c.text or "",
                            "message_ids": list(c.message_ids),
                            "method": method,
                            "reason": reason,
                        },
                    )
                )
                continue
            text = c.text.strip()[:MAX_TEXT_CHARS]
            c.text = text
            mid = memory_id(session.session_id, c)
            if mid in seen:
                continue
            seen.add(mid)
            stating = max(c.message_ids, key=lambda x: pos[x])
            is_owner = c.subject_is_owner
            if is_owner is None or (owner and c.subject == owner):
                is_owner = c.subject in owners
            mem.append(
                (
                    (s_idx, pos[stating], mid),
                    {
                        "memory_id": mid,
                        "contact_id": session.contact_id,
                        "conversation_id": session.conversation_id,
                        "session_id": session.session_id,
                        "local_date": session.local_date,
                        "subject": c.subject,
                        "subject_is_owner": bool(is_owner),
                        "kind": c.kind,
                        "attribute": c.attribute or "",
                        "value": c.value or "",
                        "text": text,
                        "lang": c.lang or _lang_of(text),
                        "valid_from": max(by_id[x].ts for x in c.message_ids),
                        "event_date": c.event_date,
                        "message_ids": sorted(c.message_ids, key=pos.__getitem__),
                        "method": method,
                        "confidence": float(c.confidence),
                    },
                )
            )
    mem.sort(key=lambda p: p[0])
    rej.sort(key=lambda p: p[0])
    return (
        pa.Table.from_pylist([r for _, r in mem], schema=MEMORIES),
        pa.Table.from_pylist([r for _, r in rej], schema=MEMORY_REJECTS),
    )


# ----------------------------------------------------------------------------- supersession


def _norm_value(v: str | None) -> str:
    return unicodedata.normalize("NFKC", v or "").casefold().strip()


def supersede(memories: pa.Table) -> pa.Table:
    """MEMORY_TIMELINE: each single-valued memory closed by the next one with another value.

    Within (contact_id, subject, attribute), attribute != "", ordered by (valid_from,
    memory_id): a memory gets ``valid_to`` = the valid_from of the first later memory whose
    value differs (NFKC/case-insensitive) and ``superseded_by`` = its id. A restated equal
    value supersedes nothing, so both stay valid (and both are closed by the next change).
    Nothing is deleted. Output is sorted by (contact_id, valid_from, memory_id), so input
    order never matters.

    Whole-column Arrow and numpy (every refresh supersedes every memory of the corpus: a
    Python dict per memory was ~1.5 CPU s of a night); :func:`supersede_rows` is the
    row-by-row definition, kept for inputs the columns cannot order as Python would (a
    null sort key) and as the reference the tests compare with.
    """
    import numpy as np
    import pyarrow.compute as pc

    table = memories.select(MEMORIES.names).cast(MEMORIES)
    keys = ("contact_id", "valid_from", "memory_id")
    if table.num_rows == 0 or any(table.column(k).null_count for k in keys):
        return supersede_rows(memories)
    order = pc.sort_indices(table, [(k, "ascending") for k in keys])  # stable
    table = table.take(order).combine_chunks()
    n = table.num_rows
    single = pc.not_equal(table.column("attribute").fill_null(""), "").fill_null(False)
    rows = np.flatnonzero(single.to_numpy(zero_copy_only=False))
    target = np.full(n, -1, dtype=np.int64)  # the row that closes each row, -1: none
    if len(rows):
        # group codes (null is a value of its own, as in a Python tuple key), then a stable
        # sort by group: each group's rows keep the (valid_from, memory_id) order above
        codes = [
            table.column(c)
            .take(pa.array(rows))
            .combine_chunks()
            .dictionary_encode(null_encoding="encode")
            for c in ("contact_id", "subject", "attribute")
        ]
        codes = [np.asarray(c.indices.to_numpy(zero_copy_only=False), np.int64) for c in codes]
        grouped = np.lexsort(codes[::-1])  # contact, then subject, then attribute
        g = rows[grouped]
        key = [c[grouped] for c in codes]
        values = (
            table.column("value").take(pa.array(g)).fill_null("").combine_chunks()
        ).dictionary_encode()
        norm_of: dict[str, int] = {}  # each distinct value normalized once
        norm_code = np.array(
            [
                norm_of.setdefault(_norm_value(v), len(norm_of))
                for v in values.dictionary.to_pylist()
            ]
            or [0],
            dtype=np.int64,
        )
        norm = norm_code[values.indices.to_numpy(zero_copy_only=False)]
        m = len(g)
        same = np.zeros(m, dtype=bool)
        same[1:] = (key[0][1:] == key[0][:-1]) & (key[1][1:] == key[1][:-1])
        same[1:] &= key[2][1:] == key[2][:-1]
        # a change: the value differs from the one before it in the same group; a row is
        # closed by the first change after it, if that change is still in its group
        changes = np.flatnonzero(same & np.r_[False, norm[1:] != norm[:-1]])
        starts = np.flatnonzero(~same)
        group_end = np.r_[starts[1:], m][np.cumsum(~same) - 1]
        at = np.searchsorted(changes, np.arange(m), side="right")
        nxt = np.append(changes, m)[at]
        closed = nxt < group_end
        target[g[closed]] = g[nxt[closed]]
    pick = pa.array(np.maximum(target, 0), mask=target < 0)
    return pa.Table.from_arrays(
        [
            *table.columns,
            table.column("valid_from").take(pick),
            table.column("memory_id").take(pick),
        ],
        schema=MEMORY_TIMELINE,
    ).combine_chunks()


def supersede_rows(memories: pa.Table) -> pa.Table:
    """:func:`supersede`, row by row (the definition; see there)."""
    rows = memories.select(MEMORIES.names).to_pylist()
    rows.sort(key=lambda r: (r["contact_id"], r["valid_from"], r["memory_id"]))
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for r in rows:
        r["valid_to"] = None
        r["superseded_by"] = None
        if r["attribute"]:
            groups.setdefault((r["contact_id"], r["subject"], r["attribute"]), []).append(r)
    for group in groups.values():
        nxt: dict | None = None  # the nearest later memory with a value different from r's
        for k in range(len(group) - 1, -1, -1):
            r = group[k]
            if k + 1 < len(group):
                later = group[k + 1]
                if _norm_value(later["value"]) != _norm_value(r["value"]):
                    nxt = later
            if nxt is not None:
                r["valid_to"] = nxt["valid_from"]
                r["superseded_by"] = nxt["memory_id"]
    return pa.Table.from_pylist(rows, schema=MEMORY_TIMELINE)


def as_of(timeline: pa.Table, when: dt.datetime) -> pa.Table:
    """Memories valid at ``when`` (tz-aware): valid_from <= when < valid_to (or open)."""
    if when.tzinfo is None:
        raise ValueError("as_of needs a timezone-aware datetime (timeline times are UTC)")
    import pyarrow.compute as pc

    w = pa.scalar(when.astimezone(dt.UTC), type=MEMORY_TIMELINE.field("valid_from").type)
    vf, vt = timeline.column("valid_from"), timeline.column("valid_to")
    keep = pc.and_kleene(pc.less_equal(vf, w), pc.or_kleene(pc.is_null(vt), pc.greater(vt, w)))
    return timeline.filter(pc.fill_null(keep, False))


def count_by_kind(memories: pa.Table) -> dict[str, int]:
    """Memories per kind, every kind present (0 included): the figure reports compare."""
    kinds = memories.column("kind").to_pylist()
    return {k: kinds.count(k) for k in KINDS}
