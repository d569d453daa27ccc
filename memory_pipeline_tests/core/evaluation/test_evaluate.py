"""The evaluation runner end to end on a small real LoCoMo slice, and on the sample's own
templated time queries."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from memory_pipeline.core.evaluation.evalsets import generate_time_queries
from memory_pipeline.core.evaluation.evaluate import (
    QUERY_VARIANTS,
    Candidates,
    query_variants,
    run_evaluation,
    sweep_columns,
    sweep_configs,
)
from memory_pipeline.core.retrieval.config import SearchConfig
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
        "speaker_boost": 0.0,
        "strip_question": False,
        "prf_terms": 0,
    }
    assert sweep_columns(by_name["dense[raw_text]"])["bm25_rep"] is None
    linear = sweep_columns(by_name["linear[raw_text+summary] beta=0.75"])
    assert (linear["family"], linear["beta"], linear["rrf_k"]) == ("linear", 0.75, None)
    rrf_row = sweep_columns(by_name["rrf[summary+embedding_text] k=30"])
    assert (rrf_row["dense_rep"], rrf_row["beta"], rrf_row["rrf_k"]) == ("embedding_text", None, 30)


def test_query_variants_are_named_and_deduplicated():
    base = SearchConfig(mode="hybrid", fusion="linear", beta=0.9)
    names = [c.name for c in query_variants([base, base, SearchConfig(mode="dense")])]
    assert len(names) == len(set(names))
    assert "linear[raw_text+embedding_text] beta=0.90 +spk0.3 +prf10" in names
    assert "dense[embedding_text] +strip" in names
    assert not any(n.startswith("dense") and "prf" in n for n in names)


def test_candidates_rank_with_the_query_options():
    """Stripped candidates replace the plain ones, PRF lists the BM25 side, and the
    speaker boost lifts the chunks where the named speaker speaks."""
    plain = Candidates(bm25={"raw_text": [("a", 3.0), ("b", 2.0)]})
    plain.prf[("raw_text", 10)] = [("b", 5.0), ("a", 1.0)]
    plain.stripped = Candidates(bm25={"raw_text": [("c", 1.0)]})
    plain.names = ("Caroline",)
    plain.speakers_of = {"a": ["X"], "b": ["X"], "c": ["X"], "d": ["Caroline"]}.__getitem__
    bm25 = SearchConfig(mode="bm25")
    assert plain.ranking(bm25) == [("a", 3.0), ("b", 2.0)]
    assert [c for c, _ in plain.ranking(SearchConfig(mode="bm25", prf_terms=10))] == ["b", "a"]
    assert plain.ranking(SearchConfig(mode="bm25", strip_question=True)) == [("c", 1.0)]
    plain.bm25["raw_text"].insert(1, ("d", 2.9))
    boosted = plain.ranking(SearchConfig(mode="bm25", speaker_boost=0.5))
    assert boosted[0][0] == "d"


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
    from memory_pipeline.core.indexes import splade as SP
    from memory_pipeline.core.retrieval.config import PRESETS

    # an English corpus: the turn grid tries the packaged SPLADE weight beside 0
    weights = (0.0, PRESETS["default"].splade) if SP.available() else (0.0,)
    assert meta["configurations"] == len(sweep_configs(splade=weights)) + meta["query_variants"]
    assert meta["query_variants"] >= len(QUERY_VARIANTS)  # at least on the packaged default
    amb = pq.read_table(tables / "ambiguous.parquet").to_pylist()
    assert {r["condition"] for r in amb} == {
        "original",
        "ambiguous",
        "resolved",
        "resolved-ambiguous",
    }
    assert meta["ambiguous"]["variants"] > 0
    assert set(meta["splits"]) == {"dev", "test"}
    assert not set(meta["splits"]["dev"]) & set(meta["splits"]["test"])
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


class _StubSearcher:
    """Three one-chunk conversations; in each, B's six turns outrank A's, the gold is A's."""

    def __init__(self) -> None:
        self.chunk_ids = ["c1", "c2", "c3"]
        self._msgs = {c + "A": "A" for c in self.chunk_ids}
        self._msgs.update({f"{c}B{i}": "B" for c in self.chunk_ids for i in range(6)})

    def session_of_chunk(self, c: str) -> str:
        return "s" + c

    def source_refs(self) -> dict[str, str]:
        return {m: m for m in self._msgs}

    def messages_of_chunk(self, c: str) -> list[str]:
        return [c + "A", *(f"{c}B{i}" for i in range(6))]

    def ranked_turns(self, ranked, query):
        (c, _), *_ = ranked
        return [(f"{c}B{i}", 0.5) for i in range(6)] + [(c + "A", 0.3)]

    def message(self, m: str) -> dict:
        return {"sender": self._msgs[m]}


def test_speaker_boost_is_selected_on_the_turns_it_moves():
    from memory_pipeline.core.evaluation.evalsets import EvalQuestion
    from memory_pipeline.core.evaluation.evaluate import Units, cross_validate_speaker_boost

    s = _StubSearcher()
    qs, cands = [], {}
    for i, c in enumerate(s.chunk_ids):
        for j in range(2):
            qid = f"{c}:q{j}"
            qs.append(EvalQuestion(qid, f"conv{i}", "What did A do?", "t", {c + "A": 2}, "ref"))
            cands[qid] = Candidates(bm25={"raw_text": [(c, 1.0)]}, names=("A",))
    base = SearchConfig(mode="bm25")
    out = cross_validate_speaker_boost(base, qs, cands, Units(s), seed=0, resamples=50)
    # A's turn is 7th without the boost (turn R@5 = 0) and first with any boost > 0.2
    assert out["config"].speaker_boost > 0.2
    assert all("+spk" in name for name in out["folds"].values())
    assert set(out["folds"]) == {"conv0", "conv1", "conv2"}
    assert out["candidates"][0] == 0.0
    assert cross_validate_speaker_boost(base, qs[:2], cands, Units(s), 0, 50) is None
