"""Leave-one-conversation-out cross-validation of the retrieval selection.

A single dev/test split of six conversations selects on three and reports on three: the
figure rests on which three were drawn, and a CI over questions alone treats 400 questions of
three conversations as 400 independent draws. Cross-validation uses every conversation for
both: fold *g* selects the configuration on every conversation but *g* and scores it on *g*
only, so every question is scored by a choice that never saw it ("out of fold"). The pooled
out-of-fold figure estimates what the *procedure* (sweep, then select) gives on a new
conversation; the configuration to ship is then selected on all of them.

Confidence intervals resample conversations first and questions within each drawn
conversation second (a two-level cluster bootstrap), so they widen when the conversations
disagree, which is what a user with a different chat history should expect.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

MetricKey = tuple[str, str, int]  # (level, metric, k)
# config name -> metric key -> one value per question (None: no gold), in question order
SweepValues = Mapping[str, Mapping[MetricKey, Sequence[float | None]]]


def cluster_bootstrap_ci(
    values: Sequence[float | None],
    groups: Sequence[str],
    n_resamples: int = 2000,
    seed: int = 0,
    alpha: float = 0.05,
) -> tuple[float, float, float]:
    """(mean, lo, hi) of the question mean, resampling groups then questions within groups.

    None/NaN values are dropped first; no values -> (nan, nan, nan). One group degrades to
    the ordinary bootstrap over its questions. Deterministic for the same inputs and seed.
    """
    if len(values) != len(groups):
        raise ValueError(f"{len(values)} values but {len(groups)} groups")
    by_group: dict[str, list[float]] = defaultdict(list)
    for v, g in zip(values, groups, strict=True):
        if v is not None and not (isinstance(v, float) and math.isnan(v)):
            by_group[g].append(float(v))
    arrays = [np.asarray(by_group[g]) for g in sorted(by_group)]
    if not arrays:
        return (math.nan, math.nan, math.nan)
    pooled = np.concatenate(arrays)
    rng = np.random.default_rng(seed)
    means = np.empty(n_resamples)
    for i in range(n_resamples):
        drawn = rng.integers(0, len(arrays), size=len(arrays))
        total, count = 0.0, 0
        for j in drawn:
            a = arrays[j]
            total += float(a[rng.integers(0, len(a), size=len(a))].sum())
            count += len(a)
        means[i] = total / count
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return (float(pooled.mean()), float(lo), float(hi))


def mean_on(values: Sequence[float | None], keep: Sequence[bool]) -> float:
    """Mean of the kept questions' values (None: no gold, left out); NaN when none is left."""
    v = [x for x, k in zip(values, keep, strict=True) if k and x is not None]
    return float(np.mean(v)) if v else float("nan")


def select_on(
    names: Sequence[str],
    sweep_vals: SweepValues,
    keep: Sequence[bool],
    selection: MetricKey,
) -> str:
    """The best configuration on the kept questions for ``selection`` (ties: the shorter
    name, then the later name). The dev/test evaluation's ``select`` and every fold of the
    cross-validation choose through this one rule."""
    return max(names, key=lambda n: (mean_on(sweep_vals[n][selection], keep), -len(n), n))


@dataclass(frozen=True)
class CrossValidation:
    """The folds' choices and the pooled out-of-fold values of the procedure."""

    folds: dict[str, str]  # held-out group -> configuration selected without it
    oof: dict[MetricKey, list[float | None]]  # metric -> out-of-fold value per question
    selected: str  # selected on every group: the configuration to ship
    selection: MetricKey


def leave_one_group_out(
    names: Sequence[str],
    sweep_vals: SweepValues,
    groups: Sequence[str],
    selection: MetricKey,
) -> CrossValidation:
    """Select on all groups but one, score the held-out group, for every group.

    Needs at least two groups (with one there is nothing to hold out).
    """
    distinct = sorted(set(groups))
    if len(distinct) < 2:
        raise ValueError("cross-validation needs at least two conversations")
    metrics = list(next(iter(sweep_vals.values())).keys())
    oof: dict[MetricKey, list[float | None]] = {m: [None] * len(groups) for m in metrics}
    folds: dict[str, str] = {}
    for held in distinct:
        chosen = select_on(names, sweep_vals, [g != held for g in groups], selection)
        folds[held] = chosen
        for m in metrics:
            vals = sweep_vals[chosen][m]
            for i, g in enumerate(groups):
                if g == held:
                    oof[m][i] = vals[i]
    selected = select_on(names, sweep_vals, [True] * len(groups), selection)
    return CrossValidation(folds, oof, selected, selection)


def cv_rows(
    cv: CrossValidation,
    sweep_vals: SweepValues,
    groups: Sequence[str],
    qtypes: Sequence[str],
    references: Sequence[str] = (),
    n_resamples: int = 2000,
    seed: int = 0,
) -> list[dict]:
    """Table rows: the out-of-fold procedure (``config = "cv:selected"``) and each fixed
    reference configuration, per metric and question type ("all" first), with cluster CIs."""
    rows = []
    series: list[tuple[str, Mapping[MetricKey, Sequence[float | None]]]] = [
        ("cv:selected", cv.oof),
        *((name, sweep_vals[name]) for name in references),
    ]
    types = ["all", *sorted(set(qtypes))]
    for label, vals in series:
        for (level, metric, k), per_q in vals.items():
            for qtype in types:
                idx = [i for i, t in enumerate(qtypes) if qtype == "all" or t == qtype]
                v = [per_q[i] for i in idx]
                g = [groups[i] for i in idx]
                mean, lo, hi = cluster_bootstrap_ci(v, g, n_resamples, seed)
                n = sum(x is not None for x in v)
                convs = {gi for gi, x in zip(g, v, strict=True) if x is not None}
                rows.append(
                    {
                        "config": label,
                        "qtype": qtype,
                        "level": level,
                        "metric": metric,
                        "k": k,
                        "mean": mean,
                        "ci_lo": lo,
                        "ci_hi": hi,
                        "n": n,
                        "conversations": len(convs),
                    }
                )
    return rows
