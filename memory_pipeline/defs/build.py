"""Assemble the Dagster definitions for one configuration."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import dagster as dg

from memory_pipeline.config import PipelineConfig
from memory_pipeline.core.common.tables import REGISTRY
from memory_pipeline.defs.automation import automation_sensor, with_automation
from memory_pipeline.defs.catalog import build_catalog_asset
from memory_pipeline.defs.chunks import build_chunks_asset
from memory_pipeline.defs.evaluation import evaluation
from memory_pipeline.defs.forget import forget_contact_job
from memory_pipeline.defs.gx_checks import build_gx_checks
from memory_pipeline.defs.helpers import asset_key
from memory_pipeline.defs.indexes import search_indexes
from memory_pipeline.defs.ingest import RAW, build_ingest
from memory_pipeline.defs.jobs import build_jobs, default_sensor_status
from memory_pipeline.defs.memories import build_memory_assets
from memory_pipeline.defs.partitions import daily_partitions, data_partitions
from memory_pipeline.defs.providers import provider_resources
from memory_pipeline.defs.representations import (
    build_representation_assets,
)
from memory_pipeline.defs.resources import ObjectStoreResource, PipelineResource
from memory_pipeline.defs.retention import RETENTION, retention_asset
from memory_pipeline.defs.runner import stage_jobs
from memory_pipeline.defs.sensors import build_sensors
from memory_pipeline.defs.sessions import build_sessions_asset
from memory_pipeline.defs.storage import storage_report_asset
from memory_pipeline.defs.writer_lock import locking_executor

# the warehouse views read every registered table: it depends on the assets that write them
TABLE_KEYS = list(dict.fromkeys(asset_key(t) for t in REGISTRY))


def partitions_for(
    cfg: PipelineConfig, days: Sequence[dt.date] | None = None
) -> dg.PartitionsDefinition:
    """The calendar of the configuration, or (``days`` given) exactly those dates: what a
    run of ``memory-pipeline run`` executes over (``defs/partitions.py``)."""
    return daily_partitions(cfg) if days is None else data_partitions(days)


def build_assets(
    cfg: PipelineConfig, days: Sequence[dt.date] | None = None
) -> list[dg.AssetsDefinition]:
    """Every asset, partitioned by the configured calendar, or by ``days`` only."""
    parts = partitions_for(cfg, days)
    return [
        build_ingest(parts),
        build_sessions_asset(parts),
        build_chunks_asset(parts),
        *build_representation_assets(parts),
        *build_memory_assets(parts),
        search_indexes,
        storage_report_asset,
        evaluation,
        build_catalog_asset(TABLE_KEYS),
    ]


def scheduled_assets(
    cfg: PipelineConfig, days: Sequence[dt.date] | None = None
) -> list[dg.AssetsDefinition]:
    """Every asset plus the retention purge (ingest runs after it), with the automation
    conditions attached (``defs/automation.py``): what the scheduled path runs."""

    def after_retention(spec: dg.AssetSpec) -> dg.AssetSpec:
        return spec.merge_attributes(deps=[RETENTION]) if spec.key == RAW else spec

    assets = [
        a.map_asset_specs(after_retention) if RAW in a.keys else a for a in build_assets(cfg, days)
    ]
    return with_automation([retention_asset, *assets])


def build_definitions(
    cfg: PipelineConfig,
    config_file: str | None = None,
    days: Sequence[dt.date] | None = None,
) -> dg.Definitions:
    """Definitions for one configuration (tests build their own with a tmp config).

    ``days``: the assets partitioned by exactly those dates instead of the calendar, for
    ``memory-pipeline run`` (the runs store events for days with data only); the code
    location always has the calendar."""
    parts = partitions_for(cfg, days)
    jobs, schedules = build_jobs(cfg)
    daily, _, memories = jobs
    pipeline = PipelineResource(
        config_file=config_file or (str(cfg.config_path) if cfg.config_path else None),
        object_store=ObjectStoreResource.from_env(),
    )
    return dg.Definitions(
        assets=scheduled_assets(cfg, days),
        asset_checks=build_gx_checks(parts),
        # the stage jobs: what `memory-pipeline run` runs, so the UI can re-execute its runs
        jobs=[
            *jobs,
            *stage_jobs(executor_def=locking_executor(dg.in_process_executor, pipeline)),
            forget_contact_job,
        ],
        # every other job (the nightly's, the sensors', the UI's asset runs, forget): one
        # writer per output folder, as for `memory-pipeline run` (defs/writer_lock.py)
        executor=locking_executor(dg.multi_or_in_process_executor, pipeline),
        schedules=schedules,
        # on by default for a live configuration (no end date), off for a historical corpus
        sensors=[
            automation_sensor(default_sensor_status(cfg)),
            *build_sensors(daily, memories, default_sensor_status(cfg)),
        ],
        resources={
            "pipeline": pipeline,
            **provider_resources(),
        },
    )
