"""Scoring the memory evaluation's questions: the searcher glue (a memoized search, the
selected chunk configuration's ranking), each contact's memories as a corpus, and the values
every memory retriever and context strategy gets per question.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from memory_pipeline.core.common.representations import REPRESENTATIONS
from memory_pipeline.core.context.packs import MemoryHit, MemoryIndex, build_context
from memory_pipeline.core.evaluation import metrics as M
from memory_pipeline.core.evaluation.evalsets import EvalQuestion
from memory_pipeline.core.evaluation.evaluate import (
    POOL,
    Candidates,
    Config,
    EvalRun,
    Units,
    query_variants,
    sweep_configs,
)
from memory_pipeline.core.evaluation.memory_eval_parts import (
    BETA,
    ER,
    K_MEMORIES,
    MEMORY_DEPTH,
    MEMORY_KS,
    Values,
    chunk_pack,
    context_recall,
    memory_refs,
    memory_sessions,
    pack_message_ids,
)
from memory_pipeline.core.evaluation.memory_eval_rows import _from_run
from memory_pipeline.core.retrieval.query import understood_rank


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
