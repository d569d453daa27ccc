"""Score memory-based retrieval and context-pack recall beside the chunk retrievers.

Runs after :func:`memory_pipeline.core.evaluation.evaluate.run_evaluation` on the same Searcher and
questions, and reuses its dev/test split (read from its ``per_question`` table) and its
selected chunk configuration, so every number here is comparable with the chunk tables.

**Memory retrieval** (``memory[bm25]``: :meth:`MemoryIndex.search` alone; ``memory[fused]``:
with the searcher, ``beta`` 0.5). The ranked memories of a question's conversation map to

* sessions (each memory's source session, first occurrence kept): *session evidence recall@k*
  is the share of gold evidence refs whose session is among the first k sessions — the
  definition of ``evaluate.question_scores``;
* evidence refs (the refs of each memory's messages, in rank order, first occurrence kept):
  *turn evidence recall@k* is the share of gold refs among the first k refs.

``zero_hits`` (level ``memory``, k 0) is 1 for a question where the search found no memory.

**Context packs** (``context[<strategy>]``, strategy neighbors | sessions | split | none):
:func:`build_context` with the question's top ``K_MEMORIES`` fused memory hits, at each
budget. Context *evidence recall* is the share of the question's gold refs whose message is
in the pack (any piece's ``citation.message_ids``, memory pieces included); ``utf16`` is the
rendered size. The baseline ``chunks[<selected config>]`` packs the selected chunk
configuration's ranking whole chunk by whole chunk (raw_text joined like pack pieces, no
citation headers) and stops at the first chunk that would overrun the budget.

Rows follow ``evaluate.SUMMARY_SCHEMA``. For context rows ``level`` is ``context`` and
**``k`` is the budget in UTF-16 units** (not a rank cutoff). ``memory_diffs`` has the paired
bootstrap differences on the test split: each memory variant minus the selected chunk
configuration (session/turn evidence recall @5, @10), and each context strategy minus the
chunk baseline at the same budget. Packs are built for every budget (a smaller pack cannot be
derived from a larger one: the split strategy halves what remains, and memories or sessions
that do not fit are skipped or truncated), with the independent search of the question
memoized so each budget and strategy reuses it.

Memory search and packs see every memory of the question's contact, superseded ones included
(no ``as_of``), as the chunk retrievers see every chunk; hits from another conversation of
the same contact are dropped so a LoCoMo ref like "D1:3" is never matched across samples.

This module runs the evaluation (``run_memory_evaluation``); its settings, schemas and pure
parts are in ``memory_eval_parts``, the per-question scoring in ``memory_eval_score`` and the
tables built from the scores in ``memory_eval_rows``. The names other code uses are
re-exported here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from memory_pipeline.core.context.packs import STRATEGIES, MemoryIndex
from memory_pipeline.core.evaluation.evalsets import EvalQuestion
from memory_pipeline.core.evaluation.evaluate import SUMMARY_SCHEMA, EvalRun, summary_rows_for
from memory_pipeline.core.evaluation.memory_eval_parts import (
    BUDGETS,
    DIFF_SCHEMA,
    MEMORY_KS,
    PER_QUESTION_SCHEMA,
    chunk_pack,
    context_recall,
    memory_refs,
    memory_sessions,
    pack_message_ids,
)
from memory_pipeline.core.evaluation.memory_eval_rows import (
    _diff_rows,
    _per_question_rows,
    context_curve,
)
from memory_pipeline.core.evaluation.memory_eval_score import (
    _QuestionScorer,
    _score_questions,
    _splits_and_chunk_values,
)

__all__ = [
    "BUDGETS",
    "DIFF_SCHEMA",
    "MEMORY_KS",
    "PER_QUESTION_SCHEMA",
    "STRATEGIES",
    "chunk_pack",
    "context_curve",
    "context_recall",
    "memory_refs",
    "memory_sessions",
    "pack_message_ids",
    "run_memory_evaluation",
]


def run_memory_evaluation(
    searcher: Any,
    questions: Sequence[EvalQuestion],
    run: EvalRun,
    *,
    memories: MemoryIndex | None = None,
    budgets: Sequence[int] = BUDGETS,
    strategies: Sequence[str] = STRATEGIES,
    seed: int = 0,
    resamples: int = 5000,
    log: Callable[[str], None] = print,
) -> EvalRun:
    """Memory retrieval and context-pack recall of the scored questions, with bootstrap CIs
    per split (run's own dev/test split, and all) and question type, and paired differences
    against run's selected chunk configuration on the test split.

    Tables: ``memory_summary`` (SUMMARY_SCHEMA), ``memory_diffs``, ``memory_per_question``.

    Phases: take the split and the chunk scores from ``run``; index the corpus by
    conversation and contact; score every question (memory search, packs, chunk baseline)
    into one value per (series, question); then the statistics and tables over those values.
    """
    t0 = time.perf_counter()
    scored = [q for q in questions if q.scored]
    selected = str(run.meta.get("selected_config") or "")
    split_of, chunk_vals = _splits_and_chunk_values(run, selected, scored, seed)
    if memories is None:
        memories = MemoryIndex.for_searcher(searcher)
    scorer = _QuestionScorer.for_run(searcher, memories, selected, budgets, strategies)
    if scorer.cfg is not None and scorer.cfg.uses_dense:  # a no-op when run_evaluation did it
        searcher.prime_queries([q.question for q in scored], scorer.cfg.dense_rep)
    log(
        f"eval: memories: {len(memories)} memories, {len(scored)} questions, "
        f"budgets {list(budgets)}, strategies {list(strategies)}"
    )
    t_search, t_packs = _score_questions(scorer, scored, log, t0)

    t_stats = time.perf_counter()
    vals, baseline = scorer.vals, scorer.baseline
    qtype_of = {q.question_id: q.qtype for q in scored}
    summary = summary_rows_for(vals, split_of, qtype_of, resamples, seed, skip_empty_qtypes=True)
    diffs = _diff_rows(vals, chunk_vals, split_of, selected, baseline, budgets, resamples, seed)
    per_question = _per_question_rows(vals, scored, split_of)
    seconds = time.perf_counter() - t0
    log(
        f"eval: memories done in {seconds:.1f}s (memory search {t_search:.1f}s, packs "
        f"{t_packs:.1f}s, statistics {time.perf_counter() - t_stats:.1f}s)"
    )
    tables = {
        "memory_summary": pa.Table.from_pylist(summary, schema=SUMMARY_SCHEMA),
        "memory_diffs": pa.Table.from_pylist(diffs, schema=DIFF_SCHEMA),
        "memory_per_question": pa.Table.from_pylist(per_question, schema=PER_QUESTION_SCHEMA),
    }
    meta = {
        "memories": len(memories),
        "memory_questions": len(scored),
        "memory_budgets": list(budgets),
        "memory_strategies": list(strategies),
        "memory_baseline": baseline,
        "memory_seconds": round(seconds, 1),
        "memory_timing": {
            "search": round(t_search, 1),
            "packs": round(t_packs, 1),
            "statistics": round(time.perf_counter() - t_stats, 1),
        },
        "memory_notes": scorer.corpus.notes(),
    }
    return EvalRun(tables, meta)
