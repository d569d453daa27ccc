"""The lookups of an index version: the chunk, message and session rows a search reads,
written into (or hard-linked beside) the version folder so the version stays self-contained.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from memory_pipeline.core.common.storage import link_partitions, read_files, still_linked
from memory_pipeline.core.common.tables import CHUNKS, RAW_MESSAGES

# the lookups of a version (files inside its folder) and the columns search reads from them
CHUNK_LOOKUP = "chunks.parquet"
MESSAGE_LOOKUP = "messages.parquet"
SESSION_LOOKUP = "session_meta.parquet"
CHUNK_LOOKUP_COLUMNS = (
    "chunk_id",
    "session_id",
    "chunk_index",
    "conversation_id",
    "contact_id",
    "speakers",
    "message_ids",
    "raw_text",
    "start_ts",
    "end_ts",
)
MESSAGE_LOOKUP_COLUMNS = ("message_id", "sender", "local_ts", "text", "source_ref")
# The lookups as links (a local store): ``<version>/lookup/{chunks,raw_messages}/<date>.parquet``
# are hard links of the store's partition files the version was built from (link_lookups);
# the two files above are written instead on object storage and by older versions.
LOOKUP_LINKS = "lookup"


def sorted_by(table: pa.Table, column: str) -> pa.Table:
    """``table.sort_by(column)``, or ``table`` itself when it is in that order already (no
    nulls, non-decreasing: the stable sort would give the same rows).

    Why: sorting takes every column; the chunks carry ~50 MB of text, and a refresh sorts
    them once by id for the lookups, the representations and the analyzer sample instead of
    once each (copies that held the main thread of the refresh)."""
    col = table.column(column)
    n = len(col)
    if n < 2 or (
        col.null_count == 0 and pc.all(pc.less_equal(col.slice(0, n - 1), col.slice(1))).as_py()
    ):
        return table
    return table.sort_by(column)


def write_lookups(version: Path, chunks: pa.Table, messages: pa.Table) -> dict:
    """Write the chunk and message lookups search needs into the version folder (call before
    ``publish``): the chunks that were indexed, in chunk_id order, and every message with
    the fields hits show (sender, local time, text, source_ref)."""
    chunk_rows = sorted_by(chunks.select(list(CHUNK_LOOKUP_COLUMNS)), "chunk_id")
    message_rows = messages.select(list(MESSAGE_LOOKUP_COLUMNS)).sort_by("message_id")
    pq.write_table(chunk_rows, version / CHUNK_LOOKUP, compression="zstd")
    pq.write_table(message_rows, version / MESSAGE_LOOKUP, compression="zstd")
    return {"lookup_chunks": chunk_rows.num_rows, "lookup_messages": message_rows.num_rows}


def link_lookups(version: Path, store: Any) -> dict[str, dict[str, tuple]] | None:
    """Hard-link the store's ``chunks`` and ``raw_messages`` files into ``version/lookup``
    (call before reading them for the build); {table: {file: identity}} for
    :func:`finish_lookups`, or None (nothing linked) where links cannot be made.

    Why: the lookups are the rows the version was built from. Written as copies (sorted,
    zstd) they were ~1.1 CPU s of every refresh's ~10 for ~36 MB of Parquet that the store
    already holds; a link of each immutable partition file costs a directory entry."""
    links = version / LOOKUP_LINKS
    out: dict[str, dict[str, tuple]] = {}
    for t in (CHUNKS, RAW_MESSAGES):
        linked = link_partitions(store, t, links / t.name)
        if linked is None:
            shutil.rmtree(links, ignore_errors=True)
            return None
        out[t.name] = linked
    return out


def finish_lookups(
    version: Path,
    store: Any,
    linked: Mapping[str, dict[str, tuple]] | None,
    chunks: pa.Table,
    messages: pa.Table,
) -> dict:
    """The version's lookups once ``chunks`` and ``messages`` (every stored row) are read:
    the links of :func:`link_lookups` when the store's files are still the linked ones (so
    the links hold exactly the rows read), else copies (:func:`write_lookups`)."""
    if linked is not None and all(
        still_linked(store, t, linked[t.name]) for t in (CHUNKS, RAW_MESSAGES)
    ):
        return {
            "lookup_chunks": chunks.num_rows,
            "lookup_messages": messages.num_rows,
            "lookups_linked": True,
        }
    shutil.rmtree(version / LOOKUP_LINKS, ignore_errors=True)
    return write_lookups(version, chunks, messages) | {"lookups_linked": False}


def has_lookups(version: Path) -> bool:
    """Whether the version carries its lookups (versions built before they existed do not)."""
    linked = (version / LOOKUP_LINKS).is_dir()
    return (version / SESSION_LOOKUP).is_file() and (
        linked or all((version / f).is_file() for f in (CHUNK_LOOKUP, MESSAGE_LOOKUP))
    )


def read_lookups(version: Path) -> tuple[pa.Table, pa.Table, pa.Table]:
    """(chunks in chunk_id order, messages, session metadata) of a published version."""
    links = version / LOOKUP_LINKS
    if links.is_dir():
        chunks = _linked(links, CHUNKS, CHUNK_LOOKUP_COLUMNS).sort_by("chunk_id")
        messages = _linked(links, RAW_MESSAGES, MESSAGE_LOOKUP_COLUMNS)
    else:
        chunks = pq.read_table(version / CHUNK_LOOKUP).sort_by("chunk_id")
        messages = pq.read_table(version / MESSAGE_LOOKUP)
    sessions = pq.read_table(version / SESSION_LOOKUP)
    return chunks, messages, sessions


def _linked(links: Path, t: Any, columns: Sequence[str]) -> pa.Table:
    """``columns`` of the partition files linked for table ``t``, in date order."""
    return read_files(sorted((links / t.name).glob("*.parquet")), t, columns)
