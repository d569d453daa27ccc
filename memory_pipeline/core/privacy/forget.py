"""Forget a contact: find every trace of their conversations, then remove it.

A personal memory holds other people's words; deleting a person has to reach every copy,
not only the current tables. ``plan_forget`` is read-only (what the CLI prints without
``--yes``); ``apply_forget`` lists the contact on the forget list *first* (so a crash midway
still keeps ingest from bringing them back), then:

- rewrites every partition of every date-partitioned table without the contact's rows
  (by contact, conversation, session and chunk id); their raw messages and quarantine rows
  become text-free ``forgotten`` quarantine rows and the audit moves them from ``ingested``
  to ``quarantined``, exactly what a re-run of ingest with the list produces;
- deletes every index version (not only CURRENT), the unpartitioned derived tables (BM25
  postings, time metadata, memory timeline, storage report), the DuckDB warehouse and the
  evaluation folder: they are rebuilt from the cleaned tables by the index, storage,
  evaluation and warehouse stages (the CLI and the Dagster job run them);
- deletes provider-cache entries keyed by the hashes of the contact's chunk texts, summaries
  and embedding texts, and any cached text/JSON payload that quotes one of their messages,
  then checkpoints and VACUUMs so no freed page or WAL frame keeps the text;
- rewrites the parsed-record cache of the exports (``core/ingest/file_cache.py``) so the
  contact's records are only their text-free ``forgotten`` rows there too;
- deletes the index's per-partition token parts (``core/indexes/parts.py``, under the
  cache folder): the next index build recomputes them from the cleaned tables;
- deletes the contact's dossier ``.md`` file;
- rewrites the owner's inbox (messages apps posted, ``core/ingest/inbox.py``, in the state) so the
  contact's messages are only text-free lines there.

Every scan and deletion of the storage of record goes through ``core/common/fs.py``, so an
``s3://`` output loses the contact's objects too (and the local copies of its index
versions); ``work_dir`` is the local folder of the warehouse and the evaluation outputs
(the output folder itself when it is local).
"""

from __future__ import annotations

import datetime as dt
import shutil
import sqlite3
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from memory_pipeline.core.common import fs, timeutil
from memory_pipeline.core.common import tables as T
from memory_pipeline.core.common.forget_list import (
    ForgetList,
    file_key,
    forgotten_record,
    load_forget_list,
    save_forget_list,
)
from memory_pipeline.core.common.fs import Location
from memory_pipeline.core.common.ids import text_hash
from memory_pipeline.core.common.names import match_key
from memory_pipeline.core.common.owners import owner_store
from memory_pipeline.core.common.state import bind
from memory_pipeline.core.common.storage import TableStore
from memory_pipeline.core.indexes.parts import drop_parts
from memory_pipeline.core.indexes.publish import drop_local_copies, index_root, list_versions
from memory_pipeline.core.ingest.file_cache import scrub as scrub_ingest_cache
from memory_pipeline.core.ingest.inbox import InboxStore, inbox_dir
from memory_pipeline.core.ingest.normalize import quarantine_table
from memory_pipeline.core.memories.dossier import contact_file_name

# Derived tables rebuilt over everything stored: deleted, then recomputed without the contact.
REBUILT_TABLES = (
    T.BM25_POSTINGS,
    T.SESSION_META,
    T.MESSAGE_META,
    T.MEMORY_TIMELINE,
    T.STORAGE_REPORT,
)
# How each partitioned table's rows point at the contact (besides contact_id).
_ROW_KEYS = {
    T.QUARANTINE: "conversation_id",
    T.CHUNK_SUMMARIES: "chunk_id",
    T.EMBEDDING_TEXTS: "chunk_id",
    T.SESSION_ENRICHMENT: "session_id",
    T.CHUNK_EMBEDDINGS: "chunk_id",
    T.MEMORY_REJECTS: "session_id",
}
MIN_QUOTE_CHARS = 8  # a cached payload quoting a message text this long is the contact's


class UnknownContact(LookupError):
    """No stored conversation is with that contact."""


@dataclass
class ForgetPlan:
    """What forgetting one contact removes (counts and paths only: safe to print)."""

    contact_id: str
    output_dir: Location
    # every stored spelling of the contact (core/common/names.py match_key: Unicode form,
    # case, surrounding spaces), matched the way ingest's forget list matches them
    contact_ids: set[str] = field(default_factory=set)
    conversations: set[str] = field(default_factory=set)
    files: set[tuple[str, str]] = field(default_factory=set)
    session_ids: set[str] = field(default_factory=set)
    chunk_ids: set[str] = field(default_factory=set)
    texts: set[str] = field(default_factory=set)  # message and derived texts, never printed
    text_hashes: set[str] = field(default_factory=set)
    rows: dict[tuple[str, dt.date], int] = field(default_factory=dict)
    index_versions: list[Location] = field(default_factory=list)
    rebuilt: list[Location] = field(default_factory=list)
    cache_path: Path | None = None
    cache_entries: int = 0
    dossier_files: list[Location] = field(default_factory=list)
    work_dir: Path | None = None  # warehouse + eval; None = output_dir (a local output)
    # where the forget list and its salt live (core/common/state.py); None = output_dir
    state_dir: Location | None = None
    # the owner's inbox (local); None = ``<state_dir>/inbox`` when the state is local
    inbox: Path | None = None

    def summary_lines(self) -> list[str]:
        """Human-readable lines: tables/partitions/rows, versions, cache, files."""
        per_table: Counter[str] = Counter()
        parts: Counter[str] = Counter()
        for (name, _), n in self.rows.items():
            per_table[name] += n
            parts[name] += 1
        out = [f"contact {self.contact_id}: {len(self.conversations)} conversations"]
        for name, n in per_table.items():
            out.append(f"  table {name}: {n} rows in {parts[name]} partitions")
        out.append(f"  index versions: {len(self.index_versions)} (all deleted, then rebuilt)")
        out.extend(f"  rebuilt after deletion: {p}" for p in self.rebuilt)
        out.append(f"  provider-cache entries: {self.cache_entries}")
        out.extend(f"  dossier file: {p}" for p in self.dossier_files)
        return out


def resolve_contact(store: TableStore, name: str) -> str:
    """The stored contact_id for ``name``: exact id, else the id or dossier name that
    matches it as the forget list matches names (``match_key``: Unicode form, case,
    surrounding spaces)."""
    ids = _stored_contacts(store)
    if name in ids:
        return name
    key = match_key(name)
    folded = {c for c in ids if match_key(c) == key}
    if len({match_key(c) for c in folded}) == 1:
        return min(folded)  # spellings of one contact: the plan takes them all
    if not folded and store.dates(T.DOSSIERS):
        dossiers = store.read(T.DOSSIERS, columns=["contact_id", "name"]).to_pylist()
        folded = {r["contact_id"] for r in dossiers if match_key(r["name"]) == key}
    if len(folded) == 1:
        return folded.pop()
    if folded:
        raise UnknownContact(f"{name!r} matches several contacts; pass the contact_id")
    raise UnknownContact(f"no stored conversation is with contact {name!r}")


def _stored_contacts(store: TableStore) -> set[str]:
    ids = set(store.read(T.RAW_MESSAGES, columns=["contact_id"]).column(0).to_pylist())
    ids |= set(store.read(T.DOSSIERS, columns=["contact_id"]).column(0).to_pylist())
    return {c for c in ids if c}


def _partitioned() -> list[T.Table]:
    return [t for t in T.REGISTRY if t.partitioned]


def _mask(t: T.Table, data: pa.Table, plan: ForgetPlan) -> pa.Array:
    """True for the rows of ``data`` that belong to the contact."""
    names = data.schema.names
    hit = pa.array([False] * data.num_rows, pa.bool_())
    if "contact_id" in names:
        ids = pa.array(sorted(plan.contact_ids | {plan.contact_id}), pa.string())
        hit = pc.or_(hit, pc.fill_null(pc.is_in(data["contact_id"], ids), False))
    if "conversation_id" in names and plan.conversations:
        conv = pc.is_in(data["conversation_id"], pa.array(sorted(plan.conversations)))
        hit = pc.or_(hit, pc.fill_null(conv, False))
    key = _ROW_KEYS.get(t)
    ids = {"chunk_id": plan.chunk_ids, "session_id": plan.session_ids}.get(key or "")
    if key and ids and key in names:
        hit = pc.or_(hit, pc.fill_null(pc.is_in(data[key], pa.array(sorted(ids))), False))
    if t is T.QUARANTINE and plan.files:
        keys = [
            file_key(s, f)
            for s, f in zip(
                data["source"].to_pylist(), data["source_file"].to_pylist(), strict=True
            )
        ]
        wanted = {file_key(s, f) for s, f in plan.files}
        hit = pc.or_(hit, pa.array([k in wanted for k in keys], pa.bool_()))
    return hit


def plan_forget(
    output_dir: Location,
    contact: str,
    *,
    dossier_dir: Location,
    cache_path: Path,
    work_dir: Path | None = None,
    state_dir: Location | None = None,
    inbox: Path | None = None,
) -> ForgetPlan:
    """Everything forgetting ``contact`` would remove; changes nothing."""
    # the marker naming the folder's owner is local: in work_dir when the data is remote
    store = owner_store(work_dir or output_dir, storage=output_dir)
    plan = ForgetPlan(
        resolve_contact(store, contact),
        fs.normalize(output_dir),
        cache_path=cache_path,
        work_dir=work_dir,
        state_dir=state_dir,
        inbox=inbox,
    )
    key = match_key(plan.contact_id)
    plan.contact_ids = {c for c in _stored_contacts(store) if match_key(c) == key}
    plan.contact_ids.add(plan.contact_id)
    spellings = pa.array(sorted(plan.contact_ids), pa.string())
    msgs = store.read(T.RAW_MESSAGES)
    mine = msgs.filter(pc.fill_null(pc.is_in(msgs["contact_id"], spellings), False))
    plan.conversations = set(mine["conversation_id"].to_pylist())
    plan.files = set(zip(mine["source"].to_pylist(), mine["source_file"].to_pylist(), strict=True))
    plan.texts |= {t for t in mine["text"].to_pylist() if t}
    sessions = store.read(T.SESSIONS, columns=["session_id", "contact_id"])
    plan.session_ids = set(
        sessions.filter(pc.fill_null(pc.is_in(sessions["contact_id"], spellings), False))[
            "session_id"
        ].to_pylist()
    )
    quarantine = store.read(T.QUARANTINE)
    for t in _partitioned():
        for day in store.dates(t):
            data = store.read(t, [day])
            n = pc.sum(_mask(t, data, plan).cast(pa.int64())).as_py() or 0
            if t is T.CHUNKS and n:
                rows = data.filter(_mask(t, data, plan))
                plan.chunk_ids |= set(rows["chunk_id"].to_pylist())
            if n:
                plan.rows[(t.name, day)] = n
    # derived texts: what a provider saw (cache keys) and may have echoed back (payloads)
    for t, col in (
        (T.CHUNKS, "raw_text"),
        (T.CHUNK_SUMMARIES, "summary"),
        (T.EMBEDDING_TEXTS, "embedding_text"),
    ):
        data = store.read(t, columns=["chunk_id", col])
        rows = data.filter(
            pc.is_in(data["chunk_id"], pa.array(sorted(plan.chunk_ids), pa.string()))
        )
        derived = [v for v in rows[col].to_pylist() if v]
        plan.text_hashes |= {text_hash(v) for v in derived}
    if store.dates(T.CHUNK_EMBEDDINGS):
        emb = store.read(T.CHUNK_EMBEDDINGS, columns=["chunk_id", "text_hash"])
        rows = emb.filter(pc.is_in(emb["chunk_id"], pa.array(sorted(plan.chunk_ids), pa.string())))
        plan.text_hashes |= set(rows["text_hash"].to_pylist())
    excerpts = quarantine.filter(_mask(T.QUARANTINE, quarantine, plan))["raw"].to_pylist()
    plan.texts |= {x for x in excerpts if x}
    plan.index_versions = list_versions(index_root(output_dir))
    plan.rebuilt = derived_outputs(store, work_dir or Path(output_dir))
    plan.cache_entries = len(_cache_victims(cache_path, plan)) if cache_path.is_file() else 0
    dossiers = [fs.join(dossier_dir, contact_file_name(c)) for c in sorted(plan.contact_ids)]
    plan.dossier_files = [d for d in dossiers if fs.is_file(d)]
    return plan


def derived_outputs(store: TableStore, work_dir: Path) -> list[Location]:
    """The rebuilt tables present in the store, and the warehouse and evaluation folder in
    the local working folder."""
    out = [p for p in (store.table_dir(t) for t in REBUILT_TABLES) if fs.exists(p)]
    return out + [p for p in (work_dir / "warehouse.duckdb", work_dir / "eval") if p.exists()]


def _cache_victims(cache_path: Path, plan: ForgetPlan) -> set[tuple[str, str]]:
    """(key, text_hash) of cache entries derived from the contact's texts."""
    quotes = [t for t in plan.texts if len(t) >= MIN_QUOTE_CHARS]
    found: set[tuple[str, str]] = set()
    # a dry run must not write: with no WAL file the database is complete and opened
    # immutable (a plain reader would create -wal/-shm files beside it)
    wal = cache_path.with_name(cache_path.name + "-wal")
    mode = "ro" if wal.exists() else "ro&immutable=1"
    con = sqlite3.connect(f"{cache_path.resolve().as_uri()}?mode={mode}", uri=True)
    try:
        for key, h, kind, payload in con.execute(
            "SELECT key, text_hash, kind, payload FROM cache_entries"
        ):
            if h in plan.text_hashes:
                found.add((key, h))
            elif kind != "vector":
                text = bytes(payload).decode("utf-8", "replace")
                if any(q in text for q in quotes):
                    found.add((key, h))
    finally:
        con.close()
    return found


def purge_cache(cache_path: Path, plan: ForgetPlan) -> int:
    """Delete the provider-cache entries keyed by or quoting ``plan``'s texts, then checkpoint
    and VACUUM so no freed page or WAL frame keeps them; the number deleted."""
    victims = _cache_victims(cache_path, plan)
    con = sqlite3.connect(str(cache_path), isolation_level=None)
    try:
        con.execute("PRAGMA secure_delete=ON")
        con.execute("BEGIN IMMEDIATE")
        con.executemany(
            "DELETE FROM cache_entries WHERE key = ? AND text_hash = ?", sorted(victims)
        )
        con.execute("COMMIT")
        # freed pages and WAL frames would still hold the payloads
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.execute("VACUUM")
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        con.close()
    return len(victims)


def apply_forget(plan: ForgetPlan, *, today: dt.date | None = None) -> ForgetList:
    """Remove everything ``plan`` lists and put the contact on the forget list."""
    today = today or timeutil.utc_today()  # the pipeline's one clock (UTC)
    out = plan.output_dir
    state = plan.state_dir if plan.state_dir is not None else out
    forget = load_forget_list(state, create=True)
    for contact in sorted(plan.contact_ids | {plan.contact_id}):
        forget.add("contact", contact, today)
    for conv in sorted(plan.conversations):
        forget.add("conversation", conv, today)
    for source, file in sorted(plan.files):
        forget.add("file", file_key(source, file), today)
    save_forget_list(state, forget)
    if state != out:  # the output now needs this state: a missing one is refused
        bind(out, state)
    # parsed export records (core/ingest/file_cache.py) hold the contact's texts too
    scrub_ingest_cache(_cache_dir(out, plan.cache_path, plan.work_dir), forget)
    # so do the index's per-partition token parts (core/indexes/parts.py): a cache, rebuilt
    drop_parts(_cache_dir(out, plan.cache_path, plan.work_dir))
    # and the messages apps posted (core/ingest/inbox.py): kept only as text-free lines
    scrub_inbox(plan, forget)

    store = owner_store(plan.work_dir or out, storage=out)
    moved: Counter[tuple[dt.date, str]] = Counter()  # messages turned into forgotten rows
    for name, day in sorted(plan.rows, key=lambda k: (k[1], k[0])):
        t = T.table(name)
        data = store.read(t, [day])
        hit = _mask(t, data, plan)
        gone, kept = data.filter(hit), data.filter(pc.invert(hit))
        if t is T.RAW_MESSAGES:
            forgotten = [
                forgotten_record(
                    forget,
                    r["source"],
                    r["conversation_id"],
                    r["source_file"],
                    r["source_ref"],
                    day,
                )
                for r in gone.select(
                    ["source", "conversation_id", "source_file", "source_ref"]
                ).to_pylist()
            ]
            moved.update((day, r.source) for r in forgotten)
            _append_quarantine(store, day, forgotten)
        elif t is T.QUARANTINE:
            forgotten = [
                forgotten_record(
                    forget,
                    r["source"],
                    r["conversation_id"] or "",
                    r["source_file"],
                    r["record_ref"],
                    day,
                )
                for r in gone.select(
                    ["source", "conversation_id", "source_file", "record_ref"]
                ).to_pylist()
            ]
            kept = pa.concat_tables([kept, quarantine_table(forgotten).cast(kept.schema)])
        store.write(t, kept, day)
    for day, source in sorted(moved):
        _move_in_audit(store, day, source, moved[(day, source)])
    drop_derived(out, plan.index_versions, plan.rebuilt, plan.work_dir)
    if plan.cache_path is not None and plan.cache_path.is_file():
        purge_cache(plan.cache_path, plan)
    for p in plan.dossier_files:
        fs.delete_file(p)
    return forget


def scrub_inbox(plan: ForgetPlan, forget: ForgetList) -> int:
    """Turn the forgotten messages of the owner's inbox (local, in the state folder: it is
    source data) into text-free lines; the number replaced."""
    folder = plan_inbox(plan.inbox, plan.state_dir, plan.output_dir)
    return InboxStore(folder, "UTC").scrub(forget) if folder is not None else 0


def plan_inbox(inbox: Path | None, state_dir: Location | None, output: Location) -> Path | None:
    """The inbox a plan rewrites: the one given, else ``<state>/inbox`` when the state
    folder (default: the output folder) is local; None when there is none to touch."""
    if inbox is not None:
        return Path(inbox)
    state = state_dir if state_dir is not None else output
    return None if fs.is_remote(state) else inbox_dir(Path(state))


def _cache_dir(output_dir: Location, cache_path: Path | None, work_dir: Path | None = None) -> Path:
    """The pipeline's local cache folder: the provider cache's, else ``<work>/cache`` (the
    work folder when the data is remote, the output folder itself when it is local)."""
    if cache_path is not None:
        return cache_path.parent
    return Path(work_dir if work_dir is not None else output_dir) / "cache"


def drop_derived(
    output_dir: Location,
    index_versions: Iterable[Location],
    rebuilt: Iterable[Location],
    work_dir: Path | None = None,
) -> None:
    """Delete what was derived from removed rows and is rebuilt from what is left: every index
    version, CURRENT and half-built leftovers (nothing is published afterwards), the local
    copies of a remote index, the unpartitioned derived tables and evaluation outputs, and
    the warehouse file (in ``work_dir``, default the output folder)."""
    for version in index_versions:
        fs.delete_tree(version)
    root = index_root(output_dir)
    if fs.is_remote(root):
        fs.delete_tree(root)
        drop_local_copies(root)
    elif Path(root).is_dir():
        for p in Path(root).iterdir():
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    for p in rebuilt:
        if fs.is_remote(p):
            if not fs.delete_file(p):
                fs.delete_tree(p)
        else:
            p = Path(p)
            shutil.rmtree(p) if p.is_dir() else p.unlink(missing_ok=True)
    for p in Path(work_dir or output_dir).glob("warehouse.duckdb*"):
        p.unlink(missing_ok=True)


def _append_quarantine(store: TableStore, day: dt.date, rows: list) -> None:
    if not rows:
        return
    current = store.read(T.QUARANTINE, [day])
    store.write(
        T.QUARANTINE, pa.concat_tables([current, quarantine_table(rows).cast(current.schema)]), day
    )


def _move_in_audit(store: TableStore, day: dt.date, source: str, n: int) -> None:
    """``n`` records of (day, source) now counted as quarantined instead of ingested."""
    audit = store.read(T.INGEST_AUDIT, [day]).to_pylist()
    for row in audit:
        if row["source"] == source:
            row["ingested"] -= n
            row["quarantined"] += n
    store.write(T.INGEST_AUDIT, pa.Table.from_pylist(audit, schema=T.INGEST_AUDIT.schema), day)


def forgotten_entries(state_dir: Location) -> list[dict]:
    """The forget list (in the state folder) as kind, salted hash and date: never a name."""
    return [dict(e) for e in load_forget_list(state_dir).entries]
