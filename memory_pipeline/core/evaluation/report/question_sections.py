"""Question-level sections of the report: ambiguous questions, failures per question type
and the list of questions with their outcomes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from memory_pipeline.core.evaluation.report.headline import _note
from memory_pipeline.core.evaluation.report.model import (
    _P,
    ALL,
    LEVEL_NAMES,
    MAX_FAILURES_PER_TYPE,
    _Cell,
    _ci,
    _Details,
    _f,
    _int,
    _level_key,
    _num,
    _Section,
    _signed,
    _Table,
)

AMBIGUOUS_CONDITIONS = {
    "original": "original question",
    "ambiguous": "ambiguous, no recent messages",
    "resolved": "ambiguous + recent (rules)",
    "resolved-ambiguous": "difference (resolved - ambiguous)",
}


def _query_variant(row: Mapping[str, Any]) -> bool:
    """Whether a sweep row is a query-understanding variant (speaker boost, stripped
    question, PRF) rather than a plain configuration."""
    return bool(row.get("speaker_boost") or row.get("strip_question") or row.get("prf_terms"))


def _ambiguous_section(
    rows: Sequence[Mapping[str, Any]], why: str | None, meta: Mapping[str, Any]
) -> _Section:
    """Ambiguous follow-up questions (Alonso et al. 2024): recall with and without the
    recent messages that hold the entity."""
    sec = _Section("ambiguous", "Ambiguous follow-up questions")
    if why:
        sec.blocks.append(_note(f"{why}, so the ambiguous-question evaluation is absent."))
        return sec
    info = meta.get("ambiguous") or {}
    order = list(AMBIGUOUS_CONDITIONS)
    out = []
    for r in sorted(
        rows,
        key=lambda r: (
            r["kind"] != ALL,
            str(r["kind"]),
            _level_key(r["level"]),
            order.index(r["condition"]) if r["condition"] in order else 9,
        ),
    ):
        strong = "num strong" if r["condition"] == "resolved-ambiguous" else "num"
        fmt = _signed if r["condition"] == "resolved-ambiguous" else _f
        out.append(
            [
                "all variants" if r["kind"] == ALL else str(r["kind"]),
                LEVEL_NAMES.get(r["level"], str(r["level"])),
                AMBIGUOUS_CONDITIONS.get(r["condition"], str(r["condition"])),
                _Cell(fmt(r["mean"]), strong),
                _ci(r["ci_lo"], r["ci_hi"]),
                _Cell(_int(r["n"]), "num"),
                _Cell(_f(r["resolved_exactly"]), "num"),
            ]
        )
    headers = [
        "Variant",
        "Level",
        "Question",
        f"R@{_int(rows[0]['k']) if rows else 5}",
        "95% CI",
        "n",
        "Entity recovered",
    ]
    sec.blocks.append(_Table(headers, out))
    limits = "; ".join(str(x) for x in info.get("limits", ()))
    sec.blocks.append(
        _P(
            "Each labelled question made ambiguous: 'person' replaces the speaker it names by "
            "they/their, 'topic' replaces its key noun phrase by 'that'; a synthetic "
            "preceding turn holds the entity. Evidence recall of the original question, the "
            "ambiguous one searched alone, and the ambiguous one resolved by the rules of "
            f"search(recent=...), under {info.get('config', 'the selected search')}. CIs "
            "resample conversations, then questions. 'Entity recovered': share of resolved "
            f"questions that hold the entity again. What the generator cannot do: {limits}.",
            "caption",
        )
    )
    return sec


def _failures_section(
    rows: Sequence[Mapping[str, Any]], why: str | None, selected: str
) -> _Section:
    sec = _Section("failures", "Failures: no primary gold in the top 5")
    if why:
        empty = why.endswith("is empty")
        sec.blocks.append(
            _note(
                "No failures were recorded: the failures table is empty."
                if empty
                else f"{why}, so the failure list is absent."
            )
        )
        return sec
    configs = sorted({str(r["config"]) for r in rows})
    if selected in configs:
        rows = [r for r in rows if r["config"] == selected]
        scope = f"selected configuration {selected}"
    else:
        scope = f"configuration(s) {', '.join(configs)}"
    failed = [r for r in rows if not r.get("found_at_5")]
    if not failed:
        sec.blocks.append(
            _note(f"No failures for the {scope}: every question had primary gold in the top 5.")
        )
        return sec
    by_type: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in failed:
        by_type[str(r["qtype"])].append(r)
    overview = []
    for qtype in sorted(by_type):
        group = by_type[qtype]
        n = len(group)
        at10 = sum(1 for r in group if r.get("found_at_10"))
        at20 = sum(1 for r in group if r.get("found_at_20"))
        overview.append(
            [
                qtype,
                _Cell(str(n), "num"),
                _Cell(f"{at10} ({at10 / n:.0%})", "num"),
                _Cell(f"{at20} ({at20 / n:.0%})", "num"),
                _Cell(f"{n - at20} ({(n - at20) / n:.0%})", "num"),
            ]
        )
    sec.blocks.append(
        _P(
            f"Questions (per level) for the {scope} with no primary gold unit in the top 5, and "
            'whether deeper retrieval brings it back. "Lost" ones are missing even at 20: '
            "look at those first."
        )
    )
    sec.blocks.append(
        _Table(
            ["Question type", "Failing @5", "Back by @10", "Back by @20", "Lost at 20"], overview
        )
    )
    for qtype in sorted(by_type):
        group = sorted(
            by_type[qtype],
            key=lambda r: (
                bool(r.get("found_at_20")),
                bool(r.get("found_at_10")),
                _level_key(r["level"]),
                str(r["corpus_id"]),
                str(r["question_id"]),
            ),
        )
        shown = group[:MAX_FAILURES_PER_TYPE]
        table = _Table(
            ["Question id", "Corpus", "Level", "Question", "@10", "@20"],
            [
                [
                    str(r["question_id"]),
                    str(r["corpus_id"]),
                    str(r["level"]),
                    str(r["question"] or ""),
                    _yes_no(r.get("found_at_10")),
                    _yes_no(r.get("found_at_20")),
                ]
                for r in shown
            ],
        )
        blocks: list[Any] = [table]
        if len(group) > len(shown):
            blocks.append(_note(f"{len(group) - len(shown)} more not shown."))
        sec.blocks.append(_Details(f"{qtype} — {len(group)} failing", blocks))
    return sec


def _yes_no(x: Any) -> _Cell:
    return _Cell("yes", "pass") if x else _Cell("no", "miss")


def _questions_section(
    rows: Sequence[Mapping[str, Any]], why: str | None, meta: Mapping[str, Any]
) -> _Section:
    sec = _Section("questions", "Questions and exclusions")
    if why:
        sec.blocks.append(_note(f"{why}, so the question report is absent."))
        return sec
    split_of: dict[str, str] = {}
    for split, corpora in (meta.get("splits") or {}).items():
        for c in corpora or []:
            split_of[str(c)] = str(split)
    out = []
    totals = [0, 0, 0]
    for r in sorted(rows, key=lambda r: (str(r["corpus_id"]), str(r["qtype"]))):
        q, e, u = (int(_num(r[c]) or 0) for c in ("questions", "excluded", "unresolved_ids"))
        totals = [totals[0] + q, totals[1] + e, totals[2] + u]
        out.append(
            [
                str(r["corpus_id"]),
                split_of.get(str(r["corpus_id"]), "—"),
                str(r["qtype"]),
                _Cell(str(q), "num"),
                _Cell(str(e), "num"),
                _Cell(str(q - e), "num"),
                _Cell(str(u), "num"),
            ]
        )
    out.append(
        [
            _Cell("total", "strong"),
            "",
            "",
            _Cell(str(totals[0]), "num strong"),
            _Cell(str(totals[1]), "num strong"),
            _Cell(str(totals[0] - totals[1]), "num strong"),
            _Cell(str(totals[2]), "num strong"),
        ]
    )
    sec.blocks.append(
        _Table(
            ["Corpus", "Split", "Question type", "Questions", "Excluded", "Used", "Unresolved ids"],
            out,
        )
    )
    sec.blocks.append(
        _P(
            "Excluded questions are left out of every mean (e.g. no usable gold evidence); "
            "unresolved ids are gold evidence references that matched no unit of the corpus.",
            "caption",
        )
    )
    return sec
