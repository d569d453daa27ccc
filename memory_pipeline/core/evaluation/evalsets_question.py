"""One evaluation question with graded gold references: the type every question set yields.

Its own module so the loaders (LoCoMo, the user's JSONL, templated time queries) and the
code that scores questions share it without importing one another.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

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
