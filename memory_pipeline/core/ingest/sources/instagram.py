"""Reader for Instagram's "Download your information" messages (JSON).

Instagram writes Messenger's thread format (``your_instagram_activity/messages/inbox/
<user>_<id>/message_N.json``: participants, newest-first messages with ``timestamp_ms``,
``sender_name``, ``content``, ``photos``, ``share`` for shared posts and reels, ``reactions``;
every string mojibake), so it is read by the Messenger reader's parser with its own kind:
conversations are ``instagram_<thread folder>``. Under ``kind = "auto"`` a thread file is
Instagram's when its path (the export zip or folder) or its media ``uri`` values say so;
otherwise it is read as Messenger's (the rows are the same but for the conversation prefix).
Trimmed thread files (``participants`` as a list of names, or missing) read the same.

Instagram's older download (2018-2020) is one ``messages.json``: a list of conversations
``{participants: [usernames], conversation: [{sender, created_at, text | media_share_url |
story_share | media | voice_media | heart | link | action | video_call_action, likes}]}``
with ISO 8601 times. It is read too: one conversation per entry
(``instagram_<participants>``), shares as their caption and link, media typed, a heart as
its emoji, ``action`` as ``system``, calls as ``call``; likes are reactions, not messages.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterator
from typing import Any

from memory_pipeline.core.common.records import (
    R_BAD_TIMESTAMP,
    R_EMPTY_TEXT,
    R_MISSING_TIMESTAMP,
    R_NOT_AN_EXPORT,
    R_UNKNOWN_TYPE,
    Record,
)
from memory_pipeline.core.ingest.sources.base import SourceSpec, register
from memory_pipeline.core.ingest.sources.exports import (
    ExportFile,
    Owners,
    Rejected,
    clean_name,
    clean_text,
    conversation_option,
    from_epoch,
    head_text,
    load_json,
    message,
    quarantine,
    read_exports,
    register_detector,
    safe_id,
)
from memory_pipeline.core.ingest.sources.messenger import (
    accept_json,
    fix_mojibake,
    is_instagram,
    is_meta_thread,
    parse_as,
    participant_names,
)

KIND = "instagram"


_LEGACY_HEAD = re.compile(r'\[\s*\{\s*"(?:participants|conversation)"\s*:\s*\[')
_VIDEO = (".mp4", ".mov", ".webm")


def is_legacy(f: ExportFile) -> bool:
    """Instagram's old ``messages.json``: a list of ``{participants, conversation}``."""
    head = head_text(f, 16384).lstrip()
    return (
        _LEGACY_HEAD.match(head) is not None
        and '"conversation"' in head
        and ('"created_at"' in head or '"participants"' in head)
    )


def sniff(f: ExportFile) -> bool:
    """A Meta thread file from an Instagram export, or Instagram's old ``messages.json``."""
    return (is_meta_thread(f) and is_instagram(f)) or is_legacy(f)


def parse(spec: SourceSpec, f: ExportFile, dates: frozenset[dt.date] | None) -> Iterator[Record]:
    """Records of one Instagram thread file (raises Rejected before the first)."""
    if head_text(f, 64).lstrip().startswith("["):
        return parse_legacy(spec, f, dates)
    return parse_as(KIND, spec, f, dates)


def _legacy_kind(m: dict) -> tuple[str, str]:
    """(type, text) of one entry of the old ``conversation`` lists."""
    text = m.get("text") if isinstance(m.get("text"), str) else ""
    if m.get("action"):
        return "system", " ".join(x for x in (str(m.get("sender") or ""), str(m["action"])) if x)
    if m.get("video_call_action"):
        return "call", str(m["video_call_action"])
    if m.get("media_share_url") or m.get("media_owner"):
        caption = m.get("media_share_caption")
        parts = [text, str(caption or ""), str(m.get("media_share_url") or "")]
        if not any(parts) and m.get("media_owner"):
            parts = [f"shared a post by {m['media_owner']}"]
        return "text", "\n".join(x for x in parts if x)
    if m.get("story_share"):
        return "text", "\n".join(x for x in (text, f"story: {m['story_share']}") if x)
    if m.get("profile_share_username"):
        return "text", "\n".join(x for x in (text, f"@{m['profile_share_username']}") if x)
    if m.get("voice_media"):
        return "audio", text
    if m.get("animated_media_images"):
        return "video", text
    media = m.get("media") or m.get("media_url")
    if isinstance(media, str) and media:
        return ("video" if media.lower().split("?")[0].endswith(_VIDEO) else "photo"), text
    if m.get("heart"):
        return "text", "\n".join(x for x in (text, str(m["heart"])) if x)
    if m.get("link") and str(m["link"]) not in text:
        return "text", "\n".join(x for x in (text, str(m["link"])) if x)
    return "text", text


def _when(value: Any, tz: str) -> tuple[dt.datetime, dt.datetime] | None:
    try:
        t = dt.datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.UTC)  # the old export wrote UTC
    return from_epoch(t.timestamp(), tz)


def parse_legacy(
    spec: SourceSpec, f: ExportFile, dates: frozenset[dt.date] | None
) -> Iterator[Record]:
    """Records of Instagram's old ``messages.json`` (raises Rejected before the first)."""
    doc = load_json(f, "Instagram's messages.json")
    if not isinstance(doc, list) or not any(
        isinstance(c, dict) and isinstance(c.get("conversation"), list) for c in doc
    ):
        raise Rejected(R_NOT_AN_EXPORT, "JSON without Instagram's conversation lists")
    doc = fix_mojibake(doc)
    owners = Owners(spec)
    forced = conversation_option(spec)
    order = 0
    for ci, c in enumerate(doc):
        names = participant_names(c.get("participants")) if isinstance(c, dict) else []
        key = "_".join(sorted(names)) or f"conversation{ci}"
        conv = forced or f"{KIND}_{safe_id(key)}"
        contact = ", ".join(n for n in names if n not in owners) or key
        entries = c.get("conversation") if isinstance(c, dict) else None
        if not isinstance(entries, list):
            ref = f"{KIND}:{key}"
            yield quarantine(spec, f, R_UNKNOWN_TYPE, "conversation entry without messages",
                             conv=conv, day=None, ref=ref, raw=json.dumps(c)[:2000])  # fmt: skip
            order += 1
            continue
        for i, m in enumerate(entries):
            ref = f"{KIND}:{key}#{i}"
            raw = json.dumps(m, ensure_ascii=False)[:2000]
            ordr, order = order, order + 1
            if not isinstance(m, dict):
                yield quarantine(spec, f, R_UNKNOWN_TYPE, "message is not an object", conv=conv,
                                 day=None, ref=ref, raw=raw)  # fmt: skip
                continue
            when = _when(m["created_at"], spec.timezone) if m.get("created_at") else None
            if when is None:
                reason = R_BAD_TIMESTAMP if m.get("created_at") else R_MISSING_TIMESTAMP
                yield quarantine(spec, f, reason, "no usable created_at", conv=conv, day=None,
                                 ref=ref, raw=raw)  # fmt: skip
                continue
            local, utc = when
            if dates is not None and local.date() not in dates:
                continue
            mtype, text = _legacy_kind(m)
            if mtype == "text" and not text.strip():
                what = "only likes" if m.get("likes") else "no text or media"
                yield quarantine(spec, f, R_EMPTY_TEXT, f"message with {what}", conv=conv,
                                 day=local.date(), ref=ref, raw=raw)  # fmt: skip
                continue
            sender = "" if mtype == "system" else clean_name(str(m.get("sender") or ""))
            yield message(
                spec, f, conv=conv, contact=contact, sender=sender, owners=owners, local=local,
                utc=utc, type_=mtype, text=clean_text(text), order=ordr, line=None, ref=ref,
            )  # fmt: skip


@register(KIND)
def read_instagram(spec: SourceSpec, dates: frozenset[dt.date] | None) -> Iterator[Record]:
    """Every Instagram thread file under the source path (a DYI folder or zip)."""
    yield from read_exports(spec, dates, parse, accept_json)


read_instagram.depends_on = (  # type: ignore[attr-defined]
    "memory_pipeline.core.ingest.sources.exports",
    "memory_pipeline.core.ingest.sources.messenger",
)
register_detector(KIND, sniff, parse, rank=10)
