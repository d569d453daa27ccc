"""Jobs and the nightly schedule.

The nightly run rebuilds the last *two* days: sessions of D-1 can only be final once D's
messages are in (a session may run past midnight), so each night re-runs yesterday's
partition with today's data. All assets use a single-run backfill policy, so a range is
one run, not one run per day.
"""

import datetime as dt

import dagster as dg

from memory_pipeline.config import PipelineConfig

INGEST_JOB = "memory_pipeline_daily"
CATALOG_JOB = "refresh_warehouse"
RANGE_START = "dagster/asset_partition_range_start"
RANGE_END = "dagster/asset_partition_range_end"


def build_jobs(cfg: PipelineConfig) -> tuple[list, list[dg.ScheduleDefinition]]:
    """The partitioned pipeline job, the catalog job and the nightly schedule."""
    daily = dg.define_asset_job(
        INGEST_JOB,
        selection=dg.AssetSelection.groups("ingest", "segmentation", "representations", "memories"),
        description="raw_messages -> sessions -> chunks -> representations -> memories -> "
        "dossiers for a date range.",
    )
    catalog = dg.define_asset_job(
        CATALOG_JOB,
        selection=dg.AssetSelection.groups("indexes", "reports", "evaluation", "catalog"),
        description="Rebuild the search indexes over all partitions, the storage report and "
        "the evaluation (report.html), and refresh the DuckDB views.",
    )

    @dg.schedule(job=daily, cron_schedule="0 3 * * *", execution_timezone=cfg.timezone)
    def nightly(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
        yesterday = context.scheduled_execution_time.date() - dt.timedelta(days=1)
        start = max(yesterday - dt.timedelta(days=1), cfg.start_date)
        return dg.RunRequest(
            run_key=f"nightly-{yesterday.isoformat()}",
            tags={RANGE_START: start.isoformat(), RANGE_END: yesterday.isoformat()},
        )

    return [daily, catalog], [nightly]
