"""The reader registry and the spec every reader receives."""

from __future__ import annotations

import datetime as dt
import errno
import json
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from memory_pipeline.core.common.names import canonical_name  # noqa: F401  (readers use it)
from memory_pipeline.core.common.records import (
    R_DANGLING_LINK,
    R_NOT_A_FILE,
    R_PERMISSION,
    R_SYMLINK_LOOP,
    R_SYMLINK_OUTSIDE,
    R_TOO_DEEP,
    R_VALUE_OUT_OF_RANGE,
    QuarantineRecord,
    Record,
    SourceError,
)
from memory_pipeline.core.common.schema import MESSAGES
from memory_pipeline.core.common.timeutil import to_utc

# What a columnar reader hands to core/ingest/columnar.py: the MESSAGES columns without the
# two that ingest derives (message_id, local_date), one row per candidate message.
CANDIDATES = pa.schema([f for f in MESSAGES if f.name not in ("message_id", "local_date")])


@dataclass
class SourceTables:
    """One source's reader output in columns: candidate messages in read order (``CANDIDATES``)
    and the records the reader itself quarantined (bad lines, missing timestamps, ...)."""

    messages: pa.Table
    quarantine: list[QuarantineRecord] = field(default_factory=list)
    columnar: bool = True  # False: converted from a row reader's records (records_to_tables)


Reader = Callable[["SourceSpec", "frozenset[dt.date] | None"], Iterator[Record]]

READERS: dict[str, Reader] = {}
# Columnar readers (core/ingest/columnar.py): SourceSpec -> SourceTables, or None when the
# input needs the row-based reader of the same kind (hostile or unusual files).
TableReader = Callable[["SourceSpec"], "SourceTables | None"]
TABLE_READERS: dict[str, TableReader] = {}


@dataclass(frozen=True)
class SourceSpec:
    """One configured input: what kind it is, where it lives, and whose history it is.

    ``owner`` is the sender name (or corpus speaker id) of the person whose memory this is;
    ``timezone`` interprets local times that carry no offset.
    """

    name: str
    kind: str
    path: Path
    timezone: str
    owner: str | None = None
    options: dict[str, Any] = field(default_factory=dict)


def register(kind: str) -> Callable[[Reader], Reader]:
    """Decorator: make a reader available under ``kind`` in the config file."""

    def deco(fn: Reader) -> Reader:
        READERS[kind] = fn
        return fn

    return deco


def register_tables(kind: str) -> Callable[[TableReader], TableReader]:
    """Decorator: the columnar reader of ``kind`` (it must give what the row reader gives)."""

    def deco(fn: TableReader) -> TableReader:
        TABLE_READERS[kind] = fn
        return fn

    return deco


def read_source(spec: SourceSpec, dates: Iterable[dt.date] | None = None) -> Iterator[Record]:
    """Yield every record of one source.

    ``dates`` is a hint: a reader may skip input it can tell lies on other dates (LINE JSON
    files are named by date), but callers still filter by date themselves.
    """
    try:
        reader = READERS[spec.kind]
    except KeyError:
        known = ", ".join(sorted(READERS))
        raise SourceError(
            f"source {spec.name!r}: unknown kind {spec.kind!r} (known: {known})"
        ) from None
    if not spec.path.exists():
        raise SourceError(f"source {spec.name!r}: input path does not exist: {spec.path}")
    yield from reader(spec, frozenset(dates) if dates is not None else None)


# -- helpers every reader uses to account for hostile input ------------------------------------

_SURROGATE = re.compile("[\ud800-\udfff]")


def scrub_surrogates(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD.

    ``json.loads`` turns a ``\\ud800`` escape (valid JSON) into a lone surrogate, which no
    UTF-8 encoder accepts: left in, it crashed the message id and the Parquet write of the
    whole run. A file name with undecodable bytes carries surrogates too (surrogateescape).
    """
    return _SURROGATE.sub("\ufffd", text)


def scrub_json(value: Any) -> Any:
    """A parsed JSON value with :func:`scrub_surrogates` applied to every string in it."""
    if isinstance(value, str):
        return scrub_surrogates(value)
    if isinstance(value, list):
        return [scrub_json(v) for v in value]
    if isinstance(value, dict):
        return {scrub_surrogates(k): scrub_json(v) for k, v in value.items()}
    return value


def may_hold_surrogates(text: str | bytes) -> bool:
    """Cheap pre-test: only a ``\\uD8..``–``\\uDF..`` escape can put a lone surrogate into
    parsed JSON, so files without one skip the scrub (most files, at no cost)."""
    if isinstance(text, bytes):
        return b"\\ud" in text or b"\\uD" in text
    return "\\ud" in text or "\\uD" in text


def path_problem(path: Path, root: Path | None = None) -> tuple[str, str] | None:
    """Why a listed path cannot be read as a file (reason code, log-safe detail), or None.

    A symlink loop, a dangling link and a directory named like an export used to be skipped
    by ``is_file()`` without a trace; naming them makes every path under a source accounted.
    With ``root`` (the configured source folder), a path that leads out of it through a
    symbolic link is not read either (:func:`outside_source`).
    """
    try:
        st = path.stat()
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return R_SYMLINK_LOOP, "symbolic link loop"
        if path.is_symlink():
            return R_DANGLING_LINK, "symbolic link to a missing target"
        return read_problem(exc)
    if root is not None and outside_source(path, root):
        return R_SYMLINK_OUTSIDE, SYMLINK_OUTSIDE_DETAIL
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        return R_NOT_A_FILE, f"{kind}, expected an export file"
    return None


SYMLINK_OUTSIDE_DETAIL = "symbolic link to a path outside the source folder, not followed"


def outside_source(path: Path, root: Path) -> bool:
    """True when ``path`` (listed under the source folder ``root``) resolves, through a
    symbolic link on the way, to a place outside ``root``.

    Why: a link in an export folder is followed by every ``open``; one pointing at
    ``~/.ssh`` or another person's export would pull that file into the data (and its text
    into dossiers and a remote provider's requests) without anyone having configured it.
    Links that stay inside the folder are ordinary (a re-export linked under a second name).
    ``root`` itself may be a link (the configured path is what the user chose). Only paths
    that involve a link are resolved, so a plain folder costs one ``lstat`` per component.
    """
    try:
        rel = path.relative_to(root)
    except ValueError:
        return False  # not listed under root: the configured path itself
    probe = root
    linked = False
    for part in rel.parts:
        probe = probe / part
        if probe.is_symlink():
            linked = True
            break
    if not linked:
        return False
    try:
        real = Path(os.path.realpath(path))
        base = Path(os.path.realpath(root))
    except (OSError, ValueError):
        return True
    return real != base and base not in real.parents


def read_problem(exc: OSError) -> tuple[str, str]:
    """(reason, detail) of a file that was listed but could not be read."""
    if isinstance(exc, PermissionError):
        return R_PERMISSION, "permission denied"
    if isinstance(exc, IsADirectoryError):
        return R_NOT_A_FILE, "a directory, expected an export file"
    if exc.errno == errno.ELOOP:
        return R_SYMLINK_LOOP, "symbolic link loop"
    return R_PERMISSION, f"cannot read: {exc.strerror or type(exc).__name__}"


def path_quarantine(
    spec: SourceSpec,
    rel: str,
    reason: str,
    detail: str,
    *,
    conversation_id: str | None,
    partition_date: dt.date | None,
    record_ref: str,
) -> QuarantineRecord:
    """The one record of a path that yields no content (nothing to keep in ``raw``)."""
    return QuarantineRecord(
        source=spec.name,
        source_file=scrub_surrogates(rel),
        source_line=None,
        record_ref=record_ref,
        conversation_id=conversation_id,
        partition_date=partition_date,
        reason=reason,
        detail=detail,
    )


class UnreadableGate:
    """Holds back the quarantine records of unreadable files until one file of the source
    reads: a source where *no* file can be read is a setup problem (wrong permissions on the
    export folder), so it stays a ``SourceError`` naming the first file; one unreadable file
    beside readable ones is a quarantine row and never blocks its neighbours."""

    def __init__(self) -> None:
        self.pending: list[tuple[QuarantineRecord, SourceError]] = []
        self.any_read = False

    def hold(self, rec: QuarantineRecord, error: SourceError) -> Iterator[QuarantineRecord]:
        """Yield ``rec`` at once when a file already read, else keep it for later."""
        if self.any_read:
            yield rec
        else:
            self.pending.append((rec, error))

    def opened(self) -> Iterator[QuarantineRecord]:
        """A file read: release what was held back."""
        self.any_read = True
        pending, self.pending = self.pending, []
        for rec, _ in pending:
            yield rec

    def close(self) -> None:
        """At the end of the source: raise when every file tried was unreadable."""
        if self.pending and not self.any_read:
            raise self.pending[0][1]


# -- hostile values: numbers, times and JSON no reader can hold ----------------------------------

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def fits_int64(value: int) -> bool:
    """True when ``value`` fits the 64-bit integer columns (``source_order``, line numbers).

    Python ints have no limit, Arrow's int64 has: one ``2**70`` in a file used to abort the
    whole run with an OverflowError while the records were converted to columns.
    """
    return INT64_MIN <= value <= INT64_MAX


def utc_or_none(local: dt.datetime, tz: str) -> dt.datetime | None:
    """``to_utc(local, tz)``, or None when the instant falls outside year 1..9999.

    A day file dated 0001-01-01 east of UTC (or 9999-12-31 west of it) has a wall time whose
    UTC instant Python cannot represent; the record is ``value_out_of_range``, not a crash.
    """
    try:
        return to_utc(local, tz)
    except OverflowError:
        return None


OUT_OF_RANGE_TIME = "time outside the representable range (years 1..9999 in UTC)"

# Deeper than any chat export nests (LINE JSON: 3 levels). Checked before parsing, so the
# limit is exact and the same for every reader and for the columnar twin (see
# ``json_depth_exceeds``), instead of depending on how deep the Python stack already is.
MAX_JSON_DEPTH = 100
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")


def json_depth_exceeds(data: str | bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when the JSON text nests arrays / objects more than ``limit`` levels deep.

    Cheap for ordinary input: the number of ``[`` and ``{`` bounds the depth, so only a text
    with more openers than ``limit`` is scanned (strings removed first, brackets inside them
    do not nest). Malformed text is scanned as it stands: what matters is that the parser
    never recurses that deep.
    """
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    depth = 0
    for c in _JSON_STRING.sub(b"", raw).translate(None, _NOT_BRACKET):
        if c == 0x5B or c == 0x7B:  # [ {
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


class JsonRejected(ValueError):
    """A JSON text no reader can hold, with the quarantine reason it costs: nested deeper
    than :data:`MAX_JSON_DEPTH` (``too_deeply_nested``) or holding a number Python refuses
    to read (``value_out_of_range``: an integer of more than 4,300 digits)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class DuplicateKey:
    """A key an object of the document names twice: JSON keeps the last value, so the
    earlier one (``dropped``) would vanish unaccounted. ``path`` locates the object
    (keys and array indexes from the top, ``()`` for the top-level object); ``kept`` is the
    value the document has."""

    path: tuple[str | int, ...]
    key: str
    dropped: Any
    kept: Any


@dataclass
class ParsedJson:
    """A parsed document and every duplicated key it held (usually none)."""

    value: Any
    duplicates: list[DuplicateKey] = field(default_factory=list)


def load_json(data: str | bytes, *, scrub: bool = True) -> ParsedJson:
    """Parse one JSON document the way every reader should: bounded, accounted, encodable.

    - nested deeper than :data:`MAX_JSON_DEPTH`: ``JsonRejected(too_deeply_nested)`` (a
      RecursionError in the parser, or in any walk over the result, used to abort the run);
    - an integer too long to read: ``JsonRejected(value_out_of_range)``;
    - a duplicated key: the value keeps the last one (as JSON parsers do) and
      ``duplicates`` lists the dropped ones, so the reader can quarantine what it uses;
    - ``scrub``: lone surrogates (valid ``\\ud800`` escapes) replaced, see
      :func:`scrub_json` (dropped values too).

    Syntax errors stay ``json.JSONDecodeError`` and undecodable bytes ``UnicodeDecodeError``
    (the reader's own reasons). Ints beyond 64 bits are returned as they are: check the
    fields that go into integer columns with :func:`fits_int64`.
    """
    if json_depth_exceeds(data):
        raise JsonRejected(R_TOO_DEEP, f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    found: list[tuple[dict, str, Any]] = []

    def pairs(items: list[tuple[str, Any]]) -> dict:
        obj = dict(items)
        if len(obj) != len(items):
            seen: dict[str, Any] = {}
            for k, v in items:
                if k in seen:
                    found.append((obj, k, seen[k]))
                seen[k] = v
        return obj

    try:
        value = json.loads(data, object_pairs_hook=pairs)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise
    except RecursionError:  # a deep stack already: the limit above is the rule
        raise JsonRejected(R_TOO_DEEP, "JSON nested too deeply to parse") from None
    except ValueError:
        raise JsonRejected(R_VALUE_OUT_OF_RANGE, "a number too long to read") from None
    dups: list[DuplicateKey] = []
    if found:
        paths = _object_paths(value, {id(obj) for obj, _, _ in found})
        # an object inside a dropped value has no path in the document: the dropped value
        # as a whole is reported (and quarantined) already
        dups = [DuplicateKey(paths[id(o)], k, v, o[k]) for o, k, v in found if id(o) in paths]
    if scrub and may_hold_surrogates(data):
        value = scrub_json(value)
        dups = [
            DuplicateKey(
                tuple(scrub_json(p) for p in d.path),
                scrub_surrogates(d.key),
                scrub_json(d.dropped),
                scrub_json(d.kept),
            )
            for d in dups
        ]
    return ParsedJson(value, dups)


def _object_paths(value: Any, wanted: set[int]) -> dict[int, tuple[str | int, ...]]:
    """id -> path of the objects in ``wanted`` (an iterative walk: depth is bounded anyway)."""
    out: dict[int, tuple[str | int, ...]] = {}
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, dict):
            if id(node) in wanted:
                out[id(node)] = path
            stack.extend((v, (*path, k)) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, (*path, i)) for i, v in enumerate(node))
    return out


def duplicate_problem(
    dups: list[DuplicateKey], prefix: tuple[str | int, ...], used: frozenset[str]
) -> DuplicateKey | None:
    """The first duplicate that makes the object at ``prefix`` (or anything inside it)
    ambiguous for a reader that reads the keys ``used`` of that object: a used key of the
    object itself whose two values differ, or any duplicate inside a used value. A key the
    reader ignores may repeat (its excerpt in quarantine shows the kept value)."""
    for d in dups:
        if d.path == prefix and d.key in used:
            if d.dropped != d.kept:
                return d
            continue
        if len(d.path) > len(prefix) and d.path[: len(prefix)] == prefix:
            if d.path[len(prefix)] in used:
                return d
    return None


# -- lines ---------------------------------------------------------------------------------

_CR_LINES = re.compile("\r\n?")
_CR_LINES_B = re.compile(b"\r\n?")


def split_lines(text: str | bytes) -> list:
    """The lines of a text export without their terminators, decided once per file.

    ``\\n`` ends a line (a ``\\r`` before it is dropped: Windows), unless the file ends its
    lines with a lone ``\\r`` (classic Mac OS exports): when lone ``\\r`` outnumber ``\\n``,
    ``\\r`` and ``\\r\\n`` end lines and a stray ``\\n`` stays in the text. Without that rule a
    CR-only export was one long line and yielded nothing. U+2028, U+2029 and NEL (U+0085) are
    never line ends: no chat export writes them as such, and inside a message they are text.
    Works on ``bytes`` the same way, so a file decoded line by line splits where its decoded
    text would.
    """
    if isinstance(text, bytes):
        cr, lf, pattern = b"\r", b"\n", _CR_LINES_B
    else:
        cr, lf, pattern = "\r", "\n", _CR_LINES
    if cr_line_ends(text):
        return pattern.split(text)
    return [s[:-1] if s.endswith(cr) else s for s in text.split(lf)]


def cr_line_ends(text: str | bytes) -> bool:
    """Whether ``text`` ends its lines with a lone ``\\r`` (lone ``\\r`` outnumber ``\\n``): the
    one rule of :func:`split_lines`, also for a reader that decides from a file's head and
    then streams it."""
    if isinstance(text, bytes):
        cr, lf, crlf = b"\r", b"\n", b"\r\n"
    else:
        cr, lf, crlf = "\r", "\n", "\r\n"
    return cr in text and text.count(cr) - text.count(crlf) > text.count(lf)


class FileRejected(SourceError):
    """One input file is unusable as a whole, with the quarantine ``reason`` it gets when
    it lies in a folder beside other files (a lone configured file still fails its source,
    as any SourceError). For readers of folders: catch it per file, quarantine, go on."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.detail = message  # the log-safe text a quarantine row keeps
