"""What ``POST /v1/messages``, ``GET /v1/messages/{id}`` and MCP ``remember`` do, for the
owner a key names (transport-free: both the HTTP routes and the MCP tool call these).

A batch is checked message by message with the inbox record's own check and the central
validator (``core/ingest/normalize.validate``); a bad message gets its reason in the answer,
the others are accepted. A message of a forgotten contact or conversation (after the
``[[contacts]]`` mapping, as ingest matches it) is refused and only a text-free line is
kept. The accepted ones are on disk (fsync) when :meth:`Messages.accept` returns; their
days are handed to the :class:`~memory_pipeline.service.refresh.Refresher`.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections import Counter
from typing import Any

import pyarrow.compute as pc

from memory_pipeline.config import PipelineConfig
from memory_pipeline.core.common import tables as T
from memory_pipeline.core.common.contacts import ContactBook
from memory_pipeline.core.common.forget_list import load_forget_list
from memory_pipeline.core.common.storage import TableStore
from memory_pipeline.core.common.timeutil import zone
from memory_pipeline.core.ingest.inbox import (
    InboxStore,
    configured_inbox,
    inbox_spec,
    pending_days,
)
from memory_pipeline.core.ingest.normalize import validate
from memory_pipeline.core.ingest.sources.base import SourceSpec
from memory_pipeline.core.ingest.sources.exports_names import Owners
from memory_pipeline.core.ingest.sources.inbox import (
    FORGOTTEN_KEY,
    Refused,
    file_rel,
    forgotten_line,
    parse_entry,
    source_ref,
    to_message,
)
from memory_pipeline.service.loader import OwnerUnavailable
from memory_pipeline.service.refresh import Refresher, owner_inboxes

STATUSES = ("received", "searchable", "quarantined", "forgotten")


class MessageLimit:
    """Per-key token bucket counted in messages (a request's own bucket counts requests:
    one batch of 500 must not cost what one search costs)."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate, self.burst = rate, burst
        self._state: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, key: str, n: int) -> float:
        """0 when ``n`` messages are allowed now (and taken), else seconds to wait."""
        now = time.monotonic()
        with self._lock:
            tokens, last = self._state.get(key, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - last) * self.rate)
            if tokens >= n:
                self._state[key] = (tokens - n, now)
                return 0.0
            self._state[key] = (tokens, now)
            return (n - tokens) / self.rate if self.rate > 0 else 60.0


class _Owner:
    """One owner's inbox: configuration, source spec and store (made once)."""

    def __init__(self, cfg: PipelineConfig) -> None:
        self.cfg = cfg
        self.spec: SourceSpec = configured_inbox(cfg.sources) or inbox_spec(
            cfg.owner_state_dir, cfg.timezone, cfg.owner
        )
        self.store = InboxStore(self.spec.path, self.spec.timezone)
        self.contacts = ContactBook(cfg.contacts)
        self.owners = Owners(self.spec)


class Messages:
    """The inbox operations of a deployment (one per server process)."""

    def __init__(self, service: Any, refresher: Any = None) -> None:
        self.service = service
        self.cfg: PipelineConfig = service.cfg
        self.refresher = refresher
        self._owners: dict[str, _Owner] = {}
        self._guard = threading.Lock()

    def owner(self, owner: str) -> _Owner:
        """The owner's inbox; only an owner of the deployment has one (keys are made for
        them), and its folder comes from the configuration, never from a request."""
        found = self._owners.get(owner)
        if found is not None:
            return found
        cfg = self.cfg
        if cfg.multi_owner:
            spec = next((s for s in cfg.owner_specs() if s.id == owner), None)
            if spec is None:
                raise OwnerUnavailable(f"no memory for owner {owner!r} in this deployment")
            cfg = cfg.for_owner(spec)
        elif owner != cfg.owner_id:
            raise OwnerUnavailable(f"no memory for owner {owner!r} in this deployment")
        with self._guard:
            return self._owners.setdefault(owner, _Owner(cfg))

    def accept(self, owner: str, messages: list[Any]) -> dict:
        """Check, store (durably) and schedule the refresh of a batch; the answer lists
        every message's outcome in order."""
        box = self.owner(owner)
        tz = box.spec.timezone
        forget = load_forget_list(box.cfg.state_root)
        results: list[dict[str, Any]] = []
        entries, forgotten = [], {}
        for i, raw in enumerate(messages):
            cid = raw.get("id") if isinstance(raw, dict) else None
            row: dict[str, Any] = {"index": i, "id": cid if isinstance(cid, str) else None}
            results.append(row)
            try:
                e = parse_entry(raw)
                msg = to_message(
                    e, box.spec, file_rel(e.conversation, e.day(tz)), line=1, order=0,
                    owners=box.owners,
                )  # fmt: skip
            except Refused as exc:
                row.update(status="refused", reason=exc.reason, detail=exc.detail)
                continue
            problem = validate(msg)  # the central validator, as ingest applies it
            if problem is not None:
                row.update(status="refused", reason=problem[0], detail=problem[1])
                continue
            if box.contacts:
                msg.contact_id = box.contacts.resolve(msg.contact_id) or msg.contact_id
            if forget and forget.forgets(msg):
                forgotten[e.id] = forgotten_line(forget, box.spec.name, e, e.day(tz))
            entries.append((row, e))
        # the refresh intent goes to disk before the messages: a crash between the two
        # leaves a refresh with nothing new (harmless), never a message nobody refreshes
        # (its retry would be a duplicate and request nothing). A day the refresh cannot
        # build (after today or end_date) is left to the run that makes it a partition.
        wanted = {
            d
            for d in (e.day(tz) for _, e in entries if e.id not in forgotten)
            if d <= self.cfg.start_date or not self._outside(d)
        }
        if wanted and self.refresher is not None:
            box.store.mark_pending(wanted)  # a restart resumes the refresh
        appended = box.store.append([e for _, e in entries], forgotten=forgotten)
        days = appended.days & wanted
        for (row, e), outcome in zip(entries, appended.results, strict=True):
            if isinstance(outcome, Refused):
                row.update(status="refused", reason=outcome.reason, detail=outcome.detail)
            elif outcome == FORGOTTEN_KEY:
                row.update(status="forgotten", detail="the contact or conversation is forgotten")
            else:
                row["status"] = outcome
                if outcome == "accepted" and (note := self._outside(e.day(tz))):
                    row["note"] = note  # stored, but no refresh can make it searchable now
        counts = Counter(r["status"] for r in results)
        ticket = None
        if days and self.refresher is not None:
            ticket = self.refresher.request(days)
        return {
            "accepted": counts["accepted"],
            "duplicates": counts["duplicate"],
            "refused": counts["refused"],
            "forgotten": counts["forgotten"],
            "results": results,
            "refresh": {
                "dates": sorted(d.isoformat() for d in days),
                "ticket": ticket,
            },
        }

    def status(self, owner: str, client_id: str) -> dict:
        """Where a posted message is: ``received`` (stored, not yet ingested or indexed),
        ``searchable``, ``quarantined`` (with the reason) or ``forgotten``; with the
        refresher's state (pending and running days, refreshes run, the last one's seconds
        and error)."""
        out = self._status(owner, client_id)
        if self.refresher is not None:
            out["refresh"] = self.refresher.snapshot()
        return out

    def _status(self, owner: str, client_id: str) -> dict:
        box = self.owner(owner)
        loc = box.store.lookup(client_id)
        if loc is None:
            raise LookupError(f"no message with id {client_id!r} was received")
        out: dict[str, Any] = {"id": client_id}
        if loc.fingerprint is None:
            return out | {"status": "forgotten"}
        ref = source_ref(client_id)
        store = TableStore(box.cfg.storage_root)
        days = sorted({d for d in (loc.day, box.cfg.start_date) if d is not None})
        raw = store.read(T.RAW_MESSAGES, days, columns=["message_id", "source", "source_ref"])
        mine = raw.filter(
            pc.and_(pc.equal(raw["source"], box.spec.name), pc.equal(raw["source_ref"], ref))
        )
        if mine.num_rows:
            mid = mine["message_id"][0].as_py()
            out["message_id"] = mid
            if self._indexed(owner, mid):
                return out | {"status": "searchable"}
            return out | {"status": "received", "stage": "ingested"}
        q = store.read(T.QUARANTINE, days, columns=["source", "record_ref", "reason", "detail"])
        forget = load_forget_list(box.cfg.state_root)
        refs = {ref}
        if forget.salt and loc.conversation is not None:
            refs.add(forget.record_ref(loc.conversation, loc.rel, ref))
            refs.add(forget.expired_ref(box.spec.name, loc.conversation, loc.rel, ref))
        hit = q.filter(
            pc.and_(pc.equal(q["source"], box.spec.name), pc.is_in(q["record_ref"], _arr(refs)))
        )
        if hit.num_rows:
            reason = hit["reason"][0].as_py()
            if reason == "forgotten":
                return out | {"status": "forgotten"}
            return out | {
                "status": "quarantined",
                "reason": reason,
                "detail": hit["detail"][0].as_py(),
            }
        return out | {"status": "received", "stage": self._stage(loc.day)}

    def _indexed(self, owner: str, message_id: str) -> bool:
        try:
            snap = self.service.snapshot(owner)
        except LookupError:
            return False
        except Exception:  # no index yet
            return False
        return snap.searcher.has_message(message_id)

    def _stage(self, day: dt.date | None) -> str:
        return (self._outside(day) if day is not None else None) or "waiting for the refresh"

    def _outside(self, day: dt.date) -> str | None:
        """Why a message of ``day`` cannot become searchable by a refresh now, or None:
        a refresh builds start_date to end_date, never past today."""
        cfg = self.cfg
        if day < cfg.start_date:
            return f"dated before start_date {cfg.start_date}: ingest quarantines it (out_of_range)"
        if cfg.end_date is not None and day > cfg.end_date:
            return f"dated after end_date {cfg.end_date}: ingested once a partition covers it"
        today = dt.datetime.now(zone(cfg.timezone)).date()
        if day > today:
            return "dated after today: ingested once its day's partition exists (nightly)"
        return None

    def resume(self) -> set[dt.date]:
        """Request the refreshes a previous server accepted messages for but did not finish
        (its refresh intents are still on disk)."""
        days: set[dt.date] = set()
        for root in owner_inboxes(self.cfg):
            days |= pending_days(root)
        if days and self.refresher is not None:
            self.refresher.request(days)
        return days

    def warm(self, keys: Any) -> None:
        """Start the refresh worker when a write key exists (an app posts: the worker loads
        in the background; an admin-only deployment starts it on its first post)."""
        if self.refresher is None:
            return
        if any(r.revoked is None and r.scope == "write" for r in keys.records()):
            self.refresher.warm()

    def close(self) -> None:
        if self.refresher is not None:
            self.refresher.close()


def messages_for(service: Any, *, refresh: bool = True) -> Messages:
    """A new :class:`Messages` over ``service`` (an app makes one and shares it between its
    routes and its MCP tools), with a refresher when ``refresh`` and the service knows its
    configuration file."""
    config = service.config_path or service.cfg.config_path
    refresher = Refresher(str(config)) if refresh and config is not None else None
    return Messages(service, refresher)


def _arr(values: set[str]) -> Any:
    import pyarrow as pa

    return pa.array(sorted(values), pa.string())
