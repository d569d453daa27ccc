"""bm25_index, vector_index, time_metadata: the published search indexes.

Unpartitioned: BM25 weights depend on the whole corpus, so the indexes are rebuilt over all
chunk partitions (not appended). One op builds a new index version and publishes it
atomically, so the three always describe the same snapshot. The per-document work (token
lists of chunks and turns) is kept per chunk partition, keyed by the digests of the files
it is read from where they decide it, else by content hash (``core/indexes/parts.py``,
``_chunk_files``, ``_message_files``), so a refresh after a new day converts that day only and
assembles the rest from arrays: the same files as a build from scratch. The dense HNSW
graph (above ``hnsw_threshold``) is updated from the published version's graph when it fits
(``core/indexes/hnsw.py``): the new and gone pieces only, not a rebuild.
"""

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow.compute as pc
import pyarrow.parquet as pq

from memory_pipeline.core.common import tables as T
from memory_pipeline.core.common.representations import REPRESENTATIONS
from memory_pipeline.core.common.storage import StagedWrites
from memory_pipeline.core.indexes.bm25 import Bm25Index
from memory_pipeline.core.indexes.bm25_text import DEFAULT_PREFIX
from memory_pipeline.core.indexes.metadata import message_metadata, session_metadata
from memory_pipeline.core.indexes.parts import parts_root
from memory_pipeline.core.indexes.publish import (
    DENSE_COLUMNS,
    SESSION_LOOKUP,
    build_bm25,
    build_dense,
    current_version,
    finish_lookups,
    index_root,
    link_lookups,
    new_version,
    publish,
    representation_arrays,
)
from memory_pipeline.core.indexes.segments import DensePart
from memory_pipeline.core.indexes.splade import build_version_index as build_splade
from memory_pipeline.core.indexes.token_cache import CachedTokenizer
from memory_pipeline.core.indexes.tokenize import get_tokenizer
from memory_pipeline.core.indexes.turns import build_turn_index
from memory_pipeline.core.memories.extract import supersede
from memory_pipeline.core.quality import index_checks
from memory_pipeline.defs.chunks import CHUNKS
from memory_pipeline.defs.compute import DaskResource
from memory_pipeline.defs.helpers import (
    ROW_COUNT,
    asset_info,
    asset_key,
    check_result,
    check_spec,
    code_version,
    table_asset,
)
from memory_pipeline.defs.ingest import RAW
from memory_pipeline.defs.memories import MEMORIES
from memory_pipeline.defs.owner_fanout import inputs_fingerprint, per_owner
from memory_pipeline.defs.representations import EMBEDDING_TEXTS, EMBEDDINGS, SUMMARIES
from memory_pipeline.defs.resources import PipelineResource
from memory_pipeline.defs.sessions import SESSIONS

BM25 = asset_key(T.BM25_POSTINGS)  # bm25_index: the bm25s indexes and their postings table
VECTORS = dg.AssetKey("vector_index")  # dense matrices only: no table
TIME_META = asset_key(T.SESSION_META)  # time_metadata: session_meta and message_meta
MEMORY_INDEX = asset_key(T.MEMORY_TIMELINE)

CHECK_BM25_COVERS = "covers_every_chunk_nonempty_vocabulary"
CHECK_POSTINGS = "postings_consistent_with_bm25s"
CHECK_VECTORS = "vector_count_equals_vectors"
CHECK_TIMELINE = "one_timeline_row_per_memory_and_valid_intervals"
_CODE = ("memory_pipeline.defs.indexes", "memory_pipeline.core.indexes")
# what the message metadata, the lookups and the turn index read of raw_messages
_MESSAGE_COLUMNS = [
    "message_id",
    "conversation_id",
    "sender",
    "local_ts",
    "local_date",
    "text",
    "source_ref",
]


@dg.multi_asset(
    specs=[
        dg.AssetSpec(
            BM25,
            deps=[CHUNKS, SUMMARIES, EMBEDDING_TEXTS],
            description="bm25s index per representation + postings table (token, chunk, score).",
            **asset_info("indexes", ("python", "bm25s", "parquet"), *_CODE),
        ),
        dg.AssetSpec(
            VECTORS,
            deps=[EMBEDDINGS],
            description="Dense matrices (+ HNSW above a size).",
            **asset_info("indexes", ("python", "numpy", "usearch"), *_CODE),
        ),
        dg.AssetSpec(
            TIME_META,
            deps=[SESSIONS, RAW],
            description="Per session and message: session index, response index, speaker, "
            "day name, ISO week, date, time (for time filters).",
            **asset_info("indexes", ("python", "parquet"), *_CODE),
        ),
        dg.AssetSpec(
            **table_asset(T.MEMORY_TIMELINE),
            deps=[MEMORIES],
            **asset_info("indexes", ("python", "parquet"), *_CODE),
        ),
    ],
    check_specs=[
        check_spec(
            CHECK_BM25_COVERS,
            BM25,
            "every chunk is in the BM25 index of every representation and no index has an "
            "empty vocabulary (checked before the version is published)",
            blocking=True,
        ),
        check_spec(
            CHECK_POSTINGS,
            BM25,
            "summed postings per chunk equal bm25s's score on sample queries, so SQL ranking "
            "and the search API agree",
            blocking=True,
        ),
        check_spec(
            CHECK_VECTORS,
            VECTORS,
            "the dense index holds exactly the valid stored vectors (rows without a provider "
            "error), per representation",
            blocking=True,
        ),
        check_spec(
            CHECK_TIMELINE,
            MEMORY_INDEX,
            "supersession loses or adds no memory and every validity interval ends after it starts",
            blocking=True,
        ),
    ],
    group_name="indexes",
    name="search_indexes",
)
@per_owner(
    inputs_fingerprint(
        (
            T.CHUNKS,
            T.CHUNK_SUMMARIES,
            T.EMBEDDING_TEXTS,
            T.CHUNK_EMBEDDINGS,
            T.SESSIONS,
            T.RAW_MESSAGES,
            T.MEMORIES,
        ),
        lambda scope: _index_settings(scope.cfg),
    ),
    name="search_indexes",
)
def search_indexes(
    context: dg.AssetExecutionContext, pipeline: PipelineResource, dask: DaskResource
):
    cfg, store = pipeline.cfg, pipeline.store
    root = index_root(cfg.storage_root)
    previous = current_version(cfg.storage_root)  # read only: its graph is carried over
    version = new_version(root)
    # the lookups: links of the chunks and raw_messages files about to be read (a snapshot:
    # a stored file is replaced, never rewritten), kept if they are still the store's files
    # once read (finish_lookups), else copies of the rows read
    linked = link_lookups(version, store)
    # the vectors, one part per stored partition: a refresh decodes only the partitions
    # whose file changed and takes the rest from the previous version (core/indexes/segments.py)
    vector_days = store.dates(T.CHUNK_EMBEDDINGS)
    dense_parts = [
        DensePart(
            d.isoformat(),
            lambda d=d: store.digest(T.CHUNK_EMBEDDINGS, d),  # sha256, memoized per file
            lambda d=d: store.read(T.CHUNK_EMBEDDINGS, [d], columns=list(DENSE_COLUMNS)),
        )
        for d in vector_days
    ]
    # Four threads beside this one: the dense index (it writes only under version/dense;
    # numpy, Arrow and usearch release the GIL), two for the table reads, the turn index,
    # the lookups, the metadata and the timeline, each writing its own files, and one that
    # encodes the store's tables as they are ready (made visible only after publish); the
    # chunk BM25 indexes are built here. A refresh was one thread's work with the second
    # core idle.
    with StagedWrites(store) as staged:
        with (
            ThreadPoolExecutor(1, thread_name_prefix="dense") as dense_pool,
            ThreadPoolExecutor(2, thread_name_prefix="index") as pool,
        ):
            dense_job = (
                dense_pool.submit(
                    build_dense, dense_parts, version, cfg.hnsw_threshold, previous=previous
                )
                if vector_days
                else None
            )
            # first what the longest task (the turn index) waits for; only the columns the
            # build reads: every partition of these is read on every refresh
            messages = pool.submit(store.read, T.RAW_MESSAGES, columns=_MESSAGE_COLUMNS)
            summaries = pool.submit(
                store.read, T.CHUNK_SUMMARIES, columns=["chunk_id", "summary", "local_date"]
            )
            texts = pool.submit(
                store.read, T.EMBEDDING_TEXTS, columns=["chunk_id", "embedding_text", "local_date"]
            )
            timeline_job = pool.submit(_timeline, store, version, staged)
            # the stored rows with a vector, counted apart from the build (a provider error
            # nulls the vector and records why): what the vectors check compares the index with
            valid_job = pool.submit(
                lambda: (
                    store.read(T.CHUNK_EMBEDDINGS, columns=["error"]).column("error").null_count
                    if vector_days
                    else None
                )
            )
            chunks = store.read(T.CHUNKS)
            bm25, lookups, smeta, mmeta, postings_check = _text_indexes(
                pipeline, dask, version, chunks, (messages, summaries, texts), pool, staged, linked
            )
            memories, timeline = timeline_job.result()
            valid_vectors = valid_job.result()
            dense = dense_job.result() if dense_job is not None else {}
        # checks on the new version before it becomes visible
        timeline_check = index_checks.timeline_valid(memories, timeline)
        covers_check = index_checks.bm25_covers(bm25.stats, REPRESENTATIONS, chunks.num_rows)
        vectors_check = index_checks.vectors_indexed(valid_vectors, dense)
        ok = all(r[0] for r in (covers_check, postings_check, vectors_check, timeline_check))
        if ok:
            publish(root, version)
            staged.commit()  # the store's tables, encoded above: renames now
        # otherwise (a check failed, or an error) leaving the block drops them unreplaced
    context.log.info(
        f"search_indexes: version {version.name} {'published' if ok else 'NOT published'}"
    )
    yield dg.MaterializeResult(
        asset_key=BM25,
        metadata={
            **bm25.stats,
            **lookups,
            "dask_workers": dask.workers() if dask.enabled else 0,
            "version": version.name,
            ROW_COUNT: bm25.postings.num_rows,
        },
    )
    yield dg.MaterializeResult(asset_key=VECTORS, metadata={**dense, "version": version.name})
    yield dg.MaterializeResult(
        asset_key=TIME_META,
        metadata={
            "sessions": smeta.num_rows,
            "messages": mmeta.num_rows,
            ROW_COUNT: smeta.num_rows,
        },
    )
    yield dg.MaterializeResult(
        asset_key=MEMORY_INDEX, metadata={**timeline_check[1], ROW_COUNT: timeline.num_rows}
    )
    yield check_result(MEMORY_INDEX, CHECK_TIMELINE, timeline_check)
    yield check_result(BM25, CHECK_BM25_COVERS, covers_check)
    yield check_result(BM25, CHECK_POSTINGS, postings_check)
    yield check_result(VECTORS, CHECK_VECTORS, vectors_check)


def _timeline(store: Any, version: Path, staged: StagedWrites) -> tuple[Any, Any]:
    """(memories, their timeline after supersession), the timeline written to ``version``
    and staged for the store."""
    memories = store.read(T.MEMORIES)
    timeline = supersede(memories)
    staged.stage(T.MEMORY_TIMELINE, timeline)
    pq.write_table(timeline, version / "memory_timeline.parquet")
    return memories, timeline


def _time_metadata(
    store: Any, version: Path, messages: Any, staged: StagedWrites
) -> tuple[Any, Any]:
    """(session, message) metadata, staged for the store; the session metadata is also
    written to ``version`` (the searcher's time filters read it there). The message
    metadata is the store's table only: nothing reads a version copy of it (SQL reads the
    table), and writing one cost a refresh ~12 MB of Parquet encoding."""
    sessions = store.read(T.SESSIONS)
    smeta = session_metadata(sessions)
    mmeta = message_metadata(messages, sessions, smeta)
    staged.stage(T.SESSION_META, smeta)
    staged.stage(T.MESSAGE_META, mmeta)
    pq.write_table(smeta, version / SESSION_LOOKUP)
    return smeta, mmeta


def _text_indexes(
    pipeline: PipelineResource,
    dask: DaskResource,
    version: Path,
    chunks: Any,
    reads: tuple[Any, Any, Any],
    pool: ThreadPoolExecutor,
    staged: StagedWrites,
    linked: dict | None = None,
) -> tuple[Any, dict, Any, Any, tuple]:
    """The version's time metadata, lookups, BM25 indexes (chunks per representation) and
    turn indexes; returns (the BM25 build, the lookup stats, session and message metadata,
    the postings check).

    ``reads`` are the futures of the messages, summaries and embedding texts, ``linked``
    what :func:`link_lookups` linked before they were read. The chunk
    indexes are built in this thread; the turn index, the lookups and the metadata on
    ``pool`` (each writes its own files of ``version``); the store's tables are staged on
    ``staged``."""
    cfg, store = pipeline.cfg, pipeline.store
    messages_job, summaries, texts = reads
    # token lists per chunk partition, cached by content (core/indexes/parts.py): a
    # refresh converts only changed partitions; forget / retention delete them
    parts = parts_root(cfg.cache_path.parent)
    # the chunk rows in id order (the reps' order), taken once: the lookups, the
    # representations and the analyzer's sample read this copy (sorted_by keeps it)
    by_id = chunks.take(pc.sort_indices(chunks.column("chunk_id")))
    days = by_id.column("local_date")
    with pipeline.content_cache() as cache:  # tokens by content hash: a refresh is cheap
        messages = messages_job.result()
        # the turn index first: the longest task. One analyzer for the chunks, the turns and
        # the queries ("auto": picked from the raw texts, in reps' order, as build_bm25 would)
        sample = by_id.column("raw_text") if cfg.tokenizer == "auto" else None
        tok = get_tokenizer(cfg.tokenizer, sample_texts=sample)
        # one document per message (core/indexes/turns.py), tokenized as the chunk indexes
        # are, through the same token cache (two documents per message: the largest corpus);
        # its own tokenizer object (Sudachi's state is per thread anyway)
        turn_tokenizer = CachedTokenizer(
            get_tokenizer(tok.name, **dict(tok.params)), cache, defer=True
        )
        # on a thread of its own: the longest task starts now, not behind the pool's queue
        turn_pool = ThreadPoolExecutor(1, thread_name_prefix="turns")
        turns = turn_pool.submit(
            lambda: {
                **build_turn_index(
                    version,
                    chunks,
                    messages,
                    turn_tokenizer,
                    parts=parts,
                    sources=_message_files(store),
                ),
                # the turns' SPLADE vectors (English corpora with the packaged weights),
                # cached by text hash beside the token parts: forget drops them with them
                **build_splade(version, chunks, messages, parts / "splade"),
            }
        )
        turn_pool.shutdown(wait=False)  # its thread ends after the task
        # the chunk lookups (the chunks the BM25 indexes are built from: the version
        # answers on its own) and the time metadata
        lookups_job = pool.submit(finish_lookups, version, store, linked, by_id, messages)
        meta_job = pool.submit(_time_metadata, store, version, messages, staged)
        summary_rows, text_rows = summaries.result(), texts.result()
        reps = representation_arrays(by_id, summary_rows, text_rows)
        bm25 = build_bm25(
            reps,
            version,
            tok,
            cache=cache,
            runner=dask.runner(),
            parts=parts,
            days=days,
            sources=_chunk_files(store, by_id, (summary_rows, text_rows)),
        )
        staged.stage(T.BM25_POSTINGS, bm25.postings)
        # checked here, while the turn index is still being built
        postings_check = index_checks.postings_agree(bm25.postings, _bm25_indexes(version))
        lookups = lookups_job.result()
        lookups.update(turns.result())
        turn_tokenizer.flush()  # after the chunk indexes' entries: one order, one cache file
        lookups["turn_tokens_cached"] = turn_tokenizer.hits
        lookups["turn_tokens_computed"] = turn_tokenizer.misses
    smeta, mmeta = meta_job.result()
    return bm25, lookups, smeta, mmeta, postings_check


def _message_files(store: Any) -> dict | None:
    """Each stored ``raw_messages`` partition's file digest (recorded beside the files: a
    stat each), so the turn parts are found by the files their messages are read from
    instead of hashing every message's text (``turns._turn_part``); None on object storage,
    where a digest would download every file."""
    return None if getattr(store, "remote", False) else _file_digests(store, T.RAW_MESSAGES)


def _file_digests(store: Any, table: Any) -> dict:
    """{partition date: its file's sha256} of a stored table (recorded digests: a stat each)."""
    return {d: store.digest(table, d) for d in store.dates(table)}


def _chunk_files(store: Any, by_id: Any, joined: tuple[Any, Any]) -> dict | None:
    """{date: the digests of the ``chunks``, ``chunk_summaries`` and ``embedding_texts``
    files of that partition} for the partitions whose representation texts those files
    decide, so their BM25 parts are found without hashing (or gathering) every text
    (``publish.build_bm25``); None on object storage, where a digest downloads the file.

    A partition's chunks are its own file's rows (the partition key), and so is each of
    their summaries and embedding texts, unless one is found dated otherwise (a row another
    partition's file holds): such a partition is left out and keeps the content key. A
    missing summary ("") is decided by the file too: one written later changes it."""
    if getattr(store, "remote", False):
        return None
    ids, days = by_id.column("chunk_id"), by_id.column("local_date")
    elsewhere: set = set()
    for table in joined:
        dated = table.column("local_date").take(
            pc.index_in(ids, value_set=table.column("chunk_id"))
        )
        off = pc.fill_null(pc.not_equal(dated, days), False)
        elsewhere |= set(pc.unique(days.filter(off)).to_pylist())
    summaries, texts = (_file_digests(store, t) for t in (T.CHUNK_SUMMARIES, T.EMBEDDING_TEXTS))
    return {
        d: "|".join([f"raw:{DEFAULT_PREFIX}", sha, summaries.get(d, "-"), texts.get(d, "-")])
        for d, sha in _file_digests(store, T.CHUNKS).items()
        if d not in elsewhere
    }


def _index_settings(cfg: Any) -> str | None:
    """What besides the tables decides an owner's index: settings and this code's version
    (None when nothing is published yet, so the first build always runs)."""
    if current_version(cfg.storage_root) is None:
        return None
    dense = ",".join(cfg.dense_representations)
    return f"{cfg.tokenizer}|{cfg.hnsw_threshold}|{dense}|{code_version(*_CODE)}"


def _bm25_indexes(version: Path) -> dict[str, Bm25Index]:
    """The BM25 index of every representation in the unpublished ``version`` folder.

    Every representation is loaded unconditionally (a missing index raises), unlike
    ``publish.load_bm25``, which skips missing folders: the postings check must not pass
    over an index the build failed to write.
    """
    return {rep: Bm25Index.load(version / "bm25" / rep) for rep in REPRESENTATIONS}
