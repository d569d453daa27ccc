"""Retrieval metrics against hand-computed values (arithmetic in the comments), run tables,
bootstrap statistics and the dev/test split."""

from __future__ import annotations

import math

import pyarrow as pa
import pytest

from memory_pipeline.core.evaluation.evalsets import EvalQuestion
from memory_pipeline.core.evaluation.metrics import (
    KS,
    METRICS,
    bootstrap_ci,
    evaluate_run,
    evidence_recall_at_k,
    hit_at_k,
    mrr_at_k,
    ndcg_at_k,
    paired_bootstrap_diff,
    recall_all,
    recall_any,
    recall_at_k,
    refs_by_unit,
    split_questions,
    summarize,
)

LOG2_3 = math.log2(3)  # 1.5849625...


def approx(x: float) -> object:
    return pytest.approx(x, abs=1e-9)


# ----------------------------------------------------------------------------- nDCG


def test_ndcg_graded_gains_hand_computed() -> None:
    gold = {"a": 2, "b": 1, "c": 1}
    # ranks 1..3 = x, a, b; gains 2^2-1 = 3 (a), 2^1-1 = 1 (b)
    # DCG@3  = 0/log2(2) + 3/log2(3) + 1/log2(4) = 1.8927893 + 0.5 = 2.3927893
    # IDCG@3 = 3/log2(2) + 1/log2(3) + 1/log2(4) = 3 + 0.6309298 + 0.5 = 4.1309298
    dcg = 3 / LOG2_3 + 0.5
    idcg = 3 + 1 / LOG2_3 + 0.5
    assert ndcg_at_k(["x", "a", "b", "a", "c"], gold, 3) == approx(dcg / idcg)
    assert dcg / idcg == pytest.approx(0.579237, abs=1e-6)
    # ideal order scores 1; at K=1 only the grade-2 unit counts: IDCG@1 = 3
    assert ndcg_at_k(["a", "b", "c"], gold, 3) == approx(1.0)
    assert ndcg_at_k(["b", "a"], gold, 1) == approx(1 / 3)


def test_ndcg_ties_follow_list_order() -> None:
    gold = {"a": 2, "b": 1}
    idcg = 3 + 1 / LOG2_3  # 3.6309298
    # [a, b]: DCG = 3 + 1/log2(3)  -> 1.0
    assert ndcg_at_k(["a", "b"], gold, 2) == approx(1.0)
    # [b, a] (say both had the same score, the system put b first):
    # DCG = 1/log2(2) + 3/log2(3) = 1 + 1.8927893 = 2.8927893 -> 0.7967048
    assert ndcg_at_k(["b", "a"], gold, 2) == approx((1 + 3 / LOG2_3) / idcg)
    # equal grades are interchangeable in the ideal ranking: either order is perfect
    assert ndcg_at_k(["b", "a"], {"a": 1, "b": 1}, 2) == approx(1.0)


def test_duplicates_count_once_at_first_occurrence() -> None:
    gold = {"a": 2, "b": 1}
    idcg2 = 3 + 1 / LOG2_3  # IDCG@2 = IDCG@3 = 3.6309298 (only two gold units)
    # K=2: positions a, a(dup: occupies rank 2, gains 0) -> DCG = 3 -> 0.8262346
    assert ndcg_at_k(["a", "a", "b"], gold, 2) == approx(3 / idcg2)
    # K=3: b at rank 3 -> DCG = 3 + 1/log2(4) = 3.5 -> 0.9639362
    assert ndcg_at_k(["a", "a", "b"], gold, 3) == approx(3.5 / idcg2)
    # recall: a found once of {a, b} -> 1/2 (not 3/2)
    assert recall_at_k(["a", "a", "a"], gold, 3) == approx(0.5)
    # MRR: the duplicate does not move b up: b is at rank 3 -> 1/3
    assert mrr_at_k(["x", "x", "b"], gold, 3) == approx(1 / 3)
    assert evidence_recall_at_k(["m1", "m1"], {"D1:1", "D1:2"}, {"m1": {"D1:1"}}, 2) == 0.5


def test_k_larger_than_list() -> None:
    gold = {"a": 2, "b": 1}
    # only b retrieved: recall 1/2, hit 1, MRR 1/1
    assert recall_at_k(["b"], gold, 20) == approx(0.5)
    assert hit_at_k(["b"], gold, 20) == 1.0
    assert mrr_at_k(["b"], gold, 20) == 1.0
    # nDCG@20: DCG = 1/log2(2) = 1; IDCG = 3 + 1/log2(3) = 3.6309298 -> 0.2754115
    assert ndcg_at_k(["b"], gold, 20) == approx(1 / (3 + 1 / LOG2_3))
    assert recall_at_k([], gold, 20) == 0.0
    assert ndcg_at_k([], gold, 5) == 0.0


def test_empty_gold_is_none() -> None:
    for fn in (recall_at_k, hit_at_k, mrr_at_k, ndcg_at_k, recall_any, recall_all):
        assert fn(["a"], {}, 5) is None
        assert fn(["a"], {"a": 0}, 5) is None  # grade 0 = not relevant
    assert evidence_recall_at_k(["m"], [], {}, 5) is None
    # primary_only with only supporting gold: nothing to find
    assert recall_at_k(["a"], {"a": 1}, 5, primary_only=True) is None


def test_primary_only() -> None:
    gold = {"a": 2, "b": 1}
    assert recall_at_k(["b"], gold, 1) == 0.5  # 1 of 2 gold units
    assert recall_at_k(["b"], gold, 1, primary_only=True) == 0.0  # a (primary) missed
    assert hit_at_k(["b"], gold, 1, primary_only=True) == 0.0
    assert mrr_at_k(["b", "a"], gold, 2, primary_only=True) == 0.5  # a at rank 2


def test_mrr_hand_computed() -> None:
    gold = {"a": 2}
    assert mrr_at_k(["x", "y", "a"], gold, 3) == approx(1 / 3)  # first relevant at rank 3
    assert mrr_at_k(["x", "y", "a"], gold, 2) == 0.0  # outside the cutoff
    assert mrr_at_k(["a", "b"], {"a": 1, "b": 2}, 5) == 1.0  # any grade >= 1 counts


def test_recall_any_all() -> None:
    gold = {"a": 2, "b": 2}
    ranked = ["a", "x", "b"]
    assert recall_any(ranked, gold, 1) == 1.0 and recall_all(ranked, gold, 1) == 0.0
    assert recall_any(ranked, gold, 2) == 1.0 and recall_all(ranked, gold, 2) == 0.0
    assert recall_all(ranked, gold, 3) == 1.0
    assert recall_any(["x"], gold, 5) == 0.0


@pytest.mark.parametrize("k", [0, -1, 1.5, True])
def test_bad_k_rejected(k: object) -> None:
    with pytest.raises(ValueError, match="k must be"):
        recall_at_k(["a"], {"a": 2}, k)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- evidence recall


def test_evidence_recall_turn_level() -> None:
    evidence = ["D1:1", "D1:3", "D2:5"]
    # turn level: a message covers its own dia_id
    unit_to_ev = {"m1": {"D1:1"}, "m3": {"D1:3"}, "m7": {"D1:7"}, "m9": {"D2:5"}}
    ranked = ["m3", "m7", "m1"]
    assert evidence_recall_at_k(ranked, evidence, unit_to_ev, 1) == approx(1 / 3)  # {D1:3}
    assert evidence_recall_at_k(ranked, evidence, unit_to_ev, 2) == approx(1 / 3)  # m7: none
    assert evidence_recall_at_k(ranked, evidence, unit_to_ev, 3) == approx(2 / 3)  # + D1:1
    # None mapping: the unit ids are the dia_ids themselves
    assert evidence_recall_at_k(["D1:3", "D2:5"], evidence, None, 1) == approx(1 / 3)
    assert evidence_recall_at_k(["D1:3", "D2:5"], evidence, None, 2) == approx(2 / 3)
    # duplicate evidence ids count once: {D1:1} -> 1/1
    assert evidence_recall_at_k(["m1"], ["D1:1", "D1:1"], unit_to_ev, 1) == 1.0


def test_evidence_recall_session_and_chunk_level() -> None:
    evidence = ["D1:2", "D1:4", "D2:5"]
    sessions = {
        "S1": {f"D1:{i}" for i in range(1, 5)},  # a session covers all its turns
        "S2": {f"D2:{i}" for i in range(1, 7)},
    }
    assert evidence_recall_at_k(["S2", "S1"], evidence, sessions, 1) == approx(1 / 3)  # D2:5
    assert evidence_recall_at_k(["S2", "S1"], evidence, sessions, 2) == 1.0
    chunks = {"c1": {"D1:1", "D1:2"}, "c2": {"D1:3", "D1:4"}}  # a chunk: its messages' dia_ids
    assert evidence_recall_at_k(["c2", "c1"], evidence, chunks, 1) == approx(1 / 3)  # D1:4
    assert evidence_recall_at_k(["c2", "c1"], evidence, chunks, 2) == approx(2 / 3)
    assert evidence_recall_at_k(["zz"], evidence, chunks, 1) == 0.0  # unknown unit covers none


# ----------------------------------------------------------------------------- runs


def q(qid: str, gold: dict[str, int], qtype: str = "t", corpus: str = "c1") -> EvalQuestion:
    return EvalQuestion(qid, corpus, f"question {qid}", qtype, gold, "message_ref")


def test_evaluate_run_rows_and_summary() -> None:
    questions = [
        q("q1", {"a": 2}, "single-hop"),
        q("q2", {"b": 2, "c": 2}, "multi-hop"),
        q("q3", {}, "multi-hop"),  # empty gold: rows with null values
    ]
    rankings = {"q1": ["x", "a"], "q2": ["b", "y"], "q3": ["a"]}
    rows = evaluate_run(questions, rankings, ks=(1, 2))
    assert rows.num_rows == 3 * len(METRICS) * 2
    assert rows.column_names == ["question_id", "corpus_id", "qtype", "metric", "k", "value"]
    got = {(r["question_id"], r["metric"], r["k"]): r["value"] for r in rows.to_pylist()}
    assert got["q1", "recall", 1] == 0.0 and got["q1", "recall", 2] == 1.0
    assert got["q1", "mrr", 2] == 0.5
    assert got["q2", "recall", 2] == 0.5 and got["q2", "recall_all", 2] == 0.0
    assert got["q2", "evidence_recall", 2] == 0.5  # identity mapping: same as recall
    assert all(got["q3", m, k] is None for m in METRICS for k in (1, 2))

    summary = summarize(rows)
    s = {(r["qtype"], r["metric"], r["k"]): r for r in summary.to_pylist()}
    # overall recall@2 = mean(1.0, 0.5) = 0.75 over 2 questions, q3 excluded and counted
    assert s["all", "recall", 2]["mean"] == 0.75
    assert s["all", "recall", 2]["n"] == 2 and s["all", "recall", 2]["n_excluded"] == 1
    # per type: multi-hop has only q2 with gold -> 0.5; single-hop q1 -> 1.0
    assert s["multi-hop", "recall", 2]["mean"] == 0.5
    assert s["multi-hop", "recall", 2]["n_excluded"] == 1
    assert s["single-hop", "recall", 2]["mean"] == 1.0
    assert summary.column("qtype")[0].as_py() == "all"  # overall rows first
    # no grouping: the overall rows only, each question counted once
    flat = summarize(rows, by=())
    assert flat.num_rows == len(METRICS) * 2
    row = next(r for r in flat.to_pylist() if r["metric"] == "recall" and r["k"] == 2)
    assert row["mean"] == 0.75 and row["n"] == 2
    with_ci = summarize(rows, ci=True, n_resamples=200)
    r = next(x for x in with_ci.to_pylist() if x["qtype"] == "all" and x["metric"] == "recall")
    assert r["ci_lo"] <= r["mean"] <= r["ci_hi"]


def test_evaluate_run_requires_every_ranking_and_known_metrics() -> None:
    with pytest.raises(KeyError, match="q2"):
        evaluate_run([q("q1", {"a": 2}), q("q2", {"a": 2})], {"q1": []})
    with pytest.raises(ValueError, match="unknown metrics"):
        evaluate_run([q("q1", {"a": 2})], {"q1": []}, metrics=["precision"])
    empty = evaluate_run([q("q1", {"a": 2})], {"q1": []}, ks=KS)
    assert set(empty.column("value").to_pylist()) == {0.0}


def test_evaluate_run_units_cover_refs_within_their_corpus() -> None:
    # Both conversations have a turn "D1:1": a session of c2 must not count for a c1 question.
    unit_refs = {"s1": {"D1:1", "D1:2"}, "s2": {"D2:1"}, "t1": {"D1:1"}}
    unit_corpus = {"s1": "c1", "s2": "c1", "t1": "c2"}
    question = q("q1", {"D1:1": 2, "D2:1": 1}, corpus="c1")
    rows = evaluate_run(
        [question],
        {"q1": ["t1", "s2", "s1"]},
        ks=(1, 2, 3),
        unit_refs=unit_refs,
        unit_corpus=unit_corpus,
    )
    got = {(r["metric"], r["k"]): r["value"] for r in rows.to_pylist()}
    # unit gold = {s1: 2 (covers D1:1), s2: 1 (covers D2:1)}; t1 is another corpus'
    assert got["evidence_recall", 1] == 0.0
    assert got["evidence_recall", 2] == 0.5  # D2:1 of {D1:1, D2:1}
    assert got["evidence_recall", 3] == 1.0
    assert got["mrr", 3] == 0.5  # s2 at rank 2
    # nDCG@3: DCG = 1/log2(3) + 3/log2(4) = 0.6309298 + 1.5; IDCG = 3 + 1/log2(3)
    assert got["ndcg", 3] == approx((1 / LOG2_3 + 1.5) / (3 + 1 / LOG2_3))
    assert got["recall_primary", 3] == 1.0 and got["recall_primary", 2] == 0.0


def test_refs_by_unit_from_tables() -> None:
    messages = pa.table(
        {
            "message_id": ["m1", "m2", "m3"],
            "conversation_id": ["c1", "c1", "c2"],
            "source_ref": ["D1:1", "D1:2", "D1:1"],
        }
    )
    refs, corpus = refs_by_unit(messages)
    assert refs == {"m1": {"D1:1"}, "m2": {"D1:2"}, "m3": {"D1:1"}}
    assert corpus == {"m1": "c1", "m2": "c1", "m3": "c2"}
    chunks = pa.table({"chunk_id": ["k1", "k2"], "message_ids": [["m1", "m2"], ["m3"]]})
    refs, corpus = refs_by_unit(messages, chunks)
    assert refs == {"k1": {"D1:1", "D1:2"}, "k2": {"D1:1"}}
    assert corpus == {"k1": "c1", "k2": "c2"}
    sessions = pa.table({"session_id": ["s1"], "message_ids": [["m1", "m2"]]})
    refs, _ = refs_by_unit(messages, sessions, ref_column="message_id")
    assert refs == {"s1": {"m1", "m2"}}


# ----------------------------------------------------------------------------- statistics


def test_bootstrap_ci_reproducible_and_contains_mean() -> None:
    values = [1.0] * 30 + [0.0] * 70
    a = bootstrap_ci(values, seed=7)
    assert a == bootstrap_ci(values, seed=7)
    varied = [(i * 37 % 101) / 101 for i in range(50)]  # many distinct values
    assert bootstrap_ci(varied, seed=7) != bootstrap_ci(varied, seed=8)
    mean, lo, hi = a
    assert mean == 0.3
    assert lo < mean < hi
    # normal approximation: 0.3 +- 1.96 * sqrt(0.3 * 0.7 / 100) = 0.3 +- 0.0898
    assert 0.19 < lo < 0.23 and 0.37 < hi < 0.41
    assert bootstrap_ci([0.5, None, float("nan"), 0.5]) == (0.5, 0.5, 0.5)  # undefined dropped
    assert all(math.isnan(x) for x in bootstrap_ci([None]))


def test_paired_bootstrap_diff() -> None:
    a = [0.0, 0.5, 1.0, 1.0, 0.25, None]
    assert paired_bootstrap_diff(a, a) == (0.0, 0.0, 0.0, 1.0)  # identical runs
    b = [x + 0.1 if x is not None else None for x in a]
    diff, lo, hi, p = paired_bootstrap_diff(b, a, n_resamples=999, seed=3)
    # every question improves by exactly 0.1: no resampling variance, p at its floor 1/1000
    assert diff == approx(0.1) and lo == approx(0.1) and hi == approx(0.1)
    assert p == approx(1 / 1000)
    c = [1.0, 0.0] * 50
    d = [0.0, 1.0] * 50
    diff, lo, hi, p = paired_bootstrap_diff(c, d, seed=1)
    assert diff == 0.0 and lo < 0 < hi and p > 0.5
    assert paired_bootstrap_diff(c, d, seed=1) == (diff, lo, hi, p)
    with pytest.raises(ValueError, match="length"):
        paired_bootstrap_diff([1.0], [1.0, 0.0])


# ----------------------------------------------------------------------------- split


def test_split_by_group() -> None:
    ids = [f"conv-{g}/q{i}" for g in range(6) for i in range(5)]
    groups = [x.split("/")[0] for x in ids]
    dev, test = split_questions(ids, groups, dev_share=0.5, seed=0)
    assert (dev, test) == split_questions(ids, groups, dev_share=0.5, seed=0)
    assert sorted(dev + test) == sorted(ids)
    dev_groups = {x.split("/")[0] for x in dev}
    test_groups = {x.split("/")[0] for x in test}
    assert not dev_groups & test_groups and len(dev_groups) == 3  # round(0.5 * 6)
    assert dev == [x for x in ids if x in set(dev)]  # input order kept
    seeds = {tuple(split_questions(ids, groups, seed=s)[0]) for s in range(10)}
    assert len(seeds) > 1


def test_split_by_question_with_one_group() -> None:
    ids = [f"q{i}" for i in range(10)]
    dev, test = split_questions(ids, ["only"] * 10, dev_share=0.3, seed=1)
    assert len(dev) == 3 and len(test) == 7 and sorted(dev + test) == sorted(ids)
    # never an empty side when there are >= 2 units
    dev, test = split_questions(["a", "b"], ["g", "g"], dev_share=0.1)
    assert len(dev) == 1 and len(test) == 1
    with pytest.raises(ValueError):
        split_questions(ids, ["g"], dev_share=0.5)
    with pytest.raises(ValueError):
        split_questions(ids, ["g"] * 10, dev_share=1.0)
