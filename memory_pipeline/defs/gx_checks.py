"""Non-blocking Great Expectations checks, one per table, evaluated per partition.

They read the Parquet partitions through ``pipeline.store`` (no IO manager, no asset value
loaded) and run the GX suites of ``memory_pipeline.core.quality.gx_suites``. A run over a partition
range validates the whole range at once (rows are still checked against their own date);
only when that fails is each partition re-validated, to name the failing ones.
great_expectations (and pandas) are imported inside the check, not when Dagster loads the
definitions: the import takes seconds.
"""

import time
import warnings

import dagster as dg

from memory_pipeline.core.common import tables as T
from memory_pipeline.defs.chunks import CHUNKS
from memory_pipeline.defs.helpers import check_evaluations
from memory_pipeline.defs.ingest import AUDIT, QUARANTINE, RAW
from memory_pipeline.defs.partitions import keys_to_dates
from memory_pipeline.defs.resources import PipelineResource
from memory_pipeline.defs.sessions import SESSIONS

# table name -> (its asset, what its suite checks); the names are the registry's
GX_TABLES: dict[str, tuple[dg.AssetKey, str]] = {
    T.RAW_MESSAGES.name: (
        RAW,
        "GX: message_id unique; key columns non-null; local_date is the partition and the "
        "date of local_ts; type is a known message type.",
    ),
    T.QUARANTINE.name: (
        QUARANTINE,
        "GX: quarantine_id unique; source, source_file, record_ref, reason non-null; reason "
        "is a known code; partition_date is the partition.",
    ),
    T.INGEST_AUDIT.name: (
        AUDIT,
        "GX: records_read = ingested + quarantined on every row; per date and source, "
        "ingested / quarantined equal the rows stored in raw_messages / quarantine.",
    ),
    T.SESSIONS.name: (
        SESSIONS,
        "GX: session_id unique; local_date is the partition; message_count >= 1; "
        "max_gap_seconds <= gap; end_ts >= start_ts; the gap to the neighbouring sessions of "
        "the conversation exceeds the configured gap.",
    ),
    T.CHUNKS.name: (
        CHUNKS,
        "GX: chunk_id unique; 1..chunk_size messages; consecutive chunks of a session "
        "overlap by chunk_size - chunk_stride; every message of the partition's sessions is "
        "in a chunk.",
    ),
}
MAX_FAILED_PARTITIONS = 50  # metadata stays small on a year-long backfill


def _empty_partitions(scopes: list, table: str, days: list) -> set[str]:
    """The run's days no owner has a row of ``table`` on: a passed suite stores no
    evaluation for them (``check_evaluations``), as the asset's own checks do not."""
    schema = T.table(table).schema
    columns = schema.names[:1] if schema is not None else None
    busy: set = set()
    for scope in scopes:
        for day in scope.days if scope.days is not None else days:
            if day not in busy and scope.store.read(table, [day], columns=columns).num_rows:
                busy.add(day)
    return {d.isoformat() for d in days if d not in busy}


def gx_check_name(table: str) -> str:
    """The check name of a table's GX suite (``gx_<table>_suite``)."""
    return f"gx_{table}_suite"


def build_gx_checks(partitions_def: dg.PartitionsDefinition) -> list[dg.AssetChecksDefinition]:
    """One non-blocking GX check per table, partitioned like the assets."""
    return [
        _build_gx_check(table, asset_key, description, partitions_def)
        for table, (asset_key, description) in GX_TABLES.items()
    ]


class _Merged:
    """Several owners' GX outcomes as one: success when every owner's succeeded; rows per
    frame summed over the owners."""

    def __init__(self, outcomes: list) -> None:
        self.success = all(o.success for o in outcomes)
        self.failed = [f for o in outcomes for f in o.failed]
        self.rows: dict[str, int] = {}
        for o in outcomes:
            for name, n in o.rows.items():
                self.rows[name] = self.rows.get(name, 0) + n


def _merged(outcomes: list) -> tuple:
    """(outcome, failed partitions, statistics) over several owners' validations."""
    results = [o for o, _ in outcomes]
    failed = sorted({p for _, parts in outcomes for p in parts})
    keys = ("evaluated_expectations", "successful_expectations", "unsuccessful_expectations")
    stats = {k: sum(o.statistics[k] for o in results) for k in keys}
    total = stats["evaluated_expectations"]
    stats["success_percent"] = 100.0 * stats["successful_expectations"] / total if total else 100.0
    return _Merged(results), failed, stats


def _build_gx_check(
    table: str,
    asset_key: dg.AssetKey,
    description: str,
    partitions_def: dg.PartitionsDefinition,
) -> dg.AssetChecksDefinition:
    def gx_suite(context: dg.AssetCheckExecutionContext, pipeline: PipelineResource):
        """Validate the run's partitions as stored (a range at once, per day on failure);
        reported as one evaluation per partition (only the failing ones fail)."""
        from memory_pipeline.core.quality.gx_suites import validate_range

        cfg = pipeline.cfg
        days = keys_to_dates(list(context.partition_keys))
        t0 = time.perf_counter()
        # every owner with data on the run's days, each over their own store and days
        scopes = pipeline.owner_scopes(days) if cfg.multi_owner else pipeline.owner_scopes()
        outcomes = [
            validate_range(
                scope.store,
                table,
                scope.days if scope.days is not None else days,
                gap_minutes=cfg.session_gap_minutes,
                chunk_size=cfg.chunk_size,
                chunk_stride=cfg.chunk_stride,
            )
            for scope in scopes
        ]
        if len(outcomes) == 1:
            outcome, failed_partitions = outcomes[0]
            stats = outcome.statistics
        else:
            outcome, failed_partitions, stats = _merged(outcomes)
        seconds = round(time.perf_counter() - t0, 3)
        context.log.info(
            f"{gx_check_name(table)}: {stats['successful_expectations']}/"
            f"{stats['evaluated_expectations']} expectations passed over {len(days)} "
            f"partition(s) in {seconds}s"
        )
        metadata: dict = {
            "evaluated_expectations": stats["evaluated_expectations"],
            "successful_expectations": stats["successful_expectations"],
            "unsuccessful_expectations": stats["unsuccessful_expectations"],
            "success_percent": stats["success_percent"],
            "failed": dg.MetadataValue.json(outcome.failed),
            "rows": dg.MetadataValue.json(outcome.rows),
            "partitions": len(days),
            "seconds": seconds,
        }
        if failed_partitions:
            metadata["failed_partitions"] = dg.MetadataValue.json(
                failed_partitions[:MAX_FAILED_PARTITIONS]
            )
            metadata["failed_partition_count"] = len(failed_partitions)
        result = dg.AssetCheckResult(
            passed=outcome.success,
            asset_key=asset_key,
            check_name=gx_check_name(table),
            metadata=metadata,
            description=None
            if outcome.success
            else f"{len(outcome.failed)} GX expectation(s) failed",
        )
        key = dg.AssetCheckKey(asset_key, gx_check_name(table))
        empty = {asset_key: _empty_partitions(scopes, table, days)}
        yield from check_evaluations(context, [result], {key: "result"}, {key: False}, empty)

    # partitions_def on an asset check is "preview" in the pinned dagster 1.13.27 (warned when
    # the check is built); without it the check on a partitioned asset is unpartitioned.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return dg.asset_check(
            asset=asset_key,
            name=gx_check_name(table),
            partitions_def=partitions_def,
            blocking=False,
            description=description,
        )(gx_suite)
