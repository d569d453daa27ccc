"""The one calendar lexicon: English month and weekday names and abbreviations, Japanese weekdays.

Readers (LoCoMo session times, LINE headers), index metadata (``day_name``), embedding texts,
the query-time parser (``retrieval.timeexpr``) and the memory extractor (``memories.extract``)
must agree on what "Sept" or 火 means; one table keeps them from drifting apart. The tables are
fixed rather than taken from ``calendar``/``strftime`` because those follow the process locale.

Numbering follows :mod:`datetime`: months 1-12, weekdays 0 (Monday) to 6 (Sunday).
"""

from __future__ import annotations

__all__ = [
    "JA_WEEKDAYS",
    "JA_WEEKDAY_NUMBERS",
    "MONTH_ABBREVIATIONS",
    "MONTH_NAMES",
    "MONTH_NAME_PATTERN",
    "MONTH_NUMBERS",
    "MONTH_PATTERN",
    "WEEKDAY_ABBREVIATIONS",
    "WEEKDAY_NAMES",
    "WEEKDAY_NUMBERS",
    "WEEKDAY_PATTERN",
]

# Display forms, as written in English text: MONTH_NAMES[month - 1], WEEKDAY_NAMES[weekday()].
MONTH_NAMES: tuple[str, ...] = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
WEEKDAY_NAMES: tuple[str, ...] = (
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
)
# 月曜日 .. 日曜日 by their first character: JA_WEEKDAYS[weekday()].
JA_WEEKDAYS = "月火水木金土日"

# Lower-case abbreviations that differ from the full name ("may" has none). "sept" comes before
# "sep" so that a regex alternation built from this order tries the longer spelling first.
MONTH_ABBREVIATIONS: dict[str, int] = {
    "jan": 1,
    "feb": 2,
    "mar": 3,
    "apr": 4,
    "jun": 6,
    "jul": 7,
    "aug": 8,
    "sept": 9,
    "sep": 9,
    "oct": 10,
    "nov": 11,
    "dec": 12,
}
WEEKDAY_ABBREVIATIONS: tuple[str, ...] = tuple(name[:3].lower() for name in WEEKDAY_NAMES)

# Lookups, lower-case keys: full names and abbreviations.
MONTH_NUMBERS: dict[str, int] = {
    **{name.lower(): number for number, name in enumerate(MONTH_NAMES, start=1)},
    **MONTH_ABBREVIATIONS,
}
WEEKDAY_NUMBERS: dict[str, int] = {
    **{name.lower(): number for number, name in enumerate(WEEKDAY_NAMES)},
    **{abbr: number for number, abbr in enumerate(WEEKDAY_ABBREVIATIONS)},
}
JA_WEEKDAY_NUMBERS: dict[str, int] = {char: number for number, char in enumerate(JA_WEEKDAYS)}

# Regex alternations (no group, lower case: compile with re.I). Full names come first so that
# "march" is matched whole rather than as "mar" + "ch".
MONTH_NAME_PATTERN = "|".join(name.lower() for name in MONTH_NAMES)
MONTH_PATTERN = MONTH_NAME_PATTERN + "|" + "|".join(MONTH_ABBREVIATIONS)
WEEKDAY_PATTERN = "|".join(name.lower() for name in WEEKDAY_NAMES)
