"""memories and dossiers: source-linked facts per session, and a living dossier per contact.

``memories[D]`` extracts facts from the sessions of D (rules offline, or an LLM with the same
schema); a candidate whose source messages cannot be resolved goes to ``memory_rejects``,
never into ``memories``. ``dossiers[D]`` is self-dependent: yesterday's dossiers plus D's
sessions and memories give D's, so a range is built as one run folding the days in order
(single-run backfill) and gives the same versions as building night by night.
"""

import datetime as dt
import time
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa

from memory_pipeline.core.common import tables as T
from memory_pipeline.core.common.storage import TableStore
from memory_pipeline.core.memories.extract import count_by_kind
from memory_pipeline.core.memories.stage import (
    DossierChainBroken,
    DossierWrite,
    MemoryBuild,
    build_memories,
    write_dossiers,
)
from memory_pipeline.core.quality import checks as quality
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
from memory_pipeline.defs.providers import (
    PROVIDER_POOL,
    DossierWriterResource,
    MemoryExtractorResource,
)
from memory_pipeline.defs.representations import ENRICHMENT
from memory_pipeline.defs.resources import PipelineResource
from memory_pipeline.defs.sessions import SESSIONS

MEMORIES = asset_key(T.MEMORIES)
DOSSIERS = asset_key(T.DOSSIERS)

CHECK_MEMORY_SOURCES = "memories_cite_existing_messages_of_their_contact"
CHECK_MEMORY_IDS = "memory_ids_unique"
CHECK_DOSSIER_SECTIONS = "dossier_sections_present"
CHECK_DOSSIER_CITATIONS = "dossier_bullets_cite_existing_sessions"
CHECK_DOSSIER_ISOLATION = "dossier_cites_only_its_contact"

GROUP = "memories"
INFO = asset_info(
    "memories",
    ("python", "parquet"),
    "memory_pipeline.defs.memories",
    "memory_pipeline.core.memories",
)


def build_memory_assets(partitions_def: dg.PartitionsDefinition) -> list[dg.AssetsDefinition]:
    """The memories and dossiers assets for the configured partitions."""
    return [_memories_asset(partitions_def), _dossiers_asset(partitions_def)]


# --------------------------------------------------------------------------- memories


def _memory_counts(store: TableStore, day: dt.date, part: pa.Table) -> dict[str, Any]:
    """The partition's own figures (calls, cache hits and seconds are the run's range's)."""
    return {
        "rejected": store.read(T.MEMORY_REJECTS, [day]).num_rows,
        "sessions": store.read(T.SESSIONS, [day]).num_rows,
        "by_kind": {str(k): v for k, v in sorted(count_by_kind(part).items())},
    }


def _dossier_counts(_store: TableStore, _day: dt.date, part: pa.Table) -> dict[str, Any]:
    """The partition's dossier versions are one per contact updated that day."""
    return {"contacts_updated": len(set(part.column("contact_id").to_pylist()))}


def _memories_asset(partitions_def: dg.PartitionsDefinition) -> dg.AssetsDefinition:
    @dg.asset(
        **table_asset(T.MEMORIES),
        deps=[SESSIONS, window_dep(RAW, partitions_def, 0, 1)],
        partitions_def=partitions_def,
        backfill_policy=dg.BackfillPolicy.single_run(),
        pool=PROVIDER_POOL,
        group_name=GROUP,
        check_specs=[
            check_spec(
                CHECK_MEMORY_SOURCES,
                MEMORIES,
                "every memory cites stored messages of its own session's contact",
                partitions_def,
                blocking=True,
            ),
            check_spec(
                CHECK_MEMORY_IDS,
                MEMORIES,
                "no memory_id occurs twice in the run's partitions",
                partitions_def,
                blocking=True,
            ),
        ],
        **INFO,
    )
    @per_partition({MEMORIES: T.MEMORIES}, {MEMORIES: _memory_counts})
    def memories(
        context: dg.AssetExecutionContext,
        pipeline: PipelineResource,
        memory_extractor: MemoryExtractorResource,
    ):
        store = pipeline.store
        days = keys_to_dates(context.partition_keys)
        cache = pipeline.content_cache() if memory_extractor.provider != "rules" else None
        extractor = memory_extractor.build(cache=cache)
        t0 = time.perf_counter()
        built = _extract(store, days, extractor, cache)
        written, rejected = _write_memories(store, built, days)
        kinds = count_by_kind(written)
        seconds = time.perf_counter() - t0
        context.log.info(
            f"memories: {written.num_rows} memories, {rejected.num_rows} rejected, "
            f"{built.sessions.num_rows} sessions in {len(days)} partitions, {seconds:.1f}s"
        )
        return _memories_result(store, written, rejected, built, kinds, extractor, seconds)

    return memories


def _extract(store: TableStore, days: list[dt.date], extractor: Any, cache: Any) -> MemoryBuild:
    """Memories of the sessions of ``days``; closes the extractor's content ``cache`` (if any)
    even when extraction fails, since an open cache holds its database file."""
    try:
        return build_memories(store, days, extractor=extractor)
    finally:
        if cache is not None:
            cache.close()


def _write_memories(
    store: TableStore, built: MemoryBuild, days: list[dt.date]
) -> tuple[pa.Table, pa.Table]:
    """Write memories and rejects per day and read both back: the checks verify the storage."""
    for day, (mem, rejects) in built.per_day.items():
        store.write(T.MEMORIES, mem, day)
        store.write(T.MEMORY_REJECTS, rejects, day)
    return store.read(T.MEMORIES, days), store.read(T.MEMORY_REJECTS, days)


def _memories_result(
    store: TableStore,
    written: pa.Table,
    rejected: pa.Table,
    built: MemoryBuild,
    kinds: dict,
    extractor: Any,
    seconds: float,
) -> dg.MaterializeResult:
    message_ids = set(built.messages.column("message_id").to_pylist())
    return dg.MaterializeResult(
        metadata={
            "rows": written.num_rows,
            "rejected": rejected.num_rows,
            "sessions": built.sessions.num_rows,
            "by_kind": dg.MetadataValue.json({str(k): v for k, v in sorted(kinds.items())}),
            "method": extractor.method if extractor is not None else "rules",
            "provider_calls": extractor.llm.calls if extractor is not None else 0,
            "cache_hits": extractor.cache_hits if extractor is not None else 0,
            "seconds": round(seconds, 2),
            "path": table_path(store, T.MEMORIES),
        },
        check_results=[
            check_result(
                MEMORIES,
                CHECK_MEMORY_SOURCES,
                quality.memories_cite_sources(written, built.sessions, message_ids),
            ),
            check_result(MEMORIES, CHECK_MEMORY_IDS, quality.unique(written, "memory_id")),
        ],
    )


# --------------------------------------------------------------------------- dossiers


def _dossiers_asset(partitions_def: dg.PartitionsDefinition) -> dg.AssetsDefinition:
    @dg.asset(
        **table_asset(T.DOSSIERS),
        deps=[
            dep
            for dep in (
                window_dep(DOSSIERS, partitions_def, -1, -1),
                SESSIONS,
                MEMORIES,
                ENRICHMENT,
                window_dep(RAW, partitions_def, 0, 1),
            )
            if dep is not None
        ],
        partitions_def=partitions_def,
        backfill_policy=dg.BackfillPolicy.single_run(),
        group_name=GROUP,
        check_specs=[
            check_spec(
                CHECK_DOSSIER_SECTIONS,
                DOSSIERS,
                "every dossier version has all its sections",
                partitions_def,
                blocking=True,
            ),
            check_spec(
                CHECK_DOSSIER_CITATIONS,
                DOSSIERS,
                "every dossier bullet cites a stored session",
                partitions_def,
                blocking=True,
            ),
            check_spec(
                CHECK_DOSSIER_ISOLATION,
                DOSSIERS,
                "a contact's dossier cites only that contact's sessions",
                partitions_def,
                blocking=True,
            ),
        ],
        **INFO,
    )
    @per_partition({DOSSIERS: T.DOSSIERS}, {DOSSIERS: _dossier_counts})
    def dossiers(
        context: dg.AssetExecutionContext,
        pipeline: PipelineResource,
        dossier_writer: DossierWriterResource,
    ):
        cfg, store = pipeline.cfg, pipeline.store
        days = keys_to_dates(context.partition_keys)
        t0 = time.perf_counter()
        cache = pipeline.content_cache() if dossier_writer.provider != "rules" else None
        writer = dossier_writer.build(cache=cache)
        try:
            done = _fold_dossiers(store, days, cfg.dossiers_path, writer)
        finally:
            if cache is not None:
                cache.close()
        if writer is not None and writer.rejected:
            # problem kinds only (no dossier text in logs); the rows' method says which
            context.log.warning(
                f"dossiers: {len(writer.rejected)} LLM rewrites rejected, rule pages kept"
            )
        if done.later:
            # a past range was rebuilt: the current files come from later versions; those
            # are now stale and need the range up to the last date rebuilt
            context.log.warning(
                f"dossiers: {len(done.later)} later partitions (up to {done.later[-1]}) were "
                f"built on the old versions; rebuild {days[0]}..{done.later[-1]} to refresh them"
            )
        if done.refolded:
            # a retention purge deleted the chain: it was rebuilt from the first retained day
            context.log.info(
                f"dossiers: rebuilt {len(done.refolded)} partitions outside the range "
                f"({done.refolded[0]}..{done.refolded[-1]}) after a retention purge"
            )
        written = store.read(T.DOSSIERS, sorted({*days, *done.refolded}))
        checks = quality.dossiers_valid(written, _session_contacts(store))
        seconds = time.perf_counter() - t0
        context.log.info(
            f"dossiers: {written.num_rows} versions of {len(done.contacts)} contacts in "
            f"{len(days)} partitions, {seconds:.1f}s"
        )
        return _dossiers_result(cfg.dossiers_path, written, done, checks, seconds, writer)

    return dossiers


def _fold_dossiers(
    store: TableStore, days: list[dt.date], folder: Path, writer: Any = None
) -> DossierWrite:
    """Fold the dossiers of ``days`` in order and write them; a gap in the chain of earlier
    dossiers stops the run (Dagster failure) rather than silently dropping days, except the
    one a retention purge leaves, which the fold rebuilds from the first retained day."""
    try:
        return write_dossiers(store, days, folder, writer)
    except DossierChainBroken as exc:
        raise dg.Failure(str(exc)) from None


def _session_contacts(store: TableStore) -> dict[str, str]:
    """Every stored session id -> its contact: a dossier may cite sessions of any date."""
    sessions = store.read(T.SESSIONS, columns=["session_id", "contact_id"])
    return dict(
        zip(
            sessions.column("session_id").to_pylist(),
            sessions.column("contact_id").to_pylist(),
            strict=True,
        )
    )


def _dossiers_result(
    folder: Path,
    written: pa.Table,
    done: DossierWrite,
    checks: dict[str, quality.Result],
    seconds: float,
    writer: Any = None,
) -> dg.MaterializeResult:
    llm = {}
    if writer is not None:
        llm = {
            "writer": writer.method,
            "llm_accepted": writer.accepted,
            "llm_rejected": len(writer.rejected),
            "llm_rejections": dg.MetadataValue.json(
                [
                    {"contact_id": c, "date": d, "problems": list(k)}
                    for c, d, k in writer.rejected[:50]
                ]
            ),
            "provider_calls": writer.llm.calls,
            "cache_hits": writer.cache_hits,
        }
    return dg.MaterializeResult(
        metadata={
            **llm,
            "versions": written.num_rows,
            "contacts_updated": len(done.contacts),
            "files_written": 0 if done.later else len(done.contacts),
            "refolded_partitions": len(done.refolded),
            "seconds": round(seconds, 2),
            "dossier_dir": dg.MetadataValue.path(str(folder)),
        },
        check_results=[
            check_result(DOSSIERS, CHECK_DOSSIER_SECTIONS, checks["sections"]),
            check_result(DOSSIERS, CHECK_DOSSIER_CITATIONS, checks["citations"]),
            check_result(DOSSIERS, CHECK_DOSSIER_ISOLATION, checks["isolation"]),
        ],
    )
