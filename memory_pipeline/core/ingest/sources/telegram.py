"""Reader for Telegram Desktop's "Export chat history" / "Export Telegram data" JSON.

``result.json`` holds one chat (``{name, type, id, messages}``) or a whole account
(``{personal_information, chats: {list: [...]}, left_chats: {list: [...]}}``). Each entry of
``messages`` is one record. Time: ``date_unixtime`` (epoch seconds, newer exports) is the
instant; without it, ``date`` is the exporting machine's wall time, read in the source's zone.
Text is a string or a list of strings and ``{type, text}`` entities, concatenated. Service
messages (joins, pins, calls) are ``type = "system"`` (a phone call is ``call``); media become
typed messages with the caption as text. The account owner is recognised from
``personal_information.user_id`` (``from_id`` ``user<id>``), besides ``owner`` /
``owner_aliases``. ``source_ref`` is ``telegram:<chat id>/<message id>``, stable across
re-exports; a message id repeated within one chat of one file is a ``duplicate``.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memory_pipeline.core.common.records import (
    R_BAD_TIMESTAMP,
    R_DUPLICATE,
    R_MALFORMED_JSON,
    R_MISSING_TIMESTAMP,
    R_NO_RECORDS,
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
    local_and_utc,
    message,
    quarantine,
    read_exports,
    register_detector,
    safe_id,
)

KIND = "telegram"
DELETED = "Deleted Account"  # what Telegram shows for a sender whose name is null

_MEDIA = {
    "sticker": "sticker",
    "voice_message": "audio",
    "audio_file": "audio",
    "video_file": "video",
    "video_message": "video",
    "animation": "video",
}


def flatten_text(value: Any) -> str:
    """A message's ``text``: a string, or a list of strings and ``{type, text}`` entities."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(
            part if isinstance(part, str) else str(part.get("text", ""))
            for part in value
            if isinstance(part, str | dict)
        )
    return ""


def _chats(doc: dict) -> list[dict] | None:
    if isinstance(doc.get("messages"), list):
        return [doc]
    chats = []
    for key in ("chats", "left_chats"):
        block = doc.get(key)
        if isinstance(block, dict) and isinstance(block.get("list"), list):
            chats += [c for c in block["list"] if isinstance(c, dict)]
        elif isinstance(block, list):  # a hand-trimmed export without the "about" wrapper
            chats += [c for c in block if isinstance(c, dict)]
    return chats if chats or _is_account(doc) else None


def _is_account(doc: dict) -> bool:
    """A whole-account export (any of its sections), even one whose chats were not chosen."""
    return any(isinstance(doc.get(k), dict | list) for k in _ACCOUNT_KEYS)


# the sections of "Export Telegram data", in the order Telegram Desktop writes them
_ACCOUNT_KEYS = tuple(
    "personal_information profile_pictures stories contacts frequent_contacts sessions "
    "web_sessions other_data chats left_chats".split()
)
_CHAT_TYPES = (
    "saved_messages|replies|verification_codes|personal_chat|bot_chat|private_group|"
    "private_supergroup|public_supergroup|private_channel|public_channel"
)
_ACCOUNT_HEAD = re.compile(
    r'\{\s*"about"\s*:\s*"[^"]*"\s*,\s*"(?:' + "|".join(_ACCOUNT_KEYS) + r')"\s*:\s*[\[{]'
)
_CHAT_HEAD = re.compile(
    r'"type"\s*:\s*(?:"(?:' + _CHAT_TYPES + r')"|null)\s*,\s*"id"\s*:\s*-?\d+\s*,'
    r'\s*"messages"\s*:\s*\['
)
_MESSAGES_LIST = re.compile(r'"messages"\s*:\s*\[\s*\{')
_CHATS_LIST = re.compile(
    r'"(?:left_)?chats"\s*:\s*\{\s*(?:"about"\s*:\s*"[^"]*"\s*,\s*)?"list"\s*:'
)


def sniff(f: ExportFile) -> bool:
    """True when the file opens like a Telegram export: a single chat (``type``, ``id``,
    ``messages`` as Telegram Desktop writes them), a whole-account export (``about`` then
    one of its sections: the chats may come after megabytes of contacts and sessions), or
    a ``chats: {list: [...]}`` block; else the older test on its keys."""
    head = head_text(f, 65536).lstrip()
    if not head.startswith("{"):
        return False
    if _ACCOUNT_HEAD.match(head) or _CHAT_HEAD.search(head) or _CHATS_LIST.search(head):
        return True
    if _MESSAGES_LIST.search(head) and '"date"' in head and '"from"' in head:
        return '"sender_name"' not in head and '"timestamp"' not in head  # not Meta/Discord
    return '"personal_information"' in head or (
        '"messages"' in head and '"date"' in head and '"type"' in head
    )


def _type(m: dict) -> tuple[str, str]:
    """(type, text) of one message entry."""
    text = flatten_text(m.get("text"))
    if m.get("type") == "service":
        action = str(m.get("action", ""))
        if action == "phone_call" or action == "group_call":
            secs = m.get("duration_seconds")
            extra = f" ({secs} s)" if isinstance(secs, int) else ""
            return "call", text or f"{action.replace('_', ' ')}{extra}"
        return "system", text or _service_text(m, action)
    media = m.get("media_type")
    if media in _MEDIA:
        kind = _MEDIA[media]
        if kind == "sticker" and not text:
            text = str(m.get("sticker_emoji", ""))
        return kind, text
    if "photo" in m:
        return "photo", text
    if "file" in m:
        return "file", text
    if "location_information" in m or "place_name" in m:
        return "location", text
    if "contact_information" in m:
        return "contact", text
    if "poll" in m and not text:
        return "text", str(m["poll"].get("question", "")) if isinstance(m["poll"], dict) else ""
    return "text", text


def _service_text(m: dict, action: str) -> str:
    """A service message without text, in words: actor, action, its title or members."""
    actor = str(m.get("actor") or "")
    extra = m.get("title") or m.get("new_title") or m.get("information_text") or ""
    members = m.get("members")
    if not extra and isinstance(members, list):
        extra = ", ".join(str(x) for x in members if x)
    words = [actor, action.replace("_", " "), str(extra)]
    return " ".join(x for x in words if x)


def parse(spec: SourceSpec, f: ExportFile, dates: frozenset[dt.date] | None) -> Iterator[Record]:
    """Records of one ``result.json`` (raises Rejected before the first)."""
    # the shared parser: bounded depth, over-long numbers refused, surrogates scrubbed, and a
    # duplicated "messages" key keeps both arrays
    doc = load_json(f, "a Telegram result.json")
    if not isinstance(doc, dict) or (chats := _chats(doc)) is None:
        raise Rejected(R_NOT_AN_EXPORT, "JSON without Telegram's 'messages' or 'chats'")
    if not any(isinstance(c.get("messages"), list) and c["messages"] for c in chats):
        what = "chat" if "messages" in doc else "account export"
        raise Rejected(R_NO_RECORDS, f"a Telegram {what} without messages")
    owners = Owners(spec)
    me = doc.get("personal_information", {})
    my_id = f"user{me['user_id']}" if isinstance(me, dict) and "user_id" in me else None
    forced = conversation_option(spec)
    order = 0
    for ci, chat in enumerate(chats):
        chat_id = chat.get("id")
        if chat_id is None:  # a hand-trimmed export: the chat's name, else the file's
            chat_id = clean_name(str(chat.get("name") or "")) or f"{f.stem}-{ci}"
        name = clean_name(str(chat.get("name") or "")) or f"chat {chat_id}"
        conv = forced or f"telegram_{safe_id(str(chat_id))}"
        seen: set[Any] = set()
        for mi, m in enumerate(chat.get("messages") or []):
            ref = f"telegram:{chat_id}/{m.get('id', f'#{mi}') if isinstance(m, dict) else mi}"
            ordr, order = order, order + 1
            if not isinstance(m, dict):
                yield quarantine(spec, f, R_MALFORMED_JSON, "message is not an object",
                                 conv=conv, day=None, ref=ref, raw=_raw(m))  # fmt: skip
                continue
            if m.get("type") == "unsupported":  # Telegram wrote only its id
                yield quarantine(spec, f, R_UNKNOWN_TYPE,
                                 "a message Telegram Desktop exported as 'unsupported'",
                                 conv=conv, day=None, ref=ref, raw=_raw(m))  # fmt: skip
                continue
            local, utc = _when(m, spec.timezone)
            if local is None:
                reason = R_MISSING_TIMESTAMP if utc is None else R_BAD_TIMESTAMP
                yield quarantine(spec, f, reason, "no usable date_unixtime or date",
                                 conv=conv, day=None, ref=ref, raw=_raw(m))  # fmt: skip
                continue
            if dates is not None and local.date() not in dates:
                continue
            mid = m.get("id")
            if mid is not None and mid in seen:
                yield quarantine(spec, f, R_DUPLICATE, f"message id {mid} repeated in the chat",
                                 conv=conv, day=local.date(), ref=ref, raw=_raw(m))  # fmt: skip
                continue
            seen.add(mid)
            if m.get("type") not in ("message", "service", None):
                yield quarantine(spec, f, R_UNKNOWN_TYPE, "entry type is not message/service",
                                 conv=conv, day=local.date(), ref=ref, raw=_raw(m))  # fmt: skip
                continue
            kind, body = _type(m)
            sender = clean_name(str(m.get("from") or m.get("actor") or ""))
            if not sender and (m.get("from_id") or m.get("actor_id")):
                sender = DELETED  # "from": null is an account deleted since
            if kind == "system":
                sender = ""
            from_id = m.get("from_id") or m.get("actor_id")
            msg = message(
                spec, f, conv=conv, contact=name, sender=sender, owners=owners, local=local,
                utc=utc, type_=kind, text=clean_text(body), order=ordr, line=None, ref=ref,
            )  # fmt: skip
            if my_id is not None and from_id == my_id and kind != "system":
                msg.is_owner = True
            yield msg


def _raw(m: object) -> str:
    """A message entry as its quarantine excerpt (built only for quarantined entries)."""
    return json.dumps(m, ensure_ascii=False)[:2000]


def _when(m: dict, tz: str) -> tuple[dt.datetime | None, dt.datetime | None]:
    """(local, utc) of a message: ``date_unixtime`` first, else ``date`` in ``tz``.
    (None, None): no time field; (None, x): a field that does not parse."""
    unix = m.get("date_unixtime")
    if unix not in (None, ""):
        try:
            return from_epoch(int(float(str(unix).strip())), tz)
        except (ValueError, OverflowError, OSError):
            return None, dt.datetime.min
    date = m.get("date")
    if not isinstance(date, str) or not date:
        return None, None
    try:
        local = dt.datetime.fromisoformat(date)
    except ValueError:
        return None, dt.datetime.min
    if local.tzinfo is not None:
        utc = local.astimezone(dt.UTC)
        return from_epoch(utc.timestamp(), tz)
    return local_and_utc(local, tz)


def _accept(path: Path) -> bool:
    return path.suffix.lower() == ".json"


@register(KIND)
def read_telegram(spec: SourceSpec, dates: frozenset[dt.date] | None) -> Iterator[Record]:
    """Every Telegram Desktop JSON export under the source path."""
    yield from read_exports(spec, dates, parse, _accept)


read_telegram.depends_on = ("memory_pipeline.core.ingest.sources.exports",)  # type: ignore[attr-defined]
register_detector(KIND, sniff, parse, rank=10)
