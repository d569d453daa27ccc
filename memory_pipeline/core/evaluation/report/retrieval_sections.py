"""Retrieval sections of the report: recall against k, the fusion sweep, question types,
granularity (turn/session/chunk), per-question differences and the ceiling.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from memory_pipeline.core.evaluation.report.headline import _comparison_series, _note
from memory_pipeline.core.evaluation.report.model import (
    _P,
    ALL,
    DEFAULT_SELECTION,
    ER,
    LEVEL_NAMES,
    LEVELS,
    _Cell,
    _ci,
    _Details,
    _f,
    _Img,
    _int,
    _level_key,
    _mean_ci,
    _measure,
    _num,
    _parse_selection,
    _plain,
    _Section,
    _signed,
    _split_key,
    _Summary,
    _Table,
)
from memory_pipeline.core.evaluation.report.plots import (
    _pairing,
    _plot_fusion,
    _plot_recall_vs_k,
    _plot_types,
)


def _recall_section(
    summ: _Summary | None,
    why: str | None,
    sweep_rows: Sequence[Mapping[str, Any]],
    meta: Mapping[str, Any],
    selected: str,
) -> _Section:
    sec = _Section("recall-vs-k", "Recall vs K")
    if summ is None:
        sec.blocks.append(_note(f"{why}, so the recall-vs-K curves are absent."))
        return sec
    selection = _parse_selection(meta.get("selection_metric"))
    series = _comparison_series(summ, sweep_rows, selected, selection)
    papers = [
        p
        for p in meta.get("paper_figures") or []
        if isinstance(p, Mapping) and p.get("metric", ER) == ER and p.get("qtype", ALL) == ALL
    ]
    png = _plot_recall_vs_k(summ, series, selected, papers)
    if png is None:
        sec.blocks.append(
            _note(
                'The summary has no test-split evidence_recall rows (qtype "all") for the '
                "selected or comparison configurations, so the curves are absent."
            )
        )
        return sec
    sec.blocks.append(
        _Img(
            "recall_vs_k.png",
            png,
            "Evidence recall against K per level for the selected config and the best single "
            "retrievers, test split, with 95% confidence bands",
            "How much of the gold evidence is in the top K, as K grows, on the held-out test "
            "split (mean over all questions, each weighing the same). Red, thick: the selected "
            "configuration; "
            "other lines: the best BM25 and dense retriever chosen on dev. Shaded bands: 95% "
            "bootstrap CI. Hollow black markers are figures published in the papers, plotted "
            "for orientation only — they are not our measurements.",
        )
    )
    ks = sorted(
        {key[5] for key in summ.index if key[1:3] == ("test", ALL) and key[4] == ER} - {None}
    )
    rows = []
    for level in LEVELS:
        for config, label in series:
            cells = [summ.get(config, "test", ALL, level, ER, k) for k in ks]
            if any(c is not None for c in cells):
                rows.append([label, level, *(_Cell(_mean_ci(c), "num") for c in cells)])
    if rows:
        headers = ["Configuration", "Level", *(f"K={int(k)}" for k in ks)]
        sec.blocks.append(_Details("Numbers behind the curves", [_Table(headers, rows)]))
    return sec


def _fusion_section(
    sweep_rows: Sequence[Mapping[str, Any]], why: str | None, meta: Mapping[str, Any], selected: str
) -> _Section:
    sec = _Section("fusion", "Fusion weight sweep")
    if why:
        sec.blocks.append(_note(f"{why}, so the fusion-weight curve is absent."))
        return sec
    selection = _parse_selection(meta.get("selection_metric"))
    available = {(r["level"], r["metric"], _num(r["k"])) for r in sweep_rows}
    if selection not in available:
        fallback = next(
            (s for s in (DEFAULT_SELECTION, *sorted(available, key=str)) if s in available), None
        )
        sec.blocks.append(
            _note(
                f"The sweep has no rows for {' '.join(map(str, selection[:2]))}@{selection[2]}; "
                f"showing {fallback[0]} {fallback[1]}@{int(fallback[2])} instead."
                if fallback
                else "The sweep has no usable rows."
            )
        )
        if fallback is None:
            return sec
        selection = (fallback[0], fallback[1], int(fallback[2]))
    png = _plot_fusion(sweep_rows, selection, selected)
    if png is None:
        sec.blocks.append(_note("The sweep has no linear-fusion or RRF rows to plot."))
        return sec
    level, metric, k = selection
    sec.blocks.append(
        _Img(
            "fusion_sweep.png",
            png,
            f"Linear fusion {level} {metric}@{k} against beta per representation pairing, dev "
            "and test splits, with RRF results as horizontal markers",
            f"How the fusion weight β changes {level} {metric}@{k}. One row of panels per "
            "BM25 representation, one line per dense representation (colour), shaded: 95% CI. "
            "Left: the dev split the choice was made on; right: the held-out test split — a peak "
            "that moves or flattens on test is a sign of over-tuning. At β = 0 and β = 1 one "
            "retriever gets all the weight. Dashed line and star: the selected configuration. "
            "Narrow panels: reciprocal-rank fusion at each constant k as horizontal markers on the "
            "same y scale (thin bars: 95% CI).",
        )
    )
    table = _fusion_table(sweep_rows, selection, selected)
    if table is not None:
        sec.blocks.append(_Details("Numbers behind the sweep (per pairing and split)", [table]))
    return sec


def _beta(row: Mapping[str, Any]) -> float | None:
    """β rounded so 0.30000000000000004 and 0.3 are the same sweep point."""
    b = _num(row.get("beta"))
    return None if b is None else round(b, 6)


def _fusion_table(
    rows: Sequence[Mapping[str, Any]], selection: tuple[str, str, int], selected: str
) -> _Table | None:
    """Per split and pairing: the ends of the β curve, its peak, the selected β and best RRF."""
    level, metric, k = selection
    rows = [
        r
        for r in rows
        if (r["level"], r["metric"], _num(r["k"])) == (level, metric, k)
        and _num(r.get("mean")) is not None
        and r["family"] in ("linear", "rrf")
    ]
    sel_beta = next(
        (_beta(r) for r in rows if r["config"] == selected and r["family"] == "linear"), None
    )
    groups: dict[tuple[Any, str], list[Mapping[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(r["split"], _pairing(r))].append(r)
    out = []
    for split, pairing in sorted(groups, key=lambda g: (g[0] != "dev", _split_key(g[0]), g[1])):
        group = groups[(split, pairing)]
        by_beta = {_beta(r): r for r in group if r["family"] == "linear" and _beta(r) is not None}
        rrf = [r for r in group if r["family"] == "rrf" and _num(r.get("rrf_k")) is not None]
        peak = max(by_beta.values(), key=lambda r: float(r["mean"]), default=None)
        best_rrf = max(rrf, key=lambda r: float(r["mean"]), default=None)
        ends = [_f((by_beta.get(b) or {}).get("mean")) for b in (0.0, 1.0)]
        out.append(
            [
                str(split),
                pairing,
                _Cell(ends[0], "num"),
                _Cell(ends[1], "num"),
                _Cell("—" if peak is None else f"{float(peak['beta']):.2f}", "num"),
                _Cell(_mean_ci(peak), "num"),
                _Cell(_mean_ci(by_beta.get(sel_beta)) if sel_beta is not None else "—", "num"),
                _Cell(
                    "—"
                    if best_rrf is None
                    else f"k={int(best_rrf['rrf_k'])}: {_mean_ci(best_rrf)}",
                    "num",
                ),
            ]
        )
    if not out:
        return None
    return _Table(
        [
            "Split",
            "Pairing",
            "β = 0",
            "β = 1",
            "Best β",
            "Mean at best β [95% CI]",
            "At selected β" + ("" if sel_beta is None else f" ({sel_beta:.2f})"),
            "Best RRF",
        ],
        out,
    )


def _types_section(
    summ: _Summary | None, why: str | None, meta: Mapping[str, Any], selected: str
) -> _Section:
    sec = _Section("by-type", "By question type")
    if summ is None:
        sec.blocks.append(_note(f"{why}, so the per-type bars are absent."))
        return sec
    goals = [g for g in meta.get("goals") or [] if isinstance(g, Mapping)]
    png = _plot_types(summ, selected, goals)
    if png is None:
        sec.blocks.append(
            _note(
                "The summary has no test-split evidence_recall@5/@10 rows at turn or session "
                "level for the selected configuration, so the per-type bars are absent."
            )
        )
        return sec
    sec.blocks.append(
        _Img(
            "by_question_type.png",
            png,
            "Evidence recall per question type for the selected configuration, turn and session "
            "level, test split, with 95% CI error bars",
            "Evidence recall of the selected configuration on the test split for each question "
            "type (n = questions of that type), turn vs session level; error bars are 95% "
            "bootstrap CIs, so wide bars mean few questions. The right-most group is the mean "
            "over all questions; short dashed black lines mark goal targets.",
        )
    )
    cols = [(lv, k) for k in (5, 10) for lv in ("turn", "session")]
    qtypes = sorted(
        {key[2] for key in summ.index if key[:2] == (selected, "test") and key[4] == ER},
        key=lambda q: (q == ALL, q),
    )
    rows = []
    for qtype in qtypes:
        cells = [summ.get(selected, "test", qtype, lv, ER, k) for lv, k in cols]
        n = next((_int(c.get("n")) for c in cells if c is not None), "—")
        label = "all questions" if qtype == ALL else qtype
        rows.append([label, *(_Cell(_mean_ci(c), "num") for c in cells), _Cell(n, "num")])
    if rows:
        sec.blocks.append(
            _Details(
                "Numbers behind the bars",
                [_Table(["Question type", *(f"{lv} @{k}" for lv, k in cols), "n"], rows)],
            )
        )
    return sec


def _granularity_section(
    rows: Sequence[Mapping[str, Any]], why: str | None, meta: Mapping[str, Any]
) -> _Section:
    """Per granularity (turn, session) and question type, evidence recall@5 out of fold:
    the default procedure against each single retriever, the earlier defaults and the
    published anchors (``meta["cv"]["columns"]``: column label -> cv table config)."""
    sec = _Section("granularity", "Granularities: the default against each single retriever")
    if why is not None and meta.get("small_corpus"):
        sec.blocks.append(
            _note(
                "Too few labelled questions to cross-validate a selection: the shipped "
                "default (headline) was selected on its own dev data, not on these questions."
            )
        )
    elif why is not None:
        sec.blocks.append(_note(f"{why}, so the cross-validated comparison is absent."))
        return sec
    cv = meta.get("cv") if isinstance(meta.get("cv"), Mapping) else {}
    columns = dict(cv.get("columns") or {"default (CV)": "cv:selected"})
    index = {
        (r["config"], r["level"], r["qtype"]): r
        for r in rows
        if r.get("metric") == ER and r.get("k") == 5
    }
    present = {label: name for label, name in columns.items() if any(k[0] == name for k in index)}
    papers = [p for p in meta.get("paper_figures") or [] if isinstance(p, Mapping)]
    qtypes = sorted({k[2] for k in index}, key=lambda q: (q != ALL, q))
    table_rows = []
    for level in ("turn", "session"):
        anchors = "; ".join(
            f"{_plain(p.get('label'))} {_f(p.get('value'))}"
            for p in papers
            if p.get("level") == level and p.get("k") == 5
        )
        for qtype in qtypes:
            cells = [index.get((name, level, qtype)) for name in present.values()]
            if all(c is None for c in cells):
                continue
            table_rows.append(
                [
                    level,
                    "all questions" if qtype == ALL else qtype,
                    *(_Cell(_mean_ci(c), "num") for c in cells),
                    anchors if qtype == ALL else "",
                ]
            )
    sec.blocks.append(
        _P(
            "Evidence recall@5, pooled out of fold (leave one conversation out; 95% CIs "
            "resample conversations, then questions). The default is the procedure: select on "
            "the other conversations (and, with the reranker, train it there), score the held-"
            "out one. The single retrievers and the earlier defaults are fixed configurations. "
            "Anchors are published figures on the full LoCoMo, not on these conversations.",
            "caption",
        )
    )
    sec.blocks.append(_Table(["Level", "Question type", *present, "Anchors"], table_rows))
    return sec


def _diffs_section(rows: Sequence[Mapping[str, Any]], why: str | None) -> _Section:
    sec = _Section("differences", "Differences between configurations")
    if why:
        sec.blocks.append(_note(f"{why}, so no paired differences are shown."))
        return sec
    out = []
    for r in sorted(
        rows,
        key=lambda r: (
            _split_key(r["split"]),
            _level_key(r["level"]),
            str(r["metric"]),
            _num(r["k"]) or 0,
            str(r["config_a"]),
            str(r["config_b"]),
        ),
    ):
        lo, hi = _num(r.get("ci_lo")), _num(r.get("ci_hi"))
        if lo is not None and lo > 0:
            verdict, cls = "A better", "pass"
        elif hi is not None and hi < 0:
            verdict, cls = "B better", "miss"
        elif lo is None or hi is None:
            verdict, cls = "no CI", ""
        else:
            verdict, cls = "no clear difference (CI spans 0)", ""
        out.append(
            [
                str(r["split"]),
                _measure(str(r["level"]), str(r["metric"]), _int(r["k"])),
                str(r["config_a"]),
                str(r["config_b"]),
                _Cell(_signed(r.get("mean_diff")), "num strong"),
                _Cell(_ci(lo, hi), "num"),
                _Cell(verdict, cls),
            ]
        )
    sec.blocks.append(_Table(["Split", "Measure", "A", "B", "A − B", "95% CI", "Verdict"], out))
    sec.blocks.append(
        _P(
            "Paired bootstrap over the same questions: both configurations are scored on each "
            "resample, so per-question difficulty cancels. A CI that excludes 0 means the "
            "difference is unlikely to be resampling noise.",
            "caption",
        )
    )
    return sec


def _ceiling_section(rows: Sequence[Mapping[str, Any]], why: str | None) -> _Section:
    sec = _Section("ceiling", "Oracle ceiling")
    if why:
        sec.blocks.append(_note(f"{why}, so the oracle ceiling is absent."))
        return sec
    out = [
        [
            LEVEL_NAMES.get(r["level"], str(r["level"])),
            "all questions" if r["qtype"] == ALL else str(r["qtype"]),
            _Cell(_int(r["pool"]), "num"),
            _Cell(_f(r["oracle_recall"]), "num strong"),
            _Cell(_int(r["n"]), "num"),
        ]
        for r in sorted(
            rows,
            key=lambda r: (
                _level_key(r["level"]),
                r["qtype"] != ALL,
                str(r["qtype"]),
                _num(r["pool"]) or 0,
            ),
        )
    ]
    sec.blocks.append(_Table(["Level", "Question type", "Pool", "Oracle recall", "n"], out))
    sec.blocks.append(
        _P(
            "Share of gold evidence present anywhere in the candidate pool (the first 'pool' "
            "candidates): the best any re-ranking of that pool could reach. A low ceiling means "
            "candidate generation, not ranking, is the bottleneck.",
            "caption",
        )
    )
    return sec
