"""Every Dagster run that writes takes the output folder's writer lock, as ``memory-pipeline
run`` does: a run launched while another process writes waits or fails in one line, before
any step; the CLI's own in-process runs pass (the lock is re-entrant within a process).

The holder is a real second process (``test_run_lock._hold``); the runs are executed through
their job's own executor (``dg.execute_job`` of a reconstructable job, in-process mode), as the
daemon's run worker executes them, on a tiny asset that records whether it ran under the lock.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import dagster as dg
import pytest

from memory_pipeline.config import load_config
from memory_pipeline.core.common.lock import held_here, output_lock
from memory_pipeline.defs.build import build_definitions
from memory_pipeline.defs.resources import PipelineResource
from memory_pipeline.defs.writer_lock import LOCK_WAIT_TAG, locking_executor
from memory_pipeline_tests.test_run_lock import _hold, _stop

CONFIG = """\
[pipeline]
owner = "Me"
timezone = "UTC"
start_date = "2024-03-01"
output_dir = "out"

[[sources]]
name = "chats"
kind = "auto"
path = "src"
"""
IN_PROCESS = {"execution": {"config": {"in_process": {}}}}
MARK = "ran.txt"


@dg.asset
def marker(pipeline: PipelineResource) -> None:
    """Writes whether its step ran while this process held the output lock."""
    folder = pipeline.cfg.output_dir
    (folder / MARK).write_text(f"{held_here(folder)} {os.getpid()}", encoding="utf-8")


def locked_job() -> dg.JobDefinition:
    """The asset's job with the executor the code location gives every job."""
    pipeline = PipelineResource()  # the config of $MEMORY_PIPELINE_CONFIG
    defs = dg.Definitions(
        assets=[marker],
        jobs=[dg.define_asset_job("locked", selection=[marker])],
        resources={"pipeline": pipeline},
        executor=locking_executor(dg.multi_or_in_process_executor, pipeline),
    )
    return defs.resolve_job_def("locked")


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "chat.txt").write_text("x", encoding="utf-8")
    (tmp_path / "out").mkdir()
    (tmp_path / "m.toml").write_text(CONFIG, encoding="utf-8")
    monkeypatch.setenv("MEMORY_PIPELINE_CONFIG", str(tmp_path / "m.toml"))
    return tmp_path


@pytest.fixture(scope="module")
def instance():
    with dg.instance_for_test() as inst:
        yield inst


def _run(instance: dg.DagsterInstance, wait: float) -> dg.ExecutionResult:
    return dg.execute_job(
        dg.reconstructable(locked_job),
        instance=instance,
        run_config=IN_PROCESS,
        tags={LOCK_WAIT_TAG: str(wait)},
        raise_on_error=False,
    )


def _failure_message(instance: dg.DagsterInstance, run_id: str) -> str:
    """The one line the run logged, which is also its failure's error message."""
    [event] = [
        e
        for e in instance.all_logs(run_id)
        if e.dagster_event and e.dagster_event.event_type == dg.DagsterEventType.RUN_FAILURE
    ]
    error = event.dagster_event.event_specific_data.error
    logs = instance.all_logs(run_id)
    [line] = [e.user_message for e in logs if e.level >= 40 and not e.dagster_event]
    assert line in error.message
    return line


def test_a_launched_run_fails_in_one_line_while_another_process_writes(site, instance):
    holder = _hold(site / "out", 60)
    try:
        result = _run(instance, wait=0)
    finally:
        _stop(holder)
    assert not result.success
    message = _failure_message(instance, result.run_id)
    assert f"pid {holder.pid}" in message and "being written" in message, message
    assert "\n" not in message.strip() and LOCK_WAIT_TAG in message
    assert not (site / "out" / MARK).exists()  # no step ran: nothing written


def test_a_launched_run_waits_for_the_other_writer_then_runs_under_the_lock(site, instance):
    holder = _hold(site / "out", 1.5)
    try:
        start = time.monotonic()
        result = _run(instance, wait=30)
        waited = time.monotonic() - start
    finally:
        _stop(holder)
    assert result.success
    assert holder.poll() is not None  # the run started only after the holder released it
    assert waited >= 0.5
    logs = [e.user_message for e in instance.all_logs(result.run_id)]
    assert any("waiting for the writer in progress" in m and str(holder.pid) in m for m in logs)
    held, pid = (site / "out" / MARK).read_text(encoding="utf-8").split()
    assert held == "True" and int(pid) == os.getpid()


def test_a_run_inside_a_cli_command_holding_the_lock_passes(site, instance):
    """``memory-pipeline run`` holds the lock and executes its runs in its own process."""
    with output_lock(site / "out", wait=0):
        result = _run(instance, wait=0)
        assert result.success
        assert held_here(site / "out")  # the nested take did not release the outer one
    assert not held_here(site / "out")
    assert (site / "out" / MARK).read_text(encoding="utf-8").startswith("True")


def test_every_job_of_the_code_location_takes_the_lock(site):
    defs = build_definitions(load_config(site / "m.toml"))
    jobs = [defs.resolve_implicit_global_asset_job_def()]
    jobs += [defs.resolve_job_def(j.name) for j in defs.jobs or ()]
    assert len(jobs) > 10
    for job in jobs:
        assert "writer lock" in (job.executor_def.description or ""), job.name
