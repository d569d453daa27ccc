"""Time filters over every session at once: the same answer as ``matches_all`` per session,
without a Python call per session and timestamp.

A search with a time expression asks, for each of its hard filters, which sessions start or
end inside it. On all RealPersonaChat that is 13,590 sessions x 2 timestamps x ``matches``:
~22-30 ms of a query's budget. But a filter reads little of a timestamp: a ``date`` /
``weekday`` / ``iso_week`` / ``month`` / ``year`` filter only its date (a corpus spans a few
hundred days), an ``hour`` filter only its hour (24 values), a ``session_index`` filter only
the (index, count) pair. So each filter is evaluated once per distinct key, by ``matches``
itself (the semantics stay in one place), and the per-session answer is an index into that
small table. Only a ``local_ts`` filter (a full timestamp range) is evaluated per distinct
timestamp.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime
from typing import Any

import numpy as np

from memory_pipeline.core.retrieval.timeexpr import TimeFilter, matches

__all__ = ["SessionTimes"]

# fields whose value is a function of the date alone (``timeexpr._field_value``)
DATE_FIELDS = frozenset({"date", "weekday", "iso_week", "month", "year"})
_CACHE = 256  # filter tuples whose session answer is kept (a query asks twice: search, rerank)


def _codes(values: Sequence[Any]) -> tuple[list[Any], np.ndarray]:
    """(distinct values in first-seen order, each value's index into them)."""
    seen: dict[Any, int] = {}
    codes = np.fromiter((seen.setdefault(v, len(seen)) for v in values), np.int64, len(values))
    return list(seen), codes


def _date_of(ts: Any) -> Any:
    """What a date-field filter reads of ``ts`` (a date stays a date; anything else as is,
    so ``matches`` answers for it exactly as it would for the timestamp)."""
    return ts.date() if isinstance(ts, datetime) else ts


def _hour_of(ts: Any) -> Any:
    """The timestamp an ``hour`` filter sees: only ``.hour`` is read, so one representative
    per hour (a date or None has no hour and never matches: kept as is)."""
    return datetime(2000, 1, 1, ts.hour) if isinstance(ts, datetime) else ts


class SessionTimes:
    """Each session's start / end local timestamps and (index, count) in its conversation,
    coded by the distinct keys each filter kind reads (built once per index version)."""

    def __init__(
        self,
        starts: Sequence[datetime | date | None],
        ends: Sequence[datetime | date | None],
        session_index: Sequence[int | None],
        n_sessions: Sequence[int | None],
    ) -> None:
        n = len(starts)
        if not (len(ends) == len(session_index) == len(n_sessions) == n):
            raise ValueError("session columns must have the same length")
        self.n = n
        stamps = [*starts, *ends]  # row i: start of session i; row n + i: its end
        self._stamps, self._stamp_code = _codes(stamps)
        self._dates, self._date_code = _codes([_date_of(t) for t in stamps])
        self._hours, self._hour_code = _codes([_hour_of(t) for t in stamps])
        self._pairs, self._pair_code = _codes(list(zip(session_index, n_sessions, strict=True)))
        self._memo: dict[tuple[TimeFilter, ...], np.ndarray] = {}

    def _stamp_ok(self, f: TimeFilter) -> np.ndarray:
        """Whether each of the 2n stamps passes ``f`` (not a session_index filter)."""
        if f.field in DATE_FIELDS:
            keys, code = self._dates, self._date_code
        elif f.field == "hour":
            keys, code = self._hours, self._hour_code
        else:  # local_ts, or a field matches() does not know (it answers False)
            keys, code = self._stamps, self._stamp_code
        table = np.fromiter((matches(f, local_ts=k) for k in keys), bool, len(keys))
        return table[code]

    def allowed(self, filters: Sequence[TimeFilter]) -> np.ndarray:
        """Per session: ``any(matches_all(filters, local_ts=ts, session_index=...,
        n_sessions=...) for ts in (start, end))``, as a boolean array (memoized)."""
        key = tuple(filters)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        stamp_ok = np.ones(2 * self.n, dtype=bool)
        session_ok = np.ones(self.n, dtype=bool)
        for f in key:
            if f.field == "session_index":
                table = np.fromiter(
                    (
                        matches(f, local_ts=date(2000, 1, 1), session_index=i, n_sessions=c)
                        for i, c in self._pairs
                    ),
                    bool,
                    len(self._pairs),
                )
                session_ok &= table[self._pair_code]
            else:
                stamp_ok &= self._stamp_ok(f)
        out = session_ok & (stamp_ok[: self.n] | stamp_ok[self.n :])
        out.setflags(write=False)
        if len(self._memo) >= _CACHE:
            self._memo.clear()
        self._memo[key] = out
        return out
