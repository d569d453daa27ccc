"""raw_messages, quarantine and ingest_audit: one pass over the configured sources."""

import datetime as dt
import time
from collections import Counter
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

from memory_pipeline.config import OwnerSpec, fan_out_owner_id
from memory_pipeline.core.common import tables as T
from memory_pipeline.core.common.contacts import ContactBook
from memory_pipeline.core.common.forget_list import ensure_salt, load_forget_list
from memory_pipeline.core.common.owners import fan_out_by_speaker
from memory_pipeline.core.common.records import Message, SourceError
from memory_pipeline.core.common.state import bind
from memory_pipeline.core.common.storage import TableStore, concat, write_partitions
from memory_pipeline.core.ingest.sources import read_source
from memory_pipeline.core.ingest.stage import read_all_tables, read_all_with, split_ingest
from memory_pipeline.core.privacy.retention import retention_cutoff
from memory_pipeline.core.quality import checks as quality
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
from memory_pipeline.defs.owner_fanout import per_partition
from memory_pipeline.defs.partitions import keys_to_dates
from memory_pipeline.defs.resources import PipelineResource
from memory_pipeline.state import prepare_state

RAW = asset_key(T.RAW_MESSAGES)
QUARANTINE = asset_key(T.QUARANTINE)
AUDIT = asset_key(T.INGEST_AUDIT)

CHECK_IDS_UNIQUE = "message_ids_unique"
CHECK_KEYS_NOT_NULL = "keys_not_null"
CHECK_IN_PARTITION = "timestamps_in_partition"
CHECK_CONSERVATION = "conservation"
CHECK_QUARANTINE_LOCATED = "quarantine_records_located"

INFO = asset_info(
    "ingest", ("python", "parquet"), "memory_pipeline.defs.ingest", "memory_pipeline.core.ingest"
)

KEY_COLUMNS = (
    "message_id",
    "conversation_id",
    "contact_id",
    "sender",
    "ts",
    "local_date",
    "source_ref",
)


def _conversations(_store: TableStore, _day: dt.date, part: pa.Table) -> dict[str, Any]:
    return {"conversations": pc.count_distinct(part.column("conversation_id")).as_py()}


def _reasons(_store: TableStore, _day: dt.date, part: pa.Table) -> dict[str, Any]:
    return {"by_reason": dict(sorted(Counter(part.column("reason").to_pylist()).items()))}


def _audit_counts(_store: TableStore, _day: dt.date, part: pa.Table) -> dict[str, Any]:
    cols = ("records_read", "ingested", "quarantined")
    return {c: int(pc.sum(part.column(c)).as_py() or 0) for c in cols}


# each partition's own figures (the body's are the range's: range_*, see helpers)
PER_DAY = {RAW: _conversations, QUARANTINE: _reasons, AUDIT: _audit_counts}
TABLES = {RAW: T.RAW_MESSAGES, QUARANTINE: T.QUARANTINE, AUDIT: T.INGEST_AUDIT}


def build_ingest(partitions_def: dg.PartitionsDefinition) -> dg.AssetsDefinition:
    """The ingest multi-asset for the configured partitions."""

    @dg.multi_asset(
        specs=[
            dg.AssetSpec(**table_asset(T.RAW_MESSAGES), **INFO),
            dg.AssetSpec(**table_asset(T.QUARANTINE), **INFO),
            dg.AssetSpec(**table_asset(T.INGEST_AUDIT), **INFO),
        ],
        check_specs=[
            check_spec(
                CHECK_IDS_UNIQUE,
                RAW,
                "no message_id occurs twice in the run's partitions (ids are content-derived, "
                "so a duplicate is a re-read record)",
                partitions_def,
                blocking=True,
            ),
            check_spec(
                CHECK_KEYS_NOT_NULL,
                RAW,
                "message_id, conversation_id, contact_id, sender, ts, local_date and "
                "source_ref are never null",
                partitions_def,
                blocking=True,
            ),
            check_spec(
                CHECK_IN_PARTITION,
                RAW,
                "every message's local_date is the partition it is stored in",
                partitions_def,
                blocking=True,
            ),
            check_spec(
                CHECK_CONSERVATION,
                AUDIT,
                "records read = ingested + quarantined, per partition and source",
                partitions_def,
                blocking=True,
            ),
            check_spec(
                CHECK_QUARANTINE_LOCATED,
                QUARANTINE,
                "every quarantined record names its source, file, record and reason, so it "
                "can be found and fixed",
                partitions_def,
            ),
        ],
        partitions_def=partitions_def,
        backfill_policy=dg.BackfillPolicy.single_run(),
        group_name="ingest",
        name="ingest",
    )
    @per_partition(
        TABLES,
        PER_DAY,
        owners=ingest_owners,
    )
    def ingest(context: dg.AssetExecutionContext, pipeline: PipelineResource):
        cfg, store = pipeline.cfg, pipeline.store
        cutoff = retention_cutoff(cfg.retain_days)
        # a partition past retention is never written again (the run purged it)
        days = [d for d in keys_to_dates(context.partition_keys) if cutoff is None or d >= cutoff]
        t0 = time.perf_counter()
        # the state folder (forget list, salt) must be the one this output was built with:
        # a missing one is refused, never rebuilt around (core/common/state.py)
        prepare_state(cfg, writing=True)
        if cutoff is not None:  # expired rows hash their positions with the state's salt
            ensure_salt(cfg.state_root)
            bind(cfg.storage_root, cfg.state_root)
        try:
            forget = load_forget_list(cfg.state_root)
            shared = getattr(pipeline, "records", None)  # a fan-out source's share, read once
            if shared is None:
                result = read_all_tables(
                    cfg.sources,
                    days,
                    cfg.start_date,
                    forget,
                    cutoff,
                    cache_dir=cfg.cache_path.parent,  # parsed records of unchanged exports
                    contacts=ContactBook(cfg.contacts),  # one person across apps
                )
            else:
                result = read_all_with(
                    shared,
                    cfg.sources,
                    days,
                    cfg.start_date,
                    forget,
                    cutoff,
                    contacts=ContactBook(cfg.contacts),
                )
        except SourceError as exc:
            raise dg.Failure(description=str(exc)) from None
        per_day = split_ingest(result, days)
        if cfg.root_dir is not None:  # one owner of many: only days with records are theirs
            per_day = _owned_days(store, per_day)
        # Checks and per-partition figures run on the tables as written (the writes are
        # atomic and cast to the registry schema first): no read of 300 files back.
        written = {
            RAW: {day: t.messages for day, t in per_day.items()},
            QUARANTINE: {day: t.quarantine for day, t in per_day.items()},
            AUDIT: {day: t.audit for day, t in per_day.items()},
        }
        write_partitions(
            store, [(TABLES[k], d, t) for k, p in written.items() for d, t in p.items()]
        )
        messages, quarantine, audit = (
            concat(TABLES[k], list(written[k].values())) for k in (RAW, QUARANTINE, AUDIT)
        )
        reasons = Counter(quarantine.column("reason").to_pylist())
        context.log.info(
            f"ingest: {len(days)} partitions, {messages.num_rows} messages, "
            f"{quarantine.num_rows} quarantined {dict(reasons)} in {time.perf_counter() - t0:.2f}s"
        )
        if messages.num_rows == 0 and audit.num_rows:
            # not an error (the run goes on with empty tables), but never a silent one
            context.log.warning(
                f"ingest: 0 messages ingested of {quarantine.num_rows} records read: "
                "every record is in quarantine"
            )
        checks = [
            check_result(RAW, CHECK_IDS_UNIQUE, quality.unique(messages, "message_id")),
            check_result(RAW, CHECK_KEYS_NOT_NULL, quality.not_null(messages, KEY_COLUMNS)),
            check_result(RAW, CHECK_IN_PARTITION, quality.messages_in_partition(messages, days)),
            check_result(
                AUDIT, CHECK_CONSERVATION, quality.conservation(audit, messages, quarantine)
            ),
            check_result(
                QUARANTINE,
                CHECK_QUARANTINE_LOCATED,
                quality.not_null(quarantine, ("source", "source_file", "record_ref", "reason")),
            ),
        ]
        yield dg.MaterializeResult(
            asset_key=RAW,
            metadata={
                "rows": messages.num_rows,
                "partitions": len(days),
                "conversations": pc.count_distinct(messages.column("conversation_id")).as_py(),
                "path": table_path(store, T.RAW_MESSAGES),
                WRITTEN: Written(written[RAW]),
            },
        )
        yield dg.MaterializeResult(
            asset_key=QUARANTINE,
            metadata={
                "rows": quarantine.num_rows,
                "by_reason": dg.MetadataValue.json(dict(sorted(reasons.items()))),
                "path": table_path(store, T.QUARANTINE),
                WRITTEN: Written(written[QUARANTINE]),
            },
        )
        yield dg.MaterializeResult(
            asset_key=AUDIT,
            metadata={
                "records_read": int(pc.sum(audit.column("records_read")).as_py() or 0),
                "ingested": messages.num_rows,
                "quarantined": quarantine.num_rows,
                WRITTEN: Written(written[AUDIT]),
            },
        )
        yield from checks

    return ingest


def _owned_days(store: Any, per_day: dict[dt.date, Any]) -> dict[dt.date, Any]:
    """The days an owner of a multi-owner deployment is written for: those with records,
    and those they have a partition of already (re-ingesting replaces it, even by an empty
    one), so a day's run writes no empty partitions for owners who did not talk that day."""
    return {
        day: tables
        for day, tables in per_day.items()
        if tables.audit.num_rows or store.has(T.RAW_MESSAGES, day)
    }


def _run_days(context: dg.AssetExecutionContext, cfg: Any) -> list[dt.date]:
    """The run's days ingest writes: those not past retention (as the asset body does)."""
    cutoff = retention_cutoff(cfg.retain_days)
    return [d for d in keys_to_dates(context.partition_keys) if cutoff is None or d >= cutoff]


def ingest_owners(context: dg.AssetExecutionContext, pipeline: PipelineResource) -> list[Any]:
    """The owners one ingest run works on.

    One owner: that owner. Several: every listed owner (their sources are read for them),
    plus, for each fan-out source, every speaker with records on the run's days. A fan-out
    source is read ONCE for everyone (its dialogues then go to both their speakers,
    :func:`fan_out_by_speaker`); a fanned-out owner takes part only in the days they have
    records on, so a day's run never writes empty partitions for a million owners.
    """
    cfg = pipeline.cfg
    if not cfg.multi_owner:
        return pipeline.owner_scopes()
    days = _run_days(context, cfg)
    scopes = {spec.id: pipeline.scope(spec) for spec in cfg.owners}
    for spec in cfg.fan_out_sources:
        try:
            fan = fan_out_by_speaker(read_source(spec, days), spec.options.get("speakers"))
        except SourceError as exc:
            raise dg.Failure(description=str(exc)) from None
        if fan.unassigned:
            context.log.warning(
                f"ingest: {fan.unassigned} quarantine records of {spec.name!r} belong to no "
                "readable dialogue, so to no owner"
            )
        for speaker, records in fan.records.items():
            oid = fan_out_owner_id(spec, speaker)
            if oid not in scopes:
                scopes[oid] = pipeline.scope(OwnerSpec(oid, speaker, (), (spec.name,)))
                scopes[oid].days = []
            scope = scopes[oid]
            scope.records = [*(scope.records or []), *records]
            if scope.days is not None:
                scope.days = sorted(set(scope.days) | _record_days(records, cfg.start_date, days))
        context.log.info(f"ingest: {spec.name!r} read once for {len(fan.records)} owners")
    return [scopes[k] for k in sorted(scopes) if scopes[k].days is None or scopes[k].days]


def _record_days(records: list[Any], start: dt.date, days: list[dt.date]) -> set[dt.date]:
    """The run's days that hold one of ``records`` (a day before start counts as start)."""
    wanted = set(days)
    found = set()
    for rec in records:
        day = rec.local_date if isinstance(rec, Message) else rec.partition_date
        day = start if day is None or day < start else day
        if day in wanted:
            found.add(day)
    return found
