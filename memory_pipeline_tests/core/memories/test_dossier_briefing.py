"""Issue 12: dossiers read as a briefing — checked on the bundled sample with the rule
extractor's real memories, defect by defect, plus the text rules on their own."""

from __future__ import annotations

import datetime as dt
import re

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from memory_pipeline.config import load_config
from memory_pipeline.core.ingest.normalize import messages_table
from memory_pipeline.core.ingest.stage import discover_dates, read_all
from memory_pipeline.core.memories.dossier import (
    SECTIONS,
    build_day,
    render_markdown,
    uncited_bullets,
)
from memory_pipeline.core.memories.dossier_text import (
    booked_items,
    cut_words,
    find_dates,
    statement,
    whole_word_title,
)
from memory_pipeline.core.memories.extract import extract_memories
from memory_pipeline.core.represent.build import enrich_sessions
from memory_pipeline.core.sessions.sessionize import sessionize
from memory_pipeline_tests.paths import ROOT

D = dt.date


@pytest.fixture(scope="module")
def sample():
    cfg = load_config(ROOT / "memory_pipeline.toml", env={})
    dates = discover_dates(cfg.sources, cfg.start_date)
    messages = messages_table(read_all(cfg.sources, dates, cfg.start_date).messages)
    sessions = sessionize(messages, cfg.session_gap_minutes)
    enrichment = enrich_sessions(sessions, messages)
    memories, _ = extract_memories(sessions, messages)
    states: dict = {}
    for day in sorted(set(sessions.column("local_date").to_pylist())):

        def on(t: pa.Table, day=day) -> pa.Table:
            return t.filter(pc.equal(t.column("local_date"), pa.scalar(day, pa.date32())))

        states.update(build_day(states, day, on(sessions), messages, on(enrichment), on(memories)))
    pages = {c: render_markdown(s, cfg.owner) for c, s in states.items()}
    return states, pages, sessions


def md_count(md: str, text: str) -> int:
    """How many bullets of a page hold ``text``."""
    return sum(1 for ln in md.splitlines() if ln.lstrip().startswith("- ") and text in ln)


def section(md: str, name: str) -> list[str]:
    lines = md.splitlines()
    out = []
    for ln in lines[lines.index(f"## {name}") + 1 :]:
        if ln.startswith("#"):
            break
        if ln.strip():
            out.append(ln)
    return out


def test_bullets_are_statements_not_quotes(sample):
    _, pages, _ = sample
    for contact, md in pages.items():
        assert uncited_bullets(md) == []
        for name in (SECTIONS[0], SECTIONS[1], SECTIONS[3]):
            for ln in section(md, name):
                body = re.sub(r"^ *- (\d{4}-\d{2}-\d{2}( to \d{4}-\d{2}-\d{2})? — )?", "", ln)
                assert not re.match(r"^(Maria|Yuki|Sam|健太|母|父): ", body), (contact, ln)
    assert "Guess what" not in pages["Maria"]


def test_kyoto_trip_is_ongoing_with_its_dates_and_bookings(sample):
    _, pages, _ = sample
    ongoing = section(pages["Maria"], SECTIONS[1])
    kyoto = [ln for ln in ongoing if ln.startswith("- 2024-03-23 to 2024-03-25 — ")]
    assert len(kyoto) == 1, ongoing
    assert "Kyoto" in kyoto[0] and "(booked: shinkansen, ryokan)" in kyoto[0]
    assert kyoto[0].count("ses_") == 2  # planned on 03-02, booked on 03-10


def test_profile_holds_only_what_the_contact_says_about_themselves(sample):
    states, pages, _ = sample
    profile = "\n".join(section(pages["健太"], SECTIONS[0]))
    assert "美咲" not in profile and "佐藤先輩" not in profile  # other people's news
    assert all(e["subject"] in {"健太", ""} for e in states["健太"].profile)
    assert "Hikari Design" in "\n".join(section(pages["Maria"], SECTIONS[0]))


def test_commitments_carry_the_context_of_their_day(sample):
    _, pages, _ = sample
    ongoing = section(pages["家族"], SECTIONS[1])
    seventeenth = [ln for ln in ongoing if ln.startswith("- 2024-03-17 — ")]
    assert len(seventeenth) == 1 and "お父さんの誕生日" in seventeenth[0], ongoing
    # Sam's dossier now knows the camera goes back on the 28th
    assert any(
        ln.startswith("- 2024-03-28 — ") and "March 28" in ln
        for ln in section(pages["Sam"], SECTIONS[1])
    )


def test_titles_are_whole_words(sample):
    _, pages, _ = sample
    titles = [
        ln.split(" — ")[1].split(" [sessions:")[0]
        for ln in section(pages["健太"], SECTIONS[3])
        if ln[:2] == "- "
    ]
    assert "軍手（健太・Yuki）" in titles and not any("軍手持" in t for t in titles)
    torn = whole_word_title("軍手持（健太・Yuki）", ["20日は軍手持って行くね"])
    assert torn == "軍手（健太・Yuki）"
    kept = whole_word_title("高円寺：トラック", ["朝9時に高円寺の家に来て"])
    assert kept == "高円寺：トラック"
    assert cut_words("Maria loves the new office a lot", 20) == "Maria loves the…"


def test_pattern_bullets_cite_the_sessions_they_count(sample):
    states, pages, sessions = sample
    maria = sessions.filter(pc.equal(sessions.column("contact_id"), "Maria"))
    ids = set(maria.column("session_id").to_pylist())
    patterns = section(pages["Maria"], SECTIONS[2])
    cited = set(re.findall(r"ses_[0-9a-f]{20}", patterns[0]))
    assert cited == ids and len(ids) == 10  # every counted session, not first and last
    st = states["Maria"]
    top = max(range(24), key=lambda h: st.hours[h])
    assert set(st.hour_sessions[top]) <= set(re.findall(r"ses_[0-9a-f]{20}", patterns[1]))


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "Maria: Guess what, I got the job at Hikari Design 🎉",
            "Maria got the job at Hikari Design",
        ),
        ("Maria: I start on Monday, March 4", "Maria starts on Monday, March 4"),
        ("Yuki: I'll bring food on the 30th then", "Yuki will bring food on the 30th then"),
        ("Maria: My manager is Ms. Tanaka", "Maria's manager is Ms. Tanaka"),
        ("Maria: Let's meet at 18:15", "Maria and Yuki will meet at 18:15"),
        ("Maria works at Studio Nami", "Maria works at Studio Nami"),  # a statement already
        ("健太: じゃあそれで。13日にルミネで買ってくる", "健太は13日にルミネで買ってくる"),
        ("Yuki: 17日行けるよ", "Yukiは17日行ける"),
        ("健太: 山本店長には俺から連絡しとく", "山本店長には健太から連絡しとく"),
        ("Maria: Are you free on the 16th?", "Maria asked: are Yuki free on the 16th?"),
    ],
)
def test_statement_rules(line, expected):
    assert statement(line, owner="Yuki", contact=line.split(":")[0]) == expected


def test_find_dates_resolves_forward_and_reads_spans():
    d = D(2024, 3, 2)
    assert find_dates("Saturday 23rd to Monday 25th?", d) == [(D(2024, 3, 23), D(2024, 3, 25))]
    assert find_dates("bazaar on Saturday March 30, 10:00 to 15:00", d) == [(D(2024, 3, 30),) * 2]
    assert find_dates("3月17日（日）お父さんの誕生日", d) == [(D(2024, 3, 17),) * 2]
    assert find_dates("on the 1st", d) == [(D(2024, 4, 1),) * 2]  # next month's
    assert find_dates("I started on March 1", d) == []  # past, not next year
    assert find_dates("3 days 2 nights, 2日間", d) == []
    assert booked_items("Shinkansen booked! Nozomi 7") == ["shinkansen"]
    assert booked_items("And I booked the ryokan: Gion Hanaya") == ["ryokan"]
    assert booked_items("店は道玄坂の「鳥よし」を予約した") == ["鳥よし"]
    assert booked_items("Should we book a kimono?") == []


def test_a_version_1_state_still_loads_and_folds_on(sample):
    """States stored before the briefing fields existed load with those fields empty."""
    import json

    from memory_pipeline.core.memories.dossier import STATE_VERSION, DossierState

    states, _, _ = sample
    v2 = json.loads(states["Sam"].to_json())
    added = ("agenda", "owner_name", "speakers", "counted", "hour_sessions", "reply_sessions")
    v1 = {k: v for k, v in v2.items() if k not in added} | {"version": 1}
    back = DossierState.from_json(json.dumps(v1))
    assert back.version == STATE_VERSION and back.agenda == [] and back.counted == []
    assert back.messages_total == states["Sam"].messages_total
    assert render_markdown(back).startswith("# Dossier: Sam\n")


def _words(text: str) -> set[str]:
    """A bullet's words without names, dates and its citation (how near duplicates differ)."""
    body = re.sub(r"\s\[sessions: [^\]]+\]$", "", text)
    body = re.sub(r"^ *- (\d{4}-\d{2}-\d{2}( to \d{4}-\d{2}-\d{2})? — )?", "", body)
    words = set(re.findall(r"[a-z0-9]+|[\u3040-\u30ff\u3400-\u9fff]", body.casefold()))
    return words - {"maria", "yuki", "others", "and", "the", "a", "s"} - set("健太")


def test_the_owners_own_statements_stay_off_the_contacts_page(sample):
    """What Yuki says about herself ("I already downloaded their new album", "I paid 56,680
    for both of us") is Yuki's, not Maria's: not in the Profile, the Timeline, Recent Topics
    or as an undated plan. Dated commitments to Maria (Yuki brings food on the 30th) stay."""
    states, pages, _ = sample
    md = pages["Maria"]
    assert "new album" not in md and "56,680" not in md, md
    for name in (SECTIONS[0], SECTIONS[3], SECTIONS[4]):
        for ln in section(md, name):
            assert not re.match(r"^ *- (?:\d{4}-\d{2}-\d{2} — )?Yuki\b", ln), ln
    undated = [ln for ln in section(md, SECTIONS[1]) if not re.match(r"^- \d{4}-", ln)]
    assert not any(ln.startswith("- Yuki") for ln in undated), undated
    assert any("Yuki will bring a bag of food" in ln for ln in section(md, SECTIONS[1]))


def test_profile_and_topics_hold_no_near_duplicates(sample):
    """ "... when Maria and Yuki arrive!" and "... when Maria and others arrive!" (a quote
    and a memory of the same line), "... on 12 March 2024" and "... today": shown once."""
    _, pages, _ = sample
    for contact, md in pages.items():
        for name in (SECTIONS[0], SECTIONS[4]):
            seen: list[set[str]] = []
            for ln in section(md, name):
                w = _words(ln)
                assert w and not any(w <= s or s <= w for s in seen), (contact, ln)
                seen.append(w)
    # the Nishiki lunch is trip logistics, no longer a profile line (see the logistics test);
    # where a page states a line, it states it once
    assert md_count(pages["Maria"], "Nishiki market for lunch") <= 1
    topics = "\n".join(section(pages["Maria"], SECTIONS[3]))
    assert topics.count("first wireframes for Komugi Bakery") == 1, topics


def test_the_timeline_keeps_what_happened_after_recent_topics_moved_on(sample):
    """Recent Topics keeps 5 sessions; the Timeline still states (and cites) Maria's news of
    the first day, once per statement, at most TIMELINE_CHARS_PER_PERIOD characters a
    month."""
    from memory_pipeline.core.memories.dossier import TIMELINE_CHARS_PER_PERIOD

    states, pages, sessions = sample
    md = pages["Maria"]
    first = states["Maria"].first_session
    assert first not in "\n".join(section(md, SECTIONS[3]))  # topics moved on
    timeline = section(md, SECTIONS[4])
    assert any("Hikari Design" in ln and first in ln for ln in timeline), timeline
    months: dict[str, int] = {}
    for ln in timeline:  # "- 2024-03-01 — <text> [sessions: …]"
        text = ln.split(" — ", 1)[1].rsplit(" [sessions: ", 1)[0]
        months[ln[2:9]] = months.get(ln[2:9], 0) + len(text)
    assert months and max(months.values()) <= TIMELINE_CHARS_PER_PERIOD


def test_the_timeline_state_is_bounded_and_keeps_each_sessions_first_statement():
    """30 busy months: only the last TIMELINE_PERIODS stay, each with at most
    TIMELINE_CHARS_PER_PERIOD characters of entries, every session's first statement before
    any second one."""
    from memory_pipeline.core.memories import dossier_timeline as ds

    entries = [
        {
            "period": f"{2020 + m // 12}-{m % 12 + 1:02d}",
            "date": f"{2020 + m // 12}-{m % 12 + 1:02d}-01",
            "session_id": f"ses_{m:04d}{k:016d}",
            "start_us": m * 100 + k,
            "rank": r,
            "text": f"statement {m} {k} {r} " + "x" * 140,  # ~155 characters each
        }
        for m in range(30)
        for k in range(8)  # 8 sessions a month ...
        for r in range(3)  # ... of 3 statements each
    ]
    kept = ds._keep_timeline(entries)
    months = sorted({e["period"] for e in kept})
    assert len(months) == ds.TIMELINE_PERIODS and months[-1] == "2022-06"
    for m in months:
        month = [e for e in kept if e["period"] == m]
        used = sum(len(e["text"]) for e in month)
        assert used <= ds.TIMELINE_CHARS_PER_PERIOD < used + 160  # full: no other one fits
        ranks = sorted(e["rank"] for e in month)
        assert ranks[:8] == [0] * 8 and len(ranks) > 8  # every first, then seconds
    assert ds._keep_timeline(list(reversed(entries))) == kept  # input order never matters


def test_a_timeline_line_is_the_sentence_that_states_the_event_in_both_languages():
    """The Timeline states a statement's life change in one sentence (the yoga, not the busy
    week before it, nor how it felt); without one, the first sentence; Japanese: the first
    sentence."""
    from memory_pipeline.core.memories.dossier_timeline import _lead

    busy = "Maria has been busy volunteering at the shelter and keeping fit."
    yoga = "Maria just started doing aerial yoga, it's great."
    assert _lead(f"{busy} {yoga}") == "Maria just started doing aerial yoga."  # no ", it's great"
    walk = "Maria walked to the park near the river. It was sunny."
    assert _lead(walk) == "Maria walked to the park near the river."
    ja = "健太は来月から大阪に転勤が決まった。ちょっと寂しいけど頑張る。"
    assert _lead(ja) == "健太は来月から大阪に転勤が決まった。"


def test_key_events_come_first_in_a_sessions_timeline():
    """A named life change (grandma passed away) or a dated statement goes before a plain
    event of the same session, whatever its kind."""
    from memory_pipeline.core.memories.dossier_fold import _timeline_rank

    def mem(kind, text, day=None):
        return {"kind": kind, "text": text, "event_date": day}

    loss = mem("relationship", "Maria's grandma passed away and it's been really hard.")
    idea = mem("event", "Maria got the idea from that trip to England.")
    dated = mem("fact", "Maria ran 5 km on 3 May 2023.", dt.date(2023, 5, 3))
    ja = mem("fact", "健太は4月から大阪に転勤が決まった。")
    ranked = sorted([idea, loss, dated, ja], key=_timeline_rank)
    assert ranked[-1] is idea


def test_the_profile_says_who_the_person_is_not_trip_logistics(sample):
    """Profile lines are statements with the person as subject, without clock times or
    prices: the Kyoto check-in time, the ryokan's price and the shelter's start time are
    logistics (Ongoing / Timeline keep them), in both languages."""
    _, pages, _ = sample
    maria = "\n".join(section(pages["Maria"], SECTIONS[0]))
    for logistics in ("From 15:00", "Happy Tails", "18,500 yen", "Nishiki market for lunch"):
        assert logistics not in maria, maria
    assert "Hikari Design" in maria and "Ms. Tanaka" in maria
    kenta = "\n".join(section(pages["健太"], SECTIONS[0]))
    assert "42,000円" not in kenta and "武蔵小杉" in kenta, kenta


def test_japanese_topic_points_are_statements_not_fragments(sample):
    """A Recent Topics point is a statement: not a bare time range (健太は10時〜17時), not a
    question without its mark (何がいいと思う), not opened by a filler (じゃあそれで。)."""
    _, pages, _ = sample
    topics = "\n".join(section(pages["健太"], SECTIONS[3]))
    assert "健太は10時〜17時 [" not in topics, topics
    assert "何がいいと思う" not in topics, topics
    assert "じゃあそれで" not in topics, topics
    assert "送別会は渋谷" in topics, topics  # a statement with its time stays


NAMES = ("Nate", "Joanna", "Andrew", "Melanie", "Maria", "John")


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        (  # a discourse opener is how the news was told, not the news
            "On a different note, exciting things are happening--John is exploring "
            "endorsement opportunities.",
            "John is exploring endorsement opportunities.",
        ),
        (
            "As for Maria, Maria has been volunteering at a homeless shelter and it's "
            "really rewarding.",
            "Maria has been volunteering at a homeless shelter.",
        ),
        (  # a short clause of feeling before the dash, and a closing feeling
            "Nate has been doing great - Nate won a really big video game tournament "
            "the week of 26 September 2022 and it was awesome!",
            "Nate won a big video game tournament the week of 26 September 2022.",  # no "really"
        ),
        (
            "Andrew's GF and Andrew just had a great experience volunteering at a pet "
            "shelter on Monday - it was so rewarding!",
            "Andrew's GF and Andrew just had a great experience volunteering at a pet "
            "shelter on Monday.",
        ),
        (
            "Woah Joanna, Nate won an international tournament on 21 August 2022!",
            "Nate won an international tournament on 21 August 2022!",
        ),
        (  # a clause after the dash that says something stays
            "Andrew started a new job as a Financial Analyst last week - it's been quite a "
            "change from Andrew's previous job.",
            "Andrew started a new job as a Financial Analyst last week - it's been quite a "
            "change from Andrew's previous job.",
        ),
        (  # a head that states the event is kept over a tail that names no one
            "Melanie has been running longer since Melanie's last chat - a great way to "
            "destress and clear Melanie's mind.",
            "Melanie has been running longer since Melanie's last chat - a great way to "
            "destress and clear Melanie's mind.",
        ),
        ("健太は来月から大阪に転勤が決まった。", "健太は来月から大阪に転勤が決まった。"),
    ],
)
def test_an_event_line_is_the_clause_that_states_what_happened(sentence, expected):
    from memory_pipeline.core.memories.dossier_text import compact_event

    assert compact_event(sentence, NAMES) == expected


def test_the_timeline_keeps_a_sessions_most_informative_statements():
    """A session says more than the Timeline keeps: the named, dated, specific statements
    stay and the vague ones ("That's why …", a pleasantry) go, whatever order they came in."""
    from memory_pipeline.core.memories import dossier_timeline as ds
    from memory_pipeline.core.memories.dossier_text import information_value

    vague = [
        "That's why Andrew loves volunteering!",
        "Andrew will keep looking until Andrew finds it.",
        "Pets are more than just pets.",
    ]
    specific = [
        "Andrew started a new job as a Financial Analyst on 20 March 2023.",
        "Andrew adopted a puppy named Toby from the shelter.",
        "Andrew and his girlfriend went wine tasting in Napa Valley.",
        "Andrew hiked Mount Tamalpais with three friends.",
        "Andrew's family dog Buddy turned 12 on Saturday.",
    ]
    assert min(information_value(t, ("Andrew",)) for t in specific) > max(
        information_value(t, ("Andrew",)) for t in vague
    )
    st = ds.DossierState(contact_id="Andrew", name="Andrew", speakers=["Andrew"])
    session = {"session_id": "ses_" + "0" * 20, "start_us": 0}
    ds._add_timeline(st, session, [*vague, *specific], "2023-03-27")
    kept = [e["text"] for e in st.timeline]
    assert sorted(kept) == sorted(specific), kept
    assert [e["rank"] for e in st.timeline] == list(range(ds.TIMELINE_PER_SESSION))


def test_of_two_wordings_the_timeline_keeps_the_one_that_says_more():
    """The same thing said twice in a session: the line kept is the fuller one, whichever
    came first."""
    from memory_pipeline.core.memories import dossier_timeline as ds

    st = ds.DossierState(contact_id="Nate", name="Nate", speakers=["Nate"])
    session = {"session_id": "ses_" + "0" * 20, "start_us": 0}
    short = "Nate made coconut milk ice cream."
    full = "Nate made coconut milk ice cream with vanilla and a pinch of salt for Joanna."
    ds._add_timeline(st, session, [short, full], "2022-02-07")
    assert [e["text"] for e in st.timeline] == [full]


def test_lines_that_say_little_stay_off_the_timeline_in_english_only():
    """A pronoun-opened remark or a photo caption is no event to list; a Japanese line has
    no such signal and stays."""
    from memory_pipeline.core.memories import dossier_timeline as ds

    st = ds.DossierState(contact_id="Andrew", name="Andrew", speakers=["Andrew", "健太"])
    session = {"session_id": "ses_" + "0" * 20, "start_us": 0}
    little = ["Here's a photo of Andrew's last hike.", "That's why Andrew loves it!"]
    event = "Andrew adopted a puppy named Toby from the shelter."
    ja = "健太は来月から大阪に転勤が決まった。"
    ds._add_timeline(st, session, [*little, event, ja], "2023-10-19")
    assert sorted(e["text"] for e in st.timeline) == sorted([event, ja])


@pytest.mark.parametrize(
    "said",
    [
        "John's girlfriend and John had an emotional wedding ceremony last week.",
        "Maria went to her uncle's funeral on Friday.",
        "Gina is pregnant with her first child.",
        "Andrew's dad retired after 30 years.",
        "Nate proposed to his girlfriend at the beach.",
        "Melanie had knee surgery in May.",
    ],
)
def test_weddings_funerals_and_the_like_are_key_events(said):
    """A life change named by its occasion, not only by its verb (married, died, ...), goes
    first in a session's Timeline."""
    from memory_pipeline.core.memories.dossier_fold import _timeline_rank

    assert _timeline_rank({"kind": "preference", "text": said, "event_date": None})[0] is False
