"""Reader for Signal Desktop chats exported by ``signal-export`` (``sigexport``) as Markdown.

Signal has no export of its own; ``sigexport`` writes one folder per chat with ``chat.md``:
``[YYYY-MM-DD HH:MM:SS] Sender: body`` (older versions ``[YYYY-MM-DD, HH:MM]``), quotes as
``> …`` lines, reactions appended as ``(- Name: 😀 -)``, stickers as ``(( 😀 ))``,
attachments as Markdown links/images (``![photo.jpg](./media/…)``) or ``(image not
exported)``. Each stamped line is one record; lines without a stamp (quotes, further lines)
continue it. Times are the exporting machine's wall time (the source's zone). Reactions are
removed from the text (they are not messages); attachments give the type (the rest of the
body is the caption), stickers are ``sticker``. One conversation per chat folder
(``signal_<folder>``). The Markdown layout is shared with WhatsApp's Swedish-style iOS
export (``[2024-03-01 12:00:00] Name: text``), so under ``kind = "auto"`` only ``.md`` files
are taken as Signal's. sigexport's ``index.html`` is read too (``signal_html``), unless its
``chat.md`` sits beside it (the same chat).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from memory_pipeline.core.common.records import (
    R_BAD_TIMESTAMP,
    R_ENCODING,
    R_NOT_AN_EXPORT,
    R_UNPARSEABLE_LINE,
    Record,
)
from memory_pipeline.core.ingest.sources import signal_html
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
    quarantine,
    read_exports,
    register_detector,
    safe_id,
)

KIND = "signal"
_LINE = re.compile(
    r"\[(?P<d>\d{4}-\d{2}-\d{2}),? (?P<t>\d{2}:\d{2}(?::\d{2})?)\] (?P<who>[^:\n]{1,80}?): ?"
    r"(?P<body>.*)"
)
_REACTION = re.compile(r"\s*\(- [^()]*?: [^()]*? -\)")
_STICKER = re.compile(r"\(\( ?(?P<e>.*?) ?\)\)")
_LINK = re.compile(r"!?\[(?P<name>[^\]]*)\]\((?P<url>[^)]*)\)")
_NOT_EXPORTED = re.compile(r"\((?P<what>image|video|audio|file|attachment)s? not exported\)")
_EXT = {
    "photo": {".jpg", ".jpeg", ".png", ".gif", ".webp", ".heic"},
    "video": {".mp4", ".mov", ".webm"},
    "audio": {".m4a", ".aac", ".mp3", ".ogg", ".opus"},
}
_WHAT = {"image": "photo", "video": "video", "audio": "audio"}


def sniff(f: ExportFile) -> bool:
    """A Markdown file whose first non-empty line is a sigexport message line, or
    sigexport's HTML page."""
    if PurePosixPath(f.rel).suffix.lower() in (".html", ".htm"):
        return signal_html.sniff(f)
    if PurePosixPath(f.rel).suffix.lower() != ".md":
        return False
    for line in head_text(f, 4096).splitlines():
        if line.strip():
            return _LINE.fullmatch(line.strip()) is not None
    return False


def classify(body: str) -> tuple[str, str]:
    """(type, text) of a message body without its reactions."""
    s = _STICKER.fullmatch(body.strip())
    if s is not None:
        return "sticker", s["e"]
    m = _NOT_EXPORTED.search(body)
    if m is not None:
        rest = (body[: m.start()] + body[m.end() :]).strip()
        return _WHAT.get(m["what"], "file"), rest
    link = _LINK.search(body)
    if link is not None and ("media/" in link["url"] or link["url"].startswith("./")):
        suffix = PurePosixPath(link["name"] or link["url"]).suffix.lower()
        kind = next((k for k, exts in _EXT.items() if suffix in exts), "file")
        return kind, (body[: link.start()] + body[link.end() :]).strip()
    return "text", body


def parse(spec: SourceSpec, f: ExportFile, dates: frozenset[dt.date] | None) -> Iterator[Record]:
    """Records of one ``chat.md`` or ``index.html`` (raises Rejected before the first)."""
    if PurePosixPath(f.rel).suffix.lower() in (".html", ".htm"):
        yield from signal_html.parse_html_chat(spec, f, dates)
        return
    text = decode_text(f.data)
    lines = [s[:-1] if s.endswith("\r") else s for s in text.split("\n")]
    first = next((s for s in lines if s.strip()), "")
    if _LINE.fullmatch(first.strip()) is None:
        raise Rejected(R_NOT_AN_EXPORT, "no signal-export line ('[YYYY-MM-DD HH:MM] Name: text')")
    folder = PurePosixPath(f.rel).parent.name or (f.path.parent.name if f.path else f.stem)
    name = clean_name(folder)
    conv = conversation_option(spec) or f"signal_{safe_id(name)}"
    owners = Owners(spec)
    pending: list | None = None  # [line, local, sender, body lines, order]
    order = 0

    def flush() -> Iterator[Record]:
        nonlocal pending
        if pending is None:
            return
        no, local, sender, body, ordr = pending
        pending = None
        while len(body) > 1 and not body[-1].strip():
            body.pop()
        if dates is not None and local.date() not in dates:
            return
        kind, txt = classify(_REACTION.sub("", "\n".join(body)))
        local2, utc = local_and_utc(local, spec.timezone)
        mine = sender == signal_html.ME  # sigexport names your own messages "Me"
        out = message(
            spec, f, conv=conv, contact=name, sender=(spec.owner or sender) if mine else sender,
            owners=owners, local=local2, utc=utc, type_=kind, text=clean_text(txt),
            order=ordr, line=no,
        )  # fmt: skip
        out.is_owner = out.is_owner or mine
        yield out

    for idx, raw in enumerate(lines):
        no = idx + 1
        if bad_line(raw):  # the line alone: the message it continues is kept
            yield quarantine(spec, f, R_ENCODING, "invalid UTF-8 in the line", conv=conv,
                             day=None, line=no, raw=raw)  # fmt: skip
            order += 1
            continue
        m = _LINE.fullmatch(raw.strip())
        if m is None:
            if pending is not None:
                pending[3].append(raw)
            elif raw.strip():
                yield quarantine(spec, f, R_UNPARSEABLE_LINE, "text before the first message",
                                 conv=conv, day=None, line=no, raw=raw)  # fmt: skip
                order += 1
            continue
        yield from flush()
        fmt = "%Y-%m-%d %H:%M:%S" if m["t"].count(":") == 2 else "%Y-%m-%d %H:%M"
        try:
            local = dt.datetime.strptime(f"{m['d']} {m['t']}", fmt)
        except ValueError:
            yield quarantine(spec, f, R_BAD_TIMESTAMP, "date or time out of range", conv=conv,
                             day=None, line=no, raw=raw)  # fmt: skip
            order += 1
            continue
        pending = [no, local, clean_name(m["who"]), [m["body"]], order]
        order += 1
    yield from flush()


def _accept(path: Path) -> bool:
    return path.suffix.lower() in (".md", ".html", ".htm")


@register(KIND)
def read_signal(spec: SourceSpec, dates: frozenset[dt.date] | None) -> Iterator[Record]:
    """Every signal-export ``chat.md`` under the source path."""
    yield from read_exports(spec, dates, parse, _accept)


read_signal.depends_on = (  # type: ignore[attr-defined]
    "memory_pipeline.core.ingest.sources.exports",
    "memory_pipeline.core.ingest.sources.signal_html",
    "memory_pipeline.core.ingest.sources.html_tree",
)
register_detector(KIND, sniff, parse, rank=20)
