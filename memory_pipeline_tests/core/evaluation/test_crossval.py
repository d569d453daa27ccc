"""Leave-one-conversation-out selection and the two-level bootstrap."""

from __future__ import annotations

import math

import numpy as np
import pytest

from memory_pipeline.core.evaluation import crossval as CV
from memory_pipeline.core.evaluation.metrics import bootstrap_ci

KEY = ("session", "evidence_recall", 5)
TURN = ("turn", "evidence_recall", 5)


def _sweep():
    # three conversations a, b, c with two questions each; "A" wins on a and b, "B" on c
    groups = ["a", "a", "b", "b", "c", "c"]
    vals = {
        "A": {KEY: [1.0, 1.0, 1.0, 0.5, 0.0, 0.0], TURN: [0.9, 0.9, 0.9, 0.9, 0.1, 0.1]},
        "B": {KEY: [0.0, 0.5, 0.5, 0.5, 1.0, 1.0], TURN: [0.2, 0.2, 0.2, 0.2, 0.8, 0.8]},
        "BB": {KEY: [0.0, 0.0, 0.0, 0.0, 0.0, None], TURN: [0.0] * 6},
    }
    return groups, vals


def test_each_fold_selects_without_its_conversation_and_scores_it():
    groups, vals = _sweep()
    cv = CV.leave_one_group_out(list(vals), vals, groups, KEY)
    # without a: A scores (1, .5, 0, 0)/4 = .375, B (.5, .5, 1, 1)/4 = .75 -> B
    # without b: A (1, 1, 0, 0) = .5, B (0, .5, 1, 1) = .625 -> B
    # without c: A (1, 1, 1, .5) = .875, B .375 -> A
    assert cv.folds == {"a": "B", "b": "B", "c": "A"}
    assert cv.oof[KEY] == [0.0, 0.5, 0.5, 0.5, 0.0, 0.0]  # each value from its fold's choice
    assert cv.oof[TURN] == [0.2, 0.2, 0.2, 0.2, 0.1, 0.1]
    # on all: A .583 vs B .583, a tie: the shorter name, then the later name (as select())
    assert cv.selected == "B"
    assert cv.selection == KEY


def test_out_of_fold_is_worse_than_in_sample_when_the_choice_does_not_transfer():
    groups, vals = _sweep()
    cv = CV.leave_one_group_out(list(vals), vals, groups, KEY)
    in_sample = np.mean(vals[cv.selected][KEY])
    assert np.mean(cv.oof[KEY]) < in_sample


def test_needs_two_conversations():
    with pytest.raises(ValueError, match="at least two"):
        CV.leave_one_group_out(["A"], {"A": {KEY: [1.0]}}, ["a"], KEY)


def test_cluster_bootstrap_is_wider_than_questions_alone_when_conversations_disagree():
    rng = np.random.default_rng(1)
    values = list(np.clip(np.r_[rng.normal(0.9, 0.05, 100), rng.normal(0.2, 0.05, 100)], 0, 1))
    groups = ["a"] * 100 + ["b"] * 100
    mean, lo, hi = CV.cluster_bootstrap_ci(values, groups, 2000, seed=0)
    qmean, qlo, qhi = bootstrap_ci(values, 2000, seed=0)
    assert mean == pytest.approx(qmean)
    assert lo <= mean <= hi
    assert (hi - lo) > 5 * (qhi - qlo)  # two conversations that disagree: wide
    assert CV.cluster_bootstrap_ci(values, groups, 2000, seed=0) == (mean, lo, hi)


def test_cluster_bootstrap_drops_missing_and_handles_empty():
    assert CV.cluster_bootstrap_ci([None, 1.0, float("nan")], ["a", "a", "b"], 50)[0] == 1.0
    assert all(math.isnan(x) for x in CV.cluster_bootstrap_ci([None], ["a"], 10))
    with pytest.raises(ValueError):
        CV.cluster_bootstrap_ci([1.0], ["a", "b"], 10)


def test_rows_cover_the_procedure_and_references_per_question_type():
    groups, vals = _sweep()
    cv = CV.leave_one_group_out(list(vals), vals, groups, KEY)
    qtypes = ["x", "y", "x", "y", "x", "y"]
    rows = CV.cv_rows(cv, vals, groups, qtypes, references=["A"], n_resamples=100)
    labels = {(r["config"], r["qtype"], r["level"]) for r in rows}
    assert ("cv:selected", "all", "session") in labels
    assert ("A", "y", "turn") in labels
    overall = next(
        r
        for r in rows
        if (r["config"], r["qtype"], r["level"]) == ("cv:selected", "all", "session")
    )
    assert overall["mean"] == pytest.approx(np.mean(cv.oof[KEY]))
    assert overall["n"] == 6 and overall["conversations"] == 3
