"""The searcher's layout as packs read it: each session's chunks and messages in order.

Built once per searcher (held weakly, so it goes with the searcher), and the session's
UTC offset read from it (memory search and the pieces' local times use it)."""

from __future__ import annotations

import datetime as dt
import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memory_pipeline.core.retrieval.searcher import Searcher


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
