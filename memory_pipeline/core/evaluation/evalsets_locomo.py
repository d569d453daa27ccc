"""LoCoMo QA as evaluation questions: evidence dia_ids resolved to message refs, every
question that cannot be used counted and listed in a :class:`LocomoReport`.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_pipeline.core.evaluation.evalsets_question import (
    LOCOMO_CATEGORIES,
    PRIMARY,
    EvalQuestion,
)
from memory_pipeline.core.ingest.sources.locomo import load_locomo_samples, parse_session_time

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
