"""Reader for the date-keyed LINE JSON layout: ``<path>/<conversation_id>/<YYYY-MM-DD>.json``.

One file holds one conversation's messages of one local date, so a run for a few dates opens only
those files. Each message entry becomes exactly one ``Message`` or one ``QuarantineRecord``; a
file that cannot be decoded or parsed at all becomes one ``QuarantineRecord``. The exact schema
is documented in ``docs/source_formats_line.md``.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from memory_pipeline.core.common.records import (
    MAX_RAW_EXCERPT,
    R_BAD_TIMESTAMP,
    R_DUPLICATE_KEY,
    R_ENCODING,
    R_MALFORMED_JSON,
    R_MISSING_FIELD,
    R_MISSING_TIMESTAMP,
    R_NO_RECORDS,
    R_SYMLINK_OUTSIDE,
    R_VALUE_OUT_OF_RANGE,
    Message,
    QuarantineRecord,
    Record,
    SourceError,
)
from memory_pipeline.core.common.timeutil import zone
from memory_pipeline.core.ingest.sources.base import (
    OUT_OF_RANGE_TIME,
    SYMLINK_OUTSIDE_DETAIL,
    DuplicateKey,
    JsonRejected,
    SourceSpec,
    UnreadableGate,
    canonical_name,
    duplicate_problem,
    fits_int64,
    load_json,
    may_hold_surrogates,
    outside_source,
    path_problem,
    path_quarantine,
    read_problem,
    register,
    scrub_json,
    scrub_surrogates,
    utc_or_none,
)

_DATE_FILE = re.compile(r"(\d{4})-(\d{2})-(\d{2})\.json")
_TIME = re.compile(r"\s*(\d{1,2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,6}))?)?\s*")
# Time values that mean "no time" (what pandas / spreadsheets write for a missing value).
_NAT_LIKE = frozenset({"", "nat", "nan", "none", "null", "nil"})
# Record reference for a whole file (a JSON path to its root).
FILE_REF = "$"
# The keys this reader reads: a duplicate of one of them (with another value) is ambiguous.
_HEADER_KEYS = frozenset({"date", "conversation_id", "contact", "timezone"})
_ENTRY_KEYS = frozenset({"time", "type", "sender", "text", "source_order"})
# Characters ``surrogateescape`` decodes invalid UTF-8 bytes to.
_BAD_BYTE = re.compile("[\udc80-\udcff]")


# -- helpers shared with the line_txt reader -------------------------------------------------


def relative_name(path: Path, root: Path) -> str:
    """``path`` relative to the configured source path, as posix (its name if root is the file).

    Stored in every record so a quarantined line can be found again wherever the source lives.
    """
    if path == root:
        return scrub_surrogates(path.name)
    return scrub_surrogates(path.relative_to(root).as_posix())


def read_bytes(path: Path, source_name: str) -> bytes:
    """Whole file as bytes; an unreadable file is a named ``SourceError``, never a traceback."""
    try:
        return path.read_bytes()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise SourceError(f"source {source_name!r}: cannot read {path}: {reason}") from None


def check_timezone(spec: SourceSpec) -> str:
    """The configured zone, validated once: a bad zone is a config error, not bad data."""
    try:
        zone(spec.timezone)
    except ValueError as exc:
        raise SourceError(f"source {spec.name!r}: {exc}") from None
    return spec.timezone


def raw_excerpt(text: str) -> str:
    """At most ``MAX_RAW_EXCERPT`` characters: enough to repair a record, bounded for storage."""
    return text[:MAX_RAW_EXCERPT]


# -- line_json ------------------------------------------------------------------------------


class _Reject(Exception):
    """Internal: one message entry cannot become a Message (reason code + loggable detail)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


# A listed path: (path, its date, why it cannot be read — None for a regular date file).
_Entry = tuple[Path, "dt.date | None", "tuple[str, str] | None"]


def _date_files(spec: SourceSpec) -> list[_Entry]:
    """All ``<conversation>/<YYYY-MM-DD>.json`` entries, sorted, names validated before any read.

    A ``*.json`` file that does not fit the layout is a layout mistake, so it fails the whole
    source up front instead of being skipped (silently losing a day) or half-read. A link that
    loops or dangles, or a directory named like a date file, is listed with its problem so it
    becomes a quarantine row instead of vanishing.
    """
    root = spec.path
    if not root.is_dir():
        raise SourceError(
            f"source {spec.name!r}: line_json expects a directory of "
            f"<conversation>/<YYYY-MM-DD>.json files, got {root}"
        )
    found: list[_Entry] = []
    try:
        for conv_dir in sorted(root.iterdir()):
            if conv_dir.name.startswith("."):
                continue
            if conv_dir.is_dir() and outside_source(conv_dir, root):
                found.append((conv_dir, None, (R_SYMLINK_OUTSIDE, SYMLINK_OUTSIDE_DETAIL)))
                continue
            if not conv_dir.is_dir():
                problem = path_problem(conv_dir, root) if conv_dir.is_symlink() else None
                if problem is not None:
                    found.append((conv_dir, None, problem))
                    continue
                if conv_dir.suffix.lower() == ".json":
                    raise SourceError(
                        f"source {spec.name!r}: {conv_dir} is not inside a conversation "
                        "directory (expected <conversation>/<YYYY-MM-DD>.json)"
                    )
                continue
            for path in sorted(conv_dir.iterdir()):
                if path.name.startswith(".") or path.suffix.lower() != ".json":
                    continue
                problem = path_problem(path, root)
                if problem is not None:
                    found.append((path, _lenient_date(path), problem))
                    continue
                found.append((path, _file_date(spec, path), None))
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise SourceError(f"source {spec.name!r}: cannot list {root}: {reason}") from None
    if not found:
        raise SourceError(
            f"source {spec.name!r}: no <conversation>/<YYYY-MM-DD>.json files under {root}"
        )
    return found


def _lenient_date(path: Path) -> dt.date | None:
    """The date a path's name gives, or None (an unreadable path has no layout to enforce)."""
    m = _DATE_FILE.fullmatch(path.name)
    try:
        return None if m is None else dt.date(int(m[1]), int(m[2]), int(m[3]))
    except ValueError:
        return None


def _file_date(spec: SourceSpec, path: Path) -> dt.date:
    m = _DATE_FILE.fullmatch(path.name)
    try:
        if m is None:
            raise ValueError
        return dt.date(int(m[1]), int(m[2]), int(m[3]))
    except ValueError:
        raise SourceError(
            f"source {spec.name!r}: {path} is not named like a date (expected YYYY-MM-DD.json)"
        ) from None


def _time_of_day(value: object) -> dt.timedelta:
    """``"HH:MM"`` / ``"HH:MM:SS[.ffffff]"`` -> offset from midnight; raises ``_Reject``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        raise _Reject(R_MISSING_TIMESTAMP, "no time")
    if not isinstance(value, str):
        raise _Reject(R_BAD_TIMESTAMP, f"time is {type(value).__name__}, expected 'HH:MM[:SS]'")
    m = _TIME.fullmatch(value)
    if m is None:
        if value.strip().lower() in _NAT_LIKE:
            raise _Reject(R_MISSING_TIMESTAMP, f"time is {value[:8]!r}")
        raise _Reject(R_BAD_TIMESTAMP, f"unparseable time {value[:24]!r}")
    hh, mm, ss, frac = m.groups()
    h, mi, s = int(hh), int(mm), int(ss) if ss else 0
    if h > 23 or mi > 59 or s > 59:
        raise _Reject(R_BAD_TIMESTAMP, f"time out of range {value[:24]!r}")
    us = int(frac.ljust(6, "0")) if frac else 0
    return dt.timedelta(hours=h, minutes=mi, seconds=s, microseconds=us)


def _header_problem(
    doc: dict, file_date: dt.date, conv: object, contact: object, tz: object
) -> tuple[str, str] | None:
    """A file-level field that makes every message of the file unusable, if any."""
    declared = doc.get("date")
    if declared is not None and declared != file_date.isoformat():
        shown = declared[:24] if isinstance(declared, str) else type(declared).__name__
        return R_BAD_TIMESTAMP, f"date field {shown!r} does not match file name date {file_date}"
    if not isinstance(conv, str) or not conv.strip():
        return R_MISSING_FIELD, "conversation_id must be a non-empty string"
    if not isinstance(contact, str) or not contact.strip():
        return R_MISSING_FIELD, "contact must be a non-empty string"
    if not isinstance(tz, str):
        return R_BAD_TIMESTAMP, "timezone must be an IANA zone name"
    try:
        zone(tz)
    except ValueError:
        return R_BAD_TIMESTAMP, f"unknown timezone {tz[:40]!r}"
    return None


def _field_problem(name: str, value: object) -> str:
    """Loggable description of a missing or unusable field (never its content)."""
    if value is None:
        return f"no {name} field"
    if isinstance(value, str):
        return f"empty {name}"
    return f"{name} is {type(value).__name__}, expected a string"


def _dump(entry: object) -> str:
    return raw_excerpt(json.dumps(entry, ensure_ascii=False))


def _read_file(spec: SourceSpec, path: Path, file_date: dt.date, data: bytes) -> Iterator[Record]:
    """Records of one date file (its bytes already read), in file order.

    Four phases, each of which can end the file: decode the bytes, parse the JSON document,
    resolve and check the file-level header, then turn each message entry into a record.
    A file with a few invalid UTF-8 bytes costs only the entries that hold them; the values
    of a duplicated ``messages`` key are quarantined, not dropped; a file with no entry at
    all is one ``no_records`` row.
    """
    src = _FileSource(spec, relative_name(path, spec.path), path.parent.name, file_date)
    text, damage = _decode(src, data)
    parsed = _parse_document(src, text, damage)
    if isinstance(parsed, QuarantineRecord):
        yield parsed
        return
    doc, messages, dups, bad = parsed
    header = _Header.resolve(doc, src)
    conv_or_dir = header.conv if isinstance(header.conv, str) and header.conv else src.conv_dir
    dropped = list(_dropped_entries(src, conv_or_dir, dups))
    yield from dropped
    if not messages and not dropped:
        raw = _excerpt(text[:MAX_RAW_EXCERPT])
        yield src.file_quarantine(R_NO_RECORDS, "the messages array is empty", raw, None)
        return
    problem = _header_problem(doc, file_date, header.conv, header.contact, header.tz)
    if problem is None and (dup := duplicate_problem(dups, (), _HEADER_KEYS)) is not None:
        problem = R_DUPLICATE_KEY, _duplicate_detail(dup)
    if problem is None and None in bad:
        problem = R_ENCODING, "invalid UTF-8 in a file-level field"
    if problem is not None:
        # Per message, not per file: the file parsed, so its messages are countable records.
        reason, detail = problem
        conv = header.conv if isinstance(header.conv, str) else src.conv_dir
        for i, entry in enumerate(messages):
            yield src.entry_quarantine(i, conv, reason, detail, entry)
        return
    midnight = dt.datetime.combine(file_date, dt.time())
    for i, entry in enumerate(messages):
        dup = duplicate_problem(dups, ("messages", i), _ENTRY_KEYS)
        if dup is not None:
            yield src.entry_quarantine(
                i, str(header.conv), R_DUPLICATE_KEY, _duplicate_detail(dup), entry
            )
        elif i in bad:
            yield src.entry_quarantine(i, str(header.conv), R_ENCODING, bad[i], entry)
        else:
            yield _entry_record(src, header, midnight, i, entry)


def _duplicate_detail(dup: DuplicateKey) -> str:
    return f"key {dup.key[:40]!r} appears twice with different values (JSON keeps the last)"


def _dropped_entries(src: _FileSource, conv: str, dups: list[DuplicateKey]) -> Iterator[Record]:
    """The entries of every earlier ``messages`` array of a duplicated key (JSON keeps the
    last array only): each is a ``duplicate_key`` record, so the counts reconcile."""
    n = 0
    for d in dups:
        if d.path != () or d.key != "messages":
            continue
        n += 1
        detail = f"in an earlier 'messages' array (number {n}) of a duplicated key"
        values = d.dropped if isinstance(d.dropped, list) else [d.dropped]
        for j, entry in enumerate(values):
            ref = f"messages#{n}[{j}]" if isinstance(d.dropped, list) else f"messages#{n}"
            yield src.quarantine_at(ref, conv, R_DUPLICATE_KEY, detail, entry)


@dataclass(frozen=True)
class _FileSource:
    """Where the records of one file come from: every record of the file carries these, so
    a quarantined entry can be found again in the file it came from."""

    spec: SourceSpec
    rel: str  # the file relative to the source path
    conv_dir: str  # the conversation directory's name: the conversation id by default
    file_date: dt.date

    def file_quarantine(
        self, reason: str, detail: str, raw: str, line: int | None
    ) -> QuarantineRecord:
        """The one record of a file that cannot be read as a document at all."""
        return QuarantineRecord(
            source=self.spec.name,
            source_file=self.rel,
            source_line=line,
            record_ref=FILE_REF,
            conversation_id=self.conv_dir,
            partition_date=self.file_date,
            reason=reason,
            detail=detail,
            raw=raw,
        )

    def entry_quarantine(
        self, i: int, conv: str, reason: str, detail: str, entry: object
    ) -> QuarantineRecord:
        """The record of ``messages[i]`` when it cannot become a Message."""
        return self.quarantine_at(f"messages[{i}]", conv, reason, detail, entry)

    def quarantine_at(
        self, ref: str, conv: str, reason: str, detail: str, entry: object
    ) -> QuarantineRecord:
        """The record of the entry at ``ref`` (a JSON path) when it cannot become a Message."""
        return QuarantineRecord(
            source=self.spec.name,
            source_file=self.rel,
            source_line=None,
            record_ref=ref,
            conversation_id=conv,
            partition_date=self.file_date,
            reason=reason,
            detail=detail,
            raw=_dump(entry),
        )


# (byte offset, line) of the first invalid UTF-8 sequence of a file, None when it has none
_Damage = tuple[int, int] | None


def _decode(src: _FileSource, data: bytes) -> tuple[str, _Damage]:
    """The file's text (a UTF-8 BOM dropped) and where its first invalid byte is.

    Invalid bytes are kept as ``surrogateescape`` characters, so a file with a few damaged
    bytes still parses and only the entries holding them are lost (``encoding_error``)."""
    try:
        return data.decode("utf-8-sig"), None
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        text = data.decode("utf-8", "surrogateescape")
        return text.removeprefix("\ufeff"), (exc.start, line)


def _parse_document(
    src: _FileSource, text: str, damage: _Damage
) -> tuple[dict, list, list[DuplicateKey], dict[int | None, str]] | QuarantineRecord:
    """(document, its messages array, duplicated keys, {entry index or None for the header:
    why it is damaged}), or the file's quarantine record when the text is not JSON, not an
    object, has no messages array, nests too deeply or holds an unreadable number (the raw
    excerpt of a JSON error starts near the error, where a repair is needed)."""
    try:
        parsed = load_json(text, scrub=damage is None)
    except JsonRejected as exc:
        return src.file_quarantine(exc.reason, exc.detail, _excerpt(text[:MAX_RAW_EXCERPT]), None)
    except json.JSONDecodeError as exc:
        if damage is not None:
            return _encoding_quarantine(src, text, damage)
        detail = f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        start = max(0, exc.pos - MAX_RAW_EXCERPT // 2)
        return src.file_quarantine(R_MALFORMED_JSON, detail, raw_excerpt(text[start:]), exc.lineno)
    doc, dups = parsed.value, parsed.duplicates
    bad: dict[int | None, str] = {}
    if damage is not None:
        if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
            return _encoding_quarantine(src, text, damage)
        detail = "invalid UTF-8 in the entry"
        bad = {i: detail for i, e in enumerate(doc["messages"]) if _has_bad_bytes(e)}
        if _has_bad_bytes({k: v for k, v in doc.items() if k != "messages"}):
            bad[None] = "invalid UTF-8 in a file-level field"
        doc = scrub_json(doc)
        dups = [
            DuplicateKey(
                tuple(scrub_json(p) for p in d.path),
                scrub_surrogates(d.key),
                scrub_json(d.dropped),
                scrub_json(d.kept),
            )
            for d in dups
        ]
    elif may_hold_surrogates(text):
        text = scrub_surrogates(text)
    if not isinstance(doc, dict):
        detail = f"top level is {type(doc).__name__}, expected an object"
        return src.file_quarantine(R_MALFORMED_JSON, detail, raw_excerpt(text), None)
    messages = doc.get("messages")
    if not isinstance(messages, list):
        if messages is None:
            reason, detail = R_MISSING_FIELD, "no messages array"
        else:
            reason, detail = R_MALFORMED_JSON, f"messages is {type(messages).__name__}, not array"
        return src.file_quarantine(reason, detail, raw_excerpt(text), None)
    return doc, messages, dups, bad


def _excerpt(text: str) -> str:
    return raw_excerpt(scrub_surrogates(text))


def _encoding_quarantine(src: _FileSource, text: str, damage: tuple[int, int]) -> QuarantineRecord:
    start, line = damage
    detail = f"invalid UTF-8 at byte {start} (line {line})"
    raw = raw_excerpt(_BAD_BYTE.sub("\ufffd", text))
    return src.file_quarantine(R_ENCODING, detail, scrub_surrogates(raw), line)


def _has_bad_bytes(value: object) -> bool:
    """True when a string (or key) anywhere in ``value`` holds an undecodable byte."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if _BAD_BYTE.search(v):
                return True
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return False


@dataclass(frozen=True)
class _Header:
    """The file-level fields after defaults: the directory name for the conversation, the
    conversation for the contact, the source's zone for the timezone. Not validated yet
    (:func:`_header_problem` does that), hence ``object``."""

    conv: object
    contact: object
    tz: object

    @classmethod
    def resolve(cls, doc: dict, src: _FileSource) -> _Header:
        conv = doc.get("conversation_id")
        conv = src.conv_dir if conv is None else conv
        contact = doc.get("contact")
        contact = conv if contact is None else contact
        tz = doc.get("timezone")
        tz = src.spec.timezone if tz is None else tz
        return cls(conv, contact, tz)


def _entry_record(
    src: _FileSource, header: _Header, midnight: dt.datetime, i: int, entry: object
) -> Record:
    """``messages[i]`` as a Message, or as a QuarantineRecord saying which field is unusable.

    Only called once :func:`_header_problem` found nothing, so the header fields are strings.
    """
    conv, contact, tz = str(header.conv), str(header.contact), str(header.tz)
    try:
        local_ts, kind, sender, body, order = _entry_fields(entry, i, midnight)
    except _Reject as rej:
        return src.entry_quarantine(i, conv, rej.reason, rej.detail, entry)
    ts = utc_or_none(local_ts, tz)
    if ts is None:
        return src.entry_quarantine(i, conv, R_VALUE_OUT_OF_RANGE, OUT_OF_RANGE_TIME, entry)
    ref = f"messages[{i}]"
    owner = src.spec.owner
    return Message(
        source=src.spec.name,
        conversation_id=conv,
        contact_id=contact,
        sender=sender,
        is_owner=owner is not None and canonical_name(sender) == canonical_name(owner),
        ts=ts,
        local_ts=local_ts,
        tz=tz,
        type=kind,
        text=body,
        source_order=order,
        source_ref=f"{src.rel}#{ref}",
        source_file=src.rel,
    )


def _entry_fields(
    entry: object, i: int, midnight: dt.datetime
) -> tuple[dt.datetime, str, str, str, int]:
    """(local time, type, sender, text, source order) of one entry; raises ``_Reject`` at the
    first unusable field, checked in this order so the reason is stable.

    A system message may have no sender; a missing ``source_order`` is the array index.
    """
    if not isinstance(entry, dict):
        raise _Reject(R_MALFORMED_JSON, f"entry is {type(entry).__name__}, expected an object")
    local_ts = midnight + _time_of_day(entry.get("time"))
    kind = entry.get("type")
    kind = "text" if kind is None else str(kind).strip().lower()
    sender = entry.get("sender")
    if sender is None and kind == "system":
        sender = ""
    elif not isinstance(sender, str) or not sender.strip():
        raise _Reject(R_MISSING_FIELD, _field_problem("sender", sender))
    body = entry.get("text")
    if not isinstance(body, str):
        raise _Reject(R_MISSING_FIELD, _field_problem("text", body))
    order = entry.get("source_order")
    if order is None:
        order = i
    elif type(order) is not int or order < 0:
        raise _Reject(R_MISSING_FIELD, "source_order must be a non-negative integer")
    elif not fits_int64(order):
        raise _Reject(R_VALUE_OUT_OF_RANGE, "source_order does not fit 64 bits")
    return local_ts, kind, sender, body, order


@register("line_json")
def read_line_json(spec: SourceSpec, dates: frozenset[dt.date] | None) -> Iterator[Record]:
    """Yield one record per message entry (or per unreadable file), files in name order.

    ``dates`` skips files by name only: file names carry the date, so skipping costs nothing and
    never changes what the kept files yield.
    """
    check_timezone(spec)
    gate = UnreadableGate()
    for path, file_date, problem in _date_files(spec):
        if dates is not None and file_date is not None and file_date not in dates:
            continue
        rel = relative_name(path, spec.path)
        conv = path.parent.name if path.parent != spec.path else scrub_surrogates(path.name)
        if problem is not None:
            yield _path_record(spec, rel, problem, conv, file_date)
            continue
        try:
            data = path.read_bytes()
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            error = SourceError(f"source {spec.name!r}: cannot read {path}: {reason}")
            yield from gate.hold(_path_record(spec, rel, read_problem(exc), conv, file_date), error)
            continue
        yield from gate.opened()
        yield from _read_file(spec, path, file_date, data)
    gate.close()


def _path_record(
    spec: SourceSpec, rel: str, problem: tuple[str, str], conv: str, day: dt.date | None
) -> QuarantineRecord:
    reason, detail = problem
    return path_quarantine(
        spec, rel, reason, detail, conversation_id=conv, partition_date=day, record_ref=FILE_REF
    )
