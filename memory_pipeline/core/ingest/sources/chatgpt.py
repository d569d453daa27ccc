"""Reader for ChatGPT's data export (``conversations.json`` in the zip OpenAI mails you).

The file is a list of conversations: ``id``/``conversation_id``, ``title``, ``create_time``
(epoch seconds, a float), ``current_node`` and ``mapping`` (node id -> ``{message, parent,
children}``). The tree keeps every version of an edited prompt and every regenerated
answer; what the user last saw is the branch from ``current_node`` up to the root, so that
branch is read (in root-to-leaf order) and each other node that holds a visible message is
one ``superseded`` quarantine row. A node is a record when its message shows something:
text (``parts`` strings, ``text`` of code and tool output) or media (image/audio parts);
empty and hidden nodes (the root, hidden system prompts, reasoning "thoughts") are not.

One conversation per chat (``chatgpt_<id>``), contact ``ChatGPT``; the user's messages are
the owner's (sender ``owner``), the assistant's have sender ``ChatGPT``, tool output and
system messages are ``system``. ``create_time`` is UTC; a message without one takes the
time of the message before it (``ts_inferred``). ``source_ref`` is
``chatgpt:<conversation id>/<message id>``.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memory_pipeline.core.common.records import (
    R_BAD_TIMESTAMP,
    R_ENCODING,
    R_MISSING_TIMESTAMP,
    R_NOT_AN_EXPORT,
    R_SUPERSEDED,
    Record,
)
from memory_pipeline.core.ingest.sources.base import SourceSpec, register
from memory_pipeline.core.ingest.sources.exports import (
    ExportFile,
    Owners,
    Rejected,
    clean_text,
    conversation_option,
    epoch_ms,
    from_epoch_ms,
    has_bad_bytes,
    head_text,
    load_json,
    message,
    quarantine,
    read_exports,
    register_detector,
    safe_id,
)

KIND = "chatgpt"
ASSISTANT = "ChatGPT"
OWNER_FALLBACK = "Me"
_HIDDEN_CONTENT = {"thoughts", "reasoning_recap", "model_editable_context"}
_MEDIA_PARTS = {
    "image_asset_pointer": "photo",
    "audio_asset_pointer": "audio",
    "real_time_user_audio_video_asset_pointer": "video",
}


def sniff(f: ExportFile) -> bool:
    """A JSON list of objects with ChatGPT's ``mapping`` tree."""
    head = head_text(f, 65536).lstrip()
    return head.startswith("[") and '"mapping"' in head and '"create_time"' in head


def content_of(msg: dict) -> tuple[str, str]:
    """(type, text) of a node's message: ``parts`` strings joined, media parts typed."""
    content = msg.get("content") if isinstance(msg.get("content"), dict) else {}
    ctype = content.get("content_type", "text")
    if ctype in _HIDDEN_CONTENT:
        return "", ""
    texts: list[str] = []
    kind = "text"
    for part in content.get("parts") or []:
        if isinstance(part, str):
            if part:
                texts.append(part)
        elif isinstance(part, dict):
            pt = part.get("content_type", "")
            if pt == "audio_transcription" and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif pt in _MEDIA_PARTS and kind == "text":
                kind = _MEDIA_PARTS[pt]
    for key in ("text", "result"):
        if not texts and isinstance(content.get(key), str) and content[key]:
            texts.append(content[key])
    text = "\n".join(texts)
    if kind == "text" and not text.strip():
        return "", ""
    return kind, text


def _branch(mapping: dict, current: Any) -> list[str]:
    """Node ids from the root to ``current`` (parent links, cycle-safe)."""
    out: list[str] = []
    seen: set[str] = set()
    node = current
    while isinstance(node, str) and node in mapping and node not in seen:
        seen.add(node)
        out.append(node)
        entry = mapping[node]
        node = entry.get("parent") if isinstance(entry, dict) else None
    out.reverse()
    return out


def _fallback_leaf(mapping: dict) -> str | None:
    """Without ``current_node``: the last created leaf."""
    leaves = [
        (float(e.get("message", {}).get("create_time") or 0), k)
        for k, e in mapping.items()
        if isinstance(e, dict) and not e.get("children") and isinstance(e.get("message"), dict)
    ]
    return max(leaves)[1] if leaves else None


def parse(spec: SourceSpec, f: ExportFile, dates: frozenset[dt.date] | None) -> Iterator[Record]:
    """Records of one ``conversations.json`` (raises Rejected before the first)."""
    doc = load_json(f, "ChatGPT's conversations.json")
    if not isinstance(doc, list) or not all(
        isinstance(c, dict) and isinstance(c.get("mapping"), dict) for c in doc
    ):
        raise Rejected(R_NOT_AN_EXPORT, "JSON without ChatGPT's conversations (a 'mapping')")
    owners = Owners(spec)
    me = spec.owner or OWNER_FALLBACK
    forced = conversation_option(spec)
    order = 0
    for ci, conv_doc in enumerate(doc):
        cid = str(conv_doc.get("conversation_id") or conv_doc.get("id") or f"#{ci}")
        conv = forced or f"chatgpt_{safe_id(cid)}"
        mapping = conv_doc["mapping"]
        current = conv_doc.get("current_node")
        branch = _branch(mapping, current if current in mapping else _fallback_leaf(mapping))
        on_branch = set(branch)
        rest = [k for k in mapping if k not in on_branch]
        last_ms = epoch_ms(conv_doc.get("create_time")) if conv_doc.get("create_time") else None
        for node_id in branch + rest:
            entry = mapping[node_id]
            msg = entry.get("message") if isinstance(entry, dict) else None
            if not isinstance(msg, dict):
                continue
            kind, text = content_of(msg)
            meta = msg.get("metadata") if isinstance(msg.get("metadata"), dict) else {}
            if not kind or meta.get("is_visually_hidden_from_conversation"):
                continue
            ordr, order = order, order + 1
            ref = f"chatgpt:{cid}/{msg.get('id') or node_id}"
            raw = json.dumps(msg, ensure_ascii=False)[:2000]
            if has_bad_bytes(msg):
                yield quarantine(spec, f, R_ENCODING, "invalid UTF-8 in the message", conv=conv,
                                 day=None, ref=ref, raw=raw)  # fmt: skip
                continue
            if node_id not in on_branch:
                yield quarantine(spec, f, R_SUPERSEDED,
                                 "an edited or regenerated version off the current branch",
                                 conv=conv, day=None, ref=ref, raw=raw)  # fmt: skip
                continue
            created = msg.get("create_time")
            inferred = created in (None, "", 0)
            ms = last_ms if inferred else epoch_ms(created)
            if ms is None:
                reason = R_MISSING_TIMESTAMP if inferred else R_BAD_TIMESTAMP
                yield quarantine(spec, f, reason, "no usable create_time", conv=conv, day=None,
                                 ref=ref, raw=raw)  # fmt: skip
                continue
            last_ms = ms
            local, utc = from_epoch_ms(ms, spec.timezone)
            if dates is not None and local.date() not in dates:
                continue
            author = msg.get("author") if isinstance(msg.get("author"), dict) else {}
            role = author.get("role")
            if role == "user":
                sender = me
            elif role == "assistant":
                sender = ASSISTANT
            else:
                sender, kind = "", "system"
            out = message(
                spec, f, conv=conv, contact=ASSISTANT, sender=sender, owners=owners, local=local,
                utc=utc, type_=kind, text=clean_text(text), order=ordr, line=None, ref=ref,
            )  # fmt: skip
            out.is_owner = role == "user"
            out.ts_inferred = inferred
            yield out


def _accept(path: Path) -> bool:
    return path.suffix.lower() == ".json"


@register(KIND)
def read_chatgpt(spec: SourceSpec, dates: frozenset[dt.date] | None) -> Iterator[Record]:
    """Every ChatGPT ``conversations.json`` (or export zip) under the source path."""
    yield from read_exports(spec, dates, parse, _accept)


read_chatgpt.depends_on = ("memory_pipeline.core.ingest.sources.exports",)  # type: ignore[attr-defined]
register_detector(KIND, sniff, parse, rank=10)
