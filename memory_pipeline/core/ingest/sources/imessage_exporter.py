"""Reader for the TXT and HTML output of ``imessage-exporter`` (``-f txt`` / ``-f html``).

imessage-exporter writes one file per chat, named by the chat (a contact, a number, a group
name; ``orphaned.txt`` for messages without a chat). Every message is its date in the
exporting Mac's local time (``May 17, 2022  5:29:42 PM``, the hour space-padded, maybe
followed by ``(Read by you after …)``), the sender (``Me``, a contact name, a number or an
address) and the body: text lines, attachment paths, app bubbles. TXT puts a blank line
after each message; HTML wraps it in ``div.message`` with ``span.timestamp``,
``span.sender`` and ``div.message_part`` (``span.bubble`` text, ``img``/``video``/``audio``
media). Announcements (``… renamed the conversation to …``) are one line (TXT) or a
``div.announcement`` (HTML): ``system``.

Each message is one record. Reactions (``Reactions:`` and ``Loved by …`` lines), the
``Sent with …`` effect line and ``This message responded to an earlier message.`` are not
text. Attachments give the type (by the file's extension; a missing one is ``file``), the
remaining text is the caption. Thread replies are shown twice: indented (TXT) or in
``div.replies`` (HTML) under the message they answer, and again in their own place; the
indented copy is a ``duplicate`` row when the chat also holds the reply itself (same time
and sender), else it is read. Times are naive local times (the source's ``timezone``).
One conversation per file (``imessage_<number or name>``, the chat.db reader's ids for a
chat named by its number); ``Me`` (and ``owner``/``owner_aliases``) is the owner.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from memory_pipeline.core.common.records import (
    R_BAD_TIMESTAMP,
    R_DUPLICATE,
    R_EMPTY_TEXT,
    R_ENCODING,
    R_MISSING_TIMESTAMP,
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
    decode_text,
    head_text,
    local_and_utc,
    message,
    phone_key,
    quarantine,
    read_exports,
    register_detector,
)
from memory_pipeline.core.ingest.sources.html_tree import Node, parse_html

KIND = "imessage_exporter"
ME = "Me"
_MONTHS = {m: i for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), 1)}
STAMP = (
    r"(?P<mon>Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) (?P<d>\d{1,2}), (?P<y>\d{4})"
    r"\s{1,2}(?P<h>\d{1,2}):(?P<mi>\d{2}):(?P<s>\d{2})\s?(?P<ap>AM|PM)"
)
_DATE_LINE = re.compile(STAMP + r"(?: \([^()]*\))*")
_ANNOUNCE = re.compile(STAMP + r" (?P<text>[^(\s].*)")
_STAMP_AT = re.compile(STAMP)
_REACTION = re.compile(r"(?:\S.{0,40} by .+|Sticker from .+)")
_NOTES = re.compile(
    r"This message responded to an earlier message\.|Sent with (?:Confetti|Echo|Fireworks|"
    r"Balloons|Heart|Lasers|Shooting Start?|Sparkles|Spotlight|Slam|Loud|Gentle|Invisible Ink)"
)
_EDITED = re.compile(r"Edited .{1,60}? later: (?P<text>.*)")
_LOCATION = frozenset({"Started sharing location!", "Stopped sharing location!"})
_DELETED = re.compile(r"(?:You|They|Me|\S.{0,40}) deleted a message\.")
_ATTACH = re.compile(
    r"(?:(?:~|/|[A-Za-z]:\\)[^\n]*?[/\\][Aa]ttachments[/\\][^\n]+"
    r"|(?:\.{1,2}/)?attachments/[^\n]+)\.[A-Za-z0-9]{1,5}"
    r"|Attachment missing!|Attachment does not exist!"
)
_EXT = {
    "photo": {".jpg", ".jpeg", ".png", ".gif", ".heic", ".heif", ".webp", ".tiff", ".bmp"},
    "video": {".mov", ".mp4", ".m4v", ".avi", ".webm"},
    "audio": {".caf", ".m4a", ".mp3", ".aac", ".amr", ".wav", ".opus"},
}
_SKIP = frozenset({"reactions", "expressive", "reply_context", "replies", "reply", "tapbacks",
                   "timestamp", "sender"})  # fmt: skip


def stamp(m: re.Match[str]) -> dt.datetime:
    """The naive local time of a date match (12 AM is 00, 12 PM is 12)."""
    h = int(m["h"]) % 12 + (12 if m["ap"] == "PM" else 0)
    return dt.datetime(int(m["y"]), _MONTHS[m["mon"]], int(m["d"]), h, int(m["mi"]), int(m["s"]))


def media_kind(name: str) -> str:
    """photo / video / audio / file from an attachment's file name."""
    suffix = PurePosixPath(name.strip().split("?")[0]).suffix.lower()
    return next((k for k, exts in _EXT.items() if suffix in exts), "file")


@dataclass
class Entry:
    """One message as the file shows it."""

    line: int
    local: dt.datetime | None  # None: a message element whose date could not be read
    sender: str
    text: str
    kind: str = "text"
    nested: bool = False  # a thread reply shown under the message it answers
    from_me: bool = False
    extra: list[str] = field(default_factory=list)


# -- TXT --------------------------------------------------------------------------------------


def _first_lines(text: str, n: int) -> list[str]:
    return [s for s in (x.strip("\r") for x in text.split("\n")[:200]) if s.strip()][:n]


def sniff_txt(f: ExportFile) -> bool:
    """A ``.txt`` whose first non-empty line is an imessage-exporter date line followed by a
    sender line, or an announcement."""
    if PurePosixPath(f.rel).suffix.lower() != ".txt":
        return False
    first = _first_lines(head_text(f, 4096), 2)
    if not first:
        return False
    if _DATE_LINE.fullmatch(first[0]):
        return len(first) > 1 and _DATE_LINE.fullmatch(first[1]) is None
    return _ANNOUNCE.fullmatch(first[0]) is not None


def _body(lines: list[str]) -> tuple[str, str]:
    """(type, text) of a message body's lines: tapbacks and notes out, attachments and
    stickers typed, an edited message's latest text, a deleted one ``system``."""
    kept: list[str] = []
    kinds: list[str] = []
    edits: list[str] = []
    deleted = False
    in_reactions = False
    for raw in lines:
        s = raw.strip()
        if s in ("Reactions:", "Tapbacks:"):
            in_reactions = True
            continue
        if in_reactions and _REACTION.fullmatch(s):
            continue
        in_reactions = False
        if _NOTES.fullmatch(s):
            continue
        if s == "This message was deleted from the conversation!":
            deleted = True
            continue
        if s.startswith("Sticker from ") and ": " in s:
            kinds.append("sticker")
            continue
        if _ATTACH.fullmatch(s):
            kinds.append("file" if s.startswith("Attachment") else media_kind(s))
            continue
        edit = _EDITED.fullmatch(s)
        if edit is not None:
            edits.append(edit["text"])
            continue
        first = _ANNOUNCE.fullmatch(s)  # an edited message's original, after its time
        kept.append(first["text"] if first is not None and not kept else raw)
    while kept and not kept[-1].strip():
        kept.pop()
    while kept and not kept[0].strip():
        kept.pop(0)
    text = edits[-1] if edits else "\n".join(kept)
    if kinds:
        return kinds[0], text
    if deleted and not text.strip():
        return "system", "message deleted"
    if _DELETED.fullmatch(text.strip()) or text.strip() in _LOCATION:
        return "system", text.strip()
    return "text", text


def _txt_entries(lines: list[str]) -> tuple[list[Entry], list[int]]:
    """The messages of an imessage-exporter TXT file and the line numbers (1-based) of text
    before the first message."""
    n = len(lines)

    def starts(j: int) -> bool:  # a top-level message or announcement begins at line j
        if j > 0 and lines[j - 1].strip():
            return False
        if lines[j][:1].isspace():
            return False
        if _DATE_LINE.fullmatch(lines[j]):
            return j + 1 < n and bool(lines[j + 1].strip()) and not lines[j + 1][:1].isspace()
        return _ANNOUNCE.fullmatch(lines[j]) is not None

    anchors = [j for j in range(n) if lines[j] and starts(j)]
    first = anchors[0] if anchors else n
    stray = [j + 1 for j in range(first) if lines[j].strip()]
    out: list[Entry] = []
    for k, a in enumerate(anchors):
        end = anchors[k + 1] if k + 1 < len(anchors) else n
        m = _DATE_LINE.fullmatch(lines[a])
        if m is None:  # an announcement
            ann = _ANNOUNCE.fullmatch(lines[a])
            assert ann is not None
            out.append(Entry(a + 1, stamp(ann), "", ann["text"].strip(), "system"))
            continue
        sender = lines[a + 1].strip()
        body = lines[a + 2 : end]
        nested_at = [
            i for i, s in enumerate(body)
            if s.startswith("    ") and _DATE_LINE.fullmatch(s.strip())
            and i + 1 < len(body) and body[i + 1].startswith("    ") and body[i + 1].strip()
        ]  # fmt: skip
        own = body[: nested_at[0]] if nested_at else body
        kind, text = _body(own)
        out.append(Entry(a + 1, stamp(m), sender, text, kind, from_me=sender == ME))
        for q, i in enumerate(nested_at):
            stop = nested_at[q + 1] if q + 1 < len(nested_at) else len(body)
            rm = _DATE_LINE.fullmatch(body[i].strip())
            assert rm is not None
            who = body[i + 1].strip()
            rest = [s[4:] if s.startswith("    ") else s for s in body[i + 2 : stop]]
            rkind, rtext = _body(rest)
            out.append(Entry(a + 3 + i, stamp(rm), who, rtext, rkind, True, who == ME))
    return out, stray


# -- HTML -------------------------------------------------------------------------------------


_HTML_HEAD = re.compile(r'class\s*=\s*"?timestamp"?\s*>\s*(?:<a [^>]*>\s*)?' + STAMP)


def sniff_html(f: ExportFile) -> bool:
    """An HTML page with imessage-exporter's ``div.message`` (or ``announcement``), a
    ``span.timestamp`` holding its date format and a ``span.sender``."""
    head = head_text(f, 65536)
    if "<" not in head[:1024]:
        return False
    return (
        ('class="message"' in head or "announcement" in head)
        and _HTML_HEAD.search(head) is not None
        and ('class="sender"' in head or "announcement" in head)
    )


def _html_message(node: Node, nested: bool) -> Entry:
    ts = node.find("timestamp", frozenset({"replies", "reply"}))
    m = _STAMP_AT.search(ts.text()) if ts is not None else None
    if m is None:  # kept as a row: a message element without a readable date
        return Entry(node.line, None, "", node.text()[:2000], "text", nested)
    snd = node.find("sender", frozenset({"replies", "reply"}))
    sender = snd.text() if snd is not None else ""
    from_me = any(c.has("sent") for c in node.elements()) or sender == ME
    kinds: list[str] = []
    texts: list[str] = []
    subject = node.find("subject", frozenset({"replies", "reply"}))
    if subject is not None and subject.text():
        texts.append(subject.text())
    for part in node.walk(frozenset({"replies", "reply", "reactions", "message_part"})):
        if not part.has("message_part"):
            continue
        media = [n for n in part.walk() if n.tag in ("img", "video", "audio", "source")]
        links = [n for n in part.walk() if n.tag == "a" and "download" in n.text().lower()]
        if media or links or part.find("attachment_error") is not None:
            src = next((n.attrs.get("src", "") for n in media if n.attrs.get("src")), "")
            if media and media[0].tag in ("video", "audio"):
                kinds.append(media[0].tag)
            elif media:
                kinds.append(media_kind(src) if src else "photo")
            else:
                kinds.append("file")
            rest = part.text(frozenset({"attachment_error"}))
            if rest and not links and "attachment" not in rest.lower():
                texts.append(rest)
            continue
        bubble = part.find("bubble")
        texts.append((bubble or part).text(pre=True) if bubble is not None else part.text())
    text = "\n".join(t for t in texts if t.strip())
    kind = kinds[0] if kinds else "text"
    if not kinds and _DELETED.fullmatch(text.strip()):
        kind = "system"
    return Entry(node.line, stamp(m), sender, text, kind, nested, from_me)


def _html_entries(root: Node) -> list[Entry]:
    out: list[Entry] = []
    stop = frozenset({"message", "announcement"})
    for node in root.walk(stop):
        if node.has("announcement"):
            ts = node.find("timestamp")
            m = _STAMP_AT.search(ts.text()) if ts is not None else None
            if m is not None:
                words = node.text(frozenset({"timestamp"}))
                out.append(Entry(node.line, stamp(m), "", words, "system"))
            continue
        if not node.has("message"):
            continue
        out.append(_html_message(node, nested=False))
        out.extend(
            _html_message(reply.find("message") or reply, nested=True)
            for reply in node.walk()
            if reply.has("reply")
        )
    return out


# -- both -------------------------------------------------------------------------------------


def _is_html(f: ExportFile) -> bool:
    return PurePosixPath(f.rel).suffix.lower() in (".html", ".htm") or head_text(
        f, 512
    ).lstrip().lower().startswith(("<html", "<!doctype"))


def parse(spec: SourceSpec, f: ExportFile, dates: frozenset[dt.date] | None) -> Iterator[Record]:
    """Records of one imessage-exporter chat file (raises Rejected before the first)."""
    text = decode_text(f.data)
    stem = clean_name(PurePosixPath(f.rel).stem) or "chat"
    conv = conversation_option(spec) or f"imessage_{phone_key(stem)}"
    if _is_html(f):
        entries, stray = _html_entries(parse_html(text)), []
        if not any(e.local is not None for e in entries):
            raise Rejected(R_NOT_AN_EXPORT, "HTML without imessage-exporter's messages")
    else:
        lines = [s[:-1] if s.endswith("\r") else s for s in text.split("\n")]
        entries, stray = _txt_entries(lines)
        if not entries:
            raise Rejected(R_NOT_AN_EXPORT, "no imessage-exporter date line "
                           "('May 17, 2022  5:29:42 PM' then the sender)")  # fmt: skip
        for no in stray:
            raw = lines[no - 1]
            reason = R_ENCODING if bad_line(raw) else R_UNPARSEABLE_LINE
            yield quarantine(spec, f, reason, "text before the first message", conv=conv,
                             day=None, line=no, raw=raw)  # fmt: skip
    owners = Owners(spec)
    me = spec.owner or ME
    shown = {(e.local, e.sender) for e in entries if not e.nested}
    for order, e in enumerate(entries, start=len(stray)):
        if e.local is None:
            yield quarantine(spec, f, R_MISSING_TIMESTAMP, "a message element without a date",
                             conv=conv, day=None, line=e.line, raw=e.text)  # fmt: skip
            continue
        day = e.local.date()
        if e.nested and (e.local, e.sender) in shown:
            yield quarantine(spec, f, R_DUPLICATE,
                             "a thread reply shown again under the message it answers",
                             conv=conv, day=day, line=e.line, raw=e.text)  # fmt: skip
            continue
        if dates is not None and day not in dates:
            continue
        if bad_line(e.text):
            yield quarantine(spec, f, R_ENCODING, "invalid UTF-8 in the message", conv=conv,
                             day=day, line=e.line, raw=e.text)  # fmt: skip
            continue
        if e.kind == "text" and not e.text.strip():
            yield quarantine(spec, f, R_EMPTY_TEXT, "message without text or attachment",
                             conv=conv, day=day, line=e.line, raw=e.sender)  # fmt: skip
            continue
        try:
            local, utc = local_and_utc(e.local, spec.timezone)
        except (ValueError, OverflowError):
            yield quarantine(spec, f, R_BAD_TIMESTAMP, "time out of range", conv=conv,
                             day=None, line=e.line, raw=e.text)  # fmt: skip
            continue
        sender = "" if e.kind == "system" else (me if e.from_me else clean_name(e.sender))
        if e.kind == "system" and e.sender:  # a deletion or location note: say who
            who = me if e.from_me else clean_name(e.sender)
            e.text = e.text if e.text.startswith(who) else f"{who}: {e.text}"
        out = message(
            spec, f, conv=conv, contact=stem, sender=sender, owners=owners, local=local,
            utc=utc, type_=e.kind, text=clean_text(e.text), order=order, line=e.line,
        )  # fmt: skip
        if e.from_me and e.kind != "system":
            out.is_owner = True
        yield out


def sniff(f: ExportFile) -> bool:
    """imessage-exporter's TXT or HTML output."""
    return sniff_txt(f) or sniff_html(f)


def _accept(path: Path) -> bool:
    return path.suffix.lower() in (".txt", ".html", ".htm")


@register(KIND)
def read_imessage_exporter(
    spec: SourceSpec, dates: frozenset[dt.date] | None
) -> Iterator[Record]:
    """Every imessage-exporter chat file (TXT or HTML) under the source path."""
    yield from read_exports(spec, dates, parse, _accept)


read_imessage_exporter.depends_on = (  # type: ignore[attr-defined]
    "memory_pipeline.core.ingest.sources.exports",
    "memory_pipeline.core.ingest.sources.html_tree",
)
# before KakaoTalk (25) and WhatsApp (30), whose lenient sniffers look at dates too
register_detector(KIND, sniff, parse, rank=22)
