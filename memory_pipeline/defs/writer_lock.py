"""One writer per output folder for every Dagster run, however it was launched.

``memory-pipeline run`` and ``forget --yes`` hold the output folder's lock
(``core/common/lock.py``) while they write. Runs launched from the UI, the nightly schedule,
the source sensor or the automation sensor write the same folder, so they take the same lock:
their jobs' executors are wrapped (:func:`locking_executor`) so that the run's orchestrating
process holds the lock from before its first step until after its last. Steps in their own
processes (the multiprocess executor) are covered by their run's lock; nothing in a step has
to know about it.

The lock is re-entrant within one process: the runs ``memory-pipeline run`` executes in its
own process pass through, since the command already holds it. A run that finds another
process holding it logs one line naming the holder and waits up to
:data:`RUN_LOCK_WAIT_SECONDS` (a run's tag :data:`LOCK_WAIT_TAG` sets another bound, ``0``
refuses at once); when the wait runs out the run fails with one line, before any step ran.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import dagster as dg

from memory_pipeline.config import load_config, with_output
from memory_pipeline.core.common.lock import LockBusy, output_lock

# how long a launched run waits for another writer (the CLI's --wait default)
RUN_LOCK_WAIT_SECONDS = 3600
LOCK_WAIT_TAG = "memory_pipeline/lock_wait_seconds"
_RESOURCE_FIELDS = ("config_file", "output_dir", "work_dir")


def lock_folder(pipeline: Any, run_config: Mapping[str, Any] | None = None) -> Path:
    """The local output folder a run of ``pipeline`` (a ``PipelineResource``) writes, with the
    run config's overrides of the resource applied (a launchpad may set them)."""
    values = {k: getattr(pipeline, k, None) for k in _RESOURCE_FIELDS}
    resources = (run_config or {}).get("resources") or {}
    override = (resources.get("pipeline") or {}).get("config") or {}
    values.update({k: v for k, v in override.items() if k in _RESOURCE_FIELDS})
    cfg = load_config(values["config_file"])
    if values["output_dir"]:
        cfg = with_output(cfg, values["output_dir"], values["work_dir"])
    return cfg.output_dir


def lock_wait(tags: Mapping[str, str]) -> float:
    """The run's wait bound: its :data:`LOCK_WAIT_TAG`, else :data:`RUN_LOCK_WAIT_SECONDS`."""
    text = tags.get(LOCK_WAIT_TAG)
    try:
        return max(0.0, float(text)) if text is not None else RUN_LOCK_WAIT_SECONDS
    except ValueError:
        return RUN_LOCK_WAIT_SECONDS


class LockingExecutor(dg.Executor):
    """An executor that runs ``inner``'s orchestration while holding the output lock."""

    def __init__(self, inner: dg.Executor, pipeline: Any) -> None:
        self.inner = inner
        self.pipeline = pipeline

    @property
    def retries(self):  # noqa: ANN201 - Dagster's RetryMode
        return self.inner.retries

    @property
    def step_dependency_config(self):  # noqa: ANN201 - Dagster's StepDependencyConfig
        return self.inner.step_dependency_config

    def execute(self, plan_context, execution_plan) -> Iterator[dg.DagsterEvent]:  # noqa: ANN001
        folder = lock_folder(self.pipeline, plan_context.run_config)
        wait = lock_wait(plan_context.dagster_run.tags)

        def waiting(pid: int | None) -> None:
            who = f"pid {pid}" if pid else "another process"
            plan_context.log.info(
                f"waiting for the writer in progress ({who}) on {folder} (up to {wait:.0f} s)"
            )

        with ExitStack() as held:
            try:
                held.enter_context(
                    output_lock(folder, wait=wait, on_wait=waiting, how=f"the tag {LOCK_WAIT_TAG}")
                )
            except LockBusy as exc:
                # one line, before any step: the run fails with nothing written
                plan_context.log.error(str(exc))
                raise dg.Failure(description=str(exc)) from None
            yield from self.inner.execute(plan_context, execution_plan)


def locking_executor(inner: dg.ExecutorDefinition, pipeline: Any) -> dg.ExecutorDefinition:
    """``inner`` (same name, config and requirements) whose runs hold the output lock of
    ``pipeline``'s output folder."""
    create = inner.executor_creation_fn
    assert create is not None

    def creation(init_context: Any) -> dg.Executor:
        return LockingExecutor(create(init_context), pipeline)

    return dg.ExecutorDefinition(
        name=inner.name,
        config_schema=inner.config_schema,
        requirements=inner.get_requirements,
        executor_creation_fn=creation,
        description=(inner.description or "")
        + " Holds the output folder's writer lock for the whole run.",
    )
