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
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from memory_pipeline.core.common.representations import REPRESENTATIONS
from memory_pipeline.core.context.packs import (
    SEP,
    STRATEGIES,
    MemoryHit,
    MemoryIndex,
    build_context,
    utf16_len,
)
from memory_pipeline.core.evaluation import metrics as M
from memory_pipeline.core.evaluation.evalsets import EvalQuestion
from memory_pipeline.core.evaluation.evaluate import (
    POOL,
    SUMMARY_SCHEMA,
    Candidates,
    Config,
    EvalRun,
    Units,
    query_variants,
    summary_rows_for,
    sweep_configs,
)
from memory_pipeline.core.retrieval.query import understood_rank

__all__ = [
    "BUDGETS",
    "DIFF_SCHEMA",
    "MEMORY_KS",
    "STRATEGIES",
    "chunk_pack",
    "context_recall",
    "memory_refs",
    "memory_sessions",
    "pack_message_ids",
    "run_memory_evaluation",
]

BUDGETS = (1_000, 2_000, 4_000, 8_000, 16_000, 24_000)
MEMORY_KS = (1, 5, 10)
DIFF_KS = (5, 10)
MEMORY_DEPTH = 100  # memories ranked per question for the retrieval metrics
K_MEMORIES = 10  # memories put in a context pack (build_context's default)
BETA = 0.5
ER = "evidence_recall"

DIFF_SCHEMA = pa.schema(
    [
        ("config_a", pa.string()),
        ("config_b", pa.string()),
        ("level", pa.string()),
        ("metric", pa.string()),
        ("k", pa.int32()),
        ("split", pa.string()),
        ("mean_diff", pa.float64()),
        ("ci_lo", pa.float64()),
        ("ci_hi", pa.float64()),
        ("p_value", pa.float64()),
        ("n", pa.int32()),
    ]
)
PER_QUESTION_SCHEMA = pa.schema(
    [
        ("config", pa.string()),
        ("split", pa.string()),
        ("question_id", pa.string()),
        ("corpus_id", pa.string()),
        ("qtype", pa.string()),
        ("level", pa.string()),
        ("metric", pa.string()),
        ("k", pa.int32()),
        ("value", pa.float64()),
    ]
)


# ----------------------------------------------------------------------------- pure parts


def memory_sessions(hits: Iterable[MemoryHit]) -> list[str]:
    """Source sessions of ranked memories, first occurrence kept (rank order)."""
    return list(dict.fromkeys(h.session_id for h in hits))


def memory_refs(hits: Iterable[MemoryHit], ref_of: Mapping[str, str | None]) -> list[str]:
    """Evidence refs of the ranked memories' messages, in rank order, first occurrence kept
    (messages without a ref, or unknown to ``ref_of``, are skipped)."""
    out: dict[str, None] = {}
    for h in hits:
        for mid in h.message_ids:
            ref = ref_of.get(mid)
            if ref is not None:
                out.setdefault(ref, None)
    return list(out)


def pack_message_ids(pack: Any) -> set[str]:
    """Every message a context pack contains (any piece's citation, memory pieces too)."""
    return {m for p in pack.pieces for m in p.citation.message_ids}


def context_recall(
    message_ids: Iterable[str], ref_of: Mapping[str, str | None], evidence: Collection[str]
) -> float | None:
    """Share of the evidence refs whose message is among ``message_ids``; None without
    evidence."""
    wanted = set(evidence)
    if not wanted:
        return None
    covered = {ref_of.get(m) for m in message_ids}
    return len(wanted & covered) / len(wanted)


def chunk_pack(
    ranked_chunks: Sequence[str], text_of: Mapping[str, str], budget: int
) -> tuple[list[str], int]:
    """(chunks, UTF-16 size): whole chunks in rank order, texts joined by the pack
    separator, stopping at the first chunk that would take the pack over ``budget``."""
    chosen: list[str] = []
    used = 0
    for cid in ranked_chunks:
        cost = utf16_len(text_of[cid]) + (len(SEP) if chosen else 0)
        if used + cost > budget:
            break
        chosen.append(cid)
        used += cost
    return chosen, used


# ----------------------------------------------------------------------------- searcher glue


class _MemoSearch:
    """The searcher with ``search`` memoized: every budget and strategy of a question asks
    the same independent search, which does not depend on either."""

    def __init__(self, searcher: Any) -> None:
        self._inner = searcher
        self._cache: dict[tuple, Any] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def search(self, query: str, k: int = 5, **kwargs: Any) -> Any:
        key = (query, k, tuple(sorted((n, repr(v)) for n, v in kwargs.items())))
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = self._inner.search(query, k, **kwargs)
        return hit

    def forget(self) -> None:
        self._cache.clear()


def _config_by_name(name: str) -> Config:
    """The chunk configuration a selection's name starts with: the memory evaluation's
    baseline is a chunk ranking, so the turn-index part (`` turns=... lift=... +rerank``) of
    a selected name does not change it."""
    name = name.split(" turns=")[0]
    plain = sweep_configs(REPRESENTATIONS, REPRESENTATIONS)
    for cfg in plain:
        if cfg.name == name:
            return cfg
    for cfg in query_variants(plain):  # a query-understanding variant was selected
        if cfg.name == name:
            return cfg
    raise KeyError(f"unknown chunk configuration {name!r}")


def _chunk_ranking(searcher: Any, q: EvalQuestion, cfg: Config) -> list[str]:
    scope = q.scope or {"conversation_id": q.corpus_id}
    mask = searcher.scope_mask(scope.get("contact_id"), scope.get("conversation_id"))
    if cfg.query_suffix:  # stripped question, PRF, speaker boost: as the search does it
        return [c for c, _ in understood_rank(searcher, q.question, cfg, mask)]
    cand = Candidates()
    if cfg.uses_bm25 and cfg.bm25_rep in searcher.bm25:
        cand.bm25[cfg.bm25_rep] = searcher.bm25_ranked(q.question, cfg.bm25_rep, mask, POOL)
    if cfg.uses_dense:
        cand.dense[cfg.dense_rep] = searcher.dense_ranked(q.question, cfg.dense_rep, mask, POOL)
    return [c for c, _ in cand.ranking(cfg)]


# ----------------------------------------------------------------------------- the run


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


# (series, level, metric, k) -> question id -> value; a series is "memory[bm25]",
# "context[split]", "chunks[<selected>]", ...
Values = dict[tuple[str, str, str, int], dict[str, float | None]]


def _splits_and_chunk_values(
    run: EvalRun, selected: str, scored: Sequence[EvalQuestion], seed: int
) -> tuple[dict[str, str], dict[tuple[str, str, int], dict[str, float | None]]]:
    """(question -> split, the selected chunk config's values) from ``run``, so both
    evaluations pair the same questions; when ``run`` lacks a question, the split is
    recomputed the way run_evaluation makes it (it scored every question)."""
    split_of, chunk_vals = _from_run(run, selected)
    missing = [q.question_id for q in scored if q.question_id not in split_of]
    if missing:
        dev, _ = M.split_questions(
            [q.question_id for q in scored], [q.corpus_id for q in scored], seed=seed
        )
        dev_set = set(dev)
        split_of = {q.question_id: ("dev" if q.question_id in dev_set else "test") for q in scored}
    return split_of, chunk_vals


class _Corpus:
    """Conversation of each session and message, contacts of each conversation: what keeps
    a question's hits and pack messages inside its own conversation (a LoCoMo ref like
    "D1:3" exists in every sample)."""

    def __init__(self, searcher: Any) -> None:
        self.conv_of_session = {
            sid: searcher.session(sid)["conversation_id"] for sid in searcher.session_ids()
        }
        self.conv_of_message: dict[str, str] = {}
        for i, mids in enumerate(searcher.message_ids):
            for m in mids:
                self.conv_of_message[m] = searcher.conversation[i]
        self.contacts: dict[str, set[str]] = defaultdict(set)
        convs_of_contact: dict[str, set[str]] = defaultdict(set)
        for conv, contact in zip(searcher.conversation, searcher.contact, strict=True):
            self.contacts[conv].add(contact)
            convs_of_contact[contact].add(conv)
        self.shared = sorted(c for c, convs in convs_of_contact.items() if len(convs) > 1)

    def scope(self, q: EvalQuestion) -> tuple[str | None, str | None]:
        """(conversation, contact) a question is asked in; the contact is inferred when its
        conversation has exactly one, because memories are searched per contact."""
        scope = q.scope or {"conversation_id": q.corpus_id}
        conv = scope.get("conversation_id")
        contact = scope.get("contact_id")
        if contact is None and conv is not None and len(self.contacts.get(conv, ())) == 1:
            contact = next(iter(self.contacts[conv]))
        return conv, contact

    def hits_in(self, hits: list[MemoryHit], conv: str | None) -> list[MemoryHit]:
        """The memory hits whose source session is in ``conv`` (all when None)."""
        return [h for h in hits if conv is None or self.conv_of_session.get(h.session_id) == conv]

    def messages_in(self, mids: Iterable[str], conv: str | None) -> list[str]:
        """The messages of ``mids`` that are in ``conv`` (all when None)."""
        return [m for m in mids if conv is None or self.conv_of_message.get(m) == conv]

    def notes(self) -> list[str]:
        """What the report must say about the corpus: hits dropped from shared contacts."""
        notes = []
        if self.shared:
            notes.append(
                f"{len(self.shared)} contact(s) span several conversations: memory hits of other "
                "conversations were dropped after the search"
            )
        return notes


class _QuestionScorer:
    """Scores one question at a time into :attr:`vals`: memory retrieval, then the context
    packs at every strategy and budget, then the chunk baseline's packs at every budget."""

    def __init__(
        self,
        searcher: Any,
        memories: MemoryIndex,
        cfg: Config | None,
        baseline: str,
        budgets: Sequence[int],
        strategies: Sequence[str],
    ) -> None:
        self.searcher = searcher
        self.memories = memories
        self.memo = _MemoSearch(searcher)
        self.units = Units(searcher)
        self.corpus = _Corpus(searcher)
        self.cfg = cfg
        self.baseline = baseline
        self.budgets = budgets
        self.strategies = strategies
        self.text_of = dict(zip(searcher.chunk_ids, searcher.raw_text, strict=True))
        self.vals: Values = defaultdict(dict)

    @classmethod
    def for_run(
        cls,
        searcher: Any,
        memories: MemoryIndex,
        selected: str,
        budgets: Sequence[int],
        strategies: Sequence[str],
    ) -> _QuestionScorer:
        """The scorer of a run whose selected chunk configuration is ``selected`` (none: no
        chunk baseline)."""
        cfg = _config_by_name(selected) if selected else None
        return cls(searcher, memories, cfg, f"chunks[{selected}]", budgets, strategies)

    def memory_hits(
        self, q: EvalQuestion, conv: str | None, contact: str | None
    ) -> dict[str, list[MemoryHit]]:
        """The question's ranked memories, BM25 alone and fused with the searcher."""
        search = self.memories.search
        return {
            "memory[bm25]": self.corpus.hits_in(
                search(q.question, MEMORY_DEPTH, contact=contact), conv
            ),
            "memory[fused]": self.corpus.hits_in(
                search(q.question, MEMORY_DEPTH, contact=contact, searcher=self.memo, beta=BETA),
                conv,
            ),
        }

    def score_memory_hits(
        self, qid: str, ranked: Mapping[str, list[MemoryHit]], evidence: list[str]
    ) -> None:
        """Zero hits, and session / turn evidence recall at MEMORY_KS, of each ranking."""
        vals, units, ref_of = self.vals, self.units, self.units.ref_of
        for name, hits in ranked.items():
            sessions = memory_sessions(hits)
            refs = memory_refs(hits, ref_of)
            vals[(name, "memory", "zero_hits", 0)][qid] = 0.0 if hits else 1.0
            for k in MEMORY_KS:
                vals[(name, "session", ER, k)][qid] = M.evidence_recall_at_k(
                    sessions, evidence, units.session_refs, k
                )
                vals[(name, "turn", ER, k)][qid] = M.evidence_recall_at_k(refs, evidence, None, k)

    def score_context_packs(
        self,
        q: EvalQuestion,
        conv: str | None,
        contact: str | None,
        top: list[MemoryHit],
        evidence: list[str],
    ) -> None:
        """Evidence recall and size of a pack per strategy and budget, built from the top
        fused memories (one pack per budget: a smaller one cannot be cut from a larger)."""
        ref_of = self.units.ref_of
        for strategy in self.strategies:
            for budget in self.budgets:
                pack = build_context(
                    self.memo,
                    self.memories,
                    q.question,
                    budget,
                    strategy=strategy,
                    k_memories=K_MEMORIES,
                    contact=contact,
                    hits=top,
                )
                name = f"context[{strategy}]"
                got = self.corpus.messages_in(pack_message_ids(pack), conv)
                self.vals[(name, "context", ER, budget)][q.question_id] = context_recall(
                    got, ref_of, evidence
                )
                self.vals[(name, "context", "utf16", budget)][q.question_id] = float(pack.utf16)

    def score_chunk_baseline(self, q: EvalQuestion, conv: str | None, evidence: list[str]) -> None:
        """Evidence recall and size of the selected chunk ranking packed whole, per budget."""
        if self.cfg is None:
            return
        searcher, baseline = self.searcher, self.baseline
        chunks = _chunk_ranking(searcher, q, self.cfg)
        for budget in self.budgets:
            chosen, size = chunk_pack(chunks, self.text_of, budget)
            mids = self.corpus.messages_in(
                (m for c in chosen for m in searcher.message_ids[searcher.position[c]]), conv
            )
            self.vals[(baseline, "context", ER, budget)][q.question_id] = context_recall(
                mids, self.units.ref_of, evidence
            )
            self.vals[(baseline, "context", "utf16", budget)][q.question_id] = float(size)


def _score_questions(
    scorer: _QuestionScorer,
    scored: Sequence[EvalQuestion],
    log: Callable[[str], None],
    t0: float,
) -> tuple[float, float]:
    """Score every question into ``scorer.vals``; returns the seconds spent in memory search
    and in packing (the two costs worth reporting), and logs progress every 200 questions."""
    t_search = t_packs = 0.0
    for n, q in enumerate(scored, 1):
        conv, contact = scorer.corpus.scope(q)
        evidence = [r for r, g in q.gold.items() if g >= 1]
        ts = time.perf_counter()
        ranked = scorer.memory_hits(q, conv, contact)
        t_search += time.perf_counter() - ts
        scorer.score_memory_hits(q.question_id, ranked, evidence)
        tp = time.perf_counter()
        scorer.score_context_packs(q, conv, contact, ranked["memory[fused]"][:K_MEMORIES], evidence)
        scorer.score_chunk_baseline(q, conv, evidence)
        t_packs += time.perf_counter() - tp
        scorer.memo.forget()  # the memoized searches belong to this question only
        if n % 200 == 0:
            log(f"eval: memories: {n}/{len(scored)} questions ({time.perf_counter() - t0:.0f}s)")
    return t_search, t_packs


def _per_question_rows(
    vals: Values, scored: Sequence[EvalQuestion], split_of: Mapping[str, str]
) -> list[dict]:
    """One PER_QUESTION_SCHEMA row per series and scored question (value None when the
    question has none), series in the order they were first scored."""
    return [
        {
            "config": name,
            "split": split_of[q.question_id],
            "question_id": q.question_id,
            "corpus_id": q.corpus_id,
            "qtype": q.qtype,
            "level": level,
            "metric": metric,
            "k": k,
            "value": values.get(q.question_id),
        }
        for (name, level, metric, k), values in vals.items()
        for q in scored
    ]


def _from_run(
    run: EvalRun, selected: str
) -> tuple[dict[str, str], dict[tuple[str, str, int], dict[str, float | None]]]:
    """(question -> split, (level, metric, k) -> question -> value) of the selected config."""
    table = run.tables.get("per_question")
    split_of: dict[str, str] = {}
    values: dict[tuple[str, str, int], dict[str, float | None]] = defaultdict(dict)
    if table is None or table.num_rows == 0 or "config" not in table.column_names:
        return split_of, values
    cols = table.select(["config", "split", "question_id", "level", "metric", "k", "value"])
    for r in cols.to_pylist():
        if r["config"] != selected:
            continue
        split_of[r["question_id"]] = r["split"]
        values[(r["level"], r["metric"], r["k"])][r["question_id"]] = r["value"]
    return split_of, values


def _diff_rows(
    vals: Mapping[tuple[str, str, str, int], Mapping[str, float | None]],
    chunk_vals: Mapping[tuple[str, str, int], Mapping[str, float | None]],
    split_of: Mapping[str, str],
    selected: str,
    baseline: str,
    budgets: Sequence[int],
    resamples: int,
    seed: int,
) -> list[dict]:
    test = sorted(q for q, s in split_of.items() if s == "test")
    pairs: list[tuple[str, str, str, int, Mapping, Mapping]] = []
    for name in ("memory[bm25]", "memory[fused]"):
        for level in ("session", "turn"):
            for k in DIFF_KS:
                a = vals.get((name, level, ER, k))
                b = chunk_vals.get((level, ER, k))
                if a is not None and b:
                    pairs.append((name, selected, level, k, a, b))
    contexts = sorted({key[0] for key in vals if key[1] == "context" and key[0] != baseline})
    for name in contexts:
        for budget in budgets:
            a = vals.get((name, "context", ER, budget))
            b = vals.get((baseline, "context", ER, budget))
            if a is not None and b is not None:
                pairs.append((name, baseline, "context", budget, a, b))
    rows = []
    for name_a, name_b, level, k, a, b in pairs:
        xs = [a.get(q) for q in test]
        ys = [b.get(q) for q in test]
        n = sum(x is not None and y is not None for x, y in zip(xs, ys, strict=True))
        d, lo, hi, p = M.paired_bootstrap_diff(xs, ys, n_resamples=resamples, seed=seed)
        rows.append(
            {
                "config_a": name_a,
                "config_b": name_b,
                "level": level,
                "metric": ER,
                "k": k,
                "split": "test",
                "mean_diff": d,
                "ci_lo": lo,
                "ci_hi": hi,
                "p_value": p,
                "n": n,
            }
        )
    return rows


def context_curve(rows: Iterable[Mapping[str, Any]], config: str, split: str = "test") -> list:
    """(budget, mean) of a context config's evidence recall, budgets ascending (report and
    tests)."""
    out = [
        (r["k"], r["mean"])
        for r in rows
        if r["config"] == config
        and r["split"] == split
        and r["qtype"] == "all"
        and r["level"] == "context"
        and r["metric"] == ER
    ]
    return sorted(out)
