"""bm25_index, vector_index, time_metadata: the published search indexes.

Unpartitioned: BM25 weights depend on the whole corpus, so the indexes are rebuilt over all
chunk partitions (not appended). One op builds a new index version and publishes it
atomically, so the three always describe the same snapshot.
"""

import dagster as dg
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from memory_pipeline.core.indexes.bm25 import Bm25Index
from memory_pipeline.core.indexes.metadata import message_metadata, session_metadata
from memory_pipeline.core.indexes.publish import (
    SESSION_LOOKUP,
    build_bm25,
    build_dense,
    index_root,
    new_version,
    publish,
    representation_table,
    write_lookups,
)
from memory_pipeline.core.memories.extract import supersede
from memory_pipeline.defs.chunks import CHUNKS
from memory_pipeline.defs.ingest import RAW, _check
from memory_pipeline.defs.memories import MEMORIES
from memory_pipeline.defs.representations import EMBEDDING_TEXTS, EMBEDDINGS, SUMMARIES
from memory_pipeline.defs.resources import PipelineResource
from memory_pipeline.defs.sessions import SESSIONS

BM25 = dg.AssetKey("bm25_index")
VECTORS = dg.AssetKey("vector_index")
TIME_META = dg.AssetKey("time_metadata")
MEMORY_INDEX = dg.AssetKey("memory_timeline")

CHECK_BM25_COVERS = "covers_every_chunk_nonempty_vocabulary"
CHECK_POSTINGS = "postings_consistent_with_bm25s"
CHECK_VECTORS = "vector_count_equals_vectors"
CHECK_TIMELINE = "one_timeline_row_per_memory_and_valid_intervals"


@dg.multi_asset(
    specs=[
        dg.AssetSpec(
            BM25,
            deps=[CHUNKS, SUMMARIES, EMBEDDING_TEXTS],
            description="bm25s index per representation + postings table (token, chunk, score).",
        ),
        dg.AssetSpec(
            VECTORS, deps=[EMBEDDINGS], description="Dense matrices (+ HNSW above a size)."
        ),
        dg.AssetSpec(
            TIME_META,
            deps=[SESSIONS, RAW],
            description="Per session and message: session index, response index, speaker, "
            "day name, ISO week, date, time (for time filters).",
        ),
        dg.AssetSpec(
            MEMORY_INDEX,
            deps=[MEMORIES],
            description="Every memory with its validity interval (valid_to / superseded_by set "
            "when a newer memory about the same subject and attribute replaces it); what "
            "memory search and context packs read.",
        ),
    ],
    check_specs=[
        dg.AssetCheckSpec(CHECK_BM25_COVERS, asset=BM25, blocking=True),
        dg.AssetCheckSpec(CHECK_POSTINGS, asset=BM25, blocking=True),
        dg.AssetCheckSpec(CHECK_VECTORS, asset=VECTORS, blocking=True),
        dg.AssetCheckSpec(CHECK_TIMELINE, asset=MEMORY_INDEX, blocking=True),
    ],
    group_name="indexes",
    name="search_indexes",
)
def search_indexes(context: dg.AssetExecutionContext, pipeline: PipelineResource):
    cfg, store = pipeline.cfg, pipeline.store
    chunks = store.read("chunks")
    reps = representation_table(
        chunks, store.read("chunk_summaries"), store.read("embedding_texts")
    )
    root = index_root(cfg.output_dir)
    version = new_version(root)
    bm25 = build_bm25(reps, version, cfg.tokenizer)
    embeddings = store.read("chunk_embeddings") if store.dates("chunk_embeddings") else None
    dense = build_dense(embeddings, version, cfg.hnsw_threshold) if embeddings is not None else {}
    sessions = store.read("sessions")
    messages = store.read("raw_messages")
    smeta = session_metadata(sessions)
    mmeta = message_metadata(messages, sessions, smeta)
    pq.write_table(smeta, version / SESSION_LOOKUP)
    pq.write_table(mmeta, version / "message_meta.parquet")
    # the same chunks the BM25 indexes were built from: the version answers on its own
    lookups = write_lookups(version, chunks, messages)
    memories = store.read("memories")
    timeline = supersede(memories)
    pq.write_table(timeline, version / "memory_timeline.parquet")
    timeline_ok, timeline_meta = _timeline_valid(memories, timeline)
    # checks on the new version before it becomes visible
    n = chunks.num_rows
    covers = all(bm25.stats[f"{r}_docs"] == n for r in reps)
    vocab_ok = all(bm25.stats[f"{r}_vocabulary"] > 0 for r in reps) or n == 0
    consistent, detail = _postings_agree(version, bm25.postings)
    valid_vectors = 0
    if embeddings is not None:
        valid_vectors = embeddings.num_rows - embeddings.column("vector").null_count
    indexed = sum(v for k, v in dense.items() if k.endswith("_vectors"))
    ok = covers and vocab_ok and consistent and indexed == valid_vectors and timeline_ok
    if ok:
        publish(root, version)
        store.write("bm25_postings", bm25.postings)
        store.write("session_meta", smeta)
        store.write("message_meta", mmeta)
        store.write("memory_timeline", timeline)
    context.log.info(
        f"search_indexes: version {version.name} {'published' if ok else 'NOT published'}"
    )
    yield dg.MaterializeResult(
        asset_key=BM25, metadata={**bm25.stats, **lookups, "version": version.name}
    )
    yield dg.MaterializeResult(asset_key=VECTORS, metadata={**dense, "version": version.name})
    yield dg.MaterializeResult(
        asset_key=TIME_META, metadata={"sessions": smeta.num_rows, "messages": mmeta.num_rows}
    )
    yield dg.MaterializeResult(asset_key=MEMORY_INDEX, metadata=timeline_meta)
    yield _check(MEMORY_INDEX, CHECK_TIMELINE, (timeline_ok, timeline_meta))
    yield _check(BM25, CHECK_BM25_COVERS, (covers and vocab_ok, {"chunks": n, **bm25.stats}))
    yield _check(BM25, CHECK_POSTINGS, (consistent, detail))
    yield _check(
        VECTORS,
        CHECK_VECTORS,
        (indexed == valid_vectors, {"indexed": indexed, "vectors": valid_vectors}),
    )


def _postings_agree(version, postings, samples: int = 20) -> tuple[bool, dict]:
    """Sum of postings per chunk equals bm25s's score, for sample queries made of real tokens."""
    worst = 0.0
    checked = 0
    for rep in ("raw_text", "summary", "embedding_text"):
        index = Bm25Index.load(version / "bm25" / rep)
        part = postings.filter(pc.equal(postings.column("representation"), rep))
        if part.num_rows == 0:
            continue
        tokens = part.column("token").to_pylist()
        rng = np.random.default_rng(0)
        for _ in range(samples):
            query = [tokens[i] for i in rng.integers(0, len(tokens), size=3)]
            expected = dict(index._rank(query, len(index.doc_ids)))
            sub = part.filter(pc.is_in(part.column("token"), value_set=pa.array(query)))
            got: dict[str, float] = {}
            for tok, cid, score in zip(
                sub.column("token").to_pylist(),
                sub.column("chunk_id").to_pylist(),
                sub.column("score").to_pylist(),
                strict=True,
            ):
                got[cid] = got.get(cid, 0.0) + score * query.count(tok)
            for cid, score in expected.items():
                worst = max(worst, abs(got.get(cid, 0.0) - score))
            checked += 1
    return worst < 1e-3, {"queries_checked": checked, "max_abs_difference": float(worst)}


def _timeline_valid(memories: pa.Table, timeline: pa.Table) -> tuple[bool, dict]:
    """Nothing lost or added by supersession, and every interval ends after it starts."""
    same = sorted(memories.column("memory_id").to_pylist()) == sorted(
        timeline.column("memory_id").to_pylist()
    )
    ended = timeline.filter(pc.is_valid(timeline.column("valid_to")))
    backwards = (
        pc.sum(pc.less(ended.column("valid_to"), ended.column("valid_from"))).as_py() or 0
        if ended.num_rows
        else 0
    )
    return same and backwards == 0, {
        "memories": memories.num_rows,
        "timeline_rows": timeline.num_rows,
        "superseded": ended.num_rows,
        "intervals_ending_before_start": backwards,
    }
