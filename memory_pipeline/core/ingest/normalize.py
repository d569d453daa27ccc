"""The row-level rules of ingest and the tables it writes.

The ingest step itself (validate, de-duplicate, forget, retention, partitions, counts) is
core/ingest/columnar.py, the one implementation; this module holds what it builds on (the
message id, ``validate``, the quarantine and expired rows, the table builders) and
:func:`ingest`, the entrance for records already in memory (tests, fan-out shares), which
hands them to that step. The conservation rule (read = ingested + quarantined) holds per
partition by construction and can be re-checked from the written tables.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass, field
from hashlib import blake2b

import pyarrow as pa

from memory_pipeline.core.common import records as R
from memory_pipeline.core.common.forget_list import ForgetList
from memory_pipeline.core.common.ids import stable_id
from memory_pipeline.core.common.records import Message, QuarantineRecord, Record
from memory_pipeline.core.common.schema import INGEST_AUDIT, MESSAGES, QUARANTINE

_RENDERABLE_EMPTY = R.MESSAGE_TYPES - {"text"}
_SEP = "\x1f"  # a sticker may have no text; a text may not


@dataclass
class IngestResult:
    """Messages and quarantine records of the requested dates, plus per-partition counts."""

    messages: list[tuple[str, Message]] = field(default_factory=list)  # (message_id, message)
    quarantine: list[QuarantineRecord] = field(default_factory=list)
    # (partition_date, source) -> records read
    read_counts: Counter[tuple[dt.date, str]] = field(default_factory=Counter)

    def audit_rows(self) -> list[dict]:
        """Per (date, source): records read, ingested, quarantined (from the record lists)."""
        ingested = Counter((m.local_date, m.source) for _, m in self.messages)
        quarantined = Counter((q.partition_date, q.source) for q in self.quarantine)
        return [
            {
                "partition_date": d,
                "source": s,
                "records_read": n,
                "ingested": ingested[(d, s)],
                "quarantined": quarantined[(d, s)],
            }
            for (d, s), n in sorted(self.read_counts.items())
        ]


def message_id(m: Message, occurrence: int = 0) -> str:
    """Stable id from content alone, so a re-export of a chat gives its messages the same ids.

    Equal to ``stable_id("msg", conversation, local_ts, sender, type, text, occurrence)``, where
    ``occurrence`` is the message's index among identical messages (same conversation, local
    time, sender, type and text) of its own input file. The file position (``source_order``) is
    left out on purpose: it differs between two exports of one chat. The ingest step
    (core/ingest/columnar.py) computes the same value over columns.
    """
    h = _content_key(m)
    h.update(f"{_SEP}{occurrence}".encode())
    return "msg_" + h.hexdigest()


# ``source_ref`` values that are the export's own stable message id (what each reader writes:
# core/ingest/sources/<kind>.py). A positional fallback (a Telegram message without an id,
# ``#<index>``; an iMessage row id instead of its guid) is not one, so it is not matched.
EXPORT_ID_PATTERN = (
    r"^(?:telegram:[^/]*/-?[0-9]+"
    r"|discord:[^/]+/[0-9]+"
    r"|slack:[^/]+/[0-9]+\.[0-9]+"
    r"|imessage:.*[^0-9].*"
    r"|chatgpt:[^/]+/.+"
    r"|claude:[^/]+/.+)$"
)


def export_message_id(conversation_id: str, export_ref: str) -> str:
    """The id of a message whose export carries its own stable id (``EXPORT_ID_PATTERN``):
    from (conversation, export id), not from the text, so an edited message keeps its id
    and two exports of it are one message (docs/sources.md, "Re-exports")."""
    return stable_id("msg", conversation_id, "export", export_ref)


def _content_key(m: Message) -> blake2b:
    """The hash state of (conversation, local time, sender, type, text): the dedupe content."""
    key = _SEP.join((m.conversation_id, m.local_ts.isoformat(), m.sender, m.type, m.text))
    return blake2b(key.encode("utf-8", "surrogatepass"), digest_size=10)  # as stable_id


def _quarantine(m: Message, reason: str, detail: str, day: dt.date) -> QuarantineRecord:
    return QuarantineRecord(
        source=m.source,
        source_file=m.source_file,
        source_line=m.source_line,
        record_ref=m.source_ref,
        conversation_id=m.conversation_id,
        partition_date=day,
        reason=reason,
        detail=detail,
        raw=f"{m.local_ts.isoformat()}\t{m.sender}\t{m.type}\t{m.text[: R.MAX_RAW_EXCERPT]}",
    )


def validate(m: Message) -> tuple[str, str] | None:
    """Why a parsed message cannot be ingested, as (reason, detail), or None when it can."""
    if m.type not in R.MESSAGE_TYPES:
        return R.R_UNKNOWN_TYPE, f"message type {m.type[:40]!r} is not one of the known types"
    if m.type == "text" and not m.text.strip():
        return R.R_EMPTY_TEXT, "text message with empty text"
    if len(m.text) > R.MAX_MESSAGE_CHARS:
        return R.R_TOO_LARGE, f"{len(m.text)} characters > limit {R.MAX_MESSAGE_CHARS}"
    if m.type in _RENDERABLE_EMPTY and not m.text:
        m.text = f"[{m.type}]"
    return None


def expired_row(rec: Record, day: dt.date, forget: ForgetList | None) -> QuarantineRecord:
    """The text-free row a record past retention becomes: source and date only.

    Like a ``forgotten`` row, it keeps no file name, conversation or excerpt (the point of
    retention is that the old words are gone); ``record_ref`` is a hash of the record's
    position salted with the output folder's salt (``forget.salt``, see
    ``ForgetList.expired_ref``), so ids stay unique, a re-run writes the same row, and the
    ref cannot be matched against a hash of the old export.
    """
    if forget is None:
        raise ValueError("retention needs the output folder's salt: pass its forget list")
    ref = rec.source_ref if isinstance(rec, Message) else rec.record_ref
    return QuarantineRecord(
        source=rec.source,
        source_file="",
        source_line=None,
        record_ref=forget.expired_ref(rec.source, rec.conversation_id or "", rec.source_file, ref),
        conversation_id="",
        partition_date=day,
        reason=R.R_EXPIRED,
        detail="older than [privacy] retain_days",
        raw="",
    )


def _quarantine_sort_key(q: QuarantineRecord) -> tuple:
    return (q.partition_date, q.source, q.source_file, q.source_line or 0, q.record_ref, q.reason)


def quarantine_id(q: QuarantineRecord) -> str:
    """Stable id of a quarantined record: where it came from and why."""
    return stable_id("q", q.source, q.source_file, q.source_line, q.record_ref, q.reason)


def messages_table(pairs: list[tuple[str, Message]]) -> pa.Table:
    """Columnar build of the messages table (faster than row dicts at 400k rows)."""
    ms = [m for _, m in pairs]
    cols = {
        "message_id": [p[0] for p in pairs],
        "source": [m.source for m in ms],
        "conversation_id": [m.conversation_id for m in ms],
        "contact_id": [m.contact_id for m in ms],
        "sender": [m.sender for m in ms],
        "is_owner": [m.is_owner for m in ms],
        "ts": [m.ts for m in ms],
        "local_ts": [m.local_ts for m in ms],
        "tz": [m.tz for m in ms],
        "local_date": [m.local_ts.date() for m in ms],
        "type": [m.type for m in ms],
        "text": [m.text for m in ms],
        "source_order": [m.source_order for m in ms],
        "source_ref": [m.source_ref for m in ms],
        "source_file": [m.source_file for m in ms],
        "source_line": [m.source_line for m in ms],
        "ts_inferred": [m.ts_inferred for m in ms],
    }
    return pa.Table.from_pydict(cols, schema=MESSAGES)


def quarantine_table(qs: list[QuarantineRecord]) -> pa.Table:
    """Quarantine rows; ``raw`` keeps an excerpt for repair, ``detail`` is log-safe."""
    cols = {
        "quarantine_id": [quarantine_id(q) for q in qs],
        "source": [q.source for q in qs],
        "source_file": [q.source_file for q in qs],
        "source_line": [q.source_line for q in qs],
        "record_ref": [q.record_ref for q in qs],
        "conversation_id": [q.conversation_id for q in qs],
        "partition_date": [q.partition_date for q in qs],
        "reason": [q.reason for q in qs],
        "detail": [q.detail for q in qs],
        "raw": [q.raw[: R.MAX_RAW_EXCERPT] for q in qs],
    }
    return pa.Table.from_pydict(cols, schema=QUARANTINE)


def audit_table(rows: list[dict]) -> pa.Table:
    """The per-partition reconciliation rows as an Arrow table."""
    return pa.Table.from_pylist(rows, schema=INGEST_AUDIT)
