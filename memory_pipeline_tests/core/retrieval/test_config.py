"""SearchConfig: the default preset is the evaluation's recorded selection, presets and
overrides resolve, bad values fail when the config is made."""

from __future__ import annotations

import inspect
from dataclasses import FrozenInstanceError, replace

import pytest

from memory_pipeline import cli
from memory_pipeline.core.context.packs import PACK_SEARCH
from memory_pipeline.core.evaluation.evaluate import sweep_configs
from memory_pipeline.core.retrieval.config import (
    PRESETS,
    SELECTION,
    SearchConfig,
    load_selection,
    resolve,
)
from memory_pipeline.core.retrieval.searcher import Searcher


def test_default_preset_is_the_recorded_selection():
    """What search(), the CLI, context packs and Searcher use without options is the
    evaluation's selection recorded in selection.json, not a hand-set value."""
    d = SearchConfig.preset("default")
    assert d == SearchConfig(**load_selection()["config"]) == resolve() == resolve(None)
    assert d.name == SELECTION["name"]
    assert inspect.signature(Searcher.search).parameters["config"].default == d
    assert inspect.signature(Searcher.rank).parameters["config"].default == d
    assert PACK_SEARCH == replace(d, highlights=0)
    assert cli.build_parser().parse_args(["search", "q"]).preset == "default"
    assert cli._search_config(cli.build_parser().parse_args(["search", "q"])) == d


def test_the_selection_carries_its_provenance():
    prov = SELECTION["provenance"]
    assert prov["protocol"].startswith("leave-one-conversation-out")
    assert prov["data"]["conversations"] == len(prov["folds"]) >= 3
    assert len(prov["data"]["sha256"]) == 64
    assert prov["configurations_swept"] > 1
    figures = prov["figures"]["cv:selected"]
    assert {"turn evidence_recall@5 [all]", "session evidence_recall@5 [all]"} <= set(figures)
    for mean, lo, hi in figures.values():
        assert 0.0 <= lo <= mean <= hi <= 1.0


def test_rrf_preset_is_the_historical_default():
    """The values Searcher.search had as keyword defaults before the evaluation chose one."""
    d = SearchConfig.preset("rrf")
    assert d == SearchConfig()
    assert (d.mode, d.fusion, d.beta, d.rrf_k) == ("hybrid", "rrf", 0.5, 60)
    assert (d.bm25_rep, d.dense_rep) == ("raw_text", "embedding_text")
    assert (d.candidates, d.use_time, d.highlights) == (200, True, 3)
    assert d.hard_filter_confidence == 0.8


def test_presets_and_names():
    assert set(PRESETS) >= {"default", "rrf", "bm25", "dense", "linear"}
    assert SearchConfig.preset("bm25").mode == "bm25"
    assert SearchConfig.preset("linear").family == "linear"
    assert SearchConfig().name == "rrf[raw_text+embedding_text] k=60"
    assert SearchConfig.preset("bm25").name == "bm25[raw_text]"
    cfg = SearchConfig(fusion="linear", bm25_rep="raw_text", dense_rep="summary", beta=0.75)
    assert cfg.name == "linear[raw_text+summary] beta=0.75"
    with pytest.raises(ValueError, match="unknown search preset 'nope'"):
        SearchConfig.preset("nope")
    with pytest.raises(TypeError):
        PRESETS["mine"] = SearchConfig()  # the registry is read-only
    with pytest.raises(FrozenInstanceError):
        SearchConfig().mode = "bm25"  # a value: shared presets cannot be changed in place


def test_resolve_applies_overrides_and_keeps_none():
    assert resolve("bm25", bm25_rep="summary") == SearchConfig(mode="bm25", bm25_rep="summary")
    assert resolve(SearchConfig(beta=0.3), beta=None, mode=None) == SearchConfig(beta=0.3)
    assert resolve("linear", beta=0.9).beta == 0.9
    assert resolve(use_time=False).use_time is False  # False is a value, not "unset"
    with pytest.raises(TypeError, match="unknown search option"):
        resolve(frobnicate=1)
    with pytest.raises(TypeError):
        resolve(42)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "bad",
    [
        {"mode": "semantic"},
        {"fusion": "max"},
        {"beta": 1.5},
        {"rrf_k": 0},
        {"bm25_rep": "title"},
        {"dense_rep": "title"},
        {"candidates": 0},
        {"highlights": -1},
    ],
)
def test_bad_values_fail_when_made(bad):
    with pytest.raises(ValueError):
        SearchConfig(**bad)
    with pytest.raises(ValueError):
        replace(SearchConfig(), **bad)


def test_family_and_used_retrievers():
    assert (SearchConfig(mode="bm25").uses_bm25, SearchConfig(mode="bm25").uses_dense) == (
        True,
        False,
    )
    assert (SearchConfig(mode="dense").uses_bm25, SearchConfig(mode="dense").uses_dense) == (
        False,
        True,
    )
    assert SearchConfig().uses_bm25 and SearchConfig().uses_dense
    assert [SearchConfig(mode=m).family for m in ("bm25", "dense", "hybrid")] == [
        "bm25",
        "dense",
        "rrf",
    ]


def test_the_sweep_is_made_of_search_configs():
    """Every sweep point is a search the API can run, and its name is the one the
    evaluation tables have always used."""
    configs = sweep_configs()
    assert all(isinstance(c, SearchConfig) for c in configs)
    names = {c.name for c in configs}
    assert {
        "bm25[summary]",
        "dense[embedding_text]",
        "linear[raw_text+summary] beta=0.75",
        "rrf[summary+raw_text] k=10",
    } <= names
    assert SearchConfig().name in names  # the default search is one of the swept points
    base = SearchConfig(candidates=50, highlights=0)
    assert all(c.candidates == 50 and c.highlights == 0 for c in sweep_configs(base=base))
