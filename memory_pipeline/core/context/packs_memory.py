"""Memory search for context packs: the memories of a published version, ranked for a query.

``MemoryIndex`` reads the version's memory timeline, keeps the memories valid at ``as_of``
and ranks them by their own words and by the sessions the searcher ranks for the query."""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from memory_pipeline.core.common.schema import MEMORY_TIMELINE
from memory_pipeline.core.context.packs_layout import _local_offset
from memory_pipeline.core.context.packs_text import MEMORY_TIMELINE_FILE, PACK_SEARCH
from memory_pipeline.core.indexes.bm25 import Bm25Index, build_index
from memory_pipeline.core.indexes.tokenize import Tokenizer, get_tokenizer
from memory_pipeline.core.retrieval.config import SearchConfig
from memory_pipeline.core.retrieval.fusion import Ranked, fold, minmax

if TYPE_CHECKING:
    from memory_pipeline.core.retrieval.searcher import Searcher


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
