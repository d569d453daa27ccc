"""memory_pipeline: a date-partitioned, source-linked retrieval memory over chat history.

``search`` and ``context`` are the app-facing API; they read only published outputs (see
README, "Search" and "Context packs").
"""

from __future__ import annotations

import datetime as dt
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memory_pipeline.core.retrieval.config import SearchConfig

__all__ = ["SearchConfig", "context", "forget", "recall", "search", "searcher"]

_LOCK = threading.Lock()
_SEARCHERS: dict[tuple[Path, str], Any] = {}
_MEMORY_INDEXES: dict[tuple[Path, str], Any] = {}


def searcher(config: str | Path | None = None, output_dir: str | Path | None = None) -> Any:
    """The (cached) Searcher over the published index of a configuration's output folder.

    A new index version (after a run) is picked up on the next call.
    """
    from memory_pipeline.config import load_config
    from memory_pipeline.core.indexes.publish import current_version
    from memory_pipeline.core.retrieval.searcher import IndexNotBuilt, Searcher

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


def _require_text(value: Any, name: str) -> None:
    """A blank query ranks every chunk alike and answers with arbitrary hits: refuse it."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} must be non-empty text, got {value!r}")


def _require_int(value: Any, name: str, low: int) -> None:
    """Counts and budgets are integers (``True`` and ``2.5`` are not) of at least ``low``:
    a negative k used to return every chunk, a negative budget failed deep in packing."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")


def __getattr__(name: str) -> Any:
    # memory_pipeline.SearchConfig, imported on first use: the package import stays light
    if name == "SearchConfig":
        from memory_pipeline.core.retrieval.config import SearchConfig

        return SearchConfig
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def search(
    query: str,
    k: int = 5,
    *,
    config: str | Path | None = None,
    output_dir: str | Path | None = None,
    contact: str | None = None,
    conversation: str | None = None,
    as_of: dt.datetime | None = None,
    search_config: SearchConfig | str | None = None,
    mode: str | None = None,
    **options: Any,
):
    """Best chunks and sessions for ``query``: typed ``SearchResult`` (``.to_dict()`` for JSON).

    ``contact`` / ``conversation`` scope the search; ``as_of`` is the reference time for
    relative expressions ("last Tuesday"). How it ranks is ``search_config``: a
    ``SearchConfig`` or a preset name (default: ``"default"``, hybrid BM25 + dense with RRF);
    ``mode`` (``bm25``, ``dense``, ``hybrid``) and the other options (fusion, beta, rrf_k,
    bm25_rep, dense_rep, candidates, use_time, highlights) replace its fields.
    (``config`` is the pipeline's configuration file, as everywhere in this API.)
    A blank ``query`` or a ``k`` below 1 raises ``ValueError`` before any index is opened.
    """
    _require_text(query, "query")
    _require_int(k, "k", 1)
    from memory_pipeline.core.retrieval.config import resolve

    ranking = resolve(search_config, mode=mode, **options)
    return searcher(config, output_dir).search(
        query, k, ranking, contact=contact, conversation=conversation, as_of=as_of
    )


def memory_index(config: str | Path | None = None, output_dir: str | Path | None = None) -> Any:
    """The (cached) MemoryIndex over the memory timeline published with the search index."""
    from memory_pipeline.core.context.packs import MemoryIndex

    s = searcher(config, output_dir)
    key = (Path(s.version).resolve().parent, s.version.name)
    with _LOCK:
        if key not in _MEMORY_INDEXES:
            _MEMORY_INDEXES.clear()
            _MEMORY_INDEXES[key] = MemoryIndex.for_searcher(s)
        return _MEMORY_INDEXES[key]


def context(
    question: str,
    budget: int = 24_000,
    *,
    strategy: str = "split",
    config: str | Path | None = None,
    output_dir: str | Path | None = None,
    contact: str | None = None,
    as_of: dt.datetime | None = None,
    k_memories: int = 10,
    search_config: SearchConfig | str | None = None,
):
    """What an LLM should read for ``question``: memory hits first, then their source
    material (``strategy``: ``neighbors`` chunks, whole source ``sessions``, or ``split`` —
    half to source sessions, half to independent raw search), within ``budget`` UTF-16
    code units. Every piece carries its citation; ``.render()`` gives the text.
    ``search_config`` (a ``SearchConfig`` or a preset name) ranks the chunks it searches.
    A blank ``question``, a negative ``budget`` or ``k_memories`` below 1 raise ``ValueError``."""
    _require_text(question, "question")
    _require_int(budget, "budget", 0)
    _require_int(k_memories, "k_memories", 1)
    from memory_pipeline.core.context.packs import build_context
    from memory_pipeline.core.retrieval.config import resolve

    s = searcher(config, output_dir)
    return build_context(
        s,
        memory_index(config, output_dir),
        question,
        budget,
        strategy=strategy,
        k_memories=k_memories,
        contact=contact,
        as_of=as_of,
        search_config=resolve(search_config),
    )


def recall(
    question: str,
    budget: int = 24_000,
    *,
    sources: bool | None = None,
    strategy: str = "split",
    config: str | Path | None = None,
    output_dir: str | Path | None = None,
    contact: str | None = None,
    as_of: dt.datetime | None = None,
    search_config: SearchConfig | str | None = None,
):
    """Memories alone first; the source material only when asked (``sources=True``) or when
    the memory evidence is weak (``sources=None``). The pack says whether and why it escalated.
    ``search_config`` as for :func:`context`."""
    _require_text(question, "question")
    _require_int(budget, "budget", 0)
    from memory_pipeline.core.context.packs import recall as recall_core
    from memory_pipeline.core.retrieval.config import resolve

    s = searcher(config, output_dir)
    return recall_core(
        s,
        memory_index(config, output_dir),
        question,
        budget=budget,
        sources=sources,
        strategy=strategy,
        contact=contact,
        as_of=as_of,
        search_config=resolve(search_config),
    )


def forget(
    contact: str,
    *,
    config: str | Path | None = None,
    output_dir: str | Path | None = None,
    dry_run: bool = False,
) -> list[str]:
    """Forget ``contact`` everywhere, durably; returns what was (or would be) removed.

    Removes the contact's conversations from every table, index version, the provider cache
    and the dossier folder, lists them (salted hashes) so no later run ingests them again,
    then rebuilds the indexes, storage report, evaluation and warehouse from what is left.
    ``dry_run`` only reports. Raises ``LookupError`` for an unknown contact.
    """
    from memory_pipeline.config import load_config, with_overrides
    from memory_pipeline.core.privacy.forget import apply_forget
    from memory_pipeline.defs.forget import plan_for
    from memory_pipeline.defs.forget_run import rebuild_after_forget

    cfg = load_config(config)
    if output_dir:
        cfg = with_overrides(cfg, output_dir=Path(output_dir).resolve())
    plan = plan_for(cfg, contact)
    lines = plan.summary_lines()
    if dry_run:
        return lines
    apply_forget(plan)
    with _LOCK:  # a cached searcher may hold the forgotten index in memory
        _SEARCHERS.clear()
        _MEMORY_INDEXES.clear()
    if not rebuild_after_forget(cfg):
        raise RuntimeError("forgotten, but rebuilding the indexes failed: run the pipeline")
    return lines
