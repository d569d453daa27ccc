"""The GX expectations of each table's suite, tagged with the rule family a failure reports.

great_expectations is imported lazily (it takes seconds), only when a suite is built; the
frames these expectations run on are in ``gx_frames``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from memory_pipeline.core.common.records import MESSAGE_TYPES, QUARANTINE_REASONS
from memory_pipeline.core.quality.gx_frames import MESSAGE_KEY_COLUMNS, QUARANTINE_KEY_COLUMNS

if TYPE_CHECKING:
    from great_expectations.expectations import Expectation


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
