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

The question type is in ``evalsets_question``, the loaders in ``evalsets_locomo``,
``evalsets_jsonl`` and ``evalsets_time``; this module re-exports the names other code uses.
"""

from __future__ import annotations

from memory_pipeline.core.evaluation.evalsets_jsonl import JsonlReport, load_jsonl_questions
from memory_pipeline.core.evaluation.evalsets_locomo import (
    ExcludedQuestion,
    LocomoReport,
    UnresolvedEvidence,
    load_locomo_questions,
)
from memory_pipeline.core.evaluation.evalsets_question import (
    GOLD_KINDS,
    LOCOMO_CATEGORIES,
    PRIMARY,
    SUPPORTING,
    EvalQuestion,
)
from memory_pipeline.core.evaluation.evalsets_time import TIME_TEMPLATES, generate_time_queries

__all__ = [
    "GOLD_KINDS",
    "LOCOMO_CATEGORIES",
    "PRIMARY",
    "SUPPORTING",
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
