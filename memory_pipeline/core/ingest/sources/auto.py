"""``kind = "auto"``: one source for a folder of mixed chat exports ("drop your exports here").

Every file under the path (subfolders and zips included; attachments such as photos are not
exports) is recognised from its content, not its name: each export reader has a sniffer that
looks at the first bytes (a LINE header, WhatsApp's ``date, time - name:`` lines, Telegram's
JSON keys, ...), tried from the most specific format to the most lenient. The file is then read
by that reader's own parser, so a file reads the same under ``auto`` as under its own kind.

The detected kind is kept with every record of the file: a message's ``source_ref`` is
``<kind>:<file>:<line>`` (or ``<kind>:<id>``), a quarantine row's ``detail`` starts with
``<kind>:``. A file no reader recognises is one ``not_an_export`` quarantine row, never a
silent skip.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import tempfile
from collections.abc import Iterator
from pathlib import Path

from memory_pipeline.core.common.records import (
    R_NOT_AN_EXPORT,
    Message,
    QuarantineRecord,
    Record,
    SourceError,
)
from memory_pipeline.core.ingest.sources import (  # noqa: F401
    chatgpt,
    claude,
    discord,
    imessage,
    imessage_exporter,
    instagram,
    kakaotalk,
    line_pc,
    messenger,
    signal,
    slack,
    sms_backup,
    telegram,
    whatsapp,
)
from memory_pipeline.core.ingest.sources.base import READERS, SourceSpec, register
from memory_pipeline.core.ingest.sources.exports import (
    DETECTORS,
    ExportFile,
    Rejected,
    file_row,
    head_text,
    parse_file,
    walk,
)
from memory_pipeline.core.ingest.sources.line_txt import _HEADER as LINE_HEADER

KIND = "auto"
LINE_TXT = "line_txt"
LINE_TXT_RANK = 20  # after Telegram's JSON, before WhatsApp and LINE PC


def sniff_line_txt(f: ExportFile) -> bool:
    """LINE's mobile export: its first non-empty line is the ``[LINE] ...`` header."""
    for line in head_text(f, 2048).splitlines():
        s = line.strip().lstrip("\ufeff")
        if s:
            return LINE_HEADER.fullmatch(s) is not None
    return False


def detect(f: ExportFile) -> str | None:
    """The kind of an export file from its content, or None when no reader knows it."""
    candidates = [(d.rank, d.kind, d.sniff) for d in DETECTORS.values()]
    candidates.append((LINE_TXT_RANK, LINE_TXT, sniff_line_txt))
    for _, kind, sniff in sorted(candidates):
        try:
            if sniff(f):
                return kind
        except (ValueError, UnicodeError):
            continue
    return None


def _tried() -> str:
    return ", ".join(sorted([*DETECTORS, LINE_TXT]))


def _line_txt(
    spec: SourceSpec, f: ExportFile, dates: frozenset[dt.date] | None
) -> Iterator[Record]:
    """A mobile LINE export through the ``line_txt`` reader itself (which reads a path), with
    its file names made relative to this source again."""
    with tempfile.TemporaryDirectory() as tmp:
        path = f.path
        if path is None:  # a zip member: give the reader a file of the member's name
            path = Path(tmp) / Path(f.rel).name
            f.save(path)
        sub = dataclasses.replace(spec, kind=LINE_TXT, path=path)
        try:
            for rec in READERS[LINE_TXT](sub, dates):
                rec.source_file = f.rel
                if isinstance(rec, Message):
                    rec.source_ref = f"{f.rel}:{rec.source_line}"
                yield rec
        except SourceError as exc:
            reason = getattr(exc, "reason", R_NOT_AN_EXPORT)
            yield file_row(spec, f.rel, reason, "not readable as a LINE mobile export")


def _tagged(kind: str, records: Iterator[Record]) -> Iterator[Record]:
    """Records with the detected kind written into them (see the module docstring)."""
    prefix = f"{kind}:"
    for rec in records:
        if isinstance(rec, Message):
            if not rec.source_ref.startswith(prefix):
                rec.source_ref = prefix + rec.source_ref
        elif not rec.detail.startswith(prefix):
            rec.detail = f"{prefix} {rec.detail}"
        yield rec


def detected_kind(rec: Record) -> str | None:
    """The kind ``auto`` detected for the file of a record it produced (None otherwise)."""
    text = rec.source_ref if isinstance(rec, Message) else rec.detail
    kind = text.partition(":")[0]
    return kind if kind in DETECTORS or kind == LINE_TXT else None


def read_file(
    spec: SourceSpec, f: ExportFile, dates: frozenset[dt.date] | None
) -> Iterator[Record]:
    """One file of the folder: detected, read by its reader, tagged; or one not_an_export."""
    kind = detect(f)
    if kind is None:
        yield file_row(
            spec, f.rel, R_NOT_AN_EXPORT, f"no reader recognises this file (tried {_tried()})"
        )
        return
    if kind == LINE_TXT:
        yield from _tagged(kind, _line_txt(spec, f, dates))
        return
    try:
        yield from _tagged(kind, parse_file(spec, f, dates, DETECTORS[kind].parse))
    except Rejected as exc:  # pragma: no cover - parse_file turns these into rows
        yield file_row(spec, f.rel, exc.reason, f"{kind}: {exc.detail}")


@register(KIND)
def read_auto(spec: SourceSpec, dates: frozenset[dt.date] | None) -> Iterator[Record]:
    """Every export under the source path, each read by the reader its content calls for."""
    from memory_pipeline.core.common.timeutil import zone

    try:
        zone(spec.timezone)
    except ValueError as exc:
        raise SourceError(f"source {spec.name!r}: {exc}") from None
    for item in walk(spec):
        if isinstance(item, QuarantineRecord):
            yield item
            continue
        yield from read_file(spec, item, dates)


read_auto.depends_on = (  # type: ignore[attr-defined]
    "memory_pipeline.core.ingest.sources.exports",
    "memory_pipeline.core.ingest.sources.line_txt",
    "memory_pipeline.core.ingest.sources.line_pc",
    "memory_pipeline.core.ingest.sources.whatsapp",
    "memory_pipeline.core.ingest.sources.telegram",
    "memory_pipeline.core.ingest.sources.sms_backup",
    "memory_pipeline.core.ingest.sources.chatgpt",
    "memory_pipeline.core.ingest.sources.claude",
    "memory_pipeline.core.ingest.sources.discord",
    "memory_pipeline.core.ingest.sources.messenger",
    "memory_pipeline.core.ingest.sources.instagram",
    "memory_pipeline.core.ingest.sources.slack",
    "memory_pipeline.core.ingest.sources.kakaotalk",
    "memory_pipeline.core.ingest.sources.imessage",
    "memory_pipeline.core.ingest.sources.imessage_exporter",
    "memory_pipeline.core.ingest.sources.html_tree",
    "memory_pipeline.core.ingest.sources.signal",
    "memory_pipeline.core.ingest.sources.signal_html",
)
