"""Partitions by local date: the code location's calendar, and a run's days with data.

The code location (daemon, UI, schedule, sensors) partitions every asset by calendar day
(``daily_partitions``), from ``start_date`` (the configured one, or the open floor
``OPEN_START`` when the configuration leaves it out) to ``end_date`` or for ever. The UI's
date-range backfills, the nightly and the sensors work on that calendar.

A run made by ``memory-pipeline run`` builds only the days that hold records: on a
calendar range, Dagster stores a planned event, a materialization per asset and the check
evaluations for *every* day of the range, so ten messages over ten years cost hours of event
log writes for days on which nothing was said. The runner therefore executes the same assets
over ``data_partitions(days)``: a static partitions definition whose keys are exactly those
dates (the same ``YYYY-MM-DD`` keys as the calendar's, so the stored materializations and
checks are the calendar partitions', and the UI shows them there). One run per stage covers
them all (a range over static keys is exactly those keys). The neighbour-day dependencies
(sessions read D-1 and D+1) are time-window mappings, which a static definition cannot
express: there ``window_dep`` declares the plain dependency instead. The asset bodies read
their neighbours from storage, not through Dagster inputs, so what they compute is the same.
"""

import datetime as dt
import warnings
from collections.abc import Sequence

import dagster as dg

from memory_pipeline.config import PipelineConfig


def daily_partitions(
    cfg: PipelineConfig, *, in_progress: bool = False
) -> dg.DailyPartitionsDefinition:
    """One partition per local date; ``end_date`` (inclusive) bounds a historical corpus.

    Without ``end_date`` the calendar ends yesterday (a day is a partition once it is over),
    so the nightly, the sensors and the UI never see a half day. ``in_progress`` adds today
    (Dagster's ``end_offset=1``; never past ``end_date``): the service's refresh builds it so
    a message posted today is searchable at once; the nightly rebuilds the day once it is
    over."""
    end = None if cfg.end_date is None else (cfg.end_date + dt.timedelta(days=1)).isoformat()
    return dg.DailyPartitionsDefinition(
        start_date=cfg.start_date.isoformat(),
        end_date=end,
        timezone=cfg.timezone,
        end_offset=1 if in_progress else 0,  # end_date still bounds it
    )


def data_partitions(days: Sequence[dt.date]) -> dg.StaticPartitionsDefinition:
    """The run's partitions: exactly ``days`` (the dates with data), in date order."""
    if not days:
        raise ValueError("data_partitions needs at least one day")
    return dg.StaticPartitionsDefinition([d.isoformat() for d in sorted(set(days))])


def keys_to_dates(keys: Sequence[str]) -> list[dt.date]:
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


def window_dep(
    key: dg.AssetKey,
    partitions_def: dg.PartitionsDefinition,
    start_offset: int,
    end_offset: int,
) -> dg.AssetDep | None:
    """A dependency on neighbouring days of ``key``: the time-window mapping on the calendar;
    on a run's data days (static keys, no notion of "the day before") the same-day dependency,
    or none for a dependency of an asset on its own earlier days (the dossier fold, which
    reads its previous versions from storage)."""
    if isinstance(partitions_def, dg.TimeWindowPartitionsDefinition):
        return dg.AssetDep(key, partition_mapping=raw_window(start_offset, end_offset))
    if start_offset < 0 and end_offset < 0:
        return None
    return dg.AssetDep(key)
