"""What the readers of app chat exports share: file listing (folders, zips), decoding, names.

The app exports (LINE for PC, WhatsApp, Telegram, ...) each have their own module with a
``parse(spec, file, dates)`` generator over one export file; this module walks the
configured path (one file, or a folder with subfolders and zips), accounts for every path it
cannot read, and turns a whole-file rejection into one quarantine row. ``kind = "auto"`` uses
the same walk and the same per-file parsers, so a reader behaves the same alone or in a folder.

Files are streamed, not loaded: an :class:`ExportFile` opens its bytes on demand (a file on
disk, or a zip member inflated as it is read), the sniffers see only its first bytes, and the
text readers get its lines in batches (:func:`line_batches`), so a 1 GB backup is read in
bounded memory. Only the JSON readers, whose documents are parsed whole, read all of a file.
"""

from __future__ import annotations

import codecs
import datetime as dt
import functools
import io
import json
import shutil
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from memory_pipeline.core.common.records import (
    MAX_RAW_EXCERPT,
    R_ENCODING,
    R_MALFORMED_JSON,
    R_NOT_AN_EXPORT,
    R_TOO_LARGE,
    Message,
    QuarantineRecord,
    Record,
    SourceError,
)
from memory_pipeline.core.common.timeutil import zone
from memory_pipeline.core.ingest.sources.base import (
    _CR_LINES,
    JsonRejected,
    SourceSpec,
    UnreadableGate,
    cr_line_ends,
    path_problem,
    path_quarantine,
    read_problem,
    scrub_surrogates,
)
from memory_pipeline.core.ingest.sources.base import load_json as base_load_json
from memory_pipeline.core.ingest.sources.exports_decode import (
    _LONE,
    BAD_BYTE,
    Rejected,
    _any_utf8_line,
    bad_line,
    decode_text,
    has_bad_bytes,
    merge_duplicate_lists,
)
from memory_pipeline.core.ingest.sources.exports_names import (
    Owners,
    clean_name,
    clean_text,
    conversation_option,
    phone_key,
    safe_id,
)
from memory_pipeline.core.ingest.sources.exports_times import (
    EpochClock,
    WallClock,
    _local_and_utc,
    epoch_clock,
    epoch_ms,
    from_epoch,
    from_epoch_ms,
    local_and_utc,
    parse_iso,
    wall_clock,
)

# The helpers that live in the sibling modules (exports_decode, exports_names,
# exports_times), re-exported: the readers and tests import them from here.
__all__ = [
    "BAD_BYTE",
    "EpochClock",
    "Owners",
    "Rejected",
    "WallClock",
    "_local_and_utc",
    "bad_line",
    "clean_name",
    "clean_text",
    "conversation_option",
    "decode_text",
    "epoch_clock",
    "epoch_ms",
    "from_epoch",
    "from_epoch_ms",
    "has_bad_bytes",
    "merge_duplicate_lists",
    "local_and_utc",
    "parse_iso",
    "phone_key",
    "safe_id",
    "wall_clock",
]


FILE_REF = "file"  # record_ref of a row that stands for a whole file

# Zip limits: a zip bomb is rejected from its directory (declared sizes), before any byte is
# inflated, and reading stops at the declared size (zipfile checks it), so a lying header
# cannot inflate more than the limits either.
ZIP_MAX_MEMBER_BYTES = 2 << 30  # one member, uncompressed
ZIP_MAX_TOTAL_BYTES = 8 << 30  # all members read from one zip
ZIP_MAX_RATIO = 100  # uncompressed / compressed, for members over ZIP_RATIO_FLOOR
ZIP_RATIO_FLOOR = 1 << 20
ZIP_MAX_MEMBERS = 200_000

# Attachments and viewer assets that sit beside an export (WhatsApp media, Telegram photos/,
# ChatGPT's chat.html styling): they hold no messages, so they are not records to account for.
ATTACHMENT_SUFFIXES = frozenset(
    ".jpg .jpeg .png .gif .webp .heic .heif .bmp .tif .tiff .svg .mp4 .mov .m4v .avi .mkv "
    ".webm .3gp .opus .ogg .oga .m4a .mp3 .aac .amr .wav .flac .pdf .vcf .tgs .css .js .woff "
    ".woff2 .ttf .ico .thumb .doc .docx .xls .xlsx .ppt .pptx .apk "
    ".db-wal .db-shm .db-journal".split()  # SQLite's sidecars of a chat.db
)


HEAD_BYTES = 1 << 16  # what the sniffers may look at
CHUNK_BYTES = 1 << 20  # what the streaming readers decode at a time


@dataclass(frozen=True)
class ExportFile:
    """One export file, its name relative to the source path (zip members as
    ``chat.zip/_chat.txt``) and its first bytes; ``stem`` is the name that best names the
    chat. The bytes are read on demand (:meth:`open`), so a file is never held whole unless a
    reader asks for :attr:`data` (the JSON readers)."""

    rel: str
    stem: str
    path: Path | None = None  # the file on disk (None for a zip member)
    opener: Callable[[], BinaryIO] | None = field(default=None, repr=False, compare=False)
    head_bytes: bytes = field(default=b"", repr=False, compare=False)

    @classmethod
    def of_path(cls, rel: str, path: Path, stem: str | None = None) -> ExportFile:
        """The export file at ``path`` (its first bytes read now)."""
        with path.open("rb") as fh:
            head = fh.read(HEAD_BYTES)
        return cls(rel, path.stem if stem is None else stem, path, None, head)

    @classmethod
    def of_bytes(cls, rel: str, data: bytes, stem: str, path: Path | None = None) -> ExportFile:
        """An export file held in memory (tests, small members)."""
        return cls(rel, stem, path, lambda: io.BytesIO(data), data[:HEAD_BYTES])

    def open(self) -> BinaryIO:
        """A fresh binary stream of the file's bytes, from the start."""
        if self.opener is not None:
            return self.opener()
        if self.path is None:
            raise ValueError(f"{self.rel}: no bytes to open")
        return self.path.open("rb")

    def head(self, n: int = 8192) -> bytes:
        """The first ``n`` bytes (at most ``HEAD_BYTES``): what a sniffer looks at."""
        return self.head_bytes[:n]

    def save(self, path: Path) -> None:
        """Copy the bytes to ``path`` in chunks (a zip member a reader needs as a file)."""
        with self.open() as src, path.open("wb") as dst:
            shutil.copyfileobj(src, dst, CHUNK_BYTES)

    @functools.cached_property
    def data(self) -> bytes:
        """All the bytes, read once: for the formats parsed as one document (JSON)."""
        with self.open() as fh:
            return fh.read()


# parse(spec, file, dates) -> records; raises Rejected before its first record
Parse = Callable[[SourceSpec, ExportFile, "frozenset[dt.date] | None"], Iterator[Record]]


Sniff = Callable[[ExportFile], bool]


@dataclass(frozen=True)
class Detector:
    """How ``kind = "auto"`` recognises and reads one format: ``sniff`` looks at the file's
    content (its first bytes), ``parse`` reads it; lower ``rank`` is tried first (the more
    specific formats before the lenient ones)."""

    kind: str
    sniff: Sniff
    parse: Parse
    rank: int


DETECTORS: dict[str, Detector] = {}


def register_detector(kind: str, sniff: Sniff, parse: Parse, rank: int) -> None:
    """Make a format detectable by ``kind = "auto"``."""
    DETECTORS[kind] = Detector(kind, sniff, parse, rank)


def text_chunks(f: ExportFile, legacy: tuple[str, ...] = ()) -> Iterator[str]:
    """The file's text, streamed in chunks, decoded exactly as :func:`decode_text` decodes the
    whole file. The encoding is settled before the first chunk: a UTF-16 file is checked whole
    first (so a broken one is still ``Rejected`` before any record); with ``legacy``
    encodings, a file whose first non-ASCII line is UTF-8 is UTF-8 at once, any other is
    scanned once more (bounded memory) to decide as :func:`decode_text` does."""
    head = f.head(4)
    skip = 0
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        _check_utf16(f)
        codec, errors = "utf-16", "strict"
    else:
        skip = 3 if head.startswith(codecs.BOM_UTF8) else 0
        codec, errors = _pick_codec(f, skip, legacy) if legacy else ("utf-8", "surrogateescape")
    dec = codecs.getincrementaldecoder(codec)(errors)
    with f.open() as fh:
        if skip:
            fh.read(skip)
        while chunk := fh.read(CHUNK_BYTES):
            text = dec.decode(chunk)
            if text:
                yield text
        text = dec.decode(b"", True)
        if text:
            yield text


def line_batches(f: ExportFile, legacy: tuple[str, ...] = ()) -> Iterator[tuple[list[str], bool]]:
    """The file's lines in batches, exactly the lines of ``decode_text(...).split("\n")``
    with a trailing ``\r`` removed, and per batch whether a line of it holds bytes that are
    not UTF-8 (then :func:`bad_line` tells which). Memory is one chunk, whatever the file."""
    carry = ""
    cr_only = cr_line_ends(f.head(HEAD_BYTES))  # the rule of base.split_lines, from the head
    for text in text_chunks(f, legacy):
        if carry:
            text = carry + text
        if cr_only:  # classic Mac OS line ends: "\r" (and "\r\n") end lines
            hold = "\r" if text.endswith("\r") else ""  # maybe the first half of "\r\n"
            lines = _CR_LINES.split(text[: len(text) - len(hold)])
            carry = lines.pop() + hold
        else:
            lines = text.split("\n")
            carry = lines.pop()
        if lines:
            yield _batch(lines, text)
    yield _batch([carry], carry)


def _batch(lines: list[str], text: str) -> tuple[list[str], bool]:
    if "\r" in text:
        lines = [s[:-1] if s.endswith("\r") else s for s in lines]
    return lines, _LONE.search(text) is not None


def _check_utf16(f: ExportFile) -> None:
    """Raise ``Rejected`` (as :func:`decode_text`) when a UTF-16 file does not decode."""
    dec = codecs.getincrementaldecoder("utf-16")("strict")
    fed = 0
    with f.open() as fh:
        while True:
            chunk = fh.read(CHUNK_BYTES)
            pending = len(dec.getstate()[0])
            try:
                dec.decode(chunk, not chunk)
            except UnicodeDecodeError as exc:
                at = fed - pending + exc.start
                raise Rejected(R_ENCODING, f"UTF-16 BOM but invalid UTF-16 at byte {at}") from None
            if not chunk:
                return
            fed += len(chunk)


def _byte_chunks(f: ExportFile, skip: int) -> Iterator[bytes]:
    with f.open() as fh:
        if skip:
            fh.read(skip)
        while chunk := fh.read(CHUNK_BYTES):
            yield chunk


def _pick_codec(f: ExportFile, skip: int, legacy: tuple[str, ...]) -> tuple[str, str]:
    """(codec, errors) that :func:`decode_text` would use for the whole file."""
    head = f.head(HEAD_BYTES)[skip:]
    lines = head.split(b"\n")
    if len(head) + skip >= HEAD_BYTES:
        lines.pop()  # maybe cut short
    for raw in lines:
        if not raw.isascii():
            try:
                raw.decode("utf-8")
                return "utf-8", "surrogateescape"  # a UTF-8 line: never a legacy file
            except UnicodeDecodeError:
                break
    valid, any_line, carry = True, False, b""
    dec = codecs.getincrementaldecoder("utf-8")("strict")
    for chunk in _byte_chunks(f, skip):
        if valid:
            try:
                dec.decode(chunk)
            except UnicodeDecodeError:
                valid = False
        if not any_line:
            parts = (carry + chunk).split(b"\n")
            carry = parts.pop()
            any_line = _any_utf8_line(b"\n".join(parts))
    if valid:
        try:
            dec.decode(b"", True)
        except UnicodeDecodeError:
            valid = False
    if valid or any_line or _any_utf8_line(carry):
        return "utf-8", "surrogateescape"
    for enc in legacy:
        dec = codecs.getincrementaldecoder(enc)("strict")
        try:
            for chunk in _byte_chunks(f, skip):
                dec.decode(chunk)
            dec.decode(b"", True)
        except UnicodeDecodeError:
            continue
        return enc, "strict"
    return "utf-8", "surrogateescape"


def excerpt(text: str) -> str:
    """At most MAX_RAW_EXCERPT characters of a record, safe to store."""
    return scrub_surrogates(text[:MAX_RAW_EXCERPT])


def message(
    spec: SourceSpec,
    f: ExportFile,
    *,
    conv: str,
    contact: str,
    sender: str,
    owners: Owners,
    local: dt.datetime,
    utc: dt.datetime,
    type_: str,
    text: str,
    order: int,
    line: int | None,
    ref: str | None = None,
) -> Message:
    """A Message with the fields every export reader fills the same way."""
    return Message(
        source=spec.name,
        conversation_id=conv,
        contact_id=contact,
        sender=sender,
        is_owner=bool(sender) and sender in owners,
        ts=utc,
        local_ts=local,
        tz=spec.timezone,
        type=type_,
        text=text,
        source_order=order,
        source_ref=ref or (f"{f.rel}:{line}" if line is not None else f.rel),
        source_file=f.rel,
        source_line=line,
    )


def quarantine(
    spec: SourceSpec,
    f: ExportFile,
    reason: str,
    detail: str,
    *,
    conv: str | None,
    day: dt.date | None,
    line: int | None = None,
    ref: str | None = None,
    raw: str = "",
) -> QuarantineRecord:
    """A QuarantineRecord of one record of an export file."""
    return QuarantineRecord(
        source=spec.name,
        source_file=f.rel,
        source_line=line,
        record_ref=ref or (f"line {line}" if line is not None else FILE_REF),
        conversation_id=conv,
        partition_date=day,
        reason=reason,
        detail=detail,
        raw=excerpt(raw),
    )


# -- the walk over a source path -------------------------------------------------------------


def zip_members(path: Path, rel: str) -> Iterator[ExportFile | tuple[str, str, str]]:
    """The members of the zip at ``path`` that are not attachments, as ExportFiles, or
    ``(rel, reason, detail)`` for a member (or the whole zip) refused.

    Checked from the central directory before inflating anything: member count, each
    member's declared size, the total and the compression ratio (a zip bomb is one
    ``too_large`` row). Encrypted members are refused; a member whose data is corrupt is one
    row, its neighbours still read. Each member is inflated once to check it (nothing kept)
    before it is handed out, so a corrupt member gives no records, then again as its reader
    streams it; the zip stays open while the member is read.
    """
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        yield rel, R_ENCODING, f"not a readable zip ({type(exc).__name__})"
        return
    with zf:
        infos = [i for i in zf.infolist() if not i.is_dir()]
        if len(infos) > ZIP_MAX_MEMBERS:
            yield rel, R_TOO_LARGE, f"zip has {len(infos)} members > {ZIP_MAX_MEMBERS}"
            return
        wanted = [i for i in infos if _readable_member(i.filename)]
        total = sum(i.file_size for i in wanted)
        if total > ZIP_MAX_TOTAL_BYTES:
            yield rel, R_TOO_LARGE, f"zip declares {total} bytes > {ZIP_MAX_TOTAL_BYTES}"
            return
        for info in sorted(wanted, key=lambda i: i.filename):
            name = scrub_surrogates(info.filename)
            mrel = f"{rel}/{name}"
            ratio = info.file_size / max(info.compress_size, 1)
            if info.file_size > ZIP_MAX_MEMBER_BYTES:
                yield mrel, R_TOO_LARGE, f"member declares {info.file_size} bytes"
                continue
            if info.file_size > ZIP_RATIO_FLOOR and ratio > ZIP_MAX_RATIO:
                yield mrel, R_TOO_LARGE, f"compression ratio {ratio:.0f} > {ZIP_MAX_RATIO}"
                continue
            if info.flag_bits & 0x1:
                yield mrel, R_ENCODING, "encrypted zip member"
                continue
            try:
                with zf.open(info) as fh:
                    head = fh.read(HEAD_BYTES)
                    while fh.read(CHUNK_BYTES):
                        pass
            except (
                zipfile.BadZipFile, OSError, ValueError, NotImplementedError, EOFError, zlib.error
            ) as exc:  # fmt: skip
                yield mrel, R_ENCODING, f"corrupt zip member ({type(exc).__name__})"
                continue
            if head[:4] == b"PK\x03\x04":  # a zip inside the zip is not expanded again
                yield mrel, R_ENCODING, "nested zip is not read"
                continue
            stem = _member_stem(PurePosixPath(rel).stem, name)
            yield ExportFile(mrel, stem, None, functools.partial(zf.open, info), head)


def _readable_member(name: str) -> bool:
    p = PurePosixPath(name)
    if any(part.startswith(".") or part == "__MACOSX" for part in p.parts):
        return False
    return p.suffix.lower() not in ATTACHMENT_SUFFIXES


def _member_stem(zip_stem: str, member: str) -> str:
    """A generic member name (``_chat.txt``, ``result.json``) is named by its zip."""
    stem = PurePosixPath(member).stem
    return zip_stem if stem.lower() in {"_chat", "chat", "result", "conversations"} else stem


def list_paths(root: Path, accept: Callable[[Path], bool] | None = None) -> list[Path]:
    """Every non-hidden file under ``root`` (recursive, sorted), links included so that the
    walk can account for dangling ones; ``accept`` filters by name (None: all but
    attachments)."""
    out: list[Path] = []
    try:
        entries = sorted(root.iterdir())
    except OSError as exc:
        raise SourceError(f"cannot list {root}: {exc.strerror or type(exc).__name__}") from None
    for p in entries:
        if p.name.startswith(".") or p.name == "__MACOSX":
            continue
        if p.is_dir() and not p.is_symlink():
            out.extend(list_paths(p, accept))
        elif p.suffix.lower() in ATTACHMENT_SUFFIXES:
            continue
        elif accept is None or accept(p) or p.suffix.lower() == ".zip":
            out.append(p)
    return out


def walk(
    spec: SourceSpec, accept: Callable[[Path], bool] | None = None
) -> Iterator[ExportFile | QuarantineRecord]:
    """The export files of a source (zip members expanded), or a file-level quarantine row
    for each path that cannot be read. A source where no file can be read at all is a
    ``SourceError`` (a setup problem, see ``UnreadableGate``)."""
    root = spec.path
    paths = [root] if root.is_file() else None
    if paths is None:
        if not root.is_dir():
            raise SourceError(f"source {spec.name!r}: input path does not exist: {root}")
        try:
            paths = list_paths(root, accept)
        except SourceError as exc:
            raise SourceError(f"source {spec.name!r}: {exc}") from None
        if not paths:
            raise SourceError(f"source {spec.name!r}: no export files in {root}")
    gate = UnreadableGate()
    for path in paths:
        rel = scrub_surrogates(path.name if path == root else path.relative_to(root).as_posix())
        # a link that leads out of the configured folder is not followed (base.outside_source)
        problem = path_problem(path, None if path == root else root)
        if problem is not None:
            yield file_row(spec, rel, *problem)
            continue
        try:
            f = ExportFile.of_path(rel, path)
        except OSError as exc:
            error = SourceError(
                f"source {spec.name!r}: cannot read {path}: {exc.strerror or type(exc).__name__}"
            )
            yield from gate.hold(file_row(spec, rel, *read_problem(exc)), error)
            continue
        yield from gate.opened()
        if path.suffix.lower() == ".zip" or f.head(4) == b"PK\x03\x04":
            for item in zip_members(path, rel):
                yield item if isinstance(item, ExportFile) else file_row(spec, *item)
        else:
            yield f
    gate.close()


def file_row(spec: SourceSpec, rel: str, reason: str, detail: str) -> QuarantineRecord:
    """The one quarantine row of a file that yields no records."""
    return path_quarantine(
        spec, rel, reason, detail, conversation_id=None, partition_date=None, record_ref=FILE_REF
    )


def read_exports(
    spec: SourceSpec,
    dates: frozenset[dt.date] | None,
    parse: Parse,
    accept: Callable[[Path], bool] | None = None,
) -> Iterator[Record]:
    """A reader's body: every export file of the source through ``parse``.

    A lone configured file that is not this kind of export fails the source with a one-line
    error (the config is wrong); in a folder, such a file is one quarantine row and its
    neighbours are read.
    """
    try:
        zone(spec.timezone)
    except ValueError as exc:
        raise SourceError(f"source {spec.name!r}: {exc}") from None
    lone = spec.path.is_file()
    for item in walk(spec, accept):
        if isinstance(item, QuarantineRecord):
            yield item
            continue
        yield from parse_file(spec, item, dates, parse, lone=lone)


def parse_file(
    spec: SourceSpec,
    f: ExportFile,
    dates: frozenset[dt.date] | None,
    parse: Parse,
    *,
    lone: bool = False,
) -> Iterator[Record]:
    """One file through ``parse``; a rejected file is one row (or, ``lone``, a SourceError)."""
    records = parse(spec, f, dates)
    try:
        first = next(records)
    except StopIteration:
        return
    except Rejected as exc:
        if lone and "/" not in f.rel:
            raise SourceError(f"source {spec.name!r}: {spec.path}: {exc.detail}") from None
        yield file_row(spec, f.rel, exc.reason, exc.detail)
        return
    yield first
    yield from records


def head_text(data: bytes | ExportFile, n: int = 8192) -> str:
    """The first ``n`` bytes as text (BOM-aware, lenient): what the sniffers look at."""
    chunk = data.head(n) if isinstance(data, ExportFile) else data[:n]
    if chunk.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return chunk[: n - n % 2].decode("utf-16", "replace")
    if chunk.startswith(codecs.BOM_UTF8):
        chunk = chunk[3:]
    return chunk.decode("utf-8", "replace")


def load_json(f: ExportFile, what: str) -> object:
    """The parsed JSON of an export file (BOM-aware; lone surrogates replaced). Bytes that
    are not UTF-8 become :data:`BAD_BYTE`, so only the records holding them are lost
    (:func:`has_bad_bytes`). Raises ``Rejected``: ``malformed_json`` for a broken (e.g.
    truncated) JSON document, ``not_an_export`` for a file that is not JSON at all; ``what``
    names the format."""
    data = f.data
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        text = decode_text(data)
    else:
        text = data.removeprefix(codecs.BOM_UTF8).decode("utf-8", "memory_pipeline_bad_byte")
    try:
        # the shared parser: depth bounded, over-long numbers refused, duplicated keys listed
        parsed = base_load_json(text)
    except JsonRejected as exc:
        raise Rejected(exc.reason, f"{exc.detail}, expected {what}") from None
    except (json.JSONDecodeError, ValueError) as exc:
        looks = text.lstrip()[:1] in ("{", "[")
        reason = R_MALFORMED_JSON if looks else R_NOT_AN_EXPORT
        where = f"line {exc.lineno}" if isinstance(exc, json.JSONDecodeError) else "?"
        raise Rejected(reason, f"not valid JSON ({where}), expected {what}") from None
    return merge_duplicate_lists(parsed.value, parsed.duplicates)
