"""iMessage chat.db: built here with sqlite3 (a trimmed copy of the macOS schema): read-only
open, a locked database read through immutable=1, nanosecond and second dates since 2001,
bodies only in attributedBody, attachments, group events, tapbacks, a later copy of the
database merging, an unknown schema and a non-database as one row each."""

from __future__ import annotations

import datetime as dt
import sqlite3
from pathlib import Path

import pytest

from memory_pipeline.core.common import records as R
from memory_pipeline.core.common.records import SourceError
from memory_pipeline.core.ingest.sources.auto import detected_kind
from memory_pipeline.core.ingest.sources.imessage import attributed_text
from memory_pipeline_tests.core.ingest.sources._helpers import (
    merged,
    messages,
    quarantined,
    read,
    reasons,
    reconciles,
)

SCHEMA = """
CREATE TABLE handle (ROWID INTEGER PRIMARY KEY AUTOINCREMENT UNIQUE, id TEXT NOT NULL,
  country TEXT, service TEXT NOT NULL, uncanonicalized_id TEXT, person_centric_id TEXT);
CREATE TABLE chat (ROWID INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT UNIQUE NOT NULL,
  style INTEGER, state INTEGER, account_id TEXT, properties BLOB, chat_identifier TEXT,
  service_name TEXT, room_name TEXT, display_name TEXT);
CREATE TABLE message (ROWID INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT UNIQUE NOT NULL,
  text TEXT, replace INTEGER DEFAULT 0, service_center TEXT, handle_id INTEGER DEFAULT 0,
  subject TEXT, attributedBody BLOB, date INTEGER, date_read INTEGER, date_delivered INTEGER,
  is_from_me INTEGER DEFAULT 0, item_type INTEGER DEFAULT 0, cache_has_attachments INTEGER
  DEFAULT 0, associated_message_guid TEXT, associated_message_type INTEGER DEFAULT 0);
CREATE TABLE chat_message_join (chat_id INTEGER REFERENCES chat (ROWID) ON DELETE CASCADE,
  message_id INTEGER REFERENCES message (ROWID) ON DELETE CASCADE, message_date INTEGER
  DEFAULT 0, PRIMARY KEY (chat_id, message_id));
CREATE TABLE chat_handle_join (chat_id INTEGER, handle_id INTEGER, UNIQUE(chat_id, handle_id));
CREATE TABLE attachment (ROWID INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT UNIQUE NOT NULL,
  filename TEXT, mime_type TEXT, transfer_name TEXT, total_bytes INTEGER DEFAULT 0);
CREATE TABLE message_attachment_join (message_id INTEGER, attachment_id INTEGER,
  UNIQUE(message_id, attachment_id));
"""
T0 = 730_944_000  # 2024-03-01 00:00:00 UTC in seconds since 2001-01-01
NS = 1_000_000_000


def typedstream(text: str) -> bytes:
    """An attributedBody as macOS writes it (streamtyped header, NSString, length, bytes)."""
    b = text.encode("utf-8")
    n = bytes([len(b)]) if len(b) < 0x80 else b"\x81" + len(b).to_bytes(2, "little")
    return (b"\x04\x0bstreamtyped\x81\xe8\x03\x84\x01@\x84\x84\x84\x12NSAttributedString\x00"
            b"\x84\x84\x08NSObject\x00\x85\x92\x84\x84\x84\x08NSString\x01\x94\x84\x01+"
            + n + b + b"\x86\x84\x02iI\x01\x05\x92\x84\x84\x84\x0cNSDictionary\x00")  # fmt: skip


def build(path: Path, extra: bool = False) -> int:
    con = sqlite3.connect(path)
    con.executescript(SCHEMA)
    con.executemany("INSERT INTO handle (ROWID, id, service) VALUES (?, ?, ?)", [
        (1, "+81 90-1234-5678", "iMessage"), (2, "maria@example.com", "iMessage"),
        (3, "+14155550123", "SMS")])  # fmt: skip
    con.executemany(
        "INSERT INTO chat (ROWID, guid, chat_identifier, service_name, display_name) "
        "VALUES (?, ?, ?, ?, ?)", [
            (1, "iMessage;-;+819012345678", "+819012345678", "iMessage", ""),
            (2, "iMessage;+;chat493027151468923774", "chat493027151468923774", "iMessage",
             "Lisbon trip 🇵🇹")])  # fmt: skip
    rows = [  # rowid, guid, text, handle, attributedBody, date, from_me, item, atts, assoc, chat
        (1, "A1", "明日、空港まで迎えに行くね", 1, None, (T0 + 0) * NS, 0, 0, 0, 0, 1),
        (2, "A2", None, 0, typedstream("ありがとう！助かる 🙏"), (T0 + 60) * NS, 1, 0, 0, 0, 1),
        (3, "A3", "\ufffc", 1, None, (T0 + 120) * NS, 0, 0, 1, 0, 1),
        (4, "A4", "Loved “ありがとう！助かる 🙏”", 1, None, (T0 + 130) * NS, 0, 0, 0, 2000, 1),
        (
            5,
            "B1",
            None,
            2,
            typedstream("Who books the tram tickets? " * 6),
            (T0 + 3600) * NS,
            0,
            0,
            0,
            0,
            2,
        ),
        (6, "B2", "I can do it", 0, None, (T0 + 3660) * NS, 1, 0, 0, 0, 2),
        (7, "B3", None, 3, None, (T0 + 3700) * NS, 0, 1, 0, 0, 2),
        (8, "B4", "old seconds date", 3, None, T0 + 3720, 0, 0, 0, 0, 2),
        (9, "B5", "no date", 3, None, 0, 0, 0, 0, 0, 2),
    ]
    if extra:
        rows.append((10, "A5", "着いたよ", 1, None, (T0 + 86400) * NS, 0, 0, 0, 0, 1))
    for r in rows:
        con.execute(
            "INSERT INTO message (ROWID, guid, text, handle_id, attributedBody, date, "
            "is_from_me, item_type, cache_has_attachments, associated_message_type) "
            "VALUES (?,?,?,?,?,?,?,?,?,?)", r[:10])  # fmt: skip
        con.execute("INSERT INTO chat_message_join (chat_id, message_id) VALUES (?, ?)",
                    (r[10], r[0]))  # fmt: skip
    con.execute("INSERT INTO attachment (ROWID, guid, mime_type) VALUES (1, 'AT1', 'image/heic')")
    con.execute("INSERT INTO message_attachment_join VALUES (3, 1)")
    con.commit()
    con.close()
    return len(rows)


def test_chat_db(tmp_path: Path) -> None:
    db = tmp_path / "chat.db"
    n = build(db)
    before = db.read_bytes()
    recs = read("imessage", db)
    assert len(recs) == n and db.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chat.db"]  # nothing written beside
    ms = messages(recs)
    one = [m for m in ms if m.conversation_id == "imessage_9012345678"]
    assert [(m.sender, m.is_owner, m.type, m.text) for m in one] == [
        ("+81 90-1234-5678", False, "text", "明日、空港まで迎えに行くね"),
        ("Yuki", True, "text", "ありがとう！助かる 🙏"),  # only in attributedBody
        ("+81 90-1234-5678", False, "photo", "")]  # fmt: skip
    assert one[0].ts == dt.datetime(2024, 3, 1, tzinfo=dt.UTC)
    assert one[0].local_ts == dt.datetime(2024, 3, 1, 9, 0)
    group = [m for m in ms if m.contact_id == "Lisbon trip 🇵🇹"]
    assert group[0].text == "Who books the tram tickets? " * 6  # 0x81 two-byte length
    assert group[2].type == "system" and group[2].sender == ""
    assert group[3].ts == dt.datetime(2024, 3, 1, 1, 2, tzinfo=dt.UTC)  # seconds schema
    assert one[1].source_ref == "imessage:A2"
    assert reasons(recs) == {R.R_UNKNOWN_TYPE: 1, R.R_MISSING_TIMESTAMP: 1}  # tapback, no date


def test_locked_database_is_read(tmp_path: Path) -> None:
    db = tmp_path / "chat.db"
    build(db)
    holder = sqlite3.connect(db)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        assert len(messages(read("imessage", db))) == 7
    finally:
        holder.rollback()
        holder.close()


def test_later_copy_merges(tmp_path: Path) -> None:
    (tmp_path / "2024-03").mkdir()
    (tmp_path / "2024-04").mkdir()
    a = build(tmp_path / "2024-03" / "chat.db")
    b = build(tmp_path / "2024-04" / "chat.db", extra=True)
    result = merged("imessage", tmp_path)
    reconciles(result, a + b)
    assert reasons(result)[R.R_DUPLICATE_EXPORT] == 7
    assert len(result.messages) == 8


def test_unknown_schema_and_not_a_db(tmp_path: Path) -> None:
    con = sqlite3.connect(tmp_path / "other.db")
    con.execute("CREATE TABLE message (id INTEGER, body TEXT)")
    con.commit()
    con.close()
    (tmp_path / "chat.db").write_bytes(b"SQLite format 3\x00" + b"\x00" * 50)  # truncated
    (tmp_path / "notes.db").write_text('{"not": "sqlite"}', encoding="utf-8")
    recs = read("imessage", tmp_path)
    assert {q.source_file: q.reason for q in quarantined(recs)} == {
        "other.db": R.R_NOT_AN_EXPORT, "chat.db": R.R_NOT_AN_EXPORT,
        "notes.db": R.R_NOT_AN_EXPORT}  # fmt: skip
    assert "known schema" in next(q.detail for q in recs if q.source_file == "other.db")
    with pytest.raises(SourceError, match="known schema"):
        read("imessage", tmp_path / "other.db")
    assert {detected_kind(r) for r in read("auto", tmp_path / "other.db")} == {"imessage"}


def test_attributed_text() -> None:
    assert attributed_text(typedstream("hé")) == "hé"
    assert attributed_text(b"no class here") is None and attributed_text(None) is None


# Older and trimmed schemas: what a backup of an old Mac or iPhone, or a copy someone cut
# down to the message tables, holds. Each must be read, not refused.
TRIMMED = """
CREATE TABLE handle (ROWID INTEGER PRIMARY KEY, id TEXT NOT NULL);
CREATE TABLE message (ROWID INTEGER PRIMARY KEY, guid TEXT, text TEXT, handle_id INTEGER,
  date INTEGER, is_from_me INTEGER);
CREATE TABLE chat_message_join (chat_id INTEGER, message_id INTEGER);
"""
IOS5 = """
CREATE TABLE message (ROWID INTEGER PRIMARY KEY AUTOINCREMENT, address TEXT, date INTEGER,
  text TEXT, flags INTEGER, replace INTEGER, svc_center TEXT, group_id INTEGER,
  association_id INTEGER, height INTEGER, UIFlags INTEGER, version INTEGER, subject TEXT,
  country TEXT, headers BLOB, recipients BLOB, read INTEGER, madrid_attributedBody BLOB,
  madrid_handle TEXT, madrid_version INTEGER, madrid_guid TEXT, madrid_type INTEGER,
  madrid_roomname TEXT, madrid_service TEXT, madrid_account TEXT, madrid_account_guid TEXT,
  madrid_flags INTEGER, madrid_attachmentInfo BLOB, madrid_url TEXT, madrid_error INTEGER,
  is_madrid INTEGER, madrid_date_read INTEGER, madrid_date_delivered INTEGER,
  madrid_date INTEGER);
CREATE TABLE msg_group (ROWID INTEGER PRIMARY KEY AUTOINCREMENT, type INTEGER,
  newest_message INTEGER, unread_count INTEGER, hash INTEGER);
CREATE TABLE group_member (ROWID INTEGER PRIMARY KEY AUTOINCREMENT, group_id INTEGER,
  address TEXT, country TEXT);
"""
U0 = 1_325_376_000  # 2012-01-01 00:00:00 UTC, Unix seconds
A0 = U0 - 978_307_200  # the same instant in seconds since 2001


def _db(path: Path, schema: str, rows: list[tuple], insert: str) -> Path:
    con = sqlite3.connect(path)
    con.executescript(schema)
    con.executemany(insert, rows)
    con.commit()
    con.close()
    return path


def test_trimmed_schema_reads_what_exists(tmp_path: Path) -> None:
    """message + handle + chat_message_join only: no chat, attachment or attributedBody."""
    db = _db(tmp_path / "chat.db", TRIMMED, [
        (1, "G1", "one to one", 1, (T0 + 1) * NS, 0),
        (2, "G2", "my answer", 1, (T0 + 2) * NS, 1),
        (3, "G3", "group hello", 1, (T0 + 3) * NS, 0),
        (4, "G4", "group reply", 2, (T0 + 4) * NS, 0),
        (5, "G5", "no chat row", 2, (T0 + 5) * NS, 0),
    ], "INSERT INTO message VALUES (?, ?, ?, ?, ?, ?)")  # fmt: skip
    con = sqlite3.connect(db)
    con.executemany("INSERT INTO handle VALUES (?, ?)", [(1, "+81 90-1234-5678"),
                                                         (2, "ana@example.com")])  # fmt: skip
    con.executemany("INSERT INTO chat_message_join VALUES (?, ?)",
                    [(1, 1), (1, 2), (2, 3), (2, 4)])  # fmt: skip
    con.commit()
    con.close()
    recs = read("auto", db)
    assert {detected_kind(r) for r in recs} == {"imessage"}
    ms = messages(recs)
    assert len(ms) == len(recs) == 5
    assert [(m.conversation_id, m.sender, m.is_owner) for m in ms] == [
        ("imessage_9012345678", "+81 90-1234-5678", False), ("imessage_9012345678", "Yuki", True),
        ("imessage_chat2", "+81 90-1234-5678", False), ("imessage_chat2", "ana@example.com", False),
        ("imessage_ana_example_com", "ana@example.com", False)]  # fmt: skip
    assert ms[0].ts == dt.datetime(2024, 3, 1, 0, 0, 1, tzinfo=dt.UTC)


def test_message_and_handle_only_and_message_alone(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    _db(tmp_path / "a" / "chat.db",
        "CREATE TABLE handle (ROWID INTEGER PRIMARY KEY, id TEXT);"
        "CREATE TABLE message (ROWID INTEGER PRIMARY KEY, guid TEXT, text TEXT, "
        "attributedBody BLOB, handle_id INTEGER, date INTEGER, is_from_me INTEGER);"
        "INSERT INTO handle VALUES (1, '+14155550123');",
        [(1, "H1", None, typedstream("body only in attributedBody"), 1, (T0 + 9) * NS, 0)],
        "INSERT INTO message VALUES (?, ?, ?, ?, ?, ?, ?)")  # fmt: skip
    _db(tmp_path / "b" / "chat.db",
        "CREATE TABLE message (text TEXT, date INTEGER, is_from_me INTEGER);",
        [("bare", A0 + 60, 0)], "INSERT INTO message VALUES (?, ?, ?)")  # fmt: skip
    (tmp_path / "c").mkdir()  # another app's table of the same name is not read as Apple's
    _db(tmp_path / "c" / "app.db", "CREATE TABLE message (text TEXT, date INTEGER);",
        [("not imessage", 5)], "INSERT INTO message VALUES (?, ?)")  # fmt: skip
    recs = read("imessage", tmp_path)
    ms = messages(recs)
    assert len(recs) == 3 and len(ms) == 2
    assert [(q.source_file, q.reason) for q in quarantined(recs)] == [
        ("c/app.db", R.R_NOT_AN_EXPORT)]  # fmt: skip
    assert (ms[0].text, ms[0].conversation_id) == ("body only in attributedBody",
                                                   "imessage_4155550123")  # fmt: skip
    assert ms[1].text == "bare" and ms[1].ts == dt.datetime(2012, 1, 1, 0, 1, tzinfo=dt.UTC)
    assert ms[1].source_ref == "imessage:1"  # no guid: the rowid


def test_ios5_sms_db(tmp_path: Path) -> None:
    """The iOS 4/5 ``sms.db``: ``address``/``flags``/``group_id``, Unix-epoch dates for SMS,
    iMessages ("madrid") with their own handle, Apple-epoch date and flags."""
    db = _db(tmp_path / "sms.db", IOS5, [
        (1, "+1 (415) 555-0123", U0 + 10, "sms in", 2, 1, 0, None, None, None),
        (2, "+1 (415) 555-0123", U0 + 20, "sms out", 3, 1, 0, None, None, None),
        (3, None, 0, "imessage in", 0, 2, 1, "ana@example.com", 12289, A0 + 30),
        (4, None, 0, "imessage out", 0, 2, 1, "ana@example.com", 36869, A0 + 40),
    ], "INSERT INTO message (ROWID, address, date, text, flags, group_id, is_madrid, "
       "madrid_handle, madrid_flags, madrid_date) VALUES (?,?,?,?,?,?,?,?,?,?)")  # fmt: skip
    ms = messages(read("auto", db))
    assert [(m.text, m.is_owner, m.conversation_id) for m in ms] == [
        ("sms in", False, "imessage_4155550123"), ("sms out", True, "imessage_4155550123"),
        ("imessage in", False, "imessage_ana_example_com"),
        ("imessage out", True, "imessage_ana_example_com")]  # fmt: skip
    assert [m.ts.second for m in ms] == [10, 20, 30, 40]
    assert {m.ts.date() for m in ms} == {dt.date(2012, 1, 1)}


def test_untyped_copy_with_text_values(tmp_path: Path) -> None:
    """A copy made by a tool that wrote every value as text (dates, flags) or text as a
    blob: read, not misread as system rows or refused."""
    db = _db(tmp_path / "chat.db",
             "CREATE TABLE message (ROWID, guid, text, date, is_from_me, item_type);",
             [(1, "T1", b"blob text", str((T0 + 5) * NS), "1", "0"),
              (2, "T2", "plain", "not a date", "0", "0")],
             "INSERT INTO message VALUES (?, ?, ?, ?, ?, ?)")  # fmt: skip
    recs = read("imessage", db)
    ms = messages(recs)
    assert [(m.text, m.type, m.is_owner) for m in ms] == [("blob text", "text", True)]
    assert ms[0].ts == dt.datetime(2024, 3, 1, 0, 0, 5, tzinfo=dt.UTC)
    assert reasons(recs) == {R.R_MISSING_TIMESTAMP: 1}
