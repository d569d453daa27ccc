"""Daily partitions by local date, starting at the configured start_date."""

import datetime as dt
import warnings

import dagster as dg

from memory_pipeline.config import PipelineConfig


def daily_partitions(cfg: PipelineConfig) -> dg.DailyPartitionsDefinition:
    """One partition per local date; ``end_date`` (inclusive) bounds a historical corpus."""
    end = None if cfg.end_date is None else (cfg.end_date + dt.timedelta(days=1)).isoformat()
    return dg.DailyPartitionsDefinition(
        start_date=cfg.start_date.isoformat(), end_date=end, timezone=cfg.timezone
    )


def keys_to_dates(keys: list[str]) -> list[dt.date]:
    """Partition keys (YYYY-MM-DD) of a run -> dates."""
    return [dt.date.fromisoformat(k) for k in keys]


def raw_window(start_offset: int, end_offset: int) -> dg.TimeWindowPartitionMapping:
    """A window over neighbouring days; the first/last partition simply has fewer neighbours."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.BetaWarning)
        return dg.TimeWindowPartitionMapping(
            start_offset=start_offset,
            end_offset=end_offset,
            allow_nonexistent_upstream_partitions=True,
        )
