"""The per-owner fan-out: an asset body run once per owner, here or on the Dask cluster,
and the owners' results merged into one event per asset and check.

``per_partition`` (partitioned table assets) and ``per_owner`` (unpartitioned assets such as
the indexes) wrap an asset body written for one owner. With one owner the body runs as it
is; with several, each owner becomes an :class:`OwnerTask` of plain data, runs through
:func:`run_owner_task` (serially, or one Dask task per owner), and comes back as an
:class:`OwnerResult` whose events :func:`merge_owner_events` merges.
"""

import dataclasses
import datetime as dt
import functools
import inspect
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import dagster as dg
import pyarrow as pa

from memory_pipeline.core.common import fs
from memory_pipeline.core.common.owners import (
    input_fingerprint,
    map_owners,
    save_fingerprint,
    stored_fingerprint,
)
from memory_pipeline.core.common.storage import TableStore
from memory_pipeline.core.common.tables import Table
from memory_pipeline.defs.compute import RESOURCE_KEY as DASK_KEY
from memory_pipeline.defs.compute import DaskResource
from memory_pipeline.defs.event_shipping import _check_results, _events, _from_plain, _to_plain
from memory_pipeline.defs.helpers import OWNER_WORKERS, PerDay, _is_partitioned, partition_events


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
