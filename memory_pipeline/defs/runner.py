"""The one way to run pipeline stages outside a Dagster daemon.

``memory-pipeline run``, ``memory-pipeline eval`` (its benchmark corpus), the test helpers and
the benchmarks all materialize the real assets stage by stage, each stage as one in-process run
over a date range. They used to each carry their own stage list, ``dg.materialize`` loop, quiet
logger config and range tags; this module holds the stage table and the one function that does
it (``materialize_stages``), so a new asset or a change of how a range is requested is made
once. It is the only caller of ``dg.materialize`` outside the tests.

A stage is a set of assets that run together in one run. Partitioned stages take the date
range: one day is requested as that partition, several days as a single-run backfill (the
``dagster/asset_partition_range_*`` tags, see ``defs/jobs.py``), never one run per day.
Assets partitioned by the calendar cover every day from the first to the last; assets built
over the days with data (``build_definitions(cfg, days=...)``, a static partitions definition,
``defs/partitions.py``) cover exactly those days, so an empty day stores no event at all.
Unpartitioned stages (the retention purge, indexes, storage report, evaluation, warehouse)
always cover everything stored, so they get no range. The retention stage needs the
``retention`` asset, which only the code location's definitions (``build_definitions``)
hold; the test helpers' ``build_assets`` leave it out and never run that stage.

Run history a data engineer can read: every stage runs as its named job ``stage_<name>``
(also in the code location, so the UI can re-execute it), tagged with the stage and one
invocation id shared by the runs of one call. ``backfill=True`` (``memory-pipeline run``)
also records the call as one asset backfill, listed under Backfills with its runs. Runs
carry the pid of the process executing them in-process, so a later call marks the runs of
a killed process failed instead of leaving them STARTED (``fail_orphaned_runs``).

Event batching: unless the environment sets ``DAGSTER_EVENT_BATCH_SIZE``, the runs made here
use ``EVENT_BATCH_SIZE`` (``event_batching``). A stage's step stores one materialization per
partition and table; on the PostgreSQL instance batching writes them in one statement per
output instead of one round trip (and commit) each (bench_ingest ``--instance postgres``), and
the local SQLite instance (``defs/dagster_sqlite.py``) in one transaction per file.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import socket
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg

from memory_pipeline.defs.catalog import WAREHOUSE
from memory_pipeline.defs.chunks import CHUNKS
from memory_pipeline.defs.evaluation import EVALUATION
from memory_pipeline.defs.indexes import BM25, MEMORY_INDEX, TIME_META, VECTORS
from memory_pipeline.defs.ingest import AUDIT, QUARANTINE, RAW
from memory_pipeline.defs.jobs import (
    FINAL_STAGE_TAG,
    INVOCATION_TAG,
    RANGE_END,
    RANGE_START,
    STAGE_TAG,
)
from memory_pipeline.defs.memories import DOSSIERS, MEMORIES
from memory_pipeline.defs.providers import provider_resources
from memory_pipeline.defs.representations import (
    EMBEDDING_TEXTS,
    EMBEDDINGS,
    ENRICHMENT,
    SUMMARIES,
)
from memory_pipeline.defs.resources import PipelineResource
from memory_pipeline.defs.retention import RETENTION
from memory_pipeline.defs.sessions import SESSIONS
from memory_pipeline.defs.storage import STORAGE_REPORT

PID_TAG = "memory_pipeline/pid"
HOST_TAG = "memory_pipeline/host"
BACKFILL_TAG = "dagster/backfill"
# the code location `dg dev` (pyproject [tool.dg.project]) and `dagster dev` (workspace.yaml)
# load: its module and its name
CODE_MODULE = "memory_pipeline.definitions"
CODE_LOCATION = "memory_pipeline"
# Dagster reads it at every event (dagster/_core/instance/methods/event_methods.py); 0 = off.
# A step's output yields one materialization per partition: 100 covers a 100-day range in
# one batch, longer ranges take several
EVENT_BATCH_ENV = "DAGSTER_EVENT_BATCH_SIZE"
EVENT_BATCH_SIZE = 100
# Dagster reads it when a run starts (event_log/base.py): one "materialization planned" event
# per asset carrying the run's partition subset, instead of one per asset and partition
PLANNED_SUBSET_ENV = "DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS"


@dataclass(frozen=True)
class Stage:
    """Assets materialized together in one run; ``partitioned`` ones take the date range."""

    name: str
    keys: tuple[dg.AssetKey, ...]
    partitioned: bool = True

    @property
    def key_names(self) -> list[str]:
        """The asset keys as strings, for messages and progress output."""
        return [k.to_user_string() for k in self.keys]

    @property
    def job_name(self) -> str:
        """The named job that runs this stage (``stage_<name>``, a valid Dagster name)."""
        return "stage_" + re.sub(r"[^A-Za-z0-9_]+", "_", self.name).strip("_")


# In dependency order: each stage reads only what the stages before it wrote. The retention
# purge comes first, as in the nightly job (ingest depends on it in the code location), so
# `memory-pipeline run` purges through the asset and the UI shows when it last ran.
STAGES: tuple[Stage, ...] = (
    Stage("retention", (RETENTION,), partitioned=False),
    Stage("ingest", (RAW, QUARANTINE, AUDIT)),
    Stage("sessions", (SESSIONS,)),
    Stage("chunks", (CHUNKS,)),
    Stage("representations", (SUMMARIES, EMBEDDING_TEXTS, ENRICHMENT, EMBEDDINGS)),
    Stage("memories", (MEMORIES, DOSSIERS)),
    Stage("indexes", (BM25, VECTORS, TIME_META, MEMORY_INDEX), partitioned=False),
    Stage("storage", (STORAGE_REPORT,), partitioned=False),
    Stage("evaluation", (EVALUATION,), partitioned=False),
    Stage("warehouse", (WAREHOUSE,), partitioned=False),
)
STAGE_NAMES: tuple[str, ...] = tuple(s.name for s in STAGES)
_BY_NAME = {s.name: s for s in STAGES}
_STAGE_OF = {k: s for s in STAGES for k in s.keys}


def stage_jobs(
    selection: Sequence[Stage] = STAGES, executor_def: dg.ExecutorDefinition | None = None
) -> list[dg.UnresolvedAssetJobDefinition]:
    """One named job per stage: its assets and their checks, tagged with the stage.

    The code location lists the table's jobs, so a run made by ``materialize_stages`` names
    a job the UI knows and can re-execute (an ad-hoc ``__ephemeral_asset_job__`` cannot be).
    ``executor_def`` replaces the in-process executor (the code location's takes the
    writer lock, ``defs/writer_lock.py``).
    """
    return [
        dg.define_asset_job(
            stage.job_name,
            selection=dg.AssetSelection.assets(*stage.keys),
            description=f"memory-pipeline stage {stage.name!r}: "
            + ", ".join(stage.key_names)
            + (" over a date range (one single-run backfill)" if stage.partitioned else ""),
            tags={STAGE_TAG: stage.name},
            # one stage's assets run one after another; a process per step only costs
            # seconds (and the runner executes in-process)
            executor_def=executor_def or dg.in_process_executor,
        )
        for stage in selection
    ]


def stages(*names: str) -> list[Stage]:
    """Stages of the table by name, in the order given (all of them when no name is given)."""
    unknown = [n for n in names if n not in _BY_NAME]
    if unknown:
        raise ValueError(f"unknown stages {unknown}; known: {', '.join(STAGE_NAMES)}")
    return [_BY_NAME[n] for n in names] if names else list(STAGES)


def stage_for(keys: Iterable[str | dg.AssetKey], name: str | None = None) -> Stage:
    """An ad-hoc stage of some assets (tests and benchmarks run single assets).

    Whether it takes the date range follows the table, so a caller cannot get it wrong.
    """
    asset_keys = tuple(dg.AssetKey.from_coercible(k) for k in keys)
    if not asset_keys:
        raise ValueError("a stage needs at least one asset key")
    for stage in STAGES:
        if stage.keys == asset_keys:
            return stage if name is None else Stage(name, asset_keys, stage.partitioned)
    unknown = [k.to_user_string() for k in asset_keys if k not in _STAGE_OF]
    if unknown:
        raise ValueError(f"assets {unknown} are in no stage of the table")
    partitioned = {_STAGE_OF[k].partitioned for k in asset_keys}
    if len(partitioned) != 1:
        raise ValueError(f"{asset_keys} mixes partitioned and unpartitioned assets")
    label = name or ", ".join(k.to_user_string() for k in asset_keys)
    return Stage(label, asset_keys, partitioned.pop())


def quiet_run_config(log_level: str = "WARNING") -> dict[str, Any]:
    """Run config that keeps Dagster's console logger to ``log_level`` and above.

    The console logger prints every event at DEBUG; the full event log stays in the
    instance (``dagster dev`` shows it), so progress output and tests need no more.
    """
    return {"loggers": {"console": {"config": {"log_level": log_level}}}}


def stage_resources(
    pipeline: PipelineResource, providers: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The resources every stage needs: the pipeline config plus the provider resources
    (from the environment unless given: tests and benchmarks pin the offline defaults)."""
    return {"pipeline": pipeline, **(provider_resources() if providers is None else providers)}


def range_request(days: Sequence[dt.date]) -> dict[str, Any]:
    """``dg.materialize`` keywords that request ``days`` (sorted, non-empty).

    One day is that partition; a longer range is one single-run backfill over
    ``days[0]..days[-1]`` (the assets use ``BackfillPolicy.single_run()``): every calendar day
    between them for calendar partitions, the listed days for partitions of the days with data.
    """
    if len(days) == 1:
        return {"partition_key": days[0].isoformat()}
    return {"tags": {RANGE_START: days[0].isoformat(), RANGE_END: days[-1].isoformat()}}


@dataclass
class StageResult:
    """One stage's run: the Dagster result and its wall seconds."""

    stage: Stage
    result: dg.ExecuteInProcessResult
    seconds: float

    @property
    def success(self) -> bool:
        return self.result.success

    @property
    def checks(self) -> list[dg.AssetCheckEvaluation]:
        return list(self.result.get_asset_check_evaluations())

    @property
    def warned(self) -> list[dg.AssetCheckEvaluation]:
        """Failed checks of WARN severity: reported, the data stays usable."""
        return [e for e in self.checks if not e.passed and e.severity == dg.AssetCheckSeverity.WARN]

    @property
    def failed(self) -> list[dg.AssetCheckEvaluation]:
        """Failed checks of ERROR severity: the stage's data must not be trusted."""
        return [e for e in self.checks if not e.passed and e.severity != dg.AssetCheckSeverity.WARN]


@contextmanager
def event_batching(size: int = EVENT_BATCH_SIZE) -> Iterator[str]:
    """``DAGSTER_EVENT_BATCH_SIZE=size`` while the block runs, unless the environment already
    sets it (an operator's value, ``0`` included, wins); restored after. Yields the value in
    force. Why: on PostgreSQL the per-partition materializations are most of a run's event
    writes, and the batch stores them in one INSERT; the events stored are the same."""
    previous = os.environ.get(EVENT_BATCH_ENV)
    if previous is None:
        os.environ[EVENT_BATCH_ENV] = str(size)
    try:
        yield os.environ[EVENT_BATCH_ENV]
    finally:
        if previous is None:
            os.environ.pop(EVENT_BATCH_ENV, None)


@contextmanager
def planned_subsets(on: bool = True) -> Iterator[None]:
    """``DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS=1`` while the block runs (``on``, and
    unless the environment already sets it); restored after.

    Why: runs over the days with data of a long history plan thousands of partitions, and
    Dagster otherwise stores one planned event per asset and partition before the first step
    runs: on SQLite each is two connections and commits (a quarter of the run's events). With
    the subset, one planned event per asset says the same. Dagster's documented trade-off: a
    partition of a run that fails is not marked failed in the partition bar (the run is)."""
    previous = os.environ.get(PLANNED_SUBSET_ENV)
    if on and previous is None:
        os.environ[PLANNED_SUBSET_ENV] = "1"
    try:
        yield
    finally:
        if on and previous is None:
            os.environ.pop(PLANNED_SUBSET_ENV, None)


def materialize_stages(
    assets: dg.Definitions | Sequence[Any],
    selection: Sequence[Stage | str],
    *,
    days: Sequence[dt.date] = (),
    resources: Mapping[str, Any] | None = None,
    instance: dg.DagsterInstance | None = None,
    log_level: str = "WARNING",
    raise_on_error: bool = True,
    on_start: Callable[[Stage], None] | None = None,
    on_done: Callable[[StageResult], bool | None] | None = None,
    backfill: bool = False,
    code_location: Path | None = None,
    invocation: str | None = None,
    tags: Mapping[str, str] | None = None,
    backfill_defs: dg.Definitions | None = None,
) -> list[StageResult]:
    """Materialize ``selection`` in order, each stage as one run of its named job, over ``days``.

    ``assets`` is a ``Definitions`` (its assets, checks and resources) or a list of assets and
    checks; ``resources`` replaces the Definitions' resources when given. Partitioned stages
    get ``range_request(sorted(days))``; with no days they run without a partition request
    (as for unpartitioned stages). ``instance=None`` is an ephemeral instance. The loop stops
    after a failed run (``raise_on_error=False``) or when ``on_done`` returns ``False``; the
    last result tells which. Returns one ``StageResult`` per run made, with wall seconds.

    Every run is tagged with its stage and ``invocation`` (a new id unless given), plus
    ``tags`` (``memory-pipeline run`` passes the day it planned with, for the purge).
    ``backfill=True`` records the call as one asset backfill over the stages' assets and the
    range (status and materialized partitions written when the call ends), in the terms of
    ``backfill_defs`` when given: runs over the days with data are recorded against the code
    location's calendar (those days only), which is what the UI shows the backfill with.
    ``code_location`` (the folder of workspace.yaml) stamps runs with that code location's
    job origin, so the UI of ``dagster dev`` started there can re-execute them (a re-execution
    covers the calendar range). The runs are made under
    ``event_batching()`` (``DAGSTER_EVENT_BATCH_SIZE`` defaults to ``EVENT_BATCH_SIZE``).
    """
    if isinstance(assets, dg.Definitions):
        base = assets
        assets = [*(base.assets or ()), *(base.asset_checks or ())]
        resources = dict(base.resources or {}) if resources is None else resources
    wanted = [s if isinstance(s, Stage) else stages(s)[0] for s in selection]
    defs = dg.Definitions(assets=list(assets), jobs=stage_jobs(wanted), resources=resources)
    window = sorted(days)
    run_config = quiet_run_config(log_level)
    invocation = invocation or uuid.uuid4().hex[:12]
    tags = {
        **(tags or {}),
        INVOCATION_TAG: invocation,
        FINAL_STAGE_TAG: wanted[-1].name if wanted else "",
        PID_TAG: str(os.getpid()),
        HOST_TAG: socket.gethostname(),
    }
    record = None
    parts = _partitions_def(defs, wanted)
    # runs over the days with data (not the calendar): one planned event per asset
    over_days = parts is not None and not isinstance(parts, dg.TimeWindowPartitionsDefinition)
    if instance is not None:
        fail_orphaned_runs(instance)
        if backfill:
            record_defs = defs if backfill_defs is None else backfill_defs
            covered = _window_keys(window, parts)
            record = _new_backfill(record_defs, wanted, covered, instance, invocation)
            tags[BACKFILL_TAG] = record.backfill_id
    results: list[StageResult] = []
    with event_batching(), planned_subsets(over_days):
        try:
            for stage in wanted:
                if on_start:
                    on_start(stage)
                request = range_request(window) if stage.partitioned and window else {}
                t0 = time.perf_counter()
                result = _execute(
                    defs.resolve_job_def(stage.job_name),
                    instance=instance,
                    run_config=run_config,
                    tags={**tags, **request.get("tags", {})},
                    partition_key=request.get("partition_key"),
                    raise_on_error=raise_on_error,
                    code_location=code_location,
                )
                done = StageResult(stage, result, time.perf_counter() - t0)
                results.append(done)
                if not result.success:
                    break
                if on_done and on_done(done) is False:
                    break
        finally:
            if record is not None and instance is not None:
                _finish_backfill(record_defs, record, wanted, results, instance)
    return results


def _execute(
    job_def: dg.JobDefinition,
    *,
    instance: dg.DagsterInstance | None,
    run_config: Mapping[str, Any],
    tags: Mapping[str, str],
    partition_key: str | None,
    raise_on_error: bool,
    code_location: Path | None,
) -> dg.ExecuteInProcessResult:
    """``job_def.execute_in_process``, plus the code location's job origin on the run.

    Dagster's in-process execution records no origin, and the UI disables Re-execute for a
    run whose job it cannot locate. This is ``core_execute_in_process`` of the pinned
    dagster 1.13 with ``remote_job_origin`` (and the Python origin) passed to the run.
    """
    if code_location is None or instance is None:
        return job_def.execute_in_process(
            run_config=run_config,
            instance=instance,
            tags=dict(tags),
            partition_key=partition_key,
            raise_on_error=raise_on_error,
        )
    from memory_pipeline.defs.dagster_internals import (
        ExecuteRunWithPlanIterable,
        InMemoryJob,
        PlanOrchestrationContextManager,
        create_execution_plan,
        job_execution_iterator,
        merge_run_tags,
        orchestration_context_event_generator,
    )

    remote_origin, python_origin = _job_origins(job_def.name, code_location)
    job = InMemoryJob(job_def)
    plan = create_execution_plan(job, run_config=run_config, instance_ref=instance.get_ref())
    run = instance.create_run_for_job(
        job_def=job_def,
        run_config=run_config,
        tags=merge_run_tags(job_def, partition_key, tags, None, instance, run_config),
        execution_plan=plan,
        remote_job_origin=remote_origin,
        job_code_origin=python_origin,
    )
    events = list(
        ExecuteRunWithPlanIterable(
            execution_plan=plan,
            iterator=job_execution_iterator,
            execution_context_manager=PlanOrchestrationContextManager(
                context_event_generator=orchestration_context_event_generator,
                job=job,
                execution_plan=plan,
                dagster_run=run,
                instance=instance,
                run_config=run_config,
                executor_defs=None,
                output_capture={},
                raise_on_error=raise_on_error,
            ),
        )
    )
    return dg.ExecuteInProcessResult(
        job_def=job_def,
        event_list=events,
        dagster_run=instance.get_run_by_id(run.run_id),
        output_capture={},
    )


def _job_origins(job_name: str, root: Path) -> tuple[Any, Any]:
    """The origins ``dg dev`` / ``dagster dev`` in ``root`` give the job (location
    ``memory_pipeline``, module ``memory_pipeline.definitions``)."""
    from memory_pipeline.defs.dagster_internals import (
        JobPythonOrigin,
        LoadableTargetOrigin,
        ManagedGrpcPythonEnvCodeLocationOrigin,
        ModuleCodePointer,
        RemoteJobOrigin,
        RemoteRepositoryOrigin,
        RepositoryPythonOrigin,
    )

    target = LoadableTargetOrigin(
        executable_path=sys.executable, module_name=CODE_MODULE, working_directory=str(root)
    )
    location = ManagedGrpcPythonEnvCodeLocationOrigin(target, location_name=CODE_LOCATION)
    remote = RemoteJobOrigin(RemoteRepositoryOrigin(location, "__repository__"), job_name)
    python = JobPythonOrigin(
        job_name,
        RepositoryPythonOrigin(
            executable_path=sys.executable,
            code_pointer=ModuleCodePointer(CODE_MODULE, "defs", str(root)),
        ),
    )
    return remote, python


def _window_keys(window: Sequence[dt.date], partitions_def: Any = None) -> list[str]:
    """The partition keys a range over ``window`` covers: every calendar day from the first
    to the last for calendar partitions, else the listed days."""
    if not window:
        return []
    if partitions_def is not None and not isinstance(
        partitions_def, dg.TimeWindowPartitionsDefinition
    ):
        return sorted({d.isoformat() for d in window})
    n = (window[-1] - window[0]).days + 1
    return [(window[0] + dt.timedelta(days=i)).isoformat() for i in range(n)]


def _partitions_def(defs: dg.Definitions, wanted: Sequence[Stage]) -> Any:
    """The partitions definition of the wanted partitioned stages' assets (None if none)."""
    graph = defs.resolve_asset_graph()
    for stage in wanted:
        for key in stage.keys:
            if stage.partitioned and graph.has(key):
                return graph.get(key).partitions_def
    return None


def _new_backfill(
    defs: dg.Definitions,
    wanted: Sequence[Stage],
    partition_keys: Sequence[str],
    instance: dg.DagsterInstance,
    invocation: str,
) -> Any:
    """The asset backfill this call stands for, before any run (not stored yet: a stored
    REQUESTED backfill would be picked up and run again by a daemon)."""
    from memory_pipeline.defs.dagster_internals import PartitionBackfill, make_new_backfill_id

    keys = [k for stage in wanted for k in stage.keys]
    return PartitionBackfill.from_asset_partitions(
        backfill_id=make_new_backfill_id(),
        asset_graph=defs.resolve_asset_graph(),
        partition_names=list(partition_keys) if any(s.partitioned for s in wanted) else None,
        asset_selection=keys,
        backfill_timestamp=time.time(),
        tags={INVOCATION_TAG: invocation},
        dynamic_partitions_store=instance,
        all_partitions=not any(s.partitioned for s in wanted),
        title="memory_pipeline_run",
        description="memory-pipeline run: stages "
        + ", ".join(s.name for s in wanted)
        + (
            f" over {partition_keys[0]}..{partition_keys[-1]} ({len(partition_keys)} days)"
            if partition_keys
            else ""
        ),
        run_config=None,
    )


def _finish_backfill(
    defs: dg.Definitions,
    record: Any,
    wanted: Sequence[Stage],
    results: Sequence[StageResult],
    instance: dg.DagsterInstance,
) -> None:
    """Store the backfill as it ended: the stages that ran green materialized their part of
    the target; the first stage that did not fails with everything after it."""
    from memory_pipeline.defs.dagster_internals import BulkActionStatus

    graph = defs.resolve_asset_graph()
    data = record.asset_backfill_data
    target = data.target_subset
    ok = {k for r in results if r.success and not r.failed for k in r.stage.keys}
    done = target.filter_asset_keys(ok)
    rest = target - done
    success = not rest.asset_keys
    data = data._replace(
        requested_subset=target.filter_asset_keys({k for r in results for k in r.stage.keys}),
        materialized_subset=done,
        failed_and_downstream_subset=rest,
    )
    status = BulkActionStatus.COMPLETED_SUCCESS if success else BulkActionStatus.COMPLETED_FAILED
    record = (
        record.with_asset_backfill_data(data, instance, graph)
        .with_status(status)
        .with_end_timestamp(time.time())
    )
    instance.add_backfill(record)


def fail_orphaned_runs(instance: dg.DagsterInstance) -> list[str]:
    """Mark failed the runs this tool started in a process that no longer exists.

    An in-process run whose process is killed (SIGKILL, a closed terminal) stays STARTED for
    ever: no run launcher watches it, so Dagster's run monitoring cannot tell it died. Each
    run carries the pid and host of its process; a run of this host whose pid is gone is
    reported failed. A re-execution (launched from the UI) inherits these tags from its parent
    but runs in another process, watched by the daemon's run monitoring: it is left alone.
    Returns the run ids marked.
    """
    host = socket.gethostname()
    marked = []
    runs = instance.get_runs(
        filters=dg.RunsFilter(
            statuses=[dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.STARTING],
            tags={HOST_TAG: host},
        )
    )
    for run in runs:
        pid = run.tags.get(PID_TAG, "")
        if run.parent_run_id is not None or not pid.isdigit() or _alive(int(pid)):
            continue
        instance.report_run_failed(
            run, f"the process that ran it (pid {pid} on {host}) is gone: marked failed"
        )
        marked.append(run.run_id)
    return marked


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
