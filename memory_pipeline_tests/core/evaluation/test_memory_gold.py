"""Memory recall/precision against LoCoMo-style observations, on hand-made gold."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from memory_pipeline.core.evaluation.memory_gold import (
    content_f1,
    content_words,
    load_locomo_observations,
    score_memories_against_gold,
)


def _write(tmp_path: Path) -> Path:
    sample = {
        "sample_id": "c1",
        "conversation": {"speaker_a": "Maria", "speaker_b": "John"},
        "observation": {
            "session_1_observation": {
                "Maria": [
                    ["Maria adopted a rescue dog named Max.", "D1:2"],
                    ["Maria works as a nurse at the city hospital.", ["D1:4", "D1:5"]],
                ],
                "John": [["John is training for a marathon in June.", "D1:3"]],
            }
        },
    }
    other = {
        "sample_id": "c2",
        "conversation": {"speaker_a": "Ann", "speaker_b": "Bo"},
        "observation": {
            "session_1_observation": {"Ann": [["Ann loves baking bread.", "D1:1; D1:9"]]}
        },
    }
    p = tmp_path / "lo.json"
    p.write_text(json.dumps([sample, other]), encoding="utf-8")
    return p


def _messages() -> pa.Table:
    rows = [
        ("m2", "c1", "D1:2"),
        ("m3", "c1", "D1:3"),
        ("m4", "c1", "D1:4"),
        ("m5", "c1", "D1:5"),
        ("n1", "c2", "D1:1"),
        ("n2", "c2", "D1:2"),
    ]
    return pa.Table.from_pylist(
        [{"message_id": a, "conversation_id": b, "source_ref": c} for a, b, c in rows]
    )


def _memories(rows: list[tuple[str, str, str, str, list[str]]]) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {"memory_id": i, "conversation_id": c, "subject": s, "text": t, "message_ids": m}
            for i, c, s, t, m in rows
        ]
    )


def test_observations_are_read_with_lenient_evidence(tmp_path: Path) -> None:
    obs, speakers = load_locomo_observations(_write(tmp_path))
    assert [(o.corpus_id, o.speaker, o.evidence) for o in obs] == [
        ("c1", "Maria", ("D1:2",)),
        ("c1", "Maria", ("D1:4", "D1:5")),
        ("c1", "John", ("D1:3",)),
        ("c2", "Ann", ("D1:1", "D1:9")),
    ]
    assert speakers["c1"] == ["Maria", "John"]


def test_content_words_normalize_names_stopwords_and_stems() -> None:
    assert content_words("Maria ADOPTED two rescue dogs!", ["Maria"]) == [
        "adopt",
        "two",
        "rescu",
        "dog",
    ]
    assert content_words("Maria's dog", ["Maria"]) == ["dog"]
    assert content_words("on 2023-05-07", []) == ["2023-05-07"]
    assert content_words("花子は犬", ["花子"]) == ["は犬"]
    assert content_f1(["a", "b"], ["a", "c"]) == pytest.approx(0.5)
    assert content_f1([], ["a"]) == 0.0


def test_coverage_needs_same_speaker_cited_turn_and_content(tmp_path: Path) -> None:
    obs, speakers = load_locomo_observations(_write(tmp_path))
    mem = _memories(
        [
            ("ok", "c1", "Maria", "Maria adopted a rescue dog, Max.", ["m2"]),
            ("wrong_speaker", "c1", "John", "John adopted a rescue dog, Max.", ["m2"]),
            ("wrong_turn", "c1", "Maria", "Maria works as a nurse at the city hospital.", ["m3"]),
            ("other_words", "c1", "John", "John ate pizza with friends.", ["m3"]),
            ("second_ref", "c1", "Maria", "Maria is a nurse at the hospital.", ["m5"]),
            ("c2_ok", "c2", "Ann", "Ann loves baking bread on weekends.", ["n1"]),
            ("c2_other", "c2", "Bo", "Bo plays chess.", ["n2"]),
        ]
    )
    g = score_memories_against_gold(mem, _messages(), obs, speakers, resamples=200)
    assert sorted(g.covers) == ["c2_ok", "ok", "second_ref"]
    per = {r["corpus_id"]: r for r in g.per_conversation.to_pylist()}
    assert per["c1"]["covered"] == 2 and per["c1"]["observations"] == 3
    assert per["c1"]["recall"] == pytest.approx(2 / 3)
    assert per["c1"]["precision"] == pytest.approx(2 / 5)
    assert per["c2"]["recall"] == 1.0 and per["c2"]["precision"] == 0.5
    summ = {r["metric"]: r for r in g.summary.to_pylist()}
    assert summ["recall"]["mean"] == pytest.approx((2 / 3 + 1) / 2)
    assert summ["recall"]["pooled"] == pytest.approx(3 / 4)
    assert summ["recall"]["ci_lo"] <= summ["recall"]["mean"] <= summ["recall"]["ci_hi"]
    assert summ["precision"]["n_conversations"] == 2


def test_stricter_threshold_covers_less(tmp_path: Path) -> None:
    obs, speakers = load_locomo_observations(_write(tmp_path))
    mem = _memories([("m", "c1", "Maria", "Maria is a nurse.", ["m4"])])
    loose = score_memories_against_gold(mem, _messages(), obs, speakers, min_f1=0.3, resamples=50)
    strict = score_memories_against_gold(mem, _messages(), obs, speakers, min_f1=0.9, resamples=50)
    assert list(loose.covers) == ["m"] and not strict.covers


def test_precision_sample_is_fixed_by_its_seed() -> None:
    from memory_pipeline.core.evaluation.memory_gold import precision_sample

    mem = _memories([(f"m{i}", "c1", "Maria", f"text {i}", ["m2"]) for i in range(100)])
    a = [r["memory_id"] for r in precision_sample(mem, 40, seed=0)]
    assert a == [r["memory_id"] for r in precision_sample(mem, 40, seed=0)]
    assert len(set(a)) == 40 and a != [r["memory_id"] for r in precision_sample(mem, 40, seed=1)]
    assert len(precision_sample(mem.slice(0, 5), 40)) == 5
