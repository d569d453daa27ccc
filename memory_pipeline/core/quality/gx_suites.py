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
from memory_pipeline.core.common.records import MESSAGE_TYPES, QUARANTINE_REASONS
from memory_pipeline.core.common.storage import TableStore
from memory_pipeline.core.sessions.sessionize import MESSAGE_SORT, sort_messages

if TYPE_CHECKING:
    from great_expectations.core.batch_definition import BatchDefinition
    from great_expectations.data_context import AbstractDataContext
    from great_expectations.expectations import Expectation

# The tables with a GX suite, in registry order.
TABLE_NAMES = tuple(
    t.name for t in (T.RAW_MESSAGES, T.QUARANTINE, T.INGEST_AUDIT, T.SESSIONS, T.CHUNKS)
)

MESSAGE_KEY_COLUMNS = (
    "message_id",
    "conversation_id",
    "contact_id",
    "sender",
    "ts",
    "local_date",
    "source_ref",
)
QUARANTINE_KEY_COLUMNS = ("source", "source_file", "record_ref", "reason")

DAY = dt.timedelta(days=1)
US_PER_SECOND = 1_000_000

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


# --------------------------------------------------------------------------------------------
# Derived frames (pure: Arrow/pandas only, no GX)
# --------------------------------------------------------------------------------------------


def as_arrow(data: pa.Table | pd.DataFrame) -> pa.Table:
    """Accept Arrow (what TableStore reads) or pandas (handy in tests)."""
    if isinstance(data, pa.Table):
        return data
    return pa.Table.from_pandas(data, preserve_index=False)


def as_days(partition_date: dt.date | Iterable[dt.date]) -> list[dt.date]:
    """One partition date or several (a partition range) -> sorted distinct dates."""
    if isinstance(partition_date, dt.date):
        return [partition_date]
    days = sorted(set(partition_date))
    if not days:
        raise ValueError("need at least one partition date")
    return days


def _pandas(columns: dict[str, Any]) -> pd.DataFrame:
    """Arrow columns -> pandas, dates kept as ``datetime.date`` (compared to partition dates)."""
    return pa.table(columns).to_pandas(date_as_object=True)


def _id_list_lengths(table: pa.Table) -> pa.Array:
    return pc.fill_null(pc.list_value_length(table.column("message_ids")), 0)


def messages_frame(messages: pa.Table) -> pd.DataFrame:
    """Key columns of raw_messages plus ``local_ts_date`` (the date the local time falls on)."""
    cols = {c: messages.column(c) for c in (*MESSAGE_KEY_COLUMNS, "source", "type")}
    cols["local_ts_date"] = pc.cast(messages.column("local_ts"), pa.date32())
    return _pandas(cols)


def quarantine_frame(quarantine: pa.Table) -> pd.DataFrame:
    """Id and locating columns of quarantine (``raw`` and ``detail`` stay out of GX)."""
    names = ("quarantine_id", *QUARANTINE_KEY_COLUMNS, "partition_date")
    return _pandas({c: quarantine.column(c) for c in names})


def audit_frame(audit: pa.Table) -> pd.DataFrame:
    """ingest_audit rows plus ``ingested_plus_quarantined`` (must equal ``records_read``)."""
    cols = {
        c: audit.column(c)
        for c in ("partition_date", "source", "records_read", "ingested", "quarantined")
    }
    cols["ingested_plus_quarantined"] = pc.add(
        audit.column("ingested"), audit.column("quarantined")
    )
    return _pandas(cols)


def audit_counts_frame(audit: pa.Table, messages: pa.Table, quarantine: pa.Table) -> pd.DataFrame:
    """Per (partition_date, source): what the audit claims vs the rows actually stored.

    An outer join, so a source present in only one of the three tables shows up with zeros
    on the other side instead of disappearing.
    """
    keys = ["partition_date", "source"]
    claimed = (
        _pandas({c: audit.column(c) for c in (*keys, "ingested", "quarantined")})
        .groupby(keys)
        .sum()
        .rename(columns={"ingested": "audit_ingested", "quarantined": "audit_quarantined"})
    )
    stored = _pandas(
        {"partition_date": messages.column("local_date"), "source": messages.column("source")}
    ).value_counts(keys)
    held = _pandas({c: quarantine.column(c) for c in keys}).value_counts(keys)
    joined = pd.concat(
        [claimed, stored.rename("stored_messages"), held.rename("stored_quarantined")], axis=1
    )
    counts = ["audit_ingested", "stored_messages", "audit_quarantined", "stored_quarantined"]
    joined = joined.reindex(columns=counts).fillna(0).astype("int64")
    return joined.reset_index().sort_values(keys, ignore_index=True)


def session_frame(sessions: pa.Table, messages: pa.Table) -> pd.DataFrame:
    """Session key columns plus derived columns that need the neighbouring messages.

    ``messages`` must hold the conversation's messages around every session (the day before
    its start to the day after its end). Derived:

    - ``gap_limit_seconds``: the row's ``gap_minutes`` * 60.
    - ``id_list_length``: length of ``message_ids`` (must equal ``message_count``).
    - ``gap_before_seconds`` / ``gap_after_seconds``: time from the previous message of the
      conversation to the session's first message, and from its last message to the next
      one, i.e. the gap to the neighbouring sessions (NaN when there is none in ``messages``).
    - ``messages_contiguous``: every id was found and they are consecutive in the
      conversation's message order (no message of another session in between).
    """
    ordered = sort_messages(messages.select([c for c, _ in MESSAGE_SORT]))
    n = ordered.num_rows
    ts = ordered.column("ts").cast(pa.int64()).to_numpy().astype(np.float64) / US_PER_SECOND
    conv = ordered.column("conversation_id").combine_chunks().dictionary_encode().indices
    conv = conv.to_numpy(zero_copy_only=False)
    same_prev = np.zeros(n, dtype=bool)
    same_prev[1:] = conv[1:] == conv[:-1]
    prev_gap = np.full(n, np.nan)
    prev_gap[1:] = np.where(same_prev[1:], np.diff(ts), np.nan)
    next_gap = np.full(n, np.nan)
    next_gap[:-1] = prev_gap[1:]
    position = {m: i for i, m in enumerate(ordered.column("message_id").to_pylist())}

    before, after, contiguous = [], [], []
    for ids in sessions.column("message_ids").to_pylist():
        pos = [position.get(m) for m in ids or []]
        if not pos or None in pos:
            before.append(np.nan)
            after.append(np.nan)
            contiguous.append(False)
            continue
        lo, hi = min(pos), max(pos)
        before.append(prev_gap[lo])
        after.append(next_gap[hi])
        contiguous.append(hi - lo + 1 == len(pos) and bool(same_prev[lo + 1 : hi + 1].all()))

    names = (
        "session_id",
        "conversation_id",
        "local_date",
        "message_count",
        "max_gap_seconds",
        "gap_minutes",
        "start_ts",
        "end_ts",
    )
    cols: dict[str, Any] = {c: sessions.column(c) for c in names}
    cols["gap_limit_seconds"] = pc.multiply(pc.cast(sessions.column("gap_minutes"), pa.int64()), 60)
    cols["id_list_length"] = _id_list_lengths(sessions)
    cols["gap_before_seconds"] = pa.array(before, pa.float64())
    cols["gap_after_seconds"] = pa.array(after, pa.float64())
    cols["messages_contiguous"] = pa.array(contiguous, pa.bool_())
    return _pandas(cols)


def chunk_frame(chunks: pa.Table, sessions: pa.Table) -> pd.DataFrame:
    """Chunk key columns plus derived neighbour columns, in (session, chunk_index) order.

    - ``id_list_length``: length of ``message_ids`` (must equal ``message_count``).
    - ``overlap_with_previous``: messages shared with the previous chunk of the session
      (NaN for a session's first chunk); must be ``chunk_size - chunk_stride``.
    - ``index_step``: chunk_index minus the previous chunk's (NaN first); must be 1, so a
      missing chunk in the middle is caught even when the overlap happens to fit.
    - ``session_known``: the chunk's session is one of the partition's sessions.
    """
    order = pc.sort_indices(
        chunks, sort_keys=[("session_id", "ascending"), ("chunk_index", "ascending")]
    )
    ordered = chunks.take(order)
    sids = ordered.column("session_id").to_pylist()
    index = ordered.column("chunk_index").to_pylist()
    id_lists = ordered.column("message_ids").to_pylist()
    overlap = np.full(len(sids), np.nan)
    step = np.full(len(sids), np.nan)
    for i in range(1, len(sids)):
        if sids[i] == sids[i - 1]:
            overlap[i] = len(set(id_lists[i] or []) & set(id_lists[i - 1] or []))
            if index[i] is not None and index[i - 1] is not None:
                step[i] = index[i] - index[i - 1]
    names = (
        "chunk_id",
        "session_id",
        "local_date",
        "chunk_index",
        "first_message_index",
        "message_count",
    )
    cols: dict[str, Any] = {c: ordered.column(c) for c in names}
    cols["id_list_length"] = _id_list_lengths(ordered)
    cols["overlap_with_previous"] = pa.array(overlap, pa.float64())
    cols["index_step"] = pa.array(step, pa.float64())
    cols["session_known"] = pc.fill_null(
        pc.is_in(ordered.column("session_id"), value_set=sessions.column("session_id")), False
    )
    return _pandas(cols)


def chunk_coverage_frame(chunks: pa.Table, sessions: pa.Table) -> pd.DataFrame:
    """One row per message of the sessions: in how many of its session's chunks it appears."""
    held: dict[tuple[str, str], int] = {}
    for sid, ids in zip(
        chunks.column("session_id").to_pylist(),
        chunks.column("message_ids").to_pylist(),
        strict=True,
    ):
        for m in set(ids or []):
            held[(sid, m)] = held.get((sid, m), 0) + 1
    sids, mids, counts = [], [], []
    for sid, ids in zip(
        sessions.column("session_id").to_pylist(),
        sessions.column("message_ids").to_pylist(),
        strict=True,
    ):
        for m in ids or []:
            sids.append(sid)
            mids.append(m)
            counts.append(held.get((sid, m), 0))
    return _pandas(
        {
            "session_id": pa.array(sids, pa.string()),
            "message_id": pa.array(mids, pa.string()),
            "chunk_count": pa.array(counts, pa.int64()),
        }
    )


# --------------------------------------------------------------------------------------------
# Suites (GX imported lazily)
# --------------------------------------------------------------------------------------------


def _gxe() -> Any:
    import great_expectations.expectations as gxe

    return gxe


def _rule(expectation: Expectation, rule: str) -> Expectation:
    """Tag an expectation with its rule family (reported with a failure)."""
    expectation.meta = {"rule": rule}
    return expectation


def _in_partition(column: str, days: Sequence[dt.date]) -> Expectation:
    return _rule(
        _gxe().ExpectColumnValuesToBeInSet(column=column, value_set=list(days)), "in_partition"
    )


def _unique_id(column: str) -> list[Expectation]:
    gxe = _gxe()
    return [
        _rule(gxe.ExpectColumnValuesToBeUnique(column=column), "id_unique"),
        _rule(gxe.ExpectColumnValuesToNotBeNull(column=column), "not_null"),
    ]


def _not_null(columns: Iterable[str]) -> list[Expectation]:
    gxe = _gxe()
    return [_rule(gxe.ExpectColumnValuesToNotBeNull(column=c), "not_null") for c in columns]


def _equal(a: str, b: str, rule: str) -> Expectation:
    return _rule(
        _gxe().ExpectColumnPairValuesToBeEqual(
            column_A=a, column_B=b, ignore_row_if="both_values_are_missing"
        ),
        rule,
    )


def raw_messages_expectations(days: Sequence[dt.date]) -> list[Expectation]:
    """Unique ids, non-null keys, rows inside their partition, known message types."""
    gxe = _gxe()
    return [
        *_unique_id("message_id"),
        *_not_null(c for c in MESSAGE_KEY_COLUMNS if c != "message_id"),
        _in_partition("local_date", days),
        _equal("local_ts_date", "local_date", "in_partition"),
        _rule(
            gxe.ExpectColumnValuesToBeInSet(column="type", value_set=sorted(MESSAGE_TYPES)),
            "known_type",
        ),
        _rule(gxe.ExpectColumnValuesToNotBeNull(column="type"), "known_type"),
    ]


def quarantine_expectations(days: Sequence[dt.date]) -> list[Expectation]:
    """Unique ids, located records, known reasons, rows inside their partition."""
    gxe = _gxe()
    return [
        *_unique_id("quarantine_id"),
        *_not_null(QUARANTINE_KEY_COLUMNS),
        _rule(
            gxe.ExpectColumnValuesToBeInSet(column="reason", value_set=sorted(QUARANTINE_REASONS)),
            "known_reason",
        ),
        _in_partition("partition_date", days),
        _rule(gxe.ExpectColumnValuesToNotBeNull(column="partition_date"), "in_partition"),
    ]


def ingest_audit_expectations(days: Sequence[dt.date]) -> list[Expectation]:
    """Row level: records_read = ingested + quarantined, one row per (date, source)."""
    gxe = _gxe()
    return [
        *_not_null(("partition_date", "source", "records_read", "ingested", "quarantined")),
        _in_partition("partition_date", days),
        _rule(
            gxe.ExpectCompoundColumnsToBeUnique(column_list=["partition_date", "source"]),
            "id_unique",
        ),
        _equal("records_read", "ingested_plus_quarantined", "conservation"),
        *(
            _rule(gxe.ExpectColumnValuesToBeBetween(column=c, min_value=0), "conservation")
            for c in ("ingested", "quarantined")
        ),
    ]


def ingest_audit_counts_expectations() -> list[Expectation]:
    """Per (date, source): the audit's counts are the rows really stored."""
    return [
        _equal("audit_ingested", "stored_messages", "conservation"),
        _equal("audit_quarantined", "stored_quarantined", "conservation"),
    ]


def sessions_expectations(days: Sequence[dt.date], gap_minutes: int) -> list[Expectation]:
    """Unique ids, owned by the partition, sizes, gap inside <= limit < gap between."""
    gxe = _gxe()
    gt = gxe.ExpectColumnPairValuesAToBeGreaterThanB
    return [
        *_unique_id("session_id"),
        *_not_null(("conversation_id", "start_ts", "end_ts")),
        _in_partition("local_date", days),
        _rule(gxe.ExpectColumnValuesToBeBetween(column="message_count", min_value=1), "size"),
        _equal("message_count", "id_list_length", "size"),
        _rule(
            gxe.ExpectColumnValuesToBeInSet(column="gap_minutes", value_set=[gap_minutes]),
            "gap",
        ),
        _rule(
            gt(column_A="gap_limit_seconds", column_B="max_gap_seconds", or_equal=True),
            "gap_inside",
        ),
        _rule(gt(column_A="end_ts", column_B="start_ts", or_equal=True), "ordered"),
        *(
            _rule(
                gt(
                    column_A=c,
                    column_B="gap_limit_seconds",
                    or_equal=False,
                    ignore_row_if="either_value_is_missing",
                ),
                "gap_between",
            )
            for c in ("gap_before_seconds", "gap_after_seconds")
        ),
        _rule(
            gxe.ExpectColumnValuesToBeInSet(column="messages_contiguous", value_set=[True]),
            "gap_between",
        ),
    ]


def chunks_expectations(
    days: Sequence[dt.date], chunk_size: int, chunk_stride: int
) -> list[Expectation]:
    """Unique ids, 1..chunk_size messages, fixed overlap, consecutive chunk indexes."""
    gxe = _gxe()
    return [
        *_unique_id("chunk_id"),
        *_not_null(("session_id", "chunk_index", "first_message_index")),
        _in_partition("local_date", days),
        _rule(
            gxe.ExpectColumnValuesToBeBetween(
                column="message_count", min_value=1, max_value=chunk_size
            ),
            "size",
        ),
        _equal("message_count", "id_list_length", "size"),
        _rule(
            gxe.ExpectColumnValuesToBeBetween(
                column="overlap_with_previous",
                min_value=chunk_size - chunk_stride,
                max_value=chunk_size - chunk_stride,
            ),
            "overlap",
        ),
        _rule(
            gxe.ExpectColumnValuesToBeBetween(column="index_step", min_value=1, max_value=1),
            "overlap",
        ),
        _rule(
            gxe.ExpectColumnValuesToBeInSet(column="session_known", value_set=[True]),
            "coverage",
        ),
    ]


def chunk_coverage_expectations() -> list[Expectation]:
    """Every message of the partition's sessions is in at least one of its chunks."""
    return [
        _rule(_gxe().ExpectColumnValuesToBeBetween(column="chunk_count", min_value=1), "coverage")
    ]


def build_suite(name: str, expectations: Iterable[Expectation]) -> Any:
    """An ExpectationSuite (not saved anywhere: the context is ephemeral)."""
    import great_expectations as gx

    return gx.ExpectationSuite(name=name, expectations=list(expectations))


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
