"""Reader for the macOS Messages database (``~/Library/Messages/chat.db``, a copy of it).

The database is opened read-only (``file:…?mode=ro``), and, when another process holds it
locked (Messages running), again with ``immutable=1``, which reads the file as it is without
taking locks; nothing is ever written beside it. Each row of ``message`` is one record,
joined to its sender (``handle``) and chat (``chat_message_join``/``chat``). ``date`` counts
nanoseconds since 2001-01-01 UTC (seconds on schemas before High Sierra; told apart by size).
Recent macOS leaves ``text`` NULL and keeps the body only in ``attributedBody``, an
NSAttributedString typedstream: the string is read from after the ``NSString`` class name
(a length-prefixed UTF-8 run). Attachments (the U+FFFC placeholder in the text) give the type
from ``attachment.mime_type``; group events (``item_type`` > 0) are ``system``; tapbacks
(``associated_message_type`` 2000-3999) are reactions, not messages, and are quarantined as
such. A database without the expected tables is one ``not_an_export`` row.

One conversation per chat (``imessage_<number or address>`` for 1:1, the chat identifier for
groups); the sender is the handle (phone number or e-mail) or, for ``is_from_me``, the
``owner``. ``source_ref`` is ``imessage:<message guid>``.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

from memory_pipeline.core.common.records import (
    R_DUPLICATE,
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
    message,
    phone_key,
    quarantine,
    read_exports,
    register_detector,
    safe_id,
)

KIND = "imessage"
OWNER_FALLBACK = "Me"
APPLE_EPOCH = dt.datetime(2001, 1, 1, tzinfo=dt.UTC)
SQLITE_MAGIC = b"SQLite format 3\x00"
OBJECT = "\ufffc"
_REQUIRED = {
    "message": {"ROWID", "guid", "text", "date", "is_from_me", "handle_id"},
    "handle": {"ROWID", "id"},
    "chat": {"ROWID", "chat_identifier"},
    "chat_message_join": {"chat_id", "message_id"},
}
_OPTIONAL = ("attributedBody", "associated_message_type", "item_type", "cache_has_attachments")


def sniff(f: ExportFile) -> bool:
    """An SQLite database file (whose tables ``parse`` then checks)."""
    return f.head(16) == SQLITE_MAGIC


def attributed_text(blob: bytes | None) -> str | None:
    """The plain string of an ``attributedBody`` typedstream, or None.

    After the ``NSString`` class name comes a ``+`` (0x2B) type tag and the length: one byte,
    or 0x81 and a 2-byte, or 0x82 and a 4-byte little-endian integer; then the UTF-8 bytes.
    """
    if not blob:
        return None
    i = blob.find(b"NSString")
    if i < 0:
        return None
    j = blob.find(b"+", i + 8)
    if j < 0 or j > i + 16:
        return None
    k = j + 1
    if k >= len(blob):
        return None
    n = blob[k]
    if n == 0x81:
        n, k = int.from_bytes(blob[k + 1 : k + 3], "little"), k + 3
    elif n == 0x82:
        n, k = int.from_bytes(blob[k + 1 : k + 5], "little"), k + 5
    else:
        k += 1
    body = blob[k : k + n]
    if len(body) != n:
        return None
    return body.decode("utf-8", "replace")


def apple_time(value: int | float | None) -> dt.datetime | None:
    """``message.date`` as aware UTC: nanoseconds since 2001 (seconds on old schemas)."""
    if value is None or value <= 0:
        return None
    if value > 10**12:
        return APPLE_EPOCH + dt.timedelta(microseconds=int(value) // 1000)
    return APPLE_EPOCH + dt.timedelta(seconds=value)


def _connect(path: Path) -> sqlite3.Connection:
    """Read-only; with ``immutable=1`` when the database is locked."""
    uri = f"file:{quote(str(path))}?mode=ro"
    for extra in ("", "&immutable=1"):
        # a short wait: Messages holds its lock for long stretches while it runs
        con = sqlite3.connect(uri + extra, uri=True, timeout=0.2)
        try:
            con.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return con
        except sqlite3.OperationalError as exc:
            con.close()
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
    raise sqlite3.OperationalError("database is locked")


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in con.execute(f"PRAGMA table_info({table})")}


def parse(spec: SourceSpec, f: ExportFile, dates: frozenset[dt.date] | None) -> Iterator[Record]:
    """Records of one ``chat.db`` (raises Rejected before the first)."""
    if not sniff(f):
        raise Rejected(R_NOT_AN_EXPORT, "not an SQLite database (chat.db)")
    with tempfile.TemporaryDirectory() as tmp:
        path = f.path
        if path is None:  # a zip member: sqlite needs a file
            path = Path(tmp) / "chat.db"
            f.save(path)
        try:
            con = _connect(path)
        except sqlite3.Error as exc:
            raise Rejected(R_NOT_AN_EXPORT, f"cannot open the database ({exc})") from None
        try:
            yield from _rows(spec, f, con, dates)
        finally:
            con.close()


def _rows(
    spec: SourceSpec, f: ExportFile, con: sqlite3.Connection, dates: frozenset[dt.date] | None
) -> Iterator[Record]:
    try:
        cols = {t: _columns(con, t) for t in _REQUIRED}
    except sqlite3.Error as exc:
        raise Rejected(R_NOT_AN_EXPORT, f"unreadable database ({exc})") from None
    missing = [f"{t}.{c}" for t, need in _REQUIRED.items() for c in sorted(need - cols[t])]
    if missing:
        raise Rejected(
            R_NOT_AN_EXPORT,
            f"not a Messages chat.db of a known schema (missing {', '.join(missing[:4])})",
        )
    opt = [f"m.{c}" if c in cols["message"] else "NULL" for c in _OPTIONAL]
    has_att = bool(
        _columns(con, "attachment") & {"mime_type"}
        and _columns(con, "message_attachment_join") >= {"message_id", "attachment_id"}
    )
    mime_sql = (
        "(SELECT a.mime_type FROM message_attachment_join j JOIN attachment a "
        "ON a.ROWID = j.attachment_id WHERE j.message_id = m.ROWID LIMIT 1)"
        if has_att
        else "NULL"
    )
    name_sql = "c.display_name" if "display_name" in cols["chat"] else "NULL"
    sql = (
        f"SELECT m.ROWID, m.guid, m.text, m.date, m.is_from_me, h.id, c.chat_identifier, "
        f"{name_sql}, {', '.join(opt)}, {mime_sql} FROM message m "
        "LEFT JOIN handle h ON h.ROWID = m.handle_id "
        "LEFT JOIN chat_message_join cmj ON cmj.message_id = m.ROWID "
        "LEFT JOIN chat c ON c.ROWID = cmj.chat_id ORDER BY m.ROWID"
    )
    try:
        cursor = con.execute(sql)
    except sqlite3.Error as exc:
        raise Rejected(R_NOT_AN_EXPORT, f"unreadable database ({exc})") from None
    owners = Owners(spec)
    me = spec.owner or OWNER_FALLBACK
    forced = conversation_option(spec)
    tz = zone(spec.timezone)
    seen: set[int] = set()
    for order, row in enumerate(cursor):
        rowid, guid, text, date, from_me, handle, chat_id, chat_name = row[:8]
        body, assoc, item_type, has_files, mime = row[8:]
        ref = f"imessage:{guid or rowid}"
        who = chat_id or handle or ""
        group = bool(chat_id) and chat_id.startswith("chat")
        conv = forced or f"imessage_{safe_id(who) if group else phone_key(who)}"
        raw = f"rowid={rowid} guid={guid} date={date} is_from_me={from_me} handle={handle}"
        if rowid in seen:  # a message in two chats: the first join is kept
            yield quarantine(spec, f, R_DUPLICATE, "message joined to a second chat",
                             conv=conv, day=None, ref=ref, raw=raw)  # fmt: skip
            continue
        seen.add(rowid)
        if isinstance(assoc, int) and 2000 <= assoc < 4000:
            yield quarantine(spec, f, R_UNKNOWN_TYPE, "a tapback reaction, not a message",
                             conv=conv, day=None, ref=ref, raw=raw)  # fmt: skip
            continue
        utc = apple_time(date)
        if utc is None:
            yield quarantine(spec, f, R_MISSING_TIMESTAMP, "message without a date", conv=conv,
                             day=None, ref=ref, raw=raw)  # fmt: skip
            continue
        local = utc.astimezone(tz).replace(tzinfo=None)
        if dates is not None and local.date() not in dates:
            continue
        if text is None:
            text = attributed_text(body) or ""
        kind = "text"
        if item_type:
            kind = "system"
        elif has_files or OBJECT in text:
            m = str(mime or "")
            kinds = (("image/", "photo"), ("video/", "video"), ("audio/", "audio"))
            kind = next((k for p, k in kinds if m.startswith(p)), "file")
            text = text.replace(OBJECT, "").strip()
        sender = "" if kind == "system" else (me if from_me else clean_name(handle or ""))
        contact = clean_name(chat_name or "") or clean_name(who) or "unknown"
        out = message(
            spec, f, conv=conv, contact=contact, sender=sender, owners=owners, local=local,
            utc=utc, type_=kind, text=clean_text(text), order=order, line=None, ref=ref,
        )  # fmt: skip
        out.is_owner = bool(from_me) and kind != "system"
        yield out


def _accept(path: Path) -> bool:
    return path.suffix.lower() in (".db", ".sqlite", ".sqlite3")


@register(KIND)
def read_imessage(spec: SourceSpec, dates: frozenset[dt.date] | None) -> Iterator[Record]:
    """Every Messages database (``chat.db``) under the source path."""
    yield from read_exports(spec, dates, parse, _accept)


read_imessage.depends_on = ("memory_pipeline.core.ingest.sources.exports",)  # type: ignore[attr-defined]
register_detector(KIND, sniff, parse, rank=5)
