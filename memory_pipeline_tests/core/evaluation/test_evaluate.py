"""The evaluation runner end to end on a small real LoCoMo slice, and on the sample's own
templated time queries."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow.compute as pc
import pytest

from memory_pipeline.core.evaluation.evalsets import generate_time_queries
from memory_pipeline.core.evaluation.evaluate import run_evaluation, sweep_columns, sweep_configs
from memory_pipeline.core.retrieval.searcher import Searcher
from memory_pipeline.eval_runner import evaluate_locomo
from memory_pipeline_tests.paths import ROOT
from memory_pipeline_tests.pipeline_helpers import Runner, build_all


def test_sweep_has_the_line_paper_grid():
    configs = sweep_configs()
    chunk = [c for c in configs if c.turns == "highlights"]
    linear = [c for c in chunk if c.family == "linear"]
    assert len(linear) == 9 * 21  # every pairing of 3 bm25 x 3 dense representations, 21 betas
    assert {c.rrf_k for c in configs if c.family == "rrf"} == {10, 30, 60, 100}
    assert len({c.name for c in configs}) == len(configs)
    assert sweep_configs(turns=False) == chunk


def test_sweep_crosses_turn_weights_with_a_few_chunk_rankings():
    from memory_pipeline.core.evaluation import evaluate as E

    turns = [c for c in sweep_configs() if c.turns == "index"]
    bases = {c.chunk_name for c in turns}
    # BM25[raw_text] alone and linear raw_text+<the turn dense reps> at the turn betas
    assert len(bases) == 1 + len(E.TURN_DENSE_REPS) * len(E.TURN_BETAS)
    grid = len(E.TURN_SELF) * len(E.TURN_CTX) * len(E.TURN_CHUNK) * len(E.LIFTS)
    assert len(turns) == len(bases) * grid + 1
    assert E.sweep_columns(turns[0])["family"] == "turns"  # kept out of the beta curves
    alone = E.turn_alone(turns)
    assert alone is not None and alone.startswith("bm25[raw_text] turns=1.00/0.00/0.00")


def test_sweep_table_columns_name_only_what_a_family_ranks_by():
    """The sweep table lists, per configuration, the parameters its family uses (None for
    the others), as it did when sweep points were not SearchConfigs."""
    by_name = {c.name: c for c in sweep_configs()}
    assert sweep_columns(by_name["bm25[summary]"]) == {
        "family": "bm25",
        "bm25_rep": "summary",
        "dense_rep": None,
        "beta": None,
        "rrf_k": None,
    }
    assert sweep_columns(by_name["dense[raw_text]"])["bm25_rep"] is None
    linear = sweep_columns(by_name["linear[raw_text+summary] beta=0.75"])
    assert (linear["family"], linear["beta"], linear["rrf_k"]) == ("linear", 0.75, None)
    rrf_row = sweep_columns(by_name["rrf[summary+embedding_text] k=30"])
    assert (rrf_row["dense_rep"], rrf_row["beta"], rrf_row["rrf_k"]) == ("embedding_text", None, 30)


@pytest.fixture(scope="module")
def locomo_slice(shared_file, tmp_path_factory) -> Path:
    """Two real LoCoMo conversations cut to their first 6 sessions (and their questions)."""
    samples = json.loads(shared_file("locomo/locomo_dev.json").read_text(encoding="utf-8"))[:2]
    for s in samples:
        conv = s["conversation"]
        for key in [k for k in conv if k.startswith("session_")]:
            n = int(key.split("_")[1])
            if n > 6:
                del conv[key]
        kept = {f"D{n}:" for n in range(1, 7)}
        s["qa"] = [
            q
            for q in s["qa"]
            if q.get("evidence") and all(any(e.startswith(p) for p in kept) for e in q["evidence"])
        ]
    path = tmp_path_factory.mktemp("locomo") / "locomo_slice.json"
    path.write_text(json.dumps(samples), encoding="utf-8")
    return path


def test_locomo_slice_end_to_end(locomo_slice: Path, tmp_path: Path):
    meta = evaluate_locomo(locomo_slice, tmp_path / "eval", resamples=200, log=lambda _: None)
    tables = tmp_path / "eval" / "tables"
    assert (tables / "summary.parquet").is_file() and (
        tmp_path / "eval" / "evaluation.duckdb"
    ).is_file()
    assert meta["configurations"] == len(sweep_configs())
    assert set(meta["splits"]) == {"dev", "test"}
    assert not set(meta["splits"]["dev"]) & set(meta["splits"]["test"])
    import pyarrow.parquet as pq

    summary = pq.read_table(tables / "summary.parquet")
    sel = summary.filter(
        pc.and_(
            pc.equal(summary.column("config"), meta["selected_config"]),
            pc.equal(summary.column("metric"), "evidence_recall"),
        )
    )
    assert sel.num_rows > 0
    for row in sel.to_pylist():
        if row["n"]:
            assert 0.0 <= row["ci_lo"] <= row["mean"] <= row["ci_hi"] <= 1.0
    # recall can only grow with K
    rows = {
        (r["level"], r["k"]): r["mean"]
        for r in sel.to_pylist()
        if r["split"] == "all" and r["qtype"] == "all"
    }
    for level in ("turn", "session"):
        values = [rows[(level, k)] for k in (1, 3, 5, 10, 20)]
        assert values == sorted(values)
    if "report_html" in meta:
        assert Path(meta["report_html"]).read_text(encoding="utf-8").startswith("<!")


def test_time_queries_on_the_sample(tmp_path: Path):
    runner = Runner(ROOT / "memory_pipeline.toml", tmp_path / "out")
    build_all(runner, [dt.date(2024, 3, 1) + dt.timedelta(days=i) for i in range(14)])
    searcher = Searcher(tmp_path / "out")
    questions = generate_time_queries(runner.store.read("sessions"), per_template=5)
    assert questions
    run = run_evaluation(searcher, [], dense_reps=[], time_questions=questions, resamples=200)
    [overall] = [
        r
        for r in run.tables["summary"].to_pylist()
        if r["config"] == "time_filters" and r["qtype"] == "all"
    ]
    assert overall["n"] == len(questions)
    assert overall["mean"] >= 0.9  # the parser, the filters and the templates agree
