"""The evaluation report from synthetic eval tables: both files, every section, embedded plots,
the papers' figures kept apart from ours, PASS/MISS on the test split, escaping, absent data."""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from html import escape as html_escape
from pathlib import Path

import pyarrow as pa
import pytest

from memory_pipeline.core.evaluation.report import DEFAULT_COMMAND, write_report

KS = (1, 3, 5, 10, 20)
QTYPES = ("multi-hop", "temporal", "open-domain", "single-hop")
LEVELS = ("turn", "session", "chunk")
REPS = ("raw_text", "summary", "embedding_text")
SELECTED = "linear:raw_text+embedding_text:b0.35"
BM25 = "bm25:raw_text"
DENSE = "dense:embedding_text"
SCRIPT_Q = '<script>alert("x")</script> & when did Caroline go to the LGBTQ group?'
PAPER_LABEL = "DRAGON on dialog turns (Maharana et al. 2024)"  # no "paper" in the label itself

GOALS = [
    # test mean 0.740 >= 0.70 -> PASS (dev/all are 0.66: a dev-based verdict would say MISS)
    {"label": "G1 session R@5", "level": "session", "metric": "evidence_recall", "k": 5,
     "qtype": "all", "target": 0.70},
    # test mean 0.550 < 0.60 -> MISS (dev/all are 0.65: a dev-based verdict would say PASS)
    {"label": "G2 multi-hop session R@5", "level": "session", "metric": "evidence_recall",
     "k": 5, "qtype": "multi-hop", "target": 0.60},
    # no such row in the summary -> NO DATA
    {"label": "G3 chunk ndcg@3", "level": "chunk", "metric": "ndcg", "k": 3, "qtype": "all",
     "target": 0.5},
]  # fmt: skip

SUMMARY_SCHEMA = pa.schema(
    [
        ("config", pa.string()),
        ("split", pa.string()),
        ("qtype", pa.string()),
        ("level", pa.string()),
        ("metric", pa.string()),
        ("k", pa.int32()),
        ("mean", pa.float64()),
        ("ci_lo", pa.float64()),
        ("ci_hi", pa.float64()),
        ("n", pa.int64()),
    ]
)
SWEEP_SCHEMA = pa.schema(
    [
        ("family", pa.string()),
        ("bm25_rep", pa.string()),
        ("dense_rep", pa.string()),
        ("beta", pa.float64()),
        ("rrf_k", pa.int32()),
        ("config", pa.string()),
        ("split", pa.string()),
        ("level", pa.string()),
        ("metric", pa.string()),
        ("k", pa.int32()),
        ("mean", pa.float64()),
        ("ci_lo", pa.float64()),
        ("ci_hi", pa.float64()),
    ]
)
DIFFS_SCHEMA = pa.schema(
    [
        ("config_a", pa.string()),
        ("config_b", pa.string()),
        ("level", pa.string()),
        ("metric", pa.string()),
        ("k", pa.int32()),
        ("split", pa.string()),
        ("mean_diff", pa.float64()),
        ("ci_lo", pa.float64()),
        ("ci_hi", pa.float64()),
    ]
)
FAILURES_SCHEMA = pa.schema(
    [
        ("config", pa.string()),
        ("question_id", pa.string()),
        ("corpus_id", pa.string()),
        ("qtype", pa.string()),
        ("question", pa.string()),
        ("level", pa.string()),
        ("found_at_5", pa.bool_()),
        ("found_at_10", pa.bool_()),
        ("found_at_20", pa.bool_()),
    ]
)
CEILING_SCHEMA = pa.schema(
    [
        ("level", pa.string()),
        ("qtype", pa.string()),
        ("pool", pa.int32()),
        ("oracle_recall", pa.float64()),
        ("n", pa.int64()),
    ]
)
QUESTIONS_SCHEMA = pa.schema(
    [
        ("corpus_id", pa.string()),
        ("qtype", pa.string()),
        ("questions", pa.int64()),
        ("excluded", pa.int64()),
        ("unresolved_ids", pa.int64()),
    ]
)


def _curve(base: float, k: int) -> float:
    """A plausible recall curve rising with K towards ~0.95."""
    return min(0.97, base + (0.95 - base) * (1 - 0.82 ** (k - 1)))


def _summary() -> pa.Table:
    rows = []
    bases = {SELECTED: 0.42, BM25: 0.33, DENSE: 0.36}
    level_shift = {"turn": -0.08, "session": 0.12, "chunk": 0.0}
    type_shift = {"all": 0.0, "multi-hop": -0.1, "temporal": -0.04, "open-domain": -0.12,
                  "single-hop": 0.06}  # fmt: skip
    for config, base in bases.items():
        for split, n_all in (("dev", 400), ("test", 420), ("all", 820)):
            for qtype, shift in type_shift.items():
                n = n_all if qtype == "all" else n_all // 4
                for level in LEVELS:
                    for k in KS:
                        mean = _curve(base + level_shift[level] + shift, k)
                        half = 1.96 * (mean * (1 - mean) / n) ** 0.5
                        rows.append(
                            (config, split, qtype, level, "evidence_recall", k, mean, n, half)
                        )
    # the goal rows: test and in-sample figures on opposite sides of the targets
    pinned = {
        ("test", "all"): 0.74,
        ("dev", "all"): 0.66,
        ("all", "all"): 0.66,
        ("test", "multi-hop"): 0.55,
        ("dev", "multi-hop"): 0.65,
        ("all", "multi-hop"): 0.65,
    }
    out = []
    for config, split, qtype, level, metric, k, mean, n, half in rows:
        if (config, level, k) == (SELECTED, "session", 5) and (split, qtype) in pinned:
            mean = pinned[(split, qtype)]
        out.append(
            {"config": config, "split": split, "qtype": qtype, "level": level, "metric": metric,
             "k": k, "mean": mean, "ci_lo": mean - half, "ci_hi": mean + half, "n": n}
        )  # fmt: skip
    out.append(
        {"config": SELECTED, "split": "test", "qtype": "all", "level": "session", "metric": "mrr",
         "k": 10, "mean": 0.51, "ci_lo": 0.47, "ci_hi": 0.55, "n": 420}
    )  # fmt: skip
    return pa.Table.from_pylist(out, schema=SUMMARY_SCHEMA)


def _sweep() -> pa.Table:
    rows = []

    def add(family, bm25_rep, dense_rep, beta, rrf_k, config, split, mean):
        rows.append(
            {"family": family, "bm25_rep": bm25_rep, "dense_rep": dense_rep, "beta": beta,
             "rrf_k": rrf_k, "config": config, "split": split, "level": "session",
             "metric": "evidence_recall", "k": 5, "mean": mean, "ci_lo": mean - 0.045,
             "ci_hi": mean + 0.045}
        )  # fmt: skip

    for split, shift in (("dev", 0.0), ("test", -0.02)):
        for i, rep in enumerate(REPS):
            add("bm25", rep, None, None, None, f"bm25:{rep}", split, 0.55 + 0.02 * i + shift)
            add("dense", None, rep, None, None, f"dense:{rep}", split, 0.57 + 0.01 * i + shift)
        for i, b_rep in enumerate(REPS):
            for j, d_rep in enumerate(REPS):
                for step in range(21):
                    beta = round(step * 0.05, 2)
                    peak = 0.64 + 0.01 * (i + j) + shift
                    mean = peak - 0.35 * (beta - 0.35) ** 2
                    config = f"linear:{b_rep}+{d_rep}:b{beta:.2f}"
                    add("linear", b_rep, d_rep, beta, None, config, split, mean)
                for rrf_k in (10, 30, 60, 100):
                    mean = 0.62 + 0.005 * (i + j) + 0.0001 * rrf_k + shift
                    add(
                        "rrf",
                        b_rep,
                        d_rep,
                        None,
                        rrf_k,
                        f"rrf:{b_rep}+{d_rep}:k{rrf_k}",
                        split,
                        mean,
                    )
    return pa.Table.from_pylist(rows, schema=SWEEP_SCHEMA)


def _diffs() -> pa.Table:
    rows = [
        (SELECTED, BM25, "session", "test", 0.08, 0.03, 0.13),  # CI above 0 -> A better
        (SELECTED, DENSE, "session", "test", 0.01, -0.02, 0.04),  # CI spans 0
        (BM25, DENSE, "turn", "dev", -0.05, -0.09, -0.01),  # CI below 0 -> B better
    ]
    return pa.Table.from_pylist(
        [
            {
                "config_a": a,
                "config_b": b,
                "level": lv,
                "metric": "evidence_recall",
                "k": 5,
                "split": split,
                "mean_diff": d,
                "ci_lo": lo,
                "ci_hi": hi,
            }
            for a, b, lv, split, d, lo, hi in rows
        ],  # fmt: skip
        schema=DIFFS_SCHEMA,
    )


def _failures() -> pa.Table:
    rows = [
        (SELECTED, "conv-30_q7", "multi-hop", SCRIPT_Q, "session", False, True, True),
        (SELECTED, "conv-30_q9", "multi-hop", "What did Mel paint?", "turn", False, False, True),
        (SELECTED, "conv-30_q12", "temporal", "When did Jon lose his job?", "turn", False, False,
         False),
        (SELECTED, "conv-30_q13", "temporal", "FOUND AT FIVE", "turn", True, True, True),
        (BM25, "conv-30_q14", "single-hop", "OTHER CONFIG ONLY", "turn", False, False, False),
    ]  # fmt: skip
    return pa.Table.from_pylist(
        [
            {
                "config": c,
                "question_id": q,
                "corpus_id": "conv-30",
                "qtype": t,
                "question": text,
                "level": lv,
                "found_at_5": f5,
                "found_at_10": f10,
                "found_at_20": f20,
            }
            for c, q, t, text, lv, f5, f10, f20 in rows
        ],  # fmt: skip
        schema=FAILURES_SCHEMA,
    )


def _ceiling() -> pa.Table:
    rows = [
        {"level": lv, "qtype": qt, "pool": 200, "oracle_recall": 0.9 + 0.01 * i, "n": 420}
        for lv in ("turn", "session")
        for i, qt in enumerate(("all", *QTYPES))
    ]
    return pa.Table.from_pylist(rows, schema=CEILING_SCHEMA)


def _questions() -> pa.Table:
    rows = [
        {"corpus_id": corpus, "qtype": qt, "questions": 50 + i, "excluded": i % 2,
         "unresolved_ids": i}
        for corpus in ("conv-26", "conv-30")
        for i, qt in enumerate(QTYPES)
    ]  # fmt: skip
    return pa.Table.from_pylist(rows, schema=QUESTIONS_SCHEMA)


def _tables() -> dict[str, pa.Table]:
    return {
        "summary": _summary(),
        "sweep": _sweep(),
        "diffs": _diffs(),
        "failures": _failures(),
        "ceiling": _ceiling(),
        "questions_report": _questions(),
    }


def _meta(**extra) -> dict:
    meta = {
        "title": "LoCoMo retrieval <b>memory</b> report",
        "dataset": "locomo10",
        "generated_at": "2026-03-01T12:00:00+00:00",
        "selected_config": SELECTED,
        "selection_metric": "session evidence_recall@5",
        "splits": {"dev": ["conv-26"], "test": ["conv-30"]},
        "bootstrap": {"resamples": 5000, "seed": 0},
        "paper_figures": [{"label": PAPER_LABEL, "level": "turn", "k": 5, "value": 0.567}],
        "goals": GOALS,
        "notes": ["Chunk level uses 512-token windows <with overlap>."],
    }
    return meta | extra


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    out = tmp_path_factory.mktemp("report")
    html_path, md_path = write_report(_tables(), _meta(), out)
    return out, html_path.read_text(encoding="utf-8"), md_path.read_text(encoding="utf-8")


def _row(html: str, needle: str) -> str:
    """The one <tr> of the HTML containing ``needle``."""
    rows = [r for r in re.findall(r"<tr>.*?</tr>", html, flags=re.S) if needle in r]
    assert len(rows) == 1, (needle, rows)
    return rows[0]


def test_both_files_and_pngs_written(report: tuple[Path, str, str]) -> None:
    out, html, md = report
    assert (out / "report.html").is_file() and (out / "report.md").is_file()
    for name in ("recall_vs_k.png", "fusion_sweep.png", "by_question_type.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"]({name})" in md  # linked from the Markdown
    assert html.count('src="data:image/png;base64,') == 3


def test_html_sections_in_order_and_self_contained(report: tuple[Path, str, str]) -> None:
    _, html, md = report
    ids = re.findall(r'<section id="([^"]+)">', html)
    assert ids == [
        "headline",
        "recall-vs-k",
        "fusion",
        "by-type",
        "differences",
        "ceiling",
        "failures",
        "questions",
        "granularity",
        "reproduce",
    ]
    assert "<script" not in html.lower()  # no JS at all
    assert not re.search(r'(?:src|href)="(?!data:image/png;base64,|#)', html)  # no network
    assert DEFAULT_COMMAND in html and DEFAULT_COMMAND in md
    assert "<figcaption>" in html
    for title in ("Headline", "Recall vs K", "Fusion weight sweep", "How to reproduce"):
        assert title in md


def test_goals_pass_miss_from_the_test_split(report: tuple[Path, str, str]) -> None:
    _, html, md = report
    g1, g2, g3 = _row(html, "G1 session R@5"), _row(html, "G2 multi-hop"), _row(html, "G3 chunk")
    assert '<td class="pass">PASS</td>' in g1 and "0.740" in g1 and "+0.040" in g1
    assert '<td class="miss">MISS</td>' in g2 and "0.550" in g2 and "-0.050" in g2
    assert "NO DATA" in g3
    # the headline shows the test figure with the in-sample dev/all ones beside it
    headline = _row(html, "<tr><td>session evidence recall@5, multi-hop questions</td>")
    assert "0.550" in headline and "0.650" in headline and "MISS" in headline
    assert "| G1 session R@5 |" in md and "| PASS |" in md and "| MISS |" in md


def test_paper_figures_labelled_as_the_papers(report: tuple[Path, str, str]) -> None:
    _, html, md = report
    assert "Paper&#x27;s reported figure (not our run)" in html
    # every mention of the paper's label sits in a cell marked as the paper's
    for m in re.finditer(re.escape(html_escape(PAPER_LABEL)), html):
        before = html[max(0, m.start() - 60) : m.start()]
        assert 'class="paper">' in before or "Paper: " in before, before
    assert "0.567" in _row(html, f"Paper: {html_escape(PAPER_LABEL)}")
    assert "Paper: DRAGON on dialog turns" in md


def test_question_text_escaped(report: tuple[Path, str, str]) -> None:
    _, html, md = report
    assert "<script>" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; when did Caroline" in html
    assert "<b>memory</b>" not in html and "&lt;b&gt;memory&lt;/b&gt;" in html
    assert "&lt;with overlap&gt;" in html  # notes are escaped too
    # entities, not backslashes: every Markdown dialect reads &lt; as text
    assert "<script>" not in md and "&lt;script&gt;alert" in md and "&amp;" not in md


def test_failures_grouped_filtered_and_recovery_counted(report: tuple[Path, str, str]) -> None:
    _, html, _ = report
    assert "FOUND AT FIVE" not in html  # found in the top 5: not a failure
    assert "OTHER CONFIG ONLY" not in html  # only the selected config is listed
    assert "<summary>multi-hop — 2 failing</summary>" in html
    assert "<summary>temporal — 1 failing</summary>" in html
    overview = _row(html, '<td>multi-hop</td><td class="num">2</td>')
    assert "1 (50%)" in overview and "2 (100%)" in overview  # back by 10: 1, by 20: 2


def test_differences_verdicts(report: tuple[Path, str, str]) -> None:
    _, html, _ = report
    assert "A better" in _row(html, "+0.080")
    assert "no clear difference" in _row(html, "+0.010")
    assert "B better" in _row(html, '-0.050</td><td class="num">[-0.090')


def test_empty_failures_and_missing_tables(tmp_path: Path) -> None:
    tables = {
        "summary": _summary(),
        "failures": FAILURES_SCHEMA.empty_table(),
        "diffs": pa.table({"config_a": ["x"]}),  # malformed: columns missing
    }
    html_path, md_path = write_report(tables, _meta(), tmp_path / "r")
    html = html_path.read_text(encoding="utf-8")
    assert "No failures were recorded: the failures table is empty." in html
    assert "The `sweep` table was not provided, so the fusion-weight curve is absent." in html
    assert "The `diffs` table lacks the column(s) config_b" in html
    assert "The `ceiling` table was not provided" in html
    assert "The `questions_report` table was not provided" in html
    assert html.count("data:image/png;base64,") == 2  # recall-vs-K and by-type still drawn
    assert not (tmp_path / "r" / "fusion_sweep.png").exists()
    assert "No failures were recorded" in md_path.read_text(encoding="utf-8")


def test_nothing_at_all(tmp_path: Path) -> None:
    html_path, md_path = write_report({}, {}, tmp_path)
    html = html_path.read_text(encoding="utf-8")
    assert "The `summary` table was not provided, so the headline numbers are absent." in html
    assert "data:image/png" not in html
    assert DEFAULT_COMMAND in md_path.read_text(encoding="utf-8")


def test_command_from_meta(tmp_path: Path) -> None:
    html_path, _ = write_report({}, _meta(command="memory-pipeline eval --split test"), tmp_path)
    assert "<pre><code>memory-pipeline eval --split test</code></pre>" in html_path.read_text(
        encoding="utf-8"
    )


def test_messy_values_and_meta(tmp_path: Path) -> None:
    """Null/NaN means and CIs, null representations and a meta without most keys still render."""
    summary = _summary().to_pylist()
    for i, r in enumerate(summary):
        r["ci_lo"] = None if i % 7 == 0 else r["ci_lo"]
        r["mean"] = float("nan") if i % 11 == 0 else None if i % 13 == 0 else r["mean"]
    sweep = [
        r
        for r in _sweep().to_pylist()
        if r["family"] == "rrf" and r["bm25_rep"] == "raw_text" and r["dense_rep"] != "summary"
    ]
    sweep[0] |= {"bm25_rep": None, "ci_hi": None}
    tables = {
        "summary": pa.Table.from_pylist(summary, schema=SUMMARY_SCHEMA),
        "sweep": pa.Table.from_pylist(sweep, schema=SWEEP_SCHEMA),
    }
    meta = {"selected_config": SELECTED, "selection_metric": "not a metric", "goals": [{}]}
    html_path, _ = write_report(tables, meta, tmp_path)
    html = html_path.read_text(encoding="utf-8")
    assert "fusion_sweep.png" not in html  # images are embedded, not linked, in the HTML
    assert html.count("data:image/png;base64,") == 3
    assert "NO DATA" in html  # the empty goal has nothing to be measured against


# -- the memory section, byte for byte ---------------------------------------------------------

GOLDEN = Path(__file__).resolve().parent / "golden"
MEMORY_BASELINE = f"chunks[{SELECTED}]"
MEMORY_BUDGETS = (1_000, 4_000, 24_000)


def _memory_tables(splits: Sequence[str] = ("dev", "test", "all")) -> dict[str, pa.Table]:
    """Memory tables shaped like memory_eval's: two memory retrievers, four pack strategies
    and the chunk baseline over three budgets, a null CI and a NaN mean among them."""
    rows = []

    def add(config, split, level, metric, k, mean, lo=None, hi=None, n=40):
        rows.append(
            {"config": config, "split": split, "qtype": "all", "level": level, "metric": metric,
             "k": k, "mean": mean, "ci_lo": lo, "ci_hi": hi, "n": n}
        )  # fmt: skip

    for s, split in enumerate(splits):
        for i, name in enumerate(("memory[fused]", "memory[bm25]")):
            add(name, split, "memory", "zero_hits", 0, 0.05 * (i + 1), 0.01, 0.1 + 0.01 * s)
            for level in ("session", "turn"):
                for k in (1, 5, 10):
                    mean = 0.2 + 0.05 * k / (i + 1) + 0.01 * s + (0.03 if level == "turn" else 0)
                    add(name, split, level, ER_METRIC, k, mean, mean - 0.04, mean + 0.04)
        for j, config in enumerate(
            [MEMORY_BASELINE, *(f"context[{x}]" for x in ("split", "none", "neighbors"))]
        ):
            for b, budget in enumerate(MEMORY_BUDGETS):
                mean = 0.1 + 0.2 * b + 0.03 * j + 0.01 * s
                hi = None if (j, b) == (2, 1) else mean + 0.05
                add(config, split, "context", ER_METRIC, budget, mean, mean - 0.05, hi)
                size = float("nan") if (j, b) == (3, 0) else budget * (0.6 + 0.05 * j)
                add(config, split, "context", "utf16", budget, size)
    diffs = []
    for a, b, level, k, d, lo, hi in [
        ("memory[fused]", SELECTED, "session", 5, 0.081, 0.021, 0.14),  # A better
        ("memory[bm25]", SELECTED, "turn", 10, -0.12, -0.2, -0.04),  # B better
        ("memory[bm25]", SELECTED, "session", 5, 0.01, -0.05, 0.07),  # CI spans 0
        ("context[split]", MEMORY_BASELINE, "context", 24_000, 0.2, None, 0.3),  # no CI
        ("context[none]", MEMORY_BASELINE, "context", 1_000, -0.01, -0.03, 0.01),
    ]:
        diffs.append(
            {"config_a": a, "config_b": b, "level": level, "metric": ER_METRIC, "k": k,
             "split": "test", "mean_diff": d, "ci_lo": lo, "ci_hi": hi}
        )  # fmt: skip
    return {
        "memory_summary": pa.Table.from_pylist(rows, schema=SUMMARY_SCHEMA),
        "memory_diffs": pa.Table.from_pylist(diffs, schema=DIFFS_SCHEMA),
    }


ER_METRIC = "evidence_recall"
MEMORY_CASES = {
    # name: () -> (tables, meta) of a whole report
    "full": lambda: (
        _tables() | _memory_tables(),
        _meta(memory_baseline=MEMORY_BASELINE, memory_seconds=12.5, memories=321),
    ),
    "dev_only_no_diffs": lambda: (
        _tables() | {"memory_summary": _memory_tables(("dev", "all"))["memory_summary"]},
        _meta(memory_baseline=MEMORY_BASELINE),
    ),
    "empty": lambda: (_tables() | {"memory_summary": SUMMARY_SCHEMA.empty_table()}, _meta()),
    # no chunk summary, no selected config and no baseline name: every row a memory row
    "memory_only": lambda: (_memory_tables(("test",)), {"memory_seconds": 3}),
}


def _memory_section_text(case: str, out: Path) -> tuple[str, str]:
    """(HTML, Markdown) of the memory section of a full report for ``case``; embedded PNGs
    are replaced by a placeholder (their bytes depend on the matplotlib build, not on the
    report) and tags put on their own lines so the golden files stay readable, diffable text
    (the page itself has no newline inside a section)."""
    tables, meta = MEMORY_CASES[case]()
    html_path, md_path = write_report(tables, meta, out)
    page = html_path.read_text(encoding="utf-8")
    section = re.search(r'<section id="memories">.*?</section>', page, flags=re.S)
    assert section is not None
    html = re.sub(
        r"data:image/png;base64,([A-Za-z0-9+/=]+)",
        "data:image/png;base64,…",
        section[0],
    ).replace("><", ">\n<")
    md = md_path.read_text(encoding="utf-8")
    start = md.index(". Memories and context packs\n")
    end = md.find("\n## ", start)
    md = md[md.rindex("\n## ", 0, start) + 1 : None if end < 0 else end + 1]
    return html + "\n", md


def write_memory_golden(out: Path) -> None:
    """Regenerate the golden files (only when the report is meant to change):
    ``python -c "from pathlib import Path; from memory_pipeline_tests.core.evaluation.test_report
    import write_memory_golden as w; w(Path('/tmp/golden_out'))"``."""
    GOLDEN.mkdir(exist_ok=True)
    for case in MEMORY_CASES:
        html, md = _memory_section_text(case, out / case)
        (GOLDEN / f"memory_section_{case}.html").write_text(html, encoding="utf-8")
        (GOLDEN / f"memory_section_{case}.md").write_text(md, encoding="utf-8")


@pytest.mark.parametrize("case", sorted(MEMORY_CASES))
def test_memory_section_matches_golden(tmp_path: Path, case: str) -> None:
    html, md = _memory_section_text(case, tmp_path)
    assert html == (GOLDEN / f"memory_section_{case}.html").read_text(encoding="utf-8")
    assert md == (GOLDEN / f"memory_section_{case}.md").read_text(encoding="utf-8")
    if case == "full":  # the PNG written beside the Markdown is the one embedded in the HTML
        png = (tmp_path / "memory_context_recall.png").read_bytes()
        page = next(tmp_path.glob("*.html")).read_text(encoding="utf-8")
        embedded = re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", page)
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        assert png in [base64.b64decode(e) for e in embedded]


def test_ambiguous_section_lists_conditions_with_cis(tmp_path: Path) -> None:
    from memory_pipeline.core.evaluation.ambiguous import AMBIGUOUS_SCHEMA, LIMITS

    rows = [
        {
            "kind": kind,
            "condition": cond,
            "level": "turn",
            "k": 5,
            "mean": mean,
            "ci_lo": mean - 0.05,
            "ci_hi": mean + 0.05,
            "n": 10,
            "resolved_exactly": 0.9,
        }
        for kind in ("all", "topic")
        for cond, mean in (
            ("original", 0.53),
            ("ambiguous", 0.3),
            ("resolved", 0.52),
            ("resolved-ambiguous", 0.22),
        )
    ]
    tables = {"ambiguous": pa.Table.from_pylist(rows, schema=AMBIGUOUS_SCHEMA)}
    meta = {"ambiguous": {"config": "cfg-x", "variants": 10, "limits": list(LIMITS)}}
    html = write_report(tables, meta, tmp_path)[0].read_text(encoding="utf-8")
    assert "Ambiguous follow-up questions" in html
    assert "ambiguous + recent (rules)" in html and "+0.220" in html and "cfg-x" in html
    assert LIMITS[0] in html
    # without the table (not a LoCoMo run) there is no section
    plain = write_report({}, {}, tmp_path / "plain")[0].read_text(encoding="utf-8")
    assert "Ambiguous follow-up questions" not in plain
    missing = write_report({"ambiguous": None}, {}, tmp_path / "none")[0]
    assert "so the ambiguous-question evaluation is absent" in missing.read_text(encoding="utf-8")


def test_granularity_section_compares_the_default_with_single_retrievers(tmp_path) -> None:
    """Per level and question type: the out-of-fold default beside each fixed retriever, and
    the published anchors on the "all questions" row."""
    import pyarrow as pa

    def cv(config: str, level: str, qtype: str, mean: float) -> dict:
        return {"config": config, "qtype": qtype, "level": level, "metric": "evidence_recall",
                "k": 5, "mean": mean, "ci_lo": mean - 0.05, "ci_hi": mean + 0.05, "n": 10}

    rows = [cv(c, lv, qt, m) for c, m in (("cv:selected", 0.66), ("bm25[raw_text]", 0.53))
            for lv in ("turn", "session") for qt in ("all", "multi-hop")]
    meta = {**_meta(), "cv": {"columns": {"default (CV)": "cv:selected",
                                          "BM25 chunks": "bm25[raw_text]",
                                          "never swept": "nothing"}},
            "paper_figures": [{"label": "DRAGON", "level": "turn", "k": 5, "value": 0.567}]}
    tables = {**_tables(), "cv": pa.Table.from_pylist(rows)}
    _, md_path = write_report(tables, meta, tmp_path)
    md = md_path.read_text(encoding="utf-8")
    section = md[md.index("Granularities"):]
    header = next(line for line in section.splitlines() if line.startswith("| Level"))
    assert "default (CV)" in header and "BM25 chunks" in header and "never swept" not in header
    turn_all = next(line for line in section.splitlines() if line.startswith("| turn | all"))
    assert "0.660" in turn_all and "0.530" in turn_all and "DRAGON 0.567" in turn_all
    assert "DRAGON" not in next(
        line for line in section.splitlines() if line.startswith("| session | all")
    )
