"""Candidates and scoring units: what every swept configuration re-ranks and how a ranking
is scored against a question's gold.

Candidate lists are computed once per question and retriever (``gather``); a configuration is
then a cheap fusion of them. :class:`Units` maps hits to turns, sessions and chunks so one
ranking is scored at each level (``question_scores``), and ``summary_rows_for`` turns the
per-question values into the summary table with bootstrap CIs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pyarrow as pa

from memory_pipeline.core.common.representations import REPRESENTATIONS
from memory_pipeline.core.evaluation import metrics as M
from memory_pipeline.core.evaluation.evalsets import EvalQuestion
from memory_pipeline.core.evaluation.evaluate_configs import POOL, Config
from memory_pipeline.core.retrieval.config import SearchConfig
from memory_pipeline.core.retrieval.fusion import Ranked, fold, linear_fusion, rrf
from memory_pipeline.core.retrieval.query import (
    boost_chunks,
    boost_turns,
    prf_bm25_ranked,
    speakers_in,
    strip_question,
)
from memory_pipeline.core.retrieval.searcher import TURN_CHUNKS, turn_weights
from memory_pipeline.core.retrieval.turns import mix_splade

# Query-understanding options (retrieval.query) swept on top of a few base configurations
# (``query_variants``): each is one SearchConfig field set, so the CV selection can pick it.
QUERY_VARIANTS: tuple[dict, ...] = (
    {"speaker_boost": 0.1},
    {"speaker_boost": 0.3},
    {"strip_question": True},
    {"prf_terms": 10},
    {"speaker_boost": 0.3, "prf_terms": 10},
    {"speaker_boost": 0.3, "strip_question": True},
)
PRF_SWEEP = tuple(sorted({v["prf_terms"] for v in QUERY_VARIANTS if "prf_terms" in v}))
PRF_REP = "raw_text"  # the representation PRF lists are gathered for (the default's BM25)


@dataclass
class Candidates:
    """Each retriever's top-POOL chunk list for one question, its turn index scores
    (``turn``: every turn's BM25 on ``turn`` / ``turn_ctx``; empty without a turn index) and,
    for the query options, the lists of the stripped question, the PRF-expanded BM25 lists
    and the named speakers."""

    bm25: dict[str, Ranked] = field(default_factory=dict)
    dense: dict[str, Ranked] = field(default_factory=dict)
    turn: dict[str, np.ndarray] = field(default_factory=dict)
    prf: dict[tuple[str, int], Ranked] = field(default_factory=dict)
    stripped: Candidates | None = None
    names: tuple[str, ...] = ()
    speakers_of: Callable[[str], Sequence[str]] | None = None

    def ranking(self, cfg: Config) -> Ranked:
        if cfg.strip_question and self.stripped is not None:
            return self.stripped.ranking(replace(cfg, strip_question=False))
        ranked = self._fused(cfg)
        if cfg.speaker_boost and self.speakers_of is not None:
            ranked = boost_chunks(ranked, self.speakers_of, self.names, cfg.speaker_boost)
        return ranked

    def _fused(self, cfg: Config) -> Ranked:
        lexical = self.bm25.get(cfg.bm25_rep, [])
        if cfg.prf_terms and (cfg.bm25_rep, cfg.prf_terms) in self.prf:
            lexical = self.prf[(cfg.bm25_rep, cfg.prf_terms)]
        if cfg.family == "bm25":
            return lexical
        if cfg.family == "dense":
            return self.dense.get(cfg.dense_rep, [])
        b = self.dense.get(cfg.dense_rep, [])
        if cfg.family == "linear":
            return linear_fusion(lexical, b, cfg.beta)
        return rrf([lexical, b], k=cfg.rrf_k)

    def pool(self) -> set[str]:
        return {c for r in [*self.bm25.values(), *self.dense.values()] for c, _ in r}


def gather(
    searcher,
    questions: Sequence[EvalQuestion],
    dense_reps: Sequence[str],
    progress: Callable[[int], None] | None = None,
    *,
    query_options: bool = False,
) -> dict[str, Candidates]:
    """Candidate lists of every retriever for every question (scoped to its corpus); with
    ``query_options`` also those of the stripped question and the PRF-expanded BM25."""
    out: dict[str, Candidates] = {}
    names = {q.question_id: speakers_in(q.question, searcher.known_speakers) for q in questions}
    stripped = {q.question_id: strip_question(q.question, names[q.question_id]) for q in questions}
    for rep in dense_reps:  # one batched embedding call instead of one call per question
        texts = [q.question for q in questions]
        searcher.prime_queries(texts + (list(stripped.values()) if query_options else []), rep)

    def speakers_of(c: str) -> Sequence[str]:
        return searcher.chunk(c)["speakers"]

    for i, q in enumerate(questions):
        scope = q.scope or {"conversation_id": q.corpus_id}
        mask = searcher.scope_mask(scope.get("contact_id"), scope.get("conversation_id"))
        cand = _candidates(searcher, q.question, mask, dense_reps)
        if query_options:
            cand.names = tuple(names[q.question_id])
            cand.speakers_of = speakers_of
            for n in PRF_SWEEP:
                if PRF_REP in searcher.bm25:
                    cand.prf[(PRF_REP, n)] = prf_bm25_ranked(
                        searcher, q.question, PRF_REP, mask, POOL, n
                    )
            s = stripped[q.question_id]
            cand.stripped = cand if s == q.question else _candidates(searcher, s, mask, dense_reps)
            if cand.stripped is not cand:
                cand.stripped.names, cand.stripped.speakers_of = cand.names, speakers_of
        out[q.question_id] = cand
        if progress:
            progress(i + 1)
    return out


def _candidates(searcher, text: str, mask, dense_reps: Sequence[str]) -> Candidates:
    cand = Candidates()
    for rep in REPRESENTATIONS:
        if rep in searcher.bm25:
            cand.bm25[rep] = searcher.bm25_ranked(text, rep, mask, POOL)
    for rep in dense_reps:
        cand.dense[rep] = searcher.dense_ranked(text, rep, mask, POOL)
    ti = getattr(searcher, "turn_index", None)
    if ti is not None:
        tokens = searcher.bm25["raw_text"].tokenizer.tokenize(text)
        for rep in ("turn", "turn_ctx"):
            cand.turn[rep] = ti.scores(tokens, rep, mask).dense(np.float32)
        splade = getattr(searcher, "splade_scores", None)
        scores = splade(text, mask) if splade is not None else None
        if scores is not None:  # the learned sparse channel (English, when built)
            cand.turn["splade"] = scores.dense(np.float32)
    return cand


def query_variants(bases: Sequence[SearchConfig]) -> list[SearchConfig]:
    """Each base configuration with each of QUERY_VARIANTS on (duplicates dropped: a PRF
    variant of a dense-only base is the base)."""
    out: dict[str, SearchConfig] = {}
    for base in bases:
        for v in QUERY_VARIANTS:
            cfg = replace(base, **v)
            if cfg.query_suffix:
                out.setdefault(cfg.name, cfg)
    return list(out.values())


class Units:
    """Maps chunk rankings to the units the metrics need (sessions, turns, evidence refs)."""

    def __init__(self, searcher) -> None:
        self.s = searcher
        chunks = searcher.chunk_ids
        self.session_of = {c: searcher.session_of_chunk(c) for c in chunks}
        self.ref_of = searcher.source_refs()
        self.session_refs: dict[str, set[str]] = {}
        for c in chunks:
            refs = (self.ref_of[m] for m in searcher.messages_of_chunk(c))
            self.session_refs.setdefault(self.session_of[c], set()).update(refs)
        self._chunk_turns: dict[tuple, list[str]] = {}
        self.s_turn_chunks = TURN_CHUNKS
        self.chunk_refs = {
            c: {self.ref_of[m] for m in searcher.messages_of_chunk(c)} for c in chunks
        }

    def sessions(self, ranked: Ranked) -> list[str]:
        return [s for s, _ in fold(ranked, self.session_of)]

    def turns(
        self,
        ranked: Ranked,
        query: str,
        depth: int = 20,
        boost: tuple[Sequence[str], float] = ((), 0.0),
    ) -> list[str]:
        """Evidence refs of the turn-level ranking (Searcher.ranked_turns, then the named
        speakers' turns boosted by ``boost`` = (names, weight)), cached per question, top
        chunks and boost: the sweep re-ranks the same chunks many times."""
        names, w = tuple(boost[0]), boost[1] if boost[0] else 0.0
        key = (query, tuple(ranked[: self.s_turn_chunks]), names, w)  # ids and scores matter
        refs = self._chunk_turns.get(key)
        if refs is None:
            refs, seen = [], set()
            turns = self.s.ranked_turns(ranked, query)
            turns = boost_turns(turns, lambda m: self.s.message(m)["sender"], names, w)
            for mid, _ in turns:
                ref = self.ref_of[mid]
                if ref not in seen:
                    seen.add(ref)
                    refs.append(ref)
            self._chunk_turns[key] = refs
        return refs[:depth]

    def refs(self, message_ids: Sequence[str], depth: int = 20) -> list[str]:
        """Evidence refs of a turn ranking, first occurrence kept."""
        out, seen = [], set()
        for m in message_ids:
            ref = self.ref_of[m]
            if ref not in seen:
                seen.add(ref)
                out.append(ref)
                if len(out) == depth:
                    break
        return out

    def rank(
        self, cand: Candidates, cfg: SearchConfig, query: str, depth: int = 20
    ) -> tuple[Ranked, list[str]]:
        """(chunk ranking, turn evidence refs) of ``cfg`` for one question: the turn index
        fused across granularities when ``cfg.turns`` is ``index`` and the corpus has one
        (as ``Searcher.rank_turns``), else the chunk ranking and its highlights."""
        ranked = cand.ranking(cfg)
        boost = (cand.names, cfg.speaker_boost)
        ti = getattr(self.s, "turn_index", None)
        if cfg.turns != "index" or ti is None or not cand.turn:
            return ranked, self.turns(ranked, query, depth, boost=boost)
        fused = ti.fuse(
            ranked,
            self.s.position,
            self.s.chunk_ids,
            mix_splade(cand.turn["turn"], cand.turn.get("splade"), cfg.splade),
            cand.turn["turn_ctx"],
            turn_weights(cfg),
            depth * 2,
        )
        turns = boost_turns(
            fused.turns, lambda m: self.s.message(m)["sender"], cand.names, cfg.speaker_boost
        )
        return fused.chunks, self.refs([m for m, _ in turns], depth)


def question_scores(
    q: EvalQuestion,
    ranked: Ranked,
    units: Units,
    ks: Sequence[int],
    full: bool,
    turn_boost: tuple[Sequence[str], float] = ((), 0.0),
    turns: Sequence[str] | None = None,
    sessions: Sequence[str] | None = None,
) -> list[tuple[str, str, int, float | None]]:
    """(level, metric, k, value) rows for one question and one ranking (``turns``: its turn
    evidence refs, default the highlights of ``ranked`` with ``turn_boost`` = the named
    speakers and the configuration's ``speaker_boost``). Level ``units`` is the mean of the
    turn and session evidence recall: the selection metric, as the goals ask for both.
    ``sessions``: the session ranking when it is not the fold of ``ranked`` (a search's
    own session hits, folded from more chunks than it returns)."""
    rows: list[tuple[str, str, int, float | None]] = []
    if sessions is None:
        sessions = units.sessions(ranked)
    if q.gold_kind == "session_id":
        for k in ks:
            rows.append(("session", "recall", k, M.recall_at_k(sessions, q.gold, k)))
            if full:
                rows.append(("session", "hit", k, M.hit_at_k(sessions, q.gold, k)))
        return rows
    evidence = [r for r, g in q.gold.items() if g >= 1]
    if turns is None:
        turns = units.turns(ranked, q.question, depth=max(ks), boost=turn_boost)
    for k in ks:
        t = M.evidence_recall_at_k(turns, evidence, None, k)
        s = M.evidence_recall_at_k(sessions, evidence, units.session_refs, k)
        rows.append(("turn", "evidence_recall", k, t))
        rows.append(("session", "evidence_recall", k, s))
        both = None if t is None or s is None else (t + s) / 2
        rows.append(("units", "evidence_recall", k, both))
        if full:
            chunk_ids = [c for c, _ in ranked]
            chunk_gold = {
                c: max((q.gold.get(r, 0) for r in units.chunk_refs[c]), default=0)
                for c in chunk_ids
            }
            chunk_gold = {c: g for c, g in chunk_gold.items() if g}
            if not chunk_gold:  # gold chunks outside the ranking still count as missed
                chunk_gold = {"<unretrieved>": 2}
            for name, fn in (("recall", M.recall_at_k), ("hit", M.hit_at_k), ("mrr", M.mrr_at_k)):
                rows.append(("chunk", name, k, fn(chunk_ids, chunk_gold, k)))
            rows.append(("chunk", "ndcg", k, M.ndcg_at_k(chunk_ids, chunk_gold, k)))
            rows.append(("turn", "recall_any", k, M.recall_any(turns, q.gold, k)))
            rows.append(("turn", "recall_all", k, M.recall_all(turns, q.gold, k)))
    return rows


SUMMARY_SCHEMA = pa.schema(
    [
        ("config", pa.string()),
        ("split", pa.string()),
        ("qtype", pa.string()),
        ("level", pa.string()),
        ("metric", pa.string()),
        ("k", pa.int32()),
        ("mean", pa.float64()),
        ("ci_lo", pa.float64()),
        ("ci_hi", pa.float64()),
        ("n", pa.int32()),
    ]
)


def summary_rows_for(
    vals: Mapping[tuple[str, str, str, int], Mapping[str, float | None]],
    split_of: Mapping[str, str],
    qtype_of: Mapping[str, str],
    resamples: int,
    seed: int,
    *,
    skip_empty_qtypes: bool = False,
) -> list[dict]:
    """SUMMARY_SCHEMA rows: per (config, level, metric, k) and per split (dev, test, all) x
    qtype ("all" and each type), the mean of the question values with its bootstrap CI."""
    qtypes = sorted(set(qtype_of.values()))
    rows = []
    for (name, level, metric, k), values in vals.items():
        for split in ("dev", "test", "all"):
            for qt in ["all", *qtypes]:
                sel = [
                    v
                    for qid, v in values.items()
                    if (split == "all" or split_of[qid] == split)
                    and (qt == "all" or qtype_of[qid] == qt)
                ]
                n = sum(v is not None for v in sel)
                if skip_empty_qtypes and not n and qt != "all":
                    continue
                mean, lo, hi = M.bootstrap_ci(sel, n_resamples=resamples, seed=seed)
                rows.append(
                    {
                        "config": name,
                        "split": split,
                        "qtype": qt,
                        "level": level,
                        "metric": metric,
                        "k": k,
                        "mean": mean,
                        "ci_lo": lo,
                        "ci_hi": hi,
                        "n": n,
                    }
                )
    return rows


@dataclass
class EvalRun:
    """Everything an evaluation produced: tables for Parquet/DuckDB and the report, plus meta."""

    tables: dict[str, pa.Table]
    meta: dict
