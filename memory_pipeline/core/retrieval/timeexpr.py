"""Deterministic, LLM-free time understanding for memory queries (EN + JA).

Following Alonso et al. 2024 ("Toward Conversational Agents with Context and Time Sensitive
Long-term Memory"), a query is split into metadata filters over message/session time (their
``f_value`` -> ``op="eq"``, ``f_between`` -> ``op="between"``), speakers and the remaining
content words used for ranking. No model, no I/O: the retrieval layer can call this per query.

Conventions (all relative to ``now``, the user's local wall-clock time; tzinfo is ignored):

* Weeks start on ``week_start`` (0 = Monday, ISO; 6 = Sunday). "this week"/"last week"/先週
  cover the whole 7-day week, even the part after today.
* "last Tuesday", a bare "Tuesday", 火曜日: the most recent Tuesday *strictly before* today
  (asked on a Tuesday -> 7 days ago). "this Tuesday" = Tuesday of the current week;
  "Tuesday last week"/先週の火曜日 = Tuesday of the previous week.
* Weekends are Saturday+Sunday. "the weekend"/週末: the most recent one whose Saturday is on or
  before today; "last weekend"/先週末: the most recent one whose Sunday is before today;
  "this weekend"/今週末: the current one on Sat/Sun, otherwise the coming one (may lie ahead).
* Numeric dates: ``YYYY-MM-DD``/``YYYY/MM/DD`` are ISO; ``MM/DD/YYYY`` is US order (falls back to
  DD/MM with lower confidence only when the first number cannot be a month); two-digit years
  are 20YY unless that is after ``now``'s year. ``M/D`` without a year is read only in Japanese
  or after a preposition ("on 5/8") - otherwise it may be a fraction.
* Year-less dates ("May 8th", 5月8日, "on the 8th") resolve to the most recent such day <= today.
  A bare month ("in March", 3月) is ``month eq 3`` in any year; "last March" is the most recent
  March strictly before the current month.
* "recently"/"lately"/最近/この前: the last ``RECENT_DAYS`` (14) days including today. "the past
  N days/weeks" (with "the"/"past" or a number) is a rolling window ending today, whereas
  "last week"/"last month" are calendar periods. "N days ago" is that day; "N weeks ago" the
  week containing the day 7N days ago; "N months ago" that calendar month; "a couple of" = 2-3,
  "a few"/"several"/数 = 2-5 units.
* Parts of day (hours inclusive): morning 5-11, afternoon 12-16, evening 17-23, night 18-4
  (wraps past midnight: "last night" = yesterday 18:00 .. today 04:59:59.999999).
* Month names vs names: a bare full month name counts only after a preposition such as
  "in/during/since/before/after/until/from/to/of" (or with a day or year next to it), so
  "May said ..." is content. If the word is also a given speaker, only in/during/since/
  before/after/until/through make it a month ("talk to May" is the speaker).
* Future references (tomorrow, next week, 来週, ...) and invalid dates (February 30, 13/45/2024)
  produce no filter: the text stays in ``content`` and a note explains why.
* ``confidence`` < 0.8 means "use as a soft preference": if the hard filter returns nothing, fall
  back to ranking without it. A time phrase attached to a noun ("the trip in March", 3月の旅行)
  may describe the event rather than the conversation: its confidence is halved and its words
  are kept in ``content``.
* ``session_index`` filters: ``first``/``last`` match session 1 / the last session. For
  "time_content" queries ("the first time we talked about hiking") the retrieval layer may apply
  them to the *matching* sessions instead (earliest/latest hit); the note says so.
* Filters in a ``ParsedQuery`` are AND-ed; open range bounds are ``None``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime, time, timedelta
from functools import lru_cache

from memory_pipeline.core.common.timelex import (
    JA_WEEKDAY_NUMBERS,
    JA_WEEKDAYS,
    MONTH_ABBREVIATIONS,
    MONTH_NAME_PATTERN,
    MONTH_NAMES,
    MONTH_NUMBERS,
    MONTH_PATTERN,
    WEEKDAY_NAMES,
    WEEKDAY_NUMBERS,
    WEEKDAY_PATTERN,
)

__all__ = [
    "GENERIC_WORDS_EN",
    "GENERIC_WORDS_JA",
    "RECENT_DAYS",
    "ParsedQuery",
    "TimeFilter",
    "matches",
    "matches_all",
    "parse_query",
]

RECENT_DAYS = 14
CYCLIC_FIELDS = frozenset({"weekday", "month", "hour"})
_PARTS = {  # inclusive hours; start > end wraps past midnight
    "morning": (5, 11),
    "afternoon": (12, 16),
    "evening": (17, 23),
    "night": (18, 4),
    "朝": (5, 11),
    "午前": (0, 11),
    "午前中": (5, 11),
    "昼": (11, 14),
    "午後": (12, 23),
    "夕方": (16, 18),
    "夜": (18, 4),
    "晩": (18, 4),
    "深夜": (23, 4),
}

# Generic "what did we talk about" words: a query made only of these plus time is "time_only".
GENERIC_WORDS_EN = frozenset(
    "talk talked talking talks say said saying says discuss discussed discussing discussion "
    "discussions speak spoke spoken speaking chat chatted chatting chats mention mentioned "
    "mentioning tell told telling conversation conversations convo message messages messaged "
    "text texted session sessions topic topics subject subjects happen happened happening "
    "remember recall remind anything something stuff thing things everything".split()
)
GENERIC_WORDS_JA = frozenset(
    "何 話 会話 話題 内容 言 喋 しゃべ 事 こと もの 教 覚 思 合 いつ なに なん 誰 どんな "
    "トーク チャット メッセージ セッション".split()
)
_STOP_EN = frozenset(
    "a an the and or but of to in on at by for from with about as into onto over under "
    "between since after before until till through during within without upon prior up "
    "what when where who whom whose which why how whats "
    "did do does done doing was were is are be been being am has have had having will would "
    "shall should can could may might must i me my mine we us our ours you your yours he him "
    "his she her hers they them their theirs it its this that these those there here then "
    "any some all each every again back also just only very so too not no yes ever "
    "please kindly let lets s t d ll re ve m day days time times week weeks month months year "
    "years ago earlier "
    "early late mid later first last next previous past other each one".split()
)
_STOP_JA = frozenset(
    "以降 以後 以来 以前 前 後 間 中 頃 時 日 週 月 年 私 僕 俺 我々 皆 一緒 方 今 最初 最後"
    " 回目 番目 時間".split()
)
_JA_AUX = re.compile(
    r"(?:について|ついて|ましたっけ|でしたっけ|だっけ|たっけ|っけ|でしょう|ください|ました|ません"
    r"|ます|でした|です|だった|だ|した|して|します|しよう|しま|った|って|ている|ていた|てた|てる"
    r"|たの|けど|から|まで|より|など|とか|という|こと|もの|どんな|なに|なん|いつ|どこ|だれ|どう"
    r"|どの|それ|これ|あれ|その|この|あの|さん|くん|ちゃん|さま|かな|しゃべ|おしえて|ろう"
    r"|[ねよかのはがをにでとへもやなんたていしられるうわ])+"
)

_Value = date | datetime | int | None


@dataclass(frozen=True)
class TimeFilter:
    """One metadata filter; ``start``/``end`` are inclusive and ``None`` means open."""

    field: str  # date | local_ts | weekday | iso_week | month | year | session_index | hour
    op: str  # eq | between | first | last
    value: _Value = None
    start: _Value = None
    end: _Value = None
    text: str = ""
    confidence: float = 1.0


@dataclass(frozen=True)
class ParsedQuery:
    """Time filters + speakers + ranking words of one query, with the reasons in ``notes``."""

    kind: str  # time_only | content_only | time_content
    filters: tuple[TimeFilter, ...]
    speakers: tuple[str, ...]
    content: str
    order: str  # chronological | relevance
    notes: tuple[str, ...]


# ----------------------------------------------------------------------------- evaluation


def _field_value(field: str, ts: datetime) -> _Value:
    if field == "date":
        return ts.date() if isinstance(ts, datetime) else ts
    if field == "local_ts":
        return ts if isinstance(ts, datetime) else datetime.combine(ts, time())
    if field == "weekday":
        return ts.weekday()
    if field == "iso_week":
        return ts.isocalendar()[1]
    if field == "month":
        return ts.month
    if field == "year":
        return ts.year
    if field == "hour":
        return ts.hour if isinstance(ts, datetime) else None
    raise ValueError(field)


def _compare(v: _Value, f: TimeFilter) -> bool:
    if v is None:
        return False
    if f.op == "eq":
        return v == f.value
    if f.op != "between":
        return False
    lo, hi = f.start, f.end
    if f.field in CYCLIC_FIELDS and lo is not None and hi is not None and lo > hi:
        return v >= lo or v <= hi  # wraps: night 18..4, November..February
    return (lo is None or v >= lo) and (hi is None or v <= hi)


def matches(
    f: TimeFilter,
    *,
    local_ts: datetime | date,
    session_index: int | None = None,
    n_sessions: int | None = None,
) -> bool:
    """Whether a message/session at ``local_ts`` passes ``f``; unknown inputs never match.

    ``session_index`` is 1-based per conversation; ``last`` needs ``n_sessions``.
    """
    try:
        if f.field == "session_index":
            if session_index is None:
                return False
            if f.op == "first":
                return session_index == 1
            if f.op == "last":
                return n_sessions is not None and session_index == n_sessions
            return _compare(session_index, f)
        return _compare(_field_value(f.field, local_ts), f)
    except (TypeError, ValueError, AttributeError):
        return False


def matches_all(
    filters: Sequence[TimeFilter],
    *,
    local_ts: datetime | date,
    session_index: int | None = None,
    n_sessions: int | None = None,
) -> bool:
    """AND of :func:`matches` - the semantics of ``ParsedQuery.filters``."""
    return all(
        matches(f, local_ts=local_ts, session_index=session_index, n_sessions=n_sessions)
        for f in filters
    )


# ----------------------------------------------------------------------------- date helpers


def _add_months(y: int, m: int, k: int) -> tuple[int, int]:
    t = y * 12 + m - 1 + k
    return t // 12, t % 12 + 1


def _month_range(y: int, m: int) -> tuple[date, date]:
    ny, nm = _add_months(y, m, 1)
    return date(y, m, 1), date(ny, nm, 1) - timedelta(days=1)


def _shift_months(d: date, k: int) -> date:
    y, m = _add_months(d.year, d.month, k)
    return min(date(y, m, 1) + timedelta(days=d.day - 1), _month_range(y, m)[1])


def _week_of(d: date, ws: int) -> date:
    return d - timedelta(days=(d.weekday() - ws) % 7)


def _recent_md(today: date, m: int, d: int) -> date | None:
    """Most recent month/day <= today (searches back far enough for Feb 29)."""
    for y in range(today.year, max(0, today.year - 9), -1):
        try:
            cand = date(y, m, d)
        except ValueError:
            continue
        if cand <= today:
            return cand
    return None


def _recent_dom(today: date, d: int) -> date | None:
    for k in range(13):
        y, m = _add_months(today.year, today.month, -k)
        try:
            cand = date(y, m, d)
        except ValueError:
            continue
        if cand <= today:
            return cand
    return None


def _recent_month(today: date, m: int) -> tuple[date, date]:
    return _month_range(today.year if m <= today.month else today.year - 1, m)


# ----------------------------------------------------------------------------- atoms


@dataclass(slots=True)
class _Ctx:
    today: date
    ws: int
    lang: str
    text: str
    speakers: frozenset[str]


@dataclass(slots=True)
class _Atom:
    lo: date | None = None  # a date interval (usable in ranges)
    hi: date | None = None
    filt: TimeFilter | None = None  # explicit filter, overrides lo/hi when standalone
    month: int | None = None  # bare month, any year
    session: int | None = None
    part: tuple[int, int] | None = None  # bare part of day
    needs_day: bool = False  # bare "morning" only counts right after a day
    shift: str = ""  # how to move a year-less start back when a range comes out reversed
    conf: float = 1.0
    status: str = "ok"  # ok | invalid | future | unknown
    note: str = ""
    start: int = 0
    end: int = 0
    text: str = ""
    event: bool = False


def _span(lo: date, hi: date, conf: float = 1.0, note: str = "", shift: str = "") -> _Atom:
    return _Atom(lo=lo, hi=hi, conf=conf, note=note, shift=shift)


def _filt(
    field: str, op: str, value: _Value = None, start: _Value = None, end: _Value = None
) -> TimeFilter:
    return TimeFilter(field, op, value, start, end)


def _bad(note: str) -> _Atom:
    return _Atom(status="invalid", note=note)


def _future() -> _Atom:
    return _Atom(status="future", note="refers to the future: no filter")


def _ts_atom(d: date, part: tuple[int, int], conf: float = 0.9) -> _Atom:
    h0, h1 = part
    end_day = d if h1 >= h0 else d + timedelta(days=1)
    lo = datetime.combine(d, time(h0))
    hi = datetime.combine(end_day, time(h1, 59, 59, 999999))
    return _Atom(filt=_filt("local_ts", "between", start=lo, end=hi), conf=conf)


def _session(op: str, n: int | None = None, conf: float = 1.0) -> _Atom:
    if op == "eq":
        if n is None or n < 1:
            return _bad("session numbers start at 1")
        return _Atom(filt=_filt("session_index", "eq", n), session=n, conf=conf)
    return _Atom(filt=_filt("session_index", op), conf=conf)


_EN_NUM = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
    "fifteen": 15, "twenty": 20, "thirty": 30,
}  # fmt: skip
_ORD = {
    "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7,
    "eighth": 8, "ninth": 9, "tenth": 10, "eleventh": 11, "twelfth": 12,
}  # fmt: skip
_KANJI = {"〇": 0, "一": 1, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_FEW = {"couple": (2, 3), "few": (2, 5), "several": (2, 5), "数": (2, 5)}


def _num(s: str) -> int:
    """Digits, English number words or kanji numerals up to 999."""
    s = s.strip().lower()
    if s.isdigit():
        return int(s)
    if s in _EN_NUM:
        return _EN_NUM[s]
    total, cur = 0, 0
    for ch in s:
        if ch in _KANJI:
            cur = cur * 10 + _KANJI[ch]
        elif ch in "十百":
            total += (cur or 1) * (10 if ch == "十" else 100)
            cur = 0
        else:
            raise ValueError(s)
    return total + cur


def _unit_ago(c: _Ctx, n: int, unit: str) -> tuple[date, date]:
    t = c.today
    if unit == "day":
        d = t - timedelta(days=n)
        return d, d
    if unit == "week":
        ws = _week_of(t - timedelta(days=7 * n), c.ws)
        return ws, ws + timedelta(days=6)
    if unit == "month":
        y, m = _add_months(t.year, t.month, -n)
        return _month_range(y, m)
    return date(t.year - n, 1, 1), date(t.year - n, 12, 31)


def _ago(c: _Ctx, qty: str, unit: str) -> _Atom:
    unit = {"週間": "week", "週": "week", "日": "day", "年": "year"}.get(unit, unit)
    unit = "month" if unit.endswith("月") else unit.rstrip("s")
    key = next((k for k in _FEW if k in qty.lower()), None)
    if key is not None:
        n0, n1 = _FEW[key]
        return _span(_unit_ago(c, n1, unit)[0], _unit_ago(c, n0, unit)[1], 0.6)
    n = _num(qty)
    if unit == "day":
        return _span(*_unit_ago(c, n, unit), 0.9)
    if unit == "year":
        lo, hi = _unit_ago(c, n, unit)
        return _Atom(lo=lo, hi=hi, filt=_filt("year", "eq", lo.year), conf=0.9)
    return _span(*_unit_ago(c, n, unit), 0.8)


def _rel_period(c: _Ctx, unit: str, k: int) -> _Atom:
    """Calendar week/month/year ``k`` steps from the current one (k > 0 is the future)."""
    if k > 0:
        return _future()
    t = c.today
    if unit == "week":
        ws = _week_of(t, c.ws) + timedelta(days=7 * k)
        return _span(ws, ws + timedelta(days=6), 0.95)
    if unit == "month":
        return _span(*_month_range(*_add_months(t.year, t.month, k)), 0.95)
    y = t.year + k
    return _Atom(lo=date(y, 1, 1), hi=date(y, 12, 31), filt=_filt("year", "eq", y), conf=0.95)


def _weekend(c: _Ctx, which: str) -> _Atom:
    t, wd = c.today, c.today.weekday()
    if which == "next":
        return _future()
    if which == "last":
        sun = t - timedelta(days=(wd - 6) % 7 or 7)
        return _span(sun - timedelta(days=1), sun, 0.9)
    if which == "this":
        sat = t + timedelta(days=5 - wd) if wd < 5 else t - timedelta(days=wd - 5)
        return _span(sat, sat + timedelta(days=1), 0.85)
    sat = t - timedelta(days=(wd - 5) % 7)
    return _span(sat, sat + timedelta(days=1), 0.85)


def _week_day(c: _Ctx, k: int, wd: int) -> _Atom:
    if k > 0:
        return _future()
    d = _week_of(c.today, c.ws) + timedelta(days=7 * k + (wd - c.ws) % 7)
    return _span(d, d, 0.95)


def _last_wd(c: _Ctx, wd: int, conf: float) -> _Atom:
    d = c.today - timedelta(days=(c.today.weekday() - wd) % 7 or 7)
    return _span(d, d, conf, shift="week")


def _recent(c: _Ctx) -> _Atom:
    lo = c.today - timedelta(days=RECENT_DAYS - 1)
    return _span(lo, c.today, 0.6, note=f"recent = the {RECENT_DAYS} days up to today")


def _ymd(y: int, m: int, d: int, conf: float = 1.0) -> _Atom:
    try:
        day = date(y, m, d)
    except ValueError:
        return _bad(f"invalid date {y:04d}-{m:02d}-{d:02d}")
    return _span(day, day, conf)


def _yearless(c: _Ctx, m: int, d: int) -> _Atom:
    day = _recent_md(c.today, m, d) if 1 <= m <= 12 else None
    if day is None:
        return _bad(f"invalid date month={m} day={d}")
    return _span(day, day, 0.85, shift="year")


def _year_atom(y: int, conf: float = 1.0) -> _Atom:
    return _Atom(lo=date(y, 1, 1), hi=date(y, 12, 31), filt=_filt("year", "eq", y), conf=conf)


def _month_atom(m: int, conf: float = 0.7) -> _Atom:
    if not 1 <= m <= 12:
        return _bad(f"invalid month {m}")
    return _Atom(filt=_filt("month", "eq", m), month=m, conf=conf, shift="year")


_PREP_WORD = re.compile(r"([A-Za-z]+)[^A-Za-z0-9]*$")
_MONTH_PREPS = frozenset(
    "in during since before after until till through thru from to of by between and early "
    "late mid around throughout".split()
)
_STRONG_PREPS = frozenset("in during since before after until till through thru".split())


def _prev_word(c: _Ctx, pos: int) -> str:
    m = _PREP_WORD.search(c.text, max(0, pos - 24), pos)
    return m.group(1).lower() if m else ""


# ----------------------------------------------------------------------------- grammar

_B = r"(?<![A-Za-z0-9])"
_E = r"(?![A-Za-z0-9])"
_MON = f"({MONTH_PATTERN})" + r"\.?"
_MONF = f"({MONTH_NAME_PATTERN})"
_WD = f"({WEEKDAY_PATTERN})"
_NUM = r"(\d{1,6}|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen"
_NUM += r"|twenty|thirty)"
_ORDW = r"(\d{1,4}(?:st|nd|rd|th)|" + "|".join(_ORD) + ")"
_UNIT = r"(day|week|month|year)s?"
_SUF = r"(?:st|nd|rd|th)?"
_JN = r"(\d{1,4}|[〇一二三四五六七八九十百]+)"
_JWD = f"([{JA_WEEKDAYS}])曜日?"
_JA_FOLLOW = r"(?=[にのはもでとへ何]|[^ぁ-ゖァ-ヺ一-龯々]|$)"
_NOT_JN = r"(?<![\d〇一二三四五六七八九十])"
_TALK = r"(?=(?:talk|spoke|speak|met|meet|chat|discuss|mention)\w*)"
_REL_K = {"last": -1, "previous": -1, "past": -1, "this": 0, "next": 1}
_JA_REL = {
    "先々週": ("week", -2), "先週": ("week", -1), "今週": ("week", 0), "来週": ("week", 1),
    "先々月": ("month", -2), "先月": ("month", -1), "今月": ("month", 0), "来月": ("month", 1),
    "一昨年": ("year", -2), "おととし": ("year", -2), "去年": ("year", -1), "昨年": ("year", -1),
    "今年": ("year", 0), "本年": ("year", 0), "来年": ("year", 1),
}  # fmt: skip
_JA_DAYS = {
    "一昨日": -2, "おととい": -2, "昨日": -1, "きのう": -1, "今日": 0, "本日": 0,
    "明日": 1, "あした": 1, "明後日": 2, "あさって": 2,
}  # fmt: skip


_A = Callable[[re.Match[str], "_Ctx"], "_Atom | None"]


def _mon(s: str) -> int:
    return MONTH_NUMBERS[s.lower()]


def _wd(s: str) -> int:
    return WEEKDAY_NUMBERS[s.lower()]


def _year2(y: str, c: _Ctx) -> int:
    n = int(y)
    if len(y) == 2:
        n += 2000 if 2000 + n <= c.today.year else 1900
    return n


def _h_us(m: re.Match[str], c: _Ctx) -> _Atom:
    a, b, y = int(m[1]), int(m[2]), _year2(m[3], c)
    atom = _ymd(y, a, b, 1.0 if a == b or b > 12 else 0.9)
    if atom.status == "ok":
        if atom.conf < 1.0:
            atom.note = "numeric date read as US month/day/year"
        return atom
    alt = _ymd(y, b, a, 0.7)
    if alt.status == "ok":
        alt.note = "first number > 12: read as day/month/year"
        return alt
    return _bad(f"invalid numeric date {m[0]!r}")


def _h_md_num(m: re.Match[str], c: _Ctx) -> _Atom | None:
    if c.lang != "ja" and _prev_word(c, m.start()) not in _MONTH_PREPS | {"on"}:
        return None  # "1/2" alone may be a fraction
    return _yearless(c, int(m[1]), int(m[2]))


def _h_mon_day(m: re.Match[str], c: _Ctx) -> _Atom:
    mon, d = _mon(m[1]), int(m[2])
    return _ymd(int(m[3]), mon, d) if m[3] else _yearless(c, mon, d)


def _h_day_mon(m: re.Match[str], c: _Ctx) -> _Atom:
    mon, d = _mon(m[2]), int(m[1])
    return _ymd(int(m[3]), mon, d) if m[3] else _yearless(c, mon, d)


def _h_rel_mon(m: re.Match[str], c: _Ctx) -> _Atom:
    k, mon = _REL_K[m[1].lower()], _mon(m[2])
    if k > 0:
        return _future()
    y = c.today.year if k == 0 or mon < c.today.month else c.today.year - 1
    return _span(*_month_range(y, mon), 0.9)


def _h_year(m: re.Match[str], c: _Ctx) -> _Atom | None:
    if _prev_word(c, m.start()) not in _MONTH_PREPS | {"year"}:
        return None  # "2023 trip" is content
    return _year_atom(int(m[1]))


def _h_bare_month(m: re.Match[str], c: _Ctx) -> _Atom | None:
    prev = _prev_word(c, m.start())
    strong = m[1].lower() in c.speakers
    if prev not in (_STRONG_PREPS if strong else _MONTH_PREPS):
        return None  # "May said ..." is a name
    return _month_atom(_mon(m[1]))


def _h_session_ord(m: re.Match[str], c: _Ctx) -> _Atom:
    w = re.sub(r"\s+", " ", m[1].lower())
    if w in ("first", "earliest"):
        return _session("first", conf=0.9)
    if w in ("last", "latest", "final", "previous", "most recent"):
        return _session("last", conf=0.9)
    return _session("eq", _ORD.get(w) or int(re.sub(r"\D", "", w)))


def _h_first_last(m: re.Match[str], c: _Ctx) -> _Atom:
    return _session("first" if m[1].lower() in ("first", "earliest") else "last", conf=0.8)


def _h_rel_wd(m: re.Match[str], c: _Ctx) -> _Atom:
    k, wd = _REL_K[m[1].lower()], _wd(m[2])
    if k < 0:
        return _last_wd(c, wd, 0.9)
    return _week_day(c, 0, wd) if k == 0 else _future()


def _h_weekend(m: re.Match[str], c: _Ctx) -> _Atom:
    which = m[1].lower()
    return _weekend(c, "last" if which in ("past", "previous") else which)


def _h_dom(m: re.Match[str], c: _Ctx) -> _Atom:
    d = _recent_dom(c.today, int(m[1]))
    return _span(d, d, 0.8, shift="month") if d else _bad(f"no day {m[1]} in any month")


def _h_iso_week(m: re.Match[str], c: _Ctx) -> _Atom:
    n = int(m[1])
    return _Atom(filt=_filt("iso_week", "eq", n)) if 1 <= n <= 53 else _bad("ISO weeks are 1..53")


def _h_ja_ym(m: re.Match[str], c: _Ctx) -> _Atom:
    n = _num(m[2])
    return _span(*_month_range(int(m[1]), n)) if 1 <= n <= 12 else _bad(f"invalid month {n}")


def _h_ja_day(m: re.Match[str], c: _Ctx) -> _Atom:
    k = _JA_DAYS[m[1]]
    return _future() if k > 0 else _span(c.today + timedelta(k), c.today + timedelta(k))


def _h_ja_weekend(m: re.Match[str], c: _Ctx) -> _Atom:
    return _weekend(c, {"先週末": "last", "今週末": "this", "来週末": "next"}.get(m[1], ""))


def _day_ago(k: int) -> _A:
    return lambda m, c: _span(c.today - timedelta(k), c.today - timedelta(k))


def _part(word: str, needs_day: bool = False) -> _Atom:
    return _Atom(part=_PARTS[word.lower()], needs_day=needs_day, conf=0.8)


def _fixed(make: Callable[[_Ctx], _Atom]) -> _A:
    return lambda m, c: make(c)


_DMY = r"(?:(?:,\s*|\s+)(\d{4}))?" + _E  # optional ", 2023"
_AGO_Q = r"(a\s+couple\s+of|couple\s+of|a\s+few|few|several|" + _NUM[1:]
_ROLL = r"(?:(?:the\s+)?(?:past|last)\s+" + _NUM + r"|the\s+(?:past|last)|past)\s+"
_SESS_ORD = r"(?:(?:the|our|my)\s+)?(" + _ORDW[1:-1] + r"|last|latest|final|previous|earliest"
_SESS_ORD += r"|most\s+recent)\s+(?:session|conversation|chat)s?"
_NO = r"\s*(?:#\s*|no\.?\s*|number\s+)?"
_JA_CONV = r"(?:の(?:会話|セッション|チャット))?"
_JA_AGO = r"(" + _JN[1:-1] + r"|数)\s*(日|週間|週|か月|ヶ月|ケ月|カ月|ヵ月|箇月|年)\s*前"
_JA_PERIOD = (
    r"(先々週|先週|今週|来週|先々月|先月|今月|来月|一昨年|おととし|去年|昨年|今年|本年|来年)"
)
_LPPTN = "last past previous this next"

# (pattern, what a match can start with, handler). At one position the first rule whose handler
# accepts wins, so specific rules come first. Triggers: "#" a digit, "@mon"/"@wd"/"@num"/"@ord"
# word classes, "@jn" kanji numerals, other words/characters literally.
# fmt: off
_RULES: list[tuple[str, str, _A]] = [
    # --- Japanese absolute dates first: 2023年 must not be taken by the English year rule
    (r"(\d{4})\s*年\s*" + _JN + r"\s*月\s*" + _JN + r"\s*日", "#",
     lambda m, c: _ymd(int(m[1]), _num(m[2]), _num(m[3]))),
    (r"(\d{4})\s*年\s*" + _JN + r"\s*月(?!曜)", "#", _h_ja_ym),
    (_NOT_JN + _JN + r"\s*月\s*" + _JN + r"\s*日(?![前間後])", "# @jn",
     lambda m, c: _yearless(c, _num(m[1]), _num(m[2]))),
    (_NOT_JN + _JA_AGO, "# @jn 数", lambda m, c: _ago(c, m[1], m[2])),
    (r"(\d{4})\s*年(?![前間代度])", "#", lambda m, c: _year_atom(int(m[1]))),
    (_NOT_JN + _JN + r"\s*月(?![曜前間])", "# @jn", lambda m, c: _month_atom(_num(m[1]), 0.8)),
    (r"(?<![\d月])(\d{1,2})\s*日(?![前間後曜])", "#", _h_dom),
    # --- English: absolute dates
    (_B + r"(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})(?!\d)", "#",
     lambda m, c: _ymd(*map(int, m.groups()))),
    (_B + r"(\d{1,2})[/-](\d{1,2})[/-](\d{4}|\d{2})(?![\d/-])", "#", _h_us),
    (_B + r"(\d{1,2})/(\d{1,2})(?![\d/])", "#", _h_md_num),
    (_B + _MON + r"\s+(\d{1,2})" + _SUF + _DMY, "@mon", _h_mon_day),
    (_B + r"(?:the\s+)?(\d{1,2})" + _SUF + r"\s+(?:of\s+)?" + _MON + _DMY, "the #", _h_day_mon),
    (_B + _MON + r"(?:,\s*|\s+)(?:of\s+)?(\d{4})" + _E, "@mon",
     lambda m, c: _span(*_month_range(int(m[2]), _mon(m[1])))),
    (_B + r"(last|this|next|previous)\s+" + _MONF + _E, "last this next previous", _h_rel_mon),
    # --- English: weekdays
    (_B + _WD + r"\s+(?:of\s+)?(last|this|next)\s+week" + _E, "@wd",
     lambda m, c: _week_day(c, _REL_K[m[2].lower()], _wd(m[1]))),
    (_B + r"(last|this|next)\s+week(?:'s|’s)?\s+" + _WD + _E, "last this next",
     lambda m, c: _week_day(c, _REL_K[m[1].lower()], _wd(m[2]))),
    (_B + r"(last|past|previous|this|next)\s+" + _WD + _E, _LPPTN, _h_rel_wd),
    (_B + r"(?:every\s+)?" + _WD + r"s" + _E + "|" + _B + r"every\s+" + _WD + _E, "every @wd",
     lambda m, c: _Atom(filt=_filt("weekday", "eq", _wd(m[1] or m[2])), conf=0.9)),
    (_B + _WD + _E, "@wd", lambda m, c: _last_wd(c, _wd(m[1]), 0.8)),
    # --- English: relative days, parts of day, weekends, periods
    (_B + r"(?:the\s+)?day\s+before\s+yesterday" + _E, "the day", _day_ago(2)),
    (_B + r"(?:the\s+)?day\s+after\s+tomorrow" + _E, "the day", _fixed(lambda c: _future())),
    (_B + r"yesterday" + _E, "yesterday", _day_ago(1)),
    (_B + r"today" + _E, "today", _day_ago(0)),
    (_B + r"tomorrow" + _E, "tomorrow", _fixed(lambda c: _future())),
    (_B + r"tonight" + _E, "tonight", _fixed(lambda c: _ts_atom(c.today, _PARTS["night"]))),
    (_B + r"last\s+night" + _E, "last",
     _fixed(lambda c: _ts_atom(c.today - timedelta(1), _PARTS["night"]))),
    (_B + r"this\s+(morning|afternoon|evening)" + _E, "this",
     lambda m, c: _ts_atom(c.today, _PARTS[m[1].lower()])),
    (_B + r"(?:in|during)\s+the\s+(morning|afternoon|evening)s?" + _E + "|" + _B + r"at\s+(night)",
     "in during at", lambda m, c: _part(m[1] or m[2])),
    (_B + r"(morning|afternoon|evening|night)s?" + _E, "morning afternoon evening night",
     lambda m, c: _part(m[1], True)),
    (_B + r"(last|past|previous|this|next)\s+weekend" + _E, _LPPTN, _h_weekend),
    (_B + r"(?:(?:over|on|during)\s+)?the\s+weekend" + _E, "over on during the",
     _fixed(lambda c: _weekend(c, "recent"))),
    (_B + r"(last|this|next|previous)\s+(week|month|year)" + _E, "last this next previous",
     lambda m, c: _rel_period(c, m[2].lower(), _REL_K[m[1].lower()])),
    (_B + _ROLL + _UNIT + _E, "the past last", lambda m, c: _rolling(c, m[1] or "1", m[2])),
    (_B + _AGO_Q + r"\s+" + _UNIT + r"\s+ago" + _E, "a couple few several @num #",
     lambda m, c: _ago(c, m[1], m[2].lower())),
    # --- English: recency and sessions
    (_B + r"most\s+recently" + _E, "most", _fixed(lambda c: _session("last", conf=0.8))),
    (_B + r"(?:recently|lately|the\s+other\s+day|these\s+days)" + _E, "recently lately the these",
     _fixed(_recent)),
    (_B + r"(?:session|conversation|chat)" + _NO + r"(\d{1,4})" + _E, "session conversation chat",
     lambda m, c: _session("eq", int(m[1]))),
    (_B + _SESS_ORD + _E, "the our my @ord # last latest final previous earliest most",
     _h_session_ord),
    (_B + r"(?:the\s+)?(first|last|latest|earliest|most\s+recent)\s+time" + _E,
     "the first last latest earliest most", _h_first_last),
    (_B + r"(first|last)\s+" + _TALK, "first last", _h_first_last),
    (_B + r"(?:iso\s+)?week" + _NO + r"(\d{1,2})" + _E, "iso week", _h_iso_week),
    (_B + r"(1[89]\d\d|2[01]\d\d)(?!\s*年)" + _E, "#", _h_year),
    (_B + _MONF + _E, "@mon", _h_bare_month),
    (_B + r"on\s+the\s+(\d{1,2})(?:st|nd|rd|th)" + _E, "on", _h_dom),
    (_B + r"(?:next|last|this|previous)\s+([a-z]+day)" + _E, "next last this previous",
     lambda m, c: _Atom(status="unknown", note=f"unrecognised day name {m[1]!r}")),
    # --- Japanese: weekdays, weeks, months, years, days, parts of day
    (r"(先々週|先週|今週|来週)\s*の?\s*" + _JWD, "先 今 来",
     lambda m, c: _week_day(c, _JA_REL[m[1]][1], JA_WEEKDAY_NUMBERS[m[2]])),
    (r"毎週\s*の?\s*" + _JWD, "毎",
     lambda m, c: _Atom(filt=_filt("weekday", "eq", JA_WEEKDAY_NUMBERS[m[1]]), conf=0.9)),
    (_JWD, " ".join(JA_WEEKDAYS), lambda m, c: _last_wd(c, JA_WEEKDAY_NUMBERS[m[1]], 0.8)),
    (r"(先週末|今週末|来週末|週末)", "先 今 来 週", _h_ja_weekend),
    (_JA_PERIOD, "先 今 来 一 お 去 昨 本", lambda m, c: _rel_period(c, *_JA_REL[m[1]])),
    (r"(一昨日|おととい|昨日|きのう|今日|本日|明後日|あさって|明日|あした)",
     "一 お 昨 き 今 本 明 あ", _h_ja_day),
    (r"今朝", "今", _fixed(lambda c: _ts_atom(c.today, _PARTS["朝"]))),
    (r"今夜|今晩", "今", _fixed(lambda c: _ts_atom(c.today, _PARTS["夜"]))),
    (r"昨夜|昨晩|ゆうべ", "昨 ゆ",
     _fixed(lambda c: _ts_atom(c.today - timedelta(1), _PARTS["夜"]))),
    (r"(午前中|午前|午後)", "午", lambda m, c: _part(m[1])),
    (r"(深夜|夕方|朝|昼|夜|晩)" + _JA_FOLLOW, "深 夕 朝 昼 夜 晩", lambda m, c: _part(m[1])),
    (r"最近|この間|このあいだ|この前|先日|こないだ", "最 こ 先", _fixed(_recent)),
    # --- Japanese: sessions
    (_JN + r"\s*(?:回目|番目)" + _JA_CONV + r"|第\s*" + _JN + r"\s*回目?" + _JA_CONV, "# @jn 第",
     lambda m, c: _session("eq", _num(m[1] or m[2]))),
    (r"最初の(?:会話|セッション|チャット)|最初に|初めて|はじめて|最初", "最 初 は",
     _fixed(lambda c: _session("first", conf=0.8))),
    (r"最後の(?:会話|セッション|チャット)|最後に|前回|最新の(?:会話|セッション)|最後", "最 前",
     _fixed(lambda c: _session("last", conf=0.8))),
]
# fmt: on


def _rolling(c: _Ctx, qty: str, unit: str) -> _Atom:
    n, unit = _num(qty), unit.lower()
    t = c.today
    if unit in ("day", "week"):
        lo = t - timedelta(days=n * (7 if unit == "week" else 1))
    else:
        lo = _shift_months(t, -n * (12 if unit == "year" else 1))
    return _span(lo, t, 0.9)


_TRIGGER_CLASSES = {
    "@mon": " ".join([n.lower() for n in MONTH_NAMES] + list(MONTH_ABBREVIATIONS)),
    "@wd": " ".join(n.lower() for n in WEEKDAY_NAMES),
    "@num": " ".join(_EN_NUM),
    "@ord": " ".join(_ORD),
    "@jn": " ".join("〇一二三四五六七八九十百"),
}


def _dispatch() -> dict[str, tuple[tuple[re.Pattern[str], _A], ...]]:
    """First word/character -> the rules that can start there, in priority order."""
    table: dict[str, list[tuple[re.Pattern[str], _A]]] = {}
    for pattern, triggers, handler in _RULES:
        rule = (re.compile(pattern, re.I), handler)
        keys = " ".join(_TRIGGER_CLASSES.get(t, t) for t in triggers.split()).split()
        for key in dict.fromkeys(keys):
            table.setdefault(key, []).append(rule)
    return {k: tuple(v) for k, v in table.items()}


_DISPATCH = _dispatch()
_CJK_TRIGGERS = "".join(sorted(k for k in _DISPATCH if not k.isascii()))
_CANDIDATE = re.compile(r"(?<![A-Za-z0-9])(?:([A-Za-z]+)|\d)|[" + _CJK_TRIGGERS + "]")


def _scan(c: _Ctx) -> list[_Atom]:
    """Leftmost non-overlapping rule matches, each resolved against ``now``.

    Only positions whose first word/character can start a rule are tried, and only with those
    rules: a single big alternation tried at every character is ~20x slower.
    """
    atoms: list[_Atom] = []
    text, end = c.text, 0
    for cand in _CANDIDATE.finditer(text):
        pos = cand.start()
        if pos < end:
            continue
        word = cand[1]
        key = word.lower() if word else ("#" if cand[0].isdigit() else cand[0])
        rules = _DISPATCH.get(key) or _DISPATCH.get(key[:-1] if key[-1] == "s" else "", ())
        for rx, handler in rules:
            m = rx.match(text, pos)
            if m is None:
                continue
            try:
                atom = handler(m, c)
            except (ValueError, OverflowError, KeyError) as exc:
                atom = _bad(f"out of range ({type(exc).__name__})")
            if atom is not None:  # a handler may decline ("May said"): try the next rule
                atom.start, end, atom.text = pos, m.end(), m[0]
                atom.end = end
                atoms.append(atom)
                break
    return atoms


# ----------------------------------------------------------------------------- combination

_GAP_PART = re.compile(r"\s*(?:の|,|、)?\s*$")
_PRE_PAIR = re.compile(r"(?<![A-Za-z])(between|from)\s*$", re.I)
_GAP_AND = re.compile(r"\s*and\s*$", re.I)
_GAP_TO = re.compile(r"\s*(?:to|until|till|through|thru|-|–|—|~|〜)\s*$", re.I)
_GAP_BARE = re.compile(r"\s*(?:through|thru|-|–|—|~|〜|から|より)\s*$", re.I)  # no "from" needed
_PRE_ONE = re.compile(
    r"(?<![A-Za-z])(since|starting|from|after|before|prior\s+to|until|till|up\s+to|by)\s*$", re.I
)
_POST_ONE = re.compile(r"\s*(以降|以後|以来|から|より前|より後|以前|まで)")
_POST_MADE = re.compile(r"\s*まで")
_EVENT_EN = re.compile(
    r"(?:^|[^A-Za-z])(?:the|a|an|our|my|your|his|her|their)\s+(?!(?:time|conversation|chat|"
    r"session|phone|call|day|week|month|year)\b)[A-Za-z]+\s+(?:in|on|during|for|of|at)\s+$",
    re.I,
)
_CALENDAR_JA = re.compile(r"[\d〇一二三四五六七八九十]")  # 3月の旅行: explicit calendar time
_EVENT_JA = re.compile(
    r"の(?!会話|話|セッション|チャット|朝|昼|夜|晩|夕方|午前|午後|深夜)[\u4e00-\u9fff\u30a1-\u30fa]"
)


def _merge_parts(atoms: list[_Atom], c: _Ctx) -> list[_Atom]:
    """ "yesterday evening", 昨日の夜: one day + a bare part of day -> a local_ts range."""
    out: list[_Atom] = []
    for a in atoms:
        prev = out[-1] if out else None
        if (
            a.part is not None
            and prev is not None
            and prev.status == "ok"
            and prev.lo is not None
            and prev.lo == prev.hi
            and prev.filt is None
            and _GAP_PART.match(c.text, prev.end, a.start)
        ):
            merged = _ts_atom(prev.lo, a.part, min(prev.conf, 0.9))
            merged.start, merged.end = prev.start, a.end
            merged.text = c.text[prev.start : a.end]
            out[-1] = merged
        elif a.part is not None and a.needs_day:
            continue  # "good morning": content, not a time
        else:
            if a.part is not None:
                a.filt = _filt("hour", "between", start=a.part[0], end=a.part[1])
            out.append(a)
    return out


def _interval(a: _Atom, ref: _Atom | None, c: _Ctx) -> tuple[date, date] | None:
    if a.lo is not None and a.hi is not None:
        return a.lo, a.hi
    if a.month is not None:
        if ref is not None and ref.lo is not None:
            return _month_range(ref.lo.year, a.month)
        return _recent_month(c.today, a.month)
    return None


def _earlier(a: _Atom, d: date) -> date:
    if a.shift == "week":
        return d - timedelta(days=7)
    if a.shift == "month":
        return _shift_months(d, -1)
    if a.shift == "year":
        return _shift_months(d, -12)
    return d


def _pair(a: _Atom, b: _Atom, c: _Ctx) -> _Atom | None:
    conf = min(a.conf, b.conf)
    if a.session is not None and b.session is not None:
        lo, hi = sorted((a.session, b.session))
        return _Atom(filt=_filt("session_index", "between", start=lo, end=hi), conf=conf)
    if a.month is not None and b.month is not None:
        return _Atom(filt=_filt("month", "between", start=a.month, end=b.month), conf=conf)
    ia, ib = _interval(a, b, c), _interval(b, a, c)
    if ia is None or ib is None:
        return None
    lo, hi, note = ia[0], ib[1], ""
    if lo > hi:
        lo = _earlier(a, lo)
    if lo > hi:
        lo, hi, note = ib[0], ia[1], "reversed range swapped"
    return _Atom(lo=lo, hi=hi, conf=conf, note=note)


def _one_sided(a: _Atom, kw: str, c: _Ctx) -> _Atom | None:
    kw = re.sub(r"\s+", " ", kw.lower())
    if a.session is not None:
        lo, hi = (
            (a.session, None)
            if kw in ("since", "starting", "from", "以降", "以後", "以来", "から")
            else (None, a.session)
        )
        return _Atom(filt=_filt("session_index", "between", start=lo, end=hi), conf=a.conf)
    iv = _interval(a, None, c)
    if iv is None:
        return None
    if kw in ("since", "starting", "from", "以来", "から"):
        lo, hi = iv[0], max(iv[0], c.today)
    elif kw in ("以降", "以後"):
        lo, hi = iv[0], None
    elif kw in ("after", "より後"):
        lo, hi = iv[1] + timedelta(days=1), None
    elif kw in ("before", "prior to", "より前"):
        lo, hi = None, iv[0] - timedelta(days=1)
    else:  # until, till, up to, by, 以前, まで: inclusive end
        lo, hi = None, iv[1]
    return _Atom(filt=_filt("date", "between", start=lo, end=hi), conf=a.conf)


def _ranges(atoms: list[_Atom], c: _Ctx) -> list[_Atom]:
    """Combine atoms with between/from/to/since/before/after and から/まで/以降/以前."""
    out: list[_Atom] = []
    text, i = c.text, 0
    while i < len(atoms):
        a = atoms[i]
        prev_end = out[-1].end if out else 0
        if a.status != "ok" or a.part is not None:
            out.append(a)
            i += 1
            continue
        b = atoms[i + 1] if i + 1 < len(atoms) else None
        pre = text[prev_end : a.start]
        if b is not None and b.status == "ok" and b.part is None:
            mp = _PRE_PAIR.search(pre)
            gap_rx = {"between": _GAP_AND, "from": _GAP_TO}.get(mp[1].lower() if mp else "")
            if (gap_rx or _GAP_BARE).match(text, a.end, b.start):
                r = _pair(a, b, c)
                if r is not None:
                    r.start = prev_end + mp.start(1) if mp else a.start
                    post = _POST_MADE.match(text, b.end)
                    r.end = post.end() if post else b.end
                    out.append(_finish(r, text))
                    i += 2
                    continue
        mp = _PRE_ONE.search(pre)
        mq = _POST_ONE.match(text, a.end)
        if mp or mq:
            r = _one_sided(a, (mp or mq)[1], c)  # type: ignore[index]
            if r is not None:
                r.start = prev_end + mp.start(1) if mp else a.start
                r.end = mq.end() if mq and not mp else a.end
                out.append(_finish(r, text))
                i += 1
                continue
        out.append(a)
        i += 1
    return out


def _finish(r: _Atom, text: str) -> _Atom:
    r.text = text[r.start : r.end]
    if r.filt is None and r.lo is not None:
        r.filt = _filt("date", "between", start=r.lo, end=r.hi)
    return r


def _to_filter(a: _Atom) -> TimeFilter | None:
    f = a.filt
    if f is None:
        if a.lo is None or a.hi is None:
            return None
        if a.lo == a.hi:
            f = _filt("date", "eq", a.lo)
        else:
            f = _filt("date", "between", start=a.lo, end=a.hi)
    return replace(f, text=a.text, confidence=round(a.conf * (0.5 if a.event else 1.0), 3))


# ----------------------------------------------------------------------------- speakers/content

_WHEN = re.compile(r"(?<![A-Za-z])when(?![A-Za-z])|いつ", re.I)
_JA_CHARS = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")
_TOKEN = re.compile(
    r"[A-Za-z0-9À-ÖØ-öø-ÿ][A-Za-z0-9À-ÖØ-öø-ÿ'’+\-]*|[\u3400-\u9fff々〆]+|[\u30a1-\u30fa\u30fc]+"
    r"|[\u3041-\u3096\u309d\u309e\u30fc]+"
)
_POSSESSIVE = re.compile(r"(?:'s|’s|'|’)$", re.I)
_HONORIFIC = r"(?:さん|くん|君|ちゃん|様|さま|氏|先生)?"


@lru_cache(maxsize=256)
def _speaker_rx(names: tuple[str, ...]) -> list[tuple[str, re.Pattern[str]]]:
    out = []
    for name in names:
        n = unicodedata.normalize("NFKC", str(name)).strip()
        if not n:
            continue
        body = r"\s+".join(map(re.escape, n.split()))
        if _JA_CHARS.search(n):
            out.append((name, re.compile(body + _HONORIFIC)))
        else:
            b = r"(?<![A-Za-z0-9À-ÖØ-öø-ÿ])"
            e = r"(?:'s|’s|'|’)?(?![A-Za-z0-9À-ÖØ-öø-ÿ])"
            out.append((name, re.compile(b + body + e, re.I)))
    return out


def _find_speakers(
    text: str, names: tuple[str, ...], taken: list[tuple[int, int]]
) -> tuple[list[str], list[tuple[int, int]]]:
    hits: list[tuple[int, str]] = []
    spans: list[tuple[int, int]] = []
    for name, rx in _speaker_rx(names):
        for m in rx.finditer(text):
            if any(s < m.end() and m.start() < e for s, e in taken):
                continue
            hits.append((m.start(), name))
            spans.append(m.span())
    seen: dict[str, None] = {}
    for _, name in sorted(hits):
        seen.setdefault(name, None)
    return list(seen), spans


_JA_GENERIC_VERB = re.compile(r"何|(?<![\u3400-\u9fff])(?:話|言|喋)(?=[しすせそさっいうわえ])")


def _content_words(text: str) -> list[tuple[int, str]]:
    """(position, word) to rank with: stop/generic words dropped; JA split by script runs."""
    words = []
    for m in _TOKEN.finditer(_JA_GENERIC_VERB.sub(" ", text)):
        w = m[0]
        ch = w[0]
        if ch.isascii() or ch < "\u3000":
            if "'" in w or "’" in w or "-" in w or "+" in w:
                w = _POSSESSIVE.sub("", w).strip("-+'") or w
            low = w.lower()
            if low in _STOP_EN or low in GENERIC_WORDS_EN:
                continue
        elif "\u3041" <= ch <= "\u309e":  # hiragana: mostly particles and verb endings
            w = w.rstrip("のはがをにでとへもやねよか")
            w = w[1:] if w[:1] in ("の", "を") and len(w) > 2 else w
            if len(w) <= 2 or _JA_AUX.fullmatch(w) or w in GENERIC_WORDS_JA:
                continue
        elif w in _STOP_JA or w in GENERIC_WORDS_JA:
            continue
        words.append((m.start(), w))
    return words


def _blank(text: str, spans: Sequence[tuple[int, int]]) -> str:
    chars = list(text)
    for s, e in spans:
        chars[s:e] = " " * (e - s)
    return "".join(chars)


# ----------------------------------------------------------------------------- entry point


def parse_query(
    query: str,
    *,
    now: datetime,
    speakers: Sequence[str] = (),
    lang: str | None = None,
    week_start: int = 0,
) -> ParsedQuery:
    """Split ``query`` into time filters, speakers and ranking words; never raises.

    ``now`` is the asker's local wall-clock time (relative expressions resolve against it),
    ``speakers`` the names to look for, ``lang`` "en"/"ja" (None: detected from the script),
    ``week_start`` 0=Monday..6=Sunday. Anything ambiguous or invalid degrades to content search
    with a note (see the module docstring for every convention).
    """
    try:
        return _parse(query, now, speakers, lang, week_start)
    except Exception as exc:  # last-resort guard: a query must never break retrieval
        content = query.strip() if isinstance(query, str) else ""
        note = f"internal error {type(exc).__name__}: content-only fallback"
        return ParsedQuery("content_only", (), (), content, "relevance", (note,))


def _parse(
    query: object, now: object, speakers: Sequence[str], lang: str | None, week_start: int
) -> ParsedQuery:
    notes: list[str] = []
    if not isinstance(query, str):
        notes.append("query is not a string")
        query = ""
    text = query if query.isascii() else unicodedata.normalize("NFKC", query)
    if isinstance(now, datetime):
        today = now.date()
    elif isinstance(now, date):
        today = now
    else:
        notes.append("now is not a datetime: using 1970-01-01")
        today = date(1970, 1, 1)
    if not isinstance(week_start, int) or not 0 <= week_start <= 6:
        notes.append("week_start must be 0..6: using 0 (Monday)")
        week_start = 0
    if lang not in ("en", "ja"):
        lang = "en" if text.isascii() or not _JA_CHARS.search(text) else "ja"
    notes.append(f"lang={lang}")
    if isinstance(speakers, str):
        speakers = (speakers,)
    names = tuple(s for s in (speakers or ()) if isinstance(s, str) and s.strip())
    c = _Ctx(today, week_start, lang, text, frozenset(n.strip().lower() for n in names))

    atoms = _ranges(_merge_parts(_scan(c), c), c)
    filters: list[TimeFilter] = []
    removed: list[tuple[int, int]] = []  # blanked before tokenising
    kept: list[tuple[int, str]] = []  # time text that stays in content, verbatim
    for a in atoms:
        removed.append((a.start, a.end))
        if a.status != "ok":
            notes.append(f"{a.text!r}: {a.note or a.status}; kept as content")
            kept.append((a.start, " ".join(a.text.split())))
            continue
        if a.filt is None or a.filt.field != "session_index":
            pre = text[max(0, a.start - 60) : a.start]
            a.event = bool(_EVENT_EN.search(pre)) or (
                _EVENT_JA.match(text, a.end) is not None and _CALENDAR_JA.search(a.text) is not None
            )
        f = _to_filter(a)
        if f is None:
            continue
        if f not in filters:
            filters.append(f)
        if a.event:
            notes.append(f"{a.text!r} may date the event, not the conversation: soft filter")
            kept.append((a.start, " ".join(a.text.split())))
        if a.note:
            notes.append(f"{a.text!r}: {a.note}")

    found, speaker_spans = _find_speakers(text, names, removed)
    words = [w for _, w in sorted(_content_words(_blank(text, removed + speaker_spans)) + kept)]
    if filters:
        kind = "time_content" if words else "time_only"
    else:
        kind = "content_only"
        if not words and found:
            words = list(found)
            notes.append("only speakers: their names are the content")
    if any(f.op in ("first", "last") for f in filters) and kind == "time_content":
        notes.append("first/last: apply to the sessions matching the content")
    if not filters and _WHEN.search(text):
        notes.append("asks 'when': report the dates of the matches")
    if not text.strip():
        notes.append("empty query")
    order = "chronological" if kind == "time_only" else "relevance"
    return ParsedQuery(kind, tuple(filters), tuple(found), " ".join(words), order, tuple(notes))
