"""Calendar arithmetic and the atoms a time expression is built from.

An atom is one recognised piece ("last week", "3月", "on Friday") resolved against the
query's context (today, the week start) into a date range or a field filter; the grammar
(``timegrammar``) finds them and the range logic (``timeranges``) combines them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from memory_pipeline.core.retrieval.timefilter import RECENT_DAYS, TimeFilter, _Value

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
