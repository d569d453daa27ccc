"""The memory evaluation's tables from the scored values: per-question rows, the chunk
tables' values read back from the retrieval run, the paired differences, and the context
curve (evidence recall per budget) the report plots.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from memory_pipeline.core.evaluation import metrics as M
from memory_pipeline.core.evaluation.evalsets import EvalQuestion
from memory_pipeline.core.evaluation.evaluate import EvalRun
from memory_pipeline.core.evaluation.memory_eval_parts import DIFF_KS, ER, Values


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
