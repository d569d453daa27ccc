"""Answerability: search says when the memory holds no answer (confidence, answerable, the
CLI's exit 1, context's explicit empty pack), from the model recorded in selection.json."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np
import pytest

import memory_pipeline
from memory_pipeline import cli
from memory_pipeline.core.retrieval import answerability as A
from memory_pipeline.core.retrieval import searcher as searcher_module
from memory_pipeline.core.retrieval.config import SELECTION
from memory_pipeline_tests.paths import ROOT
from memory_pipeline_tests.pipeline_helpers import Runner, build_all

DAYS = [dt.date(2024, 3, 1) + dt.timedelta(days=i) for i in range(14)]
NONSENSE = "quantum chromodynamics of zebra saxophones"
IN_CORPUS = "what did Maria say about the dog shelter?"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Runner:
    out = tmp_path_factory.mktemp("answerability") / "out"
    runner = Runner(ROOT / "memory_pipeline.toml", out)
    build_all(runner, DAYS)
    return runner


def test_model_comes_from_the_recorded_selection():
    record = SELECTION["answerability"]
    model = searcher_module.ANSWER_MODELS["en"]
    assert model is not None
    assert model.features == tuple(record["features"])
    assert np.allclose(model.weights, record["weights"])
    assert model.threshold == pytest.approx(record["threshold"])
    assert 0.0 < model.threshold < 1.0
    prov = record["provenance"]
    assert prov["data"]["file"] == "locomo_dev.json" and prov["data"]["sha256"]
    assert set(prov["figures"]) == {"auroc", "own_answerable", "foreign_unanswerable"}


def test_confidence_is_a_probability_and_missing_features_are_neutral():
    model = A.AnswerModel.from_dict(SELECTION["answerability"])
    rng = np.random.default_rng(0)
    for _ in range(200):  # extreme and odd inputs too
        feats = {f: float(rng.normal(0, 50)) for f in model.features}
        c = model.confidence(feats)
        assert 0.0 <= c <= 1.0
    at_mean = dict(zip(model.features, model.mean.tolist(), strict=True))
    assert model.confidence({}) == pytest.approx(model.confidence(at_mean))
    assert model.confidence({"dense_top": None}) == pytest.approx(model.confidence({}))


def test_a_changed_record_changes_the_model():
    record = json.loads(json.dumps(SELECTION["answerability"]))
    record["weights"] = [0.0] * len(record["weights"])
    record["bias"] = 0.0
    assert A.AnswerModel.from_dict(record).confidence({"cov_turn": 1.0}) == 0.5
    record["features"] = ["no_such_signal"]
    with pytest.raises(ValueError, match="no_such_signal"):
        A.AnswerModel.from_dict(record)


def test_auroc_by_hand():
    assert A.auroc([0.9, 0.8, 0.1], [1, 1, 0]) == 1.0
    assert A.auroc([0.1, 0.9], [1, 0]) == 0.0
    assert A.auroc([0.5, 0.5], [1, 0]) == 0.5


def test_nonsense_is_unanswerable_and_a_real_question_answerable(built: Runner):
    out = built.store.root
    bad = memory_pipeline.search(NONSENSE, k=3, output_dir=out)
    good = memory_pipeline.search(IN_CORPUS, k=3, output_dir=out)
    assert isinstance(bad, memory_pipeline.SearchResult)  # the public type
    assert bad.chunks, "hits still come back: the flag, not an empty list, says no"
    assert not bad.answerable and good.answerable
    assert 0.0 <= bad.confidence < good.confidence <= 1.0
    # the display score of the top hit is ~1 either way; the raw scores are kept beside it
    top = good.chunks[0]
    assert top.raw_bm25 is not None and top.raw_bm25 > 1.0
    assert top.raw_dense is not None and -1.0 <= top.raw_dense <= 1.0
    assert good.to_dict()["answerable"] is True and "confidence" in bad.to_dict()


def _cli_config(built: Runner, tmp_path) -> Path:
    config = tmp_path / "memory_pipeline.toml"
    text = (ROOT / "memory_pipeline.toml").read_text(encoding="utf-8")
    text = text.replace('output_dir = "data/output"', f'output_dir = "{built.store.root}"')
    text = text.replace('path = "data/sample/', f'path = "{ROOT}/data/sample/')
    text = text.replace('questions = "data/sample/', f'questions = "{ROOT}/data/sample/')
    config.write_text(text, encoding="utf-8")
    return config


def test_cli_exits_1_with_one_line_when_unanswerable(built: Runner, capsys, tmp_path):
    config = _cli_config(built, tmp_path)
    assert cli.main(["--config", str(config), "search", NONSENSE, "--k", "2"]) == 1
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("no relevant memory")
    assert cli.main(["--config", str(config), "search", NONSENSE, "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["answerable"] is False
    assert cli.main(["--config", str(config), "search", IN_CORPUS, "--k", "2"]) == 0
    assert "no relevant memory" not in capsys.readouterr().out


def test_context_is_an_explicit_empty_pack(built: Runner):
    out = built.store.root
    pack = memory_pipeline.context(NONSENSE, 4000, output_dir=out)
    assert pack.pieces == [] and pack.memories == [] and pack.render() == ""
    assert pack.notes and pack.notes[0].startswith("no relevant memory")
    full = memory_pipeline.context(IN_CORPUS, 4000, output_dir=out)
    assert full.pieces and not any(n.startswith("no relevant memory") for n in full.notes)


# -- language-aware defaults ----------------------------------------------------------------


def test_the_default_per_language_is_the_recorded_selection():
    from memory_pipeline.core.retrieval.config import DEFAULTS, PRESETS, SearchConfig

    assert DEFAULTS["en"] == SearchConfig(**SELECTION["config"]) == PRESETS["default"]
    ja = SELECTION["languages"]["ja"]
    assert DEFAULTS["ja"] == SearchConfig(**{**SELECTION["config"], **ja["config"]})
    assert DEFAULTS["ja"].name == ja["name"] and DEFAULTS["ja"] != DEFAULTS["en"]
    prov = ja["provenance"]  # selected on both Japanese checks, JSQuAD and the chat check
    assert prov["jsquad"]["file"] == "valid-v1.3.json" and prov["jsquad"]["sha256"]
    assert prov["chat check"]["file"].endswith("rpc_chat_check/questions.jsonl")
    assert prov["chat check"]["sha256"] and prov["jsquad"]["turn R@5"][0] >= 0.95


def test_the_query_language_picks_the_default_and_a_changed_config_is_kept():
    from dataclasses import replace

    from memory_pipeline.core.retrieval.config import DEFAULTS, for_language, language_of

    assert language_of("美咲の送別会の店") == "ja"
    assert language_of("Kyoto ryokan") == "en"
    assert language_of("LINE Payで送った") == "ja"
    assert language_of("2024 🎉", "ja") == "ja" and language_of("2024 🎉", "en") == "en"
    default = DEFAULTS["en"]
    assert for_language(default, "ja") == DEFAULTS["ja"]
    assert for_language(replace(default, highlights=0), "ja") == replace(
        DEFAULTS["ja"], highlights=0
    )
    mine = replace(default, mode="bm25")
    assert for_language(mine, "ja") is mine and for_language(default, "en") is default


def test_a_search_reports_whose_default_ranked_it(built: Runner):
    from memory_pipeline.core.retrieval.config import DEFAULTS

    out = built.store.root
    ja = memory_pipeline.search("美咲の送別会の店", k=3, output_dir=out)
    en = memory_pipeline.search(IN_CORPUS, k=3, output_dir=out)
    assert (ja.language, ja.config) == ("ja", DEFAULTS["ja"].name)
    assert (en.language, en.config) == ("en", DEFAULTS["en"].name)
    forced = memory_pipeline.search("美咲の送別会の店", k=3, output_dir=out, mode="bm25")
    assert forced.config == replace_name(DEFAULTS["en"], "bm25")


def replace_name(config, mode: str) -> str:
    from dataclasses import replace

    return replace(config, mode=mode).name


def test_japanese_time_words_that_keep_no_session_stay_content(built: Runner):
    """The sample runs in March 2024: a Japanese question dated 2019 is ranked as content
    by the Japanese default (the words may date the event), with the note saying so; the
    English default keeps its empty answer (test_search covers it) and so does a caller's
    configuration without the fallback."""
    from dataclasses import replace

    from memory_pipeline.core.retrieval.config import DEFAULTS

    out = built.store.root
    q = "2019年5月に話した送別会"
    ja = memory_pipeline.search(q, k=3, output_dir=out)
    assert ja.language == "ja" and ja.kind == "content_only" and ja.chunks
    assert any(
        n.startswith("time filter matched no session: searched without it") for n in ja.notes
    )
    strict = memory_pipeline.search(
        q, k=3, output_dir=out, search_config=replace(DEFAULTS["ja"], time_fallback=False)
    )
    assert strict.chunks == [] and not strict.answerable
