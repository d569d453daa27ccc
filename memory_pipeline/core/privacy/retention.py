"""Retention: ``[privacy] retain_days`` purges every partition older than the cutoff.

Old chats hold other people's words for longer than anyone agreed to; a retention window
bounds that. The purge reuses the forget machinery (``core/privacy/forget.py``): where forget
removes one contact's rows from every partition, retention removes whole date partitions
(every date-partitioned table of ``T.REGISTRY``, dates < cutoff), then, exactly as forget
does, deletes every index version, the unpartitioned derived tables, the warehouse and the
evaluation folder (the run that follows rebuilds them from what is left) and the
provider-cache entries derived from the purged texts, and the purged dates' index token
parts (``core/indexes/parts.py``). Ingest drops records older than the
cutoff as text-free ``expired`` rows (``core/ingest/normalize.py``), so re-running over the
same exports never brings a purged date back.

Each purge appends one entry to ``<state>/privacy/retention_log.json`` (history: it lives
in the state folder, core/common/state.py): the day it ran,
the cutoff, the purged dates, rows per table, one row per purged partition and table, and
the input records (messages + quarantine rows) that expired — counts only, never text or
names. The expired records leave the ingest audit with their partitions; this log is where
they are accounted.

The dossier fold is the one derived chain a purge cuts: every dossier partition goes (see
``plan_retention``) and the purge marks the cutoff as the fold's new start
(``core/memories/stage.py``, ``mark_refold``), so whatever range the next run or the nightly
job builds, its dossiers fold from the empty state at the first retained partition and every
retained day's dossiers are rebuilt, as a clean build over only the retained data would.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from memory_pipeline.core.common import fs, timeutil
from memory_pipeline.core.common import tables as T
from memory_pipeline.core.common.forget_list import ensure_salt, load_forget_list, privacy_dir
from memory_pipeline.core.common.fs import Location
from memory_pipeline.core.common.ids import text_hash
from memory_pipeline.core.common.state import bind
from memory_pipeline.core.common.storage import TableStore, write_text_atomic
from memory_pipeline.core.indexes.parts import drop_parts
from memory_pipeline.core.indexes.publish import index_root, list_versions
from memory_pipeline.core.ingest.file_cache import scrub as scrub_ingest_cache
from memory_pipeline.core.ingest.inbox import InboxStore
from memory_pipeline.core.memories.stage import mark_refold, refold_from
from memory_pipeline.core.privacy.forget import (
    ForgetPlan,
    _cache_dir,
    derived_outputs,
    drop_derived,
    plan_inbox,
    purge_cache,
)

LOG_FILE = "retention_log.json"
# where a purged partition's words are: message texts and excerpts (quoted in cache payloads)
_TEXT_COLUMNS = {T.RAW_MESSAGES: "text", T.QUARANTINE: "raw"}
# where the input records are: every record is a message or a quarantine row
_RECORD_TABLES = {T.RAW_MESSAGES.name, T.QUARANTINE.name}
# derived texts whose hashes key provider-cache entries
_HASHED_COLUMNS = {
    T.CHUNKS: "raw_text",
    T.CHUNK_SUMMARIES: "summary",
    T.EMBEDDING_TEXTS: "embedding_text",
}


def today() -> dt.date:
    """Today's date on the pipeline's clock: UTC, the clock ``memory-pipeline run`` plans
    its partition range with (a local date would move the cutoff a day away from the range
    around midnight). A module function so tests can move "today" (monkeypatch it)."""
    return timeutil.utc_today()


def retention_cutoff(retain_days: int | None, on: dt.date | None = None) -> dt.date | None:
    """The first date kept: ``on`` (default today) minus ``retain_days``; None when off."""
    if retain_days is None:
        return None
    return (on or today()) - dt.timedelta(days=retain_days)


@dataclass
class RetentionPlan:
    """What a purge removes: partitions (as row counts), derived files, cache entries."""

    output_dir: Location
    cutoff: dt.date
    rows: dict[tuple[str, dt.date], int] = field(default_factory=dict)
    index_versions: list[Location] = field(default_factory=list)
    rebuilt: list[Location] = field(default_factory=list)
    cache_path: Path | None = None
    dossier_dir: Location | None = None
    work_dir: Path | None = None  # warehouse + eval; None = output_dir (a local output)
    dossier_partitions: list[dt.date] = field(default_factory=list)  # cumulative: all rebuilt
    refold: bool = False  # dossiers existed: the next fold rebuilds them from the cutoff
    state_dir: Location | None = None  # salt, forget list, purge log; None = output_dir
    inbox: Path | None = None  # the owner's inbox (local); None = <state_dir>/inbox if local
    texts: set[str] = field(default_factory=set)  # never logged: matched in cache payloads
    text_hashes: set[str] = field(default_factory=set)

    @property
    def dates(self) -> list[dt.date]:
        return sorted({day for _, day in self.rows})

    def log_entry(self, ran_on: dt.date) -> dict:
        """The counts-only record of this purge."""
        per_table: Counter[str] = Counter()
        for (name, _), n in self.rows.items():
            per_table[name] += n
        return {
            "ran_on": ran_on.isoformat(),
            "cutoff": self.cutoff.isoformat(),
            "dates": [d.isoformat() for d in self.dates],
            "rows": dict(sorted(per_table.items())),
            # one row per purged partition and table: what each stored partition held
            "partitions": [
                {"date": day.isoformat(), "table": name, "rows": n}
                for (name, day), n in sorted(self.rows.items(), key=lambda kv: kv[0][::-1])
            ],
            "records_expired": sum(
                n for (name, _), n in self.rows.items() if name in _RECORD_TABLES
            ),
            "dossier_versions_rebuilt": len(self.dossier_partitions),
        }


def plan_retention(
    output_dir: Location,
    cutoff: dt.date,
    *,
    cache_path: Path | None = None,
    dossier_dir: Location | None = None,
    work_dir: Path | None = None,
    state_dir: Location | None = None,
    inbox: Path | None = None,
) -> RetentionPlan:
    """Every partition older than ``cutoff`` and what derives from it; changes nothing.

    A dossier partition is cumulative (each builds on the previous one), so a retained one
    still quotes purged memories: every dossier partition and ``.md`` file goes, and the run
    that follows rebuilds them from the retained memories.
    """
    store = TableStore(output_dir)
    plan = RetentionPlan(
        fs.normalize(output_dir),
        cutoff,
        cache_path=cache_path,
        dossier_dir=dossier_dir,
        work_dir=work_dir,
        state_dir=state_dir,
        inbox=inbox,
    )
    for t in (t for t in T.REGISTRY if t.partitioned):
        old = [d for d in store.dates(t) if d < cutoff]
        for day in old:
            plan.rows[(t.name, day)] = store.read(t, [day]).num_rows
        if not old:
            continue
        if t in _TEXT_COLUMNS:
            col = store.read(t, old, columns=[_TEXT_COLUMNS[t]]).column(0).to_pylist()
            plan.texts |= {v for v in col if v}
        if t in _HASHED_COLUMNS:
            col = store.read(t, old, columns=[_HASHED_COLUMNS[t]]).column(0).to_pylist()
            plan.text_hashes |= {text_hash(v) for v in col if v}
        if t is T.CHUNK_EMBEDDINGS:
            col = store.read(t, old, columns=["text_hash"]).column(0).to_pylist()
            plan.text_hashes |= {v for v in col if v}
    if not plan.rows:
        return plan  # nothing old: derived files stay, the run does not rebuild for nothing
    plan.dossier_partitions = [d for d in store.dates(T.DOSSIERS) if d >= cutoff]
    plan.refold = bool(store.dates(T.DOSSIERS)) or refold_from(store) is not None
    plan.index_versions = list_versions(index_root(output_dir))
    plan.rebuilt = derived_outputs(store, work_dir or Path(output_dir))
    return plan


def apply_retention(plan: RetentionPlan, *, ran_on: dt.date | None = None) -> dict | None:
    """Delete what ``plan`` lists and log it; the log entry, or None when nothing was old.
    The owner's inbox (what apps posted, kept locally) loses its day files before the
    cutoff in any case."""
    folder = plan_inbox(plan.inbox, plan.state_dir, plan.output_dir)
    if folder is not None:
        InboxStore(folder, "UTC").purge_before(plan.cutoff)
    if not plan.rows:
        return None
    store = TableStore(plan.output_dir)
    for name, day in sorted(plan.rows):
        store.delete(name, day)
    if plan.refold:
        # before the deletes: a crash midway still leaves the mark the next fold rebuilds from
        mark_refold(store, plan.cutoff)
    for day in plan.dossier_partitions:
        store.delete(T.DOSSIERS, day)
    if plan.dossier_dir is not None:
        for rel, _ in fs.list_files(plan.dossier_dir, ".md"):
            fs.delete_file(fs.join(plan.dossier_dir, rel))
    drop_derived(plan.output_dir, plan.index_versions, plan.rebuilt, plan.work_dir)
    # parsed export records older than the cutoff become text-free expired rows (the cache
    # is local: under the work folder; the salt and forget list are in the storage root)
    state = plan.state_dir if plan.state_dir is not None else plan.output_dir
    ensure_salt(state)
    if state != plan.output_dir:  # expired rows now hash with this state's salt
        bind(plan.output_dir, state)
    forget = load_forget_list(state)
    cache_dir = _cache_dir(plan.output_dir, plan.cache_path, plan.work_dir)
    scrub_ingest_cache(cache_dir, forget, plan.cutoff)
    # the index's token parts of purged partitions hold their words (rebuilt on refresh)
    drop_parts(cache_dir, before=plan.cutoff)
    if plan.cache_path is not None and plan.cache_path.is_file():
        # the forget purge matches entries by text hash and by quoted text: reuse it as is
        victims = ForgetPlan("", plan.output_dir, texts=plan.texts, text_hashes=plan.text_hashes)
        purge_cache(plan.cache_path, victims)
    entry = plan.log_entry(ran_on or today())
    _append_log(state, entry)
    return entry


def _append_log(state_dir: Location, entry: dict) -> Location:
    path = fs.join(privacy_dir(state_dir), LOG_FILE)
    entries = retention_log(state_dir)
    entries.append(entry)
    write_text_atomic(path, json.dumps({"purges": entries}, indent=1, sort_keys=True))
    return path


def retention_log(state_dir: Location) -> list[dict]:
    """Every purge recorded so far (counts only), from the state folder."""
    try:
        return json.loads(fs.read_text(fs.join(privacy_dir(state_dir), LOG_FILE)))["purges"]
    except FileNotFoundError:
        return []


def purge_expired(
    output_dir: Location,
    retain_days: int | None,
    *,
    cache_path: Path | None = None,
    dossier_dir: Location | None = None,
    on: dt.date | None = None,
    work_dir: Path | None = None,
    state_dir: Location | None = None,
    inbox: Path | None = None,
) -> dict | None:
    """The whole retention step of a run: plan and apply; None when off or nothing old."""
    cutoff = retention_cutoff(retain_days, on)
    if cutoff is None:
        return None
    return apply_retention(
        plan_retention(
            output_dir,
            cutoff,
            cache_path=cache_path,
            dossier_dir=dossier_dir,
            work_dir=work_dir,
            state_dir=state_dir,
            inbox=inbox,
        ),
        ran_on=on or today(),
    )
