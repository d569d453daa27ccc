"""Reader for LINE for PC (Windows) and Mac chat exports ("Save chat" / 「トーク保存」).

Unlike the mobile export (``line_txt``) these files usually have no header, separate
``HH:MM sender text`` with a space (or a tab), never quote multi-line messages (a line that
is not a date or message line continues the message above) and write times after midnight
as ``24:MM``. Date lines: ``2021.1.1 金曜日``, ``2021/01/01(金)``, ``2021.01.01 Friday``,
``Fri, 1/1/2021``.

A space-separated line does not say where the sender's name ends. The reader splits on the
longest known member: the ``members`` option, the owner and ``owner_aliases``, senders of
tab-separated lines, and names it infers from the file (the first word of a line, extended by
the words every line of that sender repeats). Each message (however many lines it spans) is
one record; a line before the first date line that is not a header is one quarantine row.
"""

from __future__ import annotations

import datetime as dt
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
from memory_pipeline.core.ingest.sources.base import SourceSpec, register
from memory_pipeline.core.ingest.sources.exports import (
    ExportFile,
    Owners,
    Rejected,
    bad_line,
    clean_name,
    clean_text,
    conversation_option,
    head_text,
    line_batches,
    message,
    quarantine,
    read_exports,
    register_detector,
    wall_clock,
)
from memory_pipeline.core.ingest.sources.line_txt import (
    conversation_id_from_stem,
    message_type,
    parse_clock,
    parse_date_line,
)

KIND = "line_pc"

_CLOCK_RE = r"(?:(?:午前|午後|上午|下午|AM|PM)\s?)?\d{1,2}:\d{2}(?:\s?(?:[AaPp]\.?[Mm]\.?))?"
_MSG = re.compile(rf"(?P<clock>{_CLOCK_RE})(?P<sep>[ \t\u3000]+)(?P<rest>.*)")
_HEADER = re.compile(
    r"(?:\[LINE\]\s*)?(?:(?P<ja>.+?)(?:との|の)トーク履歴|Chat history (?:with|in) (?P<en>.+?))"
    r"|(?:保存日時|Saved on)\s*[:：].*",
    re.IGNORECASE,
)
# Sender-less events, whole line after the time ("健太がグループに参加しました").
_PHRASES = (
    r"(?:がグループに参加しました|がグループを退会しました|が退会しました|を招待しました|"
    r"をグループに追加しました|がメッセージの送信を取り消しました|が送信を取り消しました|"
    r"がグループ名を.+に変更しました|がアナウンスしました|がノートに投稿しました|"
    r"joined the group\.?|left the group\.?|unsent a message\.?|"
    r"changed the group name to .+|invited .+|added .+ to the group\.?|"
    r"made an announcement\.?|已加入群組|已離開群組|已收回訊息|已加入该群|撤回了一条消息)"
)
_SYSTEM = re.compile(rf"(?P<who>.+?)\s?{_PHRASES}")
_SYSTEM_TAIL = re.compile(_PHRASES)
_STEM_NOISE = re.compile(
    r"^\s*(?:\[LINE\]\s*)?(?:Chat history (?:with|in)\s+)?|(?:との|の)?トーク(?:履歴)?\s*$",
    re.IGNORECASE,
)
_HALF = {"上午": "AM", "下午": "PM"}
_EXTRA_MARKERS = {
    "[照片]": "photo",
    "[貼圖]": "sticker",
    "[贴图]": "sticker",
    "[影片]": "video",
    "[视频]": "video",
    "[檔案]": "file",
    "[文件]": "file",
    "[語音訊息]": "audio",
    "[语音信息]": "audio",
    "[アルバム]": "photo",
    "[album]": "photo",
    "[gift]": "file",
    "[プレゼント]": "file",
}


def conversation_id(stem: str) -> str:
    """File stem -> the id the mobile export of the same chat gets (so the two merge)."""
    name = _STEM_NOISE.sub("", stem).strip() or stem
    return conversation_id_from_stem(name)


def clock_of(field: str) -> tuple[int, int] | None:
    """(hour, minute) of a time field, hour 24 kept (``24:53``); None when not a time."""
    f = field.strip()
    for k, v in _HALF.items():
        f = f.replace(k, v)
    m = re.fullmatch(r"(\d{1,2}):(\d{2})", f)
    if m and int(m[1]) == 24 and int(m[2]) < 60:
        return 24, int(m[2])
    t = parse_clock(f)
    return (t.hour, t.minute) if t is not None else None


def _type(sender: str, text: str) -> str:
    kind = _EXTRA_MARKERS.get(text.strip().lower()) if text.startswith("[") else None
    return kind or message_type(sender, text)


class _Members:
    """Sender names of space-separated lines, inferred while the file streams by: each first
    word, extended while every line of that sender (two or more) repeats the next word and
    still has text after it. Holds one word list per first word, not the lines."""

    def __init__(self) -> None:
        self.groups: dict[str, list] = {}  # first word -> [lines, words all lines share]

    def add(self, rest: str) -> None:
        words = rest.split(" ")
        first = words[0]
        if not first:
            return
        g = self.groups.get(first)
        if g is None:
            self.groups[first] = [1, words[1:-1]]  # a word needs text after it
            return
        g[0] += 1
        common = g[1]
        k, lim = 0, min(len(common), len(words) - 2)
        while k < lim and common[k] == words[k + 1]:
            k += 1
        del common[k:]

    def names(self) -> set[str]:
        return {
            " ".join([first, *common]) if n >= 2 else first
            for first, (n, common) in self.groups.items()
        }


def _infer_members(rests: list[str]) -> set[str]:
    """Sender names of space-separated lines (see :class:`_Members`)."""
    members = _Members()
    for rest in rests:
        members.add(rest)
    return members.names()


def _date_line(s: str) -> dt.date | None:
    """``parse_date_line(s)``, skipped for lines that cannot be one: its layouts start with
    a four-digit year or a three-letter weekday."""
    head = s[:4]
    if head.isdecimal() or (head[:3].isascii() and head[:3].isalpha()):
        return parse_date_line(s)
    return None


def _maybe_system(rest: str) -> bool:
    """False when ``rest`` holds none of the key words every ``_PHRASES`` event has."""
    return (
        "しました" in rest
        or "the group" in rest
        or "invited " in rest
        or "已" in rest
        or "撤回" in rest
        or "unsent a message" in rest
        or "made an announcement" in rest
    )


def sniff(f: ExportFile) -> bool:
    """True when the file looks like a LINE PC/Mac export: a date line, then time lines."""
    lines = [s.strip() for s in head_text(f).splitlines() if s.strip()][:60]
    for i, s in enumerate(lines):
        if parse_date_line(s) is not None and "\t" not in s:
            rest = lines[i + 1 : i + 6]
            return bool(rest) and sum(_MSG.fullmatch(x) is not None for x in rest) >= 1
    return False


def _lines(f: ExportFile) -> Iterator[tuple[str, bool]]:
    """(line, batch has undecodable bytes) of the file, streamed."""
    for batch, bad in line_batches(f, ("cp932",)):
        for raw in batch:
            yield raw, bad


def parse(spec: SourceSpec, f: ExportFile, dates: frozenset[dt.date] | None) -> Iterator[Record]:
    """Records of one PC/Mac export file, in file order (raises Rejected before the first).

    Streamed in two passes: the first finds the first date line, the header and who speaks
    (a space-separated line is split on the longest known name, known from the whole file),
    the second reads the messages."""
    known: set[str] = {clean_name(n) for n in spec.options.get("members", []) if isinstance(n, str)}
    if spec.owner:
        known.add(clean_name(spec.owner))
    inferred = _Members()
    clocks: dict[str, tuple[int, int] | None] = {}
    first_date: int | None = None
    header_name = None
    for idx, (s, _) in enumerate(_lines(f)):
        if first_date is None:
            st = s.strip()
            if "\t" not in s and _date_line(st):
                first_date = idx
            else:
                m = _HEADER.fullmatch(st)
                if m is not None and (m["ja"] or m["en"]):
                    header_name = clean_name(m["ja"] or m["en"])
                continue
        m = _MSG.fullmatch(s)
        if m is None:
            continue
        field = m["clock"]
        if (clock := clocks.get(field, 0)) == 0:
            clock = clocks[field] = clock_of(field)
        if clock is None:
            continue
        if "\t" in m["sep"]:
            who, tab, _ = m["rest"].partition("\t")
            if tab and who.strip():
                known.add(clean_name(who))
        elif not (_maybe_system(rest := m["rest"]) and _SYSTEM.fullmatch(rest)):
            inferred.add(rest)
    if first_date is None:
        raise Rejected(R_NOT_AN_EXPORT, "no LINE date line ('2021.1.1 金曜日', '2021/01/01(金)')")
    owners = Owners(spec)
    wall = wall_clock(spec.timezone)
    conv = conversation_option(spec)
    if conv is None:
        conv = conversation_id(header_name or f.stem)
    contact = header_name or _STEM_NOISE.sub("", f.stem).strip() or conv
    known |= inferred.names()
    members = sorted((k for k in known if k), key=len, reverse=True)

    cur: dt.date | None = None
    last_minute = -1  # minutes of day of the last message under the current date line
    pending: list | None = None  # [first line no, local, sender, text lines, order]
    order = 0

    def flush() -> Record | None:
        nonlocal pending
        if pending is None:
            return None
        line_no, local, sender, parts, ordr = pending
        pending = None
        if dates is not None and local.date() not in dates:
            return None
        body = clean_text("\n".join(parts).rstrip("\n"))
        local2, utc = wall(local)
        return message(
            spec, f, conv=conv, contact=contact, sender=sender, owners=owners, local=local2,
            utc=utc, type_=_type(sender, body), text=body, order=ordr, line=line_no,
        )  # fmt: skip

    blanks = 0
    no = 0
    for raw, bad_batch in _lines(f):
        no += 1
        s = raw.strip()
        if no <= first_date:
            if s and not _HEADER.fullmatch(s):
                yield quarantine(
                    spec, f, R_UNPARSEABLE_LINE, "not a header or date line before the first date",
                    conv=conv, day=None, line=no, raw=raw,
                )  # fmt: skip
                order += 1
            continue
        if not s:
            blanks += 1
            continue
        if bad_batch and bad_line(raw):
            if (rec := flush()) is not None:
                yield rec
            if dates is None or cur is None or cur in dates:
                yield quarantine(
                    spec, f, R_ENCODING, "invalid UTF-8 in the line", conv=conv, day=cur,
                    line=no, raw=raw,
                )  # fmt: skip
            order += 1
            blanks = 0
            continue
        if "\t" not in s and (day := _date_line(s)) is not None:
            if (rec := flush()) is not None:
                yield rec
            cur, last_minute, blanks = day, -1, 0
            continue
        m = _MSG.fullmatch(raw.lstrip("\ufeff"))
        if m is None:
            clock = None
        elif (clock := clocks.get(field := m["clock"], 0)) == 0:
            clock = clocks[field] = clock_of(field)
        if m is not None and clock is None and pending is None:
            yield quarantine(
                spec, f, R_BAD_TIMESTAMP, f"time out of range {m['clock'][:12]!r}",
                conv=conv, day=cur, line=no, raw=raw,
            )  # fmt: skip
            order += 1
            continue
        if clock is None:
            if pending is not None:  # an unquoted continuation line
                if blanks:
                    pending[3].extend([""] * blanks)
                pending[3].append(raw)
            else:
                yield quarantine(
                    spec, f, R_UNPARSEABLE_LINE, "not a date, message or continuation line",
                    conv=conv, day=cur, line=no, raw=raw,
                )  # fmt: skip
                order += 1
            blanks = 0
            continue
        if (rec := flush()) is not None:
            yield rec
        blanks = 0
        hour, minute = clock
        day = cur
        if hour == 24:  # LINE's clock after midnight: 24:53 is 00:53
            hour = 0
            if last_minute > minute:  # after the day's later messages: the next morning
                day = cur + dt.timedelta(days=1)
        last_minute = max(last_minute, hour * 60 + minute) if day == cur else last_minute
        sender, body = _split(m["sep"], m["rest"], members)
        local = dt.datetime.combine(day, dt.time(hour, minute))
        pending = [no, local, sender, [body], order]
        order += 1
    if (rec := flush()) is not None:
        yield rec


def _split(sep: str, rest: str, members: list[str]) -> tuple[str, str]:
    """(sender, text) of the part after the time."""
    if "\t" in sep:
        sender, tab, text = rest.partition("\t")
        if not tab:
            return "", rest
        return clean_name(sender), text
    for name in members:
        if rest.startswith(name) and (len(rest) == len(name) or rest[len(name)] in " \u3000"):
            tail = rest[len(name) + 1 :]
            if _maybe_system(tail) and _SYSTEM_TAIL.fullmatch(tail):
                return "", rest
            return name, tail
    if _maybe_system(rest) and _SYSTEM.fullmatch(rest):
        return "", rest
    sender, _, text = rest.partition(" ")
    return clean_name(sender), text


def _accept(path: Path) -> bool:
    return path.suffix.lower() in (".txt", ".csv") or path.suffix == ""


@register(KIND)
def read_line_pc(spec: SourceSpec, dates: frozenset[dt.date] | None) -> Iterator[Record]:
    """Every LINE PC/Mac export under the source path (a file, a folder, zips)."""
    yield from read_exports(spec, dates, parse, _accept)


read_line_pc.depends_on = ("memory_pipeline.core.ingest.sources.exports",)  # type: ignore[attr-defined]
register_detector(KIND, sniff, parse, rank=40)
