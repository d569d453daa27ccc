"""A sparse range: the empty days of a ranged run store no check evaluations.

Every event a run stores is a write of the Dagster instance (on SQLite two commits); a
check computed once over the range used to be stored once per partition, so a range of
mostly empty days spent most of its time storing evaluations of checks over no rows. A
passed check is now stored only for the partitions the asset wrote rows to; a failed one
for every partition it fails. (Seconds are measured by benchmarks/bench_sparse.py, not here.)
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from types import SimpleNamespace

import dagster as dg

from memory_pipeline.defs import helpers
from memory_pipeline.defs.gx_checks import build_gx_checks
from memory_pipeline.defs.partitions import daily_partitions
from memory_pipeline_tests.pipeline_helpers import INGEST_KEYS, Runner, write_config

DAYS = [dt.date(2024, 3, 1) + dt.timedelta(days=i) for i in range(6)]
BUSY = DAYS[2]


def _corpus(root: Path) -> Path:
    folder = root / "json" / "kenta"
    folder.mkdir(parents=True)
    msgs = [
        {"time": f"1{i}:00:00", "sender": "kenta", "type": "text", "text": f"m{i}"}
        for i in range(3)
    ]
    body = {"date": BUSY.isoformat(), "contact": "kenta", "messages": msgs}
    (folder / f"{BUSY}.json").write_text(json.dumps(body), encoding="utf-8")
    return write_config(
        root,
        f"""
[pipeline]
owner = "Yuki"
timezone = "Asia/Tokyo"
start_date = "{DAYS[0]}"
end_date = "{DAYS[-1]}"
output_dir = "out"

[[sources]]
name = "chat"
kind = "line_json"
path = "json"
""",
    )


def test_empty_partitions_store_no_check_evaluations(tmp_path):
    runner = Runner(_corpus(tmp_path), tmp_path / "out")
    # with the code location's great-expectations suites, as `memory-pipeline run` has them
    runner.assets = [*runner.assets, *build_gx_checks(daily_partitions(runner.cfg))]
    with dg.instance_for_test() as instance:
        result = runner.run(INGEST_KEYS, DAYS, instance=instance)
        sessions = runner.run(["sessions"], DAYS, instance=instance)
    # every day was written (empty days as empty partitions) and materialized ...
    assert runner.store.dates("raw_messages") == DAYS
    mats = result.asset_materializations_for_node("ingest")
    assert {m.partition for m in mats} == {d.isoformat() for d in DAYS}
    # ... but the checks were stored only for the day with rows, each check once
    for run in (result, sessions):
        evaluations = run.get_asset_check_evaluations()
        assert evaluations and all(e.passed for e in evaluations)
        assert any(e.check_name.startswith("gx_") for e in evaluations)
        assert {e.partition for e in evaluations} == {BUSY.isoformat()}
        keys = [(e.asset_key, e.check_name) for e in evaluations]
        assert len(keys) == len(set(keys))


def test_a_failed_check_is_stored_for_empty_partitions_too(monkeypatch):
    monkeypatch.setattr(helpers, "_targets", lambda *_: {})
    context = SimpleNamespace(
        partition_keys=["2024-03-01", "2024-03-02"], instance=None, run=SimpleNamespace(run_id="r")
    )
    key = dg.AssetKey("raw_messages")
    empty = {key: {"2024-03-02"}}
    names = {dg.AssetCheckKey(key, "c"): "out"}

    def stored(passed: bool) -> list[str]:
        result = dg.AssetCheckResult(asset_key=key, check_name="c", passed=passed)
        events = helpers.check_evaluations(context, [result], names, {}, empty)
        return [e.partition for e in events if not isinstance(e, dg.Output)]

    assert stored(True) == ["2024-03-01"]
    assert stored(False) == ["2024-03-01", "2024-03-02"]
