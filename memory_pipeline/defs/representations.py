"""chunk_summaries, embedding_texts, session_enrichment, chunk_embeddings.

The four search representations of the LINE paper (raw_text lives in chunks) plus session
titles. Each asset reads its inputs from the table store, calls memory_pipeline.core, writes
one file per partition and reports counts; provider work goes through the content cache, so a
partition whose chunks did not change makes no provider call.
"""

import datetime as dt
import time
from collections.abc import Sequence
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

from memory_pipeline.core.common import tables as T
from memory_pipeline.core.common.dates import split_by_date
from memory_pipeline.core.common.storage import TableStore
from memory_pipeline.core.common.tables import Table
from memory_pipeline.core.quality import represent_checks
from memory_pipeline.core.represent.build import embed_chunks, embedding_texts, enrich_sessions
from memory_pipeline.core.represent.build import summarize_chunks as summarize_core
from memory_pipeline.core.represent.providers.base import Embedder, Summarizer
from memory_pipeline.core.sessions.stage import session_messages
from memory_pipeline.defs.chunks import CHUNKS
from memory_pipeline.defs.compute import DaskResource
from memory_pipeline.defs.helpers import (
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
from memory_pipeline.defs.providers import PROVIDER_POOL, EmbeddingResource, SummarizerResource
from memory_pipeline.defs.resources import PipelineResource
from memory_pipeline.defs.sessions import SESSIONS

SUMMARIES = asset_key(T.CHUNK_SUMMARIES)
EMBEDDING_TEXTS = asset_key(T.EMBEDDING_TEXTS)
ENRICHMENT = asset_key(T.SESSION_ENRICHMENT)
EMBEDDINGS = asset_key(T.CHUNK_EMBEDDINGS)

CHECK_SUMMARIES = "one_nonempty_summary_per_chunk"
CHECK_SUMMARY_LENGTH = "summaries_within_length_target"
CHECK_EMBEDDING_TEXTS = "embedding_text_has_summary_and_excerpt"
CHECK_ENRICHMENT = "one_title_per_session"
CHECK_VECTORS = "one_normalized_vector_per_chunk"

GROUP = "representations"


def build_representation_assets(
    partitions_def: dg.PartitionsDefinition,
) -> list[dg.AssetsDefinition]:
    """The four representation assets for the configured partitions."""
    common = {
        "partitions_def": partitions_def,
        "backfill_policy": dg.BackfillPolicy.single_run(),
        "group_name": GROUP,
        **asset_info(
            "representations",
            ("python", "parquet"),
            "memory_pipeline.defs.representations",
            "memory_pipeline.defs.providers",
            "memory_pipeline.core.represent",
        ),
    }
    parts = partitions_def
    return [
        _summaries_asset(common, parts),
        _embedding_texts_asset(common, parts),
        _enrichment_asset(common, parts),
        _embeddings_asset(common, parts),
    ]


# --------------------------------------------------------------------------- chunk_summaries


def _summary_counts(_store: TableStore, _day: dt.date, part: pa.Table) -> dict[str, Any]:
    """The partition's own figures (provider calls are only known for the run's range)."""
    return {
        "errors": part.num_rows - part.column("error").null_count,
        "redactions": int(pc.sum(part.column("redactions")).as_py() or 0),
    }


def _summaries_asset(common: dict[str, Any], parts: dg.PartitionsDefinition) -> dg.AssetsDefinition:
    @dg.asset(
        **table_asset(T.CHUNK_SUMMARIES),
        deps=[CHUNKS],
        pool=PROVIDER_POOL,
        check_specs=[
            check_spec(
                CHECK_SUMMARIES,
                SUMMARIES,
                "every chunk has exactly one non-empty summary",
                parts,
                blocking=True,
            ),
            # a model that misses the length target is worth a warning, not a stopped run
            check_spec(
                CHECK_SUMMARY_LENGTH,
                SUMMARIES,
                "every summary met its length target (WARN: a model that misses it is "
                "reported, the run goes on)",
                parts,
            ),
        ],
        **common,
    )
    @per_partition({SUMMARIES: T.CHUNK_SUMMARIES}, {SUMMARIES: _summary_counts})
    def chunk_summaries(
        context: dg.AssetExecutionContext,
        pipeline: PipelineResource,
        summarizer: SummarizerResource,
    ):
        store = pipeline.store
        days = keys_to_dates(context.partition_keys)
        chunks = store.read(T.CHUNKS, days)
        provider = summarizer.build()
        t0 = time.perf_counter()
        table = _summarize(pipeline, chunks, provider, summarizer.redacts)
        written = _write_and_read_back(store, T.CHUNK_SUMMARIES, table, days)
        calls = provider.calls if provider is not None else 0
        context.log.info(
            f"chunk_summaries: {written.num_rows} summaries, {calls} provider calls, "
            f"{time.perf_counter() - t0:.2f}s"
        )
        return _summaries_result(store, written, chunks, calls)

    return chunk_summaries


def _summarize(
    pipeline: PipelineResource, chunks: pa.Table, provider: Summarizer | None, redact: bool
) -> pa.Table:
    """Summaries of ``chunks``. A model's answers go through the content cache, so unchanged
    chunks cost no call; the extractive summarizer (``provider`` None) opens no cache."""
    cache = pipeline.content_cache() if provider is not None else None
    try:
        return summarize_core(chunks, summarizer=provider, cache=cache, redact_text=redact)
    finally:
        if cache is not None:
            cache.close()


def _summaries_result(
    store: TableStore, written: pa.Table, chunks: pa.Table, calls: int
) -> dg.MaterializeResult:
    return dg.MaterializeResult(
        metadata={
            "rows": written.num_rows,
            "method": written.column("method")[0].as_py() if written.num_rows else "",
            "provider_calls": calls,
            "errors": written.num_rows - written.column("error").null_count,
            "redactions": int(pc.sum(written.column("redactions")).as_py() or 0),
            "path": table_path(store, T.CHUNK_SUMMARIES),
        },
        check_results=[
            check_result(
                SUMMARIES,
                CHECK_SUMMARIES,
                represent_checks.summaries_cover_chunks(written, chunks),
            ),
            check_result(
                SUMMARIES,
                CHECK_SUMMARY_LENGTH,
                represent_checks.summaries_within_target(written),
                severity=dg.AssetCheckSeverity.WARN,
            ),
        ],
    )


# --------------------------------------------------------------------------- embedding_texts


def _embedding_texts_asset(
    common: dict[str, Any], parts: dg.PartitionsDefinition
) -> dg.AssetsDefinition:
    @dg.asset(
        **table_asset(T.EMBEDDING_TEXTS),
        deps=[CHUNKS, SUMMARIES],
        check_specs=[
            check_spec(
                CHECK_EMBEDDING_TEXTS,
                EMBEDDING_TEXTS,
                "one embedding_text per chunk, containing its labelled summary and raw excerpt",
                parts,
                blocking=True,
            )
        ],
        **common,
    )
    @per_partition({EMBEDDING_TEXTS: T.EMBEDDING_TEXTS})
    def embedding_texts_asset(context: dg.AssetExecutionContext, pipeline: PipelineResource):
        store = pipeline.store
        days = keys_to_dates(context.partition_keys)
        chunks = store.read(T.CHUNKS, days)
        summaries = store.read(T.CHUNK_SUMMARIES, days)
        table = embedding_texts(chunks, summaries)
        written = _write_and_read_back(store, T.EMBEDDING_TEXTS, table, days)
        return dg.MaterializeResult(
            metadata={
                "rows": written.num_rows,
                "path": table_path(store, T.EMBEDDING_TEXTS),
            },
            check_results=[
                check_result(
                    EMBEDDING_TEXTS,
                    CHECK_EMBEDDING_TEXTS,
                    represent_checks.embedding_texts_valid(written, chunks, summaries),
                )
            ],
        )

    return embedding_texts_asset


# --------------------------------------------------------------------------- session_enrichment


def _enrichment_asset(
    common: dict[str, Any], parts: dg.PartitionsDefinition
) -> dg.AssetsDefinition:
    @dg.asset(
        **table_asset(T.SESSION_ENRICHMENT),
        deps=[SESSIONS, window_dep(RAW, parts, 0, 1)],
        check_specs=[
            check_spec(
                CHECK_ENRICHMENT,
                ENRICHMENT,
                "every session has exactly one row with a non-blank title",
                parts,
            )
        ],
        **common,
    )
    @per_partition({ENRICHMENT: T.SESSION_ENRICHMENT})
    def session_enrichment(context: dg.AssetExecutionContext, pipeline: PipelineResource):
        store = pipeline.store
        days = keys_to_dates(context.partition_keys)
        sessions = store.read(T.SESSIONS, days)
        table = enrich_sessions(sessions, session_messages(store, sessions))
        written = _write_and_read_back(store, T.SESSION_ENRICHMENT, table, days)
        return dg.MaterializeResult(
            metadata={"rows": written.num_rows},
            check_results=[
                check_result(
                    ENRICHMENT,
                    CHECK_ENRICHMENT,
                    represent_checks.titles_cover_sessions(written, sessions),
                )
            ],
        )

    return session_enrichment


# --------------------------------------------------------------------------- chunk_embeddings


def _vector_counts(_store: TableStore, _day: dt.date, part: pa.Table) -> dict[str, Any]:
    """The partition's own figures (cache hits and provider calls are the run's range's)."""
    return {
        "truncated": int(pc.sum(part.column("truncated")).as_py() or 0),
        "errors": part.num_rows - part.column("error").null_count,
    }


def _embeddings_asset(
    common: dict[str, Any], parts: dg.PartitionsDefinition
) -> dg.AssetsDefinition:
    @dg.asset(
        **table_asset(T.CHUNK_EMBEDDINGS),
        deps=[CHUNKS, SUMMARIES, EMBEDDING_TEXTS],
        pool=PROVIDER_POOL,
        check_specs=[
            check_spec(
                CHECK_VECTORS,
                EMBEDDINGS,
                "one vector per (chunk, dense representation), constant dimension, no NaN, "
                "norms ~ 1 (provider errors are counted, not fatal)",
                parts,
                blocking=True,
            )
        ],
        **common,
    )
    @per_partition({EMBEDDINGS: T.CHUNK_EMBEDDINGS}, {EMBEDDINGS: _vector_counts})
    def chunk_embeddings(
        context: dg.AssetExecutionContext,
        pipeline: PipelineResource,
        embedder: EmbeddingResource,
        dask: DaskResource,
    ):
        cfg, store = pipeline.cfg, pipeline.store
        days = keys_to_dates(context.partition_keys)
        chunks = store.read(T.CHUNKS, days)
        summaries = store.read(T.CHUNK_SUMMARIES, days)
        texts = store.read(T.EMBEDDING_TEXTS, days)
        provider = embedder.build()
        t0 = time.perf_counter()
        table, stats = _embed(
            pipeline,
            chunks,
            summaries,
            texts,
            provider,
            cfg.dense_representations,
            embedder.redacts,
            dask.runner(),
        )
        stats["dask_workers"] = dask.workers() if dask.enabled else 0
        written = _write_and_read_back(store, T.CHUNK_EMBEDDINGS, table, days)
        seconds = time.perf_counter() - t0
        context.log.info(
            f"chunk_embeddings: {written.num_rows} vectors ({provider.provider}/{provider.model}, "
            f"dim {provider.dim}), {stats['cache_hits']} cache hits, "
            f"{stats['provider_calls']} provider calls, {seconds:.1f}s"
        )
        return _embeddings_result(
            store, written, chunks, stats, provider, seconds, cfg.dense_representations
        )

    return chunk_embeddings


def _embed(
    pipeline: PipelineResource,
    chunks: pa.Table,
    summaries: pa.Table,
    texts: pa.Table,
    provider: Embedder,
    representations: Sequence[str],
    redact: bool,
    runner: Any = None,
) -> tuple[pa.Table, dict]:
    """Vectors for every chunk and dense representation, through the content cache (so a
    partition whose texts did not change makes no provider call); cache misses are embedded
    on ``runner`` (a Dask client) when one is configured (defs/compute.py)."""
    cache = pipeline.content_cache()
    try:
        return embed_chunks(
            chunks,
            summaries,
            texts,
            embedder=provider,
            cache=cache,
            representations=representations,
            redact_text=redact,
            runner=runner,
        )
    finally:
        cache.close()


def _embeddings_result(
    store: TableStore,
    written: pa.Table,
    chunks: pa.Table,
    stats: dict,
    provider: Embedder,
    seconds: float,
    representations: Sequence[str],
) -> dg.MaterializeResult:
    return dg.MaterializeResult(
        metadata={
            **stats,
            "provider": provider.provider,
            "model": provider.model,
            "dim": provider.dim,
            "seconds": round(seconds, 2),
            "path": table_path(store, T.CHUNK_EMBEDDINGS),
        },
        check_results=[
            check_result(
                EMBEDDINGS,
                CHECK_VECTORS,
                represent_checks.vectors_valid(written, chunks, representations),
            )
        ],
    )


# --------------------------------------------------------------------------- shared


def _write_and_read_back(
    store: TableStore, target: Table, table: pa.Table, days: Sequence[dt.date]
) -> pa.Table:
    """Write ``table`` one file per day, then read it back: the checks verify what is stored,
    not what was computed in memory."""
    _write_by_day(store, target, table, days)
    return store.read(target, days)


def _write_by_day(
    store: TableStore, target: Table, table: pa.Table, days: Sequence[dt.date]
) -> None:
    for day, part in split_by_date(table, target.partition, list(days)).items():
        store.write(target, part, day)
