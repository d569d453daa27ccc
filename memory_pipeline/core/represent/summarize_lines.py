"""Chat lines as the summarizer sees them: ``raw_text`` parsed back into typed lines.

A chunk's ``raw_text`` is rendered messages (time, speaker, text, markers such as
``[Sticker]``); :func:`parse_raw_text` recovers one :class:`Line` per message with its type
inferred from those markers, so only text messages become summary candidates. The length
targets and separators every summary shares are defined here too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

SUMMARY_TARGETS: dict[str, tuple[int, int]] = {"ja": (200, 500), "en_words": (60, 120)}
SEPARATOR = "\n"  # one picked message per summary line
ELLIPSIS = "…"
BULLET_MAX_CHARS = 140
BULLET_LABELS: dict[str, dict[str, str]] = {
    "en": {"decision": "Decision:", "commitment": "Commitment:", "context": "Context:"},
    "ja": {"decision": "決定:", "commitment": "約束:", "context": "背景:"},
}


@dataclass(frozen=True, slots=True)
class Line:
    """One chat message as the summarizer sees it (a parsed ``raw_text`` line or a table row)."""

    sender: str
    text: str
    local_ts: datetime
    type: str = "text"


# --------------------------------------------------------------------------- parsing

_STAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d\]")
_HEAD = re.compile(r"\[(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)\] ?(.*?): ?(.*)")
_MARKER_TYPES = {
    "[スタンプ]": "sticker",
    "[sticker]": "sticker",
    "[写真]": "photo",
    "[photo]": "photo",
    "[アルバム]": "photo",
    "[album]": "photo",
    "[動画]": "video",
    "[video]": "video",
    "[ファイル]": "file",
    "[file]": "file",
    "[ボイスメッセージ]": "audio",
    "[voice message]": "audio",
    "[audio]": "audio",
    "[位置情報]": "location",
    "[location]": "location",
    "[連絡先]": "contact",
    "[contact]": "contact",
}
_MAX_MARKER = max(map(len, _MARKER_TYPES)) + 2
_CALL = re.compile(
    r"(?:☎|📞|通話時間|不在着信|通話をキャンセルしました|Call time|Missed call|Cancell?ed call)",
    re.IGNORECASE,
)
# LINE's system lines, by how they end (a C-level endswith; no regex per message).
_SYSTEM_ENDINGS = (
    "unsent a message.",
    "unsent a message",
    "がメッセージの送信を取り消しました",
    "を作成しました",
    "が参加しました",
    "が退出しました",
    "を招待しました",
    "joined the group.",
    "joined the group",
    "left the group.",
    "left the group",
    "joined the chat",
    "left the chat",
)
_SYSTEM = re.compile(
    r"\A\S.{0,60}?(?:unsent a message\.?|がメッセージの送信を取り消しました|"
    r"がアルバム「.*」を作成しました|が(?:参加|退出)しました|が.+を招待しました|"
    r" (?:joined|left) the (?:group|chat)\.?)\Z",
    re.DOTALL,
)


def infer_type(sender: str, text: str) -> str:
    """Best-effort message type from rendered text (raw_text does not carry the type column)."""
    if not sender:
        return "system"
    if text.startswith("[") and len(text) <= _MAX_MARKER:
        kind = _MARKER_TYPES.get(text.strip().lower())
        if kind is not None:
            return kind
    if _CALL.match(text):
        return "call"
    if text.endswith(_SYSTEM_ENDINGS) and _SYSTEM.match(text):
        return "system"
    return "text"


def parse_raw_text(raw_text: str) -> list[Line]:
    """Inverse of the chunk rendering ``[YYYY-MM-DD HH:MM] sender: text`` (tolerant).

    Lines indented by two spaces continue the previous message; any other non-blank line that
    is not a message header is also taken as a continuation (a hand-edited or re-wrapped text
    must not lose words); blank lines and text before the first header are dropped. Seconds
    and a ``T`` separator in the stamp are accepted. ``type`` is inferred from LINE's markers
    (``[Sticker]``, ``[写真]``, ``☎ …``, sender-less system lines) since the rendering does
    not keep it.
    """
    out: list[Line] = []
    stamps: dict[str, datetime | None] = {}  # messages of a chunk share few distinct minutes
    ts: datetime | None = None
    sender = ""
    parts: list[str] | None = None
    for row in raw_text.split("\n"):
        if row.endswith("\r"):
            row = row[:-1]
        if parts is not None and row.startswith("  "):
            parts.append(row[2:])
            continue
        # Fast path for the exact rendering "[YYYY-MM-DD HH:MM] sender: text", else the regex.
        new_ts = None
        if row[17:19] == "] " and row[:1] == "[" and ": " in row and _STAMP.match(row, 1):
            new_ts = _stamp(row[1:17], stamps)
            new_sender, _, first = row[19:].partition(": ")
        else:
            m = _HEAD.match(row)
            if m is not None:
                new_ts = _stamp(m.group(1), stamps)
                new_sender, first = m.group(2), m.group(3)
        if new_ts is None:  # not a message header (or an impossible date): continuation
            if parts is not None and row:  # a blank unindented line is layout, not text
                parts.append(row)
            continue
        if parts is not None and ts is not None:
            out.append(_make_line(sender, parts, ts))
        ts, sender, parts = new_ts, new_sender, [first]
    if parts is not None and ts is not None:
        out.append(_make_line(sender, parts, ts))
    return out


def _stamp(stamp: str, cache: dict[str, datetime | None]) -> datetime | None:
    if stamp in cache:
        return cache[stamp]
    try:
        ts: datetime | None = datetime.fromisoformat(stamp)
    except ValueError:
        ts = None
    cache[stamp] = ts
    return ts


def _make_line(sender: str, parts: list[str], ts: datetime) -> Line:
    text = parts[0] if len(parts) == 1 else "\n".join(parts)
    return Line(sender, text, ts, infer_type(sender, text))
