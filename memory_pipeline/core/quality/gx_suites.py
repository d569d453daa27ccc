"""Great Expectations suites for the pipeline's tables: a second, declarative opinion.

The blocking Dagster checks (``core.quality``) guard each write; these suites restate the
table-level contract as GX expectations so they run as non-blocking checks and show up as
a familiar validation report. Cross-row rules (conservation, gaps between sessions, chunk
overlap, coverage) become *derived columns* computed here in pandas/Arrow, so each GX
expectation stays a plain column rule.

Pure: no Dagster import. great_expectations takes ~3.5 s to import, so it is imported
lazily, only by the functions that build suites or validate, and its ephemeral context is
built once per process. Only id, key and count columns are handed to GX (never message
text), and a failure is reported as expectation/column/counts, never as unexpected values.

This module pairs each table with its frames and suite (``table_frames``) and validates them
(in memory or as stored); the derived frames live in ``gx_frames`` and the expectations in
``gx_expectations``. The names other code uses are re-exported here.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from memory_pipeline.core.common import tables as T
from memory_pipeline.core.common.storage import TableStore
from memory_pipeline.core.quality.gx_expectations import (
    build_suite,
    chunk_coverage_expectations,
    chunks_expectations,
    ingest_audit_counts_expectations,
    ingest_audit_expectations,
    quarantine_expectations,
    raw_messages_expectations,
    sessions_expectations,
)
from memory_pipeline.core.quality.gx_frames import (
    DAY,
    MESSAGE_KEY_COLUMNS,
    QUARANTINE_KEY_COLUMNS,
    US_PER_SECOND,
    as_arrow,
    as_days,
    audit_counts_frame,
    audit_frame,
    chunk_coverage_frame,
    chunk_frame,
    messages_frame,
    quarantine_frame,
    session_frame,
)

if TYPE_CHECKING:
    from great_expectations.core.batch_definition import BatchDefinition
    from great_expectations.data_context import AbstractDataContext
    from great_expectations.expectations import Expectation

__all__ = [
    "DATASOURCE",
    "DAY",
    "MESSAGE_KEY_COLUMNS",
    "QUARANTINE_KEY_COLUMNS",
    "RESULT_COUNT_KEYS",
    "RESULT_FORMAT",
    "TABLE_NAMES",
    "US_PER_SECOND",
    "Frame",
    "GxOutcome",
    "as_arrow",
    "as_days",
    "audit_counts_frame",
    "audit_frame",
    "build_suite",
    "chunk_coverage_expectations",
    "chunk_coverage_frame",
    "chunk_frame",
    "chunks_expectations",
    "failure_entry",
    "gx_context",
    "ingest_audit_counts_expectations",
    "ingest_audit_expectations",
    "messages_frame",
    "quarantine_expectations",
    "quarantine_frame",
    "raw_messages_expectations",
    "session_frame",
    "session_window",
    "sessions_expectations",
    "table_frames",
    "validate_frames",
    "validate_range",
    "validate_stored",
    "validate_table",
]

# The tables with a GX suite, in registry order.
TABLE_NAMES = tuple(
    t.name for t in (T.RAW_MESSAGES, T.QUARANTINE, T.INGEST_AUDIT, T.SESSIONS, T.CHUNKS)
)

# GX keeps at most this many unexpected values in a result: none, we never report them.
RESULT_FORMAT = {"result_format": "BASIC", "partial_unexpected_count": 0}
RESULT_COUNT_KEYS = ("element_count", "unexpected_count", "missing_count")


@dataclass
class GxOutcome:
    """One table's validation: pass/fail, GX statistics and a log-safe list of failures.

    ``failed`` holds only expectation type, frame, column names, the rule family and counts:
    safe to put in logs and Dagster metadata (no message text, no unexpected values).
    """

    table: str
    success: bool
    statistics: dict[str, float]
    failed: list[dict[str, Any]] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0


@dataclass
class Frame:
    """One GX batch: a derived pandas frame and the expectations it must meet."""

    name: str
    data: pd.DataFrame
    expectations: list[Expectation]


def table_frames(
    table_name: str,
    data: pa.Table | pd.DataFrame,
    *,
    partition_date: dt.date | Iterable[dt.date],
    messages: pa.Table | pd.DataFrame | None = None,
    quarantine: pa.Table | pd.DataFrame | None = None,
    sessions: pa.Table | pd.DataFrame | None = None,
    gap_minutes: int | None = None,
    chunk_size: int | None = None,
    chunk_stride: int | None = None,
) -> list[Frame]:
    """The derived frames of one table and the expectations each must meet."""
    days = as_days(partition_date)
    table = as_arrow(data)

    def need(value: Any, what: str) -> Any:
        if value is None:
            raise ValueError(f"validating {table_name} needs {what}")
        return value

    if table_name == T.RAW_MESSAGES.name:
        return [Frame(table_name, messages_frame(table), raw_messages_expectations(days))]
    if table_name == T.QUARANTINE.name:
        return [Frame(table_name, quarantine_frame(table), quarantine_expectations(days))]
    if table_name == T.INGEST_AUDIT.name:
        msgs = as_arrow(need(messages, "messages= (raw_messages of the partitions)"))
        quar = as_arrow(need(quarantine, "quarantine= (quarantine of the partitions)"))
        return [
            Frame(table_name, audit_frame(table), ingest_audit_expectations(days)),
            Frame(
                "ingest_audit_counts",
                audit_counts_frame(table, msgs, quar),
                ingest_audit_counts_expectations(),
            ),
        ]
    if table_name == T.SESSIONS.name:
        msgs = as_arrow(need(messages, "messages= (raw_messages around the partitions)"))
        gap = need(gap_minutes, "gap_minutes=")
        return [Frame(table_name, session_frame(table, msgs), sessions_expectations(days, gap))]
    if table_name == T.CHUNKS.name:
        ses = as_arrow(need(sessions, "sessions= (sessions of the partitions)"))
        size = need(chunk_size, "chunk_size=")
        stride = need(chunk_stride, "chunk_stride=")
        return [
            Frame(table_name, chunk_frame(table, ses), chunks_expectations(days, size, stride)),
            Frame(
                "chunk_coverage", chunk_coverage_frame(table, ses), chunk_coverage_expectations()
            ),
        ]
    raise ValueError(f"no GX suite for table {table_name!r}; known: {', '.join(TABLE_NAMES)}")


# --------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------

_LOCK = threading.RLock()
_CONTEXT: dict[str, Any] = {}
DATASOURCE = "memory_pipeline"


def gx_context() -> AbstractDataContext:
    """The process-wide ephemeral GX context (building it, and importing GX, is slow)."""
    with _LOCK:
        if "context" not in _CONTEXT:
            import great_expectations as gx
            from great_expectations.data_context.types.base import ProgressBarsConfig

            context = gx.get_context(mode="ephemeral")
            # tqdm bars would land in Dagster's captured stderr on every validation
            context.variables.progress_bars = ProgressBarsConfig(
                globally=False, metric_calculations=False
            )
            _CONTEXT["context"] = context
            _CONTEXT["datasource"] = context.data_sources.add_pandas(DATASOURCE)
            _CONTEXT["batches"] = {}
        return _CONTEXT["context"]


def _batch_definition(frame_name: str) -> BatchDefinition:
    """The whole-dataframe batch definition of one frame name (created once)."""
    with _LOCK:
        gx_context()
        batches: dict[str, BatchDefinition] = _CONTEXT["batches"]
        if frame_name not in batches:
            asset = _CONTEXT["datasource"].add_dataframe_asset(frame_name)
            batches[frame_name] = asset.add_batch_definition_whole_dataframe("whole")
        return batches[frame_name]


def _count(value: Any) -> int | float | bool | None:
    """A number from a GX result, as a plain Python value (numpy scalars are not JSON)."""
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        return float(value)
    return None


def _raised(exception_info: Any) -> bool:
    if not isinstance(exception_info, dict):
        return False
    if exception_info.get("raised_exception"):
        return True
    return any(isinstance(v, dict) and v.get("raised_exception") for v in exception_info.values())


def failure_entry(frame: str, result: Any) -> dict[str, Any]:
    """Log-safe description of one failed expectation: names and counts only."""
    config = result.expectation_config
    kwargs = config.kwargs
    columns = [kwargs.get("column"), kwargs.get("column_A"), kwargs.get("column_B")]
    columns += list(kwargs.get("column_list") or [])
    entry: dict[str, Any] = {
        "expectation": config.type,
        "frame": frame,
        "column": ",".join(c for c in columns if c),
    }
    if config.meta and "rule" in config.meta:
        entry["rule"] = config.meta["rule"]
    found = result.result or {}
    for key in RESULT_COUNT_KEYS:
        if (n := _count(found.get(key))) is not None:
            entry[key] = n
    if (observed := _count(found.get("observed_value"))) is not None:
        entry["observed"] = observed
    if _raised(result.exception_info):
        entry["raised_exception"] = True  # the message may quote data: not reported
    return entry


def validate_frames(table_name: str, frames: Sequence[Frame]) -> GxOutcome:
    """Run each frame's suite through GX and merge the results into one outcome."""
    t0 = time.perf_counter()
    evaluated = successful = 0
    failed: list[dict[str, Any]] = []
    with _LOCK:
        for frame in frames:
            batch = _batch_definition(frame.name).get_batch(
                batch_parameters={"dataframe": frame.data}
            )
            suite = build_suite(f"{table_name}.{frame.name}", frame.expectations)
            report = batch.validate(suite, result_format=RESULT_FORMAT)
            for result in report.results:
                evaluated += 1
                if result.success:
                    successful += 1
                else:
                    failed.append(failure_entry(frame.name, result))
    stats = {
        "evaluated_expectations": evaluated,
        "successful_expectations": successful,
        "unsuccessful_expectations": evaluated - successful,
        "success_percent": round(100.0 * successful / evaluated, 2) if evaluated else 100.0,
    }
    return GxOutcome(
        table=table_name,
        success=not failed,
        statistics=stats,
        failed=failed,
        rows={f.name: len(f.data) for f in frames},
        seconds=round(time.perf_counter() - t0, 3),
    )


def validate_table(
    table_name: str,
    frame_or_arrow: pa.Table | pd.DataFrame,
    *,
    partition_date: dt.date | Iterable[dt.date],
    messages: pa.Table | pd.DataFrame | None = None,
    quarantine: pa.Table | pd.DataFrame | None = None,
    sessions: pa.Table | pd.DataFrame | None = None,
    gap_minutes: int | None = None,
    chunk_size: int | None = None,
    chunk_stride: int | None = None,
) -> GxOutcome:
    """Validate one table's partition(s) against its GX suite.

    ``partition_date`` may be one date or the dates of a partition range (every row must
    belong to one of them; counts are compared per date). Extra inputs per table:
    ingest_audit needs ``messages`` and ``quarantine`` of the same dates; sessions needs
    ``messages`` from the day before to the day after its sessions and ``gap_minutes``;
    chunks needs the ``sessions`` of the same dates, ``chunk_size`` and ``chunk_stride``.
    """
    frames = table_frames(
        table_name,
        frame_or_arrow,
        partition_date=partition_date,
        messages=messages,
        quarantine=quarantine,
        sessions=sessions,
        gap_minutes=gap_minutes,
        chunk_size=chunk_size,
        chunk_stride=chunk_stride,
    )
    return validate_frames(table_name, frames)


# --------------------------------------------------------------------------------------------
# Reading the stored partitions
# --------------------------------------------------------------------------------------------


def _date_range(lo: dt.date, hi: dt.date) -> list[dt.date]:
    return [lo + dt.timedelta(days=i) for i in range((hi - lo).days + 1)]


def session_window(sessions: pa.Table, days: Sequence[dt.date]) -> list[dt.date]:
    """raw_messages dates the session suite needs: day before the first start to day after
    the last end (a session may run past midnight, and its successor may start the next day).
    """
    last = days[-1]
    if sessions.num_rows:
        end = pc.max(sessions.column("end_local_date")).as_py()
        last = max(last, end) if end else last
    return _date_range(days[0] - DAY, last + DAY)


def validate_stored(
    store: TableStore,
    table_name: str,
    days: Sequence[dt.date],
    *,
    gap_minutes: int,
    chunk_size: int,
    chunk_stride: int,
) -> GxOutcome:
    """Read the partitions of ``days`` (and the neighbours a suite needs) and validate them.

    A partition file that is missing fails the outcome: the check runs after its asset wrote
    every partition of the run (an empty partition is an empty file, not a missing one).
    """
    days = as_days(days)
    read = store.read
    missing = [d.isoformat() for d in days if not store.has(table_name, d)]
    data = read(table_name, days)
    extra: dict[str, Any] = {}
    if table_name == T.INGEST_AUDIT.name:
        extra = {"messages": read(T.RAW_MESSAGES, days), "quarantine": read(T.QUARANTINE, days)}
    elif table_name == T.SESSIONS.name:
        extra = {"messages": read(T.RAW_MESSAGES, session_window(data, days))}
    elif table_name == T.CHUNKS.name:
        extra = {"sessions": read(T.SESSIONS, days)}
    outcome = validate_table(
        table_name,
        data,
        partition_date=days,
        gap_minutes=gap_minutes,
        chunk_size=chunk_size,
        chunk_stride=chunk_stride,
        **extra,
    )
    if missing:
        outcome.success = False
        outcome.failed.insert(
            0,
            {
                "expectation": "partition_file_exists",
                "frame": table_name,
                "column": "",
                "rule": "in_partition",
                "unexpected_count": len(missing),
                "missing_partitions": missing[:20],
            },
        )
    return outcome


def validate_range(
    store: TableStore,
    table_name: str,
    days: Sequence[dt.date],
    *,
    gap_minutes: int,
    chunk_size: int,
    chunk_stride: int,
) -> tuple[GxOutcome, list[str]]:
    """Validate ``days`` at once; only if that fails, each day again to name the failing ones.

    One validation over a year-long backfill is far cheaper than one per partition, and the
    common case passes; the per-day pass runs only when there is something to locate. Returns
    the range's outcome and the ISO dates of the failing partitions ([] for a single day).
    """
    params = {"gap_minutes": gap_minutes, "chunk_size": chunk_size, "chunk_stride": chunk_stride}
    outcome = validate_stored(store, table_name, days, **params)
    failed: list[str] = []
    if not outcome.success and len(days) > 1:
        failed = [
            day.isoformat()
            for day in days
            if not validate_stored(store, table_name, [day], **params).success
        ]
    return outcome, failed
