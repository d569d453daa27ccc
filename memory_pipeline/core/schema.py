"""Arrow schemas of every table: the storage contract apps rely on (see README)."""

from __future__ import annotations

import pyarrow as pa

TS_UTC = pa.timestamp("us", tz="UTC")
TS_LOCAL = pa.timestamp("us")

MESSAGES = pa.schema(
    [
        ("message_id", pa.string()),
        ("source", pa.string()),
        ("conversation_id", pa.string()),
        ("contact_id", pa.string()),
        ("sender", pa.string()),
        ("is_owner", pa.bool_()),
        ("ts", TS_UTC),
        ("local_ts", TS_LOCAL),
        ("tz", pa.string()),
        ("local_date", pa.date32()),
        ("type", pa.string()),
        ("text", pa.string()),
        ("source_order", pa.int64()),
        ("source_ref", pa.string()),
        ("source_file", pa.string()),
        ("source_line", pa.int64()),
        ("ts_inferred", pa.bool_()),
    ]
)

QUARANTINE = pa.schema(
    [
        ("quarantine_id", pa.string()),
        ("source", pa.string()),
        ("source_file", pa.string()),
        ("source_line", pa.int64()),
        ("record_ref", pa.string()),
        ("conversation_id", pa.string()),
        ("partition_date", pa.date32()),
        ("reason", pa.string()),
        ("detail", pa.string()),
        ("raw", pa.string()),
    ]
)

INGEST_AUDIT = pa.schema(
    [
        ("partition_date", pa.date32()),
        ("source", pa.string()),
        ("records_read", pa.int64()),
        ("ingested", pa.int64()),
        ("quarantined", pa.int64()),
    ]
)

SESSIONS = pa.schema(
    [
        ("session_id", pa.string()),
        ("source", pa.string()),
        ("conversation_id", pa.string()),
        ("contact_id", pa.string()),
        ("local_date", pa.date32()),  # local date of the first message = partition
        ("end_local_date", pa.date32()),
        ("start_ts", TS_UTC),
        ("end_ts", TS_UTC),
        ("start_local_ts", TS_LOCAL),
        ("end_local_ts", TS_LOCAL),
        ("tz", pa.string()),
        ("message_count", pa.int32()),
        ("owner_message_count", pa.int32()),
        ("duration_seconds", pa.int64()),
        ("max_gap_seconds", pa.int64()),
        ("gap_minutes", pa.int32()),  # the inactivity threshold the session was cut with
        ("participants", pa.list_(pa.string())),
        ("message_ids", pa.list_(pa.string())),
    ]
)

CHUNKS = pa.schema(
    [
        ("chunk_id", pa.string()),
        ("session_id", pa.string()),
        ("source", pa.string()),
        ("conversation_id", pa.string()),
        ("contact_id", pa.string()),
        ("local_date", pa.date32()),  # the session's partition
        ("chunk_index", pa.int32()),  # position of the chunk within its session
        ("first_message_index", pa.int32()),  # offset of the first message within the session
        ("message_count", pa.int32()),
        ("start_ts", TS_UTC),
        ("end_ts", TS_UTC),
        ("speakers", pa.list_(pa.string())),
        ("message_ids", pa.list_(pa.string())),
        ("raw_text", pa.string()),
    ]
)

# table name -> (schema, column holding the partition date)
TABLES: dict[str, tuple[pa.Schema, str]] = {
    "raw_messages": (MESSAGES, "local_date"),
    "quarantine": (QUARANTINE, "partition_date"),
    "ingest_audit": (INGEST_AUDIT, "partition_date"),
    "sessions": (SESSIONS, "local_date"),
    "chunks": (CHUNKS, "local_date"),
}
