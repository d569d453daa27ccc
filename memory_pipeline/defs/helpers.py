"""What several asset modules share: table identity from the registry, check results.

Asset keys, descriptions and column metadata of the table assets are read from the table
registry (:mod:`memory_pipeline.core.common.tables`) here, so an asset and the table it
writes cannot drift apart. The check logic lives in :mod:`memory_pipeline.core.quality`; an
asset only names the check and hands its ``(passed, metadata)`` result here, so every check
reports metadata the same way and no module imports another's private helpers.
"""

import dataclasses
import datetime as dt
import functools
import hashlib
import inspect
import os
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
from dagster._core.definitions.asset_checks.asset_check_evaluation import (
    AssetCheckEvaluation,
    AssetCheckEvaluationTargetMaterializationData,
)

from memory_pipeline.core.common import fs
from memory_pipeline.core.common.owners import (
    input_fingerprint,
    map_owners,
    save_fingerprint,
    stored_fingerprint,
)
from memory_pipeline.core.common.storage import TableStore
from memory_pipeline.core.common.tables import Table
from memory_pipeline.core.quality.checks import Result
from memory_pipeline.defs.compute import RESOURCE_KEY as DASK_KEY
from memory_pipeline.defs.compute import DaskResource

COLUMN_SCHEMA = "dagster/column_schema"


def asset_key(table: Table) -> dg.AssetKey:
    """The key of the asset that writes ``table`` (the table's own name for a table asset)."""
    return dg.AssetKey(table.asset)


def column_schema(table: Table) -> dg.TableSchema:
    """The table's columns as Dagster shows them: registry name, Arrow type, description."""
    types = table.column_types()
    return dg.TableSchema(
        columns=[
            dg.TableColumn(name, type_, table.columns.get(name)) for name, type_ in types.items()
        ]
    )


def table_asset(table: Table) -> dict[str, Any]:
    """Definition arguments of the asset that IS ``table``: key, description, column schema.

    Spread into ``@dg.asset(...)`` or ``dg.AssetSpec(...)``; the metadata is definition
    metadata, so the UI lists the columns before anything is materialized.
    """
    if table.asset != table.name:
        raise ValueError(f"table {table.name!r} is written by asset {table.asset!r}, not its own")
    return {
        "key": asset_key(table),
        "description": table.description,
        "metadata": {COLUMN_SCHEMA: column_schema(table)},
    }


def table_path(store: TableStore, table: Table) -> dg.MetadataValue:
    """The ``path`` metadata of a table asset's materialization: the table's folder."""
    return dg.MetadataValue.path(str(store.table_dir(table)))


def check_result(
    asset: dg.AssetKey,
    name: str,
    result: Result,
    severity: dg.AssetCheckSeverity = dg.AssetCheckSeverity.ERROR,
) -> dg.AssetCheckResult:
    """The ``AssetCheckResult`` of check ``name`` on ``asset`` from a core check's result.

    Nested dicts become JSON metadata (Dagster takes scalars as they are, but not dicts);
    ``severity`` is ERROR, Dagster's default, unless a check is only worth a warning.
    """
    ok, meta = result
    return dg.AssetCheckResult(
        asset_key=asset,
        check_name=name,
        passed=bool(ok),
        severity=severity,
        metadata={
            k: dg.MetadataValue.json(v) if isinstance(v, dict) else v for k, v in meta.items()
        },
    )


# ----------------------------------------------------------------------------- UI metadata

ROW_COUNT = "dagster/row_count"
# Asset owners (Dagster wants an e-mail or ``team:<name>``): the pipeline is one team's.
OWNERS = ["team:memory-pipeline"]
_PACKAGE_ROOT = Path(__file__).resolve().parents[1]


def code_version(*modules: str) -> str:
    """A content hash of the source files of ``modules`` (dotted names; a package counts
    all its ``.py`` files), so the UI marks an asset stale when the code it runs changed.

    Content-derived like every id here: the same code gives the same version on any machine,
    and nobody has to remember to bump a number.
    """
    digest = hashlib.sha256()
    for name in sorted(set(modules)):
        rel = Path(*name.split(".")[1:])
        target = _PACKAGE_ROOT / rel
        files = sorted(target.rglob("*.py")) if target.is_dir() else [target.with_suffix(".py")]
        for file in files:
            digest.update(file.relative_to(_PACKAGE_ROOT).as_posix().encode())
            digest.update(file.read_bytes())
    return digest.hexdigest()[:12]


def asset_info(stage: str, kinds: Sequence[str], *modules: str) -> dict[str, Any]:
    """Definition arguments every asset carries: kinds (the storage/compute badges), owners,
    a ``stage`` tag, and a ``code_version`` hashed from ``modules`` (its defs module and the
    core package it calls). Spread into ``@dg.asset(...)`` / ``dg.AssetSpec(...)``."""
    return {
        "kinds": set(kinds),
        "owners": list(OWNERS),
        "tags": {"stage": stage},
        "code_version": code_version(*modules),
    }


def check_spec(
    name: str,
    asset: dg.AssetKey,
    description: str,
    partitions_def: dg.PartitionsDefinition | None = None,
    *,
    blocking: bool = False,
) -> dg.AssetCheckSpec:
    """An in-asset check spec with its description, partitioned like a partitioned asset.

    A partitioned spec makes Dagster plan one execution per partition of a ranged run, and
    :func:`partition_events` reports one evaluation per partition, so the UI shows a status
    per partition instead of one unmatched evaluation and many "skipped" ones.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return dg.AssetCheckSpec(
            name,
            asset=asset,
            description=description,
            blocking=blocking,
            partitions_def=partitions_def,
        )


def _targets(
    instance: dg.DagsterInstance, run_id: str, asset: dg.AssetKey, partitions: Sequence[str]
) -> dict[str, AssetCheckEvaluationTargetMaterializationData]:
    """partition -> the materialization of ``asset`` this run recorded (the check's target).

    Read from the asset index (its storage ids are the ones the UI compares with the latest
    materialization; a run's own event records may be numbered apart, as with SQLite)."""
    from dagster._core.storage.event_log.base import AssetRecordsFilter

    records = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=asset, asset_partitions=list(partitions)),
        limit=len(partitions),
    ).records
    out = {}
    for record in records:
        mat = record.asset_materialization
        if mat is None or record.run_id != run_id or mat.partition in out:
            continue
        out[mat.partition] = AssetCheckEvaluationTargetMaterializationData(
            storage_id=record.storage_id, run_id=run_id, timestamp=record.timestamp
        )
    return out


def check_evaluations(
    context: dg.AssetExecutionContext | dg.AssetCheckExecutionContext,
    results: Iterable[dg.AssetCheckResult],
    output_names: Mapping[dg.AssetCheckKey, str],
    blocking: Mapping[dg.AssetCheckKey, bool],
    empty: Mapping[dg.AssetKey, set[str]] | None = None,
) -> Iterator[Any]:
    """One evaluation per partition of the run for each check result of a partitioned run.

    A check computed once over a range applies to every partition of it; a result whose
    metadata lists ``failed_partitions`` (the GX suites) fails only those. Its figures are the
    range's, so they are named ``range_*`` (:func:`range_metadata`). The ``Output`` at
    the end satisfies the check's op output (Dagster requires it when the result is not an
    ``AssetCheckResult``).

    ``empty[asset]`` lists partitions the run wrote no rows of: a passed check has nothing
    to say about them, so no evaluation is stored for them (a failed one is always stored).
    Every stored event is a write of the instance (two SQLite commits each); they were half
    the events of a sparse range, whose empty days then cost seconds each.
    """
    keys = list(context.partition_keys) if _is_partitioned(context) else []
    results = list(results)
    if not keys:
        yield from results
        return
    targets: dict[dg.AssetKey, dict] = {}
    for result in results:
        key = dg.AssetCheckKey(result.asset_key, result.check_name)
        if result.asset_key not in targets:
            targets[result.asset_key] = _targets(
                context.instance, context.run.run_id, result.asset_key, keys
            )
        failed = result.metadata.get("failed_partitions")
        failed_keys = set(failed.value) if failed is not None else None
        # computed once over the range: its figures say so on every partition's evaluation
        metadata = range_metadata(result.metadata, keys)
        skip = (empty or {}).get(result.asset_key, set())
        for partition in keys:
            passed = result.passed or (failed_keys is not None and partition not in failed_keys)
            if passed and partition in skip:
                continue
            yield AssetCheckEvaluation(
                asset_key=result.asset_key,
                check_name=result.check_name,
                passed=passed,
                metadata=metadata,
                target_materialization_data=targets[result.asset_key].get(partition),
                severity=result.severity,
                description=result.description,
                blocking=blocking.get(key, False),
                partition=partition,
            )
        yield dg.Output(None, output_name=output_names[key])


def _is_partitioned(context: Any) -> bool:
    try:
        return bool(context.partition_keys)
    except Exception:  # unpartitioned run: Dagster raises instead of returning []
        return False


# Per-partition figures of a table asset: (store, day, the day's stored partition) -> metadata.
PerDay = Callable[[TableStore, dt.date, pa.Table], Mapping[str, Any]]
RANGE = "range"
OWNER_WORKERS = "owner_workers"  # a multi-owner run: Dask workers its owners ran on (0: here)
RANGE_PREFIX = "range_"
# Numbers that are settings of the run (the same on every partition), not counts of the range.
SETTINGS = frozenset(
    {"gap_minutes", "chunk_size", "chunk_stride", "dim", "window", "dask_workers", "owner_workers"}
)
# Lists that already say which partitions they are about (GX: the failing partitions).
_SELF_DESCRIBING = frozenset({"failed_partitions"})
# Metadata key under which a body may hand over the partitions it just wrote (a
# :class:`Written`): the per-partition figures then come from memory, not a read per file.
WRITTEN = "memory_pipeline/written"


class Written(dict):
    """``{day: table}`` a body wrote, for :func:`partition_events` (a dict, so Dagster takes
    it as metadata, but never recorded: it is popped before the event is made; equal only to
    itself, so merging several owners' metadata drops it and the figures are read from the
    owners' stores)."""

    def __eq__(self, other: object) -> bool:
        return self is other

    __hash__ = None  # type: ignore[assignment]

    @property
    def parts(self) -> dict[dt.date, pa.Table]:
        return dict(self)


def partition_events(
    context: dg.AssetExecutionContext,
    store: TableStore,
    tables: Mapping[dg.AssetKey, Table],
    events: Any,
    per_day: Mapping[dg.AssetKey, PerDay] | None = None,
) -> Iterator[Any]:
    """What a partitioned table asset yields, made truthful per partition in the UI.

    Dagster copies the metadata of a ``MaterializeResult`` of a ranged run onto every
    partition's materialization, so a range total would show on each day as if it were that
    day's. For each ``MaterializeResult`` of a partitioned run: every partition's event gets its
    own ``dagster/row_count`` and the figures of ``per_day[key]`` (both from the stored
    partition, or from the body's :data:`WRITTEN` partitions when it hands them over), and the
    body's own figures, computed over the run's range, are renamed ``range_*`` next to a
    ``range`` entry (:func:`range_metadata`). Check results become per-partition evaluations
    (:func:`check_evaluations`) after the materialization is recorded. ``events`` is what the
    asset body returned or yielded.
    """
    if isinstance(events, (dg.MaterializeResult, dg.AssetCheckResult)):
        events = [events]
    keys = list(context.partition_keys) if _is_partitioned(context) else []
    specs = context.assets_def.node_check_specs_by_output_name
    output_names = {spec.key: name for name, spec in specs.items()}
    blocking = {spec.key: spec.blocking for spec in specs.values()}
    empty: dict[dg.AssetKey, set[str]] = {}  # partitions written without rows, per asset
    for event in events:
        if not isinstance(event, dg.MaterializeResult):
            if isinstance(event, dg.AssetCheckResult):
                yield from check_evaluations(context, [event], output_names, blocking, empty)
            else:
                yield event
            continue
        key = event.asset_key or context.assets_def.key
        table = tables.get(key)
        metadata = dict(event.metadata or {})
        written = metadata.pop(WRITTEN, None)
        parts = written.parts if isinstance(written, Written) else {}
        if keys:
            day_metadata = (per_day or {}).get(key)
            # one narrow column is enough to count rows (the full read of 100 chunk partitions,
            # raw_text included, was seconds of a backfill); per-day figures read the partition
            narrow = (
                table.schema.names[:1]
                if table is not None and table.schema is not None and day_metadata is None
                else None
            )
            for partition in keys:
                day = dt.date.fromisoformat(partition)
                own: dict[str, Any] = {}
                if table is not None:
                    part = parts.get(day)
                    if part is None:
                        part = store.read(table, [day], columns=narrow)
                    own[ROW_COUNT] = part.num_rows
                    if not part.num_rows:
                        empty.setdefault(key, set()).add(partition)
                    # a schema-less table (chunk_embeddings) that no owner wrote that day
                    # reads as a table without columns: it has no per-day figures
                    if day_metadata is not None and part.num_columns:
                        own.update(_json_dicts(day_metadata(store, day, part)))
                if own:
                    context.add_asset_metadata(own, asset_key=key, partition_key=partition)
            metadata = range_metadata(metadata, keys)
        elif "rows" in metadata:
            metadata[ROW_COUNT] = metadata.pop("rows")
        yield dg.MaterializeResult(
            asset_key=event.asset_key,
            metadata=metadata,
            data_version=event.data_version,
            tags=event.tags,
        )
        yield from check_evaluations(
            context, event.check_results or [], output_names, blocking, empty
        )


def range_metadata(metadata: Mapping[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    """The metadata of a partitioned run's event with its range figures named as such.

    Every figure (a number, a count table as JSON, a list of problems) becomes
    ``range_<key>``, and ``range`` says ``first..last``: it was computed over the whole run,
    and Dagster repeats it on every partition's event. Text, paths and the run's settings
    (:data:`SETTINGS`) are true of each partition and keep their names. Readers of these
    figures read ``range_<key>`` on any partitioned run (one day is a range of one).
    """
    out: dict[str, Any] = {}
    for k, v in metadata.items():
        keep = (
            k.startswith(RANGE_PREFIX)
            or k in SETTINGS
            or k in _SELF_DESCRIBING
            or isinstance(v, str | dg.TextMetadataValue | dg.PathMetadataValue)
        )
        out[k if keep else RANGE_PREFIX + k] = v
    if keys:
        out[RANGE] = f"{keys[0]}..{keys[-1]}"
    return out


def _json_dicts(metadata: Mapping[str, Any]) -> dict[str, Any]:
    return {k: dg.MetadataValue.json(v) if isinstance(v, dict) else v for k, v in metadata.items()}


def per_partition(
    tables: Mapping[dg.AssetKey, Table],
    per_day: Mapping[dg.AssetKey, PerDay] | None = None,
    owners: Callable[[dg.AssetExecutionContext, Any], list[Any]] | None = None,
) -> Callable[[Callable], Callable]:
    """Decorator (under ``@dg.asset``) running the asset body once per owner, then applying
    :func:`partition_events` to what it returned.

    The body keeps returning or yielding plain ``MaterializeResult``s with embedded check
    results for one owner (``pipeline`` is that owner's :class:`OwnerScope`); with several
    owners each body runs through :func:`run_owner_task` (serially, or one owner per Dask
    task when the ``dask`` resource has a cluster), its events come back as plain data and
    are merged into one per asset and check (:func:`merge_owner_events`); the per-partition
    row counts add up every owner's rows. ``owners(context, pipeline)`` picks the owners
    (default: those with messages near the run's days). ``per_day[key]`` gives each
    partition's own figures (see :func:`partition_events`).
    """

    def wrap(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(context: dg.AssetExecutionContext, pipeline: Any, *args: Any, **kw: Any):
            dask = _dask_of(fn, kw)
            if owners is not None:
                scopes = owners(context, pipeline)
            else:
                days = [dt.date.fromisoformat(k) for k in context.partition_keys]
                scopes = pipeline.owner_scopes(days)
            if not pipeline.cfg.multi_owner:
                scope = scopes[0]
                yield from partition_events(
                    context, scope.store, tables, fn(context, scope, *args, **kw), per_day
                )
                return
            done = _run_owners(context, fn, scopes, args, kw, dask)
            results = [r.events for r in done]
            merged = merge_owner_events(
                context,
                [s.owner_id for s in scopes],
                results,
                extra={OWNER_WORKERS: _owner_workers(dask, scopes)},
            )
            yield from partition_events(context, _OwnersReader(scopes), tables, merged, per_day)

        return _with_dask(wrapper, fn)

    return wrap


def per_owner(
    fingerprint: Callable[[Any], str | None] | None = None, name: str | None = None
) -> Callable[[Callable], Callable]:
    """Decorator (under ``@dg.asset``) for an unpartitioned asset: the body runs once per
    owner (:func:`run_owner_task`, serially or on the Dask cluster) and the results are
    merged (:func:`merge_owner_events`).

    ``fingerprint(scope)`` hashes what the asset reads for an owner (None: build anyway); an
    owner whose fingerprint equals the one saved after its last successful build is skipped,
    so one owner's new day rebuilds only that owner's indexes. The fingerprint is saved only
    when every check of the owner's build passed. One owner: the body runs as it always did.
    """

    def wrap(fn: Callable) -> Callable:
        asset_name = name or fn.__name__

        @functools.wraps(fn)
        def wrapper(context: dg.AssetExecutionContext, pipeline: Any, *args: Any, **kw: Any):
            dask = _dask_of(fn, kw)
            scopes = pipeline.owner_scopes()
            if not pipeline.cfg.multi_owner:
                yield from _events(fn(context, scopes[0], *args, **kw))
                return
            done = _run_owners(
                context, fn, scopes, args, kw, dask, fingerprint=fingerprint, asset=asset_name
            )
            built = [(r.owner_id, r.events) for r in done if not r.skipped]
            skipped = [r.owner_id for r in done if r.skipped]
            context.log.info(
                f"{asset_name}: {len(built)} owners built, {len(skipped)} unchanged (skipped)"
            )
            yield from merge_owner_events(
                context,
                [oid for oid, _ in built],
                [r for _, r in built],
                extra={
                    "owners_skipped": len(skipped),
                    OWNER_WORKERS: _owner_workers(dask, scopes),
                },
            )

        return _with_dask(wrapper, fn)

    return wrap


# ----------------------------------------------------------------------------- owner tasks
#
# What crosses to a Dask worker is plain data only: the body (a function, pickled by value),
# the owner's scope (its configuration and store: paths and settings), the resources the body
# takes (configured values), and a WorkerEnv with what the run's process set up that a
# spawned worker lacks (the S3 endpoint and credentials, the local-copy folder). What comes
# back is an OwnerResult: log lines and the body's events as plain tuples; the run's process
# rebuilds the Dagster events from them. No Dagster context or event object is shipped.


@dataclasses.dataclass(frozen=True)
class WorkerEnv:
    """What a worker needs set up before it runs an owner's body, as plain values."""

    s3: fs.S3Options | None = None  # endpoint and credentials of an s3:// output
    cache_dir: str | None = None  # $MEMORY_PIPELINE_CACHE_DIR of the run (local copies)

    @classmethod
    def of_this_process(cls, remote: bool) -> "WorkerEnv":
        return cls(fs.s3_options() if remote else None, os.environ.get(fs.CACHE_ENV) or None)

    def apply(self) -> None:
        if self.s3 is not None:
            fs.configure_s3(self.s3)
        if self.cache_dir:
            os.environ[fs.CACHE_ENV] = self.cache_dir


@dataclasses.dataclass(frozen=True)
class RunInfo:
    """The run, as a body may ask for it (``context.run``: its id, tags and parent)."""

    run_id: str
    tags: Mapping[str, str]
    parent_run_id: str | None = None


@dataclasses.dataclass
class OwnerTask:
    """One owner's body with everything it needs, picklable (see the section comment)."""

    fn: Callable
    scope: Any
    partition_keys: list[str] | None
    run: RunInfo
    args: tuple = ()
    kw: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    env: WorkerEnv = WorkerEnv()
    fingerprint: Callable[[Any], str | None] | None = None  # per_owner: skip when unchanged
    asset: str | None = None  # per_owner: the name its fingerprint is saved under


@dataclasses.dataclass
class OwnerResult:
    """What one owner's body returned, as plain data (built back into events by the run)."""

    owner_id: str
    events: list[Any]  # plain tuples (_to_plain); the run's process rebuilds them
    logs: list[tuple[str, str]]  # (level, message), logged by the run's process
    skipped: bool = False  # per_owner: the inputs were unchanged, nothing built


class _Log:
    """``context.log`` for a body: lines go live to ``sink`` (in the run's process) or are
    kept to be logged by the run's process (on a worker)."""

    def __init__(self, sink: Any = None) -> None:
        self.sink = sink
        self.lines: list[tuple[str, str]] = []

    def _emit(self, level: str, msg: str) -> None:
        if self.sink is not None:
            getattr(self.sink, level)(msg)
        else:
            self.lines.append((level, str(msg)))

    def debug(self, msg: str) -> None:
        self._emit("debug", msg)

    def info(self, msg: str) -> None:
        self._emit("info", msg)

    def warning(self, msg: str) -> None:
        self._emit("warning", msg)

    def error(self, msg: str) -> None:
        self._emit("error", msg)


class _TaskContext:
    """The asset context as one owner's body sees it, made of plain values: the run's
    partition keys narrowed to the owner's days, ``log`` and ``run`` (id, tags, parent).
    Any other attribute raises, so a body that needs more says so instead of reaching the
    run's process from a worker."""

    def __init__(self, task: OwnerTask, log: _Log) -> None:
        self._keys = task.partition_keys
        self.log = log
        self.run = task.run

    @property
    def partition_keys(self) -> list[str]:
        return list(self._keys or [])

    @property
    def run_id(self) -> str:
        return self.run.run_id


def run_owner_task(task: OwnerTask, sink: Any = None) -> OwnerResult:
    """One owner's body, run here or on a worker: plain task in, plain result out.

    ``per_owner`` tasks carry a fingerprint: an owner whose inputs are unchanged since its
    last successful build is skipped, and the fingerprint is saved after a build whose
    checks all passed (on the worker: the owner's folder is the worker's to write)."""
    task.env.apply()
    log = _Log(sink)
    scope = task.scope
    folder = scope.cfg.output_dir
    fp = None
    if task.fingerprint is not None:
        fp = task.fingerprint(scope)
        if fp is not None and fp == stored_fingerprint(folder, task.asset):
            return OwnerResult(scope.owner_id, [], log.lines, skipped=True)
    kw = {k: _built(v) for k, v in task.kw.items()}
    events = _events(task.fn(_TaskContext(task, log), scope, *task.args, **kw))
    if task.fingerprint is not None and all(r.passed for r in _check_results(events)):
        # after a first build the output exists: fingerprint what it was built from
        fp = fp if fp is not None else task.fingerprint(scope)
        if fp is not None:
            save_fingerprint(folder, task.asset, fp)
    return OwnerResult(scope.owner_id, [_to_plain(e) for e in events], log.lines)


def _run_owners(
    context: dg.AssetExecutionContext,
    fn: Callable,
    scopes: Sequence[Any],
    args: tuple,
    kw: Mapping[str, Any],
    dask: DaskResource | None,
    *,
    fingerprint: Callable[[Any], str | None] | None = None,
    asset: str | None = None,
) -> list[OwnerResult]:
    """Every owner's body through :func:`map_owners`, results with their events rebuilt.

    With a cluster and two owners or more, each owner is one Dask task and its body runs
    its own batches serially (a task on a worker has no client of its own; one owner per
    core is the coarse unit). With one owner, or no cluster, the bodies run here one after
    another, and a lone owner's body keeps the cluster for its batches (embedding, BM25).
    """
    ship = _ships(dask, scopes)
    runner = dask.runner() if ship else None  # no cluster started for a lone owner
    if ship:
        kw = {k: _shipped_resource(v) for k, v in kw.items()}
    run = context.run
    info = RunInfo(run.run_id, dict(run.tags), run.parent_run_id)
    remote = any(fs.is_remote(s.cfg.storage_root) for s in scopes)
    env = WorkerEnv.of_this_process(remote)
    run_keys = list(context.partition_keys) if _is_partitioned(context) else None

    def keys(scope: Any) -> list[str] | None:  # the run's days this owner takes part in
        if run_keys is None or scope.days is None:
            return run_keys
        return [d.isoformat() for d in scope.days]

    tasks = [
        OwnerTask(fn, s, keys(s), info, tuple(args), dict(kw), env, fingerprint, asset)
        for s in scopes
    ]
    if ship:
        done = map_owners(run_owner_task, tasks, runner)
        for r in done:
            for level, msg in r.logs:
                getattr(context.log, level)(msg)
    else:
        done = map_owners(functools.partial(run_owner_task, sink=context.log), tasks)
    for r in done:
        r.events = [_from_plain(e) for e in r.events]
    return done


def _ships(dask: DaskResource | None, scopes: Sequence[Any]) -> bool:
    """Whether the owners go to the cluster: one is there and there are two owners or more."""
    return dask is not None and dask.enabled and len(scopes) >= 2


def _owner_workers(dask: DaskResource | None, scopes: Sequence[Any]) -> int:
    """The ``owner_workers`` figure: Dask workers the owners were mapped over (0: here)."""
    return dask.workers() if _ships(dask, scopes) else 0


def _dask_of(fn: Callable, kw: dict[str, Any]) -> DaskResource | None:
    """The run's ``dask`` resource; popped from ``kw`` when only the wrapper asked for it."""
    if DASK_KEY in inspect.signature(fn).parameters:
        return kw.get(DASK_KEY)
    return kw.pop(DASK_KEY, None)


def _with_dask(wrapper: Callable, fn: Callable) -> Callable:
    """``wrapper`` with a ``dask`` resource parameter added to the signature Dagster reads,
    so every per-owner asset can ship its owners to the cluster without its body asking."""
    sig = inspect.signature(fn)
    if DASK_KEY not in sig.parameters:
        extra = inspect.Parameter(
            DASK_KEY, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=DaskResource
        )
        wrapper.__signature__ = sig.replace(parameters=[*sig.parameters.values(), extra])
    return wrapper


def _shipped_resource(value: Any) -> Any:
    """What a worker gets for one of the body's resources: its class and configured values.

    A resource object does not travel well: inside a run it holds the run's init context
    (loggers) and maybe a loaded model, and Dagster's config types do not unpickle. So the
    worker gets a :class:`_ResourceSpec` and builds a fresh resource from it (it loads what
    it needs). The ``dask`` resource becomes the serial runner."""
    if isinstance(value, DaskResource):
        return _SERIAL_DASK
    if isinstance(value, dg.ConfigurableResource):
        fields = {k: _shipped_resource(getattr(value, k)) for k in type(value).model_fields}
        return _ResourceSpec(type(value), fields)
    return value


@dataclasses.dataclass(frozen=True)
class _ResourceSpec:
    """A configurable resource as plain data: its class (by reference) and field values."""

    cls: type
    fields: Mapping[str, Any]

    def build(self) -> Any:
        return self.cls(**{k: _built(v) for k, v in self.fields.items()})


def _built(value: Any) -> Any:
    return value.build() if isinstance(value, _ResourceSpec) else value


class _SerialDask:
    """The ``dask`` resource a body gets on a worker: no cluster (its batches run there)."""

    enabled = False

    def runner(self) -> None:
        return None

    def workers(self) -> int:
        return 1


_SERIAL_DASK = _SerialDask()


# Events as plain tuples: ("mat", key path, metadata, checks, data_version, tags) and
# ("check", key path, name, passed, severity, metadata, description). Metadata keeps Python
# scalars, dicts and lists as they are; a MetadataValue travels as its serdes JSON text.
_MV = "__metadata_value__"


def _plain_meta(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    from dagster._serdes import serialize_value

    out: dict[str, Any] = {}
    for k, v in (metadata or {}).items():
        out[k] = {_MV: serialize_value(v)} if isinstance(v, dg.MetadataValue) else v
    return out


def _event_meta(metadata: Mapping[str, Any]) -> dict[str, Any]:
    from dagster._serdes import deserialize_value

    return {
        k: deserialize_value(v[_MV]) if isinstance(v, dict) and set(v) == {_MV} else v
        for k, v in metadata.items()
    }


def _key(key: dg.AssetKey | None) -> tuple[str, ...] | None:
    return None if key is None else tuple(key.path)


def _plain_check(c: dg.AssetCheckResult) -> tuple:
    return (
        "check",
        _key(c.asset_key),
        c.check_name,
        bool(c.passed),
        c.severity.value,
        _plain_meta(c.metadata),
        c.description,
    )


def _to_plain(event: Any) -> tuple:
    """A body's event as plain data (what leaves a worker)."""
    if isinstance(event, dg.MaterializeResult):
        dv = event.data_version.value if event.data_version is not None else None
        checks = [_plain_check(c) for c in event.check_results or []]
        tags = dict(event.tags) if event.tags else None
        return ("mat", _key(event.asset_key), _plain_meta(event.metadata), checks, dv, tags)
    if isinstance(event, dg.AssetCheckResult):
        return _plain_check(event)
    raise TypeError(
        f"an owner's body may return MaterializeResult/AssetCheckResult, got {type(event).__name__}"
    )


def _from_plain(plain: tuple) -> Any:
    """The Dagster event a plain tuple of :func:`_to_plain` stands for (in the run)."""
    if plain[0] == "check":
        _, key, name, passed, severity, metadata, description = plain
        return dg.AssetCheckResult(
            asset_key=None if key is None else dg.AssetKey(list(key)),
            check_name=name,
            passed=passed,
            severity=dg.AssetCheckSeverity(severity),
            metadata=_event_meta(metadata),
            description=description,
        )
    _, key, metadata, checks, dv, tags = plain
    return dg.MaterializeResult(
        asset_key=None if key is None else dg.AssetKey(list(key)),
        metadata=_event_meta(metadata),
        check_results=[_from_plain(c) for c in checks],
        data_version=None if dv is None else dg.DataVersion(dv),
        tags=tags,
    )


def inputs_fingerprint(
    tables: Sequence[Table],
    extra: Callable[[Any], str | None] = lambda scope: "",
) -> Callable[[Any], str | None]:
    """A :func:`per_owner` fingerprint: the owner's files of ``tables`` plus ``extra(scope)``
    (configuration, code version, the published index version); ``extra`` returning None
    (e.g. the output is missing) forces a build."""

    def fingerprint(scope: Any) -> str | None:
        more = extra(scope)
        return None if more is None else input_fingerprint(scope.store, tables, more)

    return fingerprint


class _OwnersReader:
    """Reads one table over several owners' stores (row counts of a partition in the UI).

    Only the owners that took part in a day are asked about it (``OwnerScope.days``; None:
    every day): on object storage each question is a request, and a run over 233 owners
    and 100 days asked 23,300 per table. A day no owner wrote reads as the table's empty
    schema (the per-day figures read its columns), not as a table without columns."""

    def __init__(self, scopes: Sequence[Any]) -> None:
        self.scopes = [(s.store, None if s.days is None else set(s.days)) for s in scopes]

    def read(
        self, name: Any, days: Iterable[dt.date] | None = None, columns: list[str] | None = None
    ) -> Any:
        from memory_pipeline.core.common.tables import table

        days = None if days is None else list(days)
        parts = [
            store.read(name, days, columns=columns)
            for store, took_part in self.scopes
            if days is None
            or ((took_part is None or not took_part.isdisjoint(days)) and _has(store, name, days))
        ]
        if not parts:
            schema = table(name).schema
            if schema is None:
                return pa.table({})
            if columns is not None:
                schema = pa.schema([schema.field(c) for c in columns])
            return schema.empty_table()
        return pa.concat_tables(parts, promote_options="permissive")


def _has(store: TableStore, name: Any, days: Iterable[dt.date]) -> bool:
    return any(store.has(name, d) for d in days)


def _events(result: Any) -> list[Any]:
    """What an asset body returned or yielded, as a list."""
    if result is None:
        return []
    if isinstance(result, (dg.MaterializeResult, dg.AssetCheckResult)):
        return [result]
    return list(result)


def _check_results(events: Iterable[Any]) -> Iterator[dg.AssetCheckResult]:
    for event in events:
        if isinstance(event, dg.AssetCheckResult):
            yield event
        elif isinstance(event, dg.MaterializeResult):
            yield from event.check_results or []


def _merge_metadata(values: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Several owners' metadata as one: numbers add up, a value every owner shares is kept,
    anything else (paths, per-owner JSON) is dropped rather than shown for one owner."""
    out: dict[str, Any] = {}
    keys = list(dict.fromkeys(k for v in values for k in v))
    for key in keys:
        raw = [_plain(v[key]) for v in values if key in v]
        if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in raw):
            out[key] = sum(raw)
        elif all(x == raw[0] for x in raw) and isinstance(raw[0], (str, bool, int, float)):
            out[key] = raw[0]
    return out


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, dg.MetadataValue) else value


def merge_owner_events(
    context: dg.AssetExecutionContext,
    owner_ids: Sequence[str],
    results: Sequence[Sequence[Any]],
    extra: Mapping[str, Any] | None = None,
) -> list[Any]:
    """One ``MaterializeResult`` per selected asset and one ``AssetCheckResult`` per selected
    check from every owner's results: a check passes when it passed for every owner, and its
    metadata names the owners it failed for (ids, never contents). Owners that did not run
    (no input, unchanged) add nothing; an asset no owner built still reports (0 owners)."""
    default_key = context.assets_def.key if len(context.assets_def.keys) == 1 else None
    mats: dict[dg.AssetKey, list[Mapping[str, Any]]] = {}
    checks: dict[dg.AssetCheckKey, list[tuple[str, dg.AssetCheckResult]]] = {}
    others: list[Any] = []
    for oid, events in zip(owner_ids, results, strict=True):
        for event in events:
            if isinstance(event, dg.MaterializeResult):
                key = event.asset_key or default_key
                mats.setdefault(key, []).append(dict(event.metadata or {}))
                for check in event.check_results or []:
                    ck = dg.AssetCheckKey(check.asset_key or key, check.check_name)
                    checks.setdefault(ck, []).append((oid, check))
            elif isinstance(event, dg.AssetCheckResult):
                ck = dg.AssetCheckKey(event.asset_key or default_key, event.check_name)
                checks.setdefault(ck, []).append((oid, event))
            else:
                others.append(event)
    out = list(others)
    for key in [k for k in context.assets_def.keys if k in context.selected_asset_keys]:
        metadata = _merge_metadata(mats.get(key, []))
        metadata["owners"] = len(mats.get(key, []))
        metadata.update(extra or {})
        out.append(dg.MaterializeResult(asset_key=key, metadata=metadata))
    selected = context.selected_asset_check_keys
    for spec in context.assets_def.check_specs:
        if spec.key not in selected:
            continue
        done = checks.get(spec.key, [])
        failed = [(oid, r) for oid, r in done if not r.passed]
        metadata: dict[str, Any] = {"owners_checked": len(done), "owners_failed": len(failed)}
        if failed:
            metadata["failed_owner_ids"] = dg.MetadataValue.json([oid for oid, _ in failed][:50])
            metadata.update(_merge_metadata([dict(r.metadata or {}) for _, r in failed]))
        severities = [r.severity for _, r in failed] or [dg.AssetCheckSeverity.ERROR]
        severity = (
            dg.AssetCheckSeverity.ERROR
            if dg.AssetCheckSeverity.ERROR in severities
            else severities[0]
        )
        out.append(
            dg.AssetCheckResult(
                asset_key=spec.asset_key,
                check_name=spec.name,
                passed=not failed,
                severity=severity,
                metadata=metadata,
            )
        )
    return out
