"""chunks: overlapping message windows inside each session, with rendered raw_text."""

import dagster as dg

from memory_pipeline.core.common import tables as T
from memory_pipeline.core.common.storage import ReadMemo, concat, write_partitions
from memory_pipeline.core.quality import checks as quality
from memory_pipeline.core.sessions.stage import build_chunks
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
from memory_pipeline.defs.sessions import GROUP, SESSIONS

CHUNKS = asset_key(T.CHUNKS)
CHECK_CHUNK_INVARIANTS = "chunk_windows_cover_sessions"


def build_chunks_asset(partitions_def: dg.PartitionsDefinition) -> dg.AssetsDefinition:
    """The chunks asset for the configured partitions."""

    @dg.asset(
        **table_asset(T.CHUNKS),
        deps=[
            SESSIONS,
            # a session's messages may run into the next day(s)
            window_dep(RAW, partitions_def, 0, 1),
        ],
        partitions_def=partitions_def,
        backfill_policy=dg.BackfillPolicy.single_run(),
        check_specs=[
            check_spec(
                CHECK_CHUNK_INVARIANTS,
                CHUNKS,
                "chunks hold 1..chunk_size messages of one session, consecutive chunks overlap "
                "by chunk_size - chunk_stride, and every message of a session is in a chunk",
                partitions_def,
                blocking=True,
            )
        ],
        group_name=GROUP,
        **asset_info(
            T.CHUNKS.name,
            ("python", "parquet"),
            "memory_pipeline.defs.chunks",
            "memory_pipeline.core.sessions",
        ),
    )
    @per_partition({CHUNKS: T.CHUNKS})
    def chunks(context: dg.AssetExecutionContext, pipeline: PipelineResource):
        cfg, store = pipeline.cfg, pipeline.store
        days = keys_to_dates(context.partition_keys)
        reads = ReadMemo(store)  # the check's sessions are the ones build_chunks read
        per_day = build_chunks(reads, days, cfg.chunk_size, cfg.chunk_stride)
        write_partitions(store, [(T.CHUNKS, day, table) for day, table in per_day.items()])
        # checked as written (atomic writes of these very tables), not read back
        written = concat(T.CHUNKS, list(per_day.values()))
        sessions = reads.read(T.SESSIONS, days)
        context.log.info(f"chunks: {written.num_rows} chunks in {len(days)} partitions")
        yield dg.MaterializeResult(
            metadata={
                "rows": written.num_rows,
                "chunk_size": cfg.chunk_size,
                "chunk_stride": cfg.chunk_stride,
                "path": table_path(store, T.CHUNKS),
                WRITTEN: Written(per_day),
            },
            check_results=[
                check_result(
                    CHUNKS,
                    CHECK_CHUNK_INVARIANTS,
                    quality.chunk_invariants(written, sessions, cfg.chunk_size, cfg.chunk_stride),
                )
            ],
        )

    return chunks
