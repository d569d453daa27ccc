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

CHUNK_SUMMARIES = pa.schema(
    [
        ("chunk_id", pa.string()),
        ("session_id", pa.string()),
        ("local_date", pa.date32()),
        ("lang", pa.string()),
        ("summary", pa.string()),
        ("method", pa.string()),  # "extractive" or "<provider>/<model>"
        ("summary_length", pa.int32()),  # characters (ja) or words (en)
        ("source_length", pa.int32()),  # the same unit over the chunk's text messages
        ("within_target", pa.bool_()),
        ("redactions", pa.int32()),  # placeholders inserted before the text left the machine
        ("error", pa.string()),  # why a provider could not summarize (then summary is a fallback)
    ]
)

EMBEDDING_TEXTS = pa.schema(
    [
        ("chunk_id", pa.string()),
        ("local_date", pa.date32()),
        ("lang", pa.string()),
        ("embedding_text", pa.string()),
        ("excerpt_chars", pa.int32()),
    ]
)

SESSION_ENRICHMENT = pa.schema(
    [
        ("session_id", pa.string()),
        ("local_date", pa.date32()),
        ("lang", pa.string()),
        ("title", pa.string()),
        ("bullets", pa.list_(pa.string())),
        ("method", pa.string()),
    ]
)


# One remembered fact per row, extracted from one session. ``contact_id`` scopes it: a
# contact's memories come only from conversations with that contact.
MEMORIES = pa.schema(
    [
        ("memory_id", pa.string()),  # content-derived: session + kind + attribute + text
        ("contact_id", pa.string()),
        ("conversation_id", pa.string()),
        ("session_id", pa.string()),
        ("local_date", pa.date32()),  # the session's partition
        ("subject", pa.string()),  # who it is about (a sender name)
        ("subject_is_owner", pa.bool_()),
        ("kind", pa.string()),  # fact | preference | plan | event | relationship | possession
        ("attribute", pa.string()),  # e.g. residence, employer; "" = not single-valued
        ("value", pa.string()),  # the attribute's value ("Osaka"); "" when not applicable
        ("text", pa.string()),  # the memory as a sentence, in the source language
        ("lang", pa.string()),
        ("valid_from", TS_UTC),  # when it became true (the stating message's time)
        ("event_date", pa.date32()),  # the date a plan/event is for, when stated
        ("message_ids", pa.list_(pa.string())),  # the messages it came from (>= 1)
        ("method", pa.string()),  # "rules" or "<provider>/<model>"
        ("confidence", pa.float32()),
    ]
)

# A memory candidate whose source could not be resolved: never stored as a memory.
MEMORY_REJECTS = pa.schema(
    [
        ("session_id", pa.string()),
        ("contact_id", pa.string()),
        ("local_date", pa.date32()),
        ("kind", pa.string()),
        ("text", pa.string()),
        ("message_ids", pa.list_(pa.string())),
        ("method", pa.string()),
        ("reason", pa.string()),
    ]
)

# Every memory with its validity interval: valid_to/superseded_by are set when a newer
# memory about the same subject and attribute replaces it (rebuilt over all partitions).
MEMORY_TIMELINE = pa.schema(
    [
        *MEMORIES,
        ("valid_to", TS_UTC),
        ("superseded_by", pa.string()),
    ]
)

# One row per contact whose dossier changed on that date (its version of the day).
DOSSIERS = pa.schema(
    [
        ("contact_id", pa.string()),
        ("local_date", pa.date32()),  # the version's date (Last Updated)
        ("name", pa.string()),
        ("markdown", pa.string()),
        ("state", pa.string()),  # JSON: what tomorrow's update starts from
        ("cited_sessions", pa.list_(pa.string())),
        ("sessions_total", pa.int32()),
        ("messages_total", pa.int32()),
        ("method", pa.string()),
    ]
)


def embeddings_schema(dim: int, provider: str = "", model: str = "") -> pa.Schema:
    """chunk_embeddings: vectors as fixed-size lists; model and dimension also in metadata.

    One row per (chunk, representation, piece): a text longer than the model's window is
    split into pieces that fit, each with its own vector (search scores a chunk by its best
    piece)."""
    return pa.schema(
        [
            ("chunk_id", pa.string()),
            ("local_date", pa.date32()),
            ("representation", pa.string()),  # raw_text | summary | embedding_text
            ("piece", pa.int32()),  # 0.. : a text over the model window has several
            ("provider", pa.string()),
            ("model", pa.string()),
            ("dim", pa.int32()),
            ("vector", pa.list_(pa.float32(), dim)),
            ("text_hash", pa.string()),
            ("truncated", pa.bool_()),
            ("error", pa.string()),
        ],
        metadata={"provider": provider, "model": model, "dim": str(dim)},
    )


# On-disk bytes per component of the outputs (core.quality.storage_report fills it).
STORAGE_REPORT = pa.schema(
    [
        ("component", pa.string()),
        ("category", pa.string()),  # source | derived | index | vectors | memory | dossier | cache
        ("bytes", pa.int64()),
        ("files", pa.int64()),
        ("bytes_per_1000_sessions", pa.float64()),
        ("share", pa.float64()),  # of all on-disk bytes listed (the logical raw_text row excluded)
    ]
)
