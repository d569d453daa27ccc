"""The report's answerability section: whether search can say "I don't know".

The figures are computed elsewhere (``evaluate_shipped.answerability_meta``): the dev
figures recorded with the selection (AUROC of ``confidence``, own questions called
answerable, name-swapped foreign questions refused, with CIs) and, on the labelled questions
of this run, the share the shipped search called answerable. The ROC curve is drawn when
the recorded provenance carries its points; otherwise the section says why it is absent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from matplotlib.figure import Figure

from memory_pipeline.core.evaluation.report.model import (
    _P,
    SELECTED_COLOR,
    _Cell,
    _ci,
    _f,
    _Img,
    _int,
    _num,
    _png,
    _Section,
    _Sub,
    _Table,
)

_MEASURES = (
    ("auroc", "AUROC of confidence (own vs foreign questions)"),
    ("own_answerable", "own questions called answerable"),
    ("foreign_unanswerable", "foreign (name-swapped) questions refused"),
)


def _answerability_section(meta: Mapping[str, Any]) -> _Section:
    sec = _Section("answerability", "Answerability")
    info = meta.get("answerability")
    if not isinstance(info, Mapping):
        sec.blocks.append(_P("This run recorded no answerability figures.", "note"))
        return sec
    sec.blocks.append(
        _P(
            "Each search result carries a confidence in [0, 1] (comparable across queries and "
            "corpora) and answerable = confidence at or above a threshold chosen on dev data: "
            "an app should not answer from the hits of an unanswerable result."
        )
    )
    goals = info.get("goals") if isinstance(info.get("goals"), Mapping) else {}
    recorded = info.get("recorded") if isinstance(info.get("recorded"), Mapping) else {}
    sec.blocks.append(_Sub("Recorded dev figures (the selection's calibration)"))
    rows = []
    for lang, rec in recorded.items():
        figures = rec.get("figures") if isinstance(rec, Mapping) else None
        for key, label in _MEASURES:
            fig = (figures or {}).get(key)
            mean, lo, hi = (
                (list(fig) + [None, None, None])[:3]
                if isinstance(fig, list)
                else (
                    None,
                    None,
                    None,
                )
            )
            target = _num(goals.get(key))
            verdict = (
                "—"
                if target is None or _num(mean) is None
                else ("PASS" if float(mean) >= target else "MISS")
            )
            rows.append(
                [
                    str(lang),
                    label,
                    _Cell(_f(mean), "num strong"),
                    _Cell(_ci(lo, hi), "num"),
                    _Cell("—" if target is None else f"≥ {_f(target)}", "num"),
                    _Cell(verdict, verdict.lower() if verdict != "—" else ""),
                ]
            )
    if rows:
        sec.blocks.append(
            _Table(["Language", "Measure", "Dev figure", "95% CI", "Goal", "Result"], rows)
        )
        for lang, rec in recorded.items():
            if isinstance(rec, Mapping):
                data = rec.get("data") if isinstance(rec.get("data"), Mapping) else {}
                sec.blocks.append(
                    _P(
                        f"{lang}: threshold {_f(rec.get('threshold'))}; data "
                        f"{data.get('file', '?')} ({_int(data.get('own'))} own, "
                        f"{_int(data.get('foreign'))} foreign questions); protocol: "
                        f"{rec.get('protocol') or '?'}; reproduce: {rec.get('command') or '?'}",
                        "caption",
                    )
                )
    else:
        sec.blocks.append(_P("The selection records no answerability calibration.", "note"))
    own = info.get("own") if isinstance(info.get("own"), Mapping) else {}
    sec.blocks.append(_Sub("On these labelled questions"))
    if own:
        orows = []
        for name, o in own.items():
            if isinstance(o, Mapping):
                ci = o.get("ci") if isinstance(o.get("ci"), Sequence) else (None, None)
                orows.append(
                    [
                        "every language" if name == "all" else str(name),
                        _Cell(_f(o.get("share")), "num strong"),
                        _Cell(_ci(*(list(ci) + [None, None])[:2]), "num"),
                        _Cell(_int(o.get("n")), "num"),
                    ]
                )
        sec.blocks.append(
            _Table(["Query language", "Share called answerable", "95% CI", "n"], orows)
        )
        sec.blocks.append(
            _P(
                "Every labelled question has its answer in the data, so this is the own-"
                "questions figure on your data (the dev goal is ≥ "
                f"{_f(goals.get('own_answerable'))}); questions without an answer would be "
                "needed to measure refusals here.",
                "caption",
            )
        )
    else:
        sec.blocks.append(_P("No labelled questions were asked.", "note"))
    png = _plot_roc(recorded)
    if png is None:
        sec.blocks.append(
            _P(
                "ROC curve: the recorded calibration keeps the AUROC with its CI but not the "
                "curve's points, so no curve is drawn.",
                "note",
            )
        )
    else:
        sec.blocks.append(
            _Img(
                "answerability_roc.png",
                png,
                "ROC curve of confidence on the dev protocol",
                "ROC of confidence: own questions (positives) against name-swapped foreign "
                "questions (negatives), from the recorded calibration.",
            )
        )
    return sec


def _plot_roc(recorded: Mapping[str, Any]) -> bytes | None:
    """The recorded ROC points ({"fpr": [...], "tpr": [...]}) per language, if any."""
    curves = [
        (lang, rec["roc"])
        for lang, rec in recorded.items()
        if isinstance(rec, Mapping)
        and isinstance(rec.get("roc"), Mapping)
        and rec["roc"].get("fpr")
        and len(rec["roc"].get("fpr")) == len(rec["roc"].get("tpr") or ())
    ]
    if not curves:
        return None
    fig = Figure(figsize=(4.6, 4.4), layout="constrained")
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1], color="#999", linestyle=":", linewidth=1)
    for i, (lang, roc) in enumerate(curves):
        color = SELECTED_COLOR if i == 0 else "#1f77b4"
        ax.plot(roc["fpr"], roc["tpr"], color=color, label=str(lang))
    ax.set_xlabel("foreign questions called answerable (false positive rate)")
    ax.set_ylabel("own questions called answerable (true positive rate)")
    ax.legend(loc="lower right")
    return _png(fig)
