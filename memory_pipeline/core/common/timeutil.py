"""Time handling shared by readers: local wall time + IANA zone -> UTC, deterministically."""

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


# English month names and abbreviations -> month number ("sept" too): LoCoMo session times,
# memory dates ("on March 20").
MONTH_NUMBERS: dict[str, int] = {
    name: number
    for number, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
