"""The instance's SQLite event log (defs/dagster_sqlite.py) stores what Dagster's stores.

The same partitioned run with checks goes through Dagster's ``storage: sqlite:`` and through
ours; the events, materializations per partition and check executions per partition must be
the same, the planned check rows must hold their own partition only, a failing batch must
leave nothing half-written, and two processes writing one instance must both land.
"""

import os
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import dagster as dg
import pytest

from memory_pipeline.defs import dagster_internals as di
from memory_pipeline.defs.dagster_sqlite import SqliteEventLogStorage
from memory_pipeline.defs.runner import PLANNED_SUBSET_ENV
from memory_pipeline.state import sqlite_base_dir, sqlite_storage, write_instance_yaml

KEYS = [f"2024-01-{d:02d}" for d in range(1, 13)]
PARTS = dg.StaticPartitionsDefinition(KEYS)


@dg.asset(
    partitions_def=PARTS,
    backfill_policy=dg.BackfillPolicy.single_run(),
    check_specs=[
        dg.AssetCheckSpec("rows_ok", asset="days"),
        dg.AssetCheckSpec("late", asset="days"),
    ],
)
def days(context: dg.AssetExecutionContext):
    yield dg.MaterializeResult(metadata={"rows": 3})
    for check in ("rows_ok", "late"):
        for key in context.partition_keys:
            yield dg.AssetCheckEvaluation(
                asset_key=dg.AssetKey("days"),
                check_name=check,
                passed=not (check == "late" and key == KEYS[3]),
                partition=key,
            )
        yield dg.Output(None, output_name=f"days_{check}")


def _instance(home: Path, ours: bool) -> dg.DagsterInstance:
    home.mkdir(parents=True, exist_ok=True)
    storage = (
        sqlite_storage(home / "storage")
        if ours
        else {"sqlite": {"base_dir": str(home / "storage")}}
    )
    import yaml

    (home / "dagster.yaml").write_text(
        yaml.safe_dump({"storage": storage, "telemetry": {"enabled": False}})
    )
    return dg.DagsterInstance.from_config(str(home))


def _run(instance: dg.DagsterInstance) -> str:
    job = dg.define_asset_job("j", selection=[days], executor_def=dg.in_process_executor)
    defs = dg.Definitions(assets=[days], jobs=[job])
    result = defs.resolve_job_def("j").execute_in_process(
        instance=instance,
        tags={
            "dagster/asset_partition_range_start": KEYS[0],
            "dagster/asset_partition_range_end": KEYS[-1],
        },
    )
    assert result.success
    return result.run_id


def _summary(instance: dg.DagsterInstance, run_id: str) -> dict:
    types = Counter(
        e.dagster_event.event_type_value for e in instance.all_logs(run_id) if e.dagster_event
    )
    mats = instance.fetch_materializations(dg.AssetKey("days"), limit=100).records
    checks = {}
    for name in ("rows_ok", "late"):
        key = dg.AssetCheckKey(dg.AssetKey("days"), name)
        for record in instance.event_log_storage.get_asset_check_execution_history(key, limit=100):
            checks[(name, record.partition)] = record.status.value
    return {
        "types": dict(types),
        "materialized": sorted(r.partition_key for r in mats),
        "checks": checks,
    }


@pytest.mark.parametrize("batch", ["0", "100"])
@pytest.mark.parametrize("subset", ["0", "1"])
def test_same_events_as_dagsters_storage(
    tmp_path: Path, monkeypatch, batch: str, subset: str
) -> None:
    monkeypatch.setenv("DAGSTER_EVENT_BATCH_SIZE", batch)
    monkeypatch.setenv(PLANNED_SUBSET_ENV, subset)
    with (
        _instance(tmp_path / "stock", ours=False) as stock,
        _instance(tmp_path / "ours", ours=True) as ours,
    ):
        assert type(ours.event_log_storage) is SqliteEventLogStorage
        assert type(stock.event_log_storage) is not SqliteEventLogStorage
        a, b = _summary(stock, _run(stock)), _summary(ours, _run(ours))
    assert a == b
    assert b["materialized"] == KEYS
    assert b["checks"][("late", KEYS[3])] == "FAILED"
    per_day = [v for (_, day), v in b["checks"].items() if day in KEYS]
    assert Counter(per_day) == {"SUCCEEDED": 23, "FAILED": 1}


def test_planned_check_rows_hold_their_own_partition(tmp_path: Path) -> None:
    """Dagster stores the planned event with the whole subset on each partition's row
    (quadratic in the days); ours stores each row's own partition, and the evaluations that
    follow find their rows as before."""
    with _instance(tmp_path / "i", ours=True) as instance:
        run_id = _run(instance)
        storage = instance.event_log_storage
        key = dg.AssetCheckKey(dg.AssetKey("days"), "later")
        planned = dg.DagsterEvent(
            event_type_value=dg.DagsterEventType.ASSET_CHECK_EVALUATION_PLANNED.value,
            job_name="j",
            event_specific_data=di.AssetCheckEvaluationPlanned(
                asset_key=key.asset_key,
                check_name=key.name,
                partitions_subset=PARTS.subset_with_partition_keys(KEYS),
            ),
        )
        storage.store_event(_entry(run_id, planned))
        table = di.AssetCheckExecutionsTable
        with storage.index_connection() as conn:
            rows = conn.execute(table.select().where(table.c.check_name == key.name)).fetchall()
        assert sorted(r.partition for r in rows) == KEYS
        for row in rows:
            own = dg.deserialize_value(row.evaluation_event).dagster_event.event_specific_data
            assert list(own.partitions_subset.get_partition_keys()) == [row.partition]
            assert len(row.evaluation_event) < 2000
        evaluation = dg.DagsterEvent(
            event_type_value=dg.DagsterEventType.ASSET_CHECK_EVALUATION.value,
            job_name="j",
            event_specific_data=dg.AssetCheckEvaluation(
                asset_key=key.asset_key, check_name=key.name, passed=False, partition=KEYS[5]
            ),
        )
        storage.store_event(_entry(run_id, evaluation))
        history = storage.get_asset_check_execution_history(key, limit=100)
        status = {r.partition: r.status.value for r in history}
        assert len(history) == len(KEYS)  # the evaluation updated its planned row
        assert status[KEYS[5]] == "FAILED"
        assert {v for k, v in status.items() if k != KEYS[5]} == {"PLANNED"}


def _entry(run_id: str, event: dg.DagsterEvent) -> dg.EventLogEntry:
    import time

    return dg.EventLogEntry(
        error_info=None,
        level="DEBUG",
        user_message="",
        run_id=run_id,
        timestamp=time.time(),
        step_key=None,
        job_name="j",
        dagster_event=event,
    )


def test_a_failing_batch_leaves_nothing_and_dagster_falls_back(tmp_path: Path, monkeypatch) -> None:
    with _instance(tmp_path / "i", ours=True) as instance:
        run_id = _run(instance)
        storage = instance.event_log_storage
        events = [e for e in instance.all_logs(run_id) if e.dagster_event_type
                  == dg.DagsterEventType.ASSET_MATERIALIZATION][:3]  # fmt: skip
        before = len(instance.all_logs(run_id))
        original = storage.store_event
        calls = []

        def flaky(event):
            calls.append(event)
            if len(calls) == 3:
                raise RuntimeError("disk full")
            original(event)

        monkeypatch.setattr(storage, "store_event", flaky)
        with pytest.raises(RuntimeError, match="disk full"):
            storage.store_event_batch(events)
        monkeypatch.setattr(storage, "store_event", original)
        assert len(instance.all_logs(run_id)) == before  # the first two were rolled back
        storage.store_event_batch(events)
        assert len(instance.all_logs(run_id)) == before + 3


def test_deleted_and_wiped_runs_reopen(tmp_path: Path) -> None:
    with _instance(tmp_path / "i", ours=True) as instance:
        run_id = _run(instance)
        instance.delete_run(run_id)
        assert instance.all_logs(run_id) == []
        run_id = _run(instance)
        assert instance.all_logs(run_id)
        instance.wipe()
        assert instance.all_logs(run_id) == []
        assert _run(instance)


WRITER = textwrap.dedent(
    """
    import sys
    import dagster as dg
    sys.path.insert(0, {root!r})
    from memory_pipeline_tests.defs.test_dagster_sqlite import _run
    with dg.DagsterInstance.from_config({home!r}) as instance:
        for _ in range(3):
            _run(instance)
    """
)


def test_two_processes_write_one_instance(tmp_path: Path) -> None:
    home = tmp_path / "i"
    root = str(Path(__file__).resolve().parents[2])
    with _instance(home, ours=True) as instance:
        env = {**os.environ, "DAGSTER_EVENT_BATCH_SIZE": "5"}
        child = subprocess.Popen(
            [sys.executable, "-c", WRITER.format(root=root, home=str(home))], env=env
        )
        for _ in range(3):
            _run(instance)
        assert child.wait(timeout=300) == 0
        runs = instance.get_runs()
        assert len(runs) == 6 and all(r.is_success for r in runs)
        mats = instance.fetch_materializations(dg.AssetKey("days"), limit=1000).records
        assert len(mats) == 6 * len(KEYS)


def test_generated_instance_uses_it_and_reads_dagsters_layout(tmp_path: Path) -> None:
    """A state folder made before (``storage: sqlite:``) keeps its files and history."""
    home = tmp_path / "home"
    with _instance(home, ours=False) as stock:
        run_id = _run(stock)
    template = tmp_path / "cfg"
    template.mkdir()
    (template / "dagster.yaml").write_text(
        f"storage:\n  sqlite:\n    base_dir: {home / 'storage'}\ntelemetry:\n  enabled: false\n"
    )
    path = write_instance_yaml(home, template)
    import yaml

    body = yaml.safe_load(path.read_text())
    assert sqlite_base_dir(body["storage"]) == str(home / "storage")
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert type(instance.event_log_storage) is SqliteEventLogStorage
        assert len(instance.all_logs(run_id)) > 0  # the old history, read as it is
        assert _run(instance)
    assert sqlite_base_dir({"postgres": {}}) is None
