"""A run builds the days with data only, and that equals building the calendar.

``memory-pipeline run`` executes the assets over exactly the dates that hold records
(``build_assets(cfg, days=...)``, static partition keys equal to the calendar's), so an
empty day stores nothing: no Parquet file, no materialization, no check evaluation. What is
built must not change: sessions that cross midnight still join their next day, a later
export that fills a gap gives what a full rebuild gives, and a removed export is cleared.
(Wall time and event totals of whole runs are measured by benchmarks/bench_life.py.)
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import dagster as dg
import pyarrow.compute as pc
import pytest

from memory_pipeline.core.ingest.stage import discover_dates, plan_days, stored_dates
from memory_pipeline.defs.build import build_assets
from memory_pipeline_tests.pipeline_helpers import INGEST_KEYS, Runner, write_config

A = dt.date(2023, 5, 1)
CHECK_EVALUATION = dg.DagsterEventType.ASSET_CHECK_EVALUATION
PLANNED = dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED


def _day(root: Path, conv: str, day: dt.date, times: list[str]) -> None:
    folder = root / "json" / conv
    folder.mkdir(parents=True, exist_ok=True)
    msgs = [
        {"time": t, "sender": ("kenta" if i % 2 else "Yuki"), "type": "text", "text": f"{day} {t}"}
        for i, t in enumerate(times)
    ]
    body = {"date": day.isoformat(), "contact": conv, "messages": msgs}
    (folder / f"{day}.json").write_text(json.dumps(body), encoding="utf-8")


def _config(root: Path) -> Path:
    return write_config(
        root,
        """
[pipeline]
owner = "Yuki"
timezone = "UTC"
output_dir = "out"

[[sources]]
name = "chat"
kind = "line_json"
path = "json"
""",
    )


def _history(root: Path, *, late_export: bool) -> Path:
    """A at night runs past midnight into A+1; a quiet gap; B+9 at night into B+10.
    ``late_export``: a later export adds A+3, whose first message continues nothing."""
    _day(root, "kenta", A, ["21:00:00", "23:40:00", "23:55:00"])
    _day(root, "kenta", A + dt.timedelta(1), ["00:20:00", "00:50:00", "12:00:00"])
    _day(root, "kenta", A + dt.timedelta(9), ["22:30:00", "23:59:00"])
    _day(root, "kenta", A + dt.timedelta(10), ["00:30:00"])
    if late_export:
        _day(root, "mei", A + dt.timedelta(3), ["08:00:00", "08:05:00"])
    return _config(root)


def _build(runner: Runner, days: list[dt.date]) -> None:
    for keys in (INGEST_KEYS, ["sessions"], ["chunks"]):
        runner.run(keys, days)


def _sparse_runner(config: Path, out: Path) -> tuple[Runner, list[dt.date]]:
    """A runner over the days a `memory-pipeline run` would plan (data + stored days)."""
    r = Runner(config, out)
    found = discover_dates(r.cfg.sources, r.cfg.start_date)
    days = plan_days(found, stored_dates(r.store), min(found), max(found))
    r.assets = build_assets(r.cfg, days=days)
    return r, days


@pytest.fixture(scope="module")
def calendar(tmp_path_factory) -> Runner:
    """The reference: the whole calendar range A..A+10 on calendar partitions."""
    root = tmp_path_factory.mktemp("calendar")
    r = Runner(_history(root, late_export=True), root / "out")
    _build(r, [A, A + dt.timedelta(10)])
    return r


def test_days_with_data_equal_the_calendar_build(calendar: Runner, tmp_path):
    r, days = _sparse_runner(_history(tmp_path, late_export=True), tmp_path / "out")
    assert days == [A + dt.timedelta(n) for n in (0, 1, 3, 9, 10)]
    _build(r, days)
    assert r.tables() == calendar.tables()
    sessions = r.tables()["sessions"]
    crossing = pc.not_equal(sessions.column("local_date"), sessions.column("end_local_date"))
    assert pc.sum(crossing).as_py() == 2  # both midnight sessions joined their next day
    # the quiet days have no file at all
    assert r.store.dates("raw_messages") == days
    assert not r.store.has("sessions", A + dt.timedelta(5))


def test_a_later_export_and_a_removed_one_equal_a_full_rebuild(calendar: Runner, tmp_path):
    config = _history(tmp_path, late_export=False)
    r, days = _sparse_runner(config, tmp_path / "out")
    _build(r, days)
    _day(tmp_path, "mei", A + dt.timedelta(3), ["08:00:00", "08:05:00"])  # dropped in later
    r, days = _sparse_runner(config, tmp_path / "out")
    _build(r, days)
    assert r.tables() == calendar.tables()
    # an export removed: its day is stored, so it is planned and rewritten empty
    (tmp_path / "json" / "mei" / f"{A + dt.timedelta(3)}.json").unlink()
    r, days = _sparse_runner(config, tmp_path / "out")
    assert A + dt.timedelta(3) in days
    _build(r, days)
    assert "mei" not in set(r.tables()["raw_messages"].column("conversation_id").to_pylist())
    assert A + dt.timedelta(3) not in stored_dates(r.store)  # the next run will not plan it


def _two_days_apart(root: Path, gap: int) -> tuple[int, int, list[str]]:
    """(stored events, runs, partitions materialized) of ingest + sessions over two days with
    data ``gap`` days apart."""
    _day(root, "kenta", A, ["10:00:00", "10:05:00"])
    _day(root, "kenta", A + dt.timedelta(gap), ["11:00:00"])
    r, days = _sparse_runner(_config(root), root / "out")
    assert days == [A, A + dt.timedelta(gap)]
    with dg.instance_for_test() as instance:
        r.run(INGEST_KEYS, days, instance=instance)
        r.run(["sessions"], days, instance=instance)
        mats = instance.fetch_materializations(dg.AssetKey("raw_messages"), limit=10_000)
        runs = instance.get_run_records()
        logs = [e for rec in runs for e in instance.all_logs(rec.dagster_run.run_id)]
    checks = [
        e.dagster_event.event_specific_data.check_name
        for e in logs
        if e.dagster_event and e.dagster_event.event_type == CHECK_EVALUATION
    ]
    assert checks.count("message_ids_unique") == 2  # one evaluation per day with data
    planned = [e for e in logs if e.dagster_event and e.dagster_event.event_type == PLANNED]
    assert len(planned) == len(INGEST_KEYS) + 1  # one per asset, not per asset and day
    events = len(logs)
    return events, len(runs), sorted(m.partition_key for m in mats.records)


def test_events_do_not_grow_with_the_gap(tmp_path):
    near = _two_days_apart(tmp_path / "near", 1)
    far = _two_days_apart(tmp_path / "far", 400)
    assert far[2] == [A.isoformat(), (A + dt.timedelta(400)).isoformat()]
    assert far[1] == near[1] == 2  # one run per stage, whatever the gap
    assert far[0] == near[0]  # the same events for a gap of 1 day or 400
