"""Time filters and how a timestamp or a session is tested against them.

A :class:`TimeFilter` is one constraint (a date range, a weekday, a part of the day, a
session index); a :class:`ParsedQuery` carries the filters of one query, AND-ed. Kept apart
from the parser so that the mask code (``timemask``) and the searcher read the filter types
without the grammar.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, time

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
