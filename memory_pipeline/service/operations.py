"""What the HTTP endpoints and the MCP tools do, for one owner (taken from the key).

Both transports call these functions, so they answer alike. Every function takes the
owner first and reads only that owner's folder (``IndexLoader.owner_dir``); nothing a
client sends can name another owner. Results are plain JSON-ready dicts built generically
from the API's dataclasses, so a field added to ``SearchResult`` reaches clients unchanged.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import threading
from pathlib import Path
from typing import Any

from memory_pipeline.config import PipelineConfig, owner_config
from memory_pipeline.core.common import fs
from memory_pipeline.service.loader import IndexLoader, Snapshot

FORGET_LOCK_WAIT = 900.0  # seconds a forget waits for a run or refresh in progress


class UnknownScope(LookupError):
    """A contact or conversation the owner's published index does not hold."""


def jsonable(obj: Any) -> Any:
    """A dataclass (any depth) as a dict: ``to_dict()`` when the class has one, else every
    field; datetimes become ISO strings later (``json.dumps(default=str)``)."""
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    return obj


def _known(snap: Snapshot, column: str) -> set[str]:
    """The contact / conversation ids of a snapshot (computed once per version)."""
    cache = snap.__dict__.setdefault("_known", {})
    if column not in cache:
        cache[column] = {str(v) for v in getattr(snap.searcher, column)}
    return cache[column]


def _check_scope(snap: Snapshot, contact: str | None, conversation: str | None = None) -> None:
    """An empty answer would read as "never talked about it": say the id is unknown. The
    set is the owner's own, so the answer reveals nothing of another owner."""
    if contact is not None and contact not in _known(snap, "contact"):
        raise UnknownScope(f"unknown contact {contact!r}")
    if conversation is not None and conversation not in _known(snap, "conversation"):
        raise UnknownScope(f"unknown conversation {conversation!r}")


def parse_as_of(value: str | None) -> dt.datetime | None:
    """An ISO date or date-time, as the CLI's ``--as-of`` (a date is its local midnight)."""
    if value is None:
        return None
    try:
        return dt.datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"as_of: not a valid ISO date or time: {value!r}") from None


class MemoryService:
    """The deployment as a service: the index loader, the dossier folders, forget."""

    def __init__(self, cfg: PipelineConfig, config_path: str | None = None) -> None:
        self.cfg = cfg
        self.config_path = config_path
        self.loader = IndexLoader(cfg)
        self._forget_lock = threading.Lock()
        self._owner_cfgs: dict[str, PipelineConfig] = {}

    def snapshot(self, owner: str) -> Snapshot:
        return self.loader.snapshot(owner)

    # -- reads ----------------------------------------------------------------------------
    def search(
        self,
        owner: str,
        query: str,
        k: int = 5,
        *,
        contact: str | None = None,
        conversation: str | None = None,
        as_of: str | None = None,
        mode: str | None = None,
        preset: str | None = None,
        recent: list | None = None,
        snap: Snapshot | None = None,
    ) -> dict:
        from memory_pipeline import search_with

        snap = snap or self.snapshot(owner)
        _check_scope(snap, contact, conversation)
        result = search_with(
            snap.searcher,
            query,
            k,
            contact=contact,
            conversation=conversation,
            as_of=parse_as_of(as_of),
            search_config=preset,
            mode=mode,
            recent=recent,
        )
        return jsonable(result) | {"index_version": snap.version}

    def context(
        self,
        owner: str,
        query: str,
        budget: int = 24_000,
        *,
        strategy: str = "split",
        contact: str | None = None,
        as_of: str | None = None,
        k_memories: int = 10,
        preset: str | None = None,
        recent: list | None = None,
        escalate: bool = False,
        sources: bool = False,
        snap: Snapshot | None = None,
    ) -> dict:
        from memory_pipeline import context_with

        snap = snap or self.snapshot(owner)
        _check_scope(snap, contact)
        when = parse_as_of(as_of)
        if escalate:
            from memory_pipeline.core.context.packs import recall
            from memory_pipeline.core.retrieval.config import resolve

            if recent is not None:
                raise ValueError("recent is not supported with escalate")
            pack = recall(
                snap.searcher,
                snap.memories,
                query,
                budget=budget,
                sources=True if sources else None,
                strategy=strategy,
                k_memories=k_memories,
                contact=contact,
                as_of=when,
                search_config=resolve(preset),
            )
        else:
            pack = context_with(
                snap.searcher,
                snap.memories,
                query,
                budget,
                strategy=strategy,
                contact=contact,
                as_of=when,
                k_memories=k_memories,
                search_config=preset,
                recent=recent,
            )
        return jsonable(pack) | {"text": pack.render(), "index_version": snap.version}

    def memories(
        self,
        owner: str,
        *,
        query: str | None = None,
        contact: str | None = None,
        kind: str | None = None,
        as_of: str | None = None,
        limit: int = 20,
        snap: Snapshot | None = None,
    ) -> dict:
        """The owner's remembered facts: ranked by ``query`` when given (memory search,
        fused with the conversations' ranking), else the newest first."""
        snap = snap or self.snapshot(owner)
        _check_scope(snap, contact)
        mi = snap.memories
        when = parse_as_of(as_of)
        if query is not None:
            if not query.strip():
                raise ValueError("q must be non-empty text")
            # ask for more when filtering by kind afterwards (the index has no kind filter)
            hits = mi.search(
                query,
                limit * 4 if kind else limit,
                contact=contact,
                as_of=when,
                searcher=snap.searcher,
            )
            rows = [jsonable(h) for h in hits if kind is None or h.kind == kind][:limit]
        else:
            mask = mi.eligible(contact=contact, as_of=when)
            rows = [r for r, ok in zip(mi.rows, mask, strict=True) if ok]
            if kind is not None:
                rows = [r for r in rows if r.get("kind") == kind]
            rows.sort(key=lambda r: (str(r.get("valid_from") or ""), r["memory_id"]), reverse=True)
            rows = [dict(r) for r in rows[:limit]]
        return {"memories": rows, "count": len(rows), "index_version": snap.version}

    def _owner_cfg(self, owner: str) -> PipelineConfig:
        cfg = self._owner_cfgs.get(owner)
        if cfg is None:
            cfg = owner_config(self.cfg, owner) if self.cfg.multi_owner else self.cfg
            self._owner_cfgs[owner] = cfg
        return cfg

    def dossier(self, owner: str, contact: str, *, snap: Snapshot | None = None) -> dict:
        """The contact's current dossier (Markdown). Only a contact of the owner's published
        index is looked up: a forgotten one is gone from it as from the dossier folder."""
        from memory_pipeline.core.memories.dossier import contact_file_name

        snap = snap or self.snapshot(owner)
        _check_scope(snap, contact)
        folder = self._owner_cfg(owner).dossiers_path
        # the file name is sanitized (no separators): it cannot leave the folder
        path = fs.join(folder, contact_file_name(contact))
        try:
            text = fs.read_text(path) if fs.is_remote(path) else Path(path).read_text("utf-8")
        except FileNotFoundError:
            raise UnknownScope(f"no dossier for contact {contact!r} yet") from None
        return {"contact": contact, "markdown": text, "index_version": snap.version}

    # -- forget ---------------------------------------------------------------------------
    def forget(self, owner: str, contact: str, *, confirm: bool = False) -> dict:
        """The CLI's ``forget`` for the key's owner: a dry run unless ``confirm``; with it,
        the contact is removed, listed, the indexes rebuilt (runs recorded in the Dagster
        instance, as the CLI records them), and the owner's loaded snapshot dropped before
        returning. One forget at a time."""
        from memory_pipeline.defs.forget import plan_for

        with self._forget_lock:
            plan = plan_for(self._owner_cfg(owner), contact)  # UnknownContact: LookupError
            lines = plan.summary_lines()
            if not confirm:
                return {"dry_run": True, "forgotten": False, "summary": lines}
            import dagster as dg

            from memory_pipeline.core.common.lock import output_lock
            from memory_pipeline.core.privacy.forget import apply_forget
            from memory_pipeline.defs.forget_run import rebuild_after_forget

            # one writer at a time: a refresh after posts (service/refresh.py) waits
            with output_lock(self.cfg.output_dir, wait=FORGET_LOCK_WAIT):
                apply_forget(plan)
                self.loader.drop(owner)
                _dagster_home(self.cfg)
                ok = rebuild_after_forget(self.cfg, dg.DagsterInstance.get())
            self.loader.drop(owner)
            return {"dry_run": False, "forgotten": True, "rebuilt": ok, "summary": lines}


def _dagster_home(cfg: PipelineConfig) -> None:
    """DAGSTER_HOME as the CLI's ``forget`` sets it (the variable, else the config file's
    folder), so the rebuild's runs are recorded in the same instance."""
    import os

    home = os.environ.get("DAGSTER_HOME")
    if home:
        Path(home).mkdir(parents=True, exist_ok=True)
        return
    base = cfg.config_path.parent if cfg.config_path else Path.cwd()
    os.environ["DAGSTER_HOME"] = str(base)
