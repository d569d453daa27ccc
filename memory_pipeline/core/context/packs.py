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

This module builds packs (``build_context``, the strategies, ``recall``); the UTF-16
budget unit and the shared settings are in ``packs_text``, memory search in
``packs_memory``, the searcher's layout in ``packs_layout`` and the pieces and their
rendering in ``packs_pieces``. The names other code uses are re-exported here.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from memory_pipeline.core.context.packs_layout import _layout
from memory_pipeline.core.context.packs_memory import MemoryHit, MemoryIndex
from memory_pipeline.core.context.packs_pieces import (
    Citation,
    ContextPack,
    Piece,
    _memory_piece,
    _Packer,
    _source_piece,
)
from memory_pipeline.core.context.packs_text import (
    MEMORY_TIMELINE_FILE,
    PACK_SEARCH,
    SEARCH_K,
    SEP,
    WEAK_BELOW,
    truncate_utf16,
    utf16_len,
)
from memory_pipeline.core.retrieval.answerability import NO_RELEVANT_MEMORY
from memory_pipeline.core.retrieval.config import SearchConfig

if TYPE_CHECKING:
    from memory_pipeline.core.retrieval.searcher import Searcher


__all__ = [
    "MEMORY_TIMELINE_FILE",
    "PACK_SEARCH",
    "SEP",
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

STRATEGIES = ("neighbors", "sessions", "split", "none")


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
