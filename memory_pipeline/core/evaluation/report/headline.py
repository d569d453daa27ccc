"""The report's headline: the selected configuration's figures with CIs against the goals,
and the comparison series the retrieval sections reuse.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memory_pipeline.core.evaluation.evaluate_shipped import shipped_label
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
    shipped = meta.get("shipped") if meta.get("headline_config") else None
    # the shipped default was not chosen on these questions: all of them are its estimate
    split = "all" if shipped is not None else "test"
    if shipped is not None:
        per_lang = "; ".join(
            f"{lang}: {used.get('config', '?')} ({used.get('questions', '?')} questions)"
            for lang, used in shipped.items()
            if isinstance(used, Mapping)
        )
        sec.blocks.append(
            _P(
                "Shipped default — the configuration search() uses, chosen per query language "
                f"on that language's dev data: {per_lang or '(no questions)'}. Every labelled "
                "question was asked through the public search (time filters, reranker, the "
                "query language's default) and scored on the hits it returned; no choice was "
                "made on these questions, so all of them are its estimate (if the default's "
                "own dev file is the one evaluated here, its figures are in-sample and the "
                "cross-validated section is the honest estimate)."
            )
        )
        if meta.get("small_corpus"):
            sec.blocks.append(
                _note(
                    f"{_int(meta.get('questions'))} labelled questions: too few labelled "
                    "questions to select a configuration; the shipped default is reported. "
                    "The comparisons below are each family's best on these same questions "
                    "(in-sample, optimistic)."
                )
            )
        else:
            sec.blocks.append(
                _P(
                    f"Comparison: the configuration the dev split selects by {selection}: "
                    f"{meta.get('selected_config') or '(not given)'}; its honest figures are "
                    "on the test split "
                    f"({', '.join(map(str, splits.get('test', []))) or 'corpora not listed'})."
                )
            )
    else:
        sec.blocks.append(
            _P(
                f"Selected configuration: {selected or '(not given)'} — chosen on the dev "
                f"split by {selection}. The test split "
                f"({', '.join(map(str, splits.get('test', []))) or 'corpora not listed'}) was "
                "not used for any choice, so its numbers are the honest estimate; dev and "
                "all-question figures are in-sample and shown only for comparison."
            )
        )
    papers = [p for p in meta.get("paper_figures") or [] if isinstance(p, Mapping)]
    goals = [g for g in meta.get("goals") or [] if isinstance(g, Mapping)]
    # the two columns beside the headline figure
    second, third = ("test", "dev") if shipped is not None else ("dev", "all")
    heads = (
        ("All questions mean", "95% CI", "n", "Test split", "Dev split", "Goal (vs the mean)")
        if shipped is not None
        else (
            "Test mean",
            "Test 95% CI",
            "Test n",
            "Dev (selection, in-sample)",
            "All questions (in-sample)",
            "Goal (vs test mean)",
        )
    )
    if summ is None:
        sec.blocks.append(_note(f"{why}, so the headline numbers are absent."))
    else:
        rows = []
        for level, metric, k, qtype in HEADLINE_ROWS:
            test = summ.get(selected, split, qtype, level, metric, k)
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
                    _Cell(_mean_ci(summ.get(selected, second, qtype, level, metric, k)), "num"),
                    _Cell(_mean_ci(summ.get(selected, third, qtype, level, metric, k)), "num"),
                    _Cell("; ".join(goal_txt) or "—", goal_cls),
                    _Cell("; ".join(paper_txt) or "—", "paper"),
                ]
            )
        sec.blocks.append(
            _Table(
                ["Measure", *heads, "Paper's reported figure (not our run)"],
                rows,
            )
        )
        if shipped is not None:
            sec.blocks.append(_language_table(summ, shipped))
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
    if goals and meta.get("goals_source"):
        sec.blocks.append(
            _P(
                f"Targets: {meta['goals_source']}, applied to this data as a reference point.",
                "caption",
            )
        )
    if not goals:
        sec.blocks.append(_note("No goals were given in meta."))
    else:
        grows = []
        for g in goals:
            level, metric = g.get("level", "?"), g.get("metric", ER)
            k, qtype = g.get("k", "?"), g.get("qtype", ALL)
            test = None if summ is None else summ.get(selected, split, qtype, level, metric, k)
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
                ["Goal", "Measure", "Target", f"{heads[0]} [95% CI]", "n", "Margin", "Result"],
                grows,
            )
        )
        sec.blocks.append(
            _P(
                f"PASS when the headline configuration's mean ({split} questions) reaches the "
                "target; "
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
            ours = None if summ is None else summ.get(selected, split, qtype, level, metric, k)
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
                [
                    "Source (paper)",
                    "Measure",
                    "Paper's reported value",
                    f"Ours: {heads[0].lower()} [95% CI]",
                ],
                prows,
            )
        )
    return sec


def _language_table(summ: _Summary, shipped: Mapping[str, Any]) -> _Table:
    """The shipped default per query language: each language's questions under its default."""
    rows = []
    for lang, used in shipped.items():
        label = shipped_label(lang)
        cells = [
            _Cell(_mean_ci(summ.get(label, "all", ALL, level, ER, k)), "num")
            for level, k in (("turn", 5), ("session", 5), ("session", 10))
        ]
        n = summ.get(label, "all", ALL, "session", ER, 5)
        config = used.get("config", "?") if isinstance(used, Mapping) else "?"
        rows.append(
            [lang, str(config), *cells, _Cell("—" if n is None else _int(n.get("n")), "num")]
        )
    return _Table(
        [
            "Query language",
            "Default configuration",
            "Turn R@5 [95% CI]",
            "Session R@5 [95% CI]",
            "Session R@10 [95% CI]",
            "n",
        ],
        rows,
    )


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
