"""Jobs and the nightly schedule.

The schedule is on by default for a live configuration (no ``end_date``) and off for a
historical corpus (:func:`is_live`); the sensors follow the same rule (``defs/sensors.py``,
``defs/automation.py``).

The nightly run rebuilds the last *two* days: sessions of D-1 can only be final once D's
messages are in (a session may run past midnight), so each night re-runs yesterday's
partition with today's data. All assets use a single-run backfill policy, so a range is
one run, not one run per day.

The nightly job starts with the ``retention`` purge (ingest depends on it, so it runs
first). It does not rebuild the indexes, the warehouse or the evaluation: those follow their
upstream by declaration (``defs/automation.py``) once the run has finished.
"""

import datetime as dt

import dagster as dg

from memory_pipeline.config import PipelineConfig
from memory_pipeline.core.privacy.retention import retention_cutoff
from memory_pipeline.defs.retention import RETENTION

INGEST_JOB = "memory_pipeline_daily"
CATALOG_JOB = "refresh_warehouse"
MEMORIES_JOB = "rebuild_memories"
RANGE_START = "dagster/asset_partition_range_start"
RANGE_END = "dagster/asset_partition_range_end"
# tags of the runs `memory-pipeline run` makes (defs/runner.py): its stage, the call it belongs
# to, and the call's last stage (the automation waits for a call that has stages to go)
STAGE_TAG = "memory_pipeline/stage"
INVOCATION_TAG = "memory_pipeline/invocation"
FINAL_STAGE_TAG = "memory_pipeline/final_stage"


def is_live(cfg: PipelineConfig) -> bool:
    """A live configuration has no end date: its history keeps growing, so the nightly
    schedule and the sensors that keep search fresh are on from the first ``dg dev``. A
    historical corpus (an ``end_date``, like the shipped sample) has nothing new to wait
    for: they stay off until someone turns them on in the UI."""
    return cfg.end_date is None


def default_schedule_status(cfg: PipelineConfig) -> dg.DefaultScheduleStatus:
    """RUNNING for a live configuration, STOPPED for one with an end date (:func:`is_live`)."""
    return dg.DefaultScheduleStatus.RUNNING if is_live(cfg) else dg.DefaultScheduleStatus.STOPPED


def default_sensor_status(cfg: PipelineConfig) -> dg.DefaultSensorStatus:
    """RUNNING for a live configuration, STOPPED for one with an end date (:func:`is_live`)."""
    return dg.DefaultSensorStatus.RUNNING if is_live(cfg) else dg.DefaultSensorStatus.STOPPED


def range_tags(start: dt.date, end: dt.date) -> dict[str, str]:
    """Tags that make one run cover the partitions ``start`` .. ``end`` (single-run backfill)."""
    return {RANGE_START: start.isoformat(), RANGE_END: end.isoformat()}


def build_jobs(cfg: PipelineConfig) -> tuple[list, list[dg.ScheduleDefinition]]:
    """The partitioned pipeline job, the catalog job, the memories job and the schedule."""
    daily = dg.define_asset_job(
        INGEST_JOB,
        selection=dg.AssetSelection.assets(RETENTION)
        | dg.AssetSelection.groups("ingest", "segmentation", "representations", "memories"),
        description="retention -> raw_messages -> sessions -> chunks -> representations -> "
        "memories -> dossiers for a date range.",
    )
    catalog = dg.define_asset_job(
        CATALOG_JOB,
        selection=dg.AssetSelection.groups("indexes", "reports", "evaluation", "catalog"),
        description="Rebuild the search indexes over all partitions, the storage report and "
        "the evaluation (report.html), and refresh the DuckDB views.",
    )
    memories = dg.define_asset_job(
        MEMORIES_JOB,
        selection=dg.AssetSelection.groups("memories"),
        description="Memories and dossiers for a date range (after a retention purge).",
    )

    @dg.schedule(
        job=daily,
        cron_schedule="0 3 * * *",
        execution_timezone=cfg.timezone,
        default_status=default_schedule_status(cfg),
    )
    def nightly(context: dg.ScheduleEvaluationContext) -> dg.RunRequest | dg.SkipReason:
        yesterday = context.scheduled_execution_time.date() - dt.timedelta(days=1)
        start = max(yesterday - dt.timedelta(days=1), cfg.start_date)
        if cfg.end_date is not None and start > cfg.end_date:
            # a bounded config (the shipped sample ends 2024-03-14): those days are no
            # partitions, and a run over them would only fail
            return dg.SkipReason(f"{yesterday} is after the last partition {cfg.end_date}")
        if cfg.end_date is not None:
            yesterday = min(yesterday, cfg.end_date)
        cutoff = retention_cutoff(cfg.retain_days)
        if cutoff is not None:
            # an expired date is purged by this run: building it again would only write
            # empty partitions of a date that must not exist
            start = max(start, cutoff)
        if start > yesterday:
            return dg.SkipReason(f"{yesterday} is before the retention cutoff {cutoff}")
        return dg.RunRequest(
            run_key=f"nightly-{yesterday.isoformat()}", tags=range_tags(start, yesterday)
        )

    return [daily, catalog, memories], [nightly]
