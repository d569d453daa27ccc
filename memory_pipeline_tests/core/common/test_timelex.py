"""The calendar lexicon: consistent with datetime's numbering, and the only copy in core."""

from __future__ import annotations

import datetime as dt
import re

from memory_pipeline.core.common.timelex import (
    JA_WEEKDAY_NUMBERS,
    JA_WEEKDAYS,
    MONTH_ABBREVIATIONS,
    MONTH_NAME_PATTERN,
    MONTH_NAMES,
    MONTH_NUMBERS,
    MONTH_PATTERN,
    WEEKDAY_ABBREVIATIONS,
    WEEKDAY_NAMES,
    WEEKDAY_NUMBERS,
    WEEKDAY_PATTERN,
)
from memory_pipeline_tests.paths import ROOT


def test_numbering_follows_datetime():
    monday = dt.date(2024, 3, 4)
    for k in range(7):
        day = monday + dt.timedelta(days=k)
        name = WEEKDAY_NAMES[day.weekday()]
        assert WEEKDAY_NUMBERS[name.lower()] == WEEKDAY_NUMBERS[name[:3].lower()] == day.weekday()
        assert JA_WEEKDAY_NUMBERS[JA_WEEKDAYS[day.weekday()]] == day.weekday()
    assert WEEKDAY_NAMES[dt.date(2024, 3, 1).weekday()] == "Friday"
    assert JA_WEEKDAYS[dt.date(2024, 3, 5).weekday()] == "火"  # 2024年3月5日(火)
    assert MONTH_NAMES[dt.date(2024, 9, 1).month - 1] == "September"
    assert WEEKDAY_ABBREVIATIONS == ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def test_month_lookup_covers_names_and_abbreviations():
    assert len(MONTH_NUMBERS) == 12 + len(MONTH_ABBREVIATIONS) == 24
    for number, name in enumerate(MONTH_NAMES, start=1):
        assert MONTH_NUMBERS[name.lower()] == number
    for abbr, number in MONTH_ABBREVIATIONS.items():
        assert MONTH_NAMES[number - 1].lower().startswith(abbr), abbr
    assert MONTH_NUMBERS["sept"] == MONTH_NUMBERS["sep"] == 9 and "may" in MONTH_NUMBERS


def test_patterns_are_the_alternations_the_parsers_used():
    """The exact strings timeexpr and extract inlined before: their matches must not change."""
    assert MONTH_PATTERN == (
        "january|february|march|april|may|june|july|august|september|october|november"
        "|december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec"
    )
    assert MONTH_NAME_PATTERN == (
        "january|february|march|april|may|june|july|august|september|october|november|december"
    )
    assert WEEKDAY_PATTERN == "monday|tuesday|wednesday|thursday|friday|saturday|sunday"


def test_longer_spellings_come_first_in_the_alternations():
    """``sep`` before ``sept`` would make ``(sep|sept)\\.?`` leave a stray ``t``."""
    for pattern in (MONTH_PATTERN, MONTH_NAME_PATTERN, WEEKDAY_PATTERN):
        words = pattern.split("|")
        for i, earlier in enumerate(words):
            assert not any(later.startswith(earlier) for later in words[i + 1 :]), earlier
    assert re.fullmatch(f"({MONTH_PATTERN})", "Sept", re.I)[1] == "Sept"


# Word lists that are not a lexicon copy: summarize's marker vocabularies (plural weekdays among
# other "when" words); evalsets_time writes its questions with its own tables (another branch
# owns it).
_NOT_LEXICON_COPIES = {"core/represent/summarize_lexicon.py", "core/evaluation/evalsets_time.py"}
_COPY = re.compile(r"monday.{0,60}?tuesday|january.{0,60}?february|月火水木金土日", re.I | re.S)


def test_core_spells_out_the_calendar_only_in_timelex():
    core = ROOT / "memory_pipeline" / "core"
    copies = [
        str(p.relative_to(core.parent))
        for p in sorted(core.rglob("*.py"))
        if _COPY.search(p.read_text(encoding="utf-8"))
    ]
    expected = {"core/common/timelex.py"} | _NOT_LEXICON_COPIES
    assert set(copies) == expected, "import month/weekday names from core.common.timelex"
