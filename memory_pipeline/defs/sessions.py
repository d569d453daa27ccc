"""sessions: conversations split at inactivity gaps; owned by the date they start on."""

import datetime as dt
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

from memory_pipeline.core.common import tables as T
from memory_pipeline.core.common.dates import DAY
from memory_pipeline.core.common.storage import ReadMemo, TableStore, concat, write_partitions
from memory_pipeline.core.quality import checks as quality
from memory_pipeline.core.sessions.stage import build_sessions
from memory_pipeline.defs.helpers import (
    WRITTEN,
    Written,
    asset_info,
    asset_key,
    check_result,
    check_spec,
    table_asset,
    table_path,
)
from memory_pipeline.defs.ingest import RAW
from memory_pipeline.defs.owner_fanout import per_partition
from memory_pipeline.defs.partitions import keys_to_dates, window_dep
from memory_pipeline.defs.resources import PipelineResource

SESSIONS = asset_key(T.SESSIONS)
# sessions and chunks cut the message stream into units of conversation
GROUP = "segmentation"
CHECK_SESSIONS_VALID = "sessions_ordered_and_gap_respecting"
CHECK_SESSION_IDS_UNIQUE = "session_ids_unique"

# Sessions of D need the day before (continuation?) and the day after (past midnight?):
# ``window_dep(RAW, partitions_def, -1, 1)``


def _crossing_midnight(_store: TableStore, _day: dt.date, part: pa.Table) -> dict[str, Any]:
    """The partition's sessions that end on a later date than they start."""
    ends_later = pc.not_equal(part.column("local_date"), part.column("end_local_date"))
    return {"crossing_midnight": pc.sum(ends_later).as_py() or 0}


def build_sessions_asset(partitions_def: dg.PartitionsDefinition) -> dg.AssetsDefinition:
    """The sessions asset for the configured partitions."""

    @dg.asset(
        **table_asset(T.SESSIONS),
        deps=[window_dep(RAW, partitions_def, -1, 1)],
        partitions_def=partitions_def,
        backfill_policy=dg.BackfillPolicy.single_run(),
        check_specs=[
            check_spec(
                CHECK_SESSIONS_VALID,
                SESSIONS,
                "messages of a session are in time order, no gap inside a session exceeds "
                "session_gap_minutes, and consecutive sessions are further apart than that",
                partitions_def,
                blocking=True,
            ),
            check_spec(
                CHECK_SESSION_IDS_UNIQUE,
                SESSIONS,
                "no session_id occurs twice in the run's partitions",
                partitions_def,
                blocking=True,
            ),
        ],
        group_name=GROUP,
        **asset_info(
            T.SESSIONS.name,
            ("python", "parquet"),
            "memory_pipeline.defs.sessions",
            "memory_pipeline.core.sessions",
        ),
    )
    @per_partition({SESSIONS: T.SESSIONS}, {SESSIONS: _crossing_midnight})
    def sessions(context: dg.AssetExecutionContext, pipeline: PipelineResource):
        cfg, store = pipeline.cfg, pipeline.store
        days = keys_to_dates(context.partition_keys)
        reads = ReadMemo(store)  # the check's window is the one build_sessions read
        per_day = build_sessions(reads, days, cfg.session_gap_minutes)
        write_partitions(store, [(T.SESSIONS, day, table) for day, table in per_day.items()])
        # checked as written (atomic writes of these very tables), not read back
        written = concat(T.SESSIONS, list(per_day.values()))
        window = reads.read(T.RAW_MESSAGES, [days[0] - DAY, *days, days[-1] + DAY])
        crossing = (
            pc.sum(
                pc.not_equal(written.column("local_date"), written.column("end_local_date"))
            ).as_py()
            or 0
        )
        context.log.info(f"sessions: {written.num_rows} sessions in {len(days)} partitions")
        yield dg.MaterializeResult(
            metadata={
                "rows": written.num_rows,
                "crossing_midnight": crossing,
                "gap_minutes": cfg.session_gap_minutes,
                "path": table_path(store, T.SESSIONS),
                WRITTEN: Written(per_day),
            },
            check_results=[
                check_result(
                    SESSIONS,
                    CHECK_SESSIONS_VALID,
                    quality.sessions_valid(written, window, cfg.session_gap_minutes, days),
                ),
                check_result(
                    SESSIONS, CHECK_SESSION_IDS_UNIQUE, quality.unique(written, "session_id")
                ),
            ],
        )

    return sessions
