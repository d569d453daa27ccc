"""Sessionization edge cases: threshold exactly, midnight, one-message sessions, ordering."""

from __future__ import annotations

import datetime as dt

import pytest

from memory_pipeline.core.sessions.sessionize import owned_by, sessionize
from memory_pipeline_tests.factories import msg, series, table


def counts(sessions) -> list[int]:
    return sessions.sort_by("start_ts").column("message_count").to_pylist()


@pytest.mark.parametrize(
    ("gap_after", "expected"),
    [
        (180, [2]),  # exactly at the threshold: same session
        (180.01, [1, 1]),  # strictly longer: new session
        (179, [2]),
    ],
)
def test_gap_exactly_at_threshold(gap_after, expected):
    msgs = series("c", "2024-03-01 10:00", [0, gap_after])
    assert counts(sessionize(table(*msgs), 180)) == expected


@pytest.mark.parametrize("gap", [180, 120, 20])
def test_configurable_gaps(gap):
    msgs = series("c", "2024-03-01 10:00", [0, gap - 1, gap + 1, 1])
    assert counts(sessionize(table(*msgs), gap)) == [2, 2]


def test_session_crossing_midnight_is_one_session_owned_by_start_date():
    msgs = series("c", "2024-03-01 23:40", [0, 10, 10, 10, 10])  # 23:40 .. 00:20
    s = sessionize(table(*msgs), 180)
    assert s.num_rows == 1
    row = s.to_pylist()[0]
    assert row["local_date"] == dt.date(2024, 3, 1)
    assert row["end_local_date"] == dt.date(2024, 3, 2)
    assert row["message_count"] == 5
    assert owned_by(s, [dt.date(2024, 3, 2)]).num_rows == 0
    assert owned_by(s, [dt.date(2024, 3, 1)]).num_rows == 1


def test_one_message_sessions():
    msgs = series("c", "2024-03-01 08:00", [0, 300, 300])
    s = sessionize(table(*msgs), 180)
    assert counts(s) == [1, 1, 1]
    assert s.column("duration_seconds").to_pylist() == [0, 0, 0]
    assert s.column("max_gap_seconds").to_pylist() == [0, 0, 0]


def test_conversations_never_share_a_session():
    a = series("a", "2024-03-01 10:00", [0, 1, 1])
    b = series("b", "2024-03-01 10:00", [0.5, 1])
    s = sessionize(table(*a, *b), 180)
    assert sorted(counts(s)) == [2, 3]
    assert sorted(s.column("conversation_id").to_pylist()) == ["a", "b"]


def test_out_of_order_input_is_sorted_by_time_then_source_order():
    m1 = msg("2024-03-01 10:05", "later", order=0)
    m2 = msg("2024-03-01 10:00", "earlier", order=1)
    s = sessionize(table(m1, m2), 180)
    t = table(m1, m2)
    ids = dict(zip(t.column("text").to_pylist(), t.column("message_id").to_pylist(), strict=True))
    assert s.column("message_ids").to_pylist()[0] == [ids["earlier"], ids["later"]]


def test_ids_are_stable_and_content_derived():
    msgs = series("c", "2024-03-01 10:00", [0, 1, 500])
    a, b = sessionize(table(*msgs), 180), sessionize(table(*reversed(msgs)), 180)
    assert a.column("session_id").to_pylist() == b.column("session_id").to_pylist()
    changed = [*msgs[:2], msg("2024-03-01 18:21", "different", order=2)]
    c = sessionize(table(*changed), 180)
    assert c.column("session_id").to_pylist()[0] == a.column("session_id").to_pylist()[0]
    assert c.column("session_id").to_pylist()[1] != a.column("session_id").to_pylist()[1]


def test_owner_counts_and_participants():
    msgs = series("c", "2024-03-01 10:00", [0, 1, 1, 1], sender_cycle="AAB")
    row = sessionize(table(*msgs), 180).to_pylist()[0]
    assert row["owner_message_count"] == 3
    assert row["participants"] == ["A", "B"]


def test_invalid_gap_rejected():
    with pytest.raises(ValueError, match="gap_minutes"):
        sessionize(table(*series("c", "2024-03-01 10:00", [0])), 0)
    with pytest.raises(ValueError, match="gap_minutes"):
        sessionize(table(*series("c", "2024-03-01 10:00", [0])), 1441)
