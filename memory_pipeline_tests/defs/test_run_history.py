"""What the Dagster UI shows of a `memory-pipeline run`: named stage jobs in one backfill,
per-partition row counts and check statuses, dead runs marked failed, metadata on every asset.

Why: the run history is how a data engineer audits the pipeline. Ephemeral jobs cannot be
re-executed, range totals repeated on every partition mislead, a check recorded once per
range leaves every partition "skipped", and a killed run that stays STARTED hides a failure.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.execution.backfill import BulkActionStatus
from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus
from dagster._core.storage.dagster_run import DagsterRun

from memory_pipeline.config import ENV_PREFIX, load_config
from memory_pipeline.core.common import tables as T
from memory_pipeline.core.evaluation.evalsets import load_jsonl_questions
from memory_pipeline.defs.build import build_definitions
from memory_pipeline.defs.gx_checks import build_gx_checks
from memory_pipeline.defs.helpers import OWNERS, ROW_COUNT, code_version
from memory_pipeline.defs.partitions import daily_partitions
from memory_pipeline.defs.runner import (
    BACKFILL_TAG,
    CODE_LOCATION,
    HOST_TAG,
    INVOCATION_TAG,
    PID_TAG,
    STAGE_TAG,
    fail_orphaned_runs,
    materialize_stages,
    stage_resources,
    stages,
)
from memory_pipeline_tests.paths import ROOT, SAMPLE
from memory_pipeline_tests.pipeline_helpers import Runner, write_config

DAYS = [dt.date(2024, 3, 1) + dt.timedelta(days=i) for i in range(14)]


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """ingest and sessions of the sample as `memory-pipeline run` makes them."""
    root = tmp_path_factory.mktemp("history")
    shutil.copytree(SAMPLE, root / "data" / "sample")
    config = write_config(root, (ROOT / "memory_pipeline.toml").read_text(encoding="utf-8"))
    runner = Runner(config, root / "out")
    (root / "dagster").mkdir()
    instance = dg.DagsterInstance.local_temp(str(root / "dagster"))
    runs = materialize_stages(
        [*runner.assets, *build_gx_checks(daily_partitions(runner.cfg))],
        stages("ingest", "sessions"),
        days=[DAYS[0], DAYS[-1]],
        resources=stage_resources(runner.resource, runner.providers),
        instance=instance,
        log_level="ERROR",
        backfill=True,
        code_location=ROOT,
    )
    assert all(r.success for r in runs)
    yield runner, instance, runs
    instance.dispose()


def test_stages_run_as_named_jobs_of_one_backfill(history):
    runner, instance, runs = history
    dagster_runs = [r.result.dagster_run for r in runs]
    assert [r.job_name for r in dagster_runs] == ["stage_ingest", "stage_sessions"]
    assert [r.tags[STAGE_TAG] for r in dagster_runs] == ["ingest", "sessions"]
    assert len({r.tags[INVOCATION_TAG] for r in dagster_runs}) == 1
    [backfill_id] = {r.tags[BACKFILL_TAG] for r in dagster_runs}
    backfill = instance.get_backfill(backfill_id)
    assert backfill.status == BulkActionStatus.COMPLETED_SUCCESS
    assert backfill.tags[INVOCATION_TAG] == dagster_runs[0].tags[INVOCATION_TAG]
    data = backfill.asset_backfill_data
    sessions = data.materialized_subset.get_partitions_subset(dg.AssetKey("sessions"))
    assert sorted(sessions.get_partition_keys()) == [d.isoformat() for d in DAYS]
    assert data.failed_and_downstream_subset.is_empty
    # the runs name the code location's job, so the UI can re-execute them
    cfg = load_config(ROOT / "memory_pipeline.toml", env={})
    code_jobs = {j.name for j in build_definitions(cfg).jobs}
    for run in dagster_runs:
        origin = run.remote_job_origin
        assert origin.location_name == CODE_LOCATION and origin.job_name in code_jobs


def test_each_partition_shows_its_own_row_count(history):
    runner, instance, _ = history
    for table in (T.RAW_MESSAGES, T.SESSIONS):
        events = instance.fetch_materializations(dg.AssetKey(table.asset), limit=100).records
        counts = {
            e.asset_materialization.partition: e.asset_materialization.metadata[ROW_COUNT].value
            for e in events
        }
        stored = {d.isoformat(): runner.store.read(table, [d]).num_rows for d in DAYS}
        assert counts == stored
        assert len(set(counts.values())) > 1  # a range total would be one value


def _partition_metadata(instance: dg.DagsterInstance, table: T.Table) -> dict[str, dict]:
    """partition -> the metadata of its materialization event in the instance."""
    records = instance.fetch_materializations(dg.AssetKey(table.asset), limit=100).records
    return {
        r.asset_materialization.partition: {
            k: v.value for k, v in r.asset_materialization.metadata.items()
        }
        for r in records
    }


def test_each_partition_event_carries_its_own_figures(history):
    """A 14-day single-run backfill: each day's event has that day's figures; what only the
    range knows is named range_* (a range total repeated on every day misleads)."""
    runner, instance, _ = history
    raw = _partition_metadata(instance, T.RAW_MESSAGES)
    audit = _partition_metadata(instance, T.INGEST_AUDIT)
    sessions = _partition_metadata(instance, T.SESSIONS)
    keys = [d.isoformat() for d in DAYS]
    assert sorted(raw) == sorted(audit) == sorted(sessions) == keys
    for day in DAYS:
        key = day.isoformat()
        messages = runner.store.read(T.RAW_MESSAGES, [day])
        assert raw[key]["conversations"] == len(set(messages.column("conversation_id").to_pylist()))
        read = sum(runner.store.read(T.INGEST_AUDIT, [day]).column("records_read").to_pylist())
        assert audit[key]["records_read"] == read
        assert audit[key]["ingested"] == messages.num_rows == raw[key][ROW_COUNT]
        stored = runner.store.read(T.SESSIONS, [day])
        starts, ends = (stored.column(c).to_pylist() for c in ("local_date", "end_local_date"))
        crossing = sum(a != b for a, b in zip(starts, ends, strict=True))
        assert sessions[key]["crossing_midnight"] == crossing
    # partitions differ, and each shows its own (a range total would be one value)
    assert len({m["conversations"] for m in raw.values()}) > 1
    assert len({m["crossing_midnight"] for m in sessions.values()}) > 1
    # the range's own figures: named as such, next to the range they cover
    total = runner.store.read(T.RAW_MESSAGES, DAYS)
    for m in raw.values():
        assert m["range"] == f"{DAYS[0]}..{DAYS[-1]}"
        assert m["range_rows"] == total.num_rows and m["range_partitions"] == len(DAYS)
        assert m["range_conversations"] == len(set(total.column("conversation_id").to_pylist()))
        assert not {"rows", "partitions"} & set(m)
    crossing_total = sum(m["crossing_midnight"] for m in sessions.values())
    assert {m["range_crossing_midnight"] for m in sessions.values()} == {crossing_total}
    assert {m["gap_minutes"] for m in sessions.values()} == {runner.cfg.session_gap_minutes}


def test_check_figures_of_a_range_are_named_range(history):
    """A check computed once over the range reports its figures as the range's on every
    partition's evaluation (the UI showed the range's chunk count on each day)."""
    _, instance, _ = history
    key = dg.AssetCheckKey(dg.AssetKey("sessions"), "sessions_ordered_and_gap_respecting")
    records = instance.event_log_storage.get_asset_check_execution_history(key, limit=100)
    assert len(records) == len(DAYS)
    for record in records:
        evaluation = record.event.dagster_event.event_specific_data
        meta = evaluation.metadata
        assert meta["range"].value == f"{DAYS[0]}..{DAYS[-1]}"
        figures = [k for k, v in meta.items() if isinstance(v.value, int | float | dict | list)]
        assert figures and all(k.startswith("range_") for k in figures), figures


def test_checks_are_recorded_per_partition_and_pass(history):
    _, instance, _ = history
    keys = [d.isoformat() for d in DAYS]
    checks = [
        dg.AssetCheckKey(dg.AssetKey("sessions"), "session_ids_unique"),
        dg.AssetCheckKey(dg.AssetKey("sessions"), "gx_sessions_suite"),
        dg.AssetCheckKey(dg.AssetKey("ingest_audit"), "conservation"),
    ]
    for key in checks:
        records = instance.event_log_storage.get_asset_check_execution_history(key, limit=100)
        assert sorted(r.partition for r in records) == keys, key
        assert {r.status for r in records} == {AssetCheckExecutionRecordStatus.SUCCEEDED}
        # each evaluation targets that partition's latest materialization, so the UI counts
        # it as current (a stale target shows the check as not evaluated)
        infos = instance.event_log_storage.get_asset_check_partition_info([key])
        assert sorted(i.partition_key for i in infos) == keys
        for i in infos:
            assert i.latest_target_materialization_storage_id == (
                i.latest_materialization_storage_id
            ), (key, i.partition_key)


def test_a_run_of_a_dead_process_is_marked_failed(tmp_path: Path):
    instance = dg.DagsterInstance.local_temp(str(tmp_path))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = {HOST_TAG: os.uname().nodename}
    orphan = DagsterRun(
        job_name="stage_ingest",
        status=dg.DagsterRunStatus.STARTED,
        tags={**host, PID_TAG: str(dead.pid)},
    )
    alive = DagsterRun(
        job_name="stage_ingest",
        status=dg.DagsterRunStatus.STARTED,
        tags={**host, PID_TAG: str(os.getpid())},
    )
    # a UI re-execution of a runner's run inherits its pid tag, but a daemon launched it
    parent = DagsterRun(job_name="stage_ingest", status=dg.DagsterRunStatus.SUCCESS)
    reexecution = DagsterRun(
        job_name="stage_ingest",
        status=dg.DagsterRunStatus.STARTED,
        tags={**host, PID_TAG: str(dead.pid)},
        parent_run_id=parent.run_id,
        root_run_id=parent.run_id,
    )
    for run in (orphan, alive, parent, reexecution):
        instance.add_run(run)
    assert fail_orphaned_runs(instance) == [orphan.run_id]
    assert instance.get_run_by_id(reexecution.run_id).status == dg.DagsterRunStatus.STARTED
    assert instance.get_run_by_id(orphan.run_id).status == dg.DagsterRunStatus.FAILURE
    assert instance.get_run_by_id(alive.run_id).status == dg.DagsterRunStatus.STARTED
    instance.dispose()


@pytest.fixture(scope="module")
def shipped():
    with pytest.MonkeyPatch.context() as mp:
        for name in list(os.environ):
            if name.startswith(ENV_PREFIX):
                mp.delenv(name)
        return build_definitions(load_config(ROOT / "memory_pipeline.toml"))


def test_the_shipped_sample_is_bounded_to_its_fourteen_days(shipped):
    graph = shipped.get_repository_def().asset_graph
    keys = graph.get(dg.AssetKey("sessions")).partitions_def.get_partition_keys()
    assert keys == [d.isoformat() for d in DAYS]


def test_every_asset_has_kinds_owners_stage_and_code_version(shipped):
    graph = shipped.get_repository_def().asset_graph
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        assert node.kinds, key
        assert list(node.owners) == OWNERS, key
        assert node.tags.get("stage"), key
        assert re.fullmatch(r"[0-9a-f]{12}", node.code_version or ""), key
    for check in graph.asset_check_keys:
        assert graph.get(check).description, check


def test_code_version_follows_the_source(tmp_path: Path, monkeypatch):
    from memory_pipeline.defs import helpers

    assert code_version("memory_pipeline.defs.sessions") == code_version(
        "memory_pipeline.defs.sessions"
    )
    package = tmp_path / "memory_pipeline"
    (package / "core" / "x").mkdir(parents=True)
    (package / "core" / "x" / "a.py").write_text("A = 1\n", encoding="utf-8")
    monkeypatch.setattr(helpers, "_PACKAGE_ROOT", package)
    before = code_version("memory_pipeline.core.x")
    (package / "core" / "x" / "a.py").write_text("A = 2\n", encoding="utf-8")
    assert code_version("memory_pipeline.core.x") != before


def test_the_sample_questions_are_labelled_on_the_sample_in_both_languages():
    cfg = load_config(ROOT / "memory_pipeline.toml", env={})
    questions, report = load_jsonl_questions(cfg.eval_questions)
    assert not report.errors and not report.empty_gold and len(questions) >= 10
    japanese = [q for q in questions if re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", q.question)]
    assert 0 < len(japanese) < len(questions)
    from memory_pipeline.core.ingest.stage import read_all

    refs = {m.source_ref for _, m in read_all(cfg.sources, DAYS, cfg.start_date).messages}
    for q in questions:
        assert q.gold and set(q.gold) <= refs, q.question_id

