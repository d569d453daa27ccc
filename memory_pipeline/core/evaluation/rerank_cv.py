"""The learned turn reranker under leave-one-conversation-out: trained per fold, scored out
of fold, and the final artifact trained on every conversation.

Fold *g* takes the configuration the sweep selected without *g* (``CrossValidation.folds``),
trains the logistic model (core/retrieval/rerank.py) on the candidates of every other
conversation's questions under that configuration, and reranks *g*'s: no question is ever
scored by a model or a configuration that saw it. The pooled out-of-fold values are the
procedure "sweep, select, train" on a new conversation, and sit in the CV table beside
``cv:selected`` as ``cv:selected+rerank``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from memory_pipeline.core.evaluation import metrics as M
from memory_pipeline.core.evaluation.evalsets import EvalQuestion
from memory_pipeline.core.retrieval.config import SearchConfig
from memory_pipeline.core.retrieval.rerank import CANDIDATES, FEATURES, Reranker, rerank, train
from memory_pipeline.core.retrieval.searcher import turn_weights
from memory_pipeline.core.retrieval.timeexpr import parse_query
from memory_pipeline.core.retrieval.turns import mix_splade

RERANK_LABEL = "cv:selected+rerank"


@dataclass
class QuestionRows:
    """One question's candidates under one configuration: features, labels, the fused
    turns (message ids, best first) and its session ranking."""

    x: np.ndarray
    y: np.ndarray
    turns: list[str]
    sessions: list[str]


class FeatureCache:
    """Features per (configuration, question), computed once: folds share configurations."""

    def __init__(self, searcher: Any, units: Any, cands: Mapping[str, Any]) -> None:
        self.s = searcher
        self.units = units
        self.cands = cands
        self._parsed: dict[str, Any] = {}
        self._rows: dict[tuple[str, str], QuestionRows] = {}

    def _query(self, q: EvalQuestion) -> tuple[tuple[str, ...], np.ndarray | None]:
        if q.question_id not in self._parsed:
            now = q.as_of or self.s.latest
            parsed = parse_query(q.question, now=now, speakers=self.s.known_speakers)
            tmask = self.s.time_mask(parsed, 0.0)[0] if parsed.filters else None
            self._parsed[q.question_id] = (tuple(parsed.speakers), tmask)
        return self._parsed[q.question_id]

    def rows(self, cfg: SearchConfig, q: EvalQuestion) -> QuestionRows:
        key = (cfg.name, q.question_id)
        if key not in self._rows:
            ti = self.s.turn_index
            cand = self.cands[q.question_id]
            fused = ti.fuse(
                cand.ranking(cfg),
                self.s.position,
                self.s.chunk_ids,
                mix_splade(cand.turn["turn"], cand.turn.get("splade"), cfg.splade),
                cand.turn["turn_ctx"],
                turn_weights(cfg),
                max(CANDIDATES, 20),
            )
            speakers, tmask = self._query(q)
            x = ti.features(fused, CANDIDATES, speakers, tmask)
            mids = [m for m, _ in fused.turns]
            evidence = {r for r, g in q.gold.items() if g >= 1}
            y = np.array([self.units.ref_of[m] in evidence for m in mids[: len(x)]], float)
            self._rows[key] = QuestionRows(x, y, mids, self.units.sessions(fused.chunks))
        return self._rows[key]


def as_turn_config(cfg: SearchConfig) -> SearchConfig:
    """``cfg`` with turns from the turn index (a highlights configuration keeps its chunk
    ranking and gets the default turn weights), without the reranker."""
    return replace(cfg, turns="index", rerank=False)


def fit(
    cache: FeatureCache, cfg: SearchConfig, train_on: Sequence[EvalQuestion], **provenance
) -> Reranker:
    """The model trained on ``train_on`` under ``cfg`` (rows weighted per question)."""
    xs, ys, gs = [], [], []
    for q in train_on:
        r = cache.rows(cfg, q)
        if len(r.x):
            xs.append(r.x)
            ys.append(r.y)
            gs += [q.question_id] * len(r.x)
    x = np.vstack(xs) if xs else np.zeros((0, len(FEATURES)))
    y = np.concatenate(ys) if ys else np.zeros(0)
    return train(x, y, gs, provenance={"config": cfg.name, **provenance})


def question_values(
    q: EvalQuestion, rows: QuestionRows, model: Reranker | None, units: Any, ks: Sequence[int]
) -> dict[tuple[str, str, int], float | None]:
    """Turn, session and units evidence recall at ``ks`` of one question, reranked."""
    order = [m for m, _ in rerank([(m, 0.0) for m in rows.turns], rows.x, model)]
    refs = units.refs(order, max(ks))
    evidence = [r for r, g in q.gold.items() if g >= 1]
    out: dict[tuple[str, str, int], float | None] = {}
    for k in ks:
        t = M.evidence_recall_at_k(refs, evidence, None, k)
        s = M.evidence_recall_at_k(rows.sessions, evidence, units.session_refs, k)
        out[("turn", "evidence_recall", k)] = t
        out[("session", "evidence_recall", k)] = s
        out[("units", "evidence_recall", k)] = None if t is None or s is None else (t + s) / 2
    return out


@dataclass(frozen=True)
class RerankCV:
    oof: dict[tuple[str, str, int], list[float | None]]  # metric -> value per question
    final: Reranker  # trained on every conversation under the shipped configuration


def cross_validate_reranker(
    searcher: Any,
    units: Any,
    cands: Mapping[str, Any],
    scored: Sequence[EvalQuestion],
    folds: Mapping[str, str],
    selected: str,
    by_name: Mapping[str, SearchConfig],
    ks: Sequence[int],
    data: Mapping[str, Any] | None = None,
) -> RerankCV | None:
    """Out-of-fold values of "select, then train the reranker" and the final model (None
    without a turn index)."""
    if getattr(searcher, "turn_index", None) is None:
        return None
    cache = FeatureCache(searcher, units, cands)
    keys = [(lv, "evidence_recall", k) for k in ks for lv in ("turn", "session", "units")]
    oof: dict[tuple[str, str, int], list[float | None]] = {k: [None] * len(scored) for k in keys}
    for held, name in folds.items():
        cfg = as_turn_config(by_name[name])
        train_on = [q for q in scored if q.corpus_id != held]
        model = fit(cache, cfg, train_on, held_out=held)
        for i, q in enumerate(scored):
            if q.corpus_id == held:
                vals = question_values(q, cache.rows(cfg, q), model, units, ks)
                for key in keys:
                    oof[key][i] = vals[key]
    cfg = as_turn_config(by_name[selected])
    final = fit(
        cache,
        cfg,
        scored,
        trained_on=dict(data or {}),
        questions=len(scored),
        conversations=sorted({q.corpus_id for q in scored}),
    )
    return RerankCV(oof, final)
