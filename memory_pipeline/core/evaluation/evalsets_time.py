"""Templated time queries over the stored sessions ("What did we talk about last Tuesday?"),
in English and Japanese, each with the sessions of its window as gold.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa

from memory_pipeline.core.evaluation.evalsets_question import PRIMARY, EvalQuestion
from memory_pipeline.core.retrieval.timeexpr import RECENT_DAYS

# Alonso et al. 2024's template families. Each question's window follows the conventions of
# memory_pipeline.core.retrieval.timeexpr (documented there), computed here independently of
# the parser.
TIME_TEMPLATES = (
    "earlier_today",
    "date_span",
    "dates",
    "day_span",
    "last_day",
    "month",
    "rel_day",
    "rel_month",
    "rel_session",
    "session_span",
    "session",
)
_MONTHS = (
    "January February March April May June July August September October November December"
).split()
_WEEKDAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
_JA_WEEKDAYS = "月火水木金土日"
_EN_NUMBERS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}
_EN_ORDINALS = {
    2: "second", 3: "third", 4: "fourth", 5: "fifth", 6: "sixth", 7: "seventh",
    8: "eighth", 9: "ninth", 10: "tenth", 11: "eleventh", 12: "twelfth",
}  # fmt: skip
_EN_ASK = ("What did we talk about {w}?", "What did we discuss {w}?", "Remind me what we said {w}.")
_JA_ASK = ("{w}は何を話した？", "{w}はどんな話をした？")
_JA_ASK_SESSION = ("{w}で何を話した？", "{w}ではどんな話をした？")
_DAY_END = dt.time(23, 59, 59, 999999)


@dataclass(frozen=True)
class _Sess:
    session_id: str
    start: dt.datetime
    end: dt.datetime
    index: int  # 1-based, by start time within the conversation


@dataclass
class _Conv:
    conversation_id: str
    sessions: list[_Sess]

    def on(self, lo: dt.date, hi: dt.date) -> list[_Sess]:
        return [s for s in self.sessions if lo <= s.start.date() <= hi]

    @property
    def end(self) -> dt.datetime:
        """A moment after the conversation: absolute templates are asked then."""
        return max(s.end for s in self.sessions) + dt.timedelta(hours=1)

    def ask_on(self, day: dt.date, rng: random.Random) -> dt.datetime:
        """as_of on ``day`` after every session that starts that day (none lies in the future)."""
        same = [s.end for s in self.sessions if s.start.date() == day]
        if same:
            return min(max(same) + dt.timedelta(hours=1), dt.datetime.combine(day, _DAY_END))
        return dt.datetime.combine(day, dt.time(rng.randint(9, 21), rng.choice((0, 15, 30, 45))))


@dataclass(frozen=True)
class _Draft:
    when: str  # the time phrase, slotted into a question frame
    as_of: dt.datetime
    gold: tuple[str, ...]
    window: str  # machine-readable window, stored in notes


def _fmt_date(d: dt.date, lang: str, rng: random.Random) -> str:
    if lang == "ja":
        return f"{d.year}年{d.month}月{d.day}日"
    style = rng.randrange(3)
    if style == 0:
        return f"{d.day} {_MONTHS[d.month - 1]} {d.year}"
    if style == 1:
        return f"{_MONTHS[d.month - 1]} {d.day}, {d.year}"
    return d.isoformat()


def _date_window(conv: _Conv, lo: dt.date, hi: dt.date, when: str, as_of: dt.datetime) -> _Draft:
    gold = tuple(s.session_id for s in conv.on(lo, hi))
    return _Draft(when, as_of, gold, f"date {lo.isoformat()}..{hi.isoformat()}")


def _index_window(conv: _Conv, lo: int, hi: int, when: str) -> _Draft:
    gold = tuple(s.session_id for s in conv.sessions if lo <= s.index <= hi)
    return _Draft(when, conv.end, gold, f"session_index {lo}..{hi} of {len(conv.sessions)}")


def _month_range(y: int, m: int) -> tuple[dt.date, dt.date]:
    ny, nm = (y + 1, 1) if m == 12 else (y, m + 1)
    return dt.date(y, m, 1), dt.date(ny, nm, 1) - dt.timedelta(days=1)


def _t_earlier_today(c: _Conv, rng: random.Random, lang: str) -> _Draft:
    day = rng.choice(c.sessions).start.date()
    when = "今日" if lang == "ja" else "earlier today"
    return _date_window(c, day, day, when, c.ask_on(day, rng))


def _t_dates(c: _Conv, rng: random.Random, lang: str) -> _Draft:
    day = rng.choice(c.sessions).start.date()
    when = _fmt_date(day, lang, rng)
    return _date_window(c, day, day, when if lang == "ja" else f"on {when}", c.end)


def _t_date_span(c: _Conv, rng: random.Random, lang: str) -> _Draft:
    i = rng.randrange(len(c.sessions))
    j = min(len(c.sessions) - 1, i + rng.randint(0, 4))
    lo = c.sessions[i].start.date() - dt.timedelta(days=rng.randint(0, 3))
    hi = c.sessions[j].start.date() + dt.timedelta(days=rng.randint(0, 3))
    a, b = _fmt_date(lo, lang, rng), _fmt_date(hi, lang, rng)
    if lang == "ja":
        when = f"{a}から{b}まで"
    else:
        when = f"between {a} and {b}" if rng.random() < 0.5 else f"from {a} to {b}"
    return _date_window(c, lo, hi, when, c.end)


def _t_day_span(c: _Conv, rng: random.Random, lang: str) -> _Draft:
    # "the past N days" covers today - N .. today; 最近 covers the RECENT_DAYS days up to today.
    n = RECENT_DAYS - 1 if lang == "ja" else rng.choice((3, 5, 7, 10, 14))
    today = rng.choice(c.sessions).start.date() + dt.timedelta(days=rng.randint(0, n))
    if lang == "ja":
        when = "最近"
    else:
        when = rng.choice((f"in the past {n} days", f"over the last {n} days"))
    return _date_window(c, today - dt.timedelta(days=n), today, when, c.ask_on(today, rng))


def _t_last_day(c: _Conv, rng: random.Random, lang: str) -> _Draft:
    # "last Tuesday" / 火曜日: the most recent Tuesday strictly before today.
    day = rng.choice(c.sessions).start.date()
    today = day + dt.timedelta(days=rng.randint(1, 7))
    wd = day.weekday()
    when = f"{_JA_WEEKDAYS[wd]}曜日" if lang == "ja" else f"last {_WEEKDAYS[wd]}"
    return _date_window(c, day, day, when, c.ask_on(today, rng))


def _t_month(c: _Conv, rng: random.Random, lang: str) -> _Draft:
    d = rng.choice(c.sessions).start.date()
    lo, hi = _month_range(d.year, d.month)
    if lang == "ja":
        when = f"{d.year}年{d.month}月"
    else:
        when = f"{rng.choice(('in', 'during'))} {_MONTHS[d.month - 1]} {d.year}"
    return _date_window(c, lo, hi, when, c.end)


def _t_rel_month(c: _Conv, rng: random.Random, lang: str) -> _Draft:
    # "last month" / "N months ago" / 先月 / Nか月前: that whole calendar month.
    d = rng.choice(c.sessions).start.date()
    k = rng.choice((1, 1, 2, 3))
    t = d.year * 12 + d.month - 1 + k
    today = dt.date(t // 12, t % 12 + 1, rng.randint(1, 28))
    if lang == "ja":
        when = "先月" if k == 1 else f"{k}か月前"
    else:
        when = "last month" if k == 1 else f"{_EN_NUMBERS[k]} months ago"
    lo, hi = _month_range(d.year, d.month)
    return _date_window(c, lo, hi, when, c.ask_on(today, rng))


def _t_rel_day(c: _Conv, rng: random.Random, lang: str) -> _Draft:
    day = rng.choice(c.sessions).start.date()
    k = rng.randint(1, 6)
    if lang == "ja":
        when = {1: "昨日", 2: "一昨日"}.get(k, f"{k}日前")
    elif k == 1:
        when = "yesterday"
    elif k == 2 and rng.random() < 0.5:
        when = "the day before yesterday"
    else:
        when = f"{_EN_NUMBERS[k]} days ago"
    return _date_window(c, day, day, when, c.ask_on(day + dt.timedelta(days=k), rng))


def _t_session(c: _Conv, rng: random.Random, lang: str) -> _Draft:
    n = rng.randint(1, len(c.sessions))
    if lang == "ja":
        when = f"{n}回目の会話"
    else:
        when = rng.choice((f"in session {n}", f"in session #{n}", f"in chat {n}"))
    return _index_window(c, n, n, when)


def _t_session_span(c: _Conv, rng: random.Random, lang: str) -> _Draft | None:
    if len(c.sessions) < 2:
        return None
    i = rng.randint(1, len(c.sessions) - 1)
    j = min(len(c.sessions), i + rng.randint(1, 4))
    if lang == "ja":
        when = f"{i}回目から{j}回目までの会話"
    elif rng.random() < 0.5:
        when = f"between session {i} and session {j}"
    else:
        when = f"from session {i} to session {j}"
    return _index_window(c, i, j, when)


def _t_rel_session(c: _Conv, rng: random.Random, lang: str) -> _Draft:
    n_sess = len(c.sessions)
    which = rng.choice(("first", "last", "nth"))
    n = rng.randint(2, min(n_sess, 12)) if which == "nth" and n_sess >= 2 else 1
    if which == "last":
        n = n_sess
    if lang == "ja":
        when = {"first": "最初の会話", "last": "最後の会話"}.get(which, f"{n}番目の会話")
    elif which == "first":
        when = rng.choice(("the first time we talked", "in our first conversation"))
    elif which == "last":
        when = rng.choice(("the last time we talked", "in our last conversation"))
    else:
        when = f"in our {_EN_ORDINALS.get(n, 'first')} session"
    return _index_window(c, n, n, when)


_TEMPLATE_FNS: dict[str, Callable[[_Conv, random.Random, str], _Draft | None]] = {
    "earlier_today": _t_earlier_today,
    "date_span": _t_date_span,
    "dates": _t_dates,
    "day_span": _t_day_span,
    "last_day": _t_last_day,
    "month": _t_month,
    "rel_day": _t_rel_day,
    "rel_month": _t_rel_month,
    "rel_session": _t_rel_session,
    "session_span": _t_session_span,
    "session": _t_session,
}


def _conversations(sessions: pa.Table) -> list[_Conv]:
    cols = ["session_id", "conversation_id", "start_local_ts"]
    missing = [c for c in cols if c not in sessions.column_names]
    if missing:
        raise ValueError(f"sessions table lacks columns {missing}")
    data = sessions.select(cols).to_pydict()
    ends = (
        sessions.column("end_local_ts").to_pylist()
        if "end_local_ts" in sessions.column_names
        else data["start_local_ts"]
    )
    by_conv: dict[str, list[tuple[dt.datetime, str, dt.datetime]]] = {}
    for sid, cid, start, end in zip(
        data["session_id"], data["conversation_id"], data["start_local_ts"], ends, strict=True
    ):
        if sid is None or cid is None or start is None:
            continue
        start = start.replace(tzinfo=None)
        end = max(start, end.replace(tzinfo=None)) if end is not None else start
        by_conv.setdefault(cid, []).append((start, sid, end))
    convs = []
    for cid in sorted(by_conv):
        rows = sorted(by_conv[cid])
        convs.append(
            _Conv(cid, [_Sess(sid, st, en, i) for i, (st, sid, en) in enumerate(rows, start=1)])
        )
    return convs


def generate_time_queries(
    sessions: pa.Table, *, seed: int = 0, per_template: int = 20, lang: str = "en"
) -> list[EvalQuestion]:
    """Templated time questions (Alonso et al. 2024's 11 families) with session-level gold.

    Each question is scoped to one conversation (``corpus_id`` = conversation_id) and its gold is
    every session of that conversation whose start time lies in the question's window (grade 2,
    ``gold_kind="session_id"``); ``notes`` holds the window ("date 2023-05-01..2023-05-08" or
    "session_index 3..5 of 19"). Session indexes are 1-based by start time per conversation.
    ``as_of`` is after every session that could match: relative questions ("yesterday", "last
    Tuesday", "the past 7 days") are asked later on the day they resolve from, absolute ones an
    hour after the conversation ends. Phrases use only forms memory_pipeline.core.retrieval.timeexpr
    parses. Up to ``per_template`` distinct questions per template (fewer when the sessions
    allow fewer); the same table and seed give the same list. ``lang``: "en" or "ja".
    """
    if lang not in ("en", "ja"):
        raise ValueError(f"lang must be 'en' or 'ja', got {lang!r}")
    convs = _conversations(sessions)
    if not convs or per_template < 1:
        return []
    frames = _JA_ASK if lang == "ja" else _EN_ASK
    out: list[EvalQuestion] = []
    for template in TIME_TEMPLATES:
        rng = random.Random(f"{seed}:{lang}:{template}")  # str seeds are stable across runs
        fn = _TEMPLATE_FNS[template]
        seen: set[tuple[str, str, dt.datetime]] = set()
        made = 0
        for _ in range(per_template * 50):
            if made >= per_template:
                break
            conv = rng.choice(convs)
            draft = fn(conv, rng, lang)
            if draft is None or not draft.gold:
                continue
            if lang == "ja" and draft.window.startswith("session_index"):
                text = rng.choice(_JA_ASK_SESSION).format(w=draft.when)
            else:
                text = rng.choice(frames).format(w=draft.when)
            key = (conv.conversation_id, draft.window, draft.as_of)
            if key in seen:
                continue
            seen.add(key)
            out.append(
                EvalQuestion(
                    question_id=f"time-{lang}/{template}/{made:03d}",
                    corpus_id=conv.conversation_id,
                    question=text,
                    qtype=template,
                    gold=dict.fromkeys(draft.gold, PRIMARY),
                    gold_kind="session_id",
                    as_of=draft.as_of,
                    notes=draft.window,
                    scope={"conversation_id": conv.conversation_id},
                )
            )
            made += 1
    return out
