"""Reader for KakaoTalk's "Export chat" (대화 내보내기): mobile ``.txt`` (Korean and English UI),
PC/Windows ``.txt`` and Mac ``.csv``.

Layouts, one message per stamped line (lines without a stamp continue the message above):

- Android KR ``2024년 3월 1일 오후 3:05, 민지 : 안녕``; iOS KR ``2024. 3. 1. 오후 3:05, 민지 :
  안녕``; events without a sender ``2024. 3. 1. 오후 3:06: 민지님이 들어왔습니다.``
- English: ``Mar 1, 2024 at 3:05 PM, Name : text``, ``March 1, 2024, 3:05 PM, Name : text``
  and the older ``3:05pm, March 1, 2024, Name : text``.
- Windows/PC: date lines ``--------------- 2024년 3월 1일 금요일 ---------------`` (or
  ``Friday, March 1, 2024``), then ``[Name] [오후 3:05] text`` / ``[Name] [3:05 PM] text``.
- Mac: CSV ``Date,User,Message`` with seconds; multi-line messages are quoted fields.

Header lines (``… 님과 카카오톡 대화``, ``저장한 날짜 : …``, ``Talk with …``, ``Date Saved : …``)
and date lines are not records. Times are the device's wall time (the source's zone).
Placeholders (``사진``, ``Photo``, ``이모티콘``, ``동영상``, ``음성메시지``, ``파일: …``) become
typed messages; a deleted message is ``system``. The exporter appears as ``회원님`` / ``you``
on mobile: those names are always the owner, besides ``owner`` / ``owner_aliases``.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import itertools
import re
from collections.abc import Iterator
from pathlib import Path

from memory_pipeline.core.common.records import (
    R_BAD_TIMESTAMP,
    R_ENCODING,
    R_NOT_AN_EXPORT,
    R_UNPARSEABLE_LINE,
    Record,
)
from memory_pipeline.core.common.timelex import MONTH_NUMBERS
from memory_pipeline.core.ingest.sources.base import SourceSpec, register
from memory_pipeline.core.ingest.sources.exports import (
    ExportFile,
    Owners,
    Rejected,
    bad_line,
    clean_name,
    clean_text,
    conversation_option,
    decode_text,
    head_text,
    line_batches,
    local_and_utc,
    message,
    quarantine,
    read_exports,
    register_detector,
    safe_id,
    wall_clock,
)

KIND = "kakaotalk"
EXPORTER_NAMES = frozenset({"회원님", "you"})

_AMPM = r"(?P<ap>오전|오후|[AaPp]\.?[Mm]\.?)"
_KR = re.compile(
    r"(?P<y>\d{4})(?:년|\.)\s?(?P<mo>\d{1,2})(?:월|\.)\s?(?P<d>\d{1,2})(?:일|\.)\s*"
    rf"{_AMPM}\s?(?P<h>\d{{1,2}}):(?P<mi>\d{{2}})(?P<rest>.*)"
)
_EN = re.compile(
    r"(?:(?P<mon>[A-Z][a-z]{2,8})\.? (?P<d>\d{1,2}), (?P<y>\d{4})(?:,| at) "
    rf"(?P<h>\d{{1,2}}):(?P<mi>\d{{2}}) ?{_AMPM}"
    r"|(?P<h2>\d{1,2}):(?P<mi2>\d{2}) ?(?P<ap2>[AaPp][Mm]), (?P<mon2>[A-Z][a-z]{2,8})\.? "
    r"(?P<d2>\d{1,2}), (?P<y2>\d{4}))(?P<rest>.*)"
)
_SENDER = re.compile(r",\s*(?P<who>.+?) : (?P<text>.*)", re.DOTALL)
_DAYLINE = re.compile(
    r"-*\s*(?:(?P<y>\d{4})년 (?P<mo>\d{1,2})월 (?P<d>\d{1,2})일(?: \S+요일)?"
    r"|(?:[A-Z][a-z]+day, )?(?P<mon>[A-Z][a-z]{2,8}) (?P<d2>\d{1,2}), (?P<y2>\d{4}))\s*-*"
)
_PC = re.compile(
    r"\[(?P<who>[^\]]+)\] \[(?:(?P<ap>오전|오후) ?)?(?P<h>\d{1,2}):(?P<mi>\d{2})"
    r"(?: ?(?P<ap2>[AaPp][Mm]))?\] (?P<text>.*)",
    re.DOTALL,
)
_HEADER = re.compile(
    r"(?:.+ 님과 카카오톡 대화|.+ \d+ 카카오톡 대화|저장한 날짜 ?: .*|Talk with .+|"
    r"KakaoTalk Chats with .+|Date Saved ?: .*|Saved Date ?: .*)"
)
_CHAT_NAME = re.compile(
    r"(?:(?P<ko>.+?) 님과 카카오톡 대화|Talk with (?P<en>.+)|KakaoTalk Chats with (?P<en2>.+))"
)
_CSV_HEAD = re.compile(r"\ufeff?Date,User,Message\s*$")
_PLACEHOLDERS = {
    "사진": "photo",
    "photo": "photo",
    "(사진)": "photo",
    "동영상": "video",
    "video": "video",
    "이모티콘": "sticker",
    "emoticon": "sticker",
    "(emoticon)": "sticker",
    "(이모티콘)": "sticker",
    "음성메시지": "audio",
    "voice message": "audio",
    "삭제된 메시지입니다.": "system",
    "this message has been deleted.": "system",
    "message deleted.": "system",
}
_PHOTOS = re.compile(r"(?:사진 \d+장|\d+ photos)", re.IGNORECASE)
_FILE = re.compile(r"(?:파일|file): .+", re.IGNORECASE)
_CALL = re.compile(r"(?:보이스톡|페이스톡|voice ?talk|face ?talk)\b.*", re.IGNORECASE)


def _hour(h: int, ap: str | None) -> int | None:
    if ap is None:
        return h if 0 <= h <= 23 else None
    if not 1 <= h <= 12:
        return None
    pm = ap.startswith("오후") or ap[:1].lower() == "p"
    return h % 12 + (12 if pm else 0)


def _stamp(line: str) -> tuple[dt.datetime | None, str] | None:
    """(local time or None when invalid, rest) of a mobile stamped line, else None."""
    m = _KR.match(line)
    if m is not None:
        y, mo, d = int(m["y"]), int(m["mo"]), int(m["d"])
        h, mi, ap = int(m["h"]), int(m["mi"]), m["ap"]
    else:
        m = _EN.match(line)
        if m is None:
            return None
        if m["mon"]:
            mon, d, y, h, mi, ap = (
                m["mon"],
                int(m["d"]),
                int(m["y"]),
                int(m["h"]),
                int(m["mi"]),
                m["ap"],
            )
        else:
            mon, d, y = m["mon2"], int(m["d2"]), int(m["y2"])
            h, mi, ap = int(m["h2"]), int(m["mi2"]), m["ap2"]
        mo = MONTH_NUMBERS.get(mon.lower().rstrip("."))
        if mo is None:
            return None
    hour = _hour(h, ap)
    try:
        when = dt.datetime(y, mo, d, hour, mi) if hour is not None else None
    except ValueError:
        when = None
    return when, m["rest"]


def _day(line: str) -> dt.date | None:
    m = _DAYLINE.fullmatch(line.strip())
    if m is None:
        return None
    try:
        if m["y"]:
            return dt.date(int(m["y"]), int(m["mo"]), int(m["d"]))
        mo = MONTH_NUMBERS.get(m["mon"].lower())
        return dt.date(int(m["y2"]), mo, int(m["d2"])) if mo else None
    except ValueError:
        return None


def classify(text: str) -> tuple[str, str]:
    """(type, text): placeholders typed (no caption in KakaoTalk exports)."""
    s = text.strip()
    kind = _PLACEHOLDERS.get(s.casefold())
    if kind is not None:
        return kind, s if kind == "system" else ""
    if _PHOTOS.fullmatch(s):
        return "photo", ""
    if _FILE.fullmatch(s):
        return "file", s.split(": ", 1)[1]
    if _CALL.fullmatch(s):
        return "call", s
    return "text", text


def sniff(f: ExportFile) -> bool:
    """A KakaoTalk header, CSV header, or a KakaoTalk stamped line among the first lines."""
    lines = [x.strip() for x in head_text(f, 4096).splitlines() if x.strip()][:8]
    if not lines:
        return False
    if _CSV_HEAD.match(lines[0]) or _CHAT_NAME.fullmatch(lines[0].lstrip("\ufeff")):
        return True
    for line in lines:
        st = _stamp(line)
        if st is not None and re.match(r"[,:]\s*\S", st[1]):
            return True
        if _day(line) is not None and line.startswith("-"):
            return True
    return False


def chat_name(f: ExportFile, lines: list[str]) -> str:
    """The chat's name: the header (``민지 님과 카카오톡 대화``), else the file name."""
    for line in lines[:3]:
        m = _CHAT_NAME.fullmatch(line.strip().lstrip("\ufeff"))
        if m:
            return clean_name(m["ko"] or m["en"] or m["en2"])
    stem = re.sub(r"^(?:KakaoTalk|Talk)_?(?:Chats?_)?[\d_.\- :]*", "", f.stem)
    stem = re.sub(r"[_\- ]*\d{4}[-.]\d{1,2}[-.]\d{1,2}[\d_.\- :]*$", "", stem).strip("_- ")
    return clean_name(stem or f.stem)


def parse(spec: SourceSpec, f: ExportFile, dates: frozenset[dt.date] | None) -> Iterator[Record]:
    """Records of one KakaoTalk export file (raises Rejected before the first); the text
    layouts are streamed line by line."""
    head = list(itertools.islice((x for b, _ in line_batches(f) for x in b), 3))
    if head and _CSV_HEAD.match(head[0]):
        yield from _parse_csv(spec, f, decode_text(f.data), dates)
        return
    if not sniff(f):
        raise Rejected(R_NOT_AN_EXPORT, "no KakaoTalk header or message line")
    name = chat_name(f, head)
    conv = conversation_option(spec) or f"kakaotalk_{safe_id(name)}"
    owners = Owners(spec)
    wall = wall_clock(spec.timezone)
    order = 0
    day: dt.date | None = None
    pending: list | None = None  # [line, local, sender, body lines, order, system]

    def flush() -> Record | None:
        nonlocal pending
        if pending is None:
            return None
        no, local, sender, body, ordr, system = pending
        pending = None
        while len(body) > 1 and not body[-1].strip():
            body.pop()
        if dates is not None and local.date() not in dates:
            return None
        joined = "\n".join(body)
        kind, txt = ("system", joined.strip()) if system else classify(joined)
        if kind == "system":
            sender = ""
        local2, utc = wall(local)
        out = message(
            spec, f, conv=conv, contact=name, sender=sender, owners=owners, local=local2,
            utc=utc, type_=kind, text=clean_text(txt), order=ordr, line=no,
        )  # fmt: skip
        out.is_owner = bool(sender) and (out.is_owner or sender.casefold() in EXPORTER_NAMES)
        return out

    no = 0
    for batch, bad_batch in line_batches(f):
        for raw in batch:
            no += 1
            line = raw.lstrip("\ufeff")
            if bad_batch and bad_line(line):
                if (rec := flush()) is not None:
                    yield rec
                yield quarantine(spec, f, R_ENCODING, "invalid UTF-8 in the line", conv=conv,
                                 day=day, line=no, raw=line)  # fmt: skip
                order += 1
                continue
            st = _stamp(line)
            pc = _PC.fullmatch(line) if st is None else None
            if st is None and pc is None:
                d = _day(line)
                if d is not None:
                    if (rec := flush()) is not None:
                        yield rec
                    day = d
                elif pending is not None:
                    pending[3].append(line)
                elif line.strip() and not _HEADER.fullmatch(line.strip()):
                    yield quarantine(spec, f, R_UNPARSEABLE_LINE, "text before the first message",
                                     conv=conv, day=day, line=no, raw=line)  # fmt: skip
                    order += 1
                continue
            if st is not None:
                when, rest = st
                sm = _SENDER.match(rest)
                if sm is None and not rest.strip():  # Android's sender-less date-time header
                    if (rec := flush()) is not None:
                        yield rec
                    if when is not None:
                        day = when.date()
                    continue
                if (rec := flush()) is not None:
                    yield rec
                if when is None:
                    yield quarantine(spec, f, R_BAD_TIMESTAMP, "date or time out of range",
                                     conv=conv, day=day, line=no, raw=line)  # fmt: skip
                    order += 1
                    continue
                if sm is not None:
                    pending = [no, when, clean_name(sm["who"]), [sm["text"]], order, False]
                else:  # an event: "…: X님이 들어왔습니다." (iOS), "…, X님이 나갔습니다." (Android)
                    pending = [no, when, "", [rest.lstrip(",:").strip()], order, True]
                order += 1
                continue
            if (rec := flush()) is not None:
                yield rec
            hour = _hour(int(pc["h"]), pc["ap"] or pc["ap2"])
            if day is None or hour is None or int(pc["mi"]) > 59:
                yield quarantine(spec, f, R_BAD_TIMESTAMP, "time without a date line before it"
                                 if day is None else "time out of range", conv=conv, day=day,
                                 line=no, raw=line)  # fmt: skip
                order += 1
                continue
            when = dt.datetime.combine(day, dt.time(hour, int(pc["mi"])))
            pending = [no, when, clean_name(pc["who"]), [pc["text"]], order, False]
            order += 1
    if (rec := flush()) is not None:
        yield rec


def _parse_csv(
    spec: SourceSpec, f: ExportFile, text: str, dates: frozenset[dt.date] | None
) -> Iterator[Record]:
    """Mac's ``Date,User,Message`` CSV: one record per row."""
    name = chat_name(f, [])
    conv = conversation_option(spec) or f"kakaotalk_{safe_id(name)}"
    owners = Owners(spec)
    reader = csv.reader(io.StringIO(text.lstrip("\ufeff"), newline=""))
    next(reader, None)
    order = 0
    while True:
        no = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error:
            yield quarantine(spec, f, R_UNPARSEABLE_LINE, "broken CSV row", conv=conv, day=None,
                             line=no)  # fmt: skip
            order += 1
            break
        if not row:
            continue
        raw = ",".join(row)
        ordr, order = order, order + 1
        if len(row) < 3 or bad_line(raw):
            reason = R_ENCODING if bad_line(raw) else R_UNPARSEABLE_LINE
            yield quarantine(spec, f, reason, "row is not Date,User,Message", conv=conv,
                             day=None, line=no, raw=raw)  # fmt: skip
            continue
        try:
            local = dt.datetime.strptime(row[0].strip(), "%Y-%m-%d %H:%M:%S")
        except ValueError:
            yield quarantine(spec, f, R_BAD_TIMESTAMP, "Date is not YYYY-MM-DD HH:MM:SS",
                             conv=conv, day=None, line=no, raw=raw)  # fmt: skip
            continue
        if dates is not None and local.date() not in dates:
            continue
        sender = clean_name(row[1])
        kind, txt = classify(",".join(row[2:]))
        if kind == "system":
            sender = ""
        local2, utc = local_and_utc(local, spec.timezone)
        out = message(
            spec, f, conv=conv, contact=name, sender=sender, owners=owners, local=local2,
            utc=utc, type_=kind, text=clean_text(txt), order=ordr, line=no,
        )  # fmt: skip
        out.is_owner = bool(sender) and (out.is_owner or sender.casefold() in EXPORTER_NAMES)
        yield out


def _accept(path: Path) -> bool:
    return path.suffix.lower() in (".txt", ".csv")


@register(KIND)
def read_kakaotalk(spec: SourceSpec, dates: frozenset[dt.date] | None) -> Iterator[Record]:
    """Every KakaoTalk export (``.txt``, ``.csv``, zips of them) under the source path."""
    yield from read_exports(spec, dates, parse, _accept)


read_kakaotalk.depends_on = ("memory_pipeline.core.ingest.sources.exports",)  # type: ignore[attr-defined]
register_detector(KIND, sniff, parse, rank=25)
