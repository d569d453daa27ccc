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
