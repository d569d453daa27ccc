"""The source watch: which dates changed, from file stats, hashes and per-date digests."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from memory_pipeline.core.ingest.sources import SourceSpec
from memory_pipeline.core.ingest.watch import (
    SourceMissingError,
    WatchState,
    defer,
    newest_change_ns,
    not_yet_ingested,
    range_digest,
    run_ranges,
    scan,
)
from memory_pipeline_tests.defs.test_automation import D1, D2, D3, export

START = D1


def spec(folder: Path) -> SourceSpec:
    return SourceSpec(name="chats", kind="line_txt", path=folder, timezone="Asia/Tokyo")


def look(folder: Path, state: WatchState) -> tuple[list[dt.date], WatchState]:
    changes = scan([spec(folder)], START, WatchState.from_json(state.to_json()))
    return list(changes.dates), changes.state


def test_a_re_export_with_one_more_day_affects_only_that_day(tmp_path: Path):
    path = tmp_path / "kim.txt"
    path.write_text(export("Kim", {D1: ["hello", "hi"], D2: ["lunch?", "sure"]}), "utf-8")
    dates, state = look(tmp_path, WatchState())
    assert dates == [D1, D2]
    path.write_text(
        export("Kim", {D1: ["hello", "hi"], D2: ["lunch?", "sure"], D3: ["new day", "yes"]}),
        "utf-8",
    )
    dates, state = look(tmp_path, state)
    assert dates == [D3]
    assert look(tmp_path, state)[0] == []


def test_a_deleted_export_affects_its_dates_and_pending_dates_come_back(tmp_path: Path):
    (tmp_path / "kim.txt").write_text(export("Kim", {D1: ["a", "b"]}), "utf-8")
    (tmp_path / "ren.txt").write_text(export("Ren", {D2: ["c", "d"]}), "utf-8")
    _, state = look(tmp_path, WatchState())
    (tmp_path / "ren.txt").unlink()
    dates, state = look(tmp_path, state)
    assert dates == [D2]
    dates, state = look(tmp_path, defer(state, [D3]))
    assert dates == [D3]  # deferred once, reported again with no file change
    assert look(tmp_path, state)[0] == []


def test_the_state_holds_no_text(tmp_path: Path):
    (tmp_path / "kim.txt").write_text(export("Kim", {D1: ["zebracorn sighting", "b"]}), "utf-8")
    _, state = look(tmp_path, WatchState())
    assert "zebracorn" not in state.to_json()


def test_a_missing_source_path_raises_before_anything_is_compared(tmp_path: Path):
    with pytest.raises(SourceMissingError, match="'chats'.*does not exist"):
        scan([spec(tmp_path / "gone")], START, WatchState())


def test_a_first_look_skips_dates_ingested_after_the_last_file_change(tmp_path: Path):
    path = tmp_path / "kim.txt"
    path.write_text(export("Kim", {D1: ["hello", "hi"], D2: ["lunch?", "sure"]}), "utf-8")
    changed = newest_change_ns([spec(tmp_path)]) / 1e9
    dates = {D1: "a", D2: "b", D3: "c"}
    # D1 ingested after the file was written, D2 before it, D3 never
    ingested = {D1: changed + 5, D2: changed - 5}
    assert not_yet_ingested(dates, ingested, newest_change_ns([spec(tmp_path)])) == {
        D2: "b",
        D3: "c",
    }


def test_the_newest_change_counts_a_copy_that_kept_an_old_mtime(tmp_path: Path):
    import os

    path = tmp_path / "kim.txt"
    path.write_text(export("Kim", {D1: ["hello", "hi"]}), "utf-8")
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))  # mtime set back to 1970 (cp -p)
    assert path.stat().st_mtime_ns == 1_000_000_000
    assert newest_change_ns([spec(tmp_path)]) == path.stat().st_ctime_ns > 1_000_000_000
    assert newest_change_ns([spec(tmp_path / "gone")]) == 0


def _days(first: str, last: str) -> set[dt.date]:
    a, b = dt.date.fromisoformat(first), dt.date.fromisoformat(last)
    return {a + dt.timedelta(days=i) for i in range((b - a).days + 1)}


def test_run_ranges_add_the_neighbours_clip_to_partitions_and_merge():
    parts = _days("2024-03-01", "2024-03-20")

    def ranges(*changed: str):
        days = [dt.date.fromisoformat(d) for d in changed]
        return [
            (str(a), str(b), [str(d) for d in ds])
            for a, b, ds in run_ranges(days, parts.__contains__)
        ]

    assert ranges("2024-03-10") == [("2024-03-09", "2024-03-11", ["2024-03-10"])]
    # first / last partition: no neighbour outside the partitions
    assert ranges("2024-03-01") == [("2024-03-01", "2024-03-02", ["2024-03-01"])]
    assert ranges("2024-03-20") == [("2024-03-19", "2024-03-20", ["2024-03-20"])]
    # overlapping or touching windows are one run (two runs would write the same partition)
    assert ranges("2024-03-05", "2024-03-07") == [
        ("2024-03-04", "2024-03-08", ["2024-03-05", "2024-03-07"])
    ]
    assert ranges("2024-03-05", "2024-03-08") == [
        ("2024-03-04", "2024-03-09", ["2024-03-05", "2024-03-08"])
    ]
    assert ranges("2024-03-05", "2024-03-09") == [
        ("2024-03-04", "2024-03-06", ["2024-03-05"]),
        ("2024-03-08", "2024-03-10", ["2024-03-09"]),
    ]
    # a date that is no partition (today, before midnight) asks for nothing yet
    assert ranges("2024-03-21") == []


def test_range_digest_changes_with_content_only():
    a = {D1: "x", D2: "y"}
    assert range_digest(a, [D1, D2]) == range_digest(dict(a), [D2, D1])
    assert range_digest(a, [D1, D2]) != range_digest({D1: "x", D2: "z"}, [D1, D2])


def test_the_cursor_is_short_and_names_a_stored_state(tmp_path: Path):
    """Dagster shows a sensor's cursor on its page: it carries a digest and counts, not every
    file; the state comes back from the file it names, and a failed tick's older cursor too."""
    from memory_pipeline.core.ingest.watch import KEEP_STATES, load_state, save_state

    folder = tmp_path / "exports"
    folder.mkdir()
    for i in range(30):
        (folder / f"friend{i}.txt").write_text(export(f"F{i}", {D1: ["a", "b"], D2: ["c"]}))
    _, state = look(folder, WatchState())
    states = tmp_path / "state"
    cursor = save_state(state, states)
    assert len(cursor) < 100 and len(state.to_json()) > 2_000
    assert cursor.startswith("v1:") and f"files={len(state.files)}" in cursor
    assert load_state(cursor, states).to_json() == state.to_json()
    older = cursor
    for n in range(KEEP_STATES + 3):
        state.pending = [f"2024-04-{n + 1:02d}"]
        cursor = save_state(state, states)
    assert len(list(states.glob("*.json"))) == KEEP_STATES + 1
    assert load_state(cursor, states).pending == state.pending
    assert load_state(older, states).files == {}  # long gone: a first look, not a crash
    assert load_state(None, states).files == {} and load_state('{"version":1}', states).files == {}
