"""Reader for Facebook Messenger's "Download your information" JSON (Instagram shares it).

A thread is ``messages/inbox/<thread>_<id>/message_1.json`` … ``message_N.json`` (newer
exports under ``your_facebook_activity/``), each ``{participants[{name}], messages[], title,
thread_path, …}`` with the messages **newest first**. Every string is mojibake — the UTF-8
bytes written as ``\\u00XX`` characters ("M\\u00c3\\u00bcller") — and is repaired with
``s.encode("latin-1").decode("utf-8")`` wherever that round-trips (a string that does not is
left as it is). Each entry of ``messages`` is one record: ``sender_name``, ``timestamp_ms``
(UTC), ``content``; ``photos``/``videos``/``audio_files``/``gifs``/``files``/``sticker``
give the type (the content stays as the caption), ``share`` adds its link, a call
(``call_duration``) is ``call``, an unsent message (``is_unsent``) and the old
``Subscribe``/``Unsubscribe`` types are ``system``. Reactions are not messages and are
ignored. One conversation per thread (``messenger_<thread folder>``, stable across
exports), named by its ``title``. Meta does not mark your own messages: ``owner`` /
``owner_aliases`` name you as the export shows you (your display name at export time).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from memory_pipeline.core.common.records import (
    R_BAD_TIMESTAMP,
    R_EMPTY_TEXT,
    R_ENCODING,
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

KIND = "messenger"
_MEDIA = (
    ("photos", "photo"),
    ("videos", "video"),
    ("gifs", "video"),
    ("audio_files", "audio"),
    ("files", "file"),
)
_SYSTEM_TYPES = {"Subscribe", "Unsubscribe"}
_THREAD = re.compile(
    r"(?:^|/)(?:inbox|archived_threads|filtered_threads|message_requests|e2ee_cutover)/([^/]+)"
)


def fix_mojibake(value: Any) -> Any:
    """Meta's strings repaired (UTF-8 bytes that were written as code points 0-255)."""
    if isinstance(value, str):
        if value.isascii():
            return value
        try:
            return value.encode("latin-1").decode("utf-8")
        except (UnicodeEncodeError, UnicodeDecodeError):
            return value
    if isinstance(value, list):
        return [fix_mojibake(v) for v in value]
    if isinstance(value, dict):
        return {k: fix_mojibake(v) for k, v in value.items()}
    return value


def is_meta_thread(f: ExportFile) -> bool:
    """A JSON object with Meta's thread keys (``participants``, ``messages``, ``timestamp_ms``
    or ``thread_path``); a trimmed thread without ``participants`` still has its messages'
    ``sender_name`` and ``timestamp_ms``."""
    head = head_text(f, 16384).lstrip()
    if not (head.startswith("{") and '"messages"' in head):
        return False
    if '"participants"' in head:
        return '"timestamp_ms"' in head or '"thread_path"' in head
    return '"sender_name"' in head and '"timestamp_ms"' in head


def is_instagram(f: ExportFile) -> bool:
    """Instagram's thread files are Messenger's format; what tells them apart is where they
    sit: the export's zip and folders (``instagram-<user>-<date>.zip``,
    ``your_instagram_activity/``), which media ``uri`` values inside repeat. A link to
    instagram.com in a message does not count (Messenger users share those)."""
    if "instagram" in f.rel.casefold():
        return True
    return re.search(r'"uri":\s*"[^"]*instagram', head_text(f, 65536)) is not None


def sniff(f: ExportFile) -> bool:
    """A Meta thread file that is not Instagram's."""
    return is_meta_thread(f) and not is_instagram(f)


def _kind(m: dict) -> tuple[str, str]:
    """(type, text) of one message."""
    text = m.get("content") if isinstance(m.get("content"), str) else ""
    if m.get("is_unsent"):
        return "system", text or "message unsent"
    if m.get("type") in _SYSTEM_TYPES:
        return "system", text
    if "call_duration" in m or m.get("type") == "Call":
        secs = m.get("call_duration")
        return "call", text or (f"call ({secs} s)" if isinstance(secs, int) and secs else "call")
    share = m.get("share") if isinstance(m.get("share"), dict) else None
    if share:
        extra = [str(share[k]) for k in ("link", "share_text") if share.get(k)]
        if not extra and share.get("original_content_owner"):
            extra = [f"shared a post by {share['original_content_owner']}"]
        extra = [x for x in extra if x not in text]
        if extra or text:
            return "text", "\n".join([text, *extra]).strip()
    for key, kind in _MEDIA:
        items = m.get(key)
        if isinstance(items, list) and items:
            return kind, text
    if isinstance(m.get("sticker"), dict):
        return "sticker", text
    return "text", text


def participant_names(value: Any) -> list[str]:
    """``participants`` as Meta writes it (``[{"name": ...}]``), as a list of plain names
    (older and trimmed exports), or absent."""
    out = []
    for p in value if isinstance(value, list) else []:
        name = p.get("name", "") if isinstance(p, dict) else p if isinstance(p, str) else ""
        if clean_name(str(name)):
            out.append(clean_name(str(name)))
    return out


def thread_id(doc: dict, f: ExportFile) -> str:
    """The thread's folder name (``mariasilva_10158…``): from ``thread_path``, else the
    file's folder."""
    for candidate in (str(doc.get("thread_path") or ""), f.rel):
        m = _THREAD.search(candidate)
        if m:
            return m[1]
    parent = PurePosixPath(f.rel).parent.name
    return parent or f.stem


def parse_as(kind: str, spec: SourceSpec, f: ExportFile, dates: frozenset[dt.date] | None):
    """Records of one Meta thread file as ``kind`` (messenger or instagram)."""
    doc = load_json(f, "a Meta thread file (message_N.json)")
    if not (isinstance(doc, dict) and isinstance(doc.get("messages"), list)):
        raise Rejected(R_NOT_AN_EXPORT, "JSON without Meta's participants and messages")
    if not isinstance(doc.get("participants"), list) and not any(
        isinstance(m, dict) and ("sender_name" in m or "timestamp_ms" in m)
        for m in doc["messages"]
    ):
        raise Rejected(R_NOT_AN_EXPORT, "JSON without Meta's participants and messages")
    doc = fix_mojibake(doc)
    tid = thread_id(doc, f)
    conv = conversation_option(spec) or f"{kind}_{safe_id(tid)}"
    names = participant_names(doc.get("participants"))
    owners = Owners(spec)
    title = clean_name(str(doc.get("title") or "")) or ", ".join(
        n for n in names if n not in owners
    )
    for i, m in enumerate(doc["messages"]):
        ref = f"{kind}:{tid}/{f.stem}#{i}"
        raw = json.dumps(m, ensure_ascii=False)[:2000]
        if not isinstance(m, dict):
            yield quarantine(spec, f, R_UNKNOWN_TYPE, "message is not an object", conv=conv,
                             day=None, ref=ref, raw=raw)  # fmt: skip
            continue
        if has_bad_bytes(m):
            yield quarantine(spec, f, R_ENCODING, "invalid UTF-8 in the message", conv=conv,
                             day=None, ref=ref, raw=raw)  # fmt: skip
            continue
        ms = epoch_ms(m["timestamp_ms"]) if m.get("timestamp_ms") not in (None, "") else -1
        if ms is None or ms < 0:
            reason = R_BAD_TIMESTAMP if ms is None else R_MISSING_TIMESTAMP
            yield quarantine(spec, f, reason, "no usable timestamp_ms", conv=conv, day=None,
                             ref=ref, raw=raw)  # fmt: skip
            continue
        local, utc = from_epoch_ms(ms, spec.timezone)
        if dates is not None and local.date() not in dates:
            continue
        mtype, text = _kind(m)
        if mtype == "text" and not text.strip():
            what = "only reactions" if m.get("reactions") else "no content or media"
            yield quarantine(spec, f, R_EMPTY_TEXT, f"message with {what}",
                             conv=conv, day=local.date(), ref=ref, raw=raw)  # fmt: skip
            continue
        sender = clean_name(str(m.get("sender_name") or ""))
        out = message(
            spec, f, conv=conv, contact=title or tid, sender=sender, owners=owners,
            local=local, utc=utc, type_=mtype, text=clean_text(text), order=i, line=None,
            ref=ref,
        )  # fmt: skip
        if mtype == "system" and sender:
            if not out.text.startswith(sender):
                out.text = f"{sender}: {out.text}"
            out.sender = ""
            out.is_owner = False
        yield out


def parse(spec: SourceSpec, f: ExportFile, dates: frozenset[dt.date] | None) -> Iterator[Record]:
    """Records of one Messenger thread file (raises Rejected before the first)."""
    return parse_as(KIND, spec, f, dates)


def accept_json(path: Path) -> bool:
    """The thread files (``message_N.json``) and any other JSON, to be accounted for."""
    return path.suffix.lower() == ".json"


@register(KIND)
def read_messenger(spec: SourceSpec, dates: frozenset[dt.date] | None) -> Iterator[Record]:
    """Every Messenger thread file under the source path (a DYI folder or zip)."""
    yield from read_exports(spec, dates, parse, accept_json)


read_messenger.depends_on = ("memory_pipeline.core.ingest.sources.exports",)  # type: ignore[attr-defined]
register_detector(KIND, sniff, parse, rank=10)
