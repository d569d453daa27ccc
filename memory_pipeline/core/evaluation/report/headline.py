"""The report's headline: the selected configuration's figures with CIs against the goals,
and the comparison series the retrieval sections reuse.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memory_pipeline.core.evaluation.report.model import (
    _P,
    ALL,
    ER,
    HEADLINE_ROWS,
    _Cell,
    _ci,
    _f,
    _int,
    _mean_ci,
    _measure,
    _num,
    _Section,
    _signed,
    _Sub,
    _Summary,
    _Table,
)

# ----------------------------------------------------------------------------- sections


def _note(text: str) -> _P:
    return _P(text, "note")


def _headline(
    summ: _Summary | None, why: str | None, meta: Mapping[str, Any], selected: str
) -> _Section:
    sec = _Section("headline", "Headline")
    selection = meta.get("selection_metric") or "the selection metric"
    splits = meta.get("splits") or {}
    sec.blocks.append(
        _P(
            f"Selected configuration: {selected or '(not given)'} — chosen on the dev split by "
            f"{selection}. The test split "
            f"({', '.join(map(str, splits.get('test', []))) or 'corpora not listed'}) was not "
            "used for any choice, so its numbers are the honest estimate; dev and all-question "
            "figures are in-sample and shown only for comparison."
        )
    )
    papers = [p for p in meta.get("paper_figures") or [] if isinstance(p, Mapping)]
    goals = [g for g in meta.get("goals") or [] if isinstance(g, Mapping)]
    if summ is None:
        sec.blocks.append(_note(f"{why}, so the headline numbers are absent."))
    else:
        rows = []
        for level, metric, k, qtype in HEADLINE_ROWS:
            test = summ.get(selected, "test", qtype, level, metric, k)
            goal_txt = [
                f"≥ {_f(g.get('target'))}: {_verdict(test, g.get('target'))}"
                for g in goals
                if _matches(g, level, metric, k, qtype)
            ]
            paper_txt = [
                f"{_f(p.get('value'))} ({p.get('label', '?')})"
                for p in papers
                if _matches(p, level, metric, k, qtype)
            ]
            goal_cls = ""
            if goal_txt:
                goal_cls = "miss" if any(t.endswith("MISS") for t in goal_txt) else "pass"
                goal_cls = "nodata" if any(t.endswith("NO DATA") for t in goal_txt) else goal_cls
            rows.append(
                [
                    _measure(level, metric, k, qtype),
                    _Cell(_f(None if test is None else test.get("mean")), "num strong"),
                    _Cell(
                        "—" if test is None else _ci(test.get("ci_lo"), test.get("ci_hi")), "num"
                    ),
                    _Cell("—" if test is None else _int(test.get("n")), "num"),
                    _Cell(_mean_ci(summ.get(selected, "dev", qtype, level, metric, k)), "num"),
                    _Cell(_mean_ci(summ.get(selected, "all", qtype, level, metric, k)), "num"),
                    _Cell("; ".join(goal_txt) or "—", goal_cls),
                    _Cell("; ".join(paper_txt) or "—", "paper"),
                ]
            )
        sec.blocks.append(
            _Table(
                [
                    "Measure",
                    "Test mean",
                    "Test 95% CI",
                    "Test n",
                    "Dev (selection, in-sample)",
                    "All questions (in-sample)",
                    "Goal (vs test mean)",
                    "Paper's reported figure (not our run)",
                ],
                rows,
            )
        )
        sec.blocks.append(
            _P(
                "Evidence recall = share of a question's gold evidence found in the top K units. "
                "95% CIs: percentile bootstrap over questions"
                + _boot_text(meta)
                + ". The last column repeats figures published in the papers, for orientation "
                "only: their splits, filtering and retrievers differ from ours.",
                "caption",
            )
        )
    sec.blocks.append(_Sub("Goals"))
    if not goals:
        sec.blocks.append(_note("No goals were given in meta."))
    else:
        grows = []
        for g in goals:
            level, metric = g.get("level", "?"), g.get("metric", ER)
            k, qtype = g.get("k", "?"), g.get("qtype", ALL)
            test = None if summ is None else summ.get(selected, "test", qtype, level, metric, k)
            verdict = _verdict(test, g.get("target"))
            mean = None if test is None else _num(test.get("mean"))
            target = _num(g.get("target"))
            margin = None if mean is None or target is None else mean - target
            grows.append(
                [
                    str(g.get("label", "")),
                    _measure(str(level), str(metric), k, str(qtype)),
                    _Cell(f"≥ {_f(target)}", "num"),
                    _Cell(_mean_ci(test), "num"),
                    _Cell("—" if test is None else _int(test.get("n")), "num"),
                    _Cell(_signed(margin), "num"),
                    _Cell(verdict, verdict.lower().replace(" ", "")),
                ]
            )
        sec.blocks.append(
            _Table(
                ["Goal", "Measure", "Target", "Test mean [95% CI]", "n", "Margin", "Result"], grows
            )
        )
        sec.blocks.append(
            _P(
                "PASS when the selected configuration's TEST-split mean reaches the target; "
                "NO DATA when the summary has no such row.",
                "caption",
            )
        )
    sec.blocks.append(_Sub("Published figures (the papers' numbers, not ours)"))
    if not papers:
        sec.blocks.append(_note("No paper figures were given in meta."))
    else:
        prows = []
        for p in papers:
            level, k = p.get("level", "?"), p.get("k", "?")
            metric, qtype = p.get("metric", ER), p.get("qtype", ALL)
            ours = None if summ is None else summ.get(selected, "test", qtype, level, metric, k)
            prows.append(
                [
                    f"Paper: {p.get('label', '?')}",
                    _measure(str(level), str(metric), k, str(qtype)),
                    _Cell(_f(p.get("value")), "num paper"),
                    _Cell(_mean_ci(ours), "num"),
                ]
            )
        sec.blocks.append(
            _Table(
                ["Source (paper)", "Measure", "Paper's reported value", "Ours: test mean [95% CI]"],
                prows,
            )
        )
    return sec


def _matches(spec: Mapping[str, Any], level: str, metric: str, k: Any, qtype: str) -> bool:
    """Whether a goal / paper-figure dict (metric and qtype defaulted) names this measure."""
    return (
        spec.get("level"),
        spec.get("metric", ER),
        _num(spec.get("k")),
        spec.get("qtype", ALL),
    ) == (level, metric, _num(k), qtype)


def _verdict(test: Mapping[str, Any] | None, target: Any) -> str:
    mean = None if test is None else _num(test.get("mean"))
    t = _num(target)
    if mean is None or t is None:
        return "NO DATA"
    return "PASS" if mean >= t else "MISS"


def _boot_text(meta: Mapping[str, Any]) -> str:
    boot = meta.get("bootstrap") or {}
    parts = []
    if boot.get("resamples") is not None:
        parts.append(f"{boot['resamples']} resamples")
    if boot.get("seed") is not None:
        parts.append(f"seed {boot['seed']}")
    return f" ({', '.join(parts)})" if parts else ""


def _comparison_series(
    summ: _Summary,
    sweep_rows: Sequence[Mapping[str, Any]],
    selected: str,
    selection: tuple[str, str, int],
) -> list[tuple[str, str]]:
    """(config, legend label): the selected config, then the best BM25 and best dense single
    retriever on dev (from the sweep), falling back to the best other configs of the summary."""
    level, metric, k = selection
    present = set(summ.configs())
    out = [(selected, f"{selected} (selected)")] if selected else []
    seen = {selected}
    for family, name in (("bm25", "best BM25"), ("dense", "best dense")):
        cands = [
            r
            for r in sweep_rows
            if r["family"] == family
            and r["split"] == "dev"
            and (r["level"], r["metric"], _num(r["k"])) == (level, metric, k)
            and _num(r.get("mean")) is not None
            and r["config"] not in seen
            and r["config"] in present
        ]
        if cands:
            best = max(cands, key=lambda r: float(r["mean"]))
            out.append((best["config"], f"{best['config']} ({name} on dev)"))
            seen.add(best["config"])
    if len(out) <= 1:
        others = [
            (summ.mean(c, "dev", ALL, level, metric, k) or -1.0, c)
            for c in summ.configs()
            if c not in seen
        ]
        out += [(c, c) for _, c in sorted(others, reverse=True)[:3]]
    return out
