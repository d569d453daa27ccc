"""The ambiguous-variant generator (deterministic, one entity moved into a preceding turn)
and its summary (means, CIs, the resolved-minus-ambiguous difference)."""

from __future__ import annotations

import pytest

from memory_pipeline.core.evaluation.ambiguous import (
    make_variants,
    person_variant,
    summary_rows,
    topic_variant,
)
from memory_pipeline.core.evaluation.evalsets import EvalQuestion
from memory_pipeline.core.retrieval.query import resolve_references

KNOWN = ["Caroline", "Melanie"]
IDF = {"lgbtq": 5.0, "support": 2.0, "group": 1.5, "sunrise": 4.0, "paint": 1.0}.get


def weight(word: str) -> float:
    return IDF(word.lower(), 0.5)


def q(text: str, qid: str = "c1:q1") -> EvalQuestion:
    return EvalQuestion(qid, "c1", text, "single-hop", {"D1:3": 2}, "message_ref")


@pytest.mark.parametrize(
    ("question", "ambiguous", "entity"),
    [
        (
            "When did Caroline go to the LGBTQ support group?",
            "When did they go to the LGBTQ support group?",
            "Caroline",
        ),
        ("What is Caroline's identity?", "What is their identity?", "Caroline"),
        ("Caroline painted what?", "They painted what?", "Caroline"),
    ],
)
def test_person_variant(question, ambiguous, entity):
    v = person_variant(q(question), KNOWN)
    assert (v.ambiguous, v.entity, v.kind) == (ambiguous, entity, "person")
    assert entity in v.recent[0] and entity not in v.ambiguous


@pytest.mark.parametrize(
    ("question", "ambiguous", "entity"),
    [
        (
            "When did Caroline go to the LGBTQ support group?",
            "When did Caroline go to that?",
            "LGBTQ support group",
        ),
        ("When did Melanie paint a sunrise?", "When did Melanie paint that?", "sunrise"),
    ],
)
def test_topic_variant(question, ambiguous, entity):
    v = topic_variant(q(question), KNOWN, weight)
    assert (v.ambiguous, v.entity) == (ambiguous, entity)
    assert entity in v.recent[0]
    # and the rules put it back from the preceding turn
    assert entity in resolve_references(v.ambiguous, list(v.recent), known=KNOWN).query


def test_no_variant_without_a_name_or_content_word():
    assert person_variant(q("What did they do?"), KNOWN) is None
    assert topic_variant(q("What did Caroline do?"), KNOWN, weight) is None


def test_variants_are_deterministic_and_vary_their_templates():
    qs = [q(f"When did Caroline visit the museum number {i}?", f"c1:q{i}") for i in range(12)]
    a, b = make_variants(qs, KNOWN, weight), make_variants(qs, KNOWN, weight)
    assert a == b and len(a) == 24
    assert len({v.recent[0].replace("Caroline", "") for v in a if v.kind == "person"}) > 1


def _rows(kind, values):
    out = []
    for i, (orig, amb, res) in enumerate(values):
        for cond, v in (("original", orig), ("ambiguous", amb), ("resolved", res)):
            out.append(
                {
                    "question_id": f"q{i}",
                    "corpus_id": f"c{i % 3}",
                    "kind": kind,
                    "condition": cond,
                    "level": "turn",
                    "k": 5,
                    "value": v,
                    "exact": i % 2 == 0,
                }
            )
    return out


def test_summary_reports_each_condition_and_the_paired_difference():
    rows = _rows("person", [(1.0, 0.0, 1.0), (1.0, 1.0, 1.0), (0.0, 0.0, 1.0), (1.0, 0.0, 0.0)])
    out = {(r["kind"], r["condition"], r["level"]): r for r in summary_rows(rows, 0, 200)}
    assert out[("person", "original", "turn")]["mean"] == pytest.approx(0.75)
    assert out[("person", "ambiguous", "turn")]["mean"] == pytest.approx(0.25)
    diff = out[("person", "resolved-ambiguous", "turn")]
    assert diff["mean"] == pytest.approx(0.5) and diff["n"] == 4
    assert diff["ci_lo"] <= diff["mean"] <= diff["ci_hi"]
    assert out[("all", "resolved", "turn")]["resolved_exactly"] == pytest.approx(0.5)
