"""chunk_summaries, embedding_texts, session_enrichment, chunk_embeddings.

The four search representations of the LINE paper (raw_text lives in chunks) plus session
titles. Each asset reads its inputs from the table store, calls memory_pipeline.core, writes
one file per partition and reports counts; provider work goes through the content cache, so a
partition whose chunks did not change makes no provider call.
"""

import time

import dagster as dg
import numpy as np
import pyarrow.compute as pc

from memory_pipeline.core.common.dates import split_by_date
from memory_pipeline.core.quality import checks as quality
from memory_pipeline.core.represent.build import embed_chunks, embedding_texts, enrich_sessions
from memory_pipeline.core.represent.build import summarize_chunks as summarize_core
from memory_pipeline.core.represent.embedding_text import SUMMARY_LABEL, excerpt_of
from memory_pipeline.core.sessions.stage import session_messages
from memory_pipeline.defs.chunks import CHUNKS
from memory_pipeline.defs.ingest import RAW, _check
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
        ok, meta = _summary_check(written, chunks)
        outside = written.num_rows - sum(written.column("within_target").to_pylist())
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
                _check(SUMMARIES, CHECK_SUMMARIES, (ok, meta)),
                dg.AssetCheckResult(
                    asset_key=SUMMARIES,
                    check_name=CHECK_SUMMARY_LENGTH,
                    passed=outside == 0,
                    severity=dg.AssetCheckSeverity.WARN,
                    metadata={"outside_length_target": outside, "summaries": written.num_rows},
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
                _check(
                    EMBEDDING_TEXTS,
                    CHECK_EMBEDDING_TEXTS,
                    _embedding_text_check(written, chunks, summaries),
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
        missing = set(sessions.column("session_id").to_pylist()) - set(
            written.column("session_id").to_pylist()
        )
        empty = sum(1 for t in written.column("title").to_pylist() if not t.strip())
        return dg.MaterializeResult(
            metadata={"rows": written.num_rows},
            check_results=[
                _check(
                    ENRICHMENT,
                    CHECK_ENRICHMENT,
                    (
                        not missing and not empty and written.num_rows == sessions.num_rows,
                        {"sessions_without_title": len(missing), "empty_titles": empty},
                    ),
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
                _check(
                    EMBEDDINGS,
                    CHECK_VECTORS,
                    vector_check(written, chunks, cfg.dense_representations),
                )
            ],
        )

    return [chunk_summaries, embedding_texts_asset, session_enrichment, chunk_embeddings]


def _write_by_day(store, table_name: str, table, days) -> None:
    for day, part in split_by_date(table, "local_date", list(days)).items():
        store.write(table_name, part, day)


def _pairs(table, key: str, value: str) -> dict:
    return dict(zip(table.column(key).to_pylist(), table.column(value).to_pylist(), strict=True))


def _summary_check(summaries, chunks) -> quality.Result:
    expected = set(chunks.column("chunk_id").to_pylist())
    got = summaries.column("chunk_id").to_pylist()
    empty = sum(1 for s in summaries.column("summary").to_pylist() if not s.strip())
    ok = set(got) == expected and len(got) == len(expected) and not empty
    return ok, {"chunks": len(expected), "summaries": len(got), "empty": empty}


def _embedding_text_check(texts, chunks, summaries) -> quality.Result:
    raw = dict(
        zip(
            chunks.column("chunk_id").to_pylist(),
            chunks.column("raw_text").to_pylist(),
            strict=True,
        )
    )
    summary = dict(
        zip(
            summaries.column("chunk_id").to_pylist(),
            summaries.column("summary").to_pylist(),
            strict=True,
        )
    )
    bad = 0
    for cid, text in zip(
        texts.column("chunk_id").to_pylist(),
        texts.column("embedding_text").to_pylist(),
        strict=True,
    ):
        if SUMMARY_LABEL + summary[cid] not in text or excerpt_of(raw[cid]) not in text:
            bad += 1
    ok = not bad and texts.num_rows == chunks.num_rows
    return ok, {"rows": texts.num_rows, "missing_summary_or_excerpt": bad}


def vector_check(vectors, chunks, representations) -> quality.Result:
    """One vector per (chunk, representation), constant dimension, no NaN, norms ~ 1."""
    expected = {(c, r) for c in chunks.column("chunk_id").to_pylist() for r in representations}
    keys = list(
        zip(
            vectors.column("chunk_id").to_pylist(),
            vectors.column("representation").to_pylist(),
            strict=True,
        )
    )
    problems: dict[str, int] = {
        "missing": len(expected - set(keys)),
        "unexpected": len(set(keys) - expected),
        "duplicates": len(keys) - len(set(keys)),
        "dimensions": len(set(vectors.column("dim").to_pylist())) if vectors.num_rows else 0,
    }
    problems["dimensions"] = max(0, problems["dimensions"] - 1)
    ok_rows = vectors.filter(pc.is_valid(vectors.column("vector")))
    if ok_rows.num_rows:
        dim = ok_rows.column("dim")[0].as_py()
        flat = pc.list_flatten(ok_rows.column("vector")).to_numpy(zero_copy_only=False)
        mat = flat.reshape(-1, dim)
        problems["nan"] = int(np.isnan(mat).any(axis=1).sum())
        norms = np.linalg.norm(mat, axis=1)
        problems["norm_not_1"] = int((np.abs(norms - 1.0) > 1e-3).sum())
    problems["provider_errors"] = vectors.num_rows - vectors.column("error").null_count
    bad = {k: v for k, v in problems.items() if v and k != "provider_errors"}
    return not bad, {"vectors": vectors.num_rows, "problems": problems}
