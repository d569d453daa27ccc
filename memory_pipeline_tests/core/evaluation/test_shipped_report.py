"""The evaluation asset on the bundled sample reports what ships: the shipped default per
query language (scored through search()), goals and anchors, answerability, and no
selection on a handful of questions; the run's printed figure is the default's."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

import pyarrow.parquet as pq
import pytest

from memory_pipeline import cli
from memory_pipeline.core.evaluation.evaluate_shipped import SHIPPED, SMALL_CORPUS_NOTE
from memory_pipeline.core.retrieval.config import DEFAULTS
from memory_pipeline_tests.paths import ROOT
from memory_pipeline_tests.pipeline_helpers import Runner, build_all

DAYS = [dt.date(2024, 3, 1) + dt.timedelta(days=i) for i in range(14)]


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    out = tmp_path_factory.mktemp("shipped") / "out"
    runner = Runner(ROOT / "memory_pipeline.toml", out)
    build_all(runner, DAYS)
    result = runner.run(["evaluation"], [])
    report = (out / "eval" / "report.md").read_text(encoding="utf-8")
    summary = pq.read_table(out / "eval" / "tables" / "summary.parquet").to_pylist()
    return SimpleNamespace(runner=runner, result=result, report=report, summary=summary)


def _headline(report: str) -> str:
    return report.split("## 1. Headline", 1)[1].split("\n## 2.", 1)[0]


def test_headline_names_the_shipped_default_per_language(evaluated) -> None:
    headline = _headline(evaluated.report)
    for lang in ("en", "ja"):  # the sample's questions are in both languages
        name = DEFAULTS[lang].name.replace("_", r"\_").replace("[", r"\[").replace("]", r"\]")
        assert f"{lang}: {name}" in headline
    assert headline.index("Shipped default") < headline.index("| Measure |")


def test_printed_figure_is_the_default_row(evaluated) -> None:
    [row] = [
        r
        for r in evaluated.summary
        if (r["config"], r["split"], r["qtype"], r["level"], r["metric"], r["k"])
        == (SHIPPED, "all", "all", "session", "evidence_recall", 5)
    ]
    run = SimpleNamespace(stage=SimpleNamespace(name="evaluation"), result=evaluated.result)
    line = cli._evaluation_line([run], evaluated.runner.cfg)
    assert f"shipped default: session recall@5 {round(row['mean'], 4)})" in line
    assert "14 labelled questions" in line


def test_goals_and_anchors_filled_in(evaluated) -> None:
    report = evaluated.report
    assert "No goals were given" not in report and "No paper figures" not in report
    for target in ("≥ 0.750", "≥ 0.920", "≥ 0.800"):
        assert target in report
    assert "DRAGON" in report and "0.567" in report and "0.731" in report


def test_answerability_section(evaluated) -> None:
    section = evaluated.report.split("## 2. Answerability", 1)[1].split("\n## ", 1)[0]
    from memory_pipeline.core.retrieval.config import SELECTION

    # the recorded dev AUROC with its CI, as the calibration wrote it
    auroc, lo, hi = SELECTION["answerability"]["provenance"]["figures"]["auroc"]
    assert f"{auroc:.3f}" in section and rf"\[{lo:.3f}, {hi:.3f}\]" in section
    assert "Share called answerable" in section


def test_small_corpus_selects_nothing(evaluated) -> None:
    assert SMALL_CORPUS_NOTE in evaluated.report
    assert "chosen on the dev split" not in evaluated.report
    assert "`cv` table was not provided" not in evaluated.report
    assert not any(r["split"] == "dev" and r["n"] for r in evaluated.summary)
