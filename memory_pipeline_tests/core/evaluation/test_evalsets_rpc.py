"""The Japanese chat check (RealPersonaChat): the packaged file, the loader's checks, the
foreign-question swap, and the evidence ids against the real corpus."""

from __future__ import annotations

import json

import pytest

from memory_pipeline.core.evaluation import evalsets_rpc as R

DIALOGUES = "realpersonachat/dialogues.jsonl.gz"


def _write(tmp_path, rows) -> object:
    path = tmp_path / "q.jsonl"
    path.write_text(
        "\n".join(r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in rows)
        + "\n",
        encoding="utf-8",
    )
    return path


def test_packaged_check_has_the_promised_size_and_shape():
    qs = R.load_rpc_chat_check()
    assert len(qs) >= 120
    assert len({q.corpus_id for q in qs}) >= 20
    assert len({q.question_id for q in qs}) == len(qs)
    for q in qs:
        assert q.question.startswith(q.corpus_id + R.HONORIFIC)
        assert q.gold_kind == "message_ref" and q.gold and q.scored
        assert q.qtype in ("persona-slot", "persona-specific")
        assert all(g == R.PRIMARY for g in q.gold.values())


def test_loader_reads_a_line_as_a_scoped_question(tmp_path):
    path = _write(
        tmp_path,
        [
            {
                "id": "x1",
                "speaker": "AK",
                "kind": "specific",
                "question": "AKさんのペットは？",
                "evidence": ["dialogue:84/utterance:12", "dialogue:7/utterance:0"],
            },
            "",
        ],
    )
    (q,) = R.load_rpc_chat_check(path)
    assert (q.question_id, q.corpus_id, q.qtype) == ("x1", "AK", "persona-specific")
    assert q.gold == {"dialogue:84/utterance:12": 2, "dialogue:7/utterance:0": 2}


@pytest.mark.parametrize(
    "row, message",
    [
        ("{not json", "q.jsonl:1"),
        ({"id": "a", "speaker": "AK", "kind": "slot", "question": "AKさん？"}, "evidence"),
        (
            {"id": "a", "speaker": "AK", "kind": "slot", "question": "AKさん？", "evidence": []},
            "non-empty",
        ),
        (
            {
                "id": "a",
                "speaker": "AK",
                "kind": "slot",
                "question": "AKさん？",
                "evidence": ["d1/u2"],
            },
            "reference",
        ),
        (
            {
                "id": "a",
                "speaker": "AK",
                "kind": "slot",
                "question": "BBさん？",
                "evidence": ["dialogue:1/utterance:2"],
            },
            "must name AKさん",
        ),
    ],
)
def test_loader_rejects_a_defective_line(tmp_path, row, message):
    with pytest.raises(ValueError, match=message):
        R.load_rpc_chat_check(_write(tmp_path, [row]))


def test_loader_rejects_an_unknown_kind(tmp_path):
    row = {
        "id": "a",
        "speaker": "AK",
        "kind": "other",
        "question": "AKさん？",
        "evidence": ["dialogue:1/utterance:2"],
    }
    with pytest.raises(ValueError, match="kind must be one of"):
        R.load_rpc_chat_check(_write(tmp_path, [row]))


def test_loader_rejects_a_duplicate_id(tmp_path):
    row = {
        "id": "a",
        "speaker": "AK",
        "kind": "slot",
        "question": "AKさん？",
        "evidence": ["dialogue:1/utterance:2"],
    }
    with pytest.raises(ValueError, match="duplicate id"):
        R.load_rpc_chat_check(_write(tmp_path, [row, row]))


def test_swap_speaker_asks_about_the_host():
    assert R.swap_speaker("AKさんが飼っている動物は？", "AK", "BB") == "BBさんが飼っている動物は？"
    # only the name with its honorific: an id inside another word is left alone
    assert R.swap_speaker("AKB48が好きなAKさん", "AK", "GD") == "AKB48が好きなGDさん"


def test_check_evidence_flags_missing_and_other_speakers_words():
    qs = [
        R.EvalQuestion(
            "q",
            "AK",
            "AKさん？",
            "persona-slot",
            {"dialogue:1/utterance:0": 2, "dialogue:1/utterance:1": 2, "dialogue:2/utterance:0": 2},
            "message_ref",
        )
    ]
    utts = {
        "dialogue:1/utterance:0": ("AK", "ウサギを飼っています", ("AK", "AB")),
        "dialogue:1/utterance:1": ("AB", "いいですね", ("AK", "AB")),
    }
    problems = R.check_evidence(qs, utts)
    assert [(p.ref, p.problem) for p in problems] == [
        ("dialogue:1/utterance:1", "spoken by AB, not AK"),
        ("dialogue:2/utterance:0", "no such utterance"),
    ]


def test_packaged_evidence_is_the_speakers_own_words(shared_file):
    qs = R.load_rpc_chat_check()
    utts = R.read_utterances(shared_file(DIALOGUES), [r for q in qs for r in q.gold])
    assert R.check_evidence(qs, utts) == []
    # every evidence dialogue is one of the speaker's (their history is the corpus)
    for q in qs:
        assert all(q.corpus_id in utts[r][2] for r in q.gold)
