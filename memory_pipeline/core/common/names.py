"""Names as ingest stores them and as ``forget`` matches them: one function each.

Why: the same chat copied from macOS (file names in decomposed Unicode, NFD) and from Linux
(composed, NFC) must be one contact, and a forgotten contact must stay forgotten when a
re-export spells it with other case or a trailing space. Every reader's records pass through
:func:`canonical_record` / :func:`canonical_names` at ingest, and the forget list hashes
:func:`match_key`, which starts from the very same :func:`canonical_name`.
"""

from __future__ import annotations

import unicodedata

import pyarrow as pa
import pyarrow.compute as pc

from memory_pipeline.core.common.records import Message, Record

# The columns / fields that hold a person's or a conversation's name.
NAME_FIELDS = ("conversation_id", "contact_id", "sender")


def canonical_name(name: str) -> str:
    """A contact, sender or conversation name in the one form ingest stores: Unicode NFC.

    NFC, not NFKC: text already in NFC (what nearly every export writes) is unchanged, so
    content-derived message ids (which hash the conversation and the sender) stay the same.
    """
    if name.isascii() or unicodedata.is_normalized("NFC", name):
        return name
    return unicodedata.normalize("NFC", name)


def match_key(name: str) -> str:
    """What two names must share to be the same person for ``forget``: the canonical name
    without surrounding spaces, case-folded (NFC again: folding can decompose)."""
    key = canonical_name(name).strip().casefold()
    return key if key.isascii() else unicodedata.normalize("NFC", key)


def canonical_record(rec: Record) -> Record:
    """``rec`` with its names canonical (in place; returned for convenience)."""
    if rec.conversation_id:
        rec.conversation_id = canonical_name(rec.conversation_id)
    if isinstance(rec, Message):
        rec.contact_id = canonical_name(rec.contact_id)
        rec.sender = canonical_name(rec.sender)
    return rec


def canonical_names(table: pa.Table) -> pa.Table:
    """``table`` with :data:`NAME_FIELDS` columns canonical (the columnar twin of
    :func:`canonical_record`; each distinct value is normalized once)."""
    for name in NAME_FIELDS:
        if name not in table.schema.names:
            continue
        col = table.column(name)
        if pc.all(pc.fill_null(pc.string_is_ascii(col), True)).as_py() is not False:
            continue
        enc = pc.dictionary_encode(col).combine_chunks()
        values = enc.dictionary.to_pylist()
        fixed = [v if v is None else canonical_name(v) for v in values]
        if fixed != values:
            arr = pa.array(fixed, col.type).take(enc.indices)
            table = table.set_column(table.schema.get_field_index(name), name, arr)
    return table
