"""Sensors: new or changed exports start runs for exactly their dates; a retention purge
starts the rebuild of the memories and dossiers it deleted.

``source_files`` keeps a cursor over every source file (path, size, mtime, sha256) and a
digest of each date's records (``core/ingest/watch.py``). A changed date D is requested
together with D-1 and D+1 (sessions of D-1 may run into D, and D+1's first session may
continue D's last: ``watch.run_ranges``), as one single-run range of the daily job per
group of overlapping windows, keyed by the changed dates' content digests: the same content
asks for the same run key, so a re-evaluated tick (or an export touched without change)
never runs twice. On a first look (no cursor: a new instance, a reset) a date whose
``raw_messages`` partition was materialized after the newest change of any source file is
skipped (``watch.not_yet_ingested``): a full ``memory-pipeline run`` is not re-run date by
date. Dates that are no partition yet (today before midnight) wait in
the cursor; dates before ``start_date`` count as ``start_date`` (as ingest assigns them) and
dates after ``end_date`` are no partition and are never requested. A configured source path
that vanished fails the tick with one line naming it, and the cursor stays as it was, so
nothing is re-requested when it returns.

Many owners: the sensor watches every owner's sources (``watched_sources``) and requests
dates, not owners (owners are data: the run picks the owners with records on its days);
the retention rebuild covers the days any owner still has (``stored_days``).

The runs it starts update partitions; the automation conditions (``defs/automation.py``)
then rebuild the indexes and the warehouse, so the new messages become searchable.
"""

from __future__ import annotations

import datetime as dt

import dagster as dg

from memory_pipeline.config import ConfigError, PipelineConfig, SourceSpec
from memory_pipeline.core.common import tables as T
from memory_pipeline.core.ingest.watch import (
    SourceMissingError,
    defer,
    load_state,
    newest_change_ns,
    not_yet_ingested,
    range_digest,
    run_ranges,
    save_state,
    scan,
)
from memory_pipeline.defs.ingest import RAW
from memory_pipeline.defs.jobs import range_tags
from memory_pipeline.defs.partitions import daily_partitions
from memory_pipeline.defs.resources import PipelineResource
from memory_pipeline.defs.retention import META_CUTOFF, META_PURGED, RETENTION

SOURCE_SENSOR = "source_files"
RETENTION_SENSOR = "rebuild_after_retention"
SOURCE_INTERVAL = 60


def build_sensors(
    daily: dg.UnresolvedAssetJobDefinition,
    memories,
    status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.RUNNING,
) -> list[dg.SensorDefinition]:
    """The source sensor (targets ``daily``) and the retention rebuild (targets ``memories``),
    created with ``status`` (``defs/jobs.py``: running for a live configuration)."""

    @dg.sensor(
        name=SOURCE_SENSOR,
        job=daily,
        minimum_interval_seconds=SOURCE_INTERVAL,
        default_status=status,
        description="One run per date whose records changed in the source folders.",
    )
    def source_files(context: dg.SensorEvaluationContext, pipeline: PipelineResource):
        try:
            # the configuration itself refuses a missing source path when it is (re)loaded
            cfg = pipeline.cfg
            state_dir = cfg.output_dir / "cache" / "source_files_sensor"
            previous = load_state(context.cursor, state_dir)
            sources = watched_sources(cfg)
            changes = scan(sources, cfg.start_date, previous)
        except (SourceMissingError, ConfigError) as exc:
            # a failed tick with one clear line; the cursor is untouched
            raise dg.Failure(description=" ".join(str(exc).split())) from None
        parts = daily_partitions(cfg)
        dates = changes.dates
        if not previous.files and not previous.dates:
            # first look (new instance, reset cursor): skip what an ingest already read
            ingested = _ingested_at(context.instance, list(dates))
            dates = not_yet_ingested(dates, ingested, newest_change_ns(sources))

        def is_partition(day: dt.date) -> bool:
            return parts.has_partition_key(day.isoformat())

        later = [
            day  # not a partition yet: today, before midnight
            for day in dates
            if not is_partition(day) and (cfg.end_date is None or day <= cfg.end_date)
        ]
        requests = [
            dg.RunRequest(
                run_key=f"source-{first}-{last}-{range_digest(dates, days)}",
                tags={**range_tags(first, last), "memory_pipeline/trigger": SOURCE_SENSOR},
            )
            for first, last, days in run_ranges(dates, is_partition)
        ]
        state = defer(changes.state, later)
        context.update_cursor(save_state(state, state_dir))
        context.log.info(
            f"{SOURCE_SENSOR}: {len(changes.changed_sources)} changed sources, "
            f"{len(dates) - len(later)} changed dates in {len(requests)} runs (with their "
            f"neighbours), {len(later)} waiting for their partition, "
            f"{len(changes.dates) - len(dates)} already ingested"
        )
        if not requests:
            return dg.SkipReason(
                f"no changed dates ({len(later)} waiting)" if later else "no changed dates"
            )
        return requests

    @dg.sensor(
        name=RETENTION_SENSOR,
        job=memories,
        minimum_interval_seconds=SOURCE_INTERVAL,
        default_status=status,
        description="After a retention purge (finished run), rebuild memories and dossiers "
        "over the retained dates: the purge deletes every dossier partition.",
    )
    def rebuild_after_retention(context: dg.SensorEvaluationContext, pipeline: PipelineResource):
        records = context.instance.fetch_materializations(RETENTION, limit=1).records
        if not records or str(records[0].storage_id) == context.cursor:
            return dg.SkipReason("no new retention purge")
        event = records[0]
        run = context.instance.get_run_by_id(event.run_id)
        if run is not None and not run.is_finished:
            return dg.SkipReason("the purging run is still running")
        context.update_cursor(str(event.storage_id))
        materialization = event.asset_materialization
        meta = materialization.metadata if materialization else {}
        purged = meta.get(META_PURGED)
        if purged is None or not purged.value:
            return dg.SkipReason("the last retention run purged nothing")
        days = stored_days(pipeline)
        first = dt.date.fromisoformat(str(meta[META_CUTOFF].value))
        kept = [d for d in days if d >= first]
        if not kept:
            return dg.SkipReason("nothing retained to rebuild")
        return dg.RunRequest(
            run_key=f"retention-rebuild-{event.storage_id}",
            tags={**range_tags(kept[0], kept[-1]), "memory_pipeline/trigger": RETENTION_SENSOR},
        )

    return [source_files, rebuild_after_retention]


def watched_sources(cfg: PipelineConfig) -> list[SourceSpec]:
    """Every source whose files can start a run: the configuration's sources (fan-out
    corpora, listed owners' and nested ``[[owners.sources]]`` ones) and, defensively, any
    owner's source not among them.
    Dates are the deployment's partitions, owners are data: a changed file of any owner
    requests its dates, and the run then works on the owners with records those days."""
    out = {s.name: s for s in cfg.sources}
    for spec in cfg.owners:
        for source in spec.sources:
            out.setdefault(source.name, source)
    return list(out.values())


def stored_days(pipeline: PipelineResource) -> list[dt.date]:
    """The days with ingested messages, over every owner (one owner: its store)."""
    days: set[dt.date] = set()
    for scope in pipeline.owner_scopes():
        days.update(scope.store.dates(T.RAW_MESSAGES))
    return sorted(days)


def _ingested_at(instance: dg.DagsterInstance, days: list[dt.date]) -> dict[dt.date, float]:
    """date -> timestamp of the latest ``raw_messages`` materialization of its partition."""
    out: dict[dt.date, float] = {}
    keys = [d.isoformat() for d in days]
    cursor = None
    while keys:
        page = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=RAW, asset_partitions=keys), limit=1000, cursor=cursor
        )
        for record in page.records:  # newest first: the first one seen per partition
            mat = record.asset_materialization
            if mat is not None and mat.partition:
                out.setdefault(dt.date.fromisoformat(mat.partition), record.timestamp)
        if not page.has_more or len(out) == len(keys):
            break
        cursor = page.cursor
    return out
