"""chunk_summaries, embedding_texts, session_enrichment, chunk_embeddings.

The four search representations of the LINE paper (raw_text lives in chunks) plus session
titles. Each asset reads its inputs from the table store, calls memory_pipeline.core, writes
one file per partition and reports counts; provider work goes through the content cache, so a
partition whose chunks did not change makes no provider call.
"""

import time

import dagster as dg
import pyarrow.compute as pc

from memory_pipeline.core.common.dates import split_by_date
from memory_pipeline.core.quality import represent_checks
from memory_pipeline.core.represent.build import embed_chunks, embedding_texts, enrich_sessions
from memory_pipeline.core.represent.build import summarize_chunks as summarize_core
from memory_pipeline.core.sessions.stage import session_messages
from memory_pipeline.defs.chunks import CHUNKS
from memory_pipeline.defs.helpers import check_result
from memory_pipeline.defs.ingest import RAW
from memory_pipeline.defs.partitions import keys_to_dates, raw_window
from memory_pipeline.defs.providers import PROVIDER_POOL, EmbeddingResource, SummarizerResource
from memory_pipeline.defs.resources import PipelineResource
from memory_pipeline.defs.sessions import SESSIONS

SUMMARIES = dg.AssetKey("chunk_summaries")
EMBEDDING_TEXTS = dg.AssetKey("embedding_texts")
ENRICHMENT = dg.AssetKey("session_enrichment")
EMBEDDINGS = dg.AssetKey("chunk_embeddings")

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
    }

    @dg.asset(
        key=SUMMARIES,
        deps=[CHUNKS],
        pool=PROVIDER_POOL,
        check_specs=[
            dg.AssetCheckSpec(CHECK_SUMMARIES, asset=SUMMARIES, blocking=True),
            # a model that misses the length target is worth a warning, not a stopped run
            dg.AssetCheckSpec(CHECK_SUMMARY_LENGTH, asset=SUMMARIES),
        ],
        description=(
            "One summary per chunk: extractive (offline, deterministic; 200-500 characters "
            "Japanese, 60-120 words English) or an OpenAI-compatible model, cached by content."
        ),
        **common,
    )
    def chunk_summaries(
        context: dg.AssetExecutionContext,
        pipeline: PipelineResource,
        summarizer: SummarizerResource,
    ):
        store = pipeline.store
        days = keys_to_dates(context.partition_keys)
        chunks = store.read("chunks", days)
        provider = summarizer.build()
        t0 = time.perf_counter()
        cache = pipeline.content_cache() if provider is not None else None
        try:
            table = summarize_core(
                chunks, summarizer=provider, cache=cache, redact_text=summarizer.redacts
            )
        finally:
            if cache is not None:
                cache.close()
        _write_by_day(store, "chunk_summaries", table, days)
        written = store.read("chunk_summaries", days)
        calls = provider.calls if provider is not None else 0
        context.log.info(
            f"chunk_summaries: {written.num_rows} summaries, {calls} provider calls, "
            f"{time.perf_counter() - t0:.2f}s"
        )
        return dg.MaterializeResult(
            metadata={
                "rows": written.num_rows,
                "method": written.column("method")[0].as_py() if written.num_rows else "",
                "provider_calls": calls,
                "errors": written.num_rows - written.column("error").null_count,
                "redactions": int(pc.sum(written.column("redactions")).as_py() or 0),
                "path": dg.MetadataValue.path(str(store.table_dir("chunk_summaries"))),
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

    @dg.asset(
        key=EMBEDDING_TEXTS,
        deps=[CHUNKS, SUMMARIES],
        check_specs=[
            dg.AssetCheckSpec(CHECK_EMBEDDING_TEXTS, asset=EMBEDDING_TEXTS, blocking=True)
        ],
        description=(
            "embedding_text per chunk: a fixed identifying sentence + the summary + a labelled "
            "raw excerpt of up to 4,000 characters, appended by code, not by a model."
        ),
        **common,
    )
    def embedding_texts_asset(context: dg.AssetExecutionContext, pipeline: PipelineResource):
        store = pipeline.store
        days = keys_to_dates(context.partition_keys)
        chunks = store.read("chunks", days)
        summaries = store.read("chunk_summaries", days)
        _write_by_day(store, "embedding_texts", embedding_texts(chunks, summaries), days)
        written = store.read("embedding_texts", days)
        return dg.MaterializeResult(
            metadata={
                "rows": written.num_rows,
                "path": dg.MetadataValue.path(str(store.table_dir("embedding_texts"))),
            },
            check_results=[
                check_result(
                    EMBEDDING_TEXTS,
                    CHECK_EMBEDDING_TEXTS,
                    represent_checks.embedding_texts_valid(written, chunks, summaries),
                )
            ],
        )

    @dg.asset(
        key=ENRICHMENT,
        deps=[SESSIONS, dg.AssetDep(RAW, partition_mapping=raw_window(0, 1))],
        check_specs=[dg.AssetCheckSpec(CHECK_ENRICHMENT, asset=ENRICHMENT)],
        description=(
            "Per session: a 3-6 word title and bullets of decisions, commitments and context "
            "(extractive, offline)."
        ),
        **common,
    )
    def session_enrichment(context: dg.AssetExecutionContext, pipeline: PipelineResource):
        store = pipeline.store
        days = keys_to_dates(context.partition_keys)
        sessions = store.read("sessions", days)
        table = enrich_sessions(sessions, session_messages(store, sessions))
        _write_by_day(store, "session_enrichment", table, days)
        written = store.read("session_enrichment", days)
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

    @dg.asset(
        key=EMBEDDINGS,
        deps=[CHUNKS, SUMMARIES, EMBEDDING_TEXTS],
        pool=PROVIDER_POOL,
        check_specs=[dg.AssetCheckSpec(CHECK_VECTORS, asset=EMBEDDINGS, blocking=True)],
        description=(
            "One L2-normalized float32 vector per chunk and dense representation "
            "(fixed-size lists; provider, model and dimension recorded)."
        ),
        **common,
    )
    def chunk_embeddings(
        context: dg.AssetExecutionContext,
        pipeline: PipelineResource,
        embedder: EmbeddingResource,
    ):
        cfg, store = pipeline.cfg, pipeline.store
        days = keys_to_dates(context.partition_keys)
        chunks = store.read("chunks", days)
        summaries = store.read("chunk_summaries", days)
        texts = store.read("embedding_texts", days)
        provider = embedder.build()
        t0 = time.perf_counter()
        cache = pipeline.content_cache()
        try:
            table, stats = embed_chunks(
                chunks,
                summaries,
                texts,
                embedder=provider,
                cache=cache,
                representations=cfg.dense_representations,
                redact_text=embedder.redacts,
            )
        finally:
            cache.close()
        _write_by_day(store, "chunk_embeddings", table, days)
        written = store.read("chunk_embeddings", days)
        seconds = time.perf_counter() - t0
        context.log.info(
            f"chunk_embeddings: {written.num_rows} vectors ({provider.provider}/{provider.model}, "
            f"dim {provider.dim}), {stats['cache_hits']} cache hits, "
            f"{stats['provider_calls']} provider calls, {seconds:.1f}s"
        )
        return dg.MaterializeResult(
            metadata={
                **stats,
                "provider": provider.provider,
                "model": provider.model,
                "dim": provider.dim,
                "seconds": round(seconds, 2),
                "path": dg.MetadataValue.path(str(store.table_dir("chunk_embeddings"))),
            },
            check_results=[
                check_result(
                    EMBEDDINGS,
                    CHECK_VECTORS,
                    represent_checks.vectors_valid(written, chunks, cfg.dense_representations),
                )
            ],
        )

    return [chunk_summaries, embedding_texts_asset, session_enrichment, chunk_embeddings]


def _write_by_day(store, table_name: str, table, days) -> None:
    for day, part in split_by_date(table, "local_date", list(days)).items():
        store.write(table_name, part, day)
