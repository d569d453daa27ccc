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
