"""The phases after gathering: dev/test split, the sweep, selection on dev, and the rows of
the tables the report reads (sweep, diffs, ceiling, failures, time queries).

Selection happens on dev only and figures are reported on test, so the chosen configuration
is not scored on the questions that chose it.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from memory_pipeline.core.evaluation import crossval as CV
from memory_pipeline.core.evaluation import metrics as M
from memory_pipeline.core.evaluation.evalsets import EvalQuestion
from memory_pipeline.core.evaluation.evaluate_configs import (
    KS,
    POOL,
    SWEEP_KS,
    TIME_SEARCH,
    sweep_columns,
)
from memory_pipeline.core.evaluation.evaluate_units import (
    SUMMARY_SCHEMA,
    Candidates,
    EvalRun,
    Units,
    question_scores,
    summary_rows_for,
)
from memory_pipeline.core.retrieval.config import SearchConfig

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
