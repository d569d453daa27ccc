"""The goals the retrieval is held to and the published figures it is read beside.

Both evaluations show them: ``memory-pipeline eval`` on LoCoMo, where they were set, and the
``evaluation`` asset on the user's own questions, where they are a reference point rather
than a verdict on that data (a user's questions are not LoCoMo's). The anchors are the
papers' numbers, never ours: the report labels them so and never draws them as our series.
"""

from __future__ import annotations

GOALS: list[dict] = [
    {
        "label": "turn evidence R@5",
        "level": "turn",
        "metric": "evidence_recall",
        "k": 5,
        "qtype": "all",
        "target": 0.75,
    },
    {
        "label": "session evidence R@5",
        "level": "session",
        "metric": "evidence_recall",
        "k": 5,
        "qtype": "all",
        "target": 0.92,
    },
    {
        "label": "multi-hop session R@5",
        "level": "session",
        "metric": "evidence_recall",
        "k": 5,
        "qtype": "multi-hop",
        "target": 0.80,
    },
]

PAPER_FIGURES: list[dict] = [
    {"label": "LoCoMo paper, DRAGON, dialog turns", "level": "turn", "k": 5, "value": 0.567},
    {"label": "LoCoMo paper, DRAGON, dialog turns", "level": "turn", "k": 10, "value": 0.662},
    {
        "label": "LoCoMo paper, DRAGON, session summaries",
        "level": "session",
        "k": 5,
        "value": 0.721,
    },
    {
        "label": "best published BM25 + dense + cross-encoder pipeline on LoCoMo, dialog turns",
        "level": "turn",
        "k": 5,
        "value": 0.731,
    },
]
