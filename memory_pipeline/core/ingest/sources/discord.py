"""Reader for DiscordChatExporter's JSON (one channel or DM per file, ``… [part N].json``).

``{guild, channel{id, type, category, name}, messages[]}``; each message (``id`` snowflake,
``type``, ``timestamp`` ISO 8601 with offset, ``content``, ``author{name, nickname}``,
``attachments``, ``stickers``, ``embeds``) is one record. ``Default`` and ``Reply`` are
messages (an attachment gives the type, the content is its caption; a sticker alone is a
``sticker``), ``Call`` is a ``call``, the other types (joins, pins, renames, threads) are
``system``. The sender is the ``nickname`` (what the server showed), else the ``name``; the
owner is matched on either. One conversation per channel (``discord_<channel id>``), named
``Guild / #channel`` or, for a DM, by the channel name. ``source_ref`` is
``discord:<channel id>/<message id>``; an id repeated within one file is a ``duplicate``.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

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
    clean_name,
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

KIND = "discord"
_TEXT_TYPES = {"Default", "Reply", "ChatInputCommand", "ContextMenuCommand"}
_EVENTS = {
    "GuildMemberJoin": "joined the server",
    "RecipientAdd": "added a member",
    "RecipientRemove": "removed a member",
    "ChannelNameChange": "renamed the channel",
    "ChannelIconChange": "changed the channel icon",
    "ChannelPinnedMessage": "pinned a message",
    "ThreadCreated": "started a thread",
    "GuildBoost": "boosted the server",
}
_EXT = {
    "photo": {".png", ".jpg", ".jpeg", ".gif", ".webp", ".heic", ".bmp"},
    "video": {".mp4", ".mov", ".webm", ".mkv"},
    "audio": {".mp3", ".ogg", ".wav", ".m4a", ".flac", ".opus"},
}


def sniff(f: ExportFile) -> bool:
    """A JSON object with DiscordChatExporter's ``guild``, ``channel`` and ``messages``."""
    head = head_text(f, 16384).lstrip()
    return head.startswith("{") and all(k in head for k in ('"guild"', '"channel"', '"messages"'))


def _kind(m: dict) -> tuple[str, str]:
    """(type, text) of one message."""
    mtype = m.get("type") or "Default"
    text = m.get("content") if isinstance(m.get("content"), str) else ""
    if mtype == "Call":
        start, end = parse_iso(m.get("timestamp")), parse_iso(m.get("callEndedTimestamp"))
        mins = round((end - start).total_seconds() / 60) if start and end else None
        return "call", text or (f"call ({mins} min)" if mins else "call")
    if mtype not in _TEXT_TYPES:
        return "system", text or _EVENTS.get(str(mtype), str(mtype))
    files = [a for a in m.get("attachments") or [] if isinstance(a, dict)]
    if files:
        suffix = PurePosixPath(str(files[0].get("fileName") or "")).suffix.lower()
        kind = next((k for k, exts in _EXT.items() if suffix in exts), "file")
        return kind, text
    stickers = [s for s in m.get("stickers") or [] if isinstance(s, dict)]
    if stickers and not text.strip():
        return "sticker", str(stickers[0].get("name") or "")
    if not text.strip():
        embeds = [e for e in m.get("embeds") or [] if isinstance(e, dict)]
        if embeds:
            e = embeds[0]
            return "text", "\n".join(str(e[k]) for k in ("title", "url") if e.get(k))
    return "text", text


def parse(spec: SourceSpec, f: ExportFile, dates: frozenset[dt.date] | None) -> Iterator[Record]:
    """Records of one DiscordChatExporter JSON file (raises Rejected before the first)."""
    doc = load_json(f, "a DiscordChatExporter JSON")
    if not (
        isinstance(doc, dict)
        and isinstance(doc.get("channel"), dict)
        and isinstance(doc.get("messages"), list)
    ):
        raise Rejected(R_NOT_AN_EXPORT, "JSON without DiscordChatExporter's channel and messages")
    channel = doc["channel"]
    guild = doc.get("guild") if isinstance(doc.get("guild"), dict) else {}
    chan_id = str(channel.get("id") or safe_id(str(channel.get("name") or f.stem)))
    conv = conversation_option(spec) or f"discord_{safe_id(chan_id)}"
    gname = clean_name(str(guild.get("name") or ""))
    cname = clean_name(str(channel.get("name") or chan_id))
    dm = gname in ("", "Direct Messages") or str(channel.get("type", "")).startswith("Direct")
    contact = cname if dm else f"{gname} / #{cname}"
    owners = Owners(spec)
    tz = zone(spec.timezone)
    seen: set[str] = set()
    for i, m in enumerate(doc["messages"]):
        mid = str(m.get("id")) if isinstance(m, dict) and m.get("id") else f"#{i}"
        ref = f"discord:{chan_id}/{mid}"
        raw = json.dumps(m, ensure_ascii=False)[:2000]
        if not isinstance(m, dict):
            yield quarantine(spec, f, R_UNKNOWN_TYPE, "message is not an object", conv=conv,
                             day=None, ref=ref, raw=raw)  # fmt: skip
            continue
        if has_bad_bytes(m):
            yield quarantine(spec, f, R_ENCODING, "invalid UTF-8 in the message", conv=conv,
                             day=None, ref=ref, raw=raw)  # fmt: skip
            continue
        utc = parse_iso(m.get("timestamp"))
        if utc is None:
            reason = R_MISSING_TIMESTAMP if not m.get("timestamp") else R_BAD_TIMESTAMP
            yield quarantine(spec, f, reason, "no usable timestamp (ISO 8601 with offset)",
                             conv=conv, day=None, ref=ref, raw=raw)  # fmt: skip
            continue
        local = utc.astimezone(tz).replace(tzinfo=None)
        if dates is not None and local.date() not in dates:
            continue
        if mid in seen:
            yield quarantine(spec, f, R_DUPLICATE, "message id repeated in the file", conv=conv,
                             day=local.date(), ref=ref, raw=raw)  # fmt: skip
            continue
        seen.add(mid)
        kind, text = _kind(m)
        if kind == "text" and not text.strip():
            yield quarantine(spec, f, R_EMPTY_TEXT, "message without content", conv=conv,
                             day=local.date(), ref=ref, raw=raw)  # fmt: skip
            continue
        author = m.get("author") if isinstance(m.get("author"), dict) else {}
        name = clean_name(str(author.get("name") or ""))
        sender = clean_name(str(author.get("nickname") or "")) or name
        if kind == "system":
            text = f"{sender}: {text}" if sender else text
            sender = ""
        out = message(
            spec, f, conv=conv, contact=contact, sender=sender, owners=owners, local=local,
            utc=utc, type_=kind, text=clean_text(text), order=i, line=None, ref=ref,
        )  # fmt: skip
        out.is_owner = kind != "system" and (out.is_owner or bool(name) and name in owners)
        yield out


def _accept(path: Path) -> bool:
    return path.suffix.lower() == ".json"


@register(KIND)
def read_discord(spec: SourceSpec, dates: frozenset[dt.date] | None) -> Iterator[Record]:
    """Every DiscordChatExporter JSON file under the source path."""
    yield from read_exports(spec, dates, parse, _accept)


read_discord.depends_on = ("memory_pipeline.core.ingest.sources.exports",)  # type: ignore[attr-defined]
register_detector(KIND, sniff, parse, rank=10)
