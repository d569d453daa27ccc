"""Score retrievers on labelled questions: sweep, select on dev, report on test, with CIs.

Works on any published pipeline output (a Searcher) and any EvalQuestion list: LoCoMo (gold =
dia_ids, i.e. message source_refs), the user's own JSONL questions, templated time queries
(gold = sessions). Candidate lists are computed once per question and retriever, then every
fusion configuration is a cheap re-ranking of them.
"""

from __future__ import annotations

import itertools
import math
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa

from memory_pipeline.core.common.representations import REPRESENTATIONS
from memory_pipeline.core.evaluation import crossval as CV
from memory_pipeline.core.evaluation import metrics as M
from memory_pipeline.core.evaluation.evalsets import EvalQuestion
from memory_pipeline.core.evaluation.rerank_cv import RERANK_LABEL, cross_validate_reranker
from memory_pipeline.core.retrieval.config import FIELDS as CONFIG_FIELDS
from memory_pipeline.core.retrieval.config import PRESETS, SearchConfig
from memory_pipeline.core.retrieval.fusion import Ranked, fold, linear_fusion, rrf
from memory_pipeline.core.retrieval.query import (
    boost_chunks,
    boost_turns,
    prf_bm25_ranked,
    speakers_in,
    strip_question,
)
from memory_pipeline.core.retrieval.searcher import TURN_CHUNKS, turn_weights

BETAS = tuple(round(0.05 * i, 2) for i in range(21))
RRF_KS = (10, 30, 60, 100)
KS = M.KS
POOL = 200
SWEEP_KS = (5, 10)
DEFAULT = SearchConfig()
# templated time queries rank with the SearchConfig field defaults (the search before the
# selection; their gold is the sessions in the window); their highlights are not scored
TIME_SEARCH = SearchConfig(highlights=0)


# One retrieval configuration of the sweep is a SearchConfig (its ``family`` and ``name``
# are what the tables report); ``Config`` is the sweep's historical name for it.
Config = SearchConfig


# Granularity fusion (SearchConfig.turns = "index"): the weights swept, over the chunk
# rankings the turn index is crossed with (BM25[raw_text] alone and linear fusions of it)
TURN_SELF = (0.4, 0.6)
TURN_CTX = (0.1, 0.2)
TURN_CHUNK = (0.3, 0.45)
LIFTS = (0.0, 0.2, 0.35)
TURN_BETAS = (0.9, 0.95)
TURN_DENSE_REPS = ("embedding_text", "summary")
TURN_BM25_REP = "raw_text"


def turn_configs(chunk_configs: Sequence[SearchConfig]) -> list[SearchConfig]:
    """The turn-index configurations of the sweep: the turn weights x lifts over a few
    chunk rankings of ``chunk_configs``, and the turn index alone (its own BM25 only: the
    single turn retriever the report compares with)."""
    bases = [
        c
        for c in chunk_configs
        if c.bm25_rep == TURN_BM25_REP
        and (
            c.family == "bm25"
            or (c.family == "linear" and c.beta in TURN_BETAS and c.dense_rep in TURN_DENSE_REPS)
        )
    ]
    out = []
    for b in bases:
        for ts, tc, tk, lift in itertools.product(TURN_SELF, TURN_CTX, TURN_CHUNK, LIFTS):
            out.append(
                replace(b, turns="index", turn_self=ts, turn_ctx=tc, turn_chunk=tk, lift=lift)
            )
    out += [replace(b, turns="index", turn_self=1.0, turn_ctx=0.0, turn_chunk=0.0, lift=0.0)
            for b in bases[:1]]
    return out


def turn_alone(configs: Sequence[SearchConfig]) -> str | None:
    """The name of the turn index alone in ``configs`` (None when not swept)."""
    for c in configs:
        if c.turns == "index" and c.turn_self == 1.0 and c.turn_ctx == c.turn_chunk == 0.0:
            return c.name
    return None


def sweep_configs(
    reps: Sequence[str] = REPRESENTATIONS,
    dense_reps: Sequence[str] = REPRESENTATIONS,
    base: SearchConfig = DEFAULT,
    turns: bool = True,
) -> list[SearchConfig]:
    """Single retrievers, linear fusion over every pairing x beta, RRF over every pairing x k,
    each as ``base`` with its ranking fields replaced (so a sweep point is a search the API
    can run as it is); with ``turns``, the granularity fusions of ``turn_configs`` too."""
    chunk = _chunk_configs(reps, dense_reps, base)
    return chunk + turn_configs(chunk) if turns else chunk


def _chunk_configs(
    reps: Sequence[str], dense_reps: Sequence[str], base: SearchConfig
) -> list[SearchConfig]:
    out = [replace(base, mode="bm25", bm25_rep=r) for r in reps]
    out += [replace(base, mode="dense", dense_rep=r) for r in dense_reps]
    for b, d in itertools.product(reps, dense_reps):
        pair = replace(base, mode="hybrid", bm25_rep=b, dense_rep=d)
        out += [replace(pair, fusion="linear", beta=beta) for beta in BETAS]
        out += [replace(pair, fusion="rrf", rrf_k=k) for k in RRF_KS]
    return out


def sweep_columns(cfg: SearchConfig) -> dict:
    """The fields of ``cfg`` its family ranks by (None for the others), as the sweep table
    lists them: a bm25 configuration has no dense representation, beta or RRF k (family
    ``turns``: a granularity fusion over that chunk ranking)."""
    return {
        # a granularity fusion is its own family: the fusion plot's beta curves stay chunk-only
        "family": "turns" if cfg.turns == "index" else cfg.family,
        "bm25_rep": cfg.bm25_rep if cfg.uses_bm25 else None,
        "dense_rep": cfg.dense_rep if cfg.uses_dense else None,
        "beta": cfg.beta if cfg.family == "linear" else None,
        "rrf_k": cfg.rrf_k if cfg.family == "rrf" else None,
        "speaker_boost": cfg.speaker_boost,
        "strip_question": cfg.strip_question,
        "prf_terms": cfg.prf_terms if cfg.uses_bm25 else 0,
    }


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
            cand.turn[rep] = ti.scores(tokens, rep, mask).astype(np.float32)
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
            cand.turn["turn"],
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
) -> list[tuple[str, str, int, float | None]]:
    """(level, metric, k, value) rows for one question and one ranking (``turns``: its turn
    evidence refs, default the highlights of ``ranked`` with ``turn_boost`` = the named
    speakers and the configuration's ``speaker_boost``). Level ``units`` is the mean of the
    turn and session evidence recall: the selection metric, as the goals ask for both."""
    rows: list[tuple[str, str, int, float | None]] = []
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


def run_evaluation(
    searcher,
    questions: Sequence[EvalQuestion],
    *,
    dense_reps: Sequence[str],
    time_questions: Sequence[EvalQuestion] = (),
    seed: int = 0,
    resamples: int = 5000,
    selection: tuple[str, str, int] = ("units", "evidence_recall", 5),
    log: Callable[[str], None] = print,
) -> EvalRun:
    """Sweep every configuration, select on the dev split, report on the test split.

    The phases, each its own function: split the questions (``split_dev_test``), gather
    every retriever's candidates once (``gather``), score every configuration on the sweep
    metrics (``sweep``), select on dev (``select``), score the reported configurations on
    every metric (``score_reported``), summarize them with CIs (``summarize``), then the
    other tables (``sweep_rows``, ``diff_rows``, ``ceiling_rows``, ``failure_rows``, the
    templated time queries) and the meta.
    """
    t0 = time.perf_counter()
    scored = [q for q in questions if q.scored]
    if not scored:
        return _time_only(searcher, time_questions, seed, resamples, t0)
    split = split_dev_test(scored, seed)
    log(f"eval: {len(scored)} scored questions ({len(split.dev)} dev / {len(split.test)} test)")
    cands = gather(searcher, scored, dense_reps, query_options=True)
    log(f"eval: candidates gathered in {time.perf_counter() - t0:.1f}s")
    units = Units(searcher)
    configs = sweep_configs(
        [r for r in REPRESENTATIONS if r in searcher.bm25],
        dense_reps,
        turns=getattr(searcher, "turn_index", None) is not None,
    )
    sweep_vals = sweep(configs, scored, cands, units, log)
    # query options on the packaged default and the dev split's best of each family: the
    # CV below selects among them and the plain configurations alike
    chosen = select(configs, sweep_vals, split, selection)
    by_name0 = {c.name: c for c in configs}
    # (the reranker is never swept: it is cross-validated on the selection below)
    bases = [
        replace(c, rerank=False)
        for c in (PRESETS["default"], *(by_name0[n] for n in chosen.best.values()))
    ]
    variants = [c for c in query_variants(bases) if c.name not in by_name0]
    sweep_vals.update(sweep(variants, scored, cands, units, log))
    configs = [*configs, *variants]
    log(f"eval: swept {len(variants)} query-understanding variants")
    chosen = select(configs, sweep_vals, split, selection)
    log(f"eval: selected on dev: {chosen.selected}")
    by_name = {c.name: c for c in configs}
    rr = None
    if len({q.corpus_id for q in scored}) >= 3 and selection in next(iter(sweep_vals.values())):
        folds = CV.leave_one_group_out(
            [c.name for c in configs], sweep_vals, [q.corpus_id for q in scored], selection
        )
        rr = cross_validate_reranker(
            searcher, units, cands, scored, folds.folds, folds.selected, by_name, SWEEP_KS
        )
    extra = {RERANK_LABEL: rr.oof} if rr is not None else {}
    cv = cross_validate(
        configs, sweep_vals, scored, selection, chosen, seed, resamples, extra=extra
    )
    if cv is not None:
        log(f"eval: leave-one-conversation-out selection: {cv.selected}")
    full_vals, per_question_rows = score_reported(
        [by_name[n] for n in chosen.reported], scored, cands, units, split
    )
    summary = summarize(chosen.reported, full_vals, scored, split, seed, resamples)
    time_rows = _time_query_rows(searcher, time_questions)  # templated time queries
    summary += _time_summary(time_rows, seed, resamples)
    tables = {
        "summary": pa.Table.from_pylist(summary, schema=SUMMARY_SCHEMA),
        "sweep": pa.Table.from_pylist(sweep_rows(configs, sweep_vals, split, resamples, seed)),
        "per_question": pa.Table.from_pylist(per_question_rows + time_rows),
        "diffs": pa.Table.from_pylist(diff_rows(chosen, full_vals, split, resamples, seed)),
        "ceiling": pa.Table.from_pylist(ceiling_rows(scored, cands, units)),
        "failures": pa.Table.from_pylist(
            failure_rows(chosen.selected, full_vals, scored, split), schema=FAILURES_SCHEMA
        ),
    }
    if cv is not None:
        tables["cv"] = pa.Table.from_pylist(cv.rows, schema=CV_SCHEMA)
        tables["cv_folds"] = pa.Table.from_pylist(
            [{"held_out": g, "selected": c} for g, c in cv.result.folds.items()]
        )
    meta = {
        "selected_config": chosen.selected,
        "selection_metric": f"{selection[0]} {selection[1]}@{selection[2]} (dev split)",
        "splits": {
            "dev": sorted({q.corpus_id for q in scored if q.question_id in split.dev}),
            "test": sorted({q.corpus_id for q in scored if q.question_id in split.test}),
        },
        "bootstrap": {"resamples": resamples, "seed": seed},
        "configurations": len(configs),
        "query_variants": len(variants),
        "questions": len(scored),
        "seconds": round(time.perf_counter() - t0, 1),
        "best": chosen.best,
    }
    if cv is not None:
        meta["cv"] = {
            "protocol": "leave-one-conversation-out: each fold selects on every other "
            "conversation and scores the held-out one; CIs resample conversations, then "
            "questions within them",
            "selection_metric": f"{selection[0]} {selection[1]}@{selection[2]}",
            "selected": cv.selected,
            "selected_config": {f: getattr(by_name[cv.selected], f) for f in CONFIG_FIELDS},
            "folds": cv.result.folds,
            "conversations": len(cv.result.folds),
            "figures": cv.figures,
            "columns": {
                label: name
                for label, name in (
                    ("default (CV)", "cv:selected"),
                    ("default + reranker (CV)", RERANK_LABEL if rr is not None else None),
                    ("BM25 chunks", f"bm25[{TURN_BM25_REP}]"),
                    ("dense chunks", "dense[embedding_text]"),
                    ("turn index alone", turn_alone(configs)),
                    ("packaged default", PRESETS["default"].name),
                    ("old rrf default", PRESETS["rrf"].name),
                )
                if name is not None
            },
        }
        if rr is not None:
            with_rr = CV.mean_on(rr.oof[selection], [True] * len(scored))
            without = CV.mean_on(cv.result.oof[selection], [True] * len(scored))
            # the reranker ships when, out of fold, it beats the procedure without it
            use = with_rr > without
            meta["cv"]["rerank"] = {"oof_with": with_rr, "oof_without": without, "use": use}
            if use and meta["cv"]["selected_config"]["turns"] == "index":
                meta["cv"]["selected_config"]["rerank"] = True
                meta["cv"]["selected"] = replace(by_name[cv.selected], rerank=True).name
            meta["reranker"] = rr.final.to_dict()
        if not meta["cv"]["selected_config"].get("rerank"):
            # the reranker has its own speaker feature; without it, the speaker boost is
            # chosen by its own leave-one-conversation-out on turn R@5
            boost = cross_validate_speaker_boost(
                by_name[cv.selected], scored, cands, units, seed, resamples
            )
            if boost is not None:
                chosen_cfg = boost["config"]
                log(f"eval: speaker boost by leave-one-conversation-out: {chosen_cfg.name}")
                meta["cv"]["selected"] = chosen_cfg.name
                meta["cv"]["selected_config"] = {f: getattr(chosen_cfg, f) for f in CONFIG_FIELDS}
                meta["cv"]["figures"]["cv:speaker_boost"] = boost["figures"]
                meta["cv"]["speaker_boost"] = {k: v for k, v in boost.items() if k != "config"}
    if math.isnan(chosen.selected_dev_mean):
        meta["notes"] = ["no dev questions with gold: selection is arbitrary"]
    return EvalRun(tables, meta)


# -- the phases of run_evaluation -----------------------------------------------------------

SweepValues = dict[str, dict[tuple[str, str, int], list]]  # config -> metric key -> per question
FullValues = dict[str, dict[tuple[str, str, int], dict[str, float | None]]]  # ... -> {qid: v}


@dataclass(frozen=True)
class Split:
    """The dev/test split of the scored questions (by corpus, so no conversation is in both)."""

    ids: list[str]  # scored question ids, in question order
    dev_ids: list[str]
    test_ids: list[str]
    dev: frozenset[str]
    test: frozenset[str]
    split_of: dict[str, str]  # question id -> "dev" | "test"


def split_dev_test(scored: Sequence[EvalQuestion], seed: int) -> Split:
    """Split the scored questions into dev (selection) and test (reporting) by corpus."""
    ids = [q.question_id for q in scored]
    dev_ids, test_ids = M.split_questions(ids, [q.corpus_id for q in scored], seed=seed)
    dev, test = frozenset(dev_ids), frozenset(test_ids)
    split_of = {qid: ("dev" if qid in dev else "test") for qid in ids}
    return Split(ids, dev_ids, test_ids, dev, test, split_of)


def sweep(
    configs: Sequence[SearchConfig],
    scored: Sequence[EvalQuestion],
    cands: Mapping[str, Candidates],
    units: Units,
    log: Callable[[str], None] = print,
) -> SweepValues:
    """Every configuration's sweep metrics (SWEEP_KS, the cheap ones) per question, in
    question order: what selection and the sweep table read."""
    sweep_vals: SweepValues = {}
    for n, cfg in enumerate(configs, 1):
        vals: dict[tuple[str, str, int], list] = defaultdict(list)
        for q in scored:
            ranked, turns = units.rank(cands[q.question_id], cfg, q.question)
            for level, metric, k, v in question_scores(
                q, ranked, units, SWEEP_KS, full=False, turns=turns
            ):
                vals[(level, metric, k)].append(v)
        sweep_vals[cfg.name] = vals
        if n % 50 == 0:
            log(f"eval: swept {n}/{len(configs)} configurations")
    return sweep_vals


@dataclass(frozen=True)
class Selection:
    """What was selected on dev: the overall best, the best of each family, and the list of
    configurations reported in full (selected first, duplicates removed)."""

    selected: str
    best: dict[str, str]  # family -> config name
    reported: list[str]
    selected_dev_mean: float  # NaN when no dev question has gold for the selection metric


def select(
    configs: Sequence[SearchConfig],
    sweep_vals: SweepValues,
    split: Split,
    selection: tuple[str, str, int],
) -> Selection:
    """The best configuration on the dev split for the ``selection`` metric (ties: the
    shorter name, then the name), overall and per family."""

    on_dev = [qid in split.dev for qid in split.ids]

    def best(family: str | None) -> str:
        pool = [
            c.name
            for c in configs
            if family is None
            or (family == "turns" and c.turns == "index")
            or (c.family == family and c.turns != "index")
        ]
        return CV.select_on(pool, sweep_vals, on_dev, selection)

    selected = best(None)
    families = {f: best(f) for f in ("bm25", "dense", "linear", "rrf")}
    if any(c.turns == "index" for c in configs):
        families["turns"] = best("turns")
    reported = list(dict.fromkeys([selected, *families.values()]))
    dev_mean = CV.mean_on(sweep_vals[selected][selection], on_dev)
    return Selection(selected, families, reported, dev_mean)


def score_reported(
    reported: Sequence[SearchConfig],
    scored: Sequence[EvalQuestion],
    cands: Mapping[str, Candidates],
    units: Units,
    split: Split,
) -> tuple[FullValues, list[dict]]:
    """Every metric at every K of the reported configurations: values per question (for the
    summary, differences and failures) and the per-question table rows."""
    per_question_rows: list[dict] = []
    full_vals: FullValues = {}
    for cfg in reported:
        name = cfg.name
        vals: dict[tuple[str, str, int], dict[str, float | None]] = defaultdict(dict)
        for q in scored:
            ranked, turns = units.rank(cands[q.question_id], cfg, q.question)
            for level, metric, k, v in question_scores(
                q, ranked, units, KS, full=True, turns=turns
            ):
                vals[(level, metric, k)][q.question_id] = v
                per_question_rows.append(
                    {
                        "config": name,
                        "split": split.split_of[q.question_id],
                        "question_id": q.question_id,
                        "corpus_id": q.corpus_id,
                        "qtype": q.qtype,
                        "level": level,
                        "metric": metric,
                        "k": k,
                        "value": v,
                    }
                )
        full_vals[name] = vals
    return full_vals, per_question_rows


def sweep_rows(
    configs: Sequence[SearchConfig],
    sweep_vals: SweepValues,
    split: Split,
    resamples: int,
    seed: int,
) -> list[dict]:
    """The sweep table: every configuration's sweep metrics on dev and on test, with CIs."""
    rows = []
    for cfg in configs:
        for key, values in sweep_vals[cfg.name].items():
            for part, keep in (("dev", split.dev), ("test", split.test)):
                sel = [v for v, qid in zip(values, split.ids, strict=True) if qid in keep]
                mean, lo, hi = M.bootstrap_ci(sel, n_resamples=resamples, seed=seed)
                rows.append(
                    {
                        **sweep_columns(cfg),
                        "config": cfg.name,
                        "split": part,
                        "level": key[0],
                        "metric": key[1],
                        "k": key[2],
                        "mean": mean,
                        "ci_lo": lo,
                        "ci_hi": hi,
                    }
                )
    return rows


def diff_rows(
    chosen: Selection, full_vals: FullValues, split: Split, resamples: int, seed: int
) -> list[dict]:
    """Paired bootstrap differences on test: the selected configuration against each other
    reported one, turn and session evidence recall at 5 and 10."""
    rows = []
    selected = chosen.selected
    for other in chosen.reported[1:]:
        for level in ("turn", "session"):
            for k in (5, 10):
                key = (level, "evidence_recall", k)
                a = [full_vals[selected][key].get(q) for q in split.test_ids]
                b = [full_vals[other][key].get(q) for q in split.test_ids]
                d, lo, hi, p = M.paired_bootstrap_diff(a, b, n_resamples=resamples, seed=seed)
                rows.append(
                    {
                        "config_a": selected,
                        "config_b": other,
                        "level": level,
                        "metric": "evidence_recall",
                        "k": k,
                        "split": "test",
                        "mean_diff": d,
                        "ci_lo": lo,
                        "ci_hi": hi,
                        "p_value": p,
                    }
                )
    return rows


def ceiling_rows(
    scored: Sequence[EvalQuestion], cands: Mapping[str, Candidates], units: Units
) -> list[dict]:
    """Oracle ceiling: the evidence recall of everything any retriever put in its top-POOL
    (no fusion can find more), per level and question type."""
    acc: dict[tuple[str, str], list[float]] = defaultdict(list)
    for q in scored:
        pool = cands[q.question_id].pool()
        covered = set().union(*(units.chunk_refs[c] for c in pool)) if pool else set()
        sessions = {units.session_of[c] for c in pool}
        covered_s = set().union(*(units.session_refs[s] for s in sessions)) if sessions else set()
        ev = [r for r, g in q.gold.items() if g >= 1]
        for level, cov in (("turn", covered), ("session", covered_s)):
            r = len(set(ev) & cov) / len(ev)
            acc[(level, "all")].append(r)
            acc[(level, q.qtype)].append(r)
    return [
        {"level": lv, "qtype": qt, "pool": POOL, "oracle_recall": float(np.mean(v)), "n": len(v)}
        for (lv, qt), v in sorted(acc.items())
    ]


FAILURES_SCHEMA = pa.schema(
    [
        ("config", pa.string()),
        ("question_id", pa.string()),
        ("corpus_id", pa.string()),
        ("qtype", pa.string()),
        ("question", pa.string()),
        ("level", pa.string()),
        ("split", pa.string()),
        ("found_at_5", pa.bool_()),
        ("found_at_10", pa.bool_()),
        ("found_at_20", pa.bool_()),
    ]
)


def failure_rows(
    selected: str, full_vals: FullValues, scored: Sequence[EvalQuestion], split: Split
) -> list[dict]:
    """Questions the selected configuration misses at 5 (turn or session level), with
    whether it finds them at 10 or 20."""
    rows = []
    sel_vals = full_vals[selected]
    for q in scored:
        for level in ("turn", "session"):
            at = {
                k: sel_vals[(level, "evidence_recall", k)].get(q.question_id) for k in (5, 10, 20)
            }
            if at[5] == 0:
                rows.append(
                    {
                        "config": selected,
                        "question_id": q.question_id,
                        "corpus_id": q.corpus_id,
                        "qtype": q.qtype,
                        "question": q.question,
                        "level": level,
                        "split": split.split_of[q.question_id],
                        "found_at_5": False,
                        "found_at_10": bool(at[10]),
                        "found_at_20": bool(at[20]),
                    }
                )
    return rows


def summarize(
    reported: Sequence[str],
    full_vals: FullValues,
    scored: Sequence[EvalQuestion],
    split: Split,
    seed: int,
    resamples: int,
) -> list[dict]:
    """SUMMARY_SCHEMA rows of the reported configurations (every metric, per split and
    question type, with bootstrap CIs)."""
    qtype_of = {q.question_id: q.qtype for q in scored}
    return summary_rows_for(
        {(n, *key): values for n in reported for key, values in full_vals[n].items()},
        split.split_of,
        qtype_of,
        resamples,
        seed,
    )


def _time_query_rows(searcher, time_questions: Sequence[EvalQuestion]) -> list[dict]:
    rows = []
    for q in time_questions:
        k = max(20, len(q.gold))
        res = searcher.search(q.question, k, TIME_SEARCH, conversation=q.corpus_id, as_of=q.as_of)
        got = [h.session_id for h in res.sessions]
        rows.append(
            {
                "config": "time_filters",
                "split": "all",
                "question_id": q.question_id,
                "corpus_id": q.corpus_id,
                "qtype": q.qtype,
                "level": "session",
                "metric": "recall",
                "k": k,
                "value": M.recall_at_k(got, q.gold, k),
            }
        )
    return rows


def _time_summary(rows: list[dict], seed: int, resamples: int) -> list[dict]:
    out = []
    for qt in ["all", *sorted({r["qtype"] for r in rows})]:
        sel = [r["value"] for r in rows if qt == "all" or r["qtype"] == qt]
        if not sel:
            continue
        mean, lo, hi = M.bootstrap_ci(sel, n_resamples=resamples, seed=seed)
        out.append(
            {
                "config": "time_filters",
                "split": "all",
                "qtype": qt,
                "level": "session",
                "metric": "recall",
                "k": 0,
                "mean": mean,
                "ci_lo": lo,
                "ci_hi": hi,
                "n": len(sel),
            }
        )
    return out


# Columns of a templated time query's per_question row: explicit, because a corpus with no
# sessions has no time queries, and a schema-less empty table is a Parquet file no reader
# (DuckDB: "Need at least one non-root column") can open.
TIME_ROW_SCHEMA = pa.schema(
    [
        ("config", pa.string()),
        ("split", pa.string()),
        ("question_id", pa.string()),
        ("corpus_id", pa.string()),
        ("qtype", pa.string()),
        ("level", pa.string()),
        ("metric", pa.string()),
        ("k", pa.int64()),
        ("value", pa.float64()),
    ]
)


def _time_only(searcher, time_questions, seed: int, resamples: int, t0: float) -> EvalRun:
    rows = _time_query_rows(searcher, time_questions)
    tables = {
        "summary": pa.Table.from_pylist(
            _time_summary(rows, seed, resamples), schema=SUMMARY_SCHEMA
        ),
        # inferred as before when there are rows; the explicit schema only when there are none
        "per_question": pa.Table.from_pylist(rows) if rows else TIME_ROW_SCHEMA.empty_table(),
    }
    meta = {
        "questions": 0,
        "time_queries": len(rows),
        "bootstrap": {"resamples": resamples, "seed": seed},
        "seconds": round(time.perf_counter() - t0, 1),
    }
    return EvalRun(tables, meta)


# -- leave-one-conversation-out cross-validation ------------------------------------------

SPEAKER_BOOSTS = (0.0, 0.1, 0.3, 0.5, 1.0)
TURN_SELECTION = ("turn", "evidence_recall", 5)


def cross_validate_speaker_boost(
    base: SearchConfig,
    scored: Sequence[EvalQuestion],
    cands: Mapping[str, Candidates],
    units: Units,
    seed: int,
    resamples: int,
) -> dict | None:
    """The speaker boost of the selected ranking, chosen by leave-one-conversation-out on
    turn evidence R@5 (None below three conversations).

    Where every chunk holds both speakers (LoCoMo, most 1:1 chats) the boost moves only
    turns, never chunks or sessions, so the session-level selection cannot see it: it is
    selected on the level it changes, given the ranking the main selection chose."""
    groups = [q.corpus_id for q in scored]
    if len(set(groups)) < 3:
        return None
    configs = [replace(base, speaker_boost=w) for w in SPEAKER_BOOSTS]
    names = [c.name for c in configs]
    vals = sweep(configs, scored, cands, units, log=lambda _m: None)
    result = CV.leave_one_group_out(names, vals, groups, TURN_SELECTION)
    rows = CV.cv_rows(
        result,
        vals,
        groups,
        [q.qtype for q in scored],
        references=names,
        n_resamples=min(resamples, 2000),
        seed=seed,
    )
    figures = {
        f"{config} | {label}": triple
        for config, by_label in cv_figures(rows, qtypes=("all",)).items()
        for label, triple in by_label.items()
    }
    return {
        "config": next(c for c in configs if c.name == result.selected),
        "protocol": "given the selected ranking, each fold picks the speaker boost with the "
        "best turn evidence R@5 on the other conversations",
        "candidates": list(SPEAKER_BOOSTS),
        "folds": result.folds,
        "figures": figures,
    }


CV_SCHEMA = pa.schema(
    [
        ("config", pa.string()),
        ("qtype", pa.string()),
        ("level", pa.string()),
        ("metric", pa.string()),
        ("k", pa.int32()),
        ("mean", pa.float64()),
        ("ci_lo", pa.float64()),
        ("ci_hi", pa.float64()),
        ("n", pa.int64()),
        ("conversations", pa.int64()),
    ]
)
# what the figures of the selection record (and the README) quote
CV_FIGURES = (("turn", "evidence_recall", 5), ("session", "evidence_recall", 5))


@dataclass(frozen=True)
class CrossValidated:
    """The cross-validation of one evaluation: the folds, its table rows and key figures."""

    result: CV.CrossValidation
    rows: list[dict]
    figures: dict[str, dict[str, list[float]]]  # config -> "level metric@k [qtype]" -> CI

    @property
    def selected(self) -> str:
        return self.result.selected


def cross_validate(
    configs: Sequence[SearchConfig],
    sweep_vals: SweepValues,
    scored: Sequence[EvalQuestion],
    selection: tuple[str, str, int],
    chosen: Selection,
    seed: int,
    resamples: int,
    extra: Mapping[str, Mapping[tuple[str, str, int], Sequence[float | None]]] | None = None,
) -> CrossValidated | None:
    """Leave-one-conversation-out selection over the sweep (None below three conversations,
    where a fold would select on one conversation). ``extra``: out-of-fold values of other
    procedures (the learned reranker), reported as rows beside ``cv:selected``; the fixed
    references are the packaged default, the old ``rrf`` default, each family's best and
    each single retriever (BM25 and dense chunks, the turn index alone)."""
    groups = [q.corpus_id for q in scored]
    if len(set(groups)) < 3:
        return None
    aligned = {
        name: {k: v for k, v in vals.items() if len(v) == len(scored)}
        for name, vals in sweep_vals.items()
    }
    if selection not in next(iter(aligned.values())):
        return None
    names = [c.name for c in configs]
    result = CV.leave_one_group_out(names, aligned, groups, selection)
    singles = [
        f"bm25[{TURN_BM25_REP}]",
        "dense[embedding_text]",
        turn_alone(configs),
    ]
    wanted = [
        PRESETS["default"].name,
        PRESETS["rrf"].name,
        PRESETS["highlights"].name,
        *chosen.best.values(),
        *singles,
    ]
    references = [n for n in dict.fromkeys(wanted) if n in aligned]
    for label, vals in (extra or {}).items():
        aligned[label] = {k: v for k, v in vals.items() if len(v) == len(scored)}
        references.append(label)
    rows = CV.cv_rows(
        result,
        aligned,
        groups,
        [q.qtype for q in scored],
        references=references,
        n_resamples=min(resamples, 2000),
        seed=seed,
    )
    return CrossValidated(result, rows, cv_figures(rows))


def cv_figures(
    rows: Sequence[Mapping[str, Any]], qtypes: Sequence[str] | None = None
) -> dict[str, dict[str, list[float]]]:
    """The recorded figures of CV rows: per config, ``"level metric@k [qtype]"`` -> mean and
    CI rounded to 4 places, for the CV_FIGURES metrics (and ``qtypes``, default every one):
    what the selection's provenance and the README quote."""
    figures: dict[str, dict[str, list[float]]] = defaultdict(dict)
    for r in rows:
        if (r["level"], r["metric"], r["k"]) in CV_FIGURES and (
            qtypes is None or r["qtype"] in qtypes
        ):
            label = f"{r['level']} {r['metric']}@{r['k']} [{r['qtype']}]"
            figures[r["config"]][label] = [
                round(r["mean"], 4),
                round(r["ci_lo"], 4),
                round(r["ci_hi"], 4),
            ]
    return dict(figures)
