"""memory_pipeline: a date-partitioned, source-linked retrieval memory over chat history.

``search`` is the app-facing API; it reads only published outputs (see README, "Search").
"""

from __future__ import annotations

import datetime as dt
import threading
from pathlib import Path
from typing import Any

__all__ = ["search", "searcher"]

_LOCK = threading.Lock()
_SEARCHERS: dict[tuple[Path, str], Any] = {}


def searcher(config: str | Path | None = None, output_dir: str | Path | None = None) -> Any:
    """The (cached) Searcher over the published index of a configuration's output folder.

    A new index version (after a run) is picked up on the next call.
    """
    from memory_pipeline.config import load_config
    from memory_pipeline.core.indexes import current_version
    from memory_pipeline.core.searcher import IndexNotBuilt, Searcher

    out = Path(output_dir) if output_dir else load_config(config).output_dir
    version = current_version(out)
    if version is None:
        raise IndexNotBuilt(f"no search index under {out / 'indexes'}: run `memory-pipeline run`")
    key = (out.resolve(), version.name)
    with _LOCK:
        if key not in _SEARCHERS:
            _SEARCHERS.clear()
            _SEARCHERS[key] = Searcher(out)
        return _SEARCHERS[key]


def search(
    query: str,
    k: int = 5,
    *,
    config: str | Path | None = None,
    output_dir: str | Path | None = None,
    contact: str | None = None,
    conversation: str | None = None,
    as_of: dt.datetime | None = None,
    mode: str = "hybrid",
    **options: Any,
):
    """Best chunks and sessions for ``query``: typed ``SearchResult`` (``.to_dict()`` for JSON).

    ``contact`` / ``conversation`` scope the search; ``as_of`` is the reference time for
    relative expressions ("last Tuesday"); ``mode`` is ``bm25``, ``dense`` or ``hybrid``;
    other options (fusion, beta, rrf_k, bm25_rep, dense_rep, use_time) go to Searcher.search.
    """
    return searcher(config, output_dir).search(
        query, k, mode=mode, contact=contact, conversation=conversation, as_of=as_of, **options
    )
