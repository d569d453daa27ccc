"""Signal Desktop chats exported as HTML by ``signal-export`` (``sigexport``): ``index.html``.

Each message is an element with class ``msg`` (``msg me`` for your own, ``msg cont`` for a
follow-up within minutes that shows no sender and time of its own); its time is a
``<time datetime=…>``, a ``title`` with the full date, or ``span.date`` + ``span.time``
(older versions), under a ``day`` divider with the date; the sender is ``span.sender``
(``Me`` is you); the text is ``p.body`` (quotes in ``p.quote`` and reactions are not text);
images (``figure``/``img``), audio, video and file links give the type, "… not exported"
placeholders too; stickers ``(( 😀 ))`` are ``sticker``; a deleted message and a call
(``event`` line) are ``system``/``call``. A follow-up without a time of its own takes the
time of the message before it (``ts_inferred``). Times are the exporting machine's wall
time (the source's ``timezone``).

sigexport writes ``chat.md`` beside ``index.html``: the same chat, read from the Markdown
(it carries every message's own time), so such an ``index.html`` is one
``duplicate_export`` row for the file.
"""

from __future__ import annotations

import datetime as dt
import re
import zipfile
from collections.abc import Iterator
from pathlib import PurePosixPath

from memory_pipeline.core.common.records import (
    R_DUPLICATE_EXPORT,
    R_EMPTY_TEXT,
    R_MISSING_TIMESTAMP,
    R_NOT_AN_EXPORT,
    Record,
)
from memory_pipeline.core.ingest.sources.base import SourceSpec
from memory_pipeline.core.ingest.sources.exports import (
    ExportFile,
    Owners,
    Rejected,
    clean_name,
    clean_text,
    conversation_option,
    decode_text,
    head_text,
    local_and_utc,
    message,
    quarantine,
    safe_id,
)
from memory_pipeline.core.ingest.sources.html_tree import Node, parse_html

ME = "Me"
_MSG_CLASS = re.compile(r"""class\s*=\s*["']?msg\b""")
_PART_CLASS = re.compile(r"""class\s*=\s*["']?(?:sender|body)\b""")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_FULL = re.compile(r"(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}(?::\d{2})?)")
_CLOCK = re.compile(r"\d{1,2}:\d{2}(?::\d{2})?")
_STICKER = re.compile(r"\(\( ?(?P<e>.*?) ?\)\)")
_MISSING = re.compile(r"\W*(?P<what>Image|Audio|Video|Attachment) not exported\W*", re.I)
_WHAT = {"image": "photo", "audio": "audio", "video": "video", "attachment": "file"}
_EXT = {
    "photo": {".jpg", ".jpeg", ".png", ".gif", ".webp", ".heic"},
    "video": {".mp4", ".mov", ".webm"},
    "audio": {".m4a", ".aac", ".mp3", ".ogg", ".opus"},
}
_NOT_TEXT = frozenset({"quote", "reaction", "reactions", "modal", "date", "time", "sender",
                       "meta"})  # fmt: skip


def sniff(f: ExportFile) -> bool:
    """An HTML page with sigexport's ``msg`` elements and their ``sender``/``body``."""
    head = head_text(f, 65536)
    if "<" not in head[:1024] or _MSG_CLASS.search(head) is None:
        return False
    return _PART_CLASS.search(head) is not None


def _beside(spec: SourceSpec, f: ExportFile, name: str) -> bool:
    """Whether a file ``name`` sits in the same folder as ``f`` (on disk or in its zip)."""
    if f.path is not None:
        return (f.path.parent / name).is_file()
    parts = PurePosixPath(f.rel).parts
    for i, part in enumerate(parts):
        if part.lower().endswith(".zip"):
            zpath = spec.path if spec.path.is_file() else spec.path.joinpath(*parts[: i + 1])
            inner = "/".join((*parts[i + 1 : -1], name))
            try:
                with zipfile.ZipFile(zpath) as z:
                    return inner in set(z.namelist())
            except (OSError, zipfile.BadZipFile, ValueError):
                return False
    return False


def _local(node: Node, day: dt.date | None) -> dt.datetime | None:
    """The wall time a message element shows, or None when it shows none."""
    for n in (node, *node.walk()):
        for key in ("datetime", "data-date", "title"):
            m = _FULL.search(n.attrs.get(key, ""))
            if m is not None:
                return _at(m[1], m[2])
    date_el, time_el = node.find("date"), node.find("time")
    if time_el is None:
        time_el = next((n for n in node.walk() if n.tag == "time"), None)
    clock = _CLOCK.search(time_el.text()) if time_el is not None else None
    if clock is None:
        return None
    d = _DATE.search(date_el.text()) if date_el is not None else None
    if d is not None:
        return _at(d[0], clock[0])
    return _at(day.isoformat(), clock[0]) if day is not None else None


def _at(date: str, clock: str) -> dt.datetime | None:
    fmt = "%Y-%m-%d %H:%M:%S" if clock.count(":") == 2 else "%Y-%m-%d %H:%M"
    try:
        return dt.datetime.strptime(f"{date} {clock.zfill(5 if clock.count(':') == 1 else 8)}",
                                    fmt)  # fmt: skip
    except ValueError:
        return None


def _content(node: Node) -> tuple[str, str]:
    """(type, text) of a message element."""
    if node.has("deleted"):
        return "system", "This message was deleted"
    if node.has("event") or node.has("call"):
        words = node.find("text")
        said = (words or node).text(_NOT_TEXT, skip_tags=frozenset({"time"}))
        return "call", said.lstrip("\U0001f4de\U0001f4f9 ")
    body = node.find("body") or node
    kind = "text"
    for n in body.walk(frozenset({"quote", "reaction", "reactions"})):
        if n.tag in ("img", "figure") and kind == "text":
            kind = "photo"
        elif n.tag in ("audio", "video") and kind == "text":
            kind = n.tag
        elif n.tag == "a" and (n.has("file") or "media/" in n.attrs.get("href", "")):
            suffix = PurePosixPath(n.attrs.get("href", "")).suffix.lower()
            kind = next((k for k, exts in _EXT.items() if suffix in exts), "file")
    text = body.text(_NOT_TEXT)
    missing = _MISSING.search(text)
    if missing is not None:
        kind = _WHAT[missing["what"].lower()]
        text = (text[: missing.start()] + " " + text[missing.end() :]).strip()
    if kind != "text":  # a file link's own text is the file name, not a caption
        text = "\n".join(
            s for s in text.split("\n") if s.strip() and not s.strip().startswith(("./", "media/"))
        )
    sticker = _STICKER.fullmatch(text.strip())
    if sticker is not None:
        return "sticker", sticker["e"]
    return kind, text


def parse_html_chat(
    spec: SourceSpec, f: ExportFile, dates: frozenset[dt.date] | None
) -> Iterator[Record]:
    """Records of one sigexport ``index.html`` (raises Rejected before the first)."""
    if _beside(spec, f, "chat.md"):
        raise Rejected(R_DUPLICATE_EXPORT,
                       "the same chat as the chat.md beside it, which is read instead")  # fmt: skip
    root = parse_html(decode_text(f.data))
    items = [n for n in root.walk(frozenset({"msg", "event", "day"}))
             if n.classes & {"msg", "event", "day"}]  # fmt: skip
    msgs = [n for n in items if n.has("msg") or n.has("event")]
    if not any(_local(n, None) is not None or n.find("time") is not None for n in msgs):
        raise Rejected(R_NOT_AN_EXPORT, "HTML without signal-export's dated messages")
    folder = PurePosixPath(f.rel).parent.name or (f.path.parent.name if f.path else f.stem)
    name = clean_name(folder)
    conv = conversation_option(spec) or f"signal_{safe_id(name)}"
    owners = Owners(spec)
    day: dt.date | None = None
    prev: tuple[dt.datetime, str] | None = None
    for order, node in enumerate(items):
        if node.has("day"):
            d = _DATE.search(node.text() + " " + node.attrs.get("datetime", ""))
            day = dt.date.fromisoformat(d[0]) if d is not None else day
            continue
        local = _local(node, day)
        inferred = local is None and prev is not None
        if local is None and prev is not None:
            local = prev[0]
        snd = node.find("sender")
        sender = clean_name(snd.text()) if snd is not None else ""
        if not sender:
            sender = prev[1] if prev is not None and node.has("cont") else ""
        if not sender and node.has("me"):
            sender = ME
        raw = node.text()[:2000]
        if local is None:
            yield quarantine(spec, f, R_MISSING_TIMESTAMP, "message without a date or time",
                             conv=conv, day=None, line=node.line, raw=raw)  # fmt: skip
            continue
        if not node.has("event"):
            prev = (local, sender)
        if dates is not None and local.date() not in dates:
            continue
        kind, text = _content(node)
        if kind == "text" and not text.strip():
            yield quarantine(spec, f, R_EMPTY_TEXT, "message without text or media", conv=conv,
                             day=local.date(), line=node.line, raw=raw)  # fmt: skip
            continue
        mine = sender == ME or node.has("me")
        who = "" if kind == "call" and not sender else sender
        if mine and who == ME:
            who = spec.owner or ME
        if kind == "system":
            text, who, mine = (f"{who}: {text}" if who else text), "", False
        local2, utc = local_and_utc(local, spec.timezone)
        out = message(
            spec, f, conv=conv, contact=name, sender=who, owners=owners, local=local2, utc=utc,
            type_=kind, text=clean_text(text), order=order, line=node.line,
        )  # fmt: skip
        out.is_owner = out.is_owner or (mine and kind != "system")
        out.ts_inferred = inferred
        yield out
