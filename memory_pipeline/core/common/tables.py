"""The table registry: every table the pipeline stores, in DAG order, with what it is.

One place names a table. The storage layer, the Dagster assets (asset keys, descriptions,
``TableSchema`` column metadata), the asset checks and the DuckDB warehouse views all read
it, so a table cannot be renamed in one layer and forgotten in another.

A ``Table`` is also usable wherever a table name string was accepted (``str(table)`` is its
name and ``TableStore`` accepts either), which keeps the Parquet layout unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import pyarrow as pa

from memory_pipeline.core.common import schema as S


@dataclass(frozen=True)
class Table:
    """One stored table.

    ``partition`` is the column holding the partition date ("" for an unpartitioned table);
    ``schema`` is None when the schema depends on the run (vector dimension, index build)
    and the table is stored as written; ``asset`` names the asset that writes it.
    A table is hashable (``columns`` takes no part in it), so it can key a mapping.
    """

    name: str
    partition: str
    schema: pa.Schema | None
    asset: str
    description: str
    columns: Mapping[str, str] = field(default_factory=dict, compare=False)

    def __str__(self) -> str:
        return self.name

    @property
    def partitioned(self) -> bool:
        return bool(self.partition)

    def column_types(self) -> dict[str, str]:
        """Column name -> Arrow type as text, for every described column.

        A run-dependent schema (``schema`` None) has no fixed types: its columns are typed
        ``RUN_DEPENDENT``, so docs and the Dagster UI still list and describe them.
        """
        if self.schema is None:
            return {name: RUN_DEPENDENT for name in self.columns}
        return {f.name: str(f.type) for f in self.schema}


# The type shown for a column of a table whose schema is fixed only when a run writes it.
RUN_DEPENDENT = "run-dependent"


_MESSAGE_COLUMNS = {
    "message_id": "msg_ + hash of conversation, local time, sender, type, text and source_order",
    "source": "configured source name",
    "conversation_id": "the chat (a LINE conversation, a corpus dialogue, a LoCoMo sample)",
    "contact_id": "who the conversation is with, from the owner's point of view",
    "sender": "display name / speaker id",
    "is_owner": "the sender is the configured owner",
    "ts": "the instant (UTC)",
    "local_ts": "wall-clock time as written in the source",
    "tz": "IANA timezone of local_ts",
    "local_date": "partition key: the date of local_ts",
    "type": "text, sticker, photo, video, audio, file, location, contact, call or system",
    "text": "message text (a marker such as [sticker] for media without text)",
    "source_order": "position in the source (ties in time keep source order)",
    "source_ref": "citation of the raw record (file:line, file#messages[i], dia_id, ...)",
    "source_file": "input file, relative to the source path",
    "source_line": "1-based line when the input is line-oriented",
    "ts_inferred": "the source gives no per-message time (LoCoMo: session start + offset)",
}

_MEMORY_COLUMNS = {
    "memory_id": "content-derived: session + kind + attribute + text",
    "contact_id": "the contact whose conversations it came from",
    "conversation_id": "the conversation it came from",
    "session_id": "the session it came from",
    "local_date": "partition key: the session's date",
    "subject": "who it is about (a sender name)",
    "subject_is_owner": "the subject is the configured owner",
    "kind": "fact, preference, plan, event, relationship or possession",
    "attribute": "e.g. residence, employer; empty when not single-valued",
    "value": "the attribute's value; empty when not applicable",
    "text": "the memory as a sentence, in the source language",
    "lang": "language code of text",
    "valid_from": "when it became true (the stating message's time, UTC)",
    "event_date": "the date a plan or event is for, when stated",
    "message_ids": "the messages it came from (at least one)",
    "method": "rules or <provider>/<model>",
    "confidence": "extractor confidence in [0, 1]",
}

REGISTRY: tuple[Table, ...] = (
    Table(
        "raw_messages",
        "local_date",
        S.MESSAGES,
        "raw_messages",
        "Canonical messages, one row per ingested message.",
        _MESSAGE_COLUMNS,
    ),
    Table(
        "quarantine",
        "partition_date",
        S.QUARANTINE,
        "quarantine",
        "Input records that could not be ingested: where from, and why.",
        {
            "quarantine_id": "content-derived id of the rejected record",
            "source": "configured source name",
            "source_file": "input file, relative to the source path",
            "source_line": "1-based line of the record, when line-oriented",
            "record_ref": "position of the record inside the file (e.g. messages[3])",
            "conversation_id": "the conversation, when it could be read",
            "partition_date": "partition key: the record's date, or start_date when unknown",
            "reason": "a reason code (empty_text, duplicate, encoding_error, ...)",
            "detail": "a log-safe explanation (no message text)",
            "raw": "at most 2,000 characters of the record, for repair",
        },
    ),
    Table(
        "ingest_audit",
        "partition_date",
        S.INGEST_AUDIT,
        "ingest_audit",
        "Per partition and source: records read, ingested, quarantined.",
        {
            "partition_date": "partition key",
            "source": "configured source name",
            "records_read": "input records read for this date",
            "ingested": "records stored in raw_messages",
            "quarantined": "records stored in quarantine",
        },
    ),
    Table(
        "sessions",
        "local_date",
        S.SESSIONS,
        "sessions",
        "A conversation split where the inactivity gap exceeds the configured threshold; a "
        "session belongs to the local date of its first message and may run past midnight.",
        {
            "session_id": "ses_ + hash of the conversation and its first message",
            "source": "configured source name",
            "conversation_id": "the conversation",
            "contact_id": "who the conversation is with",
            "local_date": "partition key: local date of the first message",
            "end_local_date": "local date of the last message",
            "start_ts": "first message (UTC)",
            "end_ts": "last message (UTC)",
            "start_local_ts": "first message, local wall-clock time",
            "end_local_ts": "last message, local wall-clock time",
            "tz": "IANA timezone of the local times",
            "message_count": "messages in the session",
            "owner_message_count": "messages sent by the owner",
            "duration_seconds": "end_ts - start_ts",
            "max_gap_seconds": "longest silence inside the session",
            "gap_minutes": "the inactivity threshold the session was cut with",
            "participants": "senders, in order of first message",
            "message_ids": "the session's messages, in order",
        },
    ),
    Table(
        "chunks",
        "local_date",
        S.CHUNKS,
        "chunks",
        "Windows of at most chunk_size messages every chunk_stride messages inside one "
        "session; raw_text has one '[local time] sender: text' line per message.",
        {
            "chunk_id": "chk_ + hash of the session and the window",
            "session_id": "the session the window is cut from",
            "source": "configured source name",
            "conversation_id": "the conversation",
            "contact_id": "who the conversation is with",
            "local_date": "partition key: the session's date",
            "chunk_index": "position of the chunk within its session",
            "first_message_index": "offset of the first message within the session",
            "message_count": "messages in the window",
            "start_ts": "first message (UTC)",
            "end_ts": "last message (UTC)",
            "speakers": "senders in the window",
            "message_ids": "the window's messages, in order",
            "raw_text": "one '[YYYY-MM-DD HH:MM] sender: text' line per message",
        },
    ),
    Table(
        "chunk_summaries",
        "local_date",
        S.CHUNK_SUMMARIES,
        "chunk_summaries",
        "One summary per chunk: extractive (offline, deterministic; 200-500 characters "
        "Japanese, 60-120 words English) or an OpenAI-compatible model, cached by content.",
        {
            "chunk_id": "the chunk",
            "session_id": "the chunk's session",
            "local_date": "partition key: the chunk's date",
            "lang": "language code",
            "summary": "the summary text",
            "method": "extractive or <provider>/<model>",
            "summary_length": "characters (ja) or words (en)",
            "source_length": "the same unit over the chunk's text messages",
            "within_target": "the length is inside the target range",
            "redactions": "placeholders inserted before the text left the machine",
            "error": "why a provider could not summarize (the summary is then a fallback)",
        },
    ),
    Table(
        "embedding_texts",
        "local_date",
        S.EMBEDDING_TEXTS,
        "embedding_texts",
        "embedding_text per chunk: a fixed identifying sentence + the summary + a labelled "
        "raw excerpt of up to 4,000 characters, appended by code, not by a model.",
        {
            "chunk_id": "the chunk",
            "local_date": "partition key: the chunk's date",
            "lang": "language code",
            "embedding_text": "the text embedded and indexed as the embedding_text representation",
            "excerpt_chars": "characters of raw excerpt included",
        },
    ),
    Table(
        "session_enrichment",
        "local_date",
        S.SESSION_ENRICHMENT,
        "session_enrichment",
        "Per session: a 3-6 word title and bullets of decisions, commitments and context "
        "(extractive, offline).",
        {
            "session_id": "the session",
            "local_date": "partition key: the session's date",
            "lang": "language code",
            "title": "a 3-6 word title",
            "bullets": "decisions, commitments and context",
            "method": "extractive or <provider>/<model>",
        },
    ),
    Table(
        "chunk_embeddings",
        "local_date",
        None,
        "chunk_embeddings",
        "One L2-normalized float32 vector per chunk, dense representation and piece (a text "
        "longer than the model window is split into pieces that fit; fixed-size lists; "
        "provider, model and dimension recorded).",
        {
            "chunk_id": "the chunk",
            "local_date": "partition key: the chunk's date",
            "representation": "raw_text, summary or embedding_text",
            "piece": "0-based piece of the text (several when it exceeds the model window)",
            "provider": "embedding provider",
            "model": "embedding model",
            "dim": "vector dimension",
            "vector": "L2-normalized float32 vector",
            "text_hash": "hash of the embedded text (the cache key)",
            "truncated": "the text was longer than the model window and cut (remote providers)",
            "error": "why the provider could not embed (the vector is then zero)",
        },
    ),
    Table(
        "memories",
        "local_date",
        S.MEMORIES,
        "memories",
        "Facts, preferences, plans, events, relationships and possessions per session, each "
        "linked to the messages it came from. Candidates without a resolvable source go to "
        "the memory_rejects table.",
        _MEMORY_COLUMNS,
    ),
    Table(
        "memory_rejects",
        "local_date",
        S.MEMORY_REJECTS,
        "memories",
        "Memory candidates whose source could not be resolved: never stored as memories.",
        {
            "session_id": "the session the candidate came from",
            "contact_id": "the session's contact",
            "local_date": "partition key: the session's date",
            "kind": "the candidate's kind",
            "text": "the candidate's text",
            "message_ids": "the messages it claimed to come from",
            "method": "rules or <provider>/<model>",
            "reason": "why it was rejected",
        },
    ),
    Table(
        "dossiers",
        "local_date",
        S.DOSSIERS,
        "dossiers",
        "One Markdown dossier version per contact whose conversations changed that day "
        "(profile, ongoing commitments, communication patterns, recent topics; every bullet "
        "cites its sessions), folded from the previous day's. The current one is written to "
        "<dossier_dir>/<contact>.md.",
        {
            "contact_id": "the contact",
            "local_date": "partition key: the version's date (Last Updated)",
            "name": "the contact's display name",
            "markdown": "the dossier",
            "state": "JSON: what the next day's update starts from",
            "cited_sessions": "every session a bullet cites",
            "sessions_total": "sessions with this contact so far",
            "messages_total": "messages with this contact so far",
            "method": "rules or <provider>/<model>",
        },
    ),
    Table(
        "bm25_postings",
        "",
        None,
        "bm25_index",
        "BM25 postings per representation (token, chunk, score): BM25 in plain SQL.",
    ),
    Table(
        "session_meta",
        "",
        None,
        "time_metadata",
        "Per session: index in its conversation, date, day name, ISO week (time filters).",
    ),
    Table(
        "message_meta",
        "",
        None,
        "time_metadata",
        "Per message: session, response index, speaker, day name, date and time.",
    ),
    Table(
        "memory_timeline",
        "",
        S.MEMORY_TIMELINE,
        "memory_timeline",
        "Every memory with its validity interval (valid_to / superseded_by set when a newer "
        "memory about the same subject and attribute replaces it); what memory search and "
        "context packs read.",
        {
            **_MEMORY_COLUMNS,
            "local_date": "the session's date",
            "valid_to": "when a newer memory replaced it (null while current)",
            "superseded_by": "the memory_id that replaced it",
        },
    ),
    Table(
        "storage_report",
        "",
        S.STORAGE_REPORT,
        "storage_report",
        "On-disk bytes (and per 1,000 sessions) of the raw text, every table, each index, "
        "the vectors, memories and dossiers: what keeping the source costs.",
        {
            "component": "a table, an index, the vectors, the dossiers or the cache",
            "category": "source, derived, index, vectors, memory, dossier or cache",
            "bytes": "on-disk bytes (raw_text: the logical UTF-8 size of the message texts)",
            "files": "files counted",
            "bytes_per_1000_sessions": "bytes normalised by the number of sessions",
            "share": "of all on-disk bytes listed (the logical raw_text row excluded)",
        },
    ),
)

BY_NAME: dict[str, Table] = {t.name: t for t in REGISTRY}


def table(name: str | Table) -> Table:
    """The registered table (a clear error naming the known tables for an unknown name)."""
    if isinstance(name, Table):
        return name
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown table {name!r}; known: {', '.join(BY_NAME)}") from None


def written_by(asset: str) -> Iterator[Table]:
    """The tables one asset writes, in registry order."""
    return (t for t in REGISTRY if t.asset == asset)


# One constant per table, in registry (DAG) order: code names tables through these.
(
    RAW_MESSAGES,
    QUARANTINE,
    INGEST_AUDIT,
    SESSIONS,
    CHUNKS,
    CHUNK_SUMMARIES,
    EMBEDDING_TEXTS,
    SESSION_ENRICHMENT,
    CHUNK_EMBEDDINGS,
    MEMORIES,
    MEMORY_REJECTS,
    DOSSIERS,
    BM25_POSTINGS,
    SESSION_META,
    MESSAGE_META,
    MEMORY_TIMELINE,
    STORAGE_REPORT,
) = REGISTRY
