"""Memory extraction (rules), source validation and supersession on real and hand-made chats."""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable

import pyarrow as pa
import pytest

from memory_pipeline.core.common.ids import stable_id
from memory_pipeline.core.common.schema import MEMORIES, MEMORY_REJECTS, MEMORY_TIMELINE
from memory_pipeline.core.ingest.columnar import ingest
from memory_pipeline.core.ingest.normalize import messages_table
from memory_pipeline.core.ingest.sources import SourceSpec, read_source
from memory_pipeline.core.memories.extract import (
    R_EMPTY_TEXT,
    R_EXTRACTOR_ERROR,
    R_NO_SOURCE,
    R_OUTSIDE_SESSION,
    R_UNKNOWN_MESSAGE,
    MemoryCandidate,
    SessionExtraction,
    SessionMessages,
    as_of,
    extract_memories,
    resolve_date,
    supersede,
    supersede_rows,
)
from memory_pipeline.core.sessions.sessionize import sessionize
from memory_pipeline_tests.factories import msg, table
from memory_pipeline_tests.paths import SAMPLE

UTC = dt.UTC


def _read(specs: list[SourceSpec], start: dt.date = dt.date(2024, 3, 1)) -> pa.Table:
    records = [r for spec in specs for r in read_source(spec)]
    result = ingest(records, start_date=start)
    return messages_table(result.messages)


@pytest.fixture(scope="module")
def sample() -> tuple[pa.Table, pa.Table]:
    """The bundled sample's raw_messages and sessions (gap 180), built without Dagster."""
    specs = [
        SourceSpec("sample_line_json", "line_json", SAMPLE / "line_json", "Asia/Tokyo", "Yuki"),
        SourceSpec("sample_line_txt", "line_txt", SAMPLE / "line_txt", "Asia/Tokyo", "Yuki"),
    ]
    messages = _read(specs)
    return messages, sessionize(messages, 180)


@pytest.fixture(scope="module")
def sample_memories(sample: tuple[pa.Table, pa.Table]) -> tuple[pa.Table, pa.Table]:
    messages, sessions = sample
    return extract_memories(sessions, messages)


def _rows(t: pa.Table) -> list[dict]:
    return t.to_pylist()


def _texts(messages: pa.Table) -> dict[str, str]:
    return dict(
        zip(
            messages.column("message_id").to_pylist(),
            messages.column("text").to_pylist(),
            strict=True,
        )
    )


# ----------------------------------------------------------------------------- the sample


def test_schema_and_no_rejects_from_rules(sample_memories: tuple[pa.Table, pa.Table]) -> None:
    mem, rej = sample_memories
    assert mem.schema == MEMORIES and rej.schema == MEMORY_REJECTS
    assert mem.num_rows > 0
    assert rej.num_rows == 0  # the rules only ever cite the message they read
    assert set(mem.column("method").to_pylist()) == {"rules"}


def test_english_new_job_is_an_employer_memory(sample_memories, sample) -> None:
    mem, _ = sample_memories
    texts = _texts(sample[0])
    jobs = [r for r in _rows(mem) if r["attribute"] == "employer"]
    assert len(jobs) == 1
    job = jobs[0]
    assert (job["subject"], job["value"], job["kind"]) == ("Maria", "Hikari Design", "event")
    assert job["subject_is_owner"] is False
    assert job["conversation_id"] == "maria" and job["lang"] == "en"
    assert "I got the job at Hikari Design" in texts[job["message_ids"][0]]
    assert job["valid_from"] == dt.datetime(2024, 3, 1, 11, 10, 12, tzinfo=UTC)  # 20:10:12 JST


def test_english_relationship_and_preference(sample_memories) -> None:
    rows = _rows(sample_memories[0])
    manager = [r for r in rows if r["kind"] == "relationship" and r["attribute"] == "manager"]
    assert [(r["subject"], r["value"]) for r in manager] == [("Maria", "Ms. Tanaka")]
    prefs = [r for r in rows if r["kind"] == "preference" and r["subject"] == "Yuki"]
    assert any(r["value"] == "Komugi's melon pan" for r in prefs)
    assert all(r["subject_is_owner"] for r in prefs)


def test_japanese_move_cites_announcement_question_and_answer(sample_memories, sample) -> None:
    texts = _texts(sample[0])
    moves = [r for r in _rows(sample_memories[0]) if r["attribute"] == "residence"]
    assert len(moves) == 1
    move = moves[0]
    assert (move["subject"], move["value"]) == ("健太", "武蔵小杉")
    assert move["event_date"] == dt.date(2024, 3, 20)
    assert move["kind"] == "plan"  # stated on March 4 for March 20
    cited = [texts[m] for m in move["message_ids"]]
    assert cited[0].startswith("引っ越しの日決まった") and "武蔵小杉" in cited[1]
    assert cited[2].startswith("そう")
    assert move["lang"] == "ja" and "武蔵小杉" in move["text"]


def test_japanese_third_person_transfer_and_dated_plans(sample_memories) -> None:
    rows = _rows(sample_memories[0])
    transfer = [r for r in rows if r["attribute"] == "work_location"]
    assert [(r["subject"], r["value"], r["event_date"]) for r in transfer] == [
        ("美咲", "大阪", dt.date(2024, 4, 1))
    ]
    assert transfer[0]["subject_is_owner"] is False
    plans = {(r["subject"], r["event_date"]) for r in rows if r["kind"] == "plan"}
    assert ("健太", dt.date(2024, 3, 13)) in plans  # 13日に新宿のルミネで買ってくる
    assert ("Yuki", dt.date(2024, 3, 30)) in plans  # I'll bring a bag of food on the 30th
    assert ("Yuki", dt.date(2024, 3, 10)) in plans  # I'll book the train tickets by next Sunday


def test_questions_stickers_and_system_lines_are_never_sources(sample_memories, sample) -> None:
    messages = sample[0]
    types = dict(
        zip(
            messages.column("message_id").to_pylist(),
            messages.column("type").to_pylist(),
            strict=True,
        )
    )
    for r in _rows(sample_memories[0]):
        assert all(types[m] == "text" for m in r["message_ids"])
        if len(r["message_ids"]) == 1:  # a plain statement, not a confirmed question
            assert "?" not in r["text"] and "？" not in r["text"]
    # "Dinner next week?" and "are you still coming ... tomorrow?" have dates but are questions
    assert not any("Dinner next week" in r["text"] for r in _rows(sample_memories[0]))


def test_every_memory_cites_only_its_own_session(sample_memories, sample) -> None:
    messages, sessions = sample
    by_session = {r["session_id"]: r for r in _rows(sessions)}
    conv_of = dict(
        zip(
            messages.column("message_id").to_pylist(),
            messages.column("conversation_id").to_pylist(),
            strict=True,
        )
    )
    for r in _rows(sample_memories[0]):
        s = by_session[r["session_id"]]
        assert r["message_ids"] and set(r["message_ids"]) <= set(s["message_ids"])
        assert {conv_of[m] for m in r["message_ids"]} == {r["conversation_id"]}
        assert (r["contact_id"], r["local_date"]) == (s["contact_id"], s["local_date"])


def test_ids_are_content_derived_and_stable(sample_memories, sample) -> None:
    mem, _ = sample_memories
    again, _ = extract_memories(sample[1], sample[0])
    assert again.equals(mem)
    for r in _rows(mem):
        expected = stable_id(
            "mem", r["session_id"], r["kind"], r["attribute"], r["text"], *r["message_ids"]
        )
        assert r["memory_id"] == expected
    assert len(set(mem.column("memory_id").to_pylist())) == mem.num_rows


def test_input_row_order_does_not_matter(sample_memories, sample) -> None:
    messages, sessions = sample
    rng = random.Random(7)
    m_idx = list(range(messages.num_rows))
    s_idx = list(range(sessions.num_rows))
    rng.shuffle(m_idx)
    rng.shuffle(s_idx)
    shuffled_sessions = sessions.take(pa.array(s_idx))
    mem, rej = extract_memories(shuffled_sessions, messages.take(pa.array(m_idx)))
    # the same memories; rows follow the given session order, so compare as sets
    assert sorted(mem.to_pylist(), key=lambda r: r["memory_id"]) == sorted(
        sample_memories[0].to_pylist(), key=lambda r: r["memory_id"]
    )
    timeline = supersede(sample_memories[0])
    assert supersede(mem).equals(timeline)
    assert supersede(mem.take(pa.array(list(range(mem.num_rows))[::-1]))).equals(timeline)


# ----------------------------------------------------------------------------- hand-made chats


def _session_of(*messages) -> tuple[pa.Table, pa.Table]:
    t = table(*messages)
    return t, sessionize(t, 180)


def test_statements_kept_questions_and_reactions_dropped() -> None:
    msgs, sessions = _session_of(
        msg("2024-05-01 10:00", "Do you live in Osaka?", "A", order=0),
        msg("2024-05-01 10:01", "I live in Osaka.", "B", order=1),
        msg("2024-05-01 10:02", "大阪に住んでるんですか？", "A", order=2),
        msg("2024-05-01 10:03", "そうなんですね、神戸に住んでるんですね", "A", order=3),
        msg("2024-05-01 10:04", "私は神戸に住んでいます。", "A", order=4),
        msg("2024-05-01 10:05", "If I lived in Kyoto I would love it", "B", order=5),
    )
    mem, rej = extract_memories(sessions, msgs)
    got = [(r["subject"], r["attribute"], r["value"], r["subject_is_owner"]) for r in _rows(mem)]
    assert got == [("B", "residence", "Osaka", False), ("A", "residence", "神戸", True)]
    assert rej.num_rows == 0


def test_relative_event_and_plan_dates_follow_the_message_day() -> None:
    msgs, sessions = _session_of(
        # 2024-05-03 is a Friday
        msg("2024-05-03 21:00", "I'm going to the dentist tomorrow", "A", order=0),
        msg("2024-05-03 21:01", "来週の土曜に映画を観に行く予定", "B", order=1),
        msg("2024-05-03 21:02", "I won a chess tournament yesterday!", "A", order=2),
        msg("2024-05-03 21:03", "明日は仕事以外には予定なしです", "B", order=3),
    )
    rows = _rows(extract_memories(sessions, msgs)[0])
    got = [(r["kind"], r["subject"], r["event_date"]) for r in rows]
    assert got == [
        ("plan", "A", dt.date(2024, 5, 4)),
        ("plan", "B", dt.date(2024, 5, 11)),
        ("event", "A", dt.date(2024, 5, 2)),
    ]


def test_resolve_date_directions() -> None:
    from memory_pipeline.core.memories.extract_dates import _DATE_EN, _DATE_JA

    today = dt.date(2024, 3, 28)
    m = _DATE_EN.search("on the 2nd")
    assert resolve_date(m, today, 1) == dt.date(2024, 4, 2)
    assert resolve_date(m, today, -1) == dt.date(2024, 3, 2)
    m = _DATE_JA.search("1月5日に")
    assert resolve_date(m, today, 1) == dt.date(2025, 1, 5)
    assert resolve_date(m, today, -1) == dt.date(2024, 1, 5)
    assert resolve_date(_DATE_JA.search("来週"), today, 1) is None  # a range, not a day


def _residence_history() -> tuple[pa.Table, pa.Table]:
    return _session_of(
        msg("2024-03-01 10:00", "I live in Tokyo.", "B", order=0),
        msg("2024-03-20 10:00", "I still live in Tokyo", "B", order=1),
        msg("2024-04-10 10:00", "I just moved to Osaka!", "B", order=2),
        msg("2024-04-10 10:01", "I live in Kobe now", "A", order=3),
    )


def test_supersede_closes_the_older_value() -> None:
    msgs, sessions = _residence_history()
    assert sessions.num_rows == 3
    mem, _ = extract_memories(sessions, msgs)
    timeline = supersede(mem)
    assert timeline.schema == MEMORY_TIMELINE and timeline.num_rows == mem.num_rows
    b = [r for r in _rows(timeline) if r["subject"] == "B"]
    assert [r["value"] for r in b] == ["Tokyo", "Tokyo", "Osaka"]
    osaka = b[2]
    # a restatement of the same value supersedes nothing; the move closes both
    for old in b[:2]:
        assert old["superseded_by"] == osaka["memory_id"]
        assert old["valid_to"] == osaka["valid_from"]
    assert osaka["valid_to"] is None and osaka["superseded_by"] is None
    a = [r for r in _rows(timeline) if r["subject"] == "A"]
    assert a[0]["valid_to"] is None  # another subject's residence is independent

    before = as_of(timeline, dt.datetime(2024, 4, 1, tzinfo=UTC))
    after = as_of(timeline, dt.datetime(2024, 4, 11, tzinfo=UTC))
    at_change = as_of(timeline, osaka["valid_from"])
    assert {(r["subject"], r["value"]) for r in _rows(before)} == {("B", "Tokyo")}
    assert {(r["subject"], r["value"]) for r in _rows(after)} == {("B", "Osaka"), ("A", "Kobe")}
    assert ("B", "Tokyo") not in {(r["subject"], r["value"]) for r in _rows(at_change)}
    with pytest.raises(ValueError):
        as_of(timeline, dt.datetime(2024, 4, 1))


def test_supersede_is_per_contact() -> None:
    one, s1 = _session_of(msg("2024-03-01 10:00", "I live in Tokyo.", "B", conv="c1"))
    two, s2 = _session_of(msg("2024-03-05 10:00", "I live in Nagoya.", "B", conv="c2", order=1))
    mem, _ = extract_memories(pa.concat_tables([s1, s2]), pa.concat_tables([one, two]))
    assert mem.num_rows == 2
    assert supersede(mem).column("valid_to").null_count == 2


# ----------------------------------------------------------------------------- validation


class _Scripted:
    """An extractor that proposes fixed candidates (ids resolved by a callback)."""

    method = "scripted/test"

    def __init__(self, make: Callable[[SessionMessages], SessionExtraction]) -> None:
        self.make = make

    def extract_session(self, session: SessionMessages) -> SessionExtraction:
        return self.make(session)


def _cand(text: str, ids: tuple[str, ...], kind: str = "fact") -> MemoryCandidate:
    return MemoryCandidate("B", kind, "", "", text, ids)


def test_unresolvable_sources_are_rejected_never_stored() -> None:
    m1 = msg("2024-03-01 10:00", "I live in Tokyo.", "B", conv="c1")
    m2 = msg("2024-03-01 10:01", "ok", "A", conv="c1", order=1)
    other = msg("2024-03-01 10:00", "I live in Paris.", "B", conv="c2")  # another contact
    later = msg("2024-03-09 10:00", "hello again", "B", conv="c1", order=2)  # another session
    msgs = table(m1, m2, other, later)
    sessions = sessionize(msgs, 180)
    assert sessions.num_rows == 3
    ids = {r["text"]: r["message_id"] for r in _rows(msgs)}
    c1_first = [r for r in _rows(sessions) if ids["ok"] in r["message_ids"]][0]["session_id"]

    def make(session: SessionMessages) -> SessionExtraction:
        if session.session_id != c1_first:
            return SessionExtraction([])
        return SessionExtraction(
            [
                _cand("B lives in Tokyo", (ids["I live in Tokyo."],)),
                _cand("no source", ()),
                _cand("made up", ("msg_does_not_exist",)),
                _cand("other contact", (ids["I live in Tokyo."], ids["I live in Paris."])),
                _cand("other session", (ids["hello again"],)),
                _cand("  ", (ids["ok"],)),
                _cand("bad kind", (ids["ok"],), kind="opinion"),
            ]
        )

    mem, rej = extract_memories(sessions, msgs, extractor=_Scripted(make))
    assert [r["text"] for r in _rows(mem)] == ["B lives in Tokyo"]
    assert mem.column("method").to_pylist() == ["scripted/test"]
    reasons = {r["text"]: r["reason"] for r in _rows(rej)}
    assert reasons == {
        "no source": R_NO_SOURCE,
        "made up": R_UNKNOWN_MESSAGE,
        "other contact": R_OUTSIDE_SESSION,
        "other session": R_OUTSIDE_SESSION,
        "  ": R_EMPTY_TEXT,
        "bad kind": "bad_kind",
    }
    assert set(rej.column("session_id").to_pylist()) == {c1_first}


def test_extractor_error_is_recorded_not_raised() -> None:
    msgs, sessions = _session_of(msg("2024-03-01 10:00", "I live in Tokyo.", "B"))
    bad = _Scripted(lambda s: SessionExtraction([], "ValueError: malformed JSON"))
    mem, rej = extract_memories(sessions, msgs, extractor=bad)
    assert mem.num_rows == 0
    assert rej.num_rows == 1 and rej.column("reason")[0].as_py().startswith(R_EXTRACTOR_ERROR)


# ----------------------------------------------------------------------------- real corpus


def test_locomo_memories_are_sourced_statements(shared_file) -> None:
    spec = SourceSpec("locomo", "locomo", shared_file("locomo/locomo_dev.json"), "UTC", None)
    messages = _read([spec], dt.date(2000, 1, 1))
    sessions = sessionize(messages, 180)
    mem, rej = extract_memories(sessions, messages)
    assert mem.num_rows > 50 and rej.num_rows == 0
    in_session = {r["session_id"]: set(r["message_ids"]) for r in _rows(sessions)}
    for r in _rows(mem):
        assert set(r["message_ids"]) <= in_session[r["session_id"]]
        assert not r["text"].rstrip().endswith("?")  # the stated sentence, not its message
        assert len(r["text"]) <= 300
    kinds = set(mem.column("kind").to_pylist())
    assert {"preference", "event", "plan"} <= kinds


@pytest.mark.parametrize("seed", range(6))
def test_supersede_equals_the_row_by_row_definition(seed: int) -> None:
    """The whole-column supersession gives the row-by-row definition's table exactly, on
    histories with restated values, case/width variants (NFKC, casefold), null subjects
    and values, ties on valid_from, memories without an attribute and shuffled input."""
    rng = random.Random(seed)
    t0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    values = ["Tokyo", "tokyo", "ＴＯＫＹＯ", "Osaka", " osaka ", "Kobe", "", None]
    rows = [
        {
            "memory_id": stable_id("m", seed, i),
            "contact_id": rng.choice(["c1", "c2", "c3"]),
            "conversation_id": "conv",
            "session_id": f"s{i % 7}",
            "local_date": dt.date(2024, 1, 1),
            "subject": rng.choice(["A", "B", None]),
            "subject_is_owner": False,
            "kind": "fact",
            "attribute": rng.choice(["residence", "employer", "", "", None]),
            "value": rng.choice(values),
            "text": "t",
            "lang": "en",
            "valid_from": t0 + dt.timedelta(minutes=rng.randrange(30)),
            "event_date": None,
            "message_ids": [f"m{i}"],
            "method": "rules",
            "confidence": 0.5,
        }
        for i in range(rng.choice([1, 40, 400]))
    ]
    mem = pa.Table.from_pylist(rows, schema=MEMORIES)
    expected = supersede_rows(mem)
    assert supersede(mem).equals(expected)
    shuffled = mem.take(pa.array(rng.sample(range(mem.num_rows), mem.num_rows)))
    assert supersede(shuffled).equals(expected)
    assert supersede(mem.slice(0, 0)).equals(supersede_rows(mem.slice(0, 0)))
