"""JSQuAD paragraph retrieval: loading, scoring, the article bootstrap, and a real slice."""

from __future__ import annotations

import json

import numpy as np
import pytest

from memory_pipeline import cli
from memory_pipeline.core.evaluation import jsquad as J
from memory_pipeline.core.represent.providers.factory import make_embedder

JSQUAD = "jsquad/valid-v1.3.json"


def _write(tmp_path, data) -> object:
    path = tmp_path / "j.json"
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def test_load_keeps_title_and_drops_impossible_questions(tmp_path):
    path = _write(
        tmp_path,
        {
            "data": [
                {
                    "title": "梅雨",
                    "paragraphs": [
                        {
                            "context": "梅雨 [SEP] 梅雨は雨の多い期間。",
                            "qas": [
                                {"id": "q1", "question": "梅雨とは", "is_impossible": False},
                                {"id": "q2", "question": "無理", "is_impossible": True},
                            ],
                        }
                    ],
                }
            ]
        },
    )
    paragraphs, questions = J.load_jsquad(path)
    assert [p.text for p in paragraphs] == ["梅雨\n梅雨は雨の多い期間。"]
    assert [(q.question_id, q.gold) for q in questions] == [("q1", paragraphs[0].paragraph_id)]


def test_bad_file_is_a_one_line_error_naming_it(tmp_path):
    path = _write(tmp_path, {"data": [{"title": "x"}]})
    with pytest.raises(J.JsquadFormatError) as err:
        J.load_jsquad(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_scores_and_article_bootstrap():
    qs = [J.Question(f"q{i}", "A" if i < 2 else "B", "?", f"p{i}") for i in range(4)]
    ranked = [[("p0", 1.0)], [("x", 1.0), ("p1", 0.5)], [("x", 1.0)], [("p3", 1.0)]]
    s = J.scores_for(ranked, qs)
    assert s["R@1"].tolist() == [1.0, 0.0, 0.0, 1.0]
    assert s["R@5"].tolist() == [1.0, 1.0, 0.0, 1.0]
    assert s["MRR"].tolist() == [1.0, 0.5, 0.0, 1.0]
    mean, lo, hi = J.article_bootstrap(s["R@5"], [q.article for q in qs], resamples=500)
    assert mean == 0.75 and lo <= mean <= hi
    # resampling whole articles: article A (1.0) and B (0.5) are the only two outcomes
    assert lo == pytest.approx(0.5) and hi == pytest.approx(1.0)


def test_real_slice_dense_e5_finds_japanese_paragraphs(shared_file):
    paragraphs, questions = J.load_jsquad(shared_file(JSQUAD), max_articles=2)
    e5 = make_embedder("local", "multilingual-e5-small")
    rows = {r["retriever"]: r for r in J.run_jsquad(paragraphs, questions, {"e5": e5})}
    assert set(rows) == {"bm25", "dense[e5]", "rrf60[bm25+e5]", "linear0.9[bm25+e5]"}
    chance = 5 / len(paragraphs)
    for r in rows.values():
        for m in ("R@1", "R@5", "MRR"):
            lo, hi = r[f"{m}_ci"]
            assert 0.0 <= lo <= r[m] <= hi <= 1.0
        assert r["R@1"] <= r["R@5"] <= r["R@10"]
    # far better than chance: a multilingual model does retrieve Japanese paragraphs
    assert rows["dense[e5]"]["R@5"] > 5 * chance
    assert rows["bm25"]["tokenizer"] != "regex"


def test_cli_eval_jsquad_writes_tables(shared_file, tmp_path, capsys):
    out = tmp_path / "out"
    code = cli.main(
        [
            "eval",
            "--jsquad",
            str(shared_file(JSQUAD)),
            "--models",
            "multilingual-e5-small",
            "--max-articles",
            "1",
            "--resamples",
            "200",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    rows = json.loads((out / "jsquad.json").read_text(encoding="utf-8"))
    assert [r["retriever"] for r in rows][:2] == ["bm25", "dense[multilingual-e5-small]"]
    assert np.isfinite([r["MRR"] for r in rows]).all()
    assert "| dense[multilingual-e5-small] |" in capsys.readouterr().out
