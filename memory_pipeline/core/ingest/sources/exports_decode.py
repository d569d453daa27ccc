"""Whole-text decoding of the chat exports, the marks of bytes that are not UTF-8, and the
merge of a JSON document's duplicated record lists.

Split from :mod:`~memory_pipeline.core.ingest.sources.exports` (which re-exports every name
here). What is here needs no file size limit: the streaming decoders (``text_chunks``,
``line_batches``), which read ``CHUNK_BYTES`` and ``HEAD_BYTES``, stay in ``exports`` beside
those constants, so that patching them there still governs every read.
"""

from __future__ import annotations

import codecs
import re
from typing import Any

from memory_pipeline.core.common.records import R_ENCODING
from memory_pipeline.core.ingest.sources.base import DuplicateKey, FileRejected

# A whole export file is unusable: its quarantine ``reason`` and a log-safe ``detail``; the
# one exception every reader raises for that (base.FileRejected), under the export readers' name.
Rejected = FileRejected


def decode_text(data: bytes, legacy: tuple[str, ...] = ()) -> str:
    """Text of an export file. UTF-16 with a BOM, UTF-8 (BOM or not), else one of ``legacy``
    (cp932 for old Windows LINE, cp874 for Thai) when it decodes the whole file; else UTF-8
    with bad bytes kept as lone surrogates, so :func:`bad_line` can quarantine just those
    lines. Raises ``Rejected`` for a broken UTF-16 file."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise Rejected(
                R_ENCODING, f"UTF-16 BOM but invalid UTF-16 at byte {exc.start}"
            ) from None
    if data.startswith(codecs.BOM_UTF8):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    if legacy and not _any_utf8_line(data):
        for enc in legacy:
            try:
                return data.decode(enc)
            except UnicodeDecodeError:
                continue
    return data.decode("utf-8", "surrogateescape")


def _any_utf8_line(data: bytes) -> bool:
    """True when some non-ASCII line is valid UTF-8: then the file is UTF-8 with a few damaged
    bytes (quarantined per line), not a legacy-encoded file to decode as a whole."""
    for raw in data.split(b"\n"):
        if raw.isascii():
            continue
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            continue
        return True
    return False


_LONE = re.compile("[\udc80-\udcff]")


def bad_line(line: str) -> bool:
    """True when a line decoded by :func:`decode_text` holds bytes that are not UTF-8."""
    return _LONE.search(line) is not None


BAD_BYTE = "\ufdd0"  # a noncharacter (valid in XML and JSON) standing for an undecodable byte


def _bad_byte(exc: UnicodeError) -> tuple[str, int]:
    return BAD_BYTE, exc.end  # type: ignore[attr-defined]


codecs.register_error("memory_pipeline_bad_byte", _bad_byte)


def has_bad_bytes(value: object) -> bool:
    """True when a parsed record (a string, or a dict/list of them) holds bytes of the file
    that were not UTF-8 (see :func:`load_json`): the record is quarantined, its neighbours
    are kept."""
    if isinstance(value, str):
        return BAD_BYTE in value
    if isinstance(value, dict):
        return any(has_bad_bytes(v) or has_bad_bytes(k) for k, v in value.items())
    if isinstance(value, list):
        return any(has_bad_bytes(v) for v in value)
    return False


def merge_duplicate_lists(doc: Any, duplicates: list[DuplicateKey]) -> Any:
    """``doc`` with each key named twice holding the lists of every occurrence, in order.

    JSON keeps only the last value of a duplicated key: an export with two ``messages``
    arrays (a hand-merged or damaged file) would lose the first array's records without a
    trace. Where every occurrence is a list (record arrays), they are concatenated so each
    record is read and accounted; a duplicated scalar keeps the last value, as JSON does."""
    if not duplicates:
        return doc
    earlier: dict[tuple[tuple[str | int, ...], str], list[Any]] = {}
    for d in duplicates:
        earlier.setdefault((d.path, d.key), []).append(d.dropped)
    for (path, key), dropped in earlier.items():
        obj = doc
        for step in path:
            obj = obj[step]
        values = [*dropped, obj[key]]
        if all(isinstance(v, list) for v in values):
            obj[key] = [item for v in values for item in v]
    return doc
