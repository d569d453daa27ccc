"""Dates of plans and events, resolved against the stating message's local time.

"next Friday", "on the 14th", 来週の金曜, 3月5日: each pattern gives a calendar date
relative to the message that states it (``resolve_date``), so a memory's date does not
drift with the day the pipeline runs.
"""

from __future__ import annotations

import datetime as dt
import re

from memory_pipeline.core.common.timelex import (
    JA_WEEKDAY_NUMBERS,
    JA_WEEKDAYS,
    MONTH_NUMBERS,
    MONTH_PATTERN,
    WEEKDAY_NUMBERS,
    WEEKDAY_PATTERN,
)

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
