"""Chunk windows: size, stride, overlap, coverage, session boundaries, rendering."""

from __future__ import annotations

import pytest

from memory_pipeline.core.quality import checks as quality
from memory_pipeline.core.sessions.chunking import chunk_sessions, chunk_windows
from memory_pipeline.core.sessions.sessionize import sessionize
from memory_pipeline_tests.factories import msg, series, table


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (1, [(0, 1)]),
        (42, [(0, 42)]),
        (43, [(0, 42), (36, 43)]),
        (78, [(0, 42), (36, 78)]),
        (79, [(0, 42), (36, 78), (72, 79)]),
        (0, []),
    ],
)
def test_windows(n, expected):
    assert chunk_windows(n) == expected


@pytest.mark.parametrize("n", range(1, 200, 7))
def test_window_invariants(n):
    windows = chunk_windows(n)
    covered = set()
    for a, b in windows:
        assert b - a <= 42
        covered.update(range(a, b))
    assert covered == set(range(n))
    for (a1, b1), (a2, _) in zip(windows, windows[1:], strict=False):
        assert a2 - a1 == 36 and b1 - a2 == 6


def test_bad_window_parameters():
    with pytest.raises(ValueError):
        chunk_windows(10, size=5, stride=6)


def test_chunks_never_cross_sessions_and_pass_invariants():
    long = series("c", "2024-03-01 10:00", [1] * 100)
    short = series("c", "2024-03-01 20:00", [1] * 5)
    other = series("d", "2024-03-01 10:00", [1] * 50)
    t = table(*long, *short, *other)
    sessions = sessionize(t, 180)
    chunks = chunk_sessions(sessions, t)
    assert sorted(chunks.column("message_count").to_pylist()) == [5, 14, 28, 42, 42, 42]
    ok, meta = quality.chunk_invariants(chunks, sessions, 42, 36)
    assert ok, meta
    sid_of = {}
    for sid, ids in zip(
        sessions.column("session_id").to_pylist(),
        sessions.column("message_ids").to_pylist(),
        strict=True,
    ):
        sid_of.update(dict.fromkeys(ids, sid))
    for sid, ids in zip(
        chunks.column("session_id").to_pylist(),
        chunks.column("message_ids").to_pylist(),
        strict=True,
    ):
        assert {sid_of[m] for m in ids} == {sid}


def test_raw_text_renders_time_and_speaker_per_line():
    msgs = [
        msg("2024-03-01 23:59", "good night", "A", order=0),
        msg("2024-03-02 00:01", "line one\nline two", "B", order=1),
        msg("2024-03-02 00:02", "", "B", order=2, type_="sticker"),
    ]
    t = table(*msgs)
    chunks = chunk_sessions(sessionize(t, 180), t)
    assert chunks.column("raw_text").to_pylist() == [
        "[2024-03-01 23:59] A: good night\n"
        "[2024-03-02 00:01] B: line one\n  line two\n"
        "[2024-03-02 00:02] B: [sticker]"
    ]


def test_invariant_check_detects_a_broken_chunk_table():
    t = table(*series("c", "2024-03-01 10:00", [1] * 50))
    sessions = sessionize(t, 180)
    chunks = chunk_sessions(sessions, t)
    ok, meta = quality.chunk_invariants(chunks.slice(0, 1), sessions, 42, 36)
    assert not ok and meta["problems"]["messages_not_in_any_chunk"] == 8
    ok, _ = quality.chunk_invariants(chunks, sessions, 40, 36)
    assert not ok


def test_chunk_ids_stable_across_runs():
    t = table(*series("c", "2024-03-01 10:00", [1] * 80))
    a = chunk_sessions(sessionize(t, 180), t).column("chunk_id").to_pylist()
    b = chunk_sessions(sessionize(t, 180), t).column("chunk_id").to_pylist()
    assert a == b and len(set(a)) == 3
