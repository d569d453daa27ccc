"""Reader for LINE's own text export ("Save chat history" / 「トーク履歴を送信」).

The export is a header, then per day a date line followed by ``time<TAB>sender<TAB>text`` lines;
multi-line messages are wrapped in double quotes with ``""`` for a literal quote. Both UI
languages and their common variants are accepted (see ``docs/source_formats_line.md``). Each
message (however many lines it spans) and each line that fits no pattern becomes exactly one
``Message`` or one ``QuarantineRecord``.
"""

from __future__ import annotations

import codecs
import datetime as dt
import re
import unicodedata
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

from memory_pipeline.core.common.records import (
    R_BAD_TIMESTAMP,
    R_ENCODING,
    R_NO_RECORDS,
    R_NOT_AN_EXPORT,
    R_UNPARSEABLE_LINE,
    R_VALUE_OUT_OF_RANGE,
    Message,
    QuarantineRecord,
    Record,
    SourceError,
)
from memory_pipeline.core.common.timelex import WEEKDAY_NUMBERS
from memory_pipeline.core.ingest.sources.base import (
    OUT_OF_RANGE_TIME,
    SourceSpec,
    UnreadableGate,
    canonical_name,
    path_problem,
    path_quarantine,
    read_problem,
    register,
    split_lines,
    utc_or_none,
)
from memory_pipeline.core.ingest.sources.line_json import (
    check_timezone,
    raw_excerpt,
    read_bytes,
    relative_name,
)

# record_ref of a file-level quarantine row (the whole file, not one of its lines)
FILE_REF = "file"


class _Rejected(SourceError):
    """A whole export file is unusable, with the quarantine reason it gets when it lies in a
    folder of exports (a lone configured file still fails the source, as any SourceError)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


# "[LINE] 健太とのトーク履歴", "[LINE] 家族のトーク履歴", "[LINE] Chat history with Maria",
# "[LINE] Chat history in Family"; the "[LINE]" prefix is missing in some app versions.
_HEADER = re.compile(
    r"(?:\[LINE\]\s*)?(?:(?P<ja>.+?)(?:との|の)トーク履歴|Chat history (?:with|in) (?P<en>.+?))\s*"
)
_SAVED = re.compile(r"(?:保存日時|Saved on)\s*[:：].*", re.IGNORECASE)
# "2024/03/05(火)", "2024/3/5（Tue）", "2024.03.05 Tuesday", "2024/03/05 火曜日", "2024-03-05".
_DATE_YMD = re.compile(
    r"(\d{4})[/.\-](\d{1,2})[/.\-](\d{1,2})\s*(?:[(（]\s*[^()（）\s]+\s*[)）]|\s[^\s\d]+)?"
)
# "Tue, 3/5/2024" (month first, as the English UI writes it; the weekday settles D/M/Y).
_DATE_WMDY = re.compile(r"([A-Za-z]{3})[A-Za-z]*\.?,?\s+(\d{1,2})/(\d{1,2})/(\d{4})")
# "19:02", "7:05 PM", "7:05PM", "午後9:05", "午前 9:05", "PM 9:05".
_CLOCK = re.compile(
    r"\s*(?:(午前|午後|AM|PM)\s?)?(\d{1,2}):(\d{2})(?:\s?(AM|PM|A\.M\.|P\.M\.))?\s*",
    re.IGNORECASE,
)
_MARKERS = {
    "[スタンプ]": "sticker",
    "[sticker]": "sticker",
    "[写真]": "photo",
    "[photo]": "photo",
    "[動画]": "video",
    "[video]": "video",
    "[ファイル]": "file",
    "[file]": "file",
    "[ボイスメッセージ]": "audio",
    "[voice message]": "audio",
    "[位置情報]": "location",
    "[location]": "location",
    "[連絡先]": "contact",
    "[contact]": "contact",
}
_MAX_MARKER = max(map(len, _MARKERS))
_CALL = re.compile(
    r"(?:☎|📞|通話時間|不在着信|通話をキャンセルしました|Call time|Missed call|Cancell?ed call)",
    re.IGNORECASE,
)
_UNSAFE_ID = re.compile(r"[^\w\-]+")
_LINE_PREFIX = re.compile(r"^\s*\[LINE\]\s*", re.IGNORECASE)


@lru_cache(maxsize=4096)
def parse_clock(field: str) -> dt.time | None:
    """Export time field -> wall time (seconds 0), or None; cached: a day has 1,440 values."""
    m = _CLOCK.fullmatch(field)
    if m is None:
        return None
    pre, hh, mm, post = m.groups()
    h, mi = int(hh), int(mm)
    if mi > 59 or (pre and post):
        return None
    half = pre or post
    if half:
        if h > 12:
            return None
        h = h % 12 + (12 if half.upper() in ("PM", "P.M.", "午後") else 0)
    elif h > 23:
        return None
    return dt.time(h, mi)


def parse_date_line(line: str) -> dt.date | None:
    """A day separator line -> its date, or None when the line is not one."""
    m = _DATE_YMD.fullmatch(line)
    try:
        if m is not None:
            return dt.date(int(m[1]), int(m[2]), int(m[3]))
        m = _DATE_WMDY.fullmatch(line)
        if m is None:
            return None
        weekday = WEEKDAY_NUMBERS.get(m[1].lower())
        a, b, y = int(m[2]), int(m[3]), int(m[4])
    except ValueError:
        return None
    candidates = []
    for month, day in ((a, b), (b, a)):
        try:
            candidates.append(dt.date(y, month, day))
        except ValueError:
            continue
    for d in candidates:
        if d.weekday() == weekday:
            return d
    return candidates[0] if candidates else None


def message_type(sender: str, text: str) -> str:
    """Canonical type from the export's conventions (markers, ☎ lines, sender-less lines)."""
    if not sender:
        return "system"
    if text.startswith("[") and len(text) <= _MAX_MARKER + 2:
        kind = _MARKERS.get(text.strip().lower())
        if kind is not None:
            return kind
    if _CALL.match(text):
        return "call"
    return "text"


def conversation_id_from_stem(stem: str) -> str:
    """File stem -> a safe id: NFKC, no "[LINE]" prefix, runs of other characters -> "_"."""
    s = _LINE_PREFIX.sub("", unicodedata.normalize("NFKC", stem))
    return _UNSAFE_ID.sub("_", s).strip("_").lower() or "conversation"


def conversation_id(chat: str | None, path: Path) -> str:
    """The export's chat name made safe, else (no header) the file stem.

    The header names the chat, the file name is whatever the user saved it as: two exports of
    one chat made months apart ("Maria.txt", "Maria (2).txt") must be one conversation, so their
    messages merge (README, "Re-exports"). "Chat history with Maria" and
    「Mariaとのトーク履歴」 give the same id.
    """
    return conversation_id_from_stem(chat if chat else path.stem)


def _odd_trailing_quotes(s: str) -> bool:
    """A line ending in an odd run of quotes closes an open quoted message (``""`` is escaped)."""
    return (len(s) - len(s.rstrip('"'))) % 2 == 1


def _decode_lines(data: bytes, spec: SourceSpec, path: Path) -> tuple[list[str], dict[int, str]]:
    """Lines without terminators, plus {line index: detail} for lines that are not UTF-8.

    The whole file is decoded at once; only a file with bad bytes pays for per-line decoding,
    so one bad byte costs one line, not the file. Line ends are found by
    :func:`~memory_pipeline.core.ingest.sources.base.split_lines` (``\\n``, ``\\r\\n``, or a
    classic Mac export's lone ``\\r``), the same way on every path.
    """
    bad: dict[int, str] = {}
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return split_lines(data.decode("utf-16")), bad
        except UnicodeDecodeError as exc:
            raise _Rejected(
                R_ENCODING,
                f"source {spec.name!r}: {path} starts with a UTF-16 BOM but is not valid "
                f"UTF-16 (byte {exc.start})",
            ) from None
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    try:
        return split_lines(data.decode("utf-8")), bad
    except UnicodeDecodeError:
        pass
    legacy = _legacy_decode(data)
    if legacy is not None:
        return split_lines(legacy), bad
    lines = []
    for i, raw in enumerate(split_lines(data)):
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            bad[i] = f"invalid UTF-8 at byte {exc.start} of the line"
            lines.append(raw.decode("utf-8", "replace"))
    return lines, bad


# Share of a file's non-ASCII bytes that must be invalid UTF-8 before cp932 is considered,
# and share of the cp932 reading's non-ASCII characters that must be Japanese script.
_LEGACY_MIN_INVALID = 0.5
_LEGACY_MIN_JAPANESE = 0.9
_LEGACY_MIN_CHARS = 4
_NON_ASCII = re.compile("[^\x00-\x7f]")
_JAPANESE = re.compile(
    "[\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff01-\uff9f\u2010-\u203b"
    "\u2160-\u2169\u2190-\u21ff\u2200-\u22ff\u2460-\u24ff\u2500-\u257f\u25a0-\u266f"
    "\u00a7\u00a8\u00b0\u00b1\u00b4\u00b6\u00d7\u00f7\u0391-\u03c9\u0401-\u0451]"
)


def _legacy_decode(data: bytes) -> str | None:
    """The text of a Shift-JIS (cp932) export, LINE's legacy Windows encoding, or None.

    Only tried once UTF-8 failed, and only taken when UTF-8 is clearly the wrong reading and
    cp932 a clean one: most non-ASCII bytes are invalid UTF-8 (a UTF-8 export with a few
    damaged bytes has almost all of them valid), cp932 decodes the whole file, and what it
    decodes to is Japanese script (kana, kanji, full-width forms), at least a few characters
    of it. Otherwise the file is read as UTF-8 and only its damaged lines are quarantined
    (``encoding_error``): a wrong guess must never turn a whole export into mojibake.
    """
    utf8 = data.decode("utf-8", "surrogateescape")
    invalid = sum(1 for c in utf8 if "\udc80" <= c <= "\udcff")
    non_ascii = len(data) - len(data.translate(None, bytes(range(0x80, 0x100))))
    if invalid < _LEGACY_MIN_INVALID * non_ascii:
        return None
    try:
        text = data.decode("cp932")
    except UnicodeDecodeError:
        return None
    wide = _NON_ASCII.findall(text)
    japanese = sum(1 for c in wide if _JAPANESE.match(c))
    if japanese < _LEGACY_MIN_CHARS or japanese < _LEGACY_MIN_JAPANESE * len(wide):
        return None
    return text


def _find_header(lines: list[str], spec: SourceSpec, path: Path) -> str | None:
    """Contact name from the header; raises when neither a header nor a date line exists.

    A real export starts with its header, so this usually looks at one line.
    """
    for line in lines:
        s = line.strip()
        if not s:
            continue
        m = _HEADER.fullmatch(s)
        if m is not None:
            return (m["ja"] or m["en"]).strip()
        if "\t" not in s and parse_date_line(s) is not None:
            return None
    raise _Rejected(
        R_NOT_AN_EXPORT,
        f"source {spec.name!r}: {path} is not a LINE chat export "
        "(no '[LINE] ...' header and no date line)",
    )


def _read_export(
    spec: SourceSpec, path: Path, tz: str, dates: frozenset[dt.date] | None, data: bytes
) -> Iterator[Record]:
    """Records of one export file (its bytes already read), in file order.

    Decoding and the header are checked before the first record, so a ``_Rejected`` file
    raises on the first ``next()`` having yielded nothing.
    """
    rel = relative_name(path, spec.path)
    lines, bad = _decode_lines(data, spec, path)
    chat = _find_header(lines, spec, path)
    conv = conversation_id(chat, path)
    contact = chat or conv
    owner = canonical_name(spec.owner) if spec.owner is not None else None
    last_close = -1  # index of the last line that could close a quote; computed on first use
    cur_date: dt.date | None = None
    order = 0
    n = len(lines)
    idx = 0

    def quarantine(reason: str, detail: str, first: int, last: int) -> QuarantineRecord:
        return QuarantineRecord(
            source=spec.name,
            source_file=rel,
            source_line=first + 1,
            record_ref=f"line {first + 1}",
            conversation_id=conv,
            partition_date=cur_date,
            reason=reason,
            detail=detail,
            raw=raw_excerpt("\n".join(lines[first : last + 1])),
        )

    while idx < n:
        line = lines[idx]
        first = idx
        clock = None
        if "\t" in line and cur_date is not None:
            time_field, _, rest = line.partition("\t")
            clock = parse_clock(time_field)
        if clock is not None:
            sender, sep, text = rest.partition("\t")
            if not sep:  # only two fields: "time<TAB>event"
                sender, text = "", sender
            sender = sender.strip()
            if text.startswith('"'):
                if last_close < 0:
                    last_close = next(
                        (j for j in range(n - 1, -1, -1) if _odd_trailing_quotes(lines[j])), 0
                    )
                text, idx = _unquote(text, lines, idx, last_close)
            keep = dates is None or cur_date in dates
            bad_lines = [j for j in range(first, idx + 1) if j in bad] if bad else ()
            if bad_lines:
                if keep:
                    detail = f"line {bad_lines[0] + 1}: {bad[bad_lines[0]]}"
                    yield quarantine(R_ENCODING, detail, first, idx)
            elif keep:
                local_ts = dt.datetime.combine(cur_date, clock)
                ts = utc_or_none(local_ts, tz)
                if ts is None:
                    yield quarantine(R_VALUE_OUT_OF_RANGE, OUT_OF_RANGE_TIME, first, idx)
                else:
                    yield Message(
                        source=spec.name,
                        conversation_id=conv,
                        contact_id=contact,
                        sender=sender,
                        is_owner=owner is not None and canonical_name(sender) == owner,
                        ts=ts,
                        local_ts=local_ts,
                        tz=tz,
                        type=message_type(sender, text),
                        text=text,
                        source_order=order,
                        source_ref=f"{rel}:{first + 1}",
                        source_file=rel,
                        source_line=first + 1,
                    )
            order += 1
            idx += 1
            continue

        idx += 1
        s = line.strip()
        if not s:
            continue
        if first in bad:
            reason, detail = R_ENCODING, bad[first]
        elif "\t" not in s and (day := parse_date_line(s)) is not None:
            cur_date = day
            continue
        elif cur_date is None and (_HEADER.fullmatch(s) or _SAVED.fullmatch(s)):
            continue
        elif cur_date is None:
            reason, detail = R_UNPARSEABLE_LINE, "not a header or date line before the first date"
        elif "\t" in line and _CLOCK.fullmatch(field := line.partition("\t")[0]):
            # shaped like a time but not one (25:61, 7:99 PM): say so, not "fits no pattern"
            reason, detail = R_BAD_TIMESTAMP, f"time out of range {field.strip()[:12]!r}"
        else:
            reason, detail = R_UNPARSEABLE_LINE, "not a date line or time<TAB>sender<TAB>text"
        if cur_date is None or dates is None or cur_date in dates:
            yield quarantine(reason, detail, first, first)
        order += 1
    if order == 0:  # a header and date lines, or nothing: never a silently empty file
        yield QuarantineRecord(
            source=spec.name,
            source_file=rel,
            source_line=None,
            record_ref=FILE_REF,
            conversation_id=conv,
            partition_date=None,
            reason=R_NO_RECORDS,
            detail=f"no message line in {n} lines",
            raw=raw_excerpt("\n".join(lines[:20])),
        )


def _unquote(text: str, lines: list[str], idx: int, last_close: int) -> tuple[str, int]:
    """Resolve a message field that starts with ``"``: returns (text, index of its last line).

    A field is a quoted one only if its quotes are well formed; otherwise (``"Hi" she said``, or
    no closing line anywhere below) the line is taken literally, so a stray quote can never
    swallow the rest of the file.
    """
    body = text[1:]
    if _odd_trailing_quotes(body):  # opens and closes on this line
        inner = body[:-1]
        if '"' in inner.replace('""', ""):
            return text, idx
        return inner.replace('""', '"'), idx
    if '"' in body.replace('""', "") or idx >= last_close:
        return text, idx
    parts = [body.replace('""', '"')]
    j = idx + 1
    while not _odd_trailing_quotes(lines[j]):
        parts.append(lines[j].replace('""', '"'))
        j += 1
    parts.append(lines[j][:-1].replace('""', '"'))
    return "\n".join(parts), j


def _export_files(spec: SourceSpec) -> list[Path]:
    """The configured file, or every ``*.txt`` directly inside the configured directory
    (regular or not: a dangling link or a directory named ``x.txt`` is listed so the reader
    accounts for it)."""
    root = spec.path
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise SourceError(f"source {spec.name!r}: input path does not exist: {root}")
    try:
        files = sorted(
            p for p in root.iterdir() if p.suffix.lower() == ".txt" and not p.name.startswith(".")
        )
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise SourceError(f"source {spec.name!r}: cannot list {root}: {reason}") from None
    if not files:
        raise SourceError(f"source {spec.name!r}: no *.txt LINE exports in {root}")
    return files


@register("line_txt")
def read_line_txt(spec: SourceSpec, dates: frozenset[dt.date] | None) -> Iterator[Record]:
    """Yield one record per message or unparseable line, files in name order.

    The text must be parsed sequentially anyway (quotes span lines), so ``dates`` only skips
    building records of other dates; positions (``source_order``) are counted regardless.
    """
    tz = check_timezone(spec)
    if spec.path.is_file():  # one configured file: any problem is the source's
        yield from _read_export(spec, spec.path, tz, dates, read_bytes(spec.path, spec.name))
        return
    gate = UnreadableGate()
    for path in _export_files(spec):
        rel = relative_name(path, spec.path)
        conv = conversation_id_from_stem(path.stem)
        problem = path_problem(path, spec.path)
        if problem is not None:
            yield _file_record(spec, rel, conv, *problem)
            continue
        try:
            data = path.read_bytes()
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            error = SourceError(f"source {spec.name!r}: cannot read {path}: {reason}")
            yield from gate.hold(_file_record(spec, rel, conv, *read_problem(exc)), error)
            continue
        yield from gate.opened()
        records = _read_export(spec, path, tz, dates, data)
        try:
            first = next(records)
        except StopIteration:
            continue
        except _Rejected as exc:  # one bad file never blocks its neighbours
            yield _file_record(spec, rel, conv, exc.reason, _rejection_detail(exc.reason))
            continue
        yield first
        yield from records
    gate.close()


_REJECTION_DETAILS = {
    R_NOT_AN_EXPORT: "no '[LINE] ...' header and no date line",
    R_ENCODING: "starts with a UTF-16 BOM but is not valid UTF-16",
}


def _rejection_detail(reason: str) -> str:
    """Log-safe detail of a rejected file (the SourceError text names the absolute path)."""
    return _REJECTION_DETAILS.get(reason, reason)


def _file_record(spec: SourceSpec, rel: str, conv: str, reason: str, detail: str) -> Record:
    return path_quarantine(
        spec, rel, reason, detail, conversation_id=conv, partition_date=None, record_ref=FILE_REF
    )
