"""The SPLADE channel's scores pinned on a fixed English corpus, so any change to how the
encoder computes (query side or document side) shows: every query's best turns and their
scores must stay as recorded in ``snapshots/splade_pins.json``.

The corpus is the bundled sample's messages (``sender: text``, as the turn index embeds
them) and the LoCoMo test fixture's turns; the queries are the sample's evaluation questions
and the fixture's. After an intended change of the model, rewrite the pins with::

    UPDATE_SNAPSHOTS=1 python -m pytest memory_pipeline_tests/core/indexes/test_splade_pins.py
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from memory_pipeline.core.indexes import splade as SP
from memory_pipeline_tests.paths import ROOT

SNAPSHOT = ROOT / "memory_pipeline_tests" / "snapshots" / "splade_pins.json"
TOP = 8
TOL = 1e-4  # relative: float32 sums in another order differ by ~1e-6

pytestmark = pytest.mark.skipif(not SP.available(), reason="SPLADE weights not packaged")


def _corpus() -> tuple[list[str], list[str]]:
    texts: list[str] = []
    for path in sorted((ROOT / "data" / "sample" / "line_json").glob("*/*.json")):
        messages = json.loads(path.read_text(encoding="utf-8"))["messages"]
        texts += [f"{m['sender']}: {m['text']}" for m in messages if m.get("text")]
    queries = [
        json.loads(line)["question"]
        for line in (ROOT / "data" / "sample" / "eval_questions.jsonl").read_text().splitlines()
        if line.strip()
    ]
    fixture = ROOT / "memory_pipeline_tests" / "fixtures" / "locomo" / "locomo_mini.json"
    for conv in json.loads(fixture.read_text(encoding="utf-8")):
        for key, turns in conv["conversation"].items():
            if key.startswith("session_") and isinstance(turns, list):
                texts += [f"{t['speaker']}: {t.get('text', '')}" for t in turns]
        queries += [q["question"] for q in conv.get("qa", [])]
    queries += ["What instrument does she play?", "pottery class", "when is the trip"]
    return texts, queries


def _pins(encoder: SP.Splade) -> dict:
    texts, queries = _corpus()
    docs = encoder.encode(texts)
    out = {}
    for q in queries:
        scores = SP.turn_scores(docs, encoder.encode([q]))
        best = np.argsort(-scores, kind="stable")[:TOP]
        out[q] = [[int(i), round(float(scores[i]), 5)] for i in best if scores[i] > 0]
    return {"texts": len(texts), "pins": out}


def _render(pins: dict) -> str:
    """One line per query: a change reads as a one-line diff."""
    rows = ",\n".join(
        f"  {json.dumps(q, ensure_ascii=False)}: {json.dumps(v)}" for q, v in pins["pins"].items()
    )
    return f'{{\n "texts": {pins["texts"]},\n "pins": {{\n{rows}\n }}\n}}\n'


def _same_ranking(got: list, want: list) -> bool:
    """Equal ids in order, except among documents whose scores tie within tolerance: a tie
    may come out in either order, and one at the last pinned place may bring in a document
    the snapshot cut off (its partner just below the cut; float32 sums summed in another
    order, e.g. on another CPU or another split of the encode over threads)."""
    if len(got) != len(want):
        return False
    for k, ((gi, gs), (wi, ws)) in enumerate(zip(got, want, strict=True)):
        tol = TOL * max(1.0, abs(ws))
        if abs(gs - ws) > tol:
            return False
        if gi == wi:
            continue
        tied = [wj for wj, wsj in want if abs(wsj - ws) <= tol]
        at_cut = abs(want[-1][1] - ws) <= tol
        if gi not in tied and not (at_cut and gi not in {w for w, _ in want[:k]}):
            return False
    return True


def test_splade_scores_and_rankings_are_pinned():
    current = _pins(SP.packaged())
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.write_text(_render(current), encoding="utf-8")
    want = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    assert current["texts"] == want["texts"]
    assert set(current["pins"]) == set(want["pins"])
    changed = [q for q, w in want["pins"].items() if not _same_ranking(current["pins"][q], w)]
    assert not changed, f"SPLADE rankings changed for {len(changed)} queries: {changed[:3]}"


def test_the_query_scorer_equals_the_full_vocabulary_product():
    """A version's QueryScorer (the query's logits over the columns its turns use, the
    turns read by column) scores every turn as ``D q`` with the full 30,522-term query
    vector; a query none of whose terms a turn has scores all zeros."""
    encoder = SP.packaged()
    texts, queries = _corpus()
    docs = encoder.encode(texts)
    scorer = SP.QueryScorer(encoder, docs)
    assert scorer.columns.size < docs.shape[1] // 4
    for q in queries:
        full = SP.turn_scores(docs, encoder.encode([q]))
        np.testing.assert_allclose(scorer.scores(q), full, rtol=1e-5, atol=1e-5)
    few = SP.QueryScorer(encoder, docs[:1])
    assert few.scores("zzzz qqqq").shape == (1,)
