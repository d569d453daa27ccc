"""Evaluation sets: the LoCoMo QA parser (every evidence defect, and the real dev split), the
user's JSONL question format, and templated time queries checked against timeexpr."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from memory_pipeline.core.common.records import Message
from memory_pipeline.core.common.schema import TS_LOCAL
from memory_pipeline.core.evaluation.evalsets import (
    TIME_TEMPLATES,
    EvalQuestion,
    ExcludedQuestion,
    UnresolvedEvidence,
    generate_time_queries,
    load_jsonl_questions,
    load_locomo_questions,
)
from memory_pipeline.core.ingest.sources import SourceSpec, read_source
from memory_pipeline.core.ingest.sources.locomo import parse_session_time
from memory_pipeline.core.retrieval.timeexpr import matches_all, parse_query

# ----------------------------------------------------------------------------- LoCoMo fixture


def turns(session: int, n: int) -> list[dict[str, Any]]:
    return [
        {"speaker": "A" if i % 2 else "B", "dia_id": f"D{session}:{i}", "text": f"t{session}.{i}"}
        for i in range(1, n + 1)
    ]


def qa(category: int, evidence: Any, **extra: Any) -> dict[str, Any]:
    entry = {"question": f"question {len(str(evidence))}?", "category": category}
    if evidence is not ...:
        entry["evidence"] = evidence
    entry.setdefault("answer", "ans")
    entry.update(extra)
    return entry


def write_locomo(tmp_path: Path) -> Path:
    """conv-x: sessions 1, 2, 8, 9, 11, 30 (turn counts 3, 4, 6, 17, 26, 5) and a date key for
    session 31 without turns; conv-y: session 1 with 2 turns. One qa entry per defect."""
    sizes = {1: 3, 2: 4, 8: 6, 9: 17, 11: 26, 30: 5}
    conv_x: dict[str, Any] = {"speaker_a": "A", "speaker_b": "B"}
    for n, size in sizes.items():
        conv_x[f"session_{n}"] = turns(n, size)
        conv_x[f"session_{n}_date_time"] = f"10:00 am on {n} May, 2023"
    conv_x["session_31_date_time"] = "9:00 am on 1 June, 2023"  # date key, no turns
    conv_y = {
        "speaker_a": "C",
        "speaker_b": "D",
        "session_1": turns(1, 2),
        "session_1_date_time": "1:56 pm on 8 May, 2023",
    }
    qa_x = [
        qa(1, ["D8:6; D9:17"]),  # q0: two ids in one string, ';'-separated
        qa(2, ["D:11:26"]),  # q1: stray colon
        qa(3, ["D30:05"]),  # q2: zero-padded turn -> D30:5
        qa(4, ["D1:1 D1:2 D2:3"]),  # q3: space-separated list in one string
        qa(1, ["D1:1", "D"]),  # q4: a bare 'D' next to a good id
        qa(2, ["D2:99"]),  # q5: past the end of session 2 (4 turns): nothing usable
        qa(3, []),  # q6: empty evidence
        qa(5, ["D1:1"], answer=None, adversarial_answer="never"),  # q7: adversarial
        qa(4, ["D1:1", "D1:1"], answer=2022),  # q8: duplicate id, numeric answer
        qa(1, [7, "D9:3"]),  # q9: a non-string entry
        qa(7, ["D1:1"]),  # q10: unknown category
        qa(4, ...),  # q11: no evidence key at all
        qa(2, ["D12:1"]),  # q12: a session that does not exist
    ]
    qa_y = [qa(4, ["D1:2"]), qa(4, ["D1:3"])]  # D1:3 exists in conv-x only
    data = [
        {"sample_id": "conv-x", "conversation": conv_x, "qa": qa_x},
        {"sample_id": "conv-y", "conversation": conv_y, "qa": qa_y},
    ]
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_locomo_every_evidence_defect(tmp_path: Path) -> None:
    questions, report = load_locomo_questions(write_locomo(tmp_path))
    by_id = {q.question_id: q for q in questions}
    gold = {qid: q.gold for qid, q in by_id.items()}
    assert gold["conv-x/q0"] == {"D8:6": 2, "D9:17": 2}
    assert gold["conv-x/q1"] == {"D11:26": 2}
    assert gold["conv-x/q2"] == {"D30:5": 2}
    assert gold["conv-x/q3"] == {"D1:1": 2, "D1:2": 2, "D2:3": 2}
    assert gold["conv-x/q4"] == {"D1:1": 2}
    assert gold["conv-x/q5"] == {}
    assert gold["conv-x/q6"] == {}
    assert "conv-x/q7" not in by_id  # category 5 not selected
    assert gold["conv-x/q8"] == {"D1:1": 2}
    assert by_id["conv-x/q8"].answer == "2022"
    assert gold["conv-x/q9"] == {"D9:3": 2}
    assert "conv-x/q10" not in by_id
    assert gold["conv-x/q11"] == {}
    assert gold["conv-x/q12"] == {}
    assert gold["conv-y/q0"] == {"D1:2": 2}
    assert gold["conv-y/q1"] == {}  # D1:3 is a turn of conv-x, not of conv-y

    assert report.unresolved == [
        UnresolvedEvidence("conv-x/q4", "D", "", "no D<session>:<turn> id in the string"),
        UnresolvedEvidence("conv-x/q5", "D2:99", "D2:99", "no such turn in the conversation"),
        UnresolvedEvidence("conv-x/q9", "7", "", "no D<session>:<turn> id in the string"),
        UnresolvedEvidence("conv-x/q12", "D12:1", "D12:1", "no such turn in the conversation"),
        UnresolvedEvidence("conv-y/q1", "D1:3", "D1:3", "no such turn in the conversation"),
    ]
    assert [(e.question_id, e.reason) for e in report.empty_evidence] == [
        ("conv-x/q5", "evidence all unresolvable"),
        ("conv-x/q6", "empty evidence"),
        ("conv-x/q11", "empty evidence"),
        ("conv-x/q12", "evidence all unresolvable"),
        ("conv-y/q1", "evidence all unresolvable"),
    ]
    assert all(isinstance(e, ExcludedQuestion) for e in report.empty_evidence)
    assert report.normalized == [
        ("conv-x/q0", "D8:6; D9:17", ("D8:6", "D9:17")),
        ("conv-x/q1", "D:11:26", ("D11:26",)),
        ("conv-x/q2", "D30:05", ("D30:5",)),
        ("conv-x/q3", "D1:1 D1:2 D2:3", ("D1:1", "D1:2", "D2:3")),
    ]
    assert report.qa_total == 15
    assert report.per_category == {
        "multi-hop": 3,
        "temporal": 3,
        "open-domain": 2,
        "single-hop": 5,
        "adversarial": 1,
        "unknown:7": 1,
    }
    assert report.loaded_per_category == {
        "multi-hop": 3,
        "temporal": 3,
        "open-domain": 2,
        "single-hop": 5,
    }
    assert report.loaded == len(questions) == 13 and report.scored == 8
    assert report.problems == ["conv-x/q10: unknown category 7"]
    assert "13 loaded" in report.summary()

    q0 = by_id["conv-x/q0"]
    assert (q0.corpus_id, q0.qtype, q0.gold_kind) == ("conv-x", "multi-hop", "message_ref")
    assert q0.scope == {"conversation_id": "conv-x"}
    assert q0.scored and not by_id["conv-x/q6"].scored
    # as_of: the last session *with turns* (30), not the turn-less date key of session 31
    assert q0.as_of == dt.datetime(2023, 5, 30, 10, 0)
    assert by_id["conv-y/q0"].as_of == dt.datetime(2023, 5, 8, 13, 56)


def test_locomo_categories_argument(tmp_path: Path) -> None:
    path = write_locomo(tmp_path)
    questions, report = load_locomo_questions(path, categories=(5,))
    assert [q.question_id for q in questions] == ["conv-x/q7"]
    assert questions[0].qtype == "adversarial" and questions[0].answer == "never"
    assert report.loaded_per_category == {"adversarial": 1}
    with pytest.raises(ValueError, match="unknown LoCoMo categories"):
        load_locomo_questions(path, categories=(0,))


# Counted from locomo_dev.json (6 conversations) with an independent json + Counter pass:
#   conv-26 199 QA {1: 32, 2: 37, 3: 13, 4: 70, 5: 47}   conv-30 105 {1: 11, 2: 26, 4: 44, 5: 24}
#   conv-41 193 {1: 31, 2: 27, 3: 8, 4: 86, 5: 41}       conv-42 260 {1: 37, 2: 40, 3: 11, 4: 111,
#   5: 61}   conv-43 242 {1: 31, 2: 26, 3: 14, 4: 107, 5: 64}   conv-44 158 {1: 30, 2: 24, 3: 7,
#   4: 62, 5: 35}. The README's "4 questions with empty evidence" is for the full 10-sample file:
#   2 of them are in these 6 conversations (conv-26 q30 and q46, both open-domain).
DEV_PER_CATEGORY = {
    "multi-hop": 172,
    "temporal": 180,
    "open-domain": 53,
    "single-hop": 480,
    "adversarial": 272,
}


def test_locomo_real_dev_file(shared_file: Callable[[str], Path]) -> None:
    path = shared_file("locomo/locomo_dev.json")
    questions, report = load_locomo_questions(path)
    assert report.qa_total == 1157 == sum(DEV_PER_CATEGORY.values())
    assert report.per_category == DEV_PER_CATEGORY
    assert report.loaded_per_category == {
        k: v for k, v in DEV_PER_CATEGORY.items() if k != "adversarial"
    }
    assert report.loaded == len(questions) == 885 and report.scored == 883
    assert [(u.question_id, u.raw, u.ref) for u in report.unresolved] == [
        ("conv-42/q58", "D10:19", "D10:19"),  # session 10 of conv-42 ends before turn 19
        ("conv-42/q88", "D", ""),  # a bare 'D'
    ]
    assert [(e.question_id, e.qtype, e.reason) for e in report.empty_evidence] == [
        ("conv-26/q30", "open-domain", "empty evidence"),
        ("conv-26/q46", "open-domain", "empty evidence"),
    ]
    assert report.normalized == [
        ("conv-26/q37", "D8:6; D9:17", ("D8:6", "D9:17")),
        ("conv-43/q18", "D:11:26", ("D11:26",)),
    ]
    assert report.problems == []
    assert Counter(q.corpus_id for q in questions) == {
        "conv-26": 152,
        "conv-30": 81,
        "conv-41": 152,
        "conv-42": 199,
        "conv-43": 178,
        "conv-44": 123,
    }
    assert len({q.question_id for q in questions}) == len(questions)
    assert all(q.as_of is not None for q in questions)

    # Every gold reference is the source_ref of a message the LoCoMo reader produces for that
    # conversation: the gold and the ingested memory speak the same ids.
    spec = SourceSpec(
        name="locomo", kind="locomo", path=path, timezone="UTC", owner=None, options={}
    )
    refs: dict[str, set[str]] = {}
    for rec in read_source(spec, None):
        if isinstance(rec, Message):
            refs.setdefault(rec.conversation_id, set()).add(rec.source_ref)
    for q in questions:
        assert set(q.gold) <= refs[q.corpus_id], q.question_id
    # conv-26's qa are asked after its last session with turns (19), not its date-only keys
    conv26 = next(q for q in questions if q.corpus_id == "conv-26")
    assert conv26.as_of == dt.datetime(2023, 10, 22, 9, 55)


# ----------------------------------------------------------------------------- JSONL


def test_jsonl_questions_and_errors(tmp_path: Path) -> None:
    good = {
        "id": "q1",
        "question": "When did we plan the Kyoto trip?",
        "type": "temporal",
        "as_of": "2024-03-15T10:00",
        "scope": {"contact_id": "c-42"},
        "gold": [
            {"ref": "msg-1", "kind": "message_id", "grade": 2},
            {"ref": "msg-2", "kind": "message_id", "grade": 1},
            {"ref": "msg-2", "kind": "message_id", "grade": 2},  # repeated: best grade wins
        ],
    }
    lines = [
        json.dumps(good),  # 1
        json.dumps(  # 2: source_ref kind, int id, offset dropped, default grade and type
            {
                "id": 7,
                "question": "what did we say about cats?",
                "as_of": "2024-03-15T10:00:00+09:00",
                "gold": [{"ref": "D1:3", "kind": "source_ref"}],
            }
        ),
        "",  # blank: skipped, not counted
        "{not json",  # 4
        json.dumps(["a list"]),  # 5
        json.dumps({**good, "id": "q1"}),  # 6: duplicate id
        json.dumps({**good, "id": "q3", "gold": [{"ref": "m", "kind": "message_id", "grade": 3}]}),
        json.dumps({**good, "id": "q4", "gold": [{"ref": "m", "kind": "turn"}]}),  # 8
        json.dumps(  # 9: mixed kinds
            {
                **good,
                "id": "q5",
                "gold": [{"ref": "m", "kind": "message_id"}, {"ref": "c", "kind": "chunk_id"}],
            }
        ),
        json.dumps({**good, "id": "q6", "as_of": "15/03/2024"}),  # 10
        json.dumps({**good, "id": "q7", "scope": {"user": "x"}}),  # 11
        json.dumps({**good, "id": "q8", "extra": 1}),  # 12
        json.dumps({"id": "q9", "question": "no gold key"}),  # 13
        json.dumps({"id": "q10", "question": "  ", "gold": []}),  # 14
        json.dumps({"id": "q11", "question": "unlabelled yet", "gold": []}),  # 15: kept
        json.dumps(  # 16: conversation scope, chunk gold
            {
                "id": "q12",
                "question": "what was in that chunk?",
                "scope": {"conversation_id": "conv-1"},
                "gold": [{"ref": "chunk-9", "kind": "chunk_id", "grade": 1}],
            }
        ),
    ]
    path = tmp_path / "questions.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    questions, report = load_jsonl_questions(path)

    assert [q.question_id for q in questions] == ["q1", "7", "q11", "q12"]
    q1, q7, q11, q12 = questions
    assert q1 == EvalQuestion(
        question_id="q1",
        corpus_id="c-42",
        question="When did we plan the Kyoto trip?",
        qtype="temporal",
        gold={"msg-1": 2, "msg-2": 2},
        gold_kind="message_id",
        as_of=dt.datetime(2024, 3, 15, 10, 0),
        scope={"contact_id": "c-42"},
    )
    assert (q7.gold, q7.gold_kind, q7.qtype, q7.corpus_id) == (
        {"D1:3": 2},
        "message_ref",
        "unspecified",
        "",
    )
    assert q7.as_of == dt.datetime(2024, 3, 15, 10, 0)  # wall clock kept, offset dropped
    assert q11.gold == {} and not q11.scored
    assert (q12.corpus_id, q12.gold, q12.gold_kind) == ("conv-1", {"chunk-9": 1}, "chunk_id")

    assert report.lines == 15 and report.loaded == 4 and not report.ok
    assert report.empty_gold == ["q11"]
    assert report.per_type == {"temporal": 1, "unspecified": 3}
    expected = {
        4: "not valid JSON",
        5: "must be a JSON object",
        6: "duplicate id 'q1' (first on line 1)",
        7: "grade must be 2 (primary) or 1 (supporting)",
        8: "kind must be one of",
        9: "gold mixes kinds",
        10: "'as_of' is not ISO-8601",
        11: "'scope' has unknown keys ['user']",
        12: "unknown keys ['extra']",
        13: "'gold' is missing",
        14: "'question' must be a non-empty string",
    }
    assert len(report.errors) == len(expected)
    for error, (line, text) in zip(report.errors, expected.items(), strict=True):
        assert error.startswith(f"{path}:{line}: "), error
        assert text in error, error


# ----------------------------------------------------------------------------- time queries


def session_table(rows: list[tuple[str, str, dt.datetime, dt.datetime]]) -> pa.Table:
    return pa.table(
        {
            "session_id": [r[0] for r in rows],
            "conversation_id": [r[1] for r in rows],
            "local_date": [r[2].date() for r in rows],
            "start_local_ts": pa.array([r[2] for r in rows], type=TS_LOCAL),
            "end_local_ts": pa.array([r[3] for r in rows], type=TS_LOCAL),
        }
    )


def synthetic_sessions() -> pa.Table:
    """conv-a: 16 sessions over Jan-Apr 2024 with two sessions on one day and one crossing
    midnight; conv-b: a single session. Rows deliberately not in time order."""
    rows = []
    start = dt.datetime(2024, 1, 3, 9, 0)
    gaps = [0, 2, 3, 1, 6, 0, 9, 4, 12, 2, 7, 1, 15, 3, 5, 8]  # days between sessions
    for i, gap in enumerate(gaps):
        start = start + dt.timedelta(days=gap, hours=3 if gap == 0 else 0)
        rows.append((f"a-{i:02d}", "conv-a", start, start + dt.timedelta(minutes=40)))
    late = dt.datetime(2024, 2, 29, 23, 50)
    rows.append(("a-late", "conv-a", late, late + dt.timedelta(minutes=30)))  # to 00:20
    rows.append(("b-00", "conv-b", dt.datetime(2024, 2, 10, 20, 0), dt.datetime(2024, 2, 10, 21)))
    return session_table(list(reversed(rows)))


def locomo_sessions(path: Path) -> pa.Table:
    rows = []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        conv = sample["conversation"]
        for key, value in conv.items():
            if re.fullmatch(r"session_\d+", key) and value:
                start = parse_session_time(conv[f"{key}_date_time"])
                end = start + dt.timedelta(seconds=30 * (len(value) - 1))
                rows.append((f"{sample['sample_id']}/{key}", sample["sample_id"], start, end))
    return session_table(rows)


def ordered(table: pa.Table) -> dict[str, list[tuple[str, dt.datetime]]]:
    """conversation -> [(session_id, start)] in time order: index = position + 1."""
    out: dict[str, list[tuple[str, dt.datetime]]] = {}
    for r in table.to_pylist():
        out.setdefault(r["conversation_id"], []).append((r["session_id"], r["start_local_ts"]))
    return {c: sorted(v, key=lambda x: (x[1], x[0])) for c, v in out.items()}


_WINDOW = re.compile(r"(date) (\S+)\.\.(\S+)$|(session_index) (\d+)\.\.(\d+) of (\d+)$")


def in_window(question: EvalQuestion, sessions: list[tuple[str, dt.datetime]]) -> set[str]:
    """The sessions inside the window stated in notes, recomputed from the table."""
    m = _WINDOW.fullmatch(question.notes)
    assert m is not None, question.notes
    if m[1]:
        lo, hi = dt.date.fromisoformat(m[2]), dt.date.fromisoformat(m[3])
        return {sid for sid, start in sessions if lo <= start.date() <= hi}
    assert int(m[7]) == len(sessions)
    lo_i, hi_i = int(m[5]), int(m[6])
    return {sid for i, (sid, _) in enumerate(sessions, start=1) if lo_i <= i <= hi_i}


def check_time_queries(table: pa.Table, questions: list[EvalQuestion], lang: str) -> None:
    convs = ordered(table)
    for q in questions:
        sessions = convs[q.corpus_id]
        assert q.gold_kind == "session_id" and set(q.gold.values()) == {2}
        assert q.scope == {"conversation_id": q.corpus_id}
        assert q.gold, q
        # gold = exactly the sessions of the table inside the stated window, none in the future
        assert set(q.gold) == in_window(q, sessions), q
        starts = dict(sessions)
        assert all(starts[s] <= q.as_of for s in q.gold), q
        # and the parser reads the question into filters selecting exactly those sessions
        parsed = parse_query(q.question, now=q.as_of, lang=lang)
        assert parsed.filters, (q.question, parsed.notes)
        selected = {
            sid
            for i, (sid, start) in enumerate(sessions, start=1)
            if matches_all(
                parsed.filters, local_ts=start, session_index=i, n_sessions=len(sessions)
            )
        }
        assert selected == set(q.gold), (q.question, q.as_of, q.notes, parsed.filters)


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_time_queries_agree_with_parser(lang: str) -> None:
    table = synthetic_sessions()
    questions = generate_time_queries(table, seed=3, per_template=20, lang=lang)
    counts = Counter(q.qtype for q in questions)
    assert set(counts) == set(TIME_TEMPLATES)
    # Where fewer distinct questions exist than per_template, all of them are found: 17 days
    # with sessions (conv-a has two on one day), 18 sessions, 4 (conversation, month) pairs,
    # 14 first/last/nth windows (conv-a: first, last, 2nd..12th; conv-b: its only session).
    assert counts == dict.fromkeys(TIME_TEMPLATES, 20) | {
        "dates": 17,
        "earlier_today": 17,
        "session": 18,
        "month": 4,
        "rel_session": 14,
    }
    assert len({q.question_id for q in questions}) == len(questions)
    assert {q.corpus_id for q in questions} == {"conv-a", "conv-b"}
    check_time_queries(table, questions, lang)
    # the midnight-crossing session is asked about "earlier today" at the latest that day
    late = [q for q in questions if q.qtype == "earlier_today" and "a-late" in q.gold]
    assert all(q.as_of.date() == dt.date(2024, 2, 29) for q in late)


def test_time_queries_deterministic() -> None:
    table = synthetic_sessions()
    first = generate_time_queries(table, seed=0)
    assert first == generate_time_queries(table, seed=0)
    # row order of the table does not matter, the seed does
    assert first == generate_time_queries(table.take(list(range(table.num_rows))[::-1]), seed=0)
    assert first != generate_time_queries(table, seed=1)
    assert len(generate_time_queries(table, per_template=2)) == 2 * len(TIME_TEMPLATES)
    assert generate_time_queries(table.slice(0, 0)) == []
    with pytest.raises(ValueError, match="lang"):
        generate_time_queries(table, lang="fr")


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_time_queries_on_locomo_sessions(shared_file: Callable[[str], Path], lang: str) -> None:
    table = locomo_sessions(shared_file("locomo/locomo_dev.json"))
    questions = generate_time_queries(table, seed=0, per_template=20, lang=lang)
    assert Counter(q.qtype for q in questions) == dict.fromkeys(TIME_TEMPLATES, 20)
    check_time_queries(table, questions, lang)
