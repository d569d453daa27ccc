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
such. Older and trimmed schemas are read for what they hold: only ``message`` with a body
(``text`` or ``attributedBody``), a ``date`` and one of Apple's columns (``guid``,
``is_from_me``, ``handle_id``, ``flags``) or its ``handle`` table is needed; the sender
comes from ``handle``, else the old ``address`` column; the chat from ``chat_message_join``
+ ``chat``, else the join alone or the old ``group_id`` (one writer: a 1:1 chat named by the
number; more: a group); the iOS 4/5 ``sms.db`` (Unix-epoch ``date``, ``flags`` 3 = sent,
iMessages in the ``madrid_*`` columns) too. A database without such a ``message`` table is
one ``not_an_export`` row.

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
_APPLE_COLUMNS = frozenset({"guid", "is_from_me", "handle_id", "flags", "is_madrid"})
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


def _number(value: object) -> float | None:
    """A date column's value as a number (a trimmed copy may hold it as text), or None."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    try:
        return float(str(value).strip()) if value is not None else None
    except ValueError:
        return None


def apple_time(value: object) -> dt.datetime | None:
    """``message.date`` as aware UTC: nanoseconds since 2001 (seconds on old schemas)."""
    value = _number(value)
    if value is None or value <= 0 or value != value:
        return None
    try:
        if value > 10**12:
            return APPLE_EPOCH + dt.timedelta(microseconds=int(value) // 1000)
        return APPLE_EPOCH + dt.timedelta(seconds=value)
    except OverflowError:
        return None


def unix_time(value: object) -> dt.datetime | None:
    """``message.date`` of the iOS 4/5 ``sms.db`` schema: seconds since 1970."""
    value = _number(value)
    if value is None or value <= 0 or value != value:
        return None
    try:
        return dt.datetime.fromtimestamp(value, dt.UTC)
    except (OverflowError, OSError, ValueError):
        return None


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


def _tables(con: sqlite3.Connection) -> dict[str, set[str]]:
    """Every table of the database with its columns."""
    names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {n: _columns(con, n) for n in names if n.replace("_", "").isalnum()}


def _schema_sql(t: dict[str, set[str]]) -> tuple[str, str]:
    """(SELECT over the messages, SQL of each message's conversation group) for whatever
    part of the Messages schema the database has.

    Only ``message`` with a body (``text`` or ``attributedBody``) and a ``date`` is needed.
    The sender comes from ``handle`` (``handle_id``), else the old ``address`` column; the
    chat from ``chat_message_join`` + ``chat``, else the join alone, else the old
    ``group_id``; who wrote it from ``is_from_me``, else the old ``flags`` (3 = sent)."""
    m = t["message"]

    def col(name: str, alias: str = "m") -> str:
        return f"{alias}.{name}" if name in m else "NULL"

    handle_ok = "handle_id" in m and {"ROWID", "id"} <= t.get("handle", set())
    cmj_ok = {"chat_id", "message_id"} <= t.get("chat_message_join", set())
    chat_ok = cmj_ok and {"ROWID", "chat_identifier"} <= t.get("chat", set())
    joins = ""
    if handle_ok:
        joins += " LEFT JOIN handle h ON h.ROWID = m.handle_id"
        sender = "h.id"
    else:
        sender = col("address")
    if cmj_ok:
        joins += " LEFT JOIN chat_message_join cmj ON cmj.message_id = m.ROWID"
        group = "'chat' || cmj.chat_id"
    elif "group_id" in m:
        group = "'group' || m.group_id"
    else:
        group = "NULL"
    if chat_ok:
        joins += " LEFT JOIN chat c ON c.ROWID = cmj.chat_id"
        chat_id = "c.chat_identifier"
        chat_name = "c.display_name" if "display_name" in t["chat"] else "NULL"
    else:
        chat_id = chat_name = "NULL"
    if "is_from_me" in m:
        from_me = "m.is_from_me"
    elif "flags" in m:
        from_me = "(m.flags & 1)"  # iOS 4/5: 2 received, 3 sent
    else:
        from_me = "0"
    # iOS 5 iMessages ("madrid") keep their own date (Apple epoch), address and flags
    madrid = {"is_madrid", "madrid_date", "madrid_handle", "madrid_flags"} <= m
    if madrid:
        sender = f"CASE WHEN m.is_madrid = 1 THEN m.madrid_handle ELSE {sender} END"
        from_me = f"CASE WHEN m.is_madrid = 1 THEN (m.madrid_flags & 32768) > 0 ELSE {from_me} END"
    unix = "address" in m and "handle_id" not in m  # iOS 4/5 sms.db: Unix-epoch dates
    date = "m.date"
    if madrid:
        date = "CASE WHEN m.is_madrid = 1 THEN m.madrid_date ELSE m.date END"
    epoch = "0"
    if unix:
        epoch = "CASE WHEN m.is_madrid = 1 THEN 0 ELSE 1 END" if madrid else "1"
    opt = [col(c) for c in _OPTIONAL]
    has_att = bool(
        "mime_type" in t.get("attachment", set())
        and {"message_id", "attachment_id"} <= t.get("message_attachment_join", set())
    )
    mime_sql = (
        "(SELECT a.mime_type FROM message_attachment_join j JOIN attachment a "
        "ON a.ROWID = j.attachment_id WHERE j.message_id = m.ROWID LIMIT 1)"
        if has_att
        else "NULL"
    )
    sql = (
        f"SELECT m.ROWID, {col('guid')}, {col('text')}, {date}, {from_me}, {sender}, "
        f"{chat_id}, {chat_name}, {', '.join(opt)}, {mime_sql}, {group}, {epoch} "
        f"FROM message m{joins} ORDER BY m.ROWID"
    )
    # how many people wrote in each group: one is a 1:1 chat (named by its number)
    senders = (
        f"SELECT {group}, COUNT(DISTINCT {sender}) FROM message m{joins} "
        f"WHERE {sender} IS NOT NULL AND {sender} != '' GROUP BY 1"
    )
    return sql, senders


def _rows(
    spec: SourceSpec, f: ExportFile, con: sqlite3.Connection, dates: frozenset[dt.date] | None
) -> Iterator[Record]:
    try:
        tables = _tables(con)
    except sqlite3.Error as exc:
        raise Rejected(R_NOT_AN_EXPORT, f"unreadable database ({exc})") from None
    cols = tables.get("message", set())
    # what makes it Apple's: a message id or direction column, or the handle/chat tables
    apple = bool(cols & _APPLE_COLUMNS) or bool(set(tables) & {"handle", "chat_message_join"})
    missing = [
        f"message.{c}"
        for c, ok in (
            ("text", bool({"text", "attributedBody"} & cols)),
            ("date", "date" in cols),
            ("guid/is_from_me/handle_id/flags", apple),
        )
        if not ok
    ]
    if "message" not in tables or missing:
        raise Rejected(
            R_NOT_AN_EXPORT,
            "not a Messages chat.db of a known schema "
            f"(missing {', '.join(missing) if 'message' in tables else 'the message table'})",
        )
    sql, senders_sql = _schema_sql(tables)
    try:
        writers = dict(con.execute(senders_sql).fetchall())
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
        body, assoc, item_type, has_files, mime, group, unix = row[8:]
        assoc, item_type = int(_number(assoc) or 0), int(_number(item_type) or 0)
        from_me = bool(_number(from_me))
        handle = str(handle) if handle is not None else None
        ref = f"imessage:{guid or rowid}"
        if chat_id:
            who = str(chat_id)
            is_group = who.startswith("chat")
        elif group is not None and writers.get(group, 0) > 1:
            who, is_group = str(group), True
        else:
            who, is_group = handle or str(group or ""), False
        conv = forced or f"imessage_{safe_id(who) if is_group else phone_key(who)}"
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
        utc = unix_time(date) if unix else apple_time(date)
        if utc is None:
            yield quarantine(spec, f, R_MISSING_TIMESTAMP, "message without a date", conv=conv,
                             day=None, ref=ref, raw=raw)  # fmt: skip
            continue
        local = utc.astimezone(tz).replace(tzinfo=None)
        if dates is not None and local.date() not in dates:
            continue
        if isinstance(text, bytes):  # a copy that stored the text as a blob
            text = text.decode("utf-8", "replace")
        if not isinstance(text, str):
            text = attributed_text(body if isinstance(body, bytes) else None) or ""
        kind = "text"
        if item_type:
            kind = "system"
        elif has_files or OBJECT in text or mime:
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
