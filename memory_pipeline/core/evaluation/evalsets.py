"""Evaluation question sets: LoCoMo QA, the user's own labelled JSONL, templated time queries.

Every source becomes a list of :class:`EvalQuestion` plus a report of what could not be used,
so a defect in the labels shows up as a counted, listed item instead of a crash or a silently
skewed score.

User question file (JSONL, UTF-8, one object per line; blank lines are skipped)::

    {"id": "q17", "question": "When did we plan the Kyoto trip?", "type": "temporal",
     "as_of": "2024-03-15T10:00", "scope": {"contact_id": "c-42"},
     "answer": "in January", "notes": "...",
     "gold": [{"ref": "msg-123", "kind": "message_id", "grade": 2},
              {"ref": "msg-124", "kind": "message_id", "grade": 1}]}

* ``id`` (string or integer, unique in the file) and ``question`` (non-empty string) are
  required; ``type`` defaults to ``"unspecified"``; ``answer`` and ``notes`` are optional.
* ``as_of``: ISO-8601 date or date-time, the moment the question is asked (relative phrases like
  "yesterday" resolve against it). Read as local wall-clock time; an offset is dropped.
* ``scope``: optional ``{"contact_id": ...}`` or ``{"conversation_id": ...}``; the question is
  answered from that contact's / conversation's history only (``corpus_id`` is that id, ``""``
  = the whole memory).
* ``gold``: list of ``{"ref", "kind", "grade"}``; kind is ``message_id``, ``source_ref`` (the
  source's own message reference, e.g. a LoCoMo dia_id), ``chunk_id`` or ``session_id`` - one
  kind per question; grade 2 = primary (answers it), 1 = supporting (default 2). An empty list
  is allowed: the question is kept, reported and excluded from metrics.

A malformed line is skipped and reported as ``"<file>:<line>: <what>"``; the rest still loads.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from memory_pipeline.core.ingest.sources.locomo import load_locomo_samples, parse_session_time
from memory_pipeline.core.retrieval.timeexpr import RECENT_DAYS

__all__ = [
    "GOLD_KINDS",
    "LOCOMO_CATEGORIES",
    "TIME_TEMPLATES",
    "EvalQuestion",
    "ExcludedQuestion",
    "JsonlReport",
    "LocomoReport",
    "UnresolvedEvidence",
    "generate_time_queries",
    "load_jsonl_questions",
    "load_locomo_questions",
]

PRIMARY, SUPPORTING = 2, 1
GOLD_KINDS = ("message_ref", "message_id", "chunk_id", "session_id")
# Verified against the paper's per-category counts (README of the shared data).
LOCOMO_CATEGORIES = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}


@dataclass
class EvalQuestion:
    """One question with graded gold references, scoped to one corpus.

    ``gold_kind`` says what the references are: ``message_ref`` (a message's source_ref, e.g. a
    LoCoMo dia_id), ``message_id``, ``chunk_id`` or ``session_id``. ``scope`` holds the column
    filter that defines the corpus (``{"conversation_id": ...}`` or ``{"contact_id": ...}``).
    """

    question_id: str
    corpus_id: str
    question: str
    qtype: str
    gold: dict[str, int]
    gold_kind: str
    answer: str | None = None
    as_of: dt.datetime | None = None
    notes: str = ""
    scope: dict[str, str] = field(default_factory=dict)

    @property
    def scored(self) -> bool:
        """False when there is no gold: the question is listed but metrics are None."""
        return any(g >= 1 for g in self.gold.values())


# ----------------------------------------------------------------------------- LoCoMo

_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")
_SESSION_KEY = re.compile(r"session_(\d+)")


@dataclass(frozen=True)
class UnresolvedEvidence:
    """An evidence entry that names no turn of the conversation."""

    question_id: str
    raw: str  # the evidence string as written (repr for non-strings)
    ref: str  # the normalised id ("D10:19"), "" when no id could be read at all
    reason: str


@dataclass(frozen=True)
class ExcludedQuestion:
    """A loaded question that has no usable gold: listed, but excluded from metrics."""

    question_id: str
    qtype: str
    reason: str
    question: str


@dataclass
class LocomoReport:
    """What load_locomo_questions read, normalised, could not resolve and excluded."""

    path: str
    qa_total: int = 0  # every qa entry in the file, all categories
    per_category: dict[str, int] = field(default_factory=dict)  # all qa, by category name
    loaded_per_category: dict[str, int] = field(default_factory=dict)  # selected categories
    loaded: int = 0
    unresolved: list[UnresolvedEvidence] = field(default_factory=list)
    empty_evidence: list[ExcludedQuestion] = field(default_factory=list)
    normalized: list[tuple[str, str, tuple[str, ...]]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # malformed qa entries, skipped

    @property
    def scored(self) -> int:
        """Loaded questions that have gold (enter the metrics)."""
        return self.loaded - len(self.empty_evidence)

    def summary(self) -> str:
        """One human-readable paragraph for logs and reports."""
        cats = ", ".join(f"{k}={v}" for k, v in self.loaded_per_category.items())
        return (
            f"{self.path}: {self.qa_total} QA in file, {self.loaded} loaded ({cats}), "
            f"{self.scored} scored; {len(self.unresolved)} unresolvable evidence ids, "
            f"{len(self.empty_evidence)} questions without usable evidence, "
            f"{len(self.normalized)} evidence strings read leniently, "
            f"{len(self.problems)} malformed entries skipped"
        )


def _norm_dia(session: str, turn: str) -> str:
    return f"D{int(session)}:{int(turn)}"


def _conversation_turns(conv: dict[str, Any]) -> tuple[dict[str, str], dt.datetime | None]:
    """(normalised dia_id -> dia_id as written, start of the last session that has turns)."""
    dia: dict[str, str] = {}
    sessions = []
    for key, turns in conv.items():
        m = _SESSION_KEY.fullmatch(key)
        if m is None or not isinstance(turns, list) or not turns:
            continue
        sessions.append(int(m.group(1)))
        for turn in turns:
            did = turn.get("dia_id") if isinstance(turn, dict) else None
            if not isinstance(did, str):
                continue
            parsed = _EVIDENCE.fullmatch(did.strip())
            dia.setdefault(_norm_dia(*parsed.groups()) if parsed else did, did)
    as_of = None
    for n in sorted(sessions, reverse=True):
        when = conv.get(f"session_{n}_date_time")
        try:
            as_of = parse_session_time(when) if isinstance(when, str) else None
        except ValueError:
            as_of = None
        if as_of is not None:
            break
    return dia, as_of


def _parse_evidence(
    qid: str, evidence: Any, dia: dict[str, str], report: LocomoReport
) -> dict[str, int]:
    if evidence is None:
        evidence = []
    elif isinstance(evidence, str):
        evidence = [evidence]
    elif not isinstance(evidence, list):
        evidence = [evidence]
    gold: dict[str, int] = {}
    for item in evidence:
        raw = item if isinstance(item, str) else repr(item)
        found = [_norm_dia(s, t) for s, t in _EVIDENCE.findall(raw)]
        if not found:
            report.unresolved.append(
                UnresolvedEvidence(qid, raw, "", "no D<session>:<turn> id in the string")
            )
            continue
        if found != [raw]:
            report.normalized.append((qid, raw, tuple(found)))
        for ref in found:
            if ref in dia:
                gold[dia[ref]] = PRIMARY
            else:
                report.unresolved.append(
                    UnresolvedEvidence(qid, raw, ref, "no such turn in the conversation")
                )
    return gold


def load_locomo_questions(
    path: Path | str, categories: Iterable[int] = (1, 2, 3, 4)
) -> tuple[list[EvalQuestion], LocomoReport]:
    """LoCoMo QA of the chosen categories as questions over each conversation's dia_ids.

    Category 5 (adversarial, unanswerable) is left out by default, as in the paper's retrieval
    evaluation. Gold = the evidence dia_ids (grade 2, written exactly as the conversation's
    dia_id, i.e. the message's source_ref), read leniently with ``D:?(\\d+):(\\d+)``. Evidence
    naming no turn of the conversation is reported, never fatal; a question left without gold is
    still returned (metrics give None) and listed in ``report.empty_evidence``. ``as_of`` is the
    start of the last session with turns (questions are asked after the conversation).
    """
    wanted = tuple(categories)
    bad = [c for c in wanted if c not in LOCOMO_CATEGORIES]
    if bad:
        raise ValueError(f"unknown LoCoMo categories {bad}; known: {sorted(LOCOMO_CATEGORIES)}")
    report = LocomoReport(path=str(path))
    report.loaded_per_category = {LOCOMO_CATEGORIES[c]: 0 for c in sorted(set(wanted))}
    per_category: Counter[str] = Counter()
    questions: list[EvalQuestion] = []
    for sample in load_locomo_samples(Path(path)):
        sid = sample["sample_id"]
        dia, as_of = _conversation_turns(sample["conversation"])
        qa = sample.get("qa") or []
        if not isinstance(qa, list):
            report.problems.append(f"{sid}: 'qa' is a {type(qa).__name__}, not a list")
            continue
        for i, entry in enumerate(qa):
            qid = f"{sid}/q{i}"
            report.qa_total += 1
            if not isinstance(entry, dict):
                report.problems.append(f"{qid}: not an object")
                continue
            cat = entry.get("category")
            name = LOCOMO_CATEGORIES.get(cat) if isinstance(cat, int) else None
            per_category[name or f"unknown:{cat!r}"] += 1
            if name is None:
                report.problems.append(f"{qid}: unknown category {cat!r}")
                continue
            if cat not in wanted:
                continue
            text = entry.get("question")
            if not isinstance(text, str) or not text.strip():
                report.problems.append(f"{qid}: no question text")
                continue
            raw_evidence = entry.get("evidence")
            gold = _parse_evidence(qid, raw_evidence, dia, report)
            answer = entry.get("answer")
            if answer is None:  # category 5 has only adversarial_answer
                answer = entry.get("adversarial_answer")
            q = EvalQuestion(
                question_id=qid,
                corpus_id=sid,
                question=text.strip(),
                qtype=name,
                gold=gold,
                gold_kind="message_ref",
                answer=None if answer is None else str(answer),
                as_of=as_of,
                notes="" if gold else f"no usable evidence: {raw_evidence!r}",
                scope={"conversation_id": sid},
            )
            if not gold:
                reason = "empty evidence" if not raw_evidence else "evidence all unresolvable"
                report.empty_evidence.append(ExcludedQuestion(qid, name, reason, q.question))
            questions.append(q)
            report.loaded += 1
            report.loaded_per_category[name] += 1
    report.per_category = {
        name: per_category[name] for name in LOCOMO_CATEGORIES.values() if per_category[name]
    } | {k: v for k, v in per_category.items() if k.startswith("unknown:")}
    return questions, report


# ----------------------------------------------------------------------------- user JSONL

_KINDS = {
    "message_id": "message_id",
    "source_ref": "message_ref",
    "message_ref": "message_ref",
    "chunk_id": "chunk_id",
    "session_id": "session_id",
}
_SCOPE_KEYS = ("contact_id", "conversation_id")
_JSONL_KEYS = frozenset({"id", "question", "type", "as_of", "scope", "gold", "answer", "notes"})


@dataclass
class JsonlReport:
    """What load_jsonl_questions loaded and which lines it had to skip (and why)."""

    path: str
    lines: int = 0  # non-blank lines
    loaded: int = 0
    per_type: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)  # "<file>:<line>: <message>"
    empty_gold: list[str] = field(default_factory=list)  # question ids kept without gold

    @property
    def ok(self) -> bool:
        return not self.errors


class _LineError(ValueError):
    pass


def _as_of(value: Any) -> dt.datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise _LineError(f"'as_of' must be an ISO-8601 string, got {type(value).__name__}")
    try:
        parsed = dt.datetime.fromisoformat(value.strip())
    except ValueError as exc:
        raise _LineError(f"'as_of' is not ISO-8601: {value!r}") from exc
    return parsed.replace(tzinfo=None)


def _scope(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _LineError(f"'scope' must be an object, got {type(value).__name__}")
    unknown = sorted(set(value) - set(_SCOPE_KEYS))
    if unknown:
        raise _LineError(f"'scope' has unknown keys {unknown}; allowed: {list(_SCOPE_KEYS)}")
    if len(value) > 1:
        raise _LineError("'scope' takes one of contact_id / conversation_id")
    for k, v in value.items():
        if not isinstance(v, str) or not v:
            raise _LineError(f"'scope.{k}' must be a non-empty string")
    return dict(value)


def _gold(value: Any) -> tuple[dict[str, int], str]:
    if not isinstance(value, list):
        raise _LineError("'gold' must be a list of {ref, kind, grade} objects")
    gold: dict[str, int] = {}
    kinds = set()
    for j, item in enumerate(value):
        where = f"gold[{j}]"
        if not isinstance(item, dict):
            raise _LineError(f"{where} must be an object")
        ref, kind, grade = item.get("ref"), item.get("kind"), item.get("grade", PRIMARY)
        if not isinstance(ref, str) or not ref:
            raise _LineError(f"{where}.ref must be a non-empty string")
        if kind not in _KINDS:
            raise _LineError(f"{where}.kind must be one of {sorted(_KINDS)}, got {kind!r}")
        if isinstance(grade, bool) or grade not in (PRIMARY, SUPPORTING):
            raise _LineError(f"{where}.grade must be 2 (primary) or 1 (supporting), got {grade!r}")
        kinds.add(_KINDS[kind])
        gold[ref] = max(grade, gold.get(ref, 0))
    if len(kinds) > 1:
        raise _LineError(f"gold mixes kinds {sorted(kinds)}: use one kind per question")
    return gold, kinds.pop() if kinds else "message_id"


def _jsonl_question(obj: Any) -> EvalQuestion:
    if not isinstance(obj, dict):
        raise _LineError(f"a line must be a JSON object, got {type(obj).__name__}")
    unknown = sorted(set(obj) - _JSONL_KEYS)
    if unknown:
        raise _LineError(f"unknown keys {unknown}")
    qid = obj.get("id")
    if isinstance(qid, bool) or not isinstance(qid, str | int) or qid == "":
        raise _LineError("'id' must be a non-empty string or an integer")
    text = obj.get("question")
    if not isinstance(text, str) or not text.strip():
        raise _LineError("'question' must be a non-empty string")
    qtype = obj.get("type", "unspecified")
    if not isinstance(qtype, str) or not qtype:
        raise _LineError("'type' must be a non-empty string")
    for key in ("answer", "notes"):
        if obj.get(key) is not None and not isinstance(obj[key], str):
            raise _LineError(f"'{key}' must be a string")
    if "gold" not in obj:
        raise _LineError("'gold' is missing (use [] for a question without labels)")
    gold, kind = _gold(obj["gold"])
    scope = _scope(obj.get("scope"))
    return EvalQuestion(
        question_id=str(qid),
        corpus_id=next(iter(scope.values()), ""),
        question=text.strip(),
        qtype=qtype,
        gold=gold,
        gold_kind=kind,
        answer=obj.get("answer"),
        as_of=_as_of(obj.get("as_of")),
        notes=obj.get("notes") or "",
        scope=scope,
    )


def load_jsonl_questions(path: Path | str) -> tuple[list[EvalQuestion], JsonlReport]:
    """The user's labelled questions (format in the module docstring); bad lines are reported.

    Only an unreadable file raises (OSError); every malformed line becomes a
    ``"<file>:<line>: <message>"`` entry in ``report.errors`` and is skipped.
    """
    report = JsonlReport(path=str(path))
    questions: list[EvalQuestion] = []
    seen: dict[str, int] = {}
    per_type: Counter[str] = Counter()
    with open(path, encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            report.lines += 1
            try:
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise _LineError(f"not valid JSON ({exc.msg} at column {exc.colno})") from exc
                q = _jsonl_question(obj)
                if q.question_id in seen:
                    raise _LineError(
                        f"duplicate id {q.question_id!r} (first on line {seen[q.question_id]})"
                    )
            except _LineError as exc:
                report.errors.append(f"{path}:{lineno}: {exc}")
                continue
            seen[q.question_id] = lineno
            questions.append(q)
            per_type[q.qtype] += 1
            if not q.scored:
                report.empty_gold.append(q.question_id)
    report.loaded = len(questions)
    report.per_type = dict(sorted(per_type.items()))
    return questions, report


# ----------------------------------------------------------------------------- time queries

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
