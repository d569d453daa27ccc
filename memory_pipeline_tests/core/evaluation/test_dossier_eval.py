"""Dossier coverage vs gold: the matching rule, citation scoping, per-unit CIs — on small
hand-made LoCoMo- and RealPersonaChat-shaped inputs (no metric on invented data: these
check the scorer, the figures come from the dev file and the corpus)."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pytest

from memory_pipeline.core.evaluation import dossier_eval as de
from memory_pipeline.core.memories.dossier import EMPTY_BULLET
from memory_pipeline.core.sessions.sessionize import sessionize
from memory_pipeline_tests.factories import msg, table

S1, S2 = "ses_" + "1" * 20, "ses_" + "2" * 20


def test_content_f1_and_tokens_drop_names_and_stem():
    an = de._Analyzer()
    event = an.tokens("Melanie registers for a pottery class.", ["Melanie"])
    said = an.tokens("Melanie just signed up for a pottery class", ["Melanie"])
    assert "melani" not in event and {"potteri", "class"} <= event & said
    assert de.content_f1(event, said) >= de.F1_THRESHOLD
    assert de.content_f1(event, an.tokens("Melanie likes tea", ["Melanie"])) < de.F1_THRESHOLD
    assert de.content_f1(set(), said) == 0.0
    ja = an.tokens("私は学生である。", ["AH"])
    assert ja and de.content_f1(ja, an.tokens("AHは大学の学生です", ["AH"])) >= de.F1_THRESHOLD


def test_cited_bullets_reads_nested_bullets_and_skips_the_rest():
    md = "\n".join(
        [
            "# Dossier: x",
            "Last Updated: 2024-01-01",
            "## Recent Topics",
            f"- 2024-01-01 — Pottery [sessions: {S1}]",
            f"  - Melanie signed up for a pottery class [sessions: {S1}, {S2}]",
            EMPTY_BULLET,
            "- no citation here",
        ]
    )
    assert de.cited_bullets(md) == [
        ("2024-01-01 — Pottery", {S1}),
        ("Melanie signed up for a pottery class", {S1, S2}),
    ]


@pytest.fixture
def locomo_like(tmp_path):
    """Two LoCoMo sessions of one sample; the messages carry their dia_ids as source_ref."""
    data = [
        {
            "sample_id": "conv-x",
            "event_summary": {
                "events_session_1": {
                    "Mel": ["Mel registers for a pottery class."],
                    "Car": [],
                    "date": "1 May, 2023",
                },
                "events_session_2": {"Mel": [], "Car": ["Car adopts a puppy."], "date": "x"},
            },
        }
    ]
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    rows = [
        msg("2023-05-01 10:00", "I signed up for a pottery class", "Mel", "conv-x", order=0),
        msg("2023-05-20 10:00", "We adopted a puppy!", "Car", "conv-x", order=1),
    ]
    messages = table(*rows)
    refs = pa.array(["D1:1", "D2:1"])
    messages = messages.set_column(
        messages.schema.get_field_index("source_ref"), "source_ref", refs
    )
    sessions = sessionize(messages, 180)
    return path, sessions, messages


def test_event_coverage_needs_a_citation_of_the_events_session(locomo_like):
    path, sessions, messages = locomo_like
    ids = sessions.sort_by("start_ts").column("session_id").to_pylist()
    contact = sessions.column("contact_id")[0].as_py()
    v1 = f"- Mel signed up for a pottery class [sessions: {ids[0]}]\n"
    wrong = f"- Mel signed up for a pottery class [sessions: {ids[1]}]\n"
    versions = {contact: [(dt.date(2023, 5, 1), v1), (dt.date(2023, 5, 20), wrong)]}
    run = de.event_coverage(path, sessions, messages, versions, resamples=200)
    by = {(s["version"]): s for s in run.summary if s["gold"] == "locomo_events"}
    assert by["at_session"]["covered"] == 1 and by["at_session"]["items"] == 2
    assert by["final"]["covered"] == 0  # the last page cites the wrong session
    per = {(r["unit"], r["speaker"], r["version"]): r["coverage"] for r in run.rows}
    assert per[("conv-x", "Mel", "at_session")] == 1.0
    assert per[("conv-x", "Car", "at_session")] == 0.0
    assert per[("conv-x", "*", "at_session")] == 0.5
    tables = run.tables()
    assert tables["dossier_coverage"].schema == de.COVERAGE_SCHEMA
    assert tables["dossier_coverage_summary"].num_rows == 4  # the goal's and both speakers'


def test_the_goal_scores_the_contact_speakers_events_not_the_owners(tmp_path):
    """The owner has no dossier (and a contact's page never states the owner's own news):
    their events count only in locomo_events_all."""
    data = [
        {
            "sample_id": "conv-y",
            "event_summary": {
                "events_session_1": {
                    "Mel": ["Mel registers for a pottery class."],
                    "A": ["A adopts a puppy."],
                }
            },
        }
    ]
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    messages = table(
        msg("2023-05-01 10:00", "I signed up for a pottery class", "Mel", "conv-y", order=0),
        msg("2023-05-01 10:01", "We adopted a puppy!", "A", "conv-y", order=1),
    )
    refs = pa.array(["D1:1", "D1:2"])
    messages = messages.set_column(
        messages.schema.get_field_index("source_ref"), "source_ref", refs
    )
    sessions = sessionize(messages, 180)
    (sid,) = sessions.column("session_id").to_pylist()
    md = f"- Mel signed up for a pottery class [sessions: {sid}]\n"
    versions = {"conv-y": [(dt.date(2023, 5, 1), md)]}
    run = de.event_coverage(path, sessions, messages, versions, resamples=100)
    got = {(s["gold"], s["version"]): (s["covered"], s["items"]) for s in run.summary}
    assert got[("locomo_events", "final")] == (1, 1)  # Mel's event, on Mel's page
    assert got[("locomo_events_all", "final")] == (1, 2)  # A's own event is not there
    assert {i["side"] for i in run.items} == {"contact", "owner"}


def test_persona_coverage_scores_each_speakers_final_page(tmp_path):
    personas = {
        "AB": {"persona": ["私は犬を飼っている。", "私は東京に住んでいる。"]},
        "AC": {"persona": ["私は学生である。"]},
    }
    path = tmp_path / "interlocutors.json"
    path.write_text(json.dumps(personas, ensure_ascii=False), encoding="utf-8")
    versions = {
        "AB": [
            (dt.date(2022, 8, 1), "- nothing\n"),
            (dt.date(2022, 8, 2), f"- ABは犬を飼っている [sessions: {S1}]\n"),
        ],
        "AC": [(dt.date(2022, 8, 1), f"- ACは会社員です [sessions: {S2}]\n")],
        "ZZ": [(dt.date(2022, 8, 1), f"- ZZ has no persona [sessions: {S2}]\n")],
    }
    run = de.persona_coverage(path, versions, resamples=200)
    (summary,) = run.summary
    assert (summary["units"], summary["items"], summary["covered"]) == (2, 3, 1)
    assert summary["mean"] == pytest.approx(0.25)  # AB 1/2, AC 0/1
    assert summary["ci_low"] <= summary["mean"] <= summary["ci_high"]


def test_the_report_shows_the_dossier_coverage_section(locomo_like, tmp_path):
    from memory_pipeline.core.evaluation.report import write_report

    path, sessions, messages = locomo_like
    ids = sessions.sort_by("start_ts").column("session_id").to_pylist()
    contact = sessions.column("contact_id")[0].as_py()
    md = f"- Mel signed up for a pottery class [sessions: {ids[0]}]\n"
    run = de.event_coverage(
        path, sessions, messages, {contact: [(dt.date(2023, 5, 1), md)]}, resamples=100
    )
    html, report_md = write_report(run.tables(), {"title": "t"}, tmp_path / "report")
    text = report_md.read_text(encoding="utf-8")
    assert "Dossier coverage" in text and "LoCoMo events" in text and "conv-x" in text
    assert "Dossier coverage" in html.read_text(encoding="utf-8")
