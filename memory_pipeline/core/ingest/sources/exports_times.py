"""Times of the chat exports: wall times and epoch instants as (naive local, aware UTC).

Split from :mod:`~memory_pipeline.core.ingest.sources.exports` (which re-exports every name
here). The per-zone clocks cache each hour's UTC offset, so a reader converts millions of
timestamps without a zone lookup each, and every reader converts the same way.
"""

from __future__ import annotations

import datetime as dt
import functools

from memory_pipeline.core.common.timeutil import to_utc, zone


def local_and_utc(local: dt.datetime, tz: str) -> tuple[dt.datetime, dt.datetime]:
    """(naive local, aware UTC) of a naive wall time in ``tz``. A wall time in a DST gap
    (02:30 on a spring-forward night) is moved forward by the gap, as the phone's clock was."""
    return wall_clock(tz)(local)


def _local_and_utc(local: dt.datetime, tz: str) -> tuple[dt.datetime, dt.datetime]:
    utc = to_utc(local, tz)
    back = utc.astimezone(zone(tz)).replace(tzinfo=None)
    return back, utc


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_HOUR = dt.timedelta(hours=1)
_HOUR_END = dt.timedelta(minutes=59, seconds=59, microseconds=999_999)
_MAX_HOURS = 1 << 18  # cached hours per zone (30 years); the cache restarts past it


class WallClock:
    """:func:`local_and_utc` for one zone, fast: the UTC offset of each local hour is worked
    out once (two zone conversions, at the hour's first and last microsecond) and reused for
    the hour's messages. An hour whose two ends differ or that holds a DST gap is never
    cached: its times take the exact per-message path, so gaps and folds come out as in
    :func:`local_and_utc` (zones change offset at most once an hour)."""

    def __init__(self, tz: str) -> None:
        self.tz = tz
        zone(tz)
        self._hours: dict[tuple[dt.date, int], dt.timedelta | None] = {}

    def __call__(self, local: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
        key = (local.date(), local.hour)
        try:
            off = self._hours[key]
        except KeyError:
            off = self._offset(dt.datetime.combine(key[0], dt.time(key[1])))
            if len(self._hours) >= _MAX_HOURS:
                self._hours.clear()
            self._hours[key] = off
        if off is None or local.fold:
            return _local_and_utc(local, self.tz)
        return local, (local - off).replace(tzinfo=dt.UTC)

    def _offset(self, h0: dt.datetime) -> dt.timedelta | None:
        try:
            end = h0 + _HOUR_END
            a_local, a_utc = _local_and_utc(h0, self.tz)
            b_local, b_utc = _local_and_utc(end, self.tz)
        except (OverflowError, ValueError):
            return None
        if a_local != h0 or b_local != end or h0.fold or a_local.fold or b_local.fold:
            return None
        off = h0 - a_utc.replace(tzinfo=None)
        return off if off == end - b_utc.replace(tzinfo=None) else None


class EpochClock:
    """UTC instant -> naive local time in one zone, with the offset cached per UTC hour (an
    hour whose ends differ, or that lies in a repeated hour, converts exactly)."""

    def __init__(self, tz: str) -> None:
        self.zone = zone(tz)
        self._hours: dict[int, dt.timedelta | None] = {}

    def local(self, utc: dt.datetime, hour: int | None = None) -> dt.datetime:
        """Naive local time of an aware UTC instant; ``hour`` is its hour since the epoch,
        when the caller has it (``ms // 3_600_000``)."""
        key = (utc - _EPOCH) // _HOUR if hour is None else hour
        try:
            off = self._hours[key]
        except KeyError:
            off = self._offset(_EPOCH + key * _HOUR)
            if len(self._hours) >= _MAX_HOURS:
                self._hours.clear()
            self._hours[key] = off
        if off is None:
            return utc.astimezone(self.zone).replace(tzinfo=None)
        return (utc + off).replace(tzinfo=None)

    def _offset(self, h0: dt.datetime) -> dt.timedelta | None:
        try:
            a = h0.astimezone(self.zone)
            b = (h0 + _HOUR_END).astimezone(self.zone)
        except (OverflowError, ValueError):
            return None
        if a.fold or b.fold or a.utcoffset() != b.utcoffset():
            return None
        return a.utcoffset()


@functools.lru_cache(maxsize=64)
def wall_clock(tz: str) -> WallClock:
    """The shared :class:`WallClock` of a zone (raises ValueError for an unknown zone)."""
    return WallClock(tz)


@functools.lru_cache(maxsize=64)
def epoch_clock(tz: str) -> EpochClock:
    """The shared :class:`EpochClock` of a zone."""
    return EpochClock(tz)


def from_epoch(seconds: float, tz: str) -> tuple[dt.datetime, dt.datetime]:
    """(naive local in ``tz``, aware UTC) of an epoch instant."""
    utc = dt.datetime.fromtimestamp(seconds, dt.UTC)
    return epoch_clock(tz).local(utc), utc


def from_epoch_ms(ms: int, tz: str) -> tuple[dt.datetime, dt.datetime]:
    """(naive local in ``tz``, aware UTC) of an epoch instant in milliseconds, exactly (no
    float rounding): SMS backups, Meta exports and Slack keep milliseconds or finer."""
    utc = _EPOCH + dt.timedelta(milliseconds=ms)
    return epoch_clock(tz).local(utc, ms // 3_600_000), utc


def epoch_ms(value: object) -> int | None:
    """An epoch value in milliseconds, from seconds or milliseconds (int, float or numeric
    string): values below 10^11 are seconds (10^11 ms is 1973, 10^11 s is year 5138).
    None when the value is not a number."""
    try:
        x = float(str(value).strip())
    except ValueError:
        return None
    if x != x or x in (float("inf"), float("-inf")) or x < 0:
        return None
    return round(x * 1000) if x < 1e11 else round(x)


def parse_iso(value: object) -> dt.datetime | None:
    """An ISO 8601 instant with an offset (``Z`` too) as aware UTC, else None."""
    if not isinstance(value, str) or not value:
        return None
    try:
        t = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t.astimezone(dt.UTC) if t.tzinfo is not None else None
