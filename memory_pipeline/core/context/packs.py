"""Memory search and context packs: what an answering model reads, within a UTF-16 budget.

Budgets are counted in UTF-16 code units because that is what the consumers count (JS
``String.length``, most LLM front ends): an emoji outside the BMP (🎉) counts 2, so a
character count would overrun them on emoji-heavy chats.

A pack puts remembered facts first (each whole: a memory is never cut, it is skipped when
it does not fit), then the source material they came from, chosen by a strategy:

- ``neighbors``: the chunk(s) holding each memory's messages and the chunks next to them;
- ``sessions``: each memory's whole source session;
- ``split``: half the remaining budget to source sessions, half to an independent search
  (chunks the memories did not point at), so the pack survives a wrong memory;
- ``none``: memories only.

Every piece starts with a citation header (session, contact, local times, message ids) and
the rendered pack, headers included, never exceeds the budget. Source material is never
repeated: a session is included once and a chunk adds only messages not already shown.
"""

from __future__ import annotations

import datetime as dt
import unicodedata
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from memory_pipeline.core.common.schema import MEMORY_TIMELINE
from memory_pipeline.core.indexes.bm25 import Bm25Index, build_index
from memory_pipeline.core.indexes.tokenize import Tokenizer, get_tokenizer
from memory_pipeline.core.retrieval.answerability import NO_RELEVANT_MEMORY
from memory_pipeline.core.retrieval.config import PRESETS, SearchConfig
from memory_pipeline.core.retrieval.fusion import Ranked, fold, minmax

if TYPE_CHECKING:
    from memory_pipeline.core.retrieval.searcher import Searcher

__all__ = [
    "MEMORY_TIMELINE_FILE",
    "STRATEGIES",
    "WEAK_BELOW",
    "Citation",
    "ContextPack",
    "MemoryHit",
    "MemoryIndex",
    "Piece",
    "build_context",
    "evidence_strength",
    "recall",
    "truncate_utf16",
    "utf16_len",
]

MEMORY_TIMELINE_FILE = "memory_timeline.parquet"  # inside the published index version
STRATEGIES = ("neighbors", "sessions", "split", "none")
# recall(): memory evidence is strong when some lexically matching memory holds at least a
# third of the question's content words (stopwords gone, names left out: every memory about
# Maria matches "Maria"). "Where did Maria get a job?" -> {get, job}: "job" matches, strong;
# "What is the name of Maria's cat?" -> {name, cat}: nothing matches, weak. Questions word
# things differently from memories (company/job), hence a third rather than a half.
WEAK_BELOW = 0.33
SEP = "\n\n"  # between pieces
MIN_SOURCE_TEXT = 40  # UTF-16 units of text below which a source piece is not worth adding
SEARCH_K = 20  # chunks asked from the searcher for the "split" half and for seeding
# How packs rank chunks (the "split" half, seeding, each memory's session score): the
# default search; highlights are not shown in a pack, so none are computed.
PACK_SEARCH = replace(PRESETS["default"], highlights=0)

_ZWJ = "\u200d"


# ---------------------------------------------------------------------------------------
# UTF-16


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units (what the budget counts): astral characters count 2."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _units(ch: str) -> int:
    return 2 if ord(ch) > 0xFFFF else 1


def _joins_previous(ch: str) -> bool:
    """True for a character that belongs to the grapheme before it (cutting before it
    would orphan a skin tone, a variation selector, a combining mark or a ZWJ member)."""
    cp = ord(ch)
    return (
        ch == _ZWJ
        or 0xFE00 <= cp <= 0xFE0F  # variation selectors
        or 0x1F3FB <= cp <= 0x1F3FF  # skin tones
        or 0xE0020 <= cp <= 0xE007F  # tag characters (subdivision flags)
        or 0xDC00 <= cp <= 0xDFFF  # a low surrogate kept as a code point (surrogatepass)
        or unicodedata.category(ch) in ("Mn", "Me", "Mc")
    )


def _safe_cut(text: str, i: int) -> int:
    """Move a cut position left until it falls between two grapheme clusters."""
    while 0 < i < len(text) and (_joins_previous(text[i]) or text[i - 1] == _ZWJ):
        i -= 1
    # regional indicators pair up into flags: never keep an odd one at the end
    run = 0
    while run < i and 0x1F1E6 <= ord(text[i - 1 - run]) <= 0x1F1FF:
        run += 1
    if run % 2 and i < len(text) and 0x1F1E6 <= ord(text[i]) <= 0x1F1FF:
        i -= 1
    return i


def truncate_utf16(text: str, limit: int, marker: str = "") -> str:
    """``text`` cut to at most ``limit`` UTF-16 units (``marker`` included when cut).

    Never splits a surrogate pair or an emoji sequence (skin tone, ZWJ family, flag), and
    cuts at the last line break when that keeps at least half of what fits, so a message
    is not left half-shown when a whole line can go instead.
    """
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    if utf16_len(text) <= limit:
        return text
    room = limit - utf16_len(marker)
    if room <= 0:
        return ""
    used, i = 0, 0
    for ch in text:
        w = _units(ch)
        if used + w > room:
            break
        used += w
        i += 1
    i = _safe_cut(text, i)
    newline = text.rfind("\n", 0, i)
    if newline > 0 and newline >= i // 2:
        i = newline
    return text[:i] + marker


# ---------------------------------------------------------------------------------------
# Memory search


@dataclass(frozen=True)
class MemoryHit:
    """One remembered fact matching a query, with where it came from and its validity."""

    memory_id: str
    score: float  # fused (or lexical only) score in [0, 1], best first
    subject: str
    kind: str
    text: str
    session_id: str
    message_ids: list[str]
    valid_from: dt.datetime | None
    valid_to: dt.datetime | None
    contact_id: str
    attribute: str = ""
    value: str = ""
    event_date: dt.date | None = None
    superseded_by: str | None = None
    lexical: float = 0.0  # raw BM25 score of the memory (0: found through its session only)
    overlap: float = 0.0  # share of the query's content words the memory contains
    session_score: float = 0.0  # min-max normalized hybrid score of its source session

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: dates as ISO strings."""
        return {k: _jsonable(v) for k, v in asdict(self).items()}


def _jsonable(v: Any) -> Any:
    return v.isoformat() if isinstance(v, dt.date | dt.datetime) else v


def _naive(value: dt.datetime | dt.date) -> dt.datetime:
    """A date as the last instant of that day; datetimes unchanged."""
    if isinstance(value, dt.datetime):
        return value
    return dt.datetime.combine(value + dt.timedelta(days=1), dt.time()) - dt.timedelta(
        microseconds=1
    )


def _utc(value: dt.datetime | dt.date, tz: str, offset: dt.timedelta | None = None) -> dt.datetime:
    """An instant in UTC: a date means the end of that day; a naive time is local, shifted
    by ``offset`` (local - UTC) when known, else read in the zone ``tz``."""
    value = _naive(value)
    if value.tzinfo is None:
        if offset is not None:
            return (value - offset).replace(tzinfo=dt.UTC)
        value = value.replace(tzinfo=ZoneInfo(tz))
    return value.astimezone(dt.UTC)


class MemoryIndex:
    """BM25 over remembered facts (text + subject + attribute + value) with validity and
    contact filters; optionally fused with the hybrid score of each memory's session.

    ``as_of`` follows the Searcher: a naive datetime is local time (the zone of each
    memory's session, known through a ``searcher``; without one it is read in ``tz``, so
    pass the pipeline's timezone), an aware one an instant, a date the end of that day.
    """

    def __init__(
        self, table: pa.Table, tokenizer: Tokenizer | str = "auto", *, tz: str = "UTC"
    ) -> None:
        self.tz = tz
        rows = sorted(table.to_pylist(), key=lambda r: r["memory_id"]) if table.num_rows else []
        seen: set[str] = set()
        self.rows: list[dict[str, Any]] = []
        for r in rows:  # one row per memory id (first after sorting wins)
            if r["memory_id"] not in seen:
                seen.add(r["memory_id"])
                self.rows.append(r)
        self.ids = [r["memory_id"] for r in self.rows]
        self.position = {m: i for i, m in enumerate(self.ids)}
        texts = [_memory_document(r) for r in self.rows]
        if isinstance(tokenizer, str):
            tokenizer = get_tokenizer(tokenizer, sample_texts=texts or [""])
        self.tokenizer: Tokenizer = tokenizer
        self.tokens = [set(t) for t in tokenizer.tokenize_many(texts)]
        names = {r.get("subject") or "" for r in self.rows} | {
            r.get("contact_id") or "" for r in self.rows
        }
        self.name_tokens = {t for toks in tokenizer.tokenize_many(sorted(names)) for t in toks}
        self.index: Bm25Index | None = (
            build_index(self.ids, texts, tokenizer) if self.rows else None
        )
        self.contact = np.array([r.get("contact_id") or "" for r in self.rows], dtype=object)
        self.valid_from = [r.get("valid_from") for r in self.rows]
        self.valid_to = [r.get("valid_to") for r in self.rows]
        self.sessions = sorted({r["session_id"] for r in self.rows})

    def __len__(self) -> int:
        return len(self.rows)

    @classmethod
    def load(
        cls, version_dir: str | Path, tokenizer: Tokenizer | str = "auto", *, tz: str = "UTC"
    ) -> MemoryIndex:
        """The memory timeline published in an index version; empty when there is none yet
        (an index built before memories existed still answers, with no memories)."""
        path = Path(version_dir) / MEMORY_TIMELINE_FILE
        if not path.exists():
            return cls(MEMORY_TIMELINE.empty_table(), tokenizer, tz=tz)
        return cls(pq.read_table(path), tokenizer, tz=tz)

    @classmethod
    def for_searcher(cls, searcher: Searcher, *, tz: str = "UTC") -> MemoryIndex:
        """The memories of the searcher's index version, tokenized like its chunks."""
        return cls.load(searcher.version, searcher.bm25["raw_text"].tokenizer, tz=tz)

    def eligible(
        self,
        *,
        contact: str | None = None,
        as_of: Any = None,
        offsets: dict[str, dt.timedelta | None] | None = None,
    ) -> np.ndarray:
        """Mask of memories in scope: the contact's, and valid at ``as_of`` when given
        (valid_from <= as_of < valid_to, an open valid_to meaning still true).

        A naive ``as_of`` (or a date) is local time: each memory compares it in its own
        session's zone when ``offsets`` (session -> local minus UTC) has it, else in ``tz``.
        """
        mask = np.ones(len(self.rows), dtype=bool)
        if contact:
            mask &= self.contact == contact
        if as_of is not None:
            offsets = offsets or {}
            valid = []
            for r, vf, vt in zip(self.rows, self.valid_from, self.valid_to, strict=True):
                when = _utc(as_of, self.tz, offsets.get(r["session_id"]))
                valid.append((vf is None or vf <= when) and (vt is None or when < vt))
            mask &= np.array(valid, dtype=bool)
        return mask

    def lexical(self, query: str, mask: np.ndarray | None = None) -> Ranked:
        """(memory_id, BM25 score > 0) of the memories in ``mask``, best first, ties by id."""
        if self.index is None:
            return []
        vocab = self.index.vocab
        ids = [vocab[t] for t in self.tokenizer.tokenize(query) if t in vocab]
        if not ids:
            return []
        scores = np.asarray(self.index.retriever.get_scores_from_ids(ids), dtype=np.float64)
        if mask is not None:
            scores = np.where(mask, scores, 0.0)
        hits = np.flatnonzero(scores > 0).tolist()
        hits.sort(key=lambda i: (-scores[i], self.ids[i]))
        return [(self.ids[i], float(scores[i])) for i in hits]

    def overlap(self, query: str, memory_id: str) -> float:
        """Share of the query's content tokens (names left out when others remain) that the
        memory contains: an absolute measure, unlike min-max normalized scores."""
        q = set(self.tokenizer.tokenize(query))
        content = q - self.name_tokens or q
        if not content:
            return 0.0
        toks = self.tokens[self.position[memory_id]]
        return len(content & toks) / len(content)

    def search(
        self,
        query: str,
        k: int = 10,
        *,
        contact: str | None = None,
        as_of: Any = None,
        searcher: Searcher | None = None,
        beta: float = 0.5,
        search_config: SearchConfig = PACK_SEARCH,
    ) -> list[MemoryHit]:
        """Best memories for ``query`` (score, then lexical score, then memory_id).

        Alone: BM25 over the memories, min-max normalized. With a ``searcher``: the chunk
        ranking of the conversations (hybrid BM25 + dense, RRF, scoped to ``contact``) is
        folded to sessions and min-max normalized (``search_config`` ranks the chunks);
        a memory then scores
        ``beta * its BM25 + (1 - beta) * its source session's score``, so a memory whose
        wording misses the query still surfaces when its conversation matches semantically
        (e.g. "adopting a dog" -> "Mochi got adopted"). Every lexical match is kept; a
        memory found through its session only is dropped when it scores 0.
        """
        if not 0.0 <= beta <= 1.0:
            raise ValueError(f"beta must be in [0, 1], got {beta}")
        if not self.rows or k <= 0:
            return []
        offsets = None
        if searcher is not None and as_of is not None:
            offsets = {sid: _local_offset(searcher, sid) for sid in self.sessions}
        mask = self.eligible(contact=contact, as_of=as_of, offsets=offsets)
        lexical = self.lexical(query, mask)
        lex_raw = dict(lexical)
        lex_norm = minmax(lexical)
        sess_norm: dict[str, float] = {}
        if searcher is not None:
            sess_norm = minmax(_session_ranking(searcher, query, contact, search_config))
            weight = beta
        else:
            weight = 1.0
        position = self.position
        candidates = set(lex_raw)
        if sess_norm:
            candidates |= {
                m
                for i, m in enumerate(self.ids)
                if mask[i] and self.rows[i]["session_id"] in sess_norm
            }
        scored = []
        for m in candidates:
            s_sess = sess_norm.get(self.rows[position[m]]["session_id"], 0.0)
            score = weight * lex_norm.get(m, 0.0) + (1 - weight) * s_sess
            if score > 0 or m in lex_raw:  # min-max gives the weakest match 0
                scored.append((m, score, s_sess))
        scored.sort(key=lambda p: (-p[1], -lex_raw.get(p[0], 0.0), p[0]))
        return [
            self._hit(m, score, lex_raw.get(m, 0.0), s_sess, query)
            for m, score, s_sess in scored[:k]
        ]

    def _hit(self, memory_id: str, score: float, lex: float, sess: float, query: str) -> MemoryHit:
        r = self.rows[self.position[memory_id]]
        return MemoryHit(
            memory_id=memory_id,
            score=round(float(score), 6),
            subject=r.get("subject") or "",
            kind=r.get("kind") or "",
            text=r.get("text") or "",
            session_id=r["session_id"],
            message_ids=list(r.get("message_ids") or []),
            valid_from=r.get("valid_from"),
            valid_to=r.get("valid_to"),
            contact_id=r.get("contact_id") or "",
            attribute=r.get("attribute") or "",
            value=r.get("value") or "",
            event_date=r.get("event_date"),
            superseded_by=r.get("superseded_by"),
            lexical=round(lex, 6),
            overlap=round(self.overlap(query, memory_id), 6) if lex > 0 else 0.0,
            session_score=round(sess, 6),
        )


def _memory_document(row: dict[str, Any]) -> str:
    parts = [row.get("text"), row.get("subject"), row.get("attribute"), row.get("value")]
    return " ".join(p.replace("_", " ") for p in parts if p)


def _session_ranking(
    searcher: Searcher, query: str, contact: str | None, search_config: SearchConfig
) -> Ranked:
    """Sessions by their best chunk in the searcher's ranking (default: hybrid, RRF)."""
    ranked = searcher.rank(query, search_config, searcher.scope_mask(contact, None))
    return fold(ranked, {c: searcher.session_of_chunk(c) for c, _ in ranked})


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


# -- the searcher's layout: chunks of each session in order --------------------------------

_LAYOUTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class _Layout:
    """Per session, its chunks in chunk_index order and its messages in order."""

    def __init__(self, searcher: Searcher) -> None:
        sessions = dict.fromkeys(searcher.session_of_chunk(c) for c in searcher.chunk_ids)
        self.chunks = {sid: searcher.chunks_of_session(sid) for sid in sessions}
        self.index_in_session = {
            cid: n for cids in self.chunks.values() for n, cid in enumerate(cids)
        }
        self.messages: dict[str, list[str]] = {}
        for sid, cids in self.chunks.items():
            ids: dict[str, None] = {}
            for cid in cids:
                ids.update(dict.fromkeys(searcher.messages_of_chunk(cid)))
            self.messages[sid] = list(ids)


def _layout(searcher: Searcher) -> _Layout:
    layout = _LAYOUTS.get(searcher)
    if layout is None:
        layout = _LAYOUTS[searcher] = _Layout(searcher)
    return layout


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


def _local_offset(searcher: Searcher, session_id: str) -> dt.timedelta | None:
    """The session's UTC offset: its first chunk's local start minus its UTC start."""
    cids = _layout(searcher).chunks.get(session_id)
    if not cids:
        return None
    chunk = searcher.chunk(cids[0])
    first_id, start = chunk["message_ids"][0], chunk["start_ts"]
    if not searcher.has_message(first_id) or start is None:
        return None
    return searcher.message(first_id)["local_ts"] - start.replace(tzinfo=None)


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


# -- strategies -----------------------------------------------------------------------------


def _without_highlights(config: SearchConfig) -> SearchConfig:
    """The config with no highlights: packs show messages, not the searcher's highlights,
    so ranking them would be wasted work (the chunk ranking does not depend on them)."""
    return config if config.highlights == 0 else replace(config, highlights=0)


def _memory_sessions(hits: Iterable[MemoryHit]) -> list[str]:
    return list(dict.fromkeys(h.session_id for h in hits))


def _add_sessions(
    searcher: Searcher, packer: _Packer, session_ids: Sequence[str], cap: int, notes: list[str]
) -> None:
    """Whole sessions, in order, within ``cap`` units (the last may be truncated)."""
    layout = _layout(searcher)
    start = packer.used
    for sid in session_ids:
        if sid in packer.sessions:
            continue
        if sid not in layout.messages:
            notes.append(f"session {sid} is not in the index: skipped")
            continue
        ids = [m for m in layout.messages[sid] if m not in packer.seen_messages]
        room = min(packer.room(), cap - (packer.used - start) - packer.sep())
        piece = _source_piece(searcher, "session", sid, ids, room)
        if piece is None:
            continue
        packer.add(piece)
        packer.sessions.add(sid)
        if piece.truncated:
            notes.append(f"session {sid} truncated to fit the budget")


def _add_chunks(
    searcher: Searcher,
    packer: _Packer,
    kind: str,
    chunk_ids: Sequence[str],
    cap: int,
    notes: list[str],
) -> list[Piece]:
    """Chunks as pieces showing only messages not already in the pack, within ``cap``."""
    start = packer.used
    added = []
    for cid in chunk_ids:
        if cid in packer.chunks:
            continue
        sid = searcher.session_of_chunk(cid)
        ids = [m for m in searcher.messages_of_chunk(cid) if m not in packer.seen_messages]
        if not ids:
            continue  # everything it holds is already in the pack
        room = min(packer.room(), cap - (packer.used - start) - packer.sep())
        piece = _source_piece(searcher, kind, sid, ids, room, chunk_id=cid)
        if piece is None:
            continue
        packer.add(piece)
        packer.chunks.add(cid)
        added.append(piece)
        if piece.truncated:
            notes.append(f"chunk {cid} truncated to fit the budget")
    return added


def _neighbor_groups(searcher: Searcher, seeds: Iterable[tuple[str, set[str]]]) -> list[list[str]]:
    """Per seed (session, messages): the chunks holding the messages, then chunk_index - 1
    and + 1 around them."""
    layout = _layout(searcher)
    groups = []
    for sid, messages in seeds:
        cids = layout.chunks.get(sid, [])
        holding = [n for n, c in enumerate(cids) if messages & set(searcher.messages_of_chunk(c))]
        if not holding:
            continue
        around = [n for n in (holding[0] - 1, holding[-1] + 1) if 0 <= n < len(cids)]
        groups.append([cids[n] for n in holding + around])
    return groups


def _add_neighbors(
    searcher: Searcher, packer: _Packer, groups: list[list[str]], notes: list[str]
) -> None:
    layout = _layout(searcher)
    for group in groups:
        added = _add_chunks(searcher, packer, "chunk", group, packer.budget, notes)
        if len(added) > 1:  # same total length in any order: show the group chronologically
            n = len(added)
            packer.pieces[-n:] = sorted(
                added, key=lambda p: layout.index_in_session[p.citation.chunk_id]
            )


def _started_by(searcher: Searcher, chunk_id: str, as_of: Any) -> bool:
    """Whether the chunk started by ``as_of`` (aware: an instant; naive: local time; a date:
    that local day)."""
    chunk = searcher.chunk(chunk_id)
    if isinstance(as_of, dt.datetime) and as_of.tzinfo is not None:
        start = chunk["start_ts"]
        return start is None or start <= as_of
    first = searcher.message(chunk["message_ids"][0])["local_ts"]
    return first <= as_of if isinstance(as_of, dt.datetime) else first.date() <= as_of


def _search_chunks(
    searcher: Searcher,
    question: str,
    contact: str | None,
    as_of: Any,
    k: int,
    search_config: SearchConfig = PACK_SEARCH,
) -> list[str]:
    """Chunk ids of an independent search for the question (none starting after as_of)."""
    naive = as_of if isinstance(as_of, dt.datetime) and as_of.tzinfo is None else None
    result = searcher.search(question, k, config=search_config, contact=contact, as_of=naive)
    cids = [h.chunk_id for h in result.chunks]
    if as_of is None:
        return cids
    return [c for c in cids if _started_by(searcher, c, as_of)]


def build_context(
    searcher: Searcher,
    memories: MemoryIndex,
    question: str,
    budget: int = 24_000,
    *,
    strategy: str = "split",
    k_memories: int = 10,
    contact: str | None = None,
    as_of: Any = None,
    hits: list[MemoryHit] | None = None,
    search_k: int = SEARCH_K,
    search_config: SearchConfig = PACK_SEARCH,
) -> ContextPack:
    """Memories for ``question`` (each whole, in rank order), then source material by
    ``strategy``, all within ``budget`` UTF-16 units of ``render()``.

    ``hits`` reuses a memory search already made. Without memory hits, ``neighbors`` and
    ``sessions`` seed from an independent search instead (noted in the pack). ``as_of``
    hides memories not valid then and search chunks that start after it. ``search_config``
    ranks the chunks of that search and the memories' sessions (its highlights are not
    computed: a pack does not show them).

    When the search judges the question unanswerable (``SearchResult.answerable``) and no
    memory hit holds ``WEAK_BELOW`` of its content words, the pack is explicitly empty, with
    the note saying so: an answering model given the least bad chunks would answer from
    them. (A caller passing ``hits`` has made that decision itself.)
    """
    if budget < 0:
        raise ValueError(f"budget must be >= 0, got {budget}")
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
    search_config = _without_highlights(search_config)
    if hits is None:
        hits = memories.search(
            question,
            k_memories,
            contact=contact,
            as_of=as_of,
            searcher=searcher,
            search_config=search_config,
        )
        # strong memory evidence is an answer whatever the chunk search says
        if evidence_strength(hits) < WEAK_BELOW:
            empty = _unanswerable_pack(
                searcher, question, budget, strategy, contact, as_of, search_k, search_config
            )
            if empty is not None:
                return empty
    pack = ContextPack(question=question, budget=budget, strategy=strategy, memories=hits)
    packer = _Packer(budget)
    for hit in hits:
        piece = _memory_piece(searcher, hit)
        if piece.utf16 > packer.room():
            pack.skipped_memories.append(hit.memory_id)
            pack.notes.append(
                f"memory {hit.memory_id} skipped: {piece.utf16} UTF-16 units, "
                f"{max(packer.room(), 0)} left"
            )
            continue
        packer.add(piece)
    notes = pack.notes
    sessions = _memory_sessions(hits)
    if strategy in ("neighbors", "sessions") and not hits:
        notes.append("no memory hits: sources seeded from a search")
    if strategy == "neighbors":
        if hits:
            seeds = [(h.session_id, set(h.message_ids)) for h in hits]
        else:
            seeds = [
                (searcher.session_of_chunk(c), set(searcher.messages_of_chunk(c)))
                for c in _search_chunks(searcher, question, contact, as_of, search_k, search_config)
            ]
        _add_neighbors(searcher, packer, _neighbor_groups(searcher, seeds), notes)
    elif strategy == "sessions":
        if not hits:
            cids = _search_chunks(searcher, question, contact, as_of, search_k, search_config)
            sessions = list(dict.fromkeys(searcher.session_of_chunk(c) for c in cids))
        _add_sessions(searcher, packer, sessions, budget, notes)
    elif strategy == "split":
        half = max(packer.room(), 0) // 2
        _add_sessions(searcher, packer, sessions, half, notes)
        cids = _search_chunks(searcher, question, contact, as_of, search_k, search_config)
        _add_chunks(searcher, packer, "search", cids, budget, notes)
    pack.pieces = packer.pieces
    assert pack.utf16 <= budget, f"pack of {pack.utf16} UTF-16 units over budget {budget}"
    return pack


def _unanswerable_pack(
    searcher: Searcher,
    question: str,
    budget: int,
    strategy: str,
    contact: str | None,
    as_of: Any,
    k: int,
    search_config: SearchConfig,
) -> ContextPack | None:
    """The explicit empty pack when the search finds no relevant memory, else None."""
    naive = as_of if isinstance(as_of, dt.datetime) and as_of.tzinfo is None else None
    result = searcher.search(question, k, config=search_config, contact=contact, as_of=naive)
    if result.answerable:
        return None
    note = f"{NO_RELEVANT_MEMORY}: search confidence {result.confidence:.2f}"
    return ContextPack(
        question=question, budget=budget, strategy=strategy, notes=[note], reason=note
    )


# ---------------------------------------------------------------------------------------
# Escalation


def evidence_strength(hits: Sequence[MemoryHit]) -> float:
    """The best lexical overlap among the hits (0 when none matches a query word)."""
    return max((h.overlap for h in hits if h.lexical > 0), default=0.0)


def recall(
    searcher: Searcher,
    memories: MemoryIndex,
    question: str,
    *,
    budget: int = 24_000,
    sources: bool | None = None,
    strategy: str = "split",
    weak_below: float = WEAK_BELOW,
    k_memories: int = 10,
    contact: str | None = None,
    as_of: Any = None,
    search_config: SearchConfig = PACK_SEARCH,
) -> ContextPack:
    """Memories alone when they answer; with source material when asked (``sources=True``)
    or, with ``sources=None``, when the memory evidence is weak: no hit, or no hit holding
    at least ``weak_below`` of the question's content words (see :func:`evidence_strength`).
    Memories are cheap and precise; sources cost budget, so they come only when needed.
    """
    search_config = _without_highlights(search_config)
    hits = memories.search(
        question,
        k_memories,
        contact=contact,
        as_of=as_of,
        searcher=searcher,
        search_config=search_config,
    )
    strength = evidence_strength(hits)
    if sources is True:
        escalate, reason = True, "sources requested"
    elif sources is False:
        escalate, reason = False, "sources not requested"
    elif not hits:
        escalate, reason = True, "no memory hits"
    elif strength < weak_below:
        escalate = True
        reason = f"weak memory evidence: best lexical overlap {strength:.2f} < {weak_below}"
    else:
        escalate = False
        reason = f"strong memory evidence: lexical overlap {strength:.2f} >= {weak_below}"
    pack = build_context(
        searcher,
        memories,
        question,
        budget,
        strategy=strategy if escalate else "none",
        contact=contact,
        as_of=as_of,
        hits=hits,
        search_config=search_config,
    )
    pack.escalated, pack.reason = escalate, reason
    return pack
