"""The time-expression grammar: English and Japanese patterns and their handlers.

``_RULES`` lists (pattern, handler, trigger) in priority order; ``_scan`` tries only the
rules a candidate position's trigger can start (``_DISPATCH``), so a query is scanned once
however many rules there are.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta

from memory_pipeline.core.common.timelex import (
    JA_WEEKDAY_NUMBERS,
    JA_WEEKDAYS,
    MONTH_ABBREVIATIONS,
    MONTH_NAME_PATTERN,
    MONTH_NAMES,
    MONTH_NUMBERS,
    MONTH_PATTERN,
    WEEKDAY_NAMES,
    WEEKDAY_NUMBERS,
    WEEKDAY_PATTERN,
)
from memory_pipeline.core.retrieval.timeatoms import (
    _EN_NUM,
    _MONTH_PREPS,
    _ORD,
    _STRONG_PREPS,
    _ago,
    _Atom,
    _bad,
    _Ctx,
    _filt,
    _future,
    _last_wd,
    _month_atom,
    _month_range,
    _num,
    _prev_word,
    _recent,
    _recent_dom,
    _rel_period,
    _session,
    _shift_months,
    _span,
    _ts_atom,
    _week_day,
    _weekend,
    _year_atom,
    _yearless,
    _ymd,
)
from memory_pipeline.core.retrieval.timefilter import _PARTS

# ----------------------------------------------------------------------------- grammar

_B = r"(?<![A-Za-z0-9])"
_E = r"(?![A-Za-z0-9])"
_MON = f"({MONTH_PATTERN})" + r"\.?"
_MONF = f"({MONTH_NAME_PATTERN})"
_WD = f"({WEEKDAY_PATTERN})"
_NUM = r"(\d{1,6}|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen"
_NUM += r"|twenty|thirty)"
_ORDW = r"(\d{1,4}(?:st|nd|rd|th)|" + "|".join(_ORD) + ")"
_UNIT = r"(day|week|month|year)s?"
_SUF = r"(?:st|nd|rd|th)?"
# a kanji numeral is at most 6 characters (二〇二四, 百九十九): an unbounded run would let each
# of n numeral characters scan to the end of the run, n**2 work for "百" * n
_JN = r"(\d{1,4}|[〇一二三四五六七八九十百]{1,6})"
_JWD = f"([{JA_WEEKDAYS}])曜日?"
_JA_FOLLOW = r"(?=[にのはもでとへ何]|[^ぁ-ゖァ-ヺ一-龯々]|$)"
_NOT_JN = r"(?<![\d〇一二三四五六七八九十])"
_TALK = r"(?=(?:talk|spoke|speak|met|meet|chat|discuss|mention)\w*)"
_REL_K = {"last": -1, "previous": -1, "past": -1, "this": 0, "next": 1}
_JA_REL = {
    "先々週": ("week", -2), "先週": ("week", -1), "今週": ("week", 0), "来週": ("week", 1),
    "先々月": ("month", -2), "先月": ("month", -1), "今月": ("month", 0), "来月": ("month", 1),
    "一昨年": ("year", -2), "おととし": ("year", -2), "去年": ("year", -1), "昨年": ("year", -1),
    "今年": ("year", 0), "本年": ("year", 0), "来年": ("year", 1),
}  # fmt: skip
_JA_DAYS = {
    "一昨日": -2, "おととい": -2, "昨日": -1, "きのう": -1, "今日": 0, "本日": 0,
    "明日": 1, "あした": 1, "明後日": 2, "あさって": 2,
}  # fmt: skip


_A = Callable[[re.Match[str], "_Ctx"], "_Atom | None"]


def _mon(s: str) -> int:
    return MONTH_NUMBERS[s.lower()]


def _wd(s: str) -> int:
    return WEEKDAY_NUMBERS[s.lower()]


def _year2(y: str, c: _Ctx) -> int:
    n = int(y)
    if len(y) == 2:
        n += 2000 if 2000 + n <= c.today.year else 1900
    return n


def _h_us(m: re.Match[str], c: _Ctx) -> _Atom:
    a, b, y = int(m[1]), int(m[2]), _year2(m[3], c)
    atom = _ymd(y, a, b, 1.0 if a == b or b > 12 else 0.9)
    if atom.status == "ok":
        if atom.conf < 1.0:
            atom.note = "numeric date read as US month/day/year"
        return atom
    alt = _ymd(y, b, a, 0.7)
    if alt.status == "ok":
        alt.note = "first number > 12: read as day/month/year"
        return alt
    return _bad(f"invalid numeric date {m[0]!r}")


def _h_md_num(m: re.Match[str], c: _Ctx) -> _Atom | None:
    if c.lang != "ja" and _prev_word(c, m.start()) not in _MONTH_PREPS | {"on"}:
        return None  # "1/2" alone may be a fraction
    return _yearless(c, int(m[1]), int(m[2]))


def _h_mon_day(m: re.Match[str], c: _Ctx) -> _Atom:
    mon, d = _mon(m[1]), int(m[2])
    return _ymd(int(m[3]), mon, d) if m[3] else _yearless(c, mon, d)


def _h_day_mon(m: re.Match[str], c: _Ctx) -> _Atom:
    mon, d = _mon(m[2]), int(m[1])
    return _ymd(int(m[3]), mon, d) if m[3] else _yearless(c, mon, d)


def _h_rel_mon(m: re.Match[str], c: _Ctx) -> _Atom:
    k, mon = _REL_K[m[1].lower()], _mon(m[2])
    if k > 0:
        return _future()
    y = c.today.year if k == 0 or mon < c.today.month else c.today.year - 1
    return _span(*_month_range(y, mon), 0.9)


def _h_year(m: re.Match[str], c: _Ctx) -> _Atom | None:
    if _prev_word(c, m.start()) not in _MONTH_PREPS | {"year"}:
        return None  # "2023 trip" is content
    return _year_atom(int(m[1]))


def _h_bare_month(m: re.Match[str], c: _Ctx) -> _Atom | None:
    prev = _prev_word(c, m.start())
    strong = m[1].lower() in c.speakers
    if prev not in (_STRONG_PREPS if strong else _MONTH_PREPS):
        return None  # "May said ..." is a name
    return _month_atom(_mon(m[1]))


def _h_session_ord(m: re.Match[str], c: _Ctx) -> _Atom:
    w = re.sub(r"\s+", " ", m[1].lower())
    if w in ("first", "earliest"):
        return _session("first", conf=0.9)
    if w in ("last", "latest", "final", "previous", "most recent"):
        return _session("last", conf=0.9)
    return _session("eq", _ORD.get(w) or int(re.sub(r"\D", "", w)))


def _h_first_last(m: re.Match[str], c: _Ctx) -> _Atom:
    return _session("first" if m[1].lower() in ("first", "earliest") else "last", conf=0.8)


def _h_rel_wd(m: re.Match[str], c: _Ctx) -> _Atom:
    k, wd = _REL_K[m[1].lower()], _wd(m[2])
    if k < 0:
        return _last_wd(c, wd, 0.9)
    return _week_day(c, 0, wd) if k == 0 else _future()


def _h_weekend(m: re.Match[str], c: _Ctx) -> _Atom:
    which = m[1].lower()
    return _weekend(c, "last" if which in ("past", "previous") else which)


def _h_dom(m: re.Match[str], c: _Ctx) -> _Atom:
    d = _recent_dom(c.today, int(m[1]))
    return _span(d, d, 0.8, shift="month") if d else _bad(f"no day {m[1]} in any month")


def _h_iso_week(m: re.Match[str], c: _Ctx) -> _Atom:
    n = int(m[1])
    return _Atom(filt=_filt("iso_week", "eq", n)) if 1 <= n <= 53 else _bad("ISO weeks are 1..53")


def _h_ja_ym(m: re.Match[str], c: _Ctx) -> _Atom:
    n = _num(m[2])
    return _span(*_month_range(int(m[1]), n)) if 1 <= n <= 12 else _bad(f"invalid month {n}")


def _h_ja_day(m: re.Match[str], c: _Ctx) -> _Atom:
    k = _JA_DAYS[m[1]]
    return _future() if k > 0 else _span(c.today + timedelta(k), c.today + timedelta(k))


def _h_ja_weekend(m: re.Match[str], c: _Ctx) -> _Atom:
    return _weekend(c, {"先週末": "last", "今週末": "this", "来週末": "next"}.get(m[1], ""))


def _day_ago(k: int) -> _A:
    return lambda m, c: _span(c.today - timedelta(k), c.today - timedelta(k))


def _part(word: str, needs_day: bool = False) -> _Atom:
    return _Atom(part=_PARTS[word.lower()], needs_day=needs_day, conf=0.8)


def _fixed(make: Callable[[_Ctx], _Atom]) -> _A:
    return lambda m, c: make(c)


_DMY = r"(?:(?:,\s*|\s+)(\d{4}))?" + _E  # optional ", 2023"
_AGO_Q = r"(a\s+couple\s+of|couple\s+of|a\s+few|few|several|" + _NUM[1:]
_ROLL = r"(?:(?:the\s+)?(?:past|last)\s+" + _NUM + r"|the\s+(?:past|last)|past)\s+"
_SESS_ORD = r"(?:(?:the|our|my)\s+)?(" + _ORDW[1:-1] + r"|last|latest|final|previous|earliest"
_SESS_ORD += r"|most\s+recent)\s+(?:session|conversation|chat)s?"
_NO = r"\s*(?:#\s*|no\.?\s*|number\s+)?"
_JA_CONV = r"(?:の(?:会話|セッション|チャット))?"
_JA_AGO = r"(" + _JN[1:-1] + r"|数)\s*(日|週間|週|か月|ヶ月|ケ月|カ月|ヵ月|箇月|年)\s*前"
_JA_PERIOD = (
    r"(先々週|先週|今週|来週|先々月|先月|今月|来月|一昨年|おととし|去年|昨年|今年|本年|来年)"
)
_LPPTN = "last past previous this next"

# (pattern, what a match can start with, handler). At one position the first rule whose handler
# accepts wins, so specific rules come first. Triggers: "#" a digit, "@mon"/"@wd"/"@num"/"@ord"
# word classes, "@jn" kanji numerals, other words/characters literally.
# fmt: off
_RULES: list[tuple[str, str, _A]] = [
    # --- Japanese absolute dates first: 2023年 must not be taken by the English year rule
    (r"(\d{4})\s*年\s*" + _JN + r"\s*月\s*" + _JN + r"\s*日", "#",
     lambda m, c: _ymd(int(m[1]), _num(m[2]), _num(m[3]))),
    (r"(\d{4})\s*年\s*" + _JN + r"\s*月(?!曜)", "#", _h_ja_ym),
    (_NOT_JN + _JN + r"\s*月\s*" + _JN + r"\s*日(?![前間後])", "# @jn",
     lambda m, c: _yearless(c, _num(m[1]), _num(m[2]))),
    (_NOT_JN + _JA_AGO, "# @jn 数", lambda m, c: _ago(c, m[1], m[2])),
    (r"(\d{4})\s*年(?![前間代度])", "#", lambda m, c: _year_atom(int(m[1]))),
    (_NOT_JN + _JN + r"\s*月(?![曜前間])", "# @jn", lambda m, c: _month_atom(_num(m[1]), 0.8)),
    (r"(?<![\d月])(\d{1,2})\s*日(?![前間後曜])", "#", _h_dom),
    # --- English: absolute dates
    (_B + r"(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})(?!\d)", "#",
     lambda m, c: _ymd(*map(int, m.groups()))),
    (_B + r"(\d{1,2})[/-](\d{1,2})[/-](\d{4}|\d{2})(?![\d/-])", "#", _h_us),
    (_B + r"(\d{1,2})/(\d{1,2})(?![\d/])", "#", _h_md_num),
    (_B + _MON + r"\s+(\d{1,2})" + _SUF + _DMY, "@mon", _h_mon_day),
    (_B + r"(?:the\s+)?(\d{1,2})" + _SUF + r"\s+(?:of\s+)?" + _MON + _DMY, "the #", _h_day_mon),
    (_B + _MON + r"(?:,\s*|\s+)(?:of\s+)?(\d{4})" + _E, "@mon",
     lambda m, c: _span(*_month_range(int(m[2]), _mon(m[1])))),
    (_B + r"(last|this|next|previous)\s+" + _MONF + _E, "last this next previous", _h_rel_mon),
    # --- English: weekdays
    (_B + _WD + r"\s+(?:of\s+)?(last|this|next)\s+week" + _E, "@wd",
     lambda m, c: _week_day(c, _REL_K[m[2].lower()], _wd(m[1]))),
    (_B + r"(last|this|next)\s+week(?:'s|’s)?\s+" + _WD + _E, "last this next",
     lambda m, c: _week_day(c, _REL_K[m[1].lower()], _wd(m[2]))),
    (_B + r"(last|past|previous|this|next)\s+" + _WD + _E, _LPPTN, _h_rel_wd),
    (_B + r"(?:every\s+)?" + _WD + r"s" + _E + "|" + _B + r"every\s+" + _WD + _E, "every @wd",
     lambda m, c: _Atom(filt=_filt("weekday", "eq", _wd(m[1] or m[2])), conf=0.9)),
    (_B + _WD + _E, "@wd", lambda m, c: _last_wd(c, _wd(m[1]), 0.8)),
    # --- English: relative days, parts of day, weekends, periods
    (_B + r"(?:the\s+)?day\s+before\s+yesterday" + _E, "the day", _day_ago(2)),
    (_B + r"(?:the\s+)?day\s+after\s+tomorrow" + _E, "the day", _fixed(lambda c: _future())),
    (_B + r"yesterday" + _E, "yesterday", _day_ago(1)),
    (_B + r"today" + _E, "today", _day_ago(0)),
    (_B + r"tomorrow" + _E, "tomorrow", _fixed(lambda c: _future())),
    (_B + r"tonight" + _E, "tonight", _fixed(lambda c: _ts_atom(c.today, _PARTS["night"]))),
    (_B + r"last\s+night" + _E, "last",
     _fixed(lambda c: _ts_atom(c.today - timedelta(1), _PARTS["night"]))),
    (_B + r"this\s+(morning|afternoon|evening)" + _E, "this",
     lambda m, c: _ts_atom(c.today, _PARTS[m[1].lower()])),
    (_B + r"(?:in|during)\s+the\s+(morning|afternoon|evening)s?" + _E + "|" + _B + r"at\s+(night)",
     "in during at", lambda m, c: _part(m[1] or m[2])),
    (_B + r"(morning|afternoon|evening|night)s?" + _E, "morning afternoon evening night",
     lambda m, c: _part(m[1], True)),
    (_B + r"(last|past|previous|this|next)\s+weekend" + _E, _LPPTN, _h_weekend),
    (_B + r"(?:(?:over|on|during)\s+)?the\s+weekend" + _E, "over on during the",
     _fixed(lambda c: _weekend(c, "recent"))),
    (_B + r"(last|this|next|previous)\s+(week|month|year)" + _E, "last this next previous",
     lambda m, c: _rel_period(c, m[2].lower(), _REL_K[m[1].lower()])),
    (_B + _ROLL + _UNIT + _E, "the past last", lambda m, c: _rolling(c, m[1] or "1", m[2])),
    (_B + _AGO_Q + r"\s+" + _UNIT + r"\s+ago" + _E, "a couple few several @num #",
     lambda m, c: _ago(c, m[1], m[2].lower())),
    # --- English: recency and sessions
    (_B + r"most\s+recently" + _E, "most", _fixed(lambda c: _session("last", conf=0.8))),
    (_B + r"(?:recently|lately|the\s+other\s+day|these\s+days)" + _E, "recently lately the these",
     _fixed(_recent)),
    (_B + r"(?:session|conversation|chat)" + _NO + r"(\d{1,4})" + _E, "session conversation chat",
     lambda m, c: _session("eq", int(m[1]))),
    (_B + _SESS_ORD + _E, "the our my @ord # last latest final previous earliest most",
     _h_session_ord),
    (_B + r"(?:the\s+)?(first|last|latest|earliest|most\s+recent)\s+time" + _E,
     "the first last latest earliest most", _h_first_last),
    (_B + r"(first|last)\s+" + _TALK, "first last", _h_first_last),
    (_B + r"(?:iso\s+)?week" + _NO + r"(\d{1,2})" + _E, "iso week", _h_iso_week),
    (_B + r"(1[89]\d\d|2[01]\d\d)(?!\s*年)" + _E, "#", _h_year),
    (_B + _MONF + _E, "@mon", _h_bare_month),
    (_B + r"on\s+the\s+(\d{1,2})(?:st|nd|rd|th)" + _E, "on", _h_dom),
    (_B + r"(?:next|last|this|previous)\s+([a-z]{1,16}day)" + _E, "next last this previous",
     lambda m, c: _Atom(status="unknown", note=f"unrecognised day name {m[1]!r}")),
    # --- Japanese: weekdays, weeks, months, years, days, parts of day
    (r"(先々週|先週|今週|来週)\s*の?\s*" + _JWD, "先 今 来",
     lambda m, c: _week_day(c, _JA_REL[m[1]][1], JA_WEEKDAY_NUMBERS[m[2]])),
    (r"毎週\s*の?\s*" + _JWD, "毎",
     lambda m, c: _Atom(filt=_filt("weekday", "eq", JA_WEEKDAY_NUMBERS[m[1]]), conf=0.9)),
    (_JWD, " ".join(JA_WEEKDAYS), lambda m, c: _last_wd(c, JA_WEEKDAY_NUMBERS[m[1]], 0.8)),
    (r"(先週末|今週末|来週末|週末)", "先 今 来 週", _h_ja_weekend),
    (_JA_PERIOD, "先 今 来 一 お 去 昨 本", lambda m, c: _rel_period(c, *_JA_REL[m[1]])),
    (r"(一昨日|おととい|昨日|きのう|今日|本日|明後日|あさって|明日|あした)",
     "一 お 昨 き 今 本 明 あ", _h_ja_day),
    (r"今朝", "今", _fixed(lambda c: _ts_atom(c.today, _PARTS["朝"]))),
    (r"今夜|今晩", "今", _fixed(lambda c: _ts_atom(c.today, _PARTS["夜"]))),
    (r"昨夜|昨晩|ゆうべ", "昨 ゆ",
     _fixed(lambda c: _ts_atom(c.today - timedelta(1), _PARTS["夜"]))),
    (r"(午前中|午前|午後)", "午", lambda m, c: _part(m[1])),
    (r"(深夜|夕方|朝|昼|夜|晩)" + _JA_FOLLOW, "深 夕 朝 昼 夜 晩", lambda m, c: _part(m[1])),
    (r"最近|この間|このあいだ|この前|先日|こないだ", "最 こ 先", _fixed(_recent)),
    # --- Japanese: sessions
    (_JN + r"\s*(?:回目|番目)" + _JA_CONV + r"|第\s*" + _JN + r"\s*回目?" + _JA_CONV, "# @jn 第",
     lambda m, c: _session("eq", _num(m[1] or m[2]))),
    (r"最初の(?:会話|セッション|チャット)|最初に|初めて|はじめて|最初", "最 初 は",
     _fixed(lambda c: _session("first", conf=0.8))),
    (r"最後の(?:会話|セッション|チャット)|最後に|前回|最新の(?:会話|セッション)|最後", "最 前",
     _fixed(lambda c: _session("last", conf=0.8))),
]
# fmt: on


def _rolling(c: _Ctx, qty: str, unit: str) -> _Atom:
    n, unit = _num(qty), unit.lower()
    t = c.today
    if unit in ("day", "week"):
        lo = t - timedelta(days=n * (7 if unit == "week" else 1))
    else:
        lo = _shift_months(t, -n * (12 if unit == "year" else 1))
    return _span(lo, t, 0.9)


_TRIGGER_CLASSES = {
    "@mon": " ".join([n.lower() for n in MONTH_NAMES] + list(MONTH_ABBREVIATIONS)),
    "@wd": " ".join(n.lower() for n in WEEKDAY_NAMES),
    "@num": " ".join(_EN_NUM),
    "@ord": " ".join(_ORD),
    "@jn": " ".join("〇一二三四五六七八九十百"),
}


def _dispatch() -> dict[str, tuple[tuple[re.Pattern[str], _A], ...]]:
    """First word/character -> the rules that can start there, in priority order."""
    table: dict[str, list[tuple[re.Pattern[str], _A]]] = {}
    for pattern, triggers, handler in _RULES:
        rule = (re.compile(pattern, re.I), handler)
        keys = " ".join(_TRIGGER_CLASSES.get(t, t) for t in triggers.split()).split()
        for key in dict.fromkeys(keys):
            table.setdefault(key, []).append(rule)
    return {k: tuple(v) for k, v in table.items()}


_DISPATCH = _dispatch()
_CJK_TRIGGERS = "".join(sorted(k for k in _DISPATCH if not k.isascii()))
_CANDIDATE = re.compile(r"(?<![A-Za-z0-9])(?:([A-Za-z]+)|\d)|[" + _CJK_TRIGGERS + "]")


MAX_ATOMS = 32  # time expressions read from one query; the rest of it stays content


def _scan(c: _Ctx) -> list[_Atom]:
    """Leftmost non-overlapping rule matches, each resolved against ``now``.

    Only positions whose first word/character can start a rule are tried, and only with those
    rules: a single big alternation tried at every character is ~20x slower. The work is
    linear in the text: every pattern's repetitions are bounded (a match attempt reads a
    bounded span, whatever follows it), and at most :data:`MAX_ATOMS` expressions are read.
    """
    atoms: list[_Atom] = []
    text, end = c.text, 0
    for cand in _CANDIDATE.finditer(text):
        if len(atoms) >= MAX_ATOMS:
            break
        pos = cand.start()
        if pos < end:
            continue
        word = cand[1]
        key = word.lower() if word else ("#" if cand[0].isdigit() else cand[0])
        rules = _DISPATCH.get(key) or _DISPATCH.get(key[:-1] if key[-1] == "s" else "", ())
        for rx, handler in rules:
            m = rx.match(text, pos)
            if m is None:
                continue
            try:
                atom = handler(m, c)
            except (ValueError, OverflowError, KeyError) as exc:
                atom = _bad(f"out of range ({type(exc).__name__})")
            if atom is not None:  # a handler may decline ("May said"): try the next rule
                atom.start, end, atom.text = pos, m.end(), m[0]
                atom.end = end
                atoms.append(atom)
                break
    return atoms
