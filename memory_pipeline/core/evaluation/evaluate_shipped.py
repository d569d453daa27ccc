"""The shipped default, scored the way it ships: through ``Searcher.search``.

The sweep re-ranks cached candidate lists, which is what makes comparing hundreds of
configurations cheap, but it is not the search a user calls: it has no time filters, no
reranker and no per-language default. This module asks every labelled question through the
public search with the default configuration (each query served by its language's default,
``config.language_of``) and scores the hits it returns, so the report's headline and the
run's printed figure are the figures of what ships. Each answer's ``confidence`` and
``answerable`` are kept for the answerability section.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from memory_pipeline.core.evaluation.evalsets import EvalQuestion
from memory_pipeline.core.evaluation.evaluate_configs import KS
from memory_pipeline.core.evaluation.evaluate_units import Units, question_scores

SHIPPED = "shipped default"  # the summary's config label of the default (all questions)
# Below this many labelled questions a dev/test split leaves too few on each side to choose
# between hundreds of configurations (the bundled sample has 14: a selection on 7 questions
# is noise); the report then shows the shipped default and the comparisons, selects nothing.
MIN_SELECTION_QUESTIONS = 40
SMALL_CORPUS_NOTE = (
    "too few labelled questions to select a configuration; the shipped default is reported"
)


def shipped_label(language: str) -> str:
    """The summary's config label of one language's default (its questions only)."""
    return f"{SHIPPED} ({language})"


@dataclass
class ShippedRun:
    """The default's values per question (as ``FullValues``: label -> metric -> {qid: v}),
    the per-question table rows, each question's answerability and the configurations used
    per language (``configs``: language -> {"config": name, "questions": n})."""

    vals: dict[str, dict[tuple[str, str, int], dict[str, float | None]]]
    rows: list[dict] = field(default_factory=list)
    answers: list[dict] = field(default_factory=list)
    configs: dict[str, dict] = field(default_factory=dict)

    @property
    def labels(self) -> list[str]:
        """``SHIPPED`` then one label per language, in the order of ``configs``."""
        return [SHIPPED, *(shipped_label(lang) for lang in self.configs)]


def score_shipped(
    searcher,
    scored: Sequence[EvalQuestion],
    units: Units,
    split_of: dict[str, str],
    ks: Sequence[int] = KS,
) -> ShippedRun:
    """Every scored question through ``searcher.search`` (default config, the question's own
    scope and ``as_of``), scored at every K on the hits the search returns."""
    vals: dict = defaultdict(lambda: defaultdict(dict))
    run = ShippedRun(vals)
    depth = max(ks)
    for q in scored:
        scope = q.scope or {"conversation_id": q.corpus_id}
        res = searcher.search(
            q.question,
            k=depth,
            contact=scope.get("contact_id"),
            conversation=scope.get("conversation_id"),
            as_of=q.as_of,
        )
        used = run.configs.setdefault(res.language, {"config": res.config, "questions": 0})
        used["questions"] += 1
        ranked = [(h.chunk_id, h.score) for h in res.chunks]
        turns = units.refs([t.message_id for t in res.turns], depth)
        sessions = [h.session_id for h in res.sessions]
        scores = question_scores(q, ranked, units, ks, full=True, turns=turns, sessions=sessions)
        for label in (SHIPPED, shipped_label(res.language)):
            for level, metric, k, v in scores:
                vals[label][(level, metric, k)][q.question_id] = v
                run.rows.append(
                    {
                        "config": label,
                        "split": split_of[q.question_id],
                        "question_id": q.question_id,
                        "corpus_id": q.corpus_id,
                        "qtype": q.qtype,
                        "level": level,
                        "metric": metric,
                        "k": k,
                        "value": v,
                    }
                )
        run.answers.append(
            {
                "question_id": q.question_id,
                "corpus_id": q.corpus_id,
                "language": res.language,
                "config": res.config,
                "confidence": float(res.confidence),
                "answerable": bool(res.answerable),
            }
        )
    run.vals = {label: dict(v) for label, v in vals.items()}
    return run


ANSWER_GOALS = {"auroc": 0.85, "own_answerable": 0.90, "foreign_unanswerable": 0.60}


def answerability_meta(answers: Sequence[dict], seed: int, resamples: int) -> dict:
    """The answerability figures the report shows: the recorded dev figures (from the
    selection's provenance, per language where recorded) and, on these labelled questions
    (all answerable by construction: they have gold), the share the search called
    answerable, overall and per language, with bootstrap CIs over questions."""
    from memory_pipeline.core.evaluation import metrics as M
    from memory_pipeline.core.retrieval.config import SELECTION

    recorded: dict[str, dict] = {}
    for lang, record in (
        ("en", SELECTION.get("answerability")),
        *(
            (lang, (rec or {}).get("answerability"))
            for lang, rec in (SELECTION.get("languages") or {}).items()
        ),
    ):
        if record:
            prov = dict(record.get("provenance") or {})
            recorded[lang] = {
                "figures": dict(prov.get("figures") or {}),
                "threshold": record.get("threshold"),
                "data": prov.get("data"),
                "protocol": prov.get("protocol"),
                "command": prov.get("command"),
                "roc": prov.get("roc"),  # curve points, when the calibration recorded them
            }
    own: dict[str, dict] = {}
    groups = {"all": list(answers)}
    for a in answers:
        groups.setdefault(a["language"], []).append(a)
    for name, rows in groups.items():
        vals = [1.0 if a["answerable"] else 0.0 for a in rows]
        mean, lo, hi = M.bootstrap_ci(vals, n_resamples=resamples, seed=seed)
        own[name] = {"share": mean, "ci": [lo, hi], "n": len(vals)}
    return {"recorded": recorded, "own": own, "goals": ANSWER_GOALS}
