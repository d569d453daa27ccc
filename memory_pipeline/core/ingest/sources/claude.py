"""Reader for Claude's data export (``conversations.json`` in the zip Anthropic mails you).

The file is a list of conversations ``{uuid, name, created_at, chat_messages[]}``; each chat
message (``uuid``, ``sender`` ``human``/``assistant``, ``text``, ``content[]``,
``created_at`` ISO 8601 with its offset, ``attachments``, ``files``) is one record. The text
is ``text``, else the ``text`` blocks of ``content``; a message with only attachments is a
``file`` message naming them. One conversation per chat (``claude_<uuid>``), contact
``Claude``; the human is the owner (sender ``owner``), the assistant has sender ``Claude``.
``source_ref`` is ``claude:<conversation uuid>/<message uuid>``; a message uuid repeated
within one conversation of a file is a ``duplicate``.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path

from memory_pipeline.core.common.records import (
    R_BAD_TIMESTAMP,
    R_DUPLICATE,
    R_EMPTY_TEXT,
    R_ENCODING,
    R_MISSING_TIMESTAMP,
    R_NOT_AN_EXPORT,
    R_UNKNOWN_TYPE,
    Record,
)
from memory_pipeline.core.common.timeutil import zone
from memory_pipeline.core.ingest.sources.base import SourceSpec, register
from memory_pipeline.core.ingest.sources.exports import (
    ExportFile,
    Owners,
    Rejected,
    clean_text,
    conversation_option,
    has_bad_bytes,
    head_text,
    load_json,
    message,
    parse_iso,
    quarantine,
    read_exports,
    register_detector,
    safe_id,
)

KIND = "claude"
ASSISTANT = "Claude"
OWNER_FALLBACK = "Me"


def sniff(f: ExportFile) -> bool:
    """A JSON list of objects with Claude's ``chat_messages``."""
    head = head_text(f, 65536).lstrip()
    return head.startswith("[") and '"chat_messages"' in head


def _text(m: dict) -> tuple[str, str]:
    """(type, text): ``text``, else the content text blocks; attachments only: ``file``."""
    text = m.get("text") if isinstance(m.get("text"), str) else ""
    if not text.strip() and isinstance(m.get("content"), list):
        text = "\n\n".join(
            b["text"]
            for b in m["content"]
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        )
    if text.strip():
        return "text", text
    names = [
        str(a.get("file_name"))
        for key in ("attachments", "files")
        for a in (m.get(key) or [])
        if isinstance(a, dict) and a.get("file_name")
    ]
    return ("file", "\n".join(names)) if names else ("text", "")


def parse(spec: SourceSpec, f: ExportFile, dates: frozenset[dt.date] | None) -> Iterator[Record]:
    """Records of one ``conversations.json`` (raises Rejected before the first)."""
    doc = load_json(f, "Claude's conversations.json")
    if not isinstance(doc, list) or not all(
        isinstance(c, dict) and isinstance(c.get("chat_messages"), list) for c in doc
    ):
        raise Rejected(R_NOT_AN_EXPORT, "JSON without Claude's conversations ('chat_messages')")
    owners = Owners(spec)
    me = spec.owner or OWNER_FALLBACK
    forced = conversation_option(spec)
    order = 0
    for ci, chat in enumerate(doc):
        cid = str(chat.get("uuid") or f"#{ci}")
        conv = forced or f"claude_{safe_id(cid)}"
        seen: set[str] = set()
        for mi, m in enumerate(chat["chat_messages"]):
            ordr, order = order, order + 1
            raw = json.dumps(m, ensure_ascii=False)[:2000]
            mid = str(m.get("uuid") or f"#{mi}") if isinstance(m, dict) else f"#{mi}"
            ref = f"claude:{cid}/{mid}"
            if not isinstance(m, dict):
                yield quarantine(spec, f, R_UNKNOWN_TYPE, "message is not an object", conv=conv,
                                 day=None, ref=ref, raw=raw)  # fmt: skip
                continue
            if has_bad_bytes(m):
                yield quarantine(spec, f, R_ENCODING, "invalid UTF-8 in the message", conv=conv,
                                 day=None, ref=ref, raw=raw)  # fmt: skip
                continue
            utc = parse_iso(m.get("created_at"))
            if utc is None:
                reason = R_MISSING_TIMESTAMP if not m.get("created_at") else R_BAD_TIMESTAMP
                yield quarantine(spec, f, reason, "no usable created_at", conv=conv, day=None,
                                 ref=ref, raw=raw)  # fmt: skip
                continue
            local = utc.astimezone(zone(spec.timezone)).replace(tzinfo=None)
            if dates is not None and local.date() not in dates:
                continue
            if m.get("uuid") and mid in seen:
                yield quarantine(spec, f, R_DUPLICATE, "message uuid repeated in the chat",
                                 conv=conv, day=local.date(), ref=ref, raw=raw)  # fmt: skip
                continue
            seen.add(mid)
            role = m.get("sender")
            if role not in ("human", "assistant"):
                yield quarantine(spec, f, R_UNKNOWN_TYPE, "sender is not human/assistant",
                                 conv=conv, day=local.date(), ref=ref, raw=raw)  # fmt: skip
                continue
            kind, text = _text(m)
            if not text.strip():
                yield quarantine(spec, f, R_EMPTY_TEXT, "message without text or files",
                                 conv=conv, day=local.date(), ref=ref, raw=raw)  # fmt: skip
                continue
            out = message(
                spec, f, conv=conv, contact=ASSISTANT, owners=owners, local=local, utc=utc,
                sender=me if role == "human" else ASSISTANT, type_=kind, text=clean_text(text),
                order=ordr, line=None, ref=ref,
            )  # fmt: skip
            out.is_owner = role == "human"
            yield out


def _accept(path: Path) -> bool:
    return path.suffix.lower() == ".json"


@register(KIND)
def read_claude(spec: SourceSpec, dates: frozenset[dt.date] | None) -> Iterator[Record]:
    """Every Claude ``conversations.json`` (or export zip) under the source path."""
    yield from read_exports(spec, dates, parse, _accept)


read_claude.depends_on = ("memory_pipeline.core.ingest.sources.exports",)  # type: ignore[attr-defined]
register_detector(KIND, sniff, parse, rank=10)
