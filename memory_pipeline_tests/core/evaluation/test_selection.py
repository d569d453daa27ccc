"""The selection record: proposed from an evaluation, diffed against the packaged one."""

from __future__ import annotations

import json
from pathlib import Path

from memory_pipeline.core.evaluation import selection as sel
from memory_pipeline.core.retrieval.config import SELECTION, SearchConfig


def _meta(name: str = "bm25[raw_text]") -> dict:
    cfg = SearchConfig(mode="bm25")
    return {
        "questions": 10,
        "configurations": 3,
        "cv": {
            "protocol": "leave-one-conversation-out: ...",
            "selection_metric": "session evidence_recall@5",
            "selected": name,
            "selected_config": {f: getattr(cfg, f) for f in sel.retrieval_config.FIELDS},
            "folds": {"a": name, "b": name, "c": name},
            "conversations": 3,
            "figures": {"cv:selected": {"session evidence_recall@5 [all]": [0.8, 0.7, 0.9]}},
        },
    }


def test_proposal_records_config_and_provenance(tmp_path: Path):
    data = tmp_path / "dev.json"
    data.write_text("{}", encoding="utf-8")
    rec = sel.propose(_meta(), data, "memory-pipeline eval --locomo dev.json")
    assert SearchConfig(**rec["config"]) == SearchConfig(mode="bm25")
    assert rec["provenance"]["data"]["sha256"] == sel.file_digest(data)
    assert rec["provenance"]["data"]["file"] == "dev.json"
    assert json.loads(sel.render(rec)) == rec
    assert sel.propose({"questions": 1}, data, "x") is None  # no cross-validation, no proposal


def test_diff_ignores_the_date_and_shows_a_changed_choice(tmp_path: Path):
    data = tmp_path / "dev.json"
    data.write_text("{}", encoding="utf-8")
    rec = sel.propose(_meta(), data, "cmd")
    later = json.loads(json.dumps(rec))
    later["provenance"]["date"] = "2099-01-01"
    assert sel.diff(rec, later) == ""
    other = sel.propose(_meta("dense[summary]"), data, "cmd")
    d = sel.diff(rec, other)
    assert d.startswith("--- packaged selection.json")
    assert '+  "name": "dense[summary]"' in d


def test_packaged_record_is_the_file_next_to_the_retrieval_config():
    path = sel.packaged_path()
    assert path.name == "selection.json"
    assert json.loads(path.read_text(encoding="utf-8")) == dict(SELECTION)


def test_accepting_a_locomo_selection_keeps_the_other_records():
    """A LoCoMo evaluation proposes the English configuration only: accepting it must not drop
    the answerability model or the other languages' defaults the packaged record holds."""
    from memory_pipeline.core.evaluation.selection import KEPT_FROM_CURRENT, carry_over
    from memory_pipeline.core.retrieval.config import SELECTION

    proposed = {"schema": 1, "name": "x", "config": {}, "provenance": {}}
    kept = carry_over(proposed, SELECTION)
    for key in KEPT_FROM_CURRENT:
        assert key in SELECTION, key  # the packaged record has them today
        assert kept[key] == SELECTION[key]
    assert kept["config"] == {} and "answerability" not in proposed
    mine = carry_over({**proposed, "languages": {"ja": {}}}, SELECTION)
    assert mine["languages"] == {"ja": {}}  # what the evaluation proposes wins


def test_accepting_a_selection_keeps_the_splade_provenance():
    """The SPLADE weight is chosen by its own cross-validation (the sweep only tries it on or
    off): a new selection's provenance keeps that record instead of dropping it."""
    from memory_pipeline.core.evaluation.selection import KEPT_PROVENANCE, carry_over
    from memory_pipeline.core.retrieval.config import SELECTION

    proposed = {"schema": 1, "name": "x", "config": {}, "provenance": {"protocol": "p"}}
    kept = carry_over(proposed, SELECTION)
    for key in KEPT_PROVENANCE:
        assert key in SELECTION["provenance"], key
        assert kept["provenance"][key] == SELECTION["provenance"][key]
    assert kept["provenance"]["protocol"] == "p"


def test_the_sweep_tries_splade_only_where_the_corpus_has_it():
    """On a corpus with SPLADE vectors the turn grid has the packaged weight beside 0; on
    one without (Japanese), only 0, so no twin configurations rank alike under two names."""
    from memory_pipeline.core.evaluation.evaluate import splade_weights
    from memory_pipeline.core.evaluation.evaluate_configs import sweep_configs
    from memory_pipeline.core.retrieval.config import PRESETS

    class With:
        splade_index = object()

    class Without:
        splade_index = None

    shipped = PRESETS["default"].splade
    assert shipped > 0
    assert splade_weights(With()) == (0.0, shipped)
    assert splade_weights(Without()) == (0.0,)
    on = sweep_configs(["raw_text"], ["embedding_text"], splade=splade_weights(With()))
    off = sweep_configs(["raw_text"], ["embedding_text"], splade=(0.0,))
    turned = [c for c in on if c.turns == "index" and c.turn_ctx > 0]
    assert {c.splade for c in turned} == {0.0, shipped}
    assert len(on) - len(off) == sum(1 for c in turned if c.splade)
    assert len({c.name for c in on}) == len(on)
