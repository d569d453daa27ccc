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
    """Interpret a naive wall-clock time in ``tz``; ambiguous DST times take the first (fold=0)."""
    return local.replace(tzinfo=zone(tz)).astimezone(dt.UTC)


def utc_now() -> dt.datetime:
    """The pipeline's clock: now, in UTC (a module function so tests can move it).

    ``memory-pipeline run`` plans partitions and the retention cutoff from this one clock,
    so the two never disagree around midnight on a machine whose local zone is not UTC.
    """
    return dt.datetime.now(dt.UTC)


def utc_today() -> dt.date:
    """Today's date on the pipeline's clock (UTC), see :func:`utc_now`."""
    return utc_now().date()
