"""Time handling shared by readers: local wall time + IANA zone -> UTC, deterministically.

Month and weekday names live in :mod:`memory_pipeline.core.common.timelex`.
"""

from __future__ import annotations

import datetime as dt
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


@lru_cache(maxsize=64)
def zone(name: str) -> ZoneInfo:
    """Cached ZoneInfo; raises ValueError with the bad name instead of a KeyError chain."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown timezone {name!r}") from exc


def to_utc(local: dt.datetime, tz: str) -> dt.datetime:
    """Interpret a naive wall-clock time in ``tz`` as an instant (UTC), keeping wall order.

    Two wall times have no single instant, and each gets one fixed rule:

    - **Nonexistent** (the hour skipped when clocks go forward, e.g. 02:30 on 2024-03-10 in
      America/New_York or on 2024-10-06 in Australia/Sydney): the first instant after the
      gap, the moment the clocks jumped. ``zoneinfo`` alone would apply the offset from
      before the jump and land the time an hour *past* the gap, after messages written at
      03:10 that night; mapping every gap time to the jump keeps a message stamped 02:30
      after the ones before the gap and no later than the ones after it (equal instants
      keep their export order).
    - **Ambiguous** (the hour repeated when clocks go back): the earlier of the two instants
      (``fold=0``), unless the caller passes ``fold=1`` for the later one. A naive time
      cannot say which occurrence it was; the earlier one is the documented choice.
    """
    off = _hour_offset(tz, local.year, local.month, local.day, local.hour)
    if off is not None:  # the common case: one offset for the whole wall-clock hour
        return (local.replace(tzinfo=None) - off).replace(tzinfo=dt.UTC, fold=0)
    z = zone(tz)
    wall = local.replace(tzinfo=None)
    before = z.utcoffset(wall.replace(fold=0))
    after = z.utcoffset(wall.replace(fold=1))
    if after > before:  # only a skipped wall time has a later offset at fold=1
        return _gap_end(z, wall.replace(fold=0), before, after)
    # ordinary (one offset) or ambiguous (the occurrence ``fold`` names, 0 by default)
    return (wall - (after if wall.fold else before)).replace(tzinfo=dt.UTC, fold=0)


@lru_cache(maxsize=4096)
def _hour_offset(tz: str, year: int, month: int, day: int, hour: int) -> dt.timedelta | None:
    """The one UTC offset of every wall time of this hour, or None when the hour holds a
    transition (a gap or a repeat): those go through the per-time rules of ``to_utc``.
    Cached per hour, as a chat's messages cluster in few hours (and the rules cost ~3x)."""
    z = zone(tz)
    start = dt.datetime(year, month, day, hour)
    end = start + dt.timedelta(minutes=59, seconds=59, microseconds=999999)
    offsets = {z.utcoffset(t.replace(fold=f)) for t in (start, end) for f in (0, 1)}
    return offsets.pop() if len(offsets) == 1 else None


def _gap_end(z: ZoneInfo, local: dt.datetime, before: dt.timedelta, after: dt.timedelta):
    """The instant the clocks jumped over the nonexistent wall time ``local``: the offset is
    ``before`` at ``local - after`` and ``after`` at ``local - before``, so the jump lies
    between; halve the interval to the microsecond (about 32 steps, only for gap times)."""
    lo = (local - after).replace(tzinfo=dt.UTC)
    hi = (local - before).replace(tzinfo=dt.UTC)
    step = dt.timedelta(microseconds=1)
    while hi - lo > step:
        mid = lo + (hi - lo) // 2
        if mid.astimezone(z).utcoffset() == after:
            hi = mid
        else:
            lo = mid
    return hi


def utc_now() -> dt.datetime:
    """The pipeline's clock: now, in UTC (a module function so tests can move it).

    ``memory-pipeline run`` plans partitions and the retention cutoff from this one clock,
    so the two never disagree around midnight on a machine whose local zone is not UTC.
    """
    return dt.datetime.now(dt.UTC)


def utc_today() -> dt.date:
    """Today's date on the pipeline's clock (UTC), see :func:`utc_now`."""
    return utc_now().date()
