"""Living dossiers on the real sample: sections, citations, isolation, exact fold, files.

Memories are built here by hand (rows in the MEMORIES schema pointing at real sample
sessions), so these tests do not depend on the memory extractor.
"""

from __future__ import annotations

import bisect
import datetime as dt
import json
import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from memory_pipeline.config import load_config
from memory_pipeline.core.common.ids import stable_id
from memory_pipeline.core.common.schema import DOSSIERS, MEMORIES, SESSION_ENRICHMENT
from memory_pipeline.core.ingest.normalize import messages_table
from memory_pipeline.core.ingest.stage import discover_dates, read_all
from memory_pipeline.core.memories import dossier as ds
from memory_pipeline.core.memories.dossier import (
    EMPTY_BULLET,
    RESPONSE_BOUNDS,
    SECTIONS,
    DossierState,
    build_day,
    check_rewrite,
    cited_sessions,
    contact_file_name,
    dossier_rows,
    missing_sections,
    render_markdown,
    uncited_bullets,
    update_dossier,
    write_markdown_atomic,
)
from memory_pipeline.core.memories.dossier_state import TOPIC_POINTS
from memory_pipeline.core.represent.build import enrich_sessions
from memory_pipeline.core.sessions.sessionize import sessionize
from memory_pipeline_tests.factories import msg, table
from memory_pipeline_tests.paths import ROOT

D = dt.date
OWNER = "Yuki"


# -- data --------------------------------------------------------------------------------------


def memory(
    session: dict,
    kind: str,
    text: str,
    *,
    subject: str | None = None,
    owner: bool = False,
    attribute: str = "",
    value: str = "",
    event_date: dt.date | None = None,
    minutes: int = 0,
    contact_id: str | None = None,
) -> dict:
    """A valid MEMORIES row stated ``minutes`` into a real session (its first message)."""
    subject = subject or (OWNER if owner else session["contact_id"])
    return {
        "memory_id": stable_id("mem", session["session_id"], kind, attribute, text),
        "contact_id": contact_id or session["contact_id"],
        "conversation_id": session["conversation_id"],
        "session_id": session["session_id"],
        "local_date": session["local_date"],
        "subject": subject,
        "subject_is_owner": owner,
        "kind": kind,
        "attribute": attribute,
        "value": value,
        "text": text,
        "lang": "ja" if re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", text) else "en",
        "valid_from": session["start_ts"] + dt.timedelta(minutes=minutes),
        "event_date": event_date,
        "message_ids": session["message_ids"][:1],
        "method": "rules",
        "confidence": 0.9,
    }


class Sample:
    """The bundled sample built with the core stages, plus hand-made memories."""

    def __init__(self) -> None:
        cfg = load_config(ROOT / "memory_pipeline.toml", env={})
        assert cfg.owner == OWNER
        dates = discover_dates(cfg.sources, cfg.start_date)
        self.messages = messages_table(read_all(cfg.sources, dates, cfg.start_date).messages)
        self.sessions = sessionize(self.messages, cfg.session_gap_minutes)
        self.enrichment = enrich_sessions(self.sessions, self.messages)
        self.days = sorted(set(self.sessions.column("local_date").to_pylist()))
        rows = self.sessions.sort_by([("start_ts", "ascending")]).to_pylist()
        self.by_contact: dict[str, list[dict]] = {}
        for r in rows:
            self.by_contact.setdefault(r["contact_id"], []).append(r)
        self.memories = pa.Table.from_pylist(self._memories(), schema=MEMORIES)

    def _memories(self) -> list[dict]:
        m, k = self.by_contact["Maria"], self.by_contact["健太"]
        assert [s["local_date"] for s in m[:4]] == [D(2024, 3, d) for d in (1, 2, 2, 5)]
        assert m[6]["local_date"] == D(2024, 3, 9) and m[7]["local_date"] == D(2024, 3, 10)
        emp, res = {"attribute": "employer"}, {"attribute": "residence"}
        role = {"attribute": "job_title"}
        return [
            # Maria: employer changes once, residence twice
            memory(m[0], "fact", "Maria works at Studio Nami", value="Studio Nami", **emp),
            memory(m[3], "fact", "Maria works at Hikari Design", value="Hikari Design", **emp),
            memory(m[0], "fact", "Maria lives in Shibuya", value="Shibuya", **res),
            memory(m[3], "fact", "Maria lives in Meguro", value="Meguro", **res),
            memory(m[6], "fact", "Maria lives in Setagaya", value="Setagaya", **res),
            memory(m[3], "preference", "Maria loves melon pan"),
            memory(m[7], "preference", "Maria loves  melon pan", minutes=3),  # restated
            memory(m[3], "relationship", "Maria's manager is Ms. Tanaka"),
            memory(m[0], "possession", "Maria has a Shiba mix named Mochi"),
            memory(m[0], "fact", "Yuki lives in Kichijoji", owner=True),  # not about Maria
            memory(m[0], "event", "Maria starts at Hikari Design", event_date=D(2024, 3, 4)),
            memory(m[2], "plan", "Kyoto trip with Yuki", event_date=D(2024, 3, 23)),
            memory(
                m[2], "plan", "Yuki books the shinkansen", owner=True, event_date=D(2024, 3, 10)
            ),
            memory(m[7], "plan", "Maria sends the ryokan options"),
            # two values of one attribute in one session: the later statement wins
            memory(m[8], "fact", "Maria is a senior designer", value="senior", minutes=5, **role),
            memory(m[8], "fact", "Maria is a junior designer", value="junior", **role),
            # 健太, and a row that claims Maria but points at 健太's session
            memory(k[1], "fact", "健太は高円寺に住んでいる", value="高円寺", **res),
            memory(k[1], "plan", "3月20日に健太の引っ越しを手伝う", event_date=D(2024, 3, 20)),
            memory(k[0], "fact", "LEAKED KENTA FACT", contact_id="Maria"),
        ]


@pytest.fixture(scope="module")
def sample() -> Sample:
    return Sample()


def fold(
    sample: Sample, *, through_json: bool = False, seed: int | None = None
) -> tuple[dict[str, DossierState], dict[dt.date, pa.Table]]:
    """Fold every sample day; optionally via JSON between days and with shuffled rows."""
    rng = np.random.default_rng(seed)

    def rows(t: pa.Table) -> pa.Table:
        return t if seed is None else t.take(pa.array(rng.permutation(t.num_rows)))

    states: dict[str, DossierState] = {}
    versions = {}
    for day in sample.days:
        changed = build_day(
            states,
            day,
            rows(sample.sessions),
            rows(sample.messages),
            rows(sample.enrichment),
            rows(sample.memories),
        )
        versions[day] = dossier_rows(changed, day)
        states.update(changed)
        if through_json:
            states = {c: DossierState.from_json(s.to_json()) for c, s in states.items()}
    return states, versions


@pytest.fixture(scope="module")
def folded(sample: Sample) -> tuple[dict[str, DossierState], dict[dt.date, pa.Table]]:
    return fold(sample)


def section(markdown: str, name: str) -> list[str]:
    """The lines under ``## name`` up to the next heading (blank lines dropped)."""
    lines = markdown.splitlines()
    start = lines.index(f"## {name}") + 1
    out = []
    for ln in lines[start:]:
        if ln.startswith("#"):
            break
        if ln.strip():
            out.append(ln)
    return out


def topics(markdown: str) -> list[str]:
    """The Recent Topics session lines (their statement sub-bullets left out)."""
    return [ln for ln in section(markdown, SECTIONS[3]) if ln.startswith("- ")]


def version(versions: dict[dt.date, pa.Table], contact: str, day: dt.date) -> str:
    rows = versions[day].to_pylist()
    return next(r["markdown"] for r in rows if r["contact_id"] == contact)


# -- the real sample ---------------------------------------------------------------------------


def test_maria_has_every_section_and_every_bullet_cites_her_sessions(sample, folded):
    states, _ = folded
    md = render_markdown(states["Maria"])
    assert md.startswith("# Dossier: Maria\nLast Updated: 2024-03-14\n")
    assert missing_sections(md) == []
    assert uncited_bullets(md) == []
    maria = {s["session_id"] for s in sample.by_contact["Maria"]}
    cited = cited_sessions(md)
    assert cited and set(cited) <= maria
    for name in SECTIONS:
        assert section(md, name) and section(md, name) != [EMPTY_BULLET], name
    # every bullet line has exactly one trailing citation of well-formed ids
    bullets = [ln for ln in md.splitlines() if ln.startswith("- ")]
    assert all(
        re.search(r" \[sessions: ses_[0-9a-f]{20}(, ses_[0-9a-f]{20})*\]$", b) for b in bullets
    )


def test_contact_isolation_with_all_contacts_rows(sample, folded):
    states, versions = folded
    assert set(states) == {"Maria", "健太", "家族", "Sam"}
    owner_of = {s["session_id"]: c for c, ss in sample.by_contact.items() for s in ss}
    kenta_titles = {
        t
        for s, t in zip(
            sample.enrichment.column("session_id").to_pylist(),
            sample.enrichment.column("title").to_pylist(),
            strict=True,
        )
        if owner_of[s] == "健太"
    }
    for day, rows in versions.items():
        for r in rows.to_pylist():
            assert {owner_of[s] for s in r["cited_sessions"]} == {r["contact_id"]}, (day, r)
            assert r["cited_sessions"] == cited_sessions(r["markdown"])
            if r["contact_id"] == "Maria":
                assert "LEAKED" not in r["markdown"]
                assert "高円寺" not in r["markdown"]
                assert not any(t in r["markdown"] for t in kenta_titles)
    # update_dossier on one contact from all rows equals the per-day build
    state = None
    for day in [d for d in sample.days if d <= D(2024, 3, 5)]:
        if day in {s["local_date"] for s in sample.by_contact["Maria"]}:
            state = update_dossier(
                state,
                contact_id="Maria",
                day=day,
                sessions=sample.sessions,
                messages=sample.messages,
                enrichment=sample.enrichment,
                memories=sample.memories,
            )
    assert render_markdown(state) == version(versions, "Maria", D(2024, 3, 5))


def test_communication_numbers_match_an_independent_count(sample, folded):
    st = folded[0]["Maria"]
    msgs = sample.messages.filter(pc.equal(sample.messages.column("contact_id"), "Maria"))
    system = pc.equal(msgs.column("type"), "system")
    owner = msgs.column("is_owner")
    n_system = pc.sum(system).as_py()
    n_owner = pc.sum(owner).as_py()
    n_contact = msgs.num_rows - n_owner - n_system
    assert (st.messages_total, st.owner_messages, st.contact_messages, st.system_messages) == (
        msgs.num_rows,
        n_owner,
        n_contact,
        n_system,
    )
    assert msgs.num_rows == 101 and n_system == 1  # the sample as shipped
    assert st.sessions_total == len(sample.by_contact["Maria"])
    md = render_markdown(st)
    assert (
        f"- Messages: {msgs.num_rows} over {st.sessions_total} sessions, 2024-03-01 to "
        f"2024-03-14 (Maria {n_contact}, you {n_owner}, system {n_system})"
    ) in md
    spoken = msgs.filter(pc.invert(system))
    hours = np.bincount(pc.hour(spoken.column("local_ts")).to_numpy(), minlength=24)
    weekdays = np.bincount(
        [t.weekday() for t in spoken.column("local_ts").to_pylist()], minlength=7
    )
    assert st.hours == hours.tolist() and st.weekdays == weekdays.tolist()
    top_hour = int(np.argmax(hours))
    assert f"Most active hours: {top_hour:02d}:00" in md

    # reply times: side switches within a session, from the messages themselves
    by_id = {r["message_id"]: r for r in spoken.to_pylist()}
    gaps: dict[bool, list[float]] = {True: [], False: []}
    for s in sample.by_contact["Maria"]:
        seq = [by_id[m] for m in s["message_ids"] if m in by_id]
        for a, b in zip(seq, seq[1:], strict=False):
            if a["is_owner"] != b["is_owner"]:
                gaps[b["is_owner"]].append((b["ts"] - a["ts"]).total_seconds())
    for is_owner, hist in ((True, st.owner_replies), (False, st.contact_replies)):
        expect = [0] * (len(RESPONSE_BOUNDS) + 1)
        for g in gaps[is_owner]:
            expect[bisect.bisect_right(RESPONSE_BOUNDS, g)] += 1
        assert hist == expect
        assert sum(hist) == len(gaps[is_owner]) > 10
        med = sorted(gaps[is_owner])[(len(gaps[is_owner]) - 1) // 2]
        assert ds.median_bucket(hist) == bisect.bisect_right(RESPONSE_BOUNDS, med)


def test_fold_through_json_and_shuffled_rows_equal_in_memory(sample, folded):
    states, versions = folded
    for kwargs in ({"through_json": True}, {"seed": 7}, {"through_json": True, "seed": 11}):
        other_states, other_versions = fold(sample, **kwargs)
        assert {c: s.to_json() for c, s in other_states.items()} == {
            c: s.to_json() for c, s in states.items()
        }, kwargs
        assert other_versions.keys() == versions.keys()
        for day in versions:
            assert other_versions[day].equals(versions[day]), (kwargs, day)
    assert versions[D(2024, 3, 14)].schema == DOSSIERS
    assert versions[D(2024, 3, 14)].column("contact_id").to_pylist() == ["Maria"]


def test_state_json_round_trip_is_exact(folded):
    for st in folded[0].values():
        text = st.to_json()
        back = DossierState.from_json(text)
        assert back == st and back.to_json() == text
        json.loads(text, parse_float=lambda s: pytest.fail(f"float in state: {s}"))
        assert json.loads(text) == json.loads(text, object_pairs_hook=lambda p: dict(sorted(p)))
    bad = json.loads(folded[0]["Sam"].to_json())
    with pytest.raises(ValueError, match="version"):
        DossierState.from_json(json.dumps({**bad, "version": 99}))
    with pytest.raises(ValueError, match="unknown"):
        DossierState.from_json(json.dumps({**bad, "surprise": 1}))


def test_update_is_pure_and_refuses_replaying_a_day(sample, folded):
    st = folded[0]["Maria"]
    before = st.to_json()
    day = D(2024, 3, 14)
    kw = {
        "sessions": sample.sessions,
        "messages": sample.messages,
        "enrichment": sample.enrichment,
        "memories": sample.memories,
    }
    with pytest.raises(ValueError, match="already at 2024-03-14"):
        update_dossier(st, contact_id="Maria", day=day, **kw)
    assert st.to_json() == before
    # a day without her sessions leaves the state as it was; messages must cover the sessions
    assert update_dossier(st, contact_id="Maria", day=D(2024, 3, 20), **kw) == st
    with pytest.raises(ValueError, match="not in `messages`"):
        update_dossier(None, contact_id="Maria", day=day, **{**kw, "messages": kw["messages"][:5]})
    with pytest.raises(ValueError, match="state of"):
        update_dossier(st, contact_id="Sam", day=D(2024, 3, 20), **{**kw})


def test_supersession_keeps_only_the_newest_value_current(folded):
    states, versions = folded
    profile = section(render_markdown(states["Maria"]), SECTIONS[0])
    text = "\n".join(profile)
    employer = [ln for ln in profile if "works at" in ln]
    assert len(employer) == 1
    assert employer[0].startswith("- Maria works at Hikari Design (since 2024-03-05; previously: ")
    assert "previously: Studio Nami)" in employer[0]
    residence = [ln for ln in profile if "lives in" in ln]
    assert len(residence) == 1
    assert residence[0].startswith(
        "- Maria lives in Setagaya (since 2024-03-09; previously: Meguro)"
    )
    assert "Shibuya" not in text  # two values back: dropped
    role = [ln for ln in profile if "designer" in ln]
    assert len(role) == 1
    assert role[0].startswith("- Maria is a senior designer (since 2024-03-12; previously: junior)")
    assert "Kichijoji" not in text  # the owner's own fact is not Maria's profile
    # the restated preference is one bullet citing both sessions, newest first
    melon = [ln for ln in profile if "melon pan" in ln]
    assert len(melon) == 1 and len(re.findall(r"ses_", melon[0])) == 2
    # earlier versions show the value current then
    early = section(version(versions, "Maria", D(2024, 3, 2)), SECTIONS[0])
    assert any(ln.startswith("- Maria works at Studio Nami (since 2024-03-01) [") for ln in early)
    assert not any("works at Hikari Design" in ln for ln in early)


def test_plans_drop_out_once_their_date_passes(folded):
    states, versions = folded
    on_2 = "\n".join(section(version(versions, "Maria", D(2024, 3, 2)), SECTIONS[1]))
    assert "2024-03-04 — Maria starts at Hikari Design" in on_2
    assert "2024-03-10 — you: Yuki books the shinkansen" not in on_2  # text names Yuki
    assert "2024-03-10 — Yuki books the shinkansen" in on_2
    assert on_2.index("2024-03-04") < on_2.index("2024-03-10") < on_2.index("2024-03-23")
    on_5 = "\n".join(section(version(versions, "Maria", D(2024, 3, 5)), SECTIONS[1]))
    assert "Maria starts at Hikari Design" not in on_5 and "shinkansen" in on_5
    final = section(render_markdown(states["Maria"]), SECTIONS[1])
    lines = [ln.split(" [sessions:")[0] for ln in final]
    assert [ln.split(" — ")[0] for ln in lines] == [
        "- 2024-03-16",  # the concert the chat mentions (no memory for it)
        "- 2024-03-23 to 2024-03-25",  # the Kyoto memory, dated by the chat's span
        "- 2024-03-30",
        "- Maria sends the ryokan options (mentioned 2024-03-10)",
    ]
    assert lines[1].startswith("- 2024-03-23 to 2024-03-25 — Kyoto trip with Yuki — ")
    assert lines[1].endswith("(booked: shinkansen, ryokan)")
    assert {e["text"] for e in states["Maria"].plans} == {
        "Kyoto trip with Yuki",
        "Maria sends the ryokan options",
    }


def test_japanese_contact_renders(sample, folded, tmp_path):
    st = folded[0]["健太"]
    md = render_markdown(st)
    assert md.startswith("# Dossier: 健太\nLast Updated: 2024-03-13\n")
    assert missing_sections(md) == [] and uncited_bullets(md) == []
    assert section(md, SECTIONS[0])[0].startswith("- 健太は高円寺に住んでいる (since 2024-03-04) [")
    ongoing = section(md, SECTIONS[1])
    assert any(ln.startswith("- 2024-03-20 — 3月20日に健太の引っ越しを手伝う") for ln in ongoing)
    assert [ln[:12] for ln in ongoing] == sorted(ln[:12] for ln in ongoing)  # soonest first
    titles = topics(md)
    assert len(titles) == 5 and all(re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", t) for t in titles)
    assert "(健太 " in md and "LEAKED" not in md
    path = write_markdown_atomic(tmp_path, "健太", md)
    assert path.name == "健太.md" and path.read_text(encoding="utf-8") == md


def test_recent_topics_are_the_latest_titles_newest_first(sample, folded):
    md = render_markdown(folded[0]["Maria"])
    lines = section(md, SECTIONS[3])
    latest = sample.by_contact["Maria"][-5:][::-1]
    titles = dict(
        zip(
            sample.enrichment.column("session_id").to_pylist(),
            sample.enrichment.column("title").to_pylist(),
            strict=True,
        )
    )
    assert topics(md) == [
        f"- {s['local_date']} — {titles[s['session_id']]} [sessions: {s['session_id']}]"
        for s in latest
    ]
    # each title is followed by its statements as sub-bullets citing the same session
    starts = [i for i, ln in enumerate(lines) if ln.startswith("- ")] + [len(lines)]
    for a, b in zip(starts, starts[1:], strict=False):
        cite = lines[a].rsplit(" [sessions: ", 1)[1]
        points = lines[a + 1 : b]
        assert 1 <= len(points) <= TOPIC_POINTS, lines[a]
        for p in points:
            assert p.startswith("  - ") and p.endswith(f" [sessions: {cite}"), p
            assert not re.match(r"^  - (Maria|Yuki): ", p), p


# -- small hand-made conversations -------------------------------------------------------------


def synthetic(days_and_times: list[str]) -> tuple[pa.Table, pa.Table]:
    """One conversation "c" with two messages (A then B, 30 s apart) at each local time."""
    out = []
    for i, t in enumerate(days_and_times):
        start = dt.datetime.fromisoformat(t)
        out.append(msg(start.isoformat(sep=" "), f"hi {i}", "A", "c", order=2 * i))
        later = (start + dt.timedelta(seconds=30)).isoformat(sep=" ")
        out.append(msg(later, f"yo {i}", "B", "c", order=2 * i + 1))
    messages = table(*out)
    return messages, sessionize(messages, 180)


def fold_synthetic(sessions, messages, memories, enrichment=None):
    states, versions = {}, {}
    enrichment = SESSION_ENRICHMENT.empty_table() if enrichment is None else enrichment
    for day in sorted(set(sessions.column("local_date").to_pylist())):
        changed = build_day(states, day, sessions, messages, enrichment, memories)
        states.update(changed)
        versions[day] = render_markdown(changed["c"])
    return states, versions


def test_undated_plans_last_fourteen_days_and_dated_ones_until_their_day():
    times = ["2024-03-01 10:00", "2024-03-14 10:00", "2024-03-15 10:00", "2024-03-20 10:00"]
    messages, sessions = synthetic([*times, "2024-03-21 10:00"])
    first = sessions.sort_by("start_ts").to_pylist()[0]
    mems = pa.Table.from_pylist(
        [
            memory(first, "plan", "call the landlord"),
            memory(first, "plan", "dinner party", event_date=D(2024, 3, 20)),
            memory(first, "event", "moved house", event_date=D(2024, 2, 28)),
        ],
        schema=MEMORIES,
    )
    states, versions = fold_synthetic(sessions, messages, mems)

    def ongoing(day: dt.date) -> list[str]:
        return [ln.split(" [")[0] for ln in section(versions[day], SECTIONS[1])]

    assert ongoing(D(2024, 3, 1)) == [
        "- 2024-03-20 — dinner party",
        "- call the landlord (mentioned 2024-03-01)",
    ]
    assert ongoing(D(2024, 3, 14)) == ongoing(D(2024, 3, 1))  # 13 days: still open
    assert ongoing(D(2024, 3, 15)) == ["- 2024-03-20 — dinner party"]  # 14 days: dropped
    assert ongoing(D(2024, 3, 20)) == ["- 2024-03-20 — dinner party"]  # its day: still on
    assert section(versions[D(2024, 3, 21)], SECTIONS[1]) == [EMPTY_BULLET]
    assert states["c"].plans == []
    # the checkers accept the empty-section line; sessions without titles get a fallback
    assert uncited_bullets(versions[D(2024, 3, 21)]) == []
    assert "— Conversation (2 messages) [sessions: " in versions[D(2024, 3, 21)]
    # Recent Topics: only the last 30 days, at most five
    assert len(topics(versions[D(2024, 3, 21)])) == 5


def test_recent_topics_forget_sessions_older_than_thirty_days():
    messages, sessions = synthetic(["2024-03-01 10:00", "2024-04-05 10:00"])
    _, versions = fold_synthetic(sessions, messages, MEMORIES.empty_table())
    assert [ln[:12] for ln in section(versions[D(2024, 4, 5)], SECTIONS[3])] == ["- 2024-04-05"]


def test_response_time_buckets_and_median():
    # A (owner) and B alternate: B replies after 30 s and 12 min, A after 4 min and 50 s
    minutes = [0, 0.5, 4, 12, 50 / 60]
    t = dt.datetime(2024, 3, 1, 10, 0)
    out = []
    for i, m in enumerate(minutes):
        t += dt.timedelta(minutes=m)
        out.append(msg(t.isoformat(sep=" "), f"m{i}", "AB"[i % 2], "c", order=i))
    messages = table(*out)
    sessions = sessionize(messages, 180)
    states, versions = fold_synthetic(sessions, messages, MEMORIES.empty_table())
    st = states["c"]
    assert (
        st.contact_replies[0] == 1 and st.contact_replies[4] == 1 and sum(st.contact_replies) == 2
    )
    assert st.owner_replies[0] == 1 and st.owner_replies[2] == 1 and sum(st.owner_replies) == 2
    assert "Median response time: c ~<1 min (n=2), you ~<1 min (n=2)" in versions[D(2024, 3, 1)]
    assert ds.response_bucket(59) == 0 and ds.response_bucket(60) == 1
    assert ds.response_bucket(10**9) == len(RESPONSE_BOUNDS)
    assert ds.median_bucket([0, 0, 1, 3]) == 3 and ds.median_bucket([0] * 4) is None


def test_owner_label_and_messages_outside_the_day_are_ignored():
    messages, sessions = synthetic(["2024-03-01 10:00", "2024-03-02 10:00"])
    day1 = build_day(
        {},
        D(2024, 3, 1),
        sessions,
        messages,
        SESSION_ENRICHMENT.empty_table(),
        MEMORIES.empty_table(),
    )
    assert day1["c"].sessions_total == 1 and day1["c"].messages_total == 2
    md = render_markdown(day1["c"], owner_label="Yuki")
    assert "(c 1, Yuki 1)" in md


# -- checkers ----------------------------------------------------------------------------------


def test_checkers_catch_broken_dossiers(folded):
    md = render_markdown(folded[0]["Maria"])
    assert missing_sections(md.replace("## Recent Topics", "## Topics")) == ["Recent Topics"]
    assert missing_sections(md.replace("Last Updated: 2024-03-14", "Updated")) == ["Last Updated"]
    assert missing_sections("") == ["title", "Last Updated", *SECTIONS]
    lines = md.splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.startswith("- Maria lives in"))
    uncited = lines[i].split(" [sessions:")[0]
    broken = "\n".join([*lines[:i], uncited, "- bogus [sessions: ses_nothex]", *lines[i + 1 :]])
    assert uncited_bullets(broken) == [uncited, "- bogus [sessions: ses_nothex]"]
    assert uncited_bullets(md + "\nsome stray prose\n") == ["some stray prose"]
    assert uncited_bullets(md + f"\n{EMPTY_BULLET}\n") == []
    assert cited_sessions("- x [sessions: ses_" + "a" * 20 + ", ses_" + "b" * 20 + "]") == [
        "ses_" + "a" * 20,
        "ses_" + "b" * 20,
    ]


def test_check_rewrite_flags_dropped_sections_and_citations(folded):
    md = render_markdown(folded[0]["Maria"])
    assert check_rewrite(md, md) == []
    assert check_rewrite(md, md.replace("Messages:", "In total,")) == []  # rewording is fine
    first = cited_sessions(md)[0]
    dropped = "\n".join(ln for ln in md.splitlines() if first not in ln)
    assert f"dropped citation: {first}" in check_rewrite(md, dropped)
    no_section = md.replace("## Communication Patterns", "")
    assert "missing section: Communication Patterns" in check_rewrite(md, no_section)
    invented = md + "- a guess [sessions: ses_" + "c" * 20 + "]\n"
    assert check_rewrite(md, invented) == ["invented citation: ses_" + "c" * 20]


# -- files -------------------------------------------------------------------------------------

SAFE = re.compile(r"^[\w-]+\.md$")  # \w: Unicode letters and digits, and _


def test_contact_file_names_are_safe_and_distinct():
    assert contact_file_name("Maria") == "Maria.md"
    assert contact_file_name("健太") == "健太.md"
    assert contact_file_name("家族") == "家族.md"
    tricky = [
        "a/b",
        "a:b",
        "a?b",
        "a b",
        "a_b",
        "a\\b",
        "../etc",
        "..",
        ".",
        "",
        " ",
        "CON",
        "con.txt",
        "a" * 300,
        "a" * 301,
        "e\u0301",
        "\u00e9",
        "x\x00y",
        "Sam",
        "sam",
    ]
    names = [contact_file_name(c) for c in tricky]
    assert all(SAFE.match(n) and len(n) < 100 for n in names), names
    assert len(set(names)) == len(tricky)
    assert contact_file_name("a_b") == "a_b.md"
    hashed = contact_file_name("a/b")
    assert hashed.startswith("a_b_") and hashed != "a_b.md"
    # a plain name that looks like a sanitized one is hashed too, so it cannot collide
    lookalike = hashed.removesuffix(".md")
    assert contact_file_name(lookalike) not in {hashed, f"{lookalike}.md"}
    assert contact_file_name("a/b") == hashed  # stable


def test_atomic_write_replaces_and_leaves_no_temp_files(tmp_path, monkeypatch):
    folder = tmp_path / "dossiers"
    p1 = write_markdown_atomic(folder, "Maria", "one\n")
    p2 = write_markdown_atomic(folder, "Maria", "two\n")
    assert p1 == p2 == folder / "Maria.md"
    assert sorted(p.name for p in folder.iterdir()) == ["Maria.md"]
    assert p1.read_text(encoding="utf-8") == "two\n"

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(ds.os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        write_markdown_atomic(folder, "Maria", "three\n")
    assert sorted(p.name for p in folder.iterdir()) == ["Maria.md"]
    assert p1.read_text(encoding="utf-8") == "two\n"


def test_dossier_rows_refuse_a_state_of_another_day(folded):
    with pytest.raises(ValueError, match="not 2024-03-15"):
        dossier_rows({"Maria": folded[0]["Maria"]}, D(2024, 3, 15))
    rows = dossier_rows({}, D(2024, 3, 15))
    assert rows.num_rows == 0 and rows.schema == DOSSIERS


def test_agenda_bookings_come_from_the_window_around_a_dated_message():
    """A day mentioned gathers what the messages within BOOKED_WINDOW of it say was booked,
    before and after it, and nothing further away (the bookings are found only for the
    windows of messages that name a day: most name none)."""
    from memory_pipeline.core.memories import dossier_fold as D_

    day = dt.date(2024, 3, 1)

    def msg(text: str) -> D_._Msg:
        return D_._Msg(
            ts_us=0, hour=9, weekday=4, side="contact", sender="Maria", text=text, date=day
        )

    w = D_.BOOKED_WINDOW
    texts = (
        ["I booked the ferry"]  # w + 1 before the dated message: outside
        + ["I booked the hostel"]  # w before: inside
        + ["ok"] * (w - 1)
        + ["Let's go on March 23rd"]
        + ["ok"] * (w - 1)
        + ["Shinkansen booked!"]  # w after: inside
        + ["I booked the taxi"]  # w + 1 after: outside
    )
    st = D_.DossierState(contact_id="Maria", name="Maria")
    D_._add_agenda(st, {"session_id": "s1", "start_us": 0}, "Trip", [msg(t) for t in texts])
    [item] = st.agenda
    assert item["date"] == "2024-03-23"
    assert item["booked"] == ["hostel", "shinkansen"]
    # no dated message: no agenda, whatever was booked
    st = D_.DossierState(contact_id="Maria", name="Maria")
    D_._add_agenda(st, {"session_id": "s1", "start_us": 0}, "Trip", [msg("I booked the ferry")])
    assert st.agenda == []


def test_state_copy_is_deep_and_to_json_is_the_canonical_dump(folded):
    """``copy`` (what a fold starts from) shares no list or dict with the state, and
    ``to_json`` dumps the fields as ``dataclasses.asdict`` would give them."""
    import dataclasses

    from memory_pipeline.core.memories.dossier import DossierState

    states, _ = folded
    st = states["Maria"]
    dup = st.copy()
    assert dup == st and dup.to_json() == st.to_json()
    canonical = json.dumps(
        dataclasses.asdict(st), sort_keys=True, ensure_ascii=False, separators=(",", ":")
    )
    assert st.to_json() == canonical
    assert DossierState.from_json(st.to_json()) == st
    before = st.to_json()
    dup.profile[0]["text"] = "changed"
    dup.hour_sessions[0].append("ses_x")
    dup.agenda.append({"key": "k"})
    assert st.to_json() == before

    def containers(value, path="state"):  # every list and dict of a value, by where it is
        if isinstance(value, list | dict):
            yield path, value
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for k, v in items:
                yield from containers(v, f"{path}/{k}")

    fresh = st.copy()
    fields = [f.name for f in dataclasses.fields(st)]
    mine = dict(containers({f: getattr(st, f) for f in fields}))
    theirs = dict(containers({f: getattr(fresh, f) for f in fields}))
    assert mine.keys() == theirs.keys() and len(mine) > 50
    shared = [p for p in mine if p != "state" and mine[p] is theirs[p]]
    assert not shared, shared[:5]
