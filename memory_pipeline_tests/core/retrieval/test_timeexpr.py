"""Query time understanding: every supported EN/JA form, reference-time arithmetic, degradation.

Tables are (query, now, expected filters, expected kind). A filter is written as a tuple
(field, op, value, start, end); ``NOW`` is Wednesday 2024-03-13 15:00 unless a row says otherwise.
"""

from __future__ import annotations

import random
import re
import time
import unicodedata
from datetime import date, datetime

import pytest

from memory_pipeline.core.retrieval import timefilter, timegrammar
from memory_pipeline.core.retrieval.timeexpr import (
    GENERIC_WORDS_EN,
    GENERIC_WORDS_JA,
    ParsedQuery,
    TimeFilter,
    matches,
    matches_all,
    parse_query,
)

NOW = datetime(2024, 3, 13, 15, 0)  # a Wednesday
MON = datetime(2024, 3, 4, 9, 0)  # a Monday
SUN = datetime(2024, 3, 10, 21, 0)  # a Sunday
LEAP = datetime(2024, 3, 1, 12, 0)  # the day after a leap day
NEW_YEAR = datetime(2024, 1, 1, 8, 0)  # a Monday
D = date


def eq(field, value):
    return (field, "eq", value, None, None)


def between(field, start, end):
    return (field, "between", None, start, end)


def day(y, m, d):
    return eq("date", D(y, m, d))


def days(a, b):
    return between("date", a, b)


def ts(a, b):
    return between("local_ts", a, b)


def session(op, value=None):
    return ("session_index", op, value, None, None)


def as_tuples(p: ParsedQuery) -> list[tuple]:
    return [(f.field, f.op, f.value, f.start, f.end) for f in p.filters]


END = (23, 59, 59, 999999)
NIGHT_END = (4, 59, 59, 999999)

# ----------------------------------------------------------------------------- English forms

EN_CASES = [
    # absolute dates
    ("8 May 2023", NOW, [day(2023, 5, 8)]),
    ("May 8, 2023", NOW, [day(2023, 5, 8)]),
    ("May 8th 2023", NOW, [day(2023, 5, 8)]),
    ("the 8th of May, 2023", NOW, [day(2023, 5, 8)]),
    ("May 8th", NOW, [day(2023, 5, 8)]),  # year-less: most recent May 8 <= today
    ("March 8th", NOW, [day(2024, 3, 8)]),
    ("Mar. 8", NOW, [day(2024, 3, 8)]),
    ("2023-05-08", NOW, [day(2023, 5, 8)]),
    ("2023/05/08", NOW, [day(2023, 5, 8)]),
    ("05/08/2023", NOW, [day(2023, 5, 8)]),  # US month/day/year
    ("5/8/23", NOW, [day(2023, 5, 8)]),
    ("25/12/2023", NOW, [day(2023, 12, 25)]),  # first number > 12: day/month fallback
    ("on 5/8", NOW, [day(2023, 5, 8)]),
    ("on the 8th", NOW, [day(2024, 3, 8)]),
    ("on the 20th", NOW, [day(2024, 2, 20)]),
    ("on the 31st", NOW, [day(2024, 1, 31)]),  # February has no 31st
    ("Feb 29th", datetime(2025, 3, 1), [day(2024, 2, 29)]),
    # months and years
    ("in March", NOW, [eq("month", 3)]),
    ("during december", NOW, [eq("month", 12)]),
    ("March 2023", NOW, [days(D(2023, 3, 1), D(2023, 3, 31))]),
    ("March of 2023", NOW, [days(D(2023, 3, 1), D(2023, 3, 31))]),
    ("last March", NOW, [days(D(2023, 3, 1), D(2023, 3, 31))]),  # strictly before this month
    ("last March", datetime(2024, 4, 2), [days(D(2024, 3, 1), D(2024, 3, 31))]),
    ("this March", NOW, [days(D(2024, 3, 1), D(2024, 3, 31))]),
    ("in 2022", NOW, [eq("year", 2022)]),
    ("the year 2022", NOW, [eq("year", 2022)]),
    ("week 12 of 2023", NOW, [eq("iso_week", 12), eq("year", 2023)]),
    # relative days and weekdays
    ("today", NOW, [day(2024, 3, 13)]),
    ("yesterday", NOW, [day(2024, 3, 12)]),
    ("the day before yesterday", NOW, [day(2024, 3, 11)]),
    ("last Tuesday", NOW, [day(2024, 3, 12)]),
    ("last Wednesday", NOW, [day(2024, 3, 6)]),  # today is Wednesday: strictly before
    ("last Tuesday", datetime(2024, 3, 12), [day(2024, 3, 5)]),
    ("on Monday", NOW, [day(2024, 3, 11)]),
    ("this Tuesday", NOW, [day(2024, 3, 12)]),
    ("Tuesday last week", NOW, [day(2024, 3, 5)]),
    ("last week's Tuesday", NOW, [day(2024, 3, 5)]),
    ("on Tuesdays", NOW, [eq("weekday", 1)]),
    ("every Friday", NOW, [eq("weekday", 4)]),
    # weeks, weekends, months, years
    ("this week", NOW, [days(D(2024, 3, 11), D(2024, 3, 17))]),
    ("last week", NOW, [days(D(2024, 3, 4), D(2024, 3, 10))]),
    ("last weekend", NOW, [days(D(2024, 3, 9), D(2024, 3, 10))]),
    ("last weekend", SUN, [days(D(2024, 3, 2), D(2024, 3, 3))]),
    ("over the weekend", NOW, [days(D(2024, 3, 9), D(2024, 3, 10))]),
    ("over the weekend", SUN, [days(D(2024, 3, 9), D(2024, 3, 10))]),
    ("this weekend", NOW, [days(D(2024, 3, 16), D(2024, 3, 17))]),
    ("last month", NOW, [days(D(2024, 2, 1), D(2024, 2, 29))]),
    ("this month", NOW, [days(D(2024, 3, 1), D(2024, 3, 31))]),
    ("last year", NOW, [eq("year", 2023)]),
    ("this year", NOW, [eq("year", 2024)]),
    # N units ago, rolling windows, recency
    ("3 days ago", NOW, [day(2024, 3, 10)]),
    ("three days ago", NOW, [day(2024, 3, 10)]),
    ("a day ago", NOW, [day(2024, 3, 12)]),
    ("2 weeks ago", NOW, [days(D(2024, 2, 26), D(2024, 3, 3))]),
    ("a week ago", NOW, [days(D(2024, 3, 4), D(2024, 3, 10))]),
    ("2 months ago", NOW, [days(D(2024, 1, 1), D(2024, 1, 31))]),
    ("a year ago", NOW, [eq("year", 2023)]),
    ("a couple of days ago", NOW, [days(D(2024, 3, 10), D(2024, 3, 11))]),
    ("a few days ago", NOW, [days(D(2024, 3, 8), D(2024, 3, 11))]),
    ("the past 3 days", NOW, [days(D(2024, 3, 10), D(2024, 3, 13))]),
    ("in the past week", NOW, [days(D(2024, 3, 6), D(2024, 3, 13))]),
    ("the last 2 months", NOW, [days(D(2024, 1, 13), D(2024, 3, 13))]),
    ("recently", NOW, [days(D(2024, 2, 29), D(2024, 3, 13))]),
    ("lately", NOW, [days(D(2024, 2, 29), D(2024, 3, 13))]),
    # parts of day
    (
        "this morning",
        NOW,
        [ts(datetime(2024, 3, 13, 5), datetime(2024, 3, 13, 11, 59, 59, 999999))],
    ),
    ("tonight", NOW, [ts(datetime(2024, 3, 13, 18), datetime(2024, 3, 14, *NIGHT_END))]),
    ("yesterday evening", NOW, [ts(datetime(2024, 3, 12, 17), datetime(2024, 3, 12, *END))]),
    ("last night", NOW, [ts(datetime(2024, 3, 12, 18), datetime(2024, 3, 13, *NIGHT_END))]),
    (
        "last Tuesday morning",
        NOW,
        [ts(datetime(2024, 3, 12, 5), datetime(2024, 3, 12, 11, 59, 59, 999999))],
    ),
    ("in the morning", NOW, [between("hour", 5, 11)]),
    ("at night", NOW, [between("hour", 18, 4)]),
    # ranges
    ("between May 1 and May 8", NOW, [days(D(2023, 5, 1), D(2023, 5, 8))]),
    ("between May 1 and May 8", datetime(2024, 5, 5), [days(D(2023, 5, 1), D(2023, 5, 8))]),
    ("May 1 - May 8", NOW, [days(D(2023, 5, 1), D(2023, 5, 8))]),
    ("from 2023-05-01 to 2023-05-08", NOW, [days(D(2023, 5, 1), D(2023, 5, 8))]),
    ("from March to April", NOW, [between("month", 3, 4)]),
    ("from November to February", NOW, [between("month", 11, 2)]),  # wraps the year
    ("from March to April 2023", NOW, [days(D(2023, 3, 1), D(2023, 4, 30))]),
    ("between 2021 and 2022", NOW, [days(D(2021, 1, 1), D(2022, 12, 31))]),
    ("since last Monday", NOW, [days(D(2024, 3, 11), D(2024, 3, 13))]),
    ("since 2022", NOW, [days(D(2022, 1, 1), D(2024, 3, 13))]),
    ("before June 2023", NOW, [days(None, D(2023, 5, 31))]),
    ("after 5 May", NOW, [days(D(2023, 5, 6), None)]),
    ("until last week", NOW, [days(None, D(2024, 3, 10))]),
    # sessions
    ("session 5", NOW, [session("eq", 5)]),
    ("session #5", NOW, [session("eq", 5)]),
    ("the 3rd session", NOW, [session("eq", 3)]),
    ("our third conversation", NOW, [session("eq", 3)]),
    ("the first time", NOW, [session("first")]),
    ("first conversation", NOW, [session("first")]),
    ("when did we first talk", NOW, [session("first")]),
    ("the last time", NOW, [session("last")]),
    ("our last conversation", NOW, [session("last")]),
    ("most recently", NOW, [session("last")]),
    ("from session 2 to session 4", NOW, [between("session_index", 2, 4)]),
    ("since session 3", NOW, [between("session_index", 3, None)]),
]

# ----------------------------------------------------------------------------- Japanese forms

JA_CASES = [
    ("今日", NOW, [day(2024, 3, 13)]),
    ("昨日", NOW, [day(2024, 3, 12)]),
    ("一昨日", NOW, [day(2024, 3, 11)]),
    ("おととい", NOW, [day(2024, 3, 11)]),
    ("先週", NOW, [days(D(2024, 3, 4), D(2024, 3, 10))]),
    ("今週", NOW, [days(D(2024, 3, 11), D(2024, 3, 17))]),
    ("先々週", NOW, [days(D(2024, 2, 26), D(2024, 3, 3))]),
    ("先月", NOW, [days(D(2024, 2, 1), D(2024, 2, 29))]),
    ("今月", NOW, [days(D(2024, 3, 1), D(2024, 3, 31))]),
    ("去年", NOW, [eq("year", 2023)]),
    ("昨年", NOW, [eq("year", 2023)]),
    ("今年", NOW, [eq("year", 2024)]),
    ("先週の火曜日", NOW, [day(2024, 3, 5)]),
    ("先週火曜", NOW, [day(2024, 3, 5)]),
    ("今週の月曜日", NOW, [day(2024, 3, 11)]),
    ("火曜日", NOW, [day(2024, 3, 12)]),
    ("火曜", NOW, [day(2024, 3, 12)]),
    ("水曜日", NOW, [day(2024, 3, 6)]),  # today is Wednesday: strictly before
    ("毎週火曜日", NOW, [eq("weekday", 1)]),
    ("3日前", NOW, [day(2024, 3, 10)]),
    ("三日前", NOW, [day(2024, 3, 10)]),
    ("2週間前", NOW, [days(D(2024, 2, 26), D(2024, 3, 3))]),
    ("3か月前", NOW, [days(D(2023, 12, 1), D(2023, 12, 31))]),
    ("3ヶ月前", NOW, [days(D(2023, 12, 1), D(2023, 12, 31))]),
    ("3カ月前", NOW, [days(D(2023, 12, 1), D(2023, 12, 31))]),
    ("1年前", NOW, [eq("year", 2023)]),
    ("数日前", NOW, [days(D(2024, 3, 8), D(2024, 3, 11))]),
    ("5月8日", NOW, [day(2023, 5, 8)]),
    ("2023年5月8日", NOW, [day(2023, 5, 8)]),
    ("２０２３年５月８日", NOW, [day(2023, 5, 8)]),  # full-width digits (NFKC)
    ("2023/05/08", NOW, [day(2023, 5, 8)]),
    ("5/8に何を話した", NOW, [day(2023, 5, 8)]),  # M/D: Japanese order, no year needed
    ("3月に", NOW, [eq("month", 3)]),
    ("3月", NOW, [eq("month", 3)]),
    ("三月", NOW, [eq("month", 3)]),
    ("2023年3月", NOW, [days(D(2023, 3, 1), D(2023, 3, 31))]),
    ("2023年", NOW, [eq("year", 2023)]),
    ("8日に", NOW, [day(2024, 3, 8)]),
    ("週末", NOW, [days(D(2024, 3, 9), D(2024, 3, 10))]),
    ("先週末", NOW, [days(D(2024, 3, 9), D(2024, 3, 10))]),
    ("先週末", SUN, [days(D(2024, 3, 2), D(2024, 3, 3))]),
    ("朝", NOW, [between("hour", 5, 11)]),
    ("夜に何を話した", NOW, [between("hour", 18, 4)]),
    ("今朝", NOW, [ts(datetime(2024, 3, 13, 5), datetime(2024, 3, 13, 11, 59, 59, 999999))]),
    ("昨日の夜", NOW, [ts(datetime(2024, 3, 12, 18), datetime(2024, 3, 13, *NIGHT_END))]),
    ("昨夜", NOW, [ts(datetime(2024, 3, 12, 18), datetime(2024, 3, 13, *NIGHT_END))]),
    ("最近", NOW, [days(D(2024, 2, 29), D(2024, 3, 13))]),
    ("3回目の会話", NOW, [session("eq", 3)]),
    ("第2回", NOW, [session("eq", 2)]),
    ("最初に", NOW, [session("first")]),
    ("初めて", NOW, [session("first")]),
    ("最後に", NOW, [session("last")]),
    ("前回", NOW, [session("last")]),
    ("5月1日から5月8日まで", NOW, [days(D(2023, 5, 1), D(2023, 5, 8))]),
    ("3月から4月まで", NOW, [between("month", 3, 4)]),
    ("先週の月曜日から水曜日まで", NOW, [days(D(2024, 3, 4), D(2024, 3, 6))]),
    ("先週の月曜日以降", NOW, [days(D(2024, 3, 4), None)]),
    ("2023年以前", NOW, [days(None, D(2023, 12, 31))]),
    ("先月から", NOW, [days(D(2024, 2, 1), D(2024, 3, 13))]),
    ("5月8日まで", NOW, [days(None, D(2023, 5, 8))]),
]

# reference-time arithmetic across month/year boundaries and week conventions
BOUNDARY_CASES = [
    ("last month", LEAP, [days(D(2024, 2, 1), D(2024, 2, 29))]),  # leap February
    ("先月", LEAP, [days(D(2024, 2, 1), D(2024, 2, 29))]),
    ("1 month ago", LEAP, [days(D(2024, 2, 1), D(2024, 2, 29))]),
    ("yesterday", LEAP, [day(2024, 2, 29)]),
    ("last month", datetime(2023, 3, 1), [days(D(2023, 2, 1), D(2023, 2, 28))]),
    ("yesterday", NEW_YEAR, [day(2023, 12, 31)]),
    ("昨日", NEW_YEAR, [day(2023, 12, 31)]),
    ("3 days ago", NEW_YEAR, [day(2023, 12, 29)]),
    ("last month", NEW_YEAR, [days(D(2023, 12, 1), D(2023, 12, 31))]),
    ("last week", NEW_YEAR, [days(D(2023, 12, 25), D(2023, 12, 31))]),
    ("last year", NEW_YEAR, [eq("year", 2023)]),
    ("on the 31st", NEW_YEAR, [day(2023, 12, 31)]),
    ("last December", NEW_YEAR, [days(D(2023, 12, 1), D(2023, 12, 31))]),
    ("先週の火曜日", MON, [day(2024, 2, 27)]),  # Monday: previous week is Feb 26 - Mar 3
    ("先週の火曜日", SUN, [day(2024, 2, 27)]),  # Sunday is still in the Mar 4 week (ISO)
    ("last Tuesday", MON, [day(2024, 2, 27)]),
    ("last Tuesday", SUN, [day(2024, 3, 5)]),
]


@pytest.mark.parametrize(("query", "now", "expected"), EN_CASES + JA_CASES + BOUNDARY_CASES)
def test_filters(query, now, expected):
    p = parse_query(query, now=now)
    assert as_tuples(p) == expected, p.notes
    assert p.kind == "time_only"
    assert p.order == "chronological"
    assert p.content == ""
    assert all(f.text and 0 < f.confidence <= 1 for f in p.filters)


@pytest.mark.parametrize(
    ("week_start", "query", "now", "expected"),
    [
        (6, "先週の火曜日", SUN, [day(2024, 3, 5)]),  # Sunday-start weeks: SUN begins a new week
        (6, "last week", NOW, [days(D(2024, 3, 3), D(2024, 3, 9))]),
        (6, "this week", NOW, [days(D(2024, 3, 10), D(2024, 3, 16))]),
        (0, "this week", SUN, [days(D(2024, 3, 4), D(2024, 3, 10))]),
    ],
)
def test_week_start(week_start, query, now, expected):
    assert as_tuples(parse_query(query, now=now, week_start=week_start)) == expected


def test_filter_text_spans_the_whole_expression():
    p = parse_query("what did we say between May 1 and May 8 about rent?", now=NOW)
    assert [f.text for f in p.filters] == ["between May 1 and May 8"]
    assert p.content == "rent"
    p = parse_query("5月1日から5月8日まで家賃の話をした", now=NOW)
    assert [f.text for f in p.filters] == ["5月1日から5月8日まで"]
    assert p.content == "家賃"


# ----------------------------------------------------------------------------- classification


@pytest.mark.parametrize(
    ("query", "speakers", "kind", "content", "found"),
    [
        ("what did Maria say about the dog shelter?", ["Maria"], "content_only", "dog shelter",
         ("Maria",)),
        ("先週の火曜日に何を話した？", [], "time_only", "", ()),
        ("先週の火曜日に何を話しましたか", [], "time_only", "", ()),
        ("what did we talk about last Tuesday?", [], "time_only", "", ()),
        ("What did we discuss yesterday?", [], "time_only", "", ()),
        ("what did Maria say last week?", ["Maria"], "time_only", "", ("Maria",)),
        ("what did Maria say about hiking last week?", ["Maria"], "time_content", "hiking",
         ("Maria",)),
        ("What did we plan for the trip in March?", [], "time_content", "plan trip March", ()),
        ("When did Caroline go to the LGBTQ support group?", ["Caroline", "Melanie"],
         "content_only", "go LGBTQ support group", ("Caroline",)),
        ("the first time we talked about hiking", [], "time_content", "hiking", ()),
        ("昨日のランチの話", [], "time_content", "ランチ", ()),
        ("マリアさんは犬の保護施設について何と言った？", ["マリア"], "content_only", "犬 保護施設",
         ("マリア",)),
        ("昨日マリアと映画について話した", ["マリア"], "time_content", "映画", ("マリア",)),
        ("what about the dog?", [], "content_only", "dog", ()),
        ("what did we talk about?", [], "content_only", "", ()),
    ],
)  # fmt: skip
def test_classification_and_content(query, speakers, kind, content, found):
    p = parse_query(query, now=NOW, speakers=speakers)
    assert (p.kind, p.content, p.speakers) == (kind, content, found), p
    assert p.order == ("chronological" if kind == "time_only" else "relevance")


def test_event_time_is_a_soft_filter():
    """'the trip in March' may date the trip, not the talk: lower confidence, words kept."""
    p = parse_query("what did we plan for the trip in March?", now=NOW)
    assert as_tuples(p) == [eq("month", 3)]
    assert p.filters[0].confidence < 0.5
    assert "March" in p.content.split()
    assert any("event" in n for n in p.notes)
    assert parse_query("what did we talk about in March?", now=NOW).filters[0].confidence == 0.7
    p = parse_query("3月の旅行について何を話した？", now=NOW)  # explicit month + の + noun
    assert as_tuples(p) == [eq("month", 3)] and p.filters[0].confidence < 0.5
    assert p.content == "3月 旅行"
    p = parse_query("昨日のランチの話", now=NOW)  # relative day + の + noun: not flagged
    assert p.filters[0].confidence == 1.0 and p.content == "ランチ"


def test_first_last_with_content_is_explained():
    p = parse_query("when did we first talk about the move?", now=NOW)
    assert as_tuples(p) == [session("first")] and p.content == "move"
    assert any("first/last" in n for n in p.notes)


def test_when_question_is_noted():
    p = parse_query("When did Caroline go to the LGBTQ support group?", now=NOW)
    assert p.filters == () and any("when" in n for n in p.notes)


def test_generic_word_lists():
    for w in ("talk", "said", "discuss", "chat", "mention"):
        assert w in GENERIC_WORDS_EN
    for w in ("何", "話", "会話", "話題"):
        assert w in GENERIC_WORDS_JA


# ----------------------------------------------------------------------------- speakers


@pytest.mark.parametrize(
    ("query", "speakers", "found", "content"),
    [
        ("what did Maria's sister say?", ["Maria"], ("Maria",), "sister"),
        ("What did MARIA say about pizza", ["Maria"], ("Maria",), "pizza"),
        ("what did Alice and Bob say about rent", ["Bob", "Alice"], ("Alice", "Bob"), "rent"),
        ("what did Mary Ann say about Alice's car", ["Mary Ann", "Al", "Alice"],
         ("Mary Ann", "Alice"), "car"),  # "Al" is not inside "Alice"
        ("James' bike", ["James"], ("James",), "bike"),
        ("マリアさんのおすすめの本", ["マリア"], ("マリア",), "おすすめ 本"),
        ("田中さんと旅行の話", ["田中"], ("田中",), "旅行"),
        ("what did Maria say?", ["Maria"], ("Maria",), "Maria"),  # names are the only content
        ("nobody here", ["Maria", "", None], (), "nobody"),
    ],
)  # fmt: skip
def test_speakers(query, speakers, found, content):
    p = parse_query(query, now=NOW, speakers=speakers)
    assert (p.speakers, p.content) == (found, content)


@pytest.mark.parametrize(
    ("query", "speakers", "filters", "found"),
    [
        # a bare month name is a month only after a preposition (or with a day/year)
        ("May said she loved the shelter", [], [], ()),
        ("May said she loved the shelter", ["May"], [], ("May",)),
        ("what did May say in May?", ["May"], [eq("month", 5)], ("May",)),
        # when May is also a speaker, weak prepositions (to/with/from/and) mean the person
        ("what did we say to May", ["May"], [], ("May",)),
        ("what did we say to May", [], [eq("month", 5)], ()),
        ("May 8", ["May"], [day(2023, 5, 8)], ()),
        ("April and June came over", ["April", "June"], [], ("April", "June")),
        ("march in the parade", [], [], ()),
    ],
)
def test_month_name_or_person(query, speakers, filters, found):
    p = parse_query(query, now=NOW, speakers=speakers)
    assert (as_tuples(p), p.speakers) == (filters, found)


# ----------------------------------------------------------------------------- degradation


@pytest.mark.parametrize(
    ("query", "note", "content"),
    [
        ("what did we talk about on February 30?", "invalid", "February 30"),
        ("13/45/2024", "invalid", "13/45/2024"),
        ("2023-02-29", "invalid", "2023-02-29"),
        ("2023年2月30日", "invalid", "2023年2月30日"),
        ("13月の話", "invalid", "13月"),
        ("next blursday", "unrecognised", "next blursday"),
        ("session 0", "session", "session 0"),
        ("week 60", "ISO", "week 60"),
        ("999999 days ago", "out of range", "999999 days ago"),
        ("what are we doing tomorrow?", "future", "tomorrow"),
        ("next Tuesday's dinner plan", "future", "next Tuesday dinner plan"),
        ("来週の予定", "future", "来週 予定"),
    ],
)
def test_invalid_and_future_degrade_to_content(query, note, content):
    p = parse_query(query, now=NOW)
    assert p.filters == () and p.kind == "content_only" and p.order == "relevance"
    assert any(note in n for n in p.notes), p.notes
    assert p.content == content


@pytest.mark.parametrize(
    "query",
    [
        "the 2023 trip",  # a year needs a preposition
        "1/2 cup of sugar",  # M/D without a year needs a preposition in English
        "good morning everyone",  # "morning" alone is content
        "朝ごはんの話",  # 朝 followed by ごはん is breakfast
        "a day at the beach",
        "the first dog",
    ],
)
def test_look_alikes_are_content(query):
    p = parse_query(query, now=NOW)
    assert p.filters == () and p.kind == "content_only" and p.content


@pytest.mark.parametrize(
    "query",
    ["", "   ", "?!?...", "😀🐶🎉", "？？？", "\x00\x01\n\t", "a" * 100_000, "last " * 20_000,
     "5/" * 5_000, "年月日" * 3_000, "between and from to since", "から まで 以降"],
)  # fmt: skip
def test_fuzzish_inputs_never_crash(query):
    p = parse_query(query, now=NOW)
    assert isinstance(p, ParsedQuery)
    assert not any("internal error" in n for n in p.notes)


def test_bad_arguments_never_crash():
    assert parse_query(None, now=NOW).kind == "content_only"  # type: ignore[arg-type]
    p = parse_query("yesterday", now="not a date")  # type: ignore[arg-type]
    assert as_tuples(p) == [day(1969, 12, 31)] and any("now" in n for n in p.notes)
    p = parse_query("last week", now=NOW, week_start=9)
    assert as_tuples(p) == [days(D(2024, 3, 4), D(2024, 3, 10))]
    assert parse_query("yesterday", now=NOW.date()).filters[0].value == D(2024, 3, 12)
    assert parse_query("Maria", now=NOW, speakers="Maria").speakers == ("Maria",)
    assert parse_query("x", now=NOW, speakers=42).notes[0].startswith("internal error")  # type: ignore[arg-type]


def test_deterministic():
    q = "what did Maria say about the trip between May 1 and May 8?"
    assert parse_query(q, now=NOW, speakers=["Maria"]) == parse_query(
        q, now=NOW, speakers=["Maria"]
    )


_FRAGMENTS = [
    "last", "next", "this", "the", "between", "and", "from", "to", "since", "before", "after",
    "May", "March", "Tuesday", "week", "weekend", "month", "year", "ago", "3", "8th", "2023",
    "13/45/2024", "5/8", "2024-02-30", "session", "first", "time", "morning", "night", "in",
    "先週", "の", "火曜日", "3日前", "5月8日", "から", "まで", "以降", "以前", "回目", "夜", "朝",
    "Maria", "'s", "?", "、", "😀", "\u0301", "ー", "〜", "-", " ", "  ", "\n",
]  # fmt: skip


def test_random_strings_never_raise():
    """Property-style: random junk and random recombinations of real fragments never raise."""
    rng = random.Random(20240313)
    alphabet = [chr(i) for i in range(32, 127)] + list("年月日週前後朝夜のにからまで先今昨😀éü　")
    for i in range(3000):
        if i % 2:
            q = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        else:
            q = " ".join(rng.choice(_FRAGMENTS) for _ in range(rng.randint(0, 12)))
        now = datetime(2024, 1, 1) + (datetime(2026, 1, 1) - datetime(2024, 1, 1)) * rng.random()
        p = parse_query(q, now=now, speakers=["Maria", "May"], week_start=rng.randint(0, 6))
        assert not any("internal error" in n for n in p.notes), q
        assert p.kind in ("time_only", "content_only", "time_content")
        assert (p.kind == "content_only") == (not p.filters), q
        for f in p.filters:
            _check_filter_invariants(f, q)
            matches(f, local_ts=now, session_index=1, n_sessions=3)


def _check_filter_invariants(f: TimeFilter, q: str) -> None:
    assert f.field in ("date", "local_ts", "weekday", "iso_week", "month", "year",
                       "session_index", "hour"), q  # fmt: skip
    assert f.op in ("eq", "between", "first", "last"), q
    if f.op == "between":
        assert f.start is not None or f.end is not None, q
        if f.field not in timefilter.CYCLIC_FIELDS and None not in (f.start, f.end):
            assert f.start <= f.end, q
    if f.op == "eq":
        assert f.value is not None, q


# ----------------------------------------------------------------------------- matches()


@pytest.mark.parametrize(
    ("filt", "local_ts", "session_index", "n_sessions", "expected"),
    [
        (TimeFilter("date", "eq", D(2024, 3, 5)), datetime(2024, 3, 5, 23, 59), None, None, True),
        (TimeFilter("date", "eq", D(2024, 3, 5)), datetime(2024, 3, 6, 0, 0), None, None, False),
        (TimeFilter("date", "between", None, D(2024, 2, 1), D(2024, 2, 29)),
         datetime(2024, 2, 29, 12), None, None, True),
        (TimeFilter("date", "between", None, None, D(2023, 5, 31)), datetime(2023, 6, 1),
         None, None, False),
        (TimeFilter("date", "between", None, D(2023, 5, 6), None), datetime(2030, 1, 1),
         None, None, True),
        (TimeFilter("local_ts", "between", None, datetime(2024, 3, 12, 18),
                    datetime(2024, 3, 13, 4, 59, 59, 999999)), datetime(2024, 3, 13, 2), None, None,
         True),
        (TimeFilter("hour", "between", None, 18, 4), datetime(2024, 3, 13, 2), None, None, True),
        (TimeFilter("hour", "between", None, 18, 4), datetime(2024, 3, 13, 12), None, None, False),
        (TimeFilter("month", "between", None, 11, 2), datetime(2024, 1, 15), None, None, True),
        (TimeFilter("month", "between", None, 11, 2), datetime(2024, 5, 15), None, None, False),
        (TimeFilter("weekday", "eq", 1), datetime(2024, 3, 12), None, None, True),
        (TimeFilter("iso_week", "eq", 11), datetime(2024, 3, 13), None, None, True),
        (TimeFilter("year", "eq", 2023), datetime(2023, 12, 31, 23), None, None, True),
        (TimeFilter("session_index", "eq", 3), NOW, 3, 10, True),
        (TimeFilter("session_index", "eq", 3), NOW, None, 10, False),  # unknown never matches
        (TimeFilter("session_index", "first"), NOW, 1, 10, True),
        (TimeFilter("session_index", "last"), NOW, 10, 10, True),
        (TimeFilter("session_index", "last"), NOW, 9, 10, False),
        (TimeFilter("session_index", "last"), NOW, 9, None, False),
        (TimeFilter("session_index", "between", None, 3, None), NOW, 7, None, True),
        (TimeFilter("date", "eq", D(2024, 3, 13)), D(2024, 3, 13), None, None, True),  # a date
        (TimeFilter("nonsense", "eq", 1), NOW, None, None, False),
        (TimeFilter("date", "eq", "2024-03-13"), NOW, None, None, False),
    ],
)  # fmt: skip
def test_matches(filt, local_ts, session_index, n_sessions, expected):
    got = matches(filt, local_ts=local_ts, session_index=session_index, n_sessions=n_sessions)
    assert got is expected


def test_parsed_filters_select_the_right_messages():
    """End to end: the filters of a parsed query applied to a week of hourly messages."""
    stamps = [datetime(2024, 3, 4) + (datetime(2024, 3, 5) - datetime(2024, 3, 4)) * h / 24
              for h in range(24 * 10)]  # fmt: skip
    p = parse_query("昨日の夜何を話した？", now=NOW)
    hit = [t for t in stamps if matches_all(p.filters, local_ts=t)]
    assert hit[0] == datetime(2024, 3, 12, 18) and hit[-1] == datetime(2024, 3, 13, 4)
    p = parse_query("what did we talk about on Tuesdays in the morning", now=NOW)
    hit = {(t.date(), t.hour) for t in stamps if matches_all(p.filters, local_ts=t)}
    assert hit == {(D(2024, 3, 5), h) for h in range(5, 12)} | {
        (D(2024, 3, 12), h) for h in range(5, 12)
    }
    assert matches_all((), local_ts=NOW)


# ----------------------------------------------------------------------------- engine checks


def test_rule_triggers_cover_every_match():
    """The scanner only tries rules listed for a start word/char: every rule that can match at a
    position of the test corpus must be listed there (guards against a missing trigger)."""
    corpus = [q for q, *_ in EN_CASES + JA_CASES + BOUNDARY_CASES] + [
        "what did we plan for the trip in March?", "Tuesdays", "mornings", "in the past 2 weeks",
    ]  # fmt: skip
    rules = [re.compile(p, re.I) for p, _, _ in timegrammar._RULES]
    for q in corpus:
        text = unicodedata.normalize("NFKC", q)
        starts = {m.start(): m for m in timegrammar._CANDIDATE.finditer(text)}
        for pos in range(len(text)):
            for i, rx in enumerate(rules):
                if not rx.match(text, pos):
                    continue
                assert pos in starts, (q, pos, timegrammar._RULES[i][0])
                cand = starts[pos]
                key = cand[1].lower() if cand[1] else ("#" if cand[0].isdigit() else cand[0])
                listed = timegrammar._DISPATCH.get(key) or timegrammar._DISPATCH.get(key[:-1], ())
                assert any(r.pattern == rx.pattern for r, _ in listed), (q, key, rx.pattern)


def test_throughput():
    """A loose 2k queries/s of this process's CPU, so a regression by an order of magnitude
    fails but a loaded machine does not (wall time counts other jobs)."""
    qs = [
        "what did Maria say about the dog shelter?",
        "先週の火曜日に何を話した？",
        "what did we plan for the trip in March?",
        "When did Caroline go to the LGBTQ support group?",
        "what did we talk about last Tuesday?",
    ]
    t0 = time.process_time()
    for _ in range(400):
        for q in qs:
            parse_query(q, now=NOW, speakers=["Maria", "Caroline"])
    assert time.process_time() - t0 < 1.0


def test_parse_work_is_linear_in_the_query_for_every_trigger():
    """Every character or word that can start a rule, repeated: parsing 4x the text costs
    about 4x (an unbounded repetition in a rule made "百" * n cost n**2: 0.18 s at 2,000)."""
    from memory_pipeline.core.retrieval.timegrammar import _DISPATCH

    def cpu(text: str) -> float:
        best = float("inf")
        for _ in range(3):
            start = time.process_time()
            parse_query(text, now=datetime(2024, 3, 5))
            best = min(best, time.process_time() - start)
        return best

    units = [k if not k.isascii() else k + " " for k in _DISPATCH] + ["1/", "2023年", "# "]
    for unit in units:
        short, long = (unit * 500)[:500], (unit * 2000)[:2000]
        small, large = cpu(short), cpu(long)
        assert large <= 8 * small + 0.005, (unit, small, large)


def test_the_ascii_fold_covers_every_character_ignorecase_matches_with_an_ascii_letter():
    """The speaker prefilter skips a case-blind name whose first word is not in the folded
    text: that is exact only if every character re.IGNORECASE matches with an ASCII letter
    folds to that letter."""
    from memory_pipeline.core.retrieval.timeexpr import _ascii_fold

    letters = re.compile("[a-z]", re.I)
    found = 0
    for cp in range(0x80, 0x110000):
        ch = chr(cp)
        if letters.fullmatch(ch):
            found += 1
            [letter] = [a for a in "abcdefghijklmnopqrstuvwxyz" if re.fullmatch(a, ch, re.I)]
            assert _ascii_fold(ch) == letter, hex(cp)
    assert found >= 3  # the Kelvin sign, the long s, the dotted and dotless i at least


def test_the_speaker_prefilter_finds_what_every_matcher_finds():
    """Names found with the first-word prefilter equal those of every name's matcher run
    over the text, on names and texts of mixed scripts and cases."""
    from memory_pipeline.core.retrieval import timeexpr as TE

    rng = random.Random(5)
    names = [
        "Ann",
        "Anna",
        "Ann Lee",
        "AA",
        "Bob",
        "Ibrahim",
        "Sam",
        "José",
        "太郎",
        "山田 花子",
        "Kim",
        "O'Neil",
    ]
    pieces = [
        "ann",
        "ANNA's",
        "Ann  Lee",
        "aa",
        "İbrahim",
        "ıbrahim",
        "ſam",
        "KIM",
        "josé",
        "太郎さん",
        "山田 花子",
        "o'neil",
        "bobby",
        "yesterday",
        "会った",
        "with",
        "Lee",
    ]
    for _ in range(300):
        text = unicodedata.normalize("NFKC", " ".join(rng.choices(pieces, k=rng.randint(1, 6))))
        want_hits = []
        for name, rx, *_ in TE._speaker_rx(tuple(names)):
            want_hits += [(m.start(), name) for m in rx.finditer(text)]
        want = list(dict.fromkeys(n for _, n in sorted(want_hits)))
        assert TE._find_speakers(text, tuple(names), [])[0] == want, text
