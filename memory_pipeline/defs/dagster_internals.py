"""Every name this package takes from Dagster's private modules (``dagster._core``), in one place.

Dagster's public API does not cover five things the pipeline does, so those few names come
from its internals. Each is listed in ``_INTERNALS`` below with why it is needed and what
public API would replace it; an upgrade of Dagster that moves one breaks here, and nowhere
else. The pinned version these were checked against is dagster 1.13.

The names are loaded on first use (a module ``__getattr__``), as the call sites used to import
them inside their functions: importing this module costs nothing, and the run machinery's
internals are loaded only by a process that runs jobs.

Names Dagster exports publicly (``dg.AssetRecordsFilter``, ``dg.AssetCheckEvaluation``,
``dg.serialize_value``, ``dg.ExecuteInProcessResult``) are used from ``dagster`` directly.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> (private module, why we need it / which public API would replace it)
_INTERNALS: dict[str, tuple[str, str]] = {
    # -- per-partition check evaluations (helpers.check_evaluations) ------------------------
    # A check computed once over a ranged run is recorded as one evaluation per partition,
    # each pointing at that partition's materialization (so the UI does not show it as
    # stale). AssetCheckEvaluation is public, the target it takes is not; a public way to
    # record a check result per partition against a given materialization would replace it.
    "AssetCheckEvaluationTargetMaterializationData": (
        "dagster._core.definitions.asset_checks.asset_check_evaluation",
        "target of a per-partition check evaluation; no public equivalent",
    ),
    # -- the instance's SQLite event log (dagster_sqlite) ----------------------------------
    # Dagster's SQLite storage, subclassed to keep its engines, write a batch in one
    # transaction and store slim planned check rows; replaced by a faster SQLite event log
    # in Dagster, or by the PostgreSQL instance (deploy/postgres), which needs none of it.
    "SqliteEventLogStorage": (
        "dagster._core.storage.event_log.sqlite.sqlite_event_log",
        "SQLite event log subclassed for speed",
    ),
    "INDEX_SHARD_NAME": (
        "dagster._core.storage.event_log.sqlite.sqlite_event_log",
        "SQLite event log subclassed for speed",
    ),
    "DagsterSqliteStorage": ("dagster._core.storage.sqlite_storage", "its instance storage"),
    "_event_logs_directory": ("dagster._core.storage.sqlite_storage", "its event log folder"),
    "SQLITE_BUSY_TIMEOUT_SECONDS": ("dagster._core.storage.sqlite", "its busy timeout"),
    "AssetCheckExecutionsTable": (
        "dagster._core.storage.event_log.schema",
        "planned check rows written by the subclass",
    ),
    "AssetCheckExecutionRecordStatus": (
        "dagster._core.storage.asset_check_execution_record",
        "planned check rows written by the subclass",
    ),
    "AssetCheckEvaluationPlanned": (
        "dagster._core.definitions.asset_checks.asset_check_evaluation",
        "planned check rows written by the subclass",
    ),
    # -- executing a stage job in process with an origin (runner._execute) ------------------
    # ``execute_in_process`` records no code origin, so the UI disables Re-execute for the
    # CLI's runs. These are the pieces of ``core_execute_in_process`` with the origins passed
    # to the run; replaced by an ``execute_in_process(..., remote_job_origin=...)`` argument,
    # or by submitting the runs through a public run launcher API.
    "InMemoryJob": ("dagster._core.definitions.job_base", "in-process execution"),
    "ExecuteRunWithPlanIterable": ("dagster._core.execution.api", "in-process execution"),
    "create_execution_plan": ("dagster._core.execution.api", "in-process execution"),
    "job_execution_iterator": ("dagster._core.execution.api", "in-process execution"),
    "PlanOrchestrationContextManager": (
        "dagster._core.execution.context_creation_job",
        "in-process execution",
    ),
    "orchestration_context_event_generator": (
        "dagster._core.execution.context_creation_job",
        "in-process execution",
    ),
    "merge_run_tags": ("dagster._core.execution.execute_in_process", "in-process execution"),
    # -- the job's origin as ``dg dev`` sees it (runner._job_origins) -----------------------
    # The origin of a run made by the CLI must equal the one the UI's code location has, or
    # the UI cannot locate the job; no public constructor of origins exists.
    "ModuleCodePointer": ("dagster._core.code_pointer", "run origin"),
    "RepositoryPythonOrigin": ("dagster._core.definitions.reconstruct", "run origin"),
    "JobPythonOrigin": ("dagster._core.origin", "run origin"),
    "ManagedGrpcPythonEnvCodeLocationOrigin": ("dagster._core.remote_origin", "run origin"),
    "RemoteJobOrigin": ("dagster._core.remote_origin", "run origin"),
    "RemoteRepositoryOrigin": ("dagster._core.remote_origin", "run origin"),
    "LoadableTargetOrigin": ("dagster._core.types.loadable_target_origin", "run origin"),
    # -- one backfill record for a CLI run (runner._new_backfill / _finish_backfill) --------
    # ``memory-pipeline run`` shows in the UI as one backfill of its stage runs; replaced by
    # a public API to create and close a backfill without the daemon launching its runs.
    "PartitionBackfill": ("dagster._core.execution.backfill", "CLI run as one backfill"),
    "BulkActionStatus": ("dagster._core.execution.backfill", "CLI run as one backfill"),
    "make_new_backfill_id": ("dagster._core.utils", "CLI run as one backfill"),
}

__all__ = sorted(_INTERNALS)


def __getattr__(name: str) -> Any:
    """The internal ``name``, imported from its private module on first use."""
    if name not in _INTERNALS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_INTERNALS[name][0]), name)
    globals()[name] = value  # later lookups skip this function
    return value
