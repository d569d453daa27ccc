"""Reader for "SMS Backup & Restore" XML (Android SMS, MMS and Google Messages RCS; call logs).

``<smses count=…>`` holds ``<sms>`` (one text: ``address``, ``date`` in epoch ms, ``type`` 1
received / 2 sent / 4-6 outbox, failed, queued / 3 draft, ``body``, ``contact_name``) and
``<mms>`` (``msg_box`` 1 received / 2 sent, ``<parts>`` of SMIL layout, text and media,
``<addrs>`` with type 137 = from, 151 = to, 130 = cc); ``<calls>`` holds ``<call>`` rows of a
call-log backup. Each ``sms``/``mms``/``call`` element is one record. ``readable_date`` is a
display string in the phone's locale and zone and is ignored: ``date`` is the instant (ms;
a value small enough to be seconds is read as seconds).

The file is parsed as a stream (expat, 64 KiB at a time: base64 media make backups huge) and
entity declarations are refused before any is expanded, so an XML external entity or a
"billion laughs" file is one quarantine row and no file or URL is ever read. Surrogate-pair
character references (``&#55357;&#56838;``, written by old Signal/Silence plaintext backups)
are joined into one character; bytes that are not UTF-8 spoil only the record they are in.
A truncated backup (no ``</smses>``) keeps every record before the break; the broken tail is
one row.

Conversations: one per correspondent (the number's last 10 digits, so ``+81 90…`` and
``090…`` meet) or per group (the sorted members of a multi-address MMS or the RCS group
address). The sender of a received message is its contact name (``(Unknown)``/``null``: the
number), of a sent one the source's ``owner``.
"""

from __future__ import annotations

import codecs
import datetime as dt
import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from xml.parsers import expat

from memory_pipeline.core.common.records import (
    R_BAD_TIMESTAMP,
    R_DUPLICATE,
    R_ENCODING,
    R_MISSING_TIMESTAMP,
    R_NOT_AN_EXPORT,
    R_UNKNOWN_TYPE,
    R_UNPARSEABLE_LINE,
    Record,
)
from memory_pipeline.core.ingest.sources.base import SourceSpec, register
from memory_pipeline.core.ingest.sources.exports import (
    BAD_BYTE,
    ExportFile,
    Owners,
    Rejected,
    clean_name,
    clean_text,
    conversation_option,
    epoch_ms,
    from_epoch_ms,
    head_text,
    message,
    phone_key,
    quarantine,
    read_exports,
    register_detector,
)

KIND = "sms_backup"
CHUNK = 1 << 16
OWNER_FALLBACK = "Me"

_ROOT = re.compile(
    r"^\s*(?:<\?xml[^>]*\?>\s*|<\?xml-stylesheet[^>]*\?>\s*|<!--.*?-->\s*|<!DOCTYPE[^>\[]*"
    r"(?:\[.*?\])?\s*>\s*)*<(?:smses|calls)[\s>/]",
    re.DOTALL,
)
# A pair of surrogate character references, decimal or hex (one emoji), or a lone one.
_SURR_PAIR = re.compile(
    rb"&#(?:(5[56]\d{3})|x([dD][89abAB][0-9a-fA-F]{2}));&#(?:(5[67]\d{3})|x([dD][c-fC-F][0-9a-fA-F]{2}));"
)
_SURR_ONE = re.compile(rb"&#(?:5[5-7]\d{3}|x[dD][89a-fA-F][0-9a-fA-F]{2});")
_UNKNOWN_NAMES = {"", "(unknown)", "null", "unknown"}
_SENT_SMS = {"2", "4", "5", "6"}  # sent, outbox, failed, queued: written by the owner
_SENT_MMS = {"2", "4"}
_CALL_TYPES = {
    "1": "incoming call",
    "2": "outgoing call",
    "3": "missed call",
    "4": "voicemail",
    "5": "rejected call",
    "6": "blocked call",
}
_MEDIA = (("image/", "photo"), ("video/", "video"), ("audio/", "audio"),
          ("text/x-vcard", "contact"), ("text/vcard", "contact"))  # fmt: skip


class _Forbidden(Exception):
    """An entity declaration: the file is refused before anything is expanded."""


def _surrogates(m: re.Match[bytes]) -> bytes:
    hi = int(m[1]) if m[1] else int(m[2], 16)
    lo = int(m[3]) if m[3] else int(m[4], 16)
    if not (0xD800 <= hi <= 0xDBFF and 0xDC00 <= lo <= 0xDFFF):
        return b"&#65533;&#65533;"
    return b"&#%d;" % (0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))


class _Bytes:
    """The file in chunks for expat: surrogate references joined, non-UTF-8 bytes marked.

    A chunk ends before a ``&`` in its last 40 bytes (an entity pair is never split) and
    before an incomplete UTF-8 sequence; the rest is carried into the next chunk. The file is
    read as it is parsed (one chunk ahead, to know which chunk is the last).
    """

    def __init__(self, f: ExportFile) -> None:
        self.f = f
        self.carry = b""
        self.utf8 = not f.head(2).startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE))

    def chunks(self) -> Iterator[bytes]:
        with self.f.open() as fh:
            ahead = fh.read(CHUNK)
            while ahead:
                buf, ahead = self.carry + ahead, fh.read(CHUNK)
                if not self.utf8:
                    yield buf
                    continue
                last = not ahead
                cut = len(buf)
                if not last:
                    amp = buf.find(b"&", max(0, cut - 40))
                    if amp >= 0:
                        cut = amp
                buf, self.carry = buf[:cut], buf[cut:]
                yield self._fixed(buf, last)
        if self.carry:
            yield self._fixed(self.carry, True)
            self.carry = b""

    def _fixed(self, buf: bytes, last: bool) -> bytes:
        if b"&#5" in buf or b"&#x" in buf or b"&#X" in buf:
            buf = _SURR_PAIR.sub(_surrogates, buf)
            buf = _SURR_ONE.sub(b"&#65533;", buf)
        try:
            buf.decode("utf-8")
            return buf
        except UnicodeDecodeError as exc:
            if not last and exc.reason == "unexpected end of data" and exc.start >= len(buf) - 3:
                self.carry = buf[exc.start :] + self.carry
                buf = buf[: exc.start]
        return buf.decode("utf-8", "memory_pipeline_bad_byte").encode("utf-8")


def sniff(f: ExportFile) -> bool:
    """True when the file is an XML document whose root is ``<smses>`` or ``<calls>``."""
    return _ROOT.match(head_text(f, 4096)) is not None


class _Handler:
    """expat callbacks that turn elements into (line, kind, attrs, parts, addrs) items."""

    def __init__(self, parser: expat.XMLParserType) -> None:
        self.parser = parser
        self.depth = 0
        self.items: list[tuple[int, str, dict[str, str], list[dict], list[dict]]] = []
        self.current: tuple[int, str, dict[str, str], list[dict], list[dict]] | None = None
        self.root: str | None = None
        self.count: int | None = None
        self.start_line = 0  # line of the record being read (for a break inside it)

    def start(self, name: str, attrs: dict[str, str]) -> None:
        self.depth += 1
        line = self.parser.CurrentLineNumber
        if self.depth == 1:
            self.root = name
            self.count = int(attrs["count"]) if attrs.get("count", "").isdigit() else None
        elif self.depth == 2:
            self.start_line = line
            self.current = (line, name, attrs, [], [])
        elif self.current is not None and name == "part":
            self.current[3].append(attrs)
        elif self.current is not None and name == "addr":
            self.current[4].append(attrs)

    def end(self, name: str) -> None:
        if self.depth == 2 and self.current is not None:
            self.items.append(self.current)
            self.current = None
        self.depth -= 1


def _forbid(*_: object) -> None:
    raise _Forbidden


def parse(spec: SourceSpec, f: ExportFile, dates: frozenset[dt.date] | None) -> Iterator[Record]:
    """Records of one backup file, streamed (raises Rejected before the first)."""
    if not sniff(f):
        raise Rejected(R_NOT_AN_EXPORT, "not an SMS Backup & Restore XML (<smses> or <calls>)")
    parser = expat.ParserCreate()
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.EntityDeclHandler = _forbid
    parser.UnparsedEntityDeclHandler = _forbid
    parser.ExternalEntityRefHandler = _forbid
    parser.buffer_text = True
    h = _Handler(parser)
    parser.StartElementHandler = h.start
    parser.EndElementHandler = h.end
    state = _State(spec, f, dates)
    first = True
    for chunk in _Bytes(f).chunks():
        try:
            parser.Parse(chunk, False)
        except _Forbidden:
            if first and not h.items:
                raise Rejected(
                    R_UNPARSEABLE_LINE,
                    "XML declares entities (never expanded): the file is refused",
                ) from None
            yield state.broken(h, "an entity declaration inside the document")
            return
        except expat.ExpatError as exc:
            if first and not h.items and h.root is None:
                raise Rejected(
                    R_NOT_AN_EXPORT, f"not well-formed XML (line {exc.lineno})"
                ) from None
            for item in h.items:
                yield from state.record(item)
            h.items.clear()
            yield state.broken(h, f"XML breaks at line {exc.lineno}")
            return
        first = False
        for item in h.items:
            yield from state.record(item)
        h.items.clear()
    try:
        parser.Parse(b"", True)
    except (expat.ExpatError, _Forbidden) as exc:
        for item in h.items:
            yield from state.record(item)
        h.items.clear()
        where = f"line {exc.lineno}" if isinstance(exc, expat.ExpatError) else "the end"
        if h.current is not None or h.depth > 0:
            yield state.broken(h, f"the file ends inside the XML ({where}): truncated")
        return
    for item in h.items:
        yield from state.record(item)


class _State:
    """What the records of one file share: owner, dedup of MMS ids, the running order."""

    def __init__(self, spec: SourceSpec, f: ExportFile, dates: frozenset[dt.date] | None):
        self.spec, self.f, self.dates = spec, f, dates
        self.owners = Owners(spec)
        self.me = spec.owner or OWNER_FALLBACK
        self.forced = conversation_option(spec)
        self.order = 0
        self.mms_ids: set[str] = set()
        self.convs: dict[tuple, tuple[str, str]] = {}
        self.senders: dict[tuple, str] = {}

    def broken(self, h: _Handler, what: str) -> Record:
        """The one row of a record the XML breaks inside (or of the broken tail)."""
        line = h.start_line if h.current is not None else h.parser.CurrentLineNumber
        self.order += 1
        return quarantine(self.spec, self.f, R_UNPARSEABLE_LINE,
                          f"{what}; the records before it are kept", conv=None, day=None,
                          line=line)  # fmt: skip

    def record(self, item: tuple[int, str, dict[str, str], list[dict], list[dict]]):
        line, name, attrs, parts, addrs = item
        spec, f = self.spec, self.f
        ordr = self.order
        self.order += 1
        if name not in ("sms", "mms", "call"):
            yield quarantine(spec, f, R_UNKNOWN_TYPE, f"element <{name[:30]}> is not sms/mms/call",
                             conv=None, day=None, line=line, raw=_raw(attrs))  # fmt: skip
            return
        if BAD_BYTE in "".join(attrs.values()) or any(BAD_BYTE in p.get("text", "") for p in parts):
            yield quarantine(spec, f, R_ENCODING, "invalid UTF-8 in the record",
                             conv=None, day=None, line=line, raw=_raw(attrs))  # fmt: skip
            return
        if addrs:
            conv, contact = self._conversation(name, attrs, addrs)
        else:  # an sms or call: the same few correspondents again and again
            key = (name, attrs.get("address"), attrs.get("number"), attrs.get("contact_name"))
            if (hit := self.convs.get(key)) is None:
                if len(self.convs) > 65536:
                    self.convs.clear()
                hit = self.convs[key] = self._conversation(name, attrs, addrs)
            conv, contact = hit
        ms = epoch_ms(attrs["date"]) if attrs.get("date") not in (None, "") else -1
        if ms is None or ms < 0:
            reason = R_BAD_TIMESTAMP if ms is None else R_MISSING_TIMESTAMP
            yield quarantine(spec, f, reason, "no usable epoch 'date'", conv=conv, day=None,
                             line=line, raw=_raw(attrs))  # fmt: skip
            return
        try:
            local, utc = from_epoch_ms(ms, spec.timezone)
        except (OverflowError, ValueError):
            yield quarantine(spec, f, R_BAD_TIMESTAMP, "'date' out of range", conv=conv,
                             day=None, line=line, raw=_raw(attrs))  # fmt: skip
            return
        if self.dates is not None and local.date() not in self.dates:
            return
        if name == "sms":
            box, sent = attrs.get("type", "1"), _SENT_SMS
            kind, text = "text", attrs.get("body", "")
        elif name == "mms":
            box, sent = attrs.get("msg_box", "1"), _SENT_MMS
            kind, text = _mms_body(parts)
            mid = attrs.get("m_id", "")
            if mid and mid != "null":
                key = f"{conv}/{mid}"
                if key in self.mms_ids:
                    yield quarantine(spec, f, R_DUPLICATE, "MMS m_id repeated in the file",
                                     conv=conv, day=local.date(), line=line,
                                     raw=_raw(attrs))  # fmt: skip
                    return
                self.mms_ids.add(key)
        else:
            box, sent = "1", set()
            kind = "call"
            secs = attrs.get("duration", "")
            what = _CALL_TYPES.get(attrs.get("type", ""), "call")
            text = f"{what} ({secs} s)" if secs.isdigit() and secs != "0" else what
            if attrs.get("type") == "2":
                box, sent = "2", {"2"}
        if box == "3":
            yield quarantine(spec, f, R_UNKNOWN_TYPE, "a draft (never sent)", conv=conv,
                             day=local.date(), line=line, raw=_raw(attrs))  # fmt: skip
            return
        mine = box in sent
        if mine:
            sender = self.me
        elif name == "mms":
            sender = self._sender(name, attrs, addrs)
        else:
            key = (name, attrs.get("address"), attrs.get("number"), attrs.get("contact_name"))
            if (sender := self.senders.get(key)) is None:
                if len(self.senders) > 65536:
                    self.senders.clear()
                sender = self.senders[key] = self._sender(name, attrs, addrs)
        msg = message(
            spec, f, conv=conv, contact=contact, sender=sender, owners=self.owners, local=local,
            utc=utc, type_=kind, text=clean_text(text), order=ordr, line=line,
        )  # fmt: skip
        msg.is_owner = mine or msg.is_owner
        yield msg

    def _conversation(self, name: str, attrs: dict[str, str], addrs: list[dict]) -> tuple[str, str]:
        """(conversation id, contact name) of a record."""
        address = attrs.get("address") or attrs.get("number") or ""
        members = [a for a in address.split("~") if a.strip()]
        if name == "mms" and len(members) <= 1 and len(addrs) > 2:
            members = [a.get("address", "") for a in addrs if a.get("address")]
            members = [m for m in members if m not in self.owners and "token" not in m]
        names = _names(attrs.get("contact_name", ""))
        if len(members) > 1 or "@rcs." in address or address.startswith("group"):
            keys = sorted({phone_key(m) for m in members}) or [address]
            digest = hashlib.blake2b("+".join(keys).encode(), digest_size=6).hexdigest()
            label = ", ".join(n for n in names if n) or ", ".join(members) or address
            return self.forced or f"sms_group_{digest}", label
        key = phone_key(members[0]) if members else "unknown"
        contact = names[0] if names and names[0] else clean_name(address) or "unknown"
        return self.forced or f"sms_{key}", contact

    def _sender(self, name: str, attrs: dict[str, str], addrs: list[dict]) -> str:
        """The sender of a received record: its contact name, else its number."""
        address = attrs.get("address") or attrs.get("number") or ""
        members = address.split("~")
        names = _names(attrs.get("contact_name", ""))
        who = address
        if name == "mms":
            who = next((a.get("address", "") for a in addrs if a.get("type") == "137"), address)
        keys = [phone_key(m) for m in members]
        if len(names) == len(members) and (k := phone_key(who)) in keys:
            known = names[keys.index(k)]
            if known:
                return known
        return clean_name(who) or "unknown"


def _raw(attrs: dict[str, str]) -> str:
    """A record's attributes as its quarantine excerpt (base64 ``data`` left out)."""
    return " ".join(f'{k}="{v}"' for k, v in attrs.items() if k != "data")


def _names(contact_name: str) -> list[str]:
    """The names in ``contact_name`` (", "-joined for groups); unknown ones as ""."""
    out = []
    for n in contact_name.split(", ") if contact_name else []:
        n = clean_name(n)
        out.append("" if n.casefold() in _UNKNOWN_NAMES else n)
    return out


def _mms_body(parts: list[dict]) -> tuple[str, str]:
    """(type, text) of an MMS: text parts joined, SMIL layout skipped, the first media part
    giving the type (the text is its caption)."""
    texts, kind = [], "text"
    for p in parts:
        ct = p.get("ct", "").lower()
        if ct == "application/smil":
            continue
        if ct.startswith("text/plain"):
            t = p.get("text", "")
            if t and t != "null":
                texts.append(t)
            continue
        if kind == "text":
            kind = next((k for prefix, k in _MEDIA if ct.startswith(prefix)), "file")
    return kind, "\n".join(texts)


def _accept(path: Path) -> bool:
    return path.suffix.lower() == ".xml"


@register(KIND)
def read_sms_backup(spec: SourceSpec, dates: frozenset[dt.date] | None) -> Iterator[Record]:
    """Every SMS Backup & Restore XML under the source path."""
    yield from read_exports(spec, dates, parse, _accept)


read_sms_backup.depends_on = ("memory_pipeline.core.ingest.sources.exports",)  # type: ignore[attr-defined]
register_detector(KIND, sniff, parse, rank=10)
