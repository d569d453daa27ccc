"""SessionTimes answers exactly what the per-session ``matches_all`` loop answers."""

from __future__ import annotations

import random
from datetime import date, datetime, timedelta

import numpy as np
import pytest

from memory_pipeline.core.retrieval.timeexpr import TimeFilter, matches_all, parse_query
from memory_pipeline.core.retrieval.timemask import SessionTimes

NOW = datetime(2024, 3, 13, 15, 0)
QUERIES = [
    "what did we talk about yesterday?",
    "昨日の夜何を話した？",
    "what did we talk about on Tuesdays in the morning",
    "what did we say between May 1 and May 8 about rent?",
    "3月の旅行について何を話した？",
    "when did we first talk about the move?",
    "what did we discuss in the last session?",
    "先週の土曜日",
    "last week",
    "in 2023",
    "at night",
    "session 3",
]
EXTRA = [  # filter kinds the parser may not emit, straight from TimeFilter
    (TimeFilter("local_ts", "between", start=datetime(2024, 2, 1, 9), end=datetime(2024, 2, 20)),),
    (TimeFilter("hour", "between", start=22, end=3),),  # wraps midnight
    (TimeFilter("session_index", "between", start=2, end=4),),
    (TimeFilter("session_index", "last"), TimeFilter("weekday", "eq", 5)),
    (TimeFilter("iso_week", "eq", 6), TimeFilter("year", "eq", 2024)),
    (TimeFilter("nonsense", "eq", 1),),
    (TimeFilter("date", "eq", "2024-03-13"),),  # a malformed value never matches
]


def _sessions(n: int, seed: int):
    rng = random.Random(seed)
    starts, ends, index, count = [], [], [], []
    for _ in range(n):
        s = datetime(2024, 1, 1) + timedelta(minutes=rng.randrange(0, 90 * 24 * 60))
        starts.append(s)
        ends.append(s + timedelta(minutes=rng.randrange(0, 600)))  # may cross midnight
        c = rng.randrange(1, 8)
        count.append(c)
        index.append(rng.randrange(1, c + 1))
    # odd rows: a date instead of a timestamp, unknown index and count
    starts[3], ends[3] = date(2024, 2, 6), date(2024, 2, 6)
    index[5] = count[5] = None
    starts[7] = None
    return starts, ends, index, count


def _loop(filters, starts, ends, index, count) -> np.ndarray:
    return np.array(
        [
            any(matches_all(filters, local_ts=ts, session_index=i, n_sessions=c) for ts in (s, e))
            for s, e, i, c in zip(starts, ends, index, count, strict=True)
        ]
    )


def _filter_sets():
    sets = [parse_query(q, now=NOW).filters for q in QUERIES]
    sets = [f for f in sets if f] + EXTRA
    fields = {f.field for fs in sets for f in fs}
    # the cases the coding distinguishes are all exercised
    assert {"date", "hour", "session_index", "local_ts", "weekday"} <= fields
    return sets


@pytest.mark.parametrize("seed", [0, 1])
def test_equals_the_matches_all_loop(seed):
    cols = _sessions(400, seed)
    times = SessionTimes(*cols)
    some_differ = False
    for filters in _filter_sets():
        want = _loop(filters, *cols)
        got = times.allowed(filters)
        assert got.dtype == bool and got.shape == (400,)
        assert np.array_equal(got, want), filters
        some_differ |= 0 < want.sum() < len(want)
    assert some_differ  # the filters do select: equality is not all-True == all-True


def test_memoized_and_read_only():
    times = SessionTimes(*_sessions(50, 2))
    f = (TimeFilter("weekday", "eq", 1),)
    a = times.allowed(f)
    assert times.allowed(list(f)) is a
    with pytest.raises(ValueError):
        a[0] = not a[0]


def test_columns_must_align():
    with pytest.raises(ValueError, match="same length"):
        SessionTimes([NOW], [NOW, NOW], [1], [1])
