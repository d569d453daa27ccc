"""Reader of the inbox (``kind = "inbox"``): the messages apps posted to the service
(``POST /v1/messages``, MCP ``remember``), stored by ``core/ingest/inbox.py``.

This module holds the record format both sides share: :func:`parse_entry` is the one check
of a posted message (the door refuses with it, the reader quarantines a stored line with
it, so they never disagree) and :func:`to_message` fills the canonical message as every
reader does. Files: ``<inbox>/<conversation key>/<YYYY-MM-DD>.jsonl``, one JSON object a
line; ``source_ref`` is ``inbox:<client id>``; the message id is content-derived as for any
export, so the same message arriving in a later export of the chat is a ``duplicate_export``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memory_pipeline.core.common import records as R
from memory_pipeline.core.common.forget_list import ForgetList, forgotten_record
from memory_pipeline.core.common.records import Message, QuarantineRecord, Record
from memory_pipeline.core.common.timeutil import zone
from memory_pipeline.core.ingest.sources.base import (
    JsonRejected,
    SourceSpec,
    load_json,
    register,
    scrub_json,
)
from memory_pipeline.core.ingest.sources.exports_names import Owners, clean_text

KIND = "inbox"
SOURCE_NAME = "inbox"  # the source's name when the configuration names none
REF_PREFIX = "inbox:"  # source_ref of a posted message: inbox:<client id>
MAX_ID = 256  # characters of an id, conversation, sender, contact, reply_to, attachment
FIELDS = ("id", "conversation", "sender", "time", "text", "type", "reply_to", "attachment")
OPTIONAL = ("type", "reply_to", "attachment", "contact")
# Refusals at the door that are no quarantine reason (the record never reaches ingest)
R_ID_CONFLICT = "id_conflict"
R_UNKNOWN_FIELD = "unknown_field"
FORGOTTEN_KEY = "forgotten"  # a text-free line: the record was refused as forgotten


class Refused(ValueError):
    """A posted message that cannot be accepted: ``reason`` (a quarantine reason code, or
    ``id_conflict`` / ``unknown_field``) and a log-safe ``detail`` (no message text)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class Entry:
    """One posted message, checked: what a line of the inbox holds."""

    id: str
    conversation: str
    sender: str
    time: str  # ISO 8601 with an offset, as sent
    text: str
    type: str = "text"
    reply_to: str | None = None
    attachment: str | None = None
    contact: str | None = None  # default: the conversation (who it is with)

    @property
    def utc(self) -> dt.datetime:
        return _instant(self.time)  # type: ignore[return-value]

    def local(self, timezone: str) -> dt.datetime:
        """The wall-clock time in ``timezone`` (naive), as every reader stores it."""
        return self.utc.astimezone(zone(timezone)).replace(tzinfo=None)

    def day(self, timezone: str) -> dt.date:
        return self.local(timezone).date()

    def as_line(self) -> dict[str, Any]:
        """The stored object (optional fields only when set)."""
        out = {k: getattr(self, k) for k in ("id", "conversation", "sender", "time", "text")}
        if self.type != "text":
            out["type"] = self.type
        for k in ("reply_to", "attachment", "contact"):
            if getattr(self, k) is not None:
                out[k] = getattr(self, k)
        return out

    def fingerprint(self) -> str:
        """The content an id stands for: a retry must carry the same (the instant, not the
        spelling of the time)."""
        body = self.as_line()
        body.pop("id")
        body["time"] = self.utc.isoformat()
        text = json.dumps(body, sort_keys=True, ensure_ascii=False)
        return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def _instant(value: str) -> dt.datetime | None:
    try:
        t = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if t.tzinfo is None:
        return None
    try:
        return t.astimezone(dt.UTC)
    except OverflowError:
        return None


def _short(raw: Mapping[str, Any], key: str, *, required: bool) -> str | None:
    value = raw.get(key)
    if value is None:
        if required:
            raise Refused(R.R_MISSING_FIELD, f"{key!r} is required")
        return None
    if not isinstance(value, str):
        raise Refused(R.R_MISSING_FIELD, f"{key!r} must be a string")
    if required and not value.strip():
        raise Refused(R.R_MISSING_FIELD, f"{key!r} is empty")
    if len(value) > MAX_ID:
        raise Refused(R.R_TOO_LARGE, f"{key!r} is longer than {MAX_ID} characters")
    if any(ord(c) < 32 for c in value):
        raise Refused(R.R_MISSING_FIELD, f"{key!r} holds control characters")
    return value


def parse_entry(raw: Any, *, stored: bool = False) -> Entry:
    """``raw`` (a posted or stored JSON object) as an :class:`Entry`, else :class:`Refused`.

    The one check of a posted message's shape: the door refuses with it and the reader
    quarantines a stored line with it, so the two never disagree. ``stored`` lines may
    carry the service's own keys (``received``)."""
    if not isinstance(raw, dict):
        raise Refused(R.R_MISSING_FIELD, "a message must be a JSON object")
    raw = scrub_json(raw)
    allowed = {*FIELDS, *OPTIONAL, *(("received",) if stored else ())}
    unknown = sorted(k for k in raw if k not in allowed)
    if unknown:
        names = ", ".join(repr(k[:40]) for k in unknown[:5])
        raise Refused(R_UNKNOWN_FIELD, f"unknown fields {names}")
    cid = _short(raw, "id", required=True)
    conversation = _short(raw, "conversation", required=True)
    sender = _short(raw, "sender", required=True)
    time = raw.get("time")
    if time is None or time == "":
        raise Refused(R.R_MISSING_TIMESTAMP, "'time' is required (ISO 8601 with an offset)")
    if not isinstance(time, str) or len(time) > 64 or _instant(time) is None:
        raise Refused(R.R_BAD_TIMESTAMP, "'time' is not ISO 8601 with an offset")
    kind = raw.get("type", "text")
    if kind not in R.MESSAGE_TYPES:
        known = ", ".join(sorted(R.MESSAGE_TYPES))
        raise Refused(R.R_UNKNOWN_TYPE, f"'type' is not one of {known}")
    text = raw.get("text", "")
    if not isinstance(text, str):
        raise Refused(R.R_MISSING_FIELD, "'text' must be a string")
    if len(text) > R.MAX_MESSAGE_CHARS:
        raise Refused(R.R_TOO_LARGE, f"{len(text)} characters > limit {R.MAX_MESSAGE_CHARS}")
    attachment = _short(raw, "attachment", required=False)
    if kind == "text" and not text.strip():
        raise Refused(R.R_EMPTY_TEXT, "text message with empty text")
    return Entry(
        id=cid,  # type: ignore[arg-type]
        conversation=conversation,  # type: ignore[arg-type]
        sender=sender,  # type: ignore[arg-type]
        time=time,
        text=text,
        type=kind,
        reply_to=_short(raw, "reply_to", required=False),
        attachment=attachment,
        contact=_short(raw, "contact", required=False),
    )


def conversation_key(conversation: str) -> str:
    """The folder of a conversation's files: a hash, so no name is in a path."""
    h = hashlib.blake2b(conversation.encode("utf-8", "surrogatepass"), digest_size=10)
    return "c_" + h.hexdigest()


def file_rel(conversation: str, day: dt.date) -> str:
    """``source_file`` of a message: ``<conversation key>/<date>.jsonl``."""
    return f"{conversation_key(conversation)}/{day.isoformat()}.jsonl"


def source_ref(client_id: str) -> str:
    return REF_PREFIX + client_id


def to_message(
    e: Entry, spec: SourceSpec, rel: str, *, line: int, order: int, owners: Owners
) -> Message:
    """The canonical message of an entry, filled as every reader fills it."""
    text = e.text if e.text.strip() or not e.attachment else e.attachment
    return Message(
        source=spec.name,
        conversation_id=e.conversation,
        contact_id=e.contact or e.conversation,
        sender=e.sender,
        is_owner=e.sender in owners,
        ts=e.utc,
        local_ts=e.local(spec.timezone),
        tz=spec.timezone,
        type=e.type,
        text=clean_text(text),
        source_order=order,
        source_ref=source_ref(e.id),
        source_file=rel,
        source_line=line,
    )


def forgotten_line(
    forget: ForgetList, source: str, e: Entry, day: dt.date
) -> dict[str, Any]:
    """The text-free line kept for a forgotten message (refused at the door, or scrubbed
    after a forget): its id (the status), its date and the hashed position of its
    ``forgotten`` quarantine row, as ingest builds it (``forgotten_record``)."""
    rel = file_rel(e.conversation, day)
    row = forgotten_record(forget, source, e.conversation, rel, source_ref(e.id), day)
    return {"id": e.id, FORGOTTEN_KEY: True, "date": day.isoformat(), "ref": row.record_ref}


# -- the reader -------------------------------------------------------------------------------
def inbox_files(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted(
        p
        for folder in root.iterdir()
        if folder.is_dir() and not folder.name.startswith(".")
        for p in folder.glob("*.jsonl")
    )


def file_day(path: Path) -> dt.date | None:
    try:
        return dt.date.fromisoformat(path.stem)
    except ValueError:
        return None


@register(KIND)
def read_inbox(spec: SourceSpec, dates: frozenset[dt.date] | None) -> Iterator[Record]:
    """Every record of the inbox under ``spec.path``: one per line (a message, the
    ``forgotten`` row of a refused one, or a quarantined malformed line)."""
    owners = Owners(spec)
    order = 0
    slack = dt.timedelta(days=1)  # a changed timezone moves a local date by less than a day
    for path in inbox_files(spec.path):
        rel = path.relative_to(spec.path).as_posix()
        day = file_day(path)
        if dates is not None and day is not None:
            if not any(d in dates for d in (day - slack, day, day + slack)):
                continue
        seen: set[str] = set()
        with path.open("rb") as f:
            for n, raw in enumerate(f, 1):
                if not raw.strip():
                    continue
                ordr, order = order, order + 1
                yield from _record(spec, owners, rel, n, ordr, raw, day, seen)


def _record(
    spec: SourceSpec,
    owners: Owners,
    rel: str,
    n: int,
    order: int,
    raw: bytes,
    day: dt.date | None,
    seen: set[str],
) -> Iterator[Record]:
    excerpt = raw[: R.MAX_RAW_EXCERPT].decode("utf-8", "replace")

    def bad(reason: str, detail: str, when: dt.date | None = day) -> QuarantineRecord:
        return QuarantineRecord(
            source=spec.name,
            source_file=rel,
            source_line=n,
            record_ref=f"{rel}:{n}",
            conversation_id=None,
            partition_date=when,
            reason=reason,
            detail=detail,
            raw=excerpt,
        )

    try:
        obj = load_json(raw).value
    except JsonRejected as exc:
        yield bad(exc.reason, exc.detail)
        return
    except (ValueError, UnicodeDecodeError):
        yield bad(R.R_MALFORMED_JSON, "inbox line is not JSON (a write cut short)")
        return
    if isinstance(obj, dict) and obj.get(FORGOTTEN_KEY) is True:
        when = date_or(obj.get("date"), day)
        yield QuarantineRecord(
            source=spec.name,
            source_file="",
            source_line=None,
            record_ref=str(obj.get("ref") or f"forgotten:{rel}:{n}"),
            conversation_id="",
            partition_date=when,
            reason=R.R_FORGOTTEN,
            detail="the conversation is on the forget list",
            raw="",
        )
        return
    try:
        e = parse_entry(obj, stored=True)
    except Refused as exc:
        reason = exc.reason if exc.reason in R.QUARANTINE_REASONS else R.R_MISSING_FIELD
        yield bad(reason, exc.detail)
        return
    if e.id in seen:
        yield bad(R.R_DUPLICATE, "message id repeated in the inbox file", e.day(spec.timezone))
        return
    seen.add(e.id)
    yield to_message(e, spec, rel, line=n, order=order, owners=owners)


def date_or(value: Any, default: dt.date | None) -> dt.date | None:
    try:
        return dt.date.fromisoformat(value) if isinstance(value, str) else default
    except ValueError:
        return default
