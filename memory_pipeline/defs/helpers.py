"""What several asset modules share: table identity from the registry, check results.

Asset keys, descriptions and column metadata of the table assets are read from the table
registry (:mod:`memory_pipeline.core.common.tables`) here, so an asset and the table it
writes cannot drift apart. The check logic lives in :mod:`memory_pipeline.core.quality`; an
asset only names the check and hands its ``(passed, metadata)`` result here, so every check
reports metadata the same way and no module imports another's private helpers.

The per-owner fan-out (``per_partition``, ``per_owner``) lives in :mod:`.owner_fanout`, the
plain-data form of events that crosses to Dask workers in :mod:`.event_shipping`, and every
name taken from Dagster's private modules in :mod:`.dagster_internals`.
"""

import datetime as dt
import hashlib
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa

from memory_pipeline.core.common.storage import TableStore
from memory_pipeline.core.common.tables import Table
from memory_pipeline.core.quality.checks import Result

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
) -> dict[str, Any]:
    """partition -> the materialization of ``asset`` this run recorded (the check's target,
    an ``AssetCheckEvaluationTargetMaterializationData``: see :mod:`.dagster_internals`).

    Read from the asset index (its storage ids are the ones the UI compares with the latest
    materialization; a run's own event records may be numbered apart, as with SQLite)."""
    from memory_pipeline.defs.dagster_internals import (
        AssetCheckEvaluationTargetMaterializationData,
    )

    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=asset, asset_partitions=list(partitions)),
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
            yield dg.AssetCheckEvaluation(
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
