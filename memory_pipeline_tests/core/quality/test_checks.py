"""The composite table checks of ``core.quality.checks``: pass on good tables, fail on bad ones."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from memory_pipeline.core.quality import checks as quality
from memory_pipeline.core.sessions.sessionize import sessionize
from memory_pipeline_tests.factories import series, table

D1 = dt.date(2024, 3, 1)
GAP = 180


def set_column(t: pa.Table, name: str, values: list) -> pa.Table:
    i = t.schema.get_field_index(name)
    return t.set_column(i, t.field(i), pa.array(values, t.field(i).type))


def test_all_of_passes_only_when_every_part_passes_and_keeps_all_metadata():
    assert quality.all_of((True, {"a": 1}), (True, {"b": 2})) == (True, {"a": 1, "b": 2})
    assert quality.all_of((True, {"a": 1}), (False, {"b": 2})) == (False, {"a": 1, "b": 2})
    assert quality.all_of((False, {"a": 1}), (True, {"a": 3})) == (False, {"a": 3})
    assert quality.all_of() == (True, {})


def test_messages_in_partition_passes_on_ingested_messages():
    messages = table(*series("c", "2024-03-01 10:00", [1, 2, 3]))
    ok, meta = quality.messages_in_partition(messages, [D1])
    assert ok, meta
    assert meta == {"rows_outside_partition": 0, "mismatches": 0}


def test_messages_in_partition_fails_outside_the_run_or_off_its_local_date():
    messages = table(*series("c", "2024-03-01 10:00", [1, 2, 3]))
    ok, meta = quality.messages_in_partition(messages, [D1 + dt.timedelta(days=1)])
    assert not ok and meta["rows_outside_partition"] == 3
    # filed under the next day although its local wall time says March 1st
    moved = set_column(messages, "local_date", [D1, D1, D1 + dt.timedelta(days=1)])
    ok, meta = quality.messages_in_partition(moved, [D1, D1 + dt.timedelta(days=1)])
    assert not ok
    assert meta == {"rows_outside_partition": 0, "mismatches": 1}


def test_sessions_valid_passes_on_sessionized_messages():
    messages = table(
        *series("c", "2024-03-01 10:00", [1, 2]), *series("c", "2024-03-01 20:00", [1])
    )
    sessions = sessionize(messages, GAP)
    ok, meta = quality.sessions_valid(sessions, messages, GAP, [D1])
    assert ok, meta
    assert meta["sessions"] == 2 and meta["rows_outside_partition"] == 0


def test_sessions_valid_fails_on_a_gap_violation_or_a_foreign_partition():
    messages = table(
        *series("c", "2024-03-01 10:00", [1, 2]), *series("c", "2024-03-01 20:00", [1])
    )
    sessions = sessionize(messages, GAP)
    # a larger gap would have kept both in one session: they are too close for it
    ok, meta = quality.sessions_valid(sessions, messages, 24 * 60, [D1])
    assert not ok and meta["problems"]["consecutive_sessions_too_close"] == 1
    ok, meta = quality.sessions_valid(sessions, messages, GAP, [D1 + dt.timedelta(days=1)])
    assert not ok and meta["rows_outside_partition"] == 2
