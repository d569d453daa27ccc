"""The reader registry and the spec every reader receives."""

from __future__ import annotations

import datetime as dt
import errno
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from memory_pipeline.core.common.records import (
    R_DANGLING_LINK,
    R_NOT_A_FILE,
    R_PERMISSION,
    R_SYMLINK_LOOP,
    QuarantineRecord,
    Record,
    SourceError,
)
from memory_pipeline.core.common.schema import MESSAGES

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


def path_problem(path: Path) -> tuple[str, str] | None:
    """Why a listed path cannot be read as a file (reason code, log-safe detail), or None.

    A symlink loop, a dangling link and a directory named like an export used to be skipped
    by ``is_file()`` without a trace; naming them makes every path under a source accounted.
    """
    try:
        st = path.stat()
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return R_SYMLINK_LOOP, "symbolic link loop"
        if path.is_symlink():
            return R_DANGLING_LINK, "symbolic link to a missing target"
        return read_problem(exc)
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        return R_NOT_A_FILE, f"{kind}, expected an export file"
    return None


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
