"""Reader for WhatsApp's "Export chat" text (Android ``.txt``, iOS ``_chat.txt`` in a zip).

Android writes ``D/M/YY, HH:MM - Sender: text``, iOS ``[D/M/YY, HH:MM:SS] Sender: text``; the
phone's locale sets the date order, separators, year digits (Reiwa ``R4``, Buddhist ``2565``),
12/24-hour clock, brackets and digits (Arabic-Indic). The marks phones put in (U+200E before
iOS media and system lines, U+202F before ``PM``, U+202A/U+202C around phone numbers, RLM in
Arabic dates) are removed before matching. The date order is decided per file: the order
under which every date is valid and the dates run forward (the ``date_order`` option, ``dmy``
/ ``mdy`` / ``ymd``, overrides). Lines without a timestamp continue the message above.

Media placeholders become typed messages (photo, video, audio, sticker, file, contact,
location) with the caption as text; system lines (encryption notice, joins, subject changes,
deleted messages) are ``type = "system"``. Each message is one record.
"""

from __future__ import annotations

import datetime as dt
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
    safe_id,
    wall_clock,
)

KIND = "whatsapp"

_DIGITS = str.maketrans("٠١٢٣٤٥٦٧٨٩۰۱۲۳۴۵۶۷۸۹", "01234567890123456789")
_MARKS = re.compile("[\u200e\u200f\u061c\u202a-\u202e\u2066-\u2069\ufeff]")
_DATE = r"(?P<d>\d{1,4}[./\-]\s?\d{1,2}[./\-]\s?(?:[RHrh]\s?)?\d{1,4})\.?"
_TIME = r"(?P<t>\d{1,2}[:.]\d{2}(?:[:.]\d{2})?)"
_HALF = r"(?P<ap>[AaPp]\.?\s?[Mm]\.?|午前|午後|ص|م|오전|오후|上午|下午)"
_STAMP = re.compile(
    rf"(?P<br>\[)?{_DATE}(?:,|\s|،)\s*(?:{_HALF}\s?)?{_TIME}(?:\s?{_HALF.replace('ap', 'ap2')})?"
    r"(?(br)\]\s?|\s?[-–]\s)(?P<rest>.*)"
)
# The same stamp without its ``rest``: matched at the start of a line, it ends where the
# text begins (a line holds no "\n", so this is what ``_STAMP.fullmatch`` finds).
_STAMP_HEAD = re.compile(_STAMP.pattern.removesuffix(r"(?P<rest>.*)"))
# Characters _norm changes: a line without any is matched as it is.
_NORM_CHARS = re.compile(
    "[\u200e\u200f\u061c\u202a-\u202e\u2066-\u2069\ufeff\u202f\u00a0\u2009"
    "\u0660-\u0669\u06f0-\u06f9]"
)
_PM = {"p", "午後", "م", "오후", "下午"}
# Placeholders (compared after marks are removed, case-insensitive)
_PLACEHOLDERS = {
    "<media omitted>": "file",
    "<メディアなし>": "file",
    "<без медиафайлов>": "file",
    "<medien ausgeschlossen>": "file",
    "<multimedia omitido>": "file",
    "<archivo omitido>": "file",
    "<mídia oculta>": "file",
    "<médias omis>": "file",
    "<media weggelaten>": "file",
    "<file multimediali omessi>": "file",
    "image omitted": "photo",
    "video omitted": "video",
    "audio omitted": "audio",
    "sticker omitted": "sticker",
    "gif omitted": "video",
    "document omitted": "file",
    "contact card omitted": "contact",
    "画像は含まれていません": "photo",
    "画像を省略しました": "photo",
    "動画は含まれていません": "video",
    "動画を省略しました": "video",
    "音声は含まれていません": "audio",
    "音声を省略しました": "audio",
    "ステッカーは含まれていません": "sticker",
    "スタンプは含まれていません": "sticker",
    "gifは含まれていません": "video",
    "連絡先カードは含まれていません": "contact",
    "ドキュメントは含まれていません": "file",
    "bild weggelassen": "photo",
    "imagen omitida": "photo",
    "изображение отсутствует": "photo",
}
_EXT_TYPES = {
    "photo": {".jpg", ".jpeg", ".png", ".webp", ".heic", ".gif"},
    "video": {".mp4", ".mov", ".3gp", ".mkv"},
    "audio": {".opus", ".ogg", ".m4a", ".mp3", ".aac", ".amr"},
    "contact": {".vcf"},
}
_ATTACHED = re.compile(
    r"(?:<attached: (?P<ios>[^>]+)>|(?P<and>\S+\.\w{2,5}) \((?:file attached|ファイル添付|"
    r"Datei angehängt|archivo adjunto|arquivo anexado|fichier joint|файл добавлен)\))",
    re.IGNORECASE,
)
_LOCATION = re.compile(
    r"(?:location|位置情報|standort|ubicación|localização|местоположение|"
    r"live location shared|ライブ位置情報を共有しました)\s*[:：]?\s*(?:https?://\S+)?",
    re.IGNORECASE,
)
_CALL = re.compile(
    r"(?:missed (?:voice|video) call|不在着信|(?:voice|video) call)\b", re.IGNORECASE
)
# Events WhatsApp writes under a sender's name (iOS): the encryption notice, deletions.
_SENDER_EVENT = re.compile(
    r"(?:.*end-to-end encrypted.*|.*エンドツーエンド暗号化.*|.*Ende-zu-Ende-verschlüsselt.*|"
    r".*cifrad[oa]s? de extremo a extremo.*|.*сквозным шифрованием.*|"
    r"this message was deleted\.?|you deleted this message\.?|"
    r"このメッセージは削除されました。?|このメッセージを削除しました。?|"
    r"diese nachricht wurde gelöscht\.?|se eliminó este mensaje\.?|"
    r"это сообщение удалено\.?|waiting for this message.*|"
    r".*(?:created group|created this group|changed the subject|changed this group's icon|"
    r"security code (?:with .* )?changed).*)",
    re.IGNORECASE,
)
# _SENDER_EVENT split for speed: the ``.*X.*`` alternatives as a search for X, the others
# whole-line (a line holds no "\n", so the two agree with _SENDER_EVENT.fullmatch).
_EVENT_IN = re.compile(
    r"end-to-end encrypted|エンドツーエンド暗号化|Ende-zu-Ende-verschlüsselt|"
    r"cifrad[oa]s? de extremo a extremo|сквозным шифрованием|"
    r"created group|created this group|changed the subject|changed this group's icon|"
    r"security code (?:with .* )?changed",
    re.IGNORECASE,
)
# Characters IGNORECASE matches to a letter other than their lowercase (re._casefix), and İ
_CASE_EXTRA = re.compile("[\u0130\u0131\u017f\u1c80-\u1c88\u212a\u212b]")
_EVENT_WHOLE = re.compile(
    r"this message was deleted\.?|you deleted this message\.?|"
    r"このメッセージは削除されました。?|このメッセージを削除しました。?|"
    r"diese nachricht wurde gelöscht\.?|se eliminó este mensaje\.?|"
    r"это сообщение удалено\.?|waiting for this message.*",
    re.IGNORECASE,
)
_STEM = re.compile(
    r"^(?:WhatsApp\s*(?:Chat|チャット|Чат|Unterhaltung|Conversa|Discussion)?\s*"
    r"(?:with|mit|con|avec|com|с|-|–|:|で)?\s*)|\s*\(\d+\)$",
    re.IGNORECASE,
)
_MAX_SENDER = 80


def conversation_id(stem: str) -> tuple[str, str]:
    """(id, chat name): ``WhatsApp Chat with Maria`` / ``WhatsApp Chat - Maria (2)`` ->
    ``("maria", "Maria")``."""
    name = _STEM.sub("", stem).strip()
    return safe_id(name or stem), (name or stem)


def _norm(line: str) -> str:
    line = _MARKS.sub("", line).translate(_DIGITS)
    return line.replace("\u202f", " ").replace("\u00a0", " ").replace("\u2009", " ")


def _stamp(raw: str) -> re.Match[str] | None:
    """``_STAMP`` at the start of a line, as ``_STAMP.fullmatch(_norm(raw))`` finds it (the
    text starts at ``end()`` of the normalised line). A line with nothing to normalise is
    matched as it is, and only when it starts like a stamp (``[`` or a digit)."""
    if _NORM_CHARS.search(raw) is None:
        c = raw[:1]
        return _STAMP_HEAD.match(raw) if c == "[" or c.isdecimal() else None
    return _STAMP_HEAD.match(_norm(raw))


def _sender_event(head: str) -> bool:
    """``_SENDER_EVENT.fullmatch(head)``, faster: the searched phrases are looked for only
    when the lowercased line holds a key word of one of them (a lowercased match of them always
    does, except with the few characters ``_CASE_EXTRA`` that IGNORECASE equates otherwise:
    such a line is searched anyway)."""
    if _EVENT_WHOLE.fullmatch(head) is not None:
        return True
    if head.isascii() or _CASE_EXTRA.search(head) is None:
        low = head.lower()
        if not (
            "created" in low
            or "changed" in low
            or "cifrad" in low
            or "end-to-end encrypted" in low
            or "エンドツーエンド暗号化" in low
            or "ende-zu-ende-verschlüsselt" in low
            or "сквозным шифрованием" in low
        ):
            return False
    return _EVENT_IN.search(head) is not None


def _year(y: str) -> int | None:
    era = y[:1].upper()
    digits = y.lstrip("RHrh ").strip()
    if not digits.isdigit():
        return None
    n = int(digits)
    if era == "R":
        return 2018 + n
    if era == "H":
        return 1988 + n
    if n < 100:
        return 2000 + n
    if n > 2400:  # Buddhist calendar (Thai phones)
        return n - 543
    return n


def _fields(d: str) -> tuple[str, str, str] | None:
    parts = re.split(r"[./\-]\s?", d.strip())
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 else None


def _date(parts: tuple[str, str, str], order: str) -> dt.date | None:
    a, b, c = parts
    try:
        if order == "ymd":
            y, mo, da = _year(a), int(b), int(c)
        elif order == "mdy":
            y, mo, da = _year(c), int(a), int(b)
        else:
            y, mo, da = _year(c), int(b), int(a)
        return dt.date(y, mo, da) if y is not None else None
    except (ValueError, TypeError):
        return None


def choose_order(date_fields: list[str], forced: str | None = None) -> str:
    """The date order of a file: all dates valid, then dates running forward the most."""
    if forced in ("dmy", "mdy", "ymd"):
        return forced
    parsed = [p for p in (_fields(d) for d in dict.fromkeys(date_fields)) if p]
    best, best_score = "dmy", (-1, -1)
    for order in ("dmy", "mdy", "ymd"):
        ds = [_date(p, order) for p in parsed]
        valid = sum(d is not None for d in ds)
        seq = [d for d in ds if d is not None]
        forward = sum(x <= y for x, y in zip(seq, seq[1:], strict=False))
        score = (valid, forward)
        if score > best_score:
            best, best_score = order, score
    return best


def _clock(t: str, ap: str | None) -> dt.time | None:
    parts = [int(x) for x in re.split(r"[:.]", t)]
    h, m, s = parts[0], parts[1], parts[2] if len(parts) > 2 else 0
    if m > 59 or s > 59:
        return None
    if ap:
        if not 1 <= h <= 12:
            return None
        pm = ap[:1].lower() in _PM or ap in _PM
        h = h % 12 + (12 if pm else 0)
    elif h > 23:
        return None
    return dt.time(h, m, s)


def classify(first: str, rest_lines: list[str]) -> tuple[str, str]:
    """(type, text) of a message body: placeholders -> type, caption kept as the text."""
    head = first.strip()
    caption = "\n".join(rest_lines).strip("\n")
    low = head.casefold()
    kind = _PLACEHOLDERS.get(low)
    if (
        kind is None and low.endswith("omitted") and "•" in low
    ):  # "name.pdf • 3 pages document omitted"
        kind = "file"
    if kind is not None:
        return kind, caption
    # "<attached: …>" or "name.ext (file attached)": nothing else can match _ATTACHED
    m = None
    if head[:1] == "<" or "(" in head:
        m = _ATTACHED.fullmatch(head) or _ATTACHED.match(head)
    if m is not None:
        name = m["ios"] or m["and"]
        suffix = Path(name).suffix.lower()
        if "STICKER" in name.upper() and suffix == ".webp":
            return "sticker", caption
        kind = next((k for k, exts in _EXT_TYPES.items() if suffix in exts), "file")
        tail = head[m.end() :].strip()
        return kind, "\n".join(x for x in (tail, caption) if x)
    c = head[:1]  # an ASCII first letter other than l/s/u cannot start _LOCATION
    if (
        (not c.isascii() or c.lower() in "lsu")
        and _LOCATION.fullmatch(head)
        and ("http" in head or not caption)
    ):
        return "location", "\n".join([head] + rest_lines).strip()
    if _CALL.fullmatch(low):
        return "call", "\n".join([head] + rest_lines).strip()
    return "text", "\n".join([first] + rest_lines)


def sniff(f: ExportFile) -> bool:
    """True when the first non-empty lines are WhatsApp message lines."""
    lines = [x for x in head_text(f).splitlines() if x.strip()][:5]
    return (
        bool(lines)
        and sum(_STAMP.fullmatch(_norm(x)) is not None for x in lines[:3]) >= 1
        and (_STAMP.fullmatch(_norm(lines[0])) is not None)
    )


def _lines(f: ExportFile) -> Iterator[tuple[str, bool]]:
    """(line, batch has undecodable bytes) of the file, streamed."""
    for batch, bad in line_batches(f):
        for raw in batch:
            yield raw, bad


def parse(spec: SourceSpec, f: ExportFile, dates: frozenset[dt.date] | None) -> Iterator[Record]:
    """Records of one WhatsApp export, in file order (raises Rejected before the first).

    Streamed in two passes unless ``date_order`` is set: the first collects the distinct
    date fields (the date order is the file's), the second reads the messages."""
    head = [_stamp(raw) for raw, _ in itertools.islice(_lines(f), 6)]
    if not any(head):
        raise Rejected(R_NOT_AN_EXPORT, "no WhatsApp message line ('D/M/YY, HH:MM - Name: text')")
    forced = spec.options.get("date_order")
    if forced in ("dmy", "mdy", "ymd"):
        order_name = forced
    else:
        seen: dict[str, None] = {}
        for raw, _ in _lines(f):
            m = _stamp(raw)
            if m is not None:
                seen[m["d"]] = None
        order_name = choose_order(list(seen), forced)
    owners = Owners(spec)
    clock_of = wall_clock(spec.timezone)
    conv = conversation_option(spec)
    cid, contact = conversation_id(f.stem)
    conv = conv or cid
    order = 0
    pending: list | None = None  # [line no, local, sender, body lines, order, system, plain]
    days: dict[str, dt.date | None] = {}
    clocks: dict[tuple[str, str | None], dt.time | None] = {}

    def flush() -> Record | None:
        nonlocal pending
        if pending is None:
            return None
        no, local, sender, body, ordr, system, plain = pending
        pending = None
        if not plain:
            body[0] = _MARKS.sub("", body[0])
        while len(body) > 1 and not body[-1].strip():  # the blank line(s) before the next
            body.pop()
        if dates is not None and local.date() not in dates:
            return None
        if system:
            kind, txt = "system", "\n".join(body).strip()
        else:
            kind, txt = classify(body[0], body[1:])
            if kind == "text" and _sender_event((body[0] if plain else _norm(body[0])).strip()):
                kind, txt = "system", "\n".join(body).strip()
        local2, utc = clock_of(local)
        return message(
            spec, f, conv=conv, contact=contact, sender=sender, owners=owners, local=local2,
            utc=utc, type_=kind, text=clean_text(txt), order=ordr, line=no,
        )  # fmt: skip

    no = 0
    for raw, bad_batch in _lines(f):
        no += 1
        plain = _NORM_CHARS.search(raw) is None  # as _stamp, inlined: most lines are plain
        if plain:
            c = raw[:1]
            m = _STAMP_HEAD.match(raw) if c == "[" or c.isdecimal() else None
        else:
            m = _STAMP_HEAD.match(_norm(raw))
        bad = bad_batch and bad_line(raw)
        if m is None or bad:
            if bad:
                if (rec := flush()) is not None:
                    yield rec
                yield quarantine(
                    spec, f, R_ENCODING, "invalid UTF-8 in the line", conv=conv, day=None,
                    line=no, raw=raw,
                )  # fmt: skip
                order += 1
            elif pending is not None:
                pending[3].append(raw if plain else _MARKS.sub("", raw))
            elif raw.strip():
                yield quarantine(
                    spec, f, R_UNPARSEABLE_LINE, "text before the first message line",
                    conv=conv, day=None, line=no, raw=raw,
                )  # fmt: skip
                order += 1
            continue
        if (rec := flush()) is not None:
            yield rec
        d = m["d"]
        try:
            day = days[d]
        except KeyError:
            parts = _fields(d)
            day = days[d] = _date(parts, order_name) if parts else None
        key = (m["t"], m["ap"] or m["ap2"])
        try:
            clock = clocks[key]
        except KeyError:
            clock = clocks[key] = _clock(*key)
        if day is None or clock is None:
            what = "date" if day is None else "time"
            yield quarantine(
                spec, f, R_BAD_TIMESTAMP, f"{what} not valid in the file's order {order_name}",
                conv=conv, day=day, line=no, raw=raw,
            )  # fmt: skip
            order += 1
            continue
        rest = raw[m.end() :] if plain else _original_tail(raw, m.end())
        sender, sep, body = rest.partition(": ")
        system = False
        if not sep or len(sender) > _MAX_SENDER:  # Android events have no "Sender: "
            sender, body, system = "", rest, True
        else:
            sender = clean_name(sender.lstrip("~").strip())
        local = dt.datetime.combine(day, clock)
        pending = [no, local, sender, [body], order, system, plain]
        order += 1
    if (rec := flush()) is not None:
        yield rec


def _original_tail(raw: str, start: int) -> str:
    """The text of ``raw`` from the ``start``-th character of its normalised form (marks
    removed, digits mapped), so a message keeps its own digits and spaces."""
    pos = start
    for mk in _MARKS.finditer(raw):
        if mk.start() >= pos:
            break
        pos += 1
    if pos >= len(raw):
        return ""
    return _MARKS.sub("", raw[pos:]) if _MARKS.match(raw, pos) else raw[pos:]


def _accept(path: Path) -> bool:
    return path.suffix.lower() == ".txt"


@register(KIND)
def read_whatsapp(spec: SourceSpec, dates: frozenset[dt.date] | None) -> Iterator[Record]:
    """Every WhatsApp export under the source path (``.txt`` files and export zips)."""
    yield from read_exports(spec, dates, parse, _accept)


read_whatsapp.depends_on = ("memory_pipeline.core.ingest.sources.exports",)  # type: ignore[attr-defined]
register_detector(KIND, sniff, parse, rank=30)
