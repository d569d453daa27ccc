"""Score retrievers on labelled questions: sweep, select on dev, report on test, with CIs.

Works on any published pipeline output (a Searcher) and any EvalQuestion list: LoCoMo (gold =
dia_ids, i.e. message source_refs), the user's own JSONL questions, templated time queries
(gold = sessions). Candidate lists are computed once per question and retriever, then every
fusion configuration is a cheap re-ranking of them.

This module runs an evaluation (``run_evaluation``); the swept configurations live in
``evaluate_configs``, candidates and scoring units in ``evaluate_units``, the sweep, the
selection and the table rows in ``evaluate_rows``, and cross-validation in ``evaluate_cv``.
The names other code uses are re-exported here.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa

from memory_pipeline.core.common.representations import REPRESENTATIONS
from memory_pipeline.core.evaluation import crossval as CV
from memory_pipeline.core.evaluation.evalsets import EvalQuestion
from memory_pipeline.core.evaluation.evaluate_configs import (
    LIFTS,
    POOL,
    SWEEP_KS,
    TURN_BETAS,
    TURN_BM25_REP,
    TURN_CHUNK,
    TURN_CTX,
    TURN_DENSE_REPS,
    TURN_SELF,
    Config,
    sweep_columns,
    sweep_configs,
    turn_alone,
)
from memory_pipeline.core.evaluation.evaluate_cv import (
    CV_SCHEMA,
    cross_validate,
    cross_validate_speaker_boost,
)
from memory_pipeline.core.evaluation.evaluate_rows import (
    FAILURES_SCHEMA,
    Selection,
    Split,
    _time_only,
    _time_query_rows,
    _time_summary,
    ceiling_rows,
    diff_rows,
    failure_rows,
    score_reported,
    select,
    split_dev_test,
    summarize,
    sweep,
    sweep_rows,
)
from memory_pipeline.core.evaluation.evaluate_shipped import (
    MIN_SELECTION_QUESTIONS,
    SHIPPED,
    SMALL_CORPUS_NOTE,
    answerability_meta,
    score_shipped,
)
from memory_pipeline.core.evaluation.evaluate_units import (
    QUERY_VARIANTS,
    SUMMARY_SCHEMA,
    Candidates,
    EvalRun,
    Units,
    gather,
    query_variants,
    question_scores,
    summary_rows_for,
)
from memory_pipeline.core.evaluation.rerank_cv import RERANK_LABEL, cross_validate_reranker
from memory_pipeline.core.retrieval.config import FIELDS as CONFIG_FIELDS
from memory_pipeline.core.retrieval.config import PRESETS

__all__ = [
    "Candidates",
    "Config",
    "EvalRun",
    "LIFTS",
    "POOL",
    "QUERY_VARIANTS",
    "SUMMARY_SCHEMA",
    "TURN_BETAS",
    "TURN_CHUNK",
    "TURN_CTX",
    "TURN_DENSE_REPS",
    "TURN_SELF",
    "Units",
    "cross_validate_speaker_boost",
    "gather",
    "query_variants",
    "question_scores",
    "run_evaluation",
    "summary_rows_for",
    "sweep",
    "sweep_columns",
    "sweep_configs",
    "turn_alone",
]


def splade_weights(searcher: Any) -> tuple[float, ...]:
    """The SPLADE weights the sweep tries: off, and the packaged default's weight when this
    corpus has SPLADE vectors (an English corpus); only off otherwise, so a re-selection
    accepted from this sweep can keep the channel the default ships with."""
    shipped = PRESETS["default"].splade
    if shipped and getattr(searcher, "splade_index", None) is not None:
        return (0.0, shipped)
    return (0.0,)


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
    """Score the shipped default as it ships, then sweep every configuration, select on the
    dev split and report the comparisons on the test split.

    The headline (``meta["headline_config"]``) is the shipped default, asked through
    ``Searcher.search`` (``evaluate_shipped``). With fewer than ``MIN_SELECTION_QUESTIONS``
    scored questions nothing is selected: there is no dev/test split (every question is
    "test"), the comparisons are each family's best on the same questions (in-sample) and
    ``meta["small_corpus"]`` says so.

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
    small = len(scored) < MIN_SELECTION_QUESTIONS
    if small:
        ids = [q.question_id for q in scored]
        split = Split(ids, ids, ids, frozenset(ids), frozenset(ids), dict.fromkeys(ids, "test"))
        log(f"eval: {len(scored)} scored questions: {SMALL_CORPUS_NOTE}")
    else:
        split = split_dev_test(scored, seed)
        log(f"eval: {len(scored)} scored questions ({len(split.dev)} dev / {len(split.test)} test)")
    cands = gather(searcher, scored, dense_reps, query_options=True)
    log(f"eval: candidates gathered in {time.perf_counter() - t0:.1f}s")
    units = Units(searcher)
    configs = sweep_configs(
        [r for r in REPRESENTATIONS if r in searcher.bm25],
        dense_reps,
        turns=getattr(searcher, "turn_index", None) is not None,
        splade=splade_weights(searcher),
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
    if (
        not small
        and len({q.corpus_id for q in scored}) >= 3
        and selection in next(iter(sweep_vals.values()))
    ):
        folds = CV.leave_one_group_out(
            [c.name for c in configs], sweep_vals, [q.corpus_id for q in scored], selection
        )
        rr = cross_validate_reranker(
            searcher, units, cands, scored, folds.folds, folds.selected, by_name, SWEEP_KS
        )
    extra = {RERANK_LABEL: rr.oof} if rr is not None else {}
    cv = (
        None
        if small  # a leave-one-conversation-out selection on a handful of questions is noise
        else cross_validate(
            configs, sweep_vals, scored, selection, chosen, seed, resamples, extra=extra
        )
    )
    if cv is not None:
        log(f"eval: leave-one-conversation-out selection: {cv.selected}")
    full_vals, per_question_rows = score_reported(
        [by_name[n] for n in chosen.reported], scored, cands, units, split
    )
    shipped = score_shipped(searcher, scored, units, split.split_of)
    full_vals.update(shipped.vals)
    per_question_rows += shipped.rows
    log(f"eval: shipped default per language: {shipped.configs}")
    # the comparisons are read against what ships: its differences and its failures
    versus = Selection(SHIPPED, chosen.best, [SHIPPED, *chosen.reported], math.nan)
    summary = summarize(
        [*shipped.labels, *chosen.reported], full_vals, scored, split, seed, resamples
    )
    time_rows = _time_query_rows(searcher, time_questions)  # templated time queries
    summary += _time_summary(time_rows, seed, resamples)
    tables = {
        "summary": pa.Table.from_pylist(summary, schema=SUMMARY_SCHEMA),
        "sweep": pa.Table.from_pylist(sweep_rows(configs, sweep_vals, split, resamples, seed)),
        "per_question": pa.Table.from_pylist(per_question_rows + time_rows),
        "diffs": pa.Table.from_pylist(diff_rows(versus, full_vals, split, resamples, seed)),
        "ceiling": pa.Table.from_pylist(ceiling_rows(scored, cands, units)),
        "failures": pa.Table.from_pylist(
            failure_rows(SHIPPED, full_vals, scored, split), schema=FAILURES_SCHEMA
        ),
        "answers": pa.Table.from_pylist(shipped.answers),
    }
    if cv is not None:
        tables["cv"] = pa.Table.from_pylist(cv.rows, schema=CV_SCHEMA)
        tables["cv_folds"] = pa.Table.from_pylist(
            [{"held_out": g, "selected": c} for g, c in cv.result.folds.items()]
        )
    meta = {
        "headline_config": SHIPPED,
        "shipped": shipped.configs,
        "small_corpus": small,
        "min_selection_questions": MIN_SELECTION_QUESTIONS,
        "selected_config": chosen.selected,
        "selection_metric": f"{selection[0]} {selection[1]}@{selection[2]} "
        + (
            "(in-sample on every question: a comparison, not a selection)"
            if small
            else "(dev split)"
        ),
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
    meta["answerability"] = answerability_meta(shipped.answers, seed, resamples)
    if small:
        meta["notes"] = [SMALL_CORPUS_NOTE]
    elif math.isnan(chosen.selected_dev_mean):
        meta["notes"] = ["no dev questions with gold: selection is arbitrary"]
    return EvalRun(tables, meta)
