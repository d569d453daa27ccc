"""Wall times -> UTC keeps wall-clock order, also across the hours DST skips or repeats.

A wall time in the skipped hour (clocks forward) has no instant; ``zoneinfo`` applies the
offset from before the jump and puts it an hour *past* the gap, after messages written
later that night. ``to_utc`` maps every skipped time to the jump itself. Repeated times
(clocks back) take the earlier occurrence unless ``fold=1`` asks for the later one.
Zones of both hemispheres, a half-hour shift, a skipped day and one with no DST at all.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from memory_pipeline.core.common.records import Message
from memory_pipeline.core.common.timeutil import to_utc
from memory_pipeline.core.ingest.sources.base import SourceSpec
from memory_pipeline.core.ingest.sources.line_json import read_line_json

UTC = dt.UTC

# zone, the day clocks go forward there, the jump's wall time before -> after, its instant
GAPS = [
    ("America/New_York", dt.datetime(2024, 3, 10, 2), dt.datetime(2024, 3, 10, 3)),
    ("Europe/London", dt.datetime(2024, 3, 31, 1), dt.datetime(2024, 3, 31, 2)),
    ("Australia/Sydney", dt.datetime(2024, 10, 6, 2), dt.datetime(2024, 10, 6, 3)),
    ("Australia/Lord_Howe", dt.datetime(2024, 10, 6, 2), dt.datetime(2024, 10, 6, 2, 30)),
    ("America/Santiago", dt.datetime(2024, 9, 8, 0), dt.datetime(2024, 9, 8, 1)),
    ("Pacific/Apia", dt.datetime(2011, 12, 30, 0), dt.datetime(2011, 12, 31, 0)),
]
# zone and a wall time it repeats (clocks back), northern and southern
REPEATS = [
    ("America/New_York", dt.datetime(2024, 11, 3, 1, 30)),
    ("Australia/Sydney", dt.datetime(2024, 4, 7, 2, 30)),
    ("Europe/Berlin", dt.datetime(2024, 10, 27, 2, 15)),
]


def _zoneinfo(local: dt.datetime, tz: str) -> dt.datetime:
    """What zoneinfo alone gives (the old rule)."""
    return local.replace(tzinfo=ZoneInfo(tz)).astimezone(UTC)


@pytest.mark.parametrize(("tz", "gap_start", "gap_end"), GAPS, ids=[g[0] for g in GAPS])
def test_a_skipped_wall_time_is_the_jump_and_sorts_before_later_messages(tz, gap_start, gap_end):
    jump = _zoneinfo(gap_end, tz)  # the first wall time that exists after the gap
    inside = gap_start + (gap_end - gap_start) / 2
    assert to_utc(inside, tz) == to_utc(gap_start, tz) == jump
    assert to_utc(gap_end - dt.timedelta(microseconds=1), tz) == jump
    # the bug: zoneinfo puts the gap time after a message written ten minutes past the jump
    later = gap_end + dt.timedelta(minutes=10)
    assert _zoneinfo(inside, tz) > _zoneinfo(later, tz)
    assert to_utc(inside, tz) < to_utc(later, tz)
    before = gap_start - dt.timedelta(minutes=1)
    assert to_utc(before, tz) < to_utc(inside, tz)


@pytest.mark.parametrize(("tz", "gap_start", "gap_end"), GAPS, ids=[g[0] for g in GAPS])
def test_wall_order_is_kept_through_the_transition_day(tz, gap_start, gap_end):
    """Every 5 minutes from the day before to the day after: never out of order, and every
    time that exists is exactly zoneinfo's instant."""
    t = gap_start - dt.timedelta(days=1)
    previous = None
    while t < gap_end + dt.timedelta(days=1):
        got = to_utc(t, tz)
        assert got.tzinfo is UTC
        if previous is not None:
            assert got >= previous, t
        if not gap_start <= t < gap_end:
            assert got == _zoneinfo(t, tz), t
        previous = got
        t += dt.timedelta(minutes=5)


@pytest.mark.parametrize(("tz", "wall"), REPEATS, ids=[r[0] for r in REPEATS])
def test_a_repeated_wall_time_takes_the_earlier_instant_unless_fold_1(tz, wall):
    first, second = to_utc(wall, tz), to_utc(wall.replace(fold=1), tz)
    assert second - first == dt.timedelta(hours=1)
    assert first == _zoneinfo(wall, tz) and second == _zoneinfo(wall.replace(fold=1), tz)


def test_no_dst_zone_is_a_fixed_offset():
    for hour in range(24):
        wall = dt.datetime(2024, 3, 10, hour, 30)
        assert to_utc(wall, "Asia/Tokyo") == (wall - dt.timedelta(hours=9)).replace(tzinfo=UTC)


def test_a_reader_keeps_the_order_of_messages_stamped_in_the_gap(tmp_path: Path):
    """Through the JSON reader: an export whose clock did not jump keeps its order."""
    folder = tmp_path / "json" / "kenta"
    folder.mkdir(parents=True)
    times = ["01:50:00", "02:30:00", "02:45:00", "03:10:00"]
    msgs = [
        {"time": t, "sender": "kenta", "type": "text", "text": f"m{i}", "source_order": i}
        for i, t in enumerate(times)
    ]
    body = {"date": "2024-03-10", "contact": "kenta", "messages": msgs}
    (folder / "2024-03-10.json").write_text(json.dumps(body), encoding="utf-8")
    spec = SourceSpec("j", "line_json", tmp_path / "json", "America/New_York", "Yuki")
    recs = [r for r in read_line_json(spec, None) if isinstance(r, Message)]
    by_time = sorted(recs, key=lambda r: (r.ts, r.source_order))
    assert [r.text for r in by_time] == ["m0", "m1", "m2", "m3"]
