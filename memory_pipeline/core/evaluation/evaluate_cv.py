"""Leave-one-conversation-out cross-validation of the selection and of the speaker boost.

With few labelled conversations a single dev/test split is noisy; each fold selects on the
other conversations and scores the held-out one, so the reported figure is of a choice
never made on the questions it is scored on.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from memory_pipeline.core.evaluation import crossval as CV
from memory_pipeline.core.evaluation.evalsets import EvalQuestion
from memory_pipeline.core.evaluation.evaluate_configs import TURN_BM25_REP, turn_alone
from memory_pipeline.core.evaluation.evaluate_rows import Selection, SweepValues, sweep
from memory_pipeline.core.evaluation.evaluate_units import Candidates, Units
from memory_pipeline.core.retrieval.config import PRESETS, SearchConfig

# -- leave-one-conversation-out cross-validation ------------------------------------------

SPEAKER_BOOSTS = (0.0, 0.1, 0.3, 0.5, 1.0)
TURN_SELECTION = ("turn", "evidence_recall", 5)


def cross_validate_speaker_boost(
    base: SearchConfig,
    scored: Sequence[EvalQuestion],
    cands: Mapping[str, Candidates],
    units: Units,
    seed: int,
    resamples: int,
) -> dict | None:
    """The speaker boost of the selected ranking, chosen by leave-one-conversation-out on
    turn evidence R@5 (None below three conversations).

    Where every chunk holds both speakers (LoCoMo, most 1:1 chats) the boost moves only
    turns, never chunks or sessions, so the session-level selection cannot see it: it is
    selected on the level it changes, given the ranking the main selection chose."""
    groups = [q.corpus_id for q in scored]
    if len(set(groups)) < 3:
        return None
    configs = [replace(base, speaker_boost=w) for w in SPEAKER_BOOSTS]
    names = [c.name for c in configs]
    vals = sweep(configs, scored, cands, units, log=lambda _m: None)
    result = CV.leave_one_group_out(names, vals, groups, TURN_SELECTION)
    rows = CV.cv_rows(
        result,
        vals,
        groups,
        [q.qtype for q in scored],
        references=names,
        n_resamples=min(resamples, 2000),
        seed=seed,
    )
    figures = {
        f"{config} | {label}": triple
        for config, by_label in cv_figures(rows, qtypes=("all",)).items()
        for label, triple in by_label.items()
    }
    return {
        "config": next(c for c in configs if c.name == result.selected),
        "protocol": "given the selected ranking, each fold picks the speaker boost with the "
        "best turn evidence R@5 on the other conversations",
        "candidates": list(SPEAKER_BOOSTS),
        "folds": result.folds,
        "figures": figures,
    }


CV_SCHEMA = pa.schema(
    [
        ("config", pa.string()),
        ("qtype", pa.string()),
        ("level", pa.string()),
        ("metric", pa.string()),
        ("k", pa.int32()),
        ("mean", pa.float64()),
        ("ci_lo", pa.float64()),
        ("ci_hi", pa.float64()),
        ("n", pa.int64()),
        ("conversations", pa.int64()),
    ]
)
# what the figures of the selection record (and the README) quote
CV_FIGURES = (("turn", "evidence_recall", 5), ("session", "evidence_recall", 5))


@dataclass(frozen=True)
class CrossValidated:
    """The cross-validation of one evaluation: the folds, its table rows and key figures."""

    result: CV.CrossValidation
    rows: list[dict]
    figures: dict[str, dict[str, list[float]]]  # config -> "level metric@k [qtype]" -> CI

    @property
    def selected(self) -> str:
        return self.result.selected


def cross_validate(
    configs: Sequence[SearchConfig],
    sweep_vals: SweepValues,
    scored: Sequence[EvalQuestion],
    selection: tuple[str, str, int],
    chosen: Selection,
    seed: int,
    resamples: int,
    extra: Mapping[str, Mapping[tuple[str, str, int], Sequence[float | None]]] | None = None,
) -> CrossValidated | None:
    """Leave-one-conversation-out selection over the sweep (None below three conversations,
    where a fold would select on one conversation). ``extra``: out-of-fold values of other
    procedures (the learned reranker), reported as rows beside ``cv:selected``; the fixed
    references are the packaged default, the old ``rrf`` default, each family's best and
    each single retriever (BM25 and dense chunks, the turn index alone)."""
    groups = [q.corpus_id for q in scored]
    if len(set(groups)) < 3:
        return None
    aligned = {
        name: {k: v for k, v in vals.items() if len(v) == len(scored)}
        for name, vals in sweep_vals.items()
    }
    if selection not in next(iter(aligned.values())):
        return None
    names = [c.name for c in configs]
    result = CV.leave_one_group_out(names, aligned, groups, selection)
    singles = [
        f"bm25[{TURN_BM25_REP}]",
        "dense[embedding_text]",
        turn_alone(configs),
    ]
    wanted = [
        PRESETS["default"].name,
        PRESETS["rrf"].name,
        PRESETS["highlights"].name,
        *chosen.best.values(),
        *singles,
    ]
    references = [n for n in dict.fromkeys(wanted) if n in aligned]
    for label, vals in (extra or {}).items():
        aligned[label] = {k: v for k, v in vals.items() if len(v) == len(scored)}
        references.append(label)
    rows = CV.cv_rows(
        result,
        aligned,
        groups,
        [q.qtype for q in scored],
        references=references,
        n_resamples=min(resamples, 2000),
        seed=seed,
    )
    return CrossValidated(result, rows, cv_figures(rows))


def cv_figures(
    rows: Sequence[Mapping[str, Any]], qtypes: Sequence[str] | None = None
) -> dict[str, dict[str, list[float]]]:
    """The recorded figures of CV rows: per config, ``"level metric@k [qtype]"`` -> mean and
    CI rounded to 4 places, for the CV_FIGURES metrics (and ``qtypes``, default every one):
    what the selection's provenance and the README quote."""
    figures: dict[str, dict[str, list[float]]] = defaultdict(dict)
    for r in rows:
        if (r["level"], r["metric"], r["k"]) in CV_FIGURES and (
            qtypes is None or r["qtype"] in qtypes
        ):
            label = f"{r['level']} {r['metric']}@{r['k']} [{r['qtype']}]"
            figures[r["config"]][label] = [
                round(r["mean"], 4),
                round(r["ci_lo"], 4),
                round(r["ci_hi"], 4),
            ]
    return dict(figures)
