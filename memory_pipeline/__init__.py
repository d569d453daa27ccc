"""memory_pipeline: a date-partitioned, source-linked retrieval memory over chat history.

``search`` and ``context`` are the app-facing API; they read only published outputs (see
README, "Search" and "Context packs"). In a deployment with several owners every call names
the owner (``owner=``); it reads that owner's folder and nothing else (docs/owners.md).
"""

from __future__ import annotations

import datetime as dt
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memory_pipeline.core.retrieval.config import SearchConfig
    from memory_pipeline.core.retrieval.searcher import SearchResult

__all__ = [
    "SearchConfig",
    "SearchResult",
    "context",
    "forget",
    "owner_output_dir",
    "recall",
    "search",
    "searcher",
]

_LOCK = threading.Lock()
_SEARCHERS: dict[tuple[Path | str, str], Any] = {}
_MEMORY_INDEXES: dict[tuple[Path, str], Any] = {}
_CACHED = 8  # searchers kept (an app serving several owners alternates between them)


def _remember(cache: dict, key: tuple[Path, str], make: Any) -> Any:
    """``cache[key]``, built by ``make()`` once; older versions of the same folder and the
    least recently used entries beyond ``_CACHED`` are dropped (call under ``_LOCK``)."""
    if key in cache:
        cache[key] = cache.pop(key)  # most recently used last
        return cache[key]
    for old in [k for k in cache if k[0] == key[0]]:
        del cache[old]
    while len(cache) >= _CACHED:
        del cache[next(iter(cache))]
    cache[key] = make()
    return cache[key]


def owner_output_dir(
    config: str | Path | None = None,
    output_dir: str | Path | None = None,
    owner: str | None = None,
) -> Path:
    """The folder the API reads: the output folder, or ``owners/<owner>/`` in it when the
    deployment has several owners (then ``owner`` is required; an ``OwnerError``, a
    ``ValueError``, lists them)."""
    from memory_pipeline.config import load_config
    from memory_pipeline.core.common.owners import resolve_owner_dir

    root = Path(output_dir) if output_dir else load_config(config).output_dir
    return Path(resolve_owner_dir(root, owner))


def searcher(
    config: str | Path | None = None,
    output_dir: str | Path | None = None,
    owner: str | None = None,
) -> Any:
    """The (cached) Searcher over the published index of a configuration's output folder
    (of ``owner``'s folder in a multi-owner deployment).

    A new index version (after a run) is picked up on the next call.
    """
    from memory_pipeline.config import load_config, object_store_options
    from memory_pipeline.core.common import fs
    from memory_pipeline.core.common.owners import resolve_owner_dir
    from memory_pipeline.core.indexes.publish import current_version
    from memory_pipeline.core.retrieval.searcher import IndexNotBuilt, Searcher

    out = fs.normalize(os.fspath(output_dir)) if output_dir else load_config(config).storage_root
    if fs.is_remote(out):  # s3://: endpoint and credentials from the AWS_* variables
        fs.configure_s3(object_store_options())
    else:
        out = Path(out).resolve()
    # the owner's folder or s3:// prefix; with several owners ``owner`` is required
    out = resolve_owner_dir(out, owner)
    version = current_version(out)
    if version is None:
        raise IndexNotBuilt(
            f"no search index under {fs.join(out, 'indexes')}: run `memory-pipeline run`"
        )
    key = (out, version.name)
    with _LOCK:
        return _remember(_SEARCHERS, key, lambda: Searcher(out))


def _require_text(value: Any, name: str) -> None:
    """A blank query ranks every chunk alike and answers with arbitrary hits: refuse it."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} must be non-empty text, got {value!r}")


def _require_int(value: Any, name: str, low: int) -> None:
    """Counts and budgets are integers (``True`` and ``2.5`` are not) of at least ``low``:
    a negative k used to return every chunk, a negative budget failed deep in packing."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")


def _resolve_recent(
    query: str, recent: Any, as_of: dt.datetime | None, s: Any, rewriter: Any = None
) -> tuple[str, dt.datetime | None, list[str]]:
    """``query`` made explicit against the ``recent`` messages (rules of
    ``retrieval.query.resolve_references``, or ``rewriter.rewrite`` when given: an LLM
    rewrite), the reference time for its relative words, and notes saying what changed.
    No ``recent``: everything unchanged. A malformed ``recent`` raises ``ValueError``."""
    if recent is None:
        return query, as_of, []
    from memory_pipeline.core.retrieval.query import normalize_recent, resolve_references

    messages = normalize_recent(recent)
    if rewriter is not None:
        text, notes = rewriter.rewrite(query, messages)
        times = [m.time for m in messages if m.time is not None]
        return text, as_of or (max(times) if times else None), notes
    tokenizer = s.bm25["raw_text"].tokenizer if "raw_text" in s.bm25 else None
    idf = s.idf

    weights: dict[str, float] = {}  # a conversation repeats its words: tokenized once each

    def weight(word: str) -> float:
        found = weights.get(word)
        if found is None:
            toks = tokenizer.tokenize(word) if tokenizer is not None else []
            found = sum(idf.get(t, 0.0) for t in toks) / len(toks) if toks else 0.0
            weights[word] = found
        return found

    r = resolve_references(query, messages, known=s.known_speakers, as_of=as_of, weight_of=weight)
    notes = list(r.notes)
    if r.query != query:
        notes.append("query rewritten from the recent messages")
    return r.query, r.as_of, notes


def __getattr__(name: str) -> Any:
    # memory_pipeline.SearchConfig / SearchResult, imported on first use: the package
    # import stays light
    if name == "SearchConfig":
        from memory_pipeline.core.retrieval.config import SearchConfig

        return SearchConfig
    if name == "SearchResult":
        from memory_pipeline.core.retrieval.searcher import SearchResult

        return SearchResult
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
    recent: Any = None,
    rewriter: Any = None,
    owner: str | None = None,
    **options: Any,
) -> SearchResult:
    """Best chunks and sessions for ``query``: typed ``SearchResult`` (``.to_dict()`` for JSON).

    ``result.answerable`` says whether the memory likely holds the answer (``confidence`` in
    [0, 1], comparable across queries; docs/search.md): do not answer from the hits of an
    unanswerable result. The default ranking is the one selected for the query's language.

    ``contact`` / ``conversation`` scope the search; ``as_of`` is the reference time for
    relative expressions ("last Tuesday"). How it ranks is ``search_config``: a
    ``SearchConfig`` or a preset name (default: ``"default"``, hybrid BM25 + dense with RRF);
    ``mode`` (``bm25``, ``dense``, ``hybrid``) and the other options (fusion, beta, rrf_k,
    bm25_rep, dense_rep, candidates, use_time, highlights) replace its fields.
    (``config`` is the pipeline's configuration file, as everywhere in this API.)
    ``recent``: the conversation so far (strings, or ``{"text", "sender", "time"}``
    mappings, oldest first): "that thing we talked about yesterday" is resolved against it
    by rules, or by ``rewriter`` (e.g. ``retrieval.rewrite.LlmQueryRewriter``) when given;
    the result's ``query`` is what was searched and its notes say what changed.
    ``owner``: whose memory (required when the deployment has several owners).
    A blank ``query``, a ``k`` below 1, a malformed ``recent`` or a missing/unknown
    ``owner`` raise ``ValueError``.
    """
    _require_text(query, "query")
    _require_int(k, "k", 1)
    from memory_pipeline.core.retrieval.config import resolve
    from memory_pipeline.core.retrieval.query import normalize_recent

    normalize_recent(recent)  # bad input fails before any index is opened
    resolve(search_config, mode=mode, **options)
    return search_with(
        searcher(config, output_dir, owner),
        query,
        k,
        contact=contact,
        conversation=conversation,
        as_of=as_of,
        search_config=search_config,
        mode=mode,
        recent=recent,
        rewriter=rewriter,
        **options,
    )


def search_with(
    s: Any,
    query: str,
    k: int = 5,
    *,
    contact: str | None = None,
    conversation: str | None = None,
    as_of: dt.datetime | None = None,
    search_config: SearchConfig | str | None = None,
    mode: str | None = None,
    recent: Any = None,
    rewriter: Any = None,
    **options: Any,
):
    """:func:`search` over a given Searcher ``s`` (one index version, already loaded).

    Why: a server pins the version a request started on (``memory_pipeline.service``), so
    everything one request reads comes from that version, whatever is published meanwhile."""
    _require_text(query, "query")
    _require_int(k, "k", 1)
    from memory_pipeline.core.retrieval.config import resolve

    ranking = resolve(search_config, mode=mode, **options)
    query, as_of, notes = _resolve_recent(query, recent, as_of, s, rewriter)
    result = s.search(query, k, ranking, contact=contact, conversation=conversation, as_of=as_of)
    result.notes = [*result.notes, *notes]
    return result


def memory_index(
    config: str | Path | None = None,
    output_dir: str | Path | None = None,
    owner: str | None = None,
) -> Any:
    """The (cached) MemoryIndex over the memory timeline published with the search index."""
    from memory_pipeline.core.context.packs import MemoryIndex

    s = searcher(config, output_dir, owner)
    key = (Path(s.version).resolve().parent, s.version.name)
    with _LOCK:
        return _remember(_MEMORY_INDEXES, key, lambda: MemoryIndex.for_searcher(s))


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
    recent: Any = None,
    rewriter: Any = None,
    owner: str | None = None,
):
    """What an LLM should read for ``question``: memory hits first, then their source
    material (``strategy``: ``neighbors`` chunks, whole source ``sessions``, or ``split`` —
    half to source sessions, half to independent raw search), within ``budget`` UTF-16
    code units. Every piece carries its citation; ``.render()`` gives the text.
    ``search_config`` (a ``SearchConfig`` or a preset name) ranks the chunks it searches.
    ``recent`` / ``rewriter`` resolve references to the conversation so far, as for
    :func:`search` (the pack's notes say what changed). ``owner`` as for :func:`search`.
    A blank ``question``, a negative ``budget``, ``k_memories`` below 1 or a malformed
    ``recent`` raise ``ValueError``."""
    _require_text(question, "question")
    _require_int(budget, "budget", 0)
    _require_int(k_memories, "k_memories", 1)
    from memory_pipeline.core.retrieval.query import normalize_recent

    normalize_recent(recent)
    s = searcher(config, output_dir, owner)
    return context_with(
        s,
        memory_index(config, output_dir, owner),
        question,
        budget,
        strategy=strategy,
        contact=contact,
        as_of=as_of,
        k_memories=k_memories,
        search_config=search_config,
        recent=recent,
        rewriter=rewriter,
    )


def context_with(
    s: Any,
    memories: Any,
    question: str,
    budget: int = 24_000,
    *,
    strategy: str = "split",
    contact: str | None = None,
    as_of: dt.datetime | None = None,
    k_memories: int = 10,
    search_config: SearchConfig | str | None = None,
    recent: Any = None,
    rewriter: Any = None,
):
    """:func:`context` over a given Searcher ``s`` and the MemoryIndex ``memories`` of the
    same index version (see :func:`search_with`: one request, one version)."""
    _require_text(question, "question")
    _require_int(budget, "budget", 0)
    _require_int(k_memories, "k_memories", 1)
    from memory_pipeline.core.context.packs import build_context
    from memory_pipeline.core.retrieval.config import resolve
    from memory_pipeline.core.retrieval.query import normalize_recent

    normalize_recent(recent)
    question, as_of, notes = _resolve_recent(question, recent, as_of, s, rewriter)
    pack = build_context(
        s,
        memories,
        question,
        budget,
        strategy=strategy,
        k_memories=k_memories,
        contact=contact,
        as_of=as_of,
        search_config=resolve(search_config),
    )
    pack.notes = [*pack.notes, *notes]
    return pack


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
    owner: str | None = None,
):
    """Memories alone first; the source material only when asked (``sources=True``) or when
    the memory evidence is weak (``sources=None``). The pack says whether and why it escalated.
    ``search_config`` as for :func:`context`."""
    _require_text(question, "question")
    _require_int(budget, "budget", 0)
    from memory_pipeline.core.context.packs import recall as recall_core
    from memory_pipeline.core.retrieval.config import resolve

    s = searcher(config, output_dir, owner)
    return recall_core(
        s,
        memory_index(config, output_dir, owner),
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
    owner: str | None = None,
) -> list[str]:
    """Forget ``contact`` everywhere, durably; returns what was (or would be) removed.

    Removes the contact's conversations from every table, index version, the provider cache
    and the dossier folder, lists them (salted hashes) so no later run ingests them again,
    then rebuilds the indexes, storage report, evaluation and warehouse from what is left.
    ``dry_run`` only reports. Raises ``LookupError`` for an unknown contact.
    ``owner``: whose memory forgets (required with several owners); the other owners'
    folders are never touched (their rebuilds are skipped: their inputs did not change).
    """
    from memory_pipeline.config import (
        load_config,
        object_store_options,
        owner_config,
        with_output,
    )
    from memory_pipeline.core.common import fs
    from memory_pipeline.core.privacy.forget import apply_forget
    from memory_pipeline.defs.forget import plan_for
    from memory_pipeline.defs.forget_run import rebuild_after_forget

    cfg = load_config(config)
    if output_dir:
        cfg = with_output(cfg, output_dir)
    if cfg.output_uri:
        fs.configure_s3(object_store_options())
    plan = plan_for(owner_config(cfg, owner), contact)
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
