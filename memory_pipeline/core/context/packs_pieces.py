"""The pieces of a context pack: citations, rendered pieces, the pack, and how they are made.

Every piece starts with a citation header (session, contact, local times, message ids);
the packer adds a piece only when it fits the budget, separators included."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from memory_pipeline.core.context.packs_layout import _local_offset
from memory_pipeline.core.context.packs_memory import MemoryHit
from memory_pipeline.core.context.packs_text import MIN_SOURCE_TEXT, SEP, truncate_utf16, utf16_len

if TYPE_CHECKING:
    from memory_pipeline.core.retrieval.searcher import Searcher


# ---------------------------------------------------------------------------------------
# Packs


@dataclass
class Citation:
    """Where a piece comes from: enough to open the source messages again."""

    session_id: str
    message_ids: list[str]
    contact_id: str = ""
    chunk_id: str = ""
    memory_id: str = ""
    start: str = ""  # local time of the first cited message, "YYYY-MM-DD HH:MM"
    end: str = ""
    source_refs: list[str] = field(default_factory=list)


@dataclass
class Piece:
    """One block of the pack: a citation header line, then its text."""

    kind: str  # memory | chunk | session | search
    header: str
    text: str
    citation: Citation
    truncated: bool = False
    utf16: int = field(init=False)

    def __post_init__(self) -> None:
        self.utf16 = utf16_len(self.render())

    def render(self) -> str:
        """The header line and the text."""
        return f"{self.header}\n{self.text}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "header": self.header,
            "text": self.text,
            "citation": asdict(self.citation),
            "truncated": self.truncated,
            "utf16": self.utf16,
        }


@dataclass
class ContextPack:
    """The ordered pieces an answering model reads, and why they were chosen."""

    question: str
    budget: int
    strategy: str
    pieces: list[Piece] = field(default_factory=list)
    memories: list[MemoryHit] = field(default_factory=list)
    skipped_memories: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    escalated: bool = False
    reason: str = ""

    def render(self) -> str:
        """Pieces separated by a blank line; at most ``budget`` UTF-16 units."""
        return SEP.join(p.render() for p in self.pieces)

    @property
    def utf16(self) -> int:
        return utf16_len(self.render())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "question": self.question,
            "budget": self.budget,
            "utf16": self.utf16,
            "strategy": self.strategy,
            "escalated": self.escalated,
            "reason": self.reason,
            "notes": list(self.notes),
            "skipped_memories": list(self.skipped_memories),
            "memories": [h.to_dict() for h in self.memories],
            "pieces": [p.to_dict() for p in self.pieces],
        }


class _Packer:
    """Budget bookkeeping: the rendered pack is the pieces joined by SEP."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.pieces: list[Piece] = []
        self.used = 0
        self.seen_messages: set[str] = set()  # source messages already shown
        self.sessions: set[str] = set()  # sessions included as a session piece
        self.chunks: set[str] = set()

    def sep(self) -> int:
        return len(SEP) if self.pieces else 0

    def room(self) -> int:
        """UTF-16 units a new piece may take."""
        return self.budget - self.used - self.sep()

    def add(self, piece: Piece) -> None:
        cost = piece.utf16 + self.sep()
        assert self.used + cost <= self.budget, "piece does not fit"
        self.used += cost
        self.pieces.append(piece)
        if piece.kind != "memory":
            self.seen_messages.update(piece.citation.message_ids)


# -- rendering ------------------------------------------------------------------------------


def _fmt(ts: dt.datetime | None) -> str:
    return ts.strftime("%Y-%m-%d %H:%M") if ts else ""


def _span(start: str, end: str) -> str:
    if not start:
        return ""
    if start == end or not end:
        return start
    return f"{start}–{end[11:]}" if start[:10] == end[:10] else f"{start}–{end}"


def _id_range(ids: Sequence[str]) -> str:
    if len(ids) == 1:
        return f"message {ids[0]}"
    return f"messages {ids[0]}…{ids[-1]} ({len(ids)})"


def _lines(searcher: Searcher, message_ids: Sequence[str]) -> list[str]:
    """One "HH:MM sender: text" line per message; the date is added when it changes
    (the header already gives the first one)."""
    out, day = [], None
    for n, mid in enumerate(message_ids):
        m = searcher.message(mid)
        ts = m["local_ts"]
        stamp = ts.strftime("%H:%M")
        if n and ts.date() != day:
            stamp = ts.strftime("%Y-%m-%d %H:%M")
        day = ts.date()
        text = (m["text"] or "").replace("\n", "\n  ")
        out.append(f"{stamp} {m['sender'] or 'system'}: {text}")
    return out


def _memory_piece(searcher: Searcher, hit: MemoryHit) -> Piece:
    offset = _local_offset(searcher, hit.session_id)

    def local(ts: dt.datetime | None) -> str:
        if ts is None:
            return ""
        if offset is None:
            return ts.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%MZ")
        return _fmt(ts.astimezone(dt.UTC).replace(tzinfo=None) + offset)

    who = hit.subject or hit.contact_id
    if hit.contact_id and hit.contact_id != who:
        who = f"{who} (with {hit.contact_id})"
    parts = ["memory", who, hit.kind]
    if hit.valid_from is not None:
        parts.append(local(hit.valid_from))
    if hit.event_date is not None:
        parts.append(f"for {hit.event_date.isoformat()}")
    if hit.valid_to is not None:
        parts.append(f"superseded {local(hit.valid_to)}")
    parts += [f"session {hit.session_id}", "messages " + ", ".join(hit.message_ids)]
    refs = [searcher.message(m)["source_ref"] for m in hit.message_ids if searcher.has_message(m)]
    citation = Citation(
        session_id=hit.session_id,
        message_ids=list(hit.message_ids),
        contact_id=hit.contact_id,
        memory_id=hit.memory_id,
        start=local(hit.valid_from),
        end=local(hit.valid_to) if hit.valid_to else local(hit.valid_from),
        source_refs=refs,
    )
    return Piece("memory", "[" + " · ".join(p for p in parts if p) + "]", hit.text, citation)


def _source_piece(
    searcher: Searcher,
    kind: str,
    session_id: str,
    message_ids: Sequence[str],
    room: int,
    chunk_id: str = "",
) -> Piece | None:
    """The messages as a cited piece within ``room`` units: the longest prefix of whole
    messages that fits (a marker says how many were left out); None when not even
    ``MIN_SOURCE_TEXT`` units of text fit."""
    ids = [m for m in message_ids if searcher.has_message(m)]
    if not ids or room <= 0:
        return None
    contact = searcher.session(session_id)["contact_id"] if searcher.has_session(session_id) else ""
    lines = _lines(searcher, ids)

    def header(n: int) -> str:
        first = _fmt(searcher.message(ids[0])["local_ts"])
        last = _fmt(searcher.message(ids[n - 1])["local_ts"])
        head = [f"{kind} {chunk_id}", f"session {session_id}"] if chunk_id else []
        head = head or [f"session {session_id}"]
        head += [contact, _span(first, last), _id_range(ids[:n])]
        return "[" + " · ".join(h for h in head if h) + "]"

    def build(n: int, text: str, truncated: bool) -> Piece:
        citation = Citation(
            session_id=session_id,
            message_ids=ids[:n],
            contact_id=contact,
            chunk_id=chunk_id,
            start=_fmt(searcher.message(ids[0])["local_ts"]),
            end=_fmt(searcher.message(ids[n - 1])["local_ts"]),
            source_refs=[searcher.message(m)["source_ref"] for m in ids[:n]],
        )
        return Piece(kind, header(n), text, citation, truncated)

    widths = [utf16_len(line) for line in lines]
    total = sum(widths) + len(lines) - 1
    n = len(lines)
    while n > 0:
        rest = len(lines) - n
        marker = f"\n… [truncated: {rest} more message{'s' if rest > 1 else ''}]" if rest else ""
        need = utf16_len(header(n)) + 1 + total + utf16_len(marker)
        if need <= room:
            return build(n, "\n".join(lines[:n]) + marker, bool(rest))
        total -= widths[n - 1] + (1 if n > 1 else 0)
        n -= 1
    # not even the first message fits whole: cut inside it
    rest = len(lines) - 1
    marker = f"\n… [truncated{f': {rest} more messages' if rest else ''}]"
    text_room = room - utf16_len(header(1)) - 1 - utf16_len(marker)
    if text_room < MIN_SOURCE_TEXT:
        return None
    return build(1, truncate_utf16(lines[0], text_room, marker="…") + marker, True)
