"""The user's own labelled questions (JSONL; the format is documented in ``evalsets``): a
malformed line is skipped and reported with its file and line, the rest still loads.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_pipeline.core.evaluation.evalsets_question import PRIMARY, SUPPORTING, EvalQuestion

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
