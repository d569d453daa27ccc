"""Retrieval-quality metrics, run tables and bootstrap statistics for memory evaluation.

Pure functions over ranked lists of unit ids (message, chunk or session ids) and a graded gold
mapping ``{unit_id: grade}`` (2 = primary, 1 = supporting; grade <= 0 counts as not relevant),
so every retriever and every unit granularity is scored the same way.

Conventions, fixed here so numbers are comparable across runs:

* **Cutoff.** The top K are the first K *positions* of the ranked list as given; K larger than
  the list is fine (the list is simply shorter). K must be >= 1.
* **Duplicates.** A unit id repeated in the ranked list counts once, at its first occurrence; a
  later copy still occupies its position but earns nothing, so a retriever is neither rewarded
  for repeats nor given extra depth by them.
* **Ties.** Only a ranking is given, not scores: the list order is the tie-break (no averaging
  over permutations of tied scores). In the ideal DCG, equal grades are interchangeable.
* **Empty gold.** A question without gold (after ``primary_only`` filtering) has no defined
  value: metrics return ``None``; :func:`summarize` leaves it out of means and counts it in
  ``n_excluded``.
* **Averages** are macro over questions: each question weighs 1 whatever its number of gold
  units (LoCoMo's "recall accuracy" averaged per category is this macro average).
* ``recall_any`` is the same number as ``hit`` (LongMemEval's name for it); ``recall_all`` is 1
  only when every gold unit is in the top K.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

if TYPE_CHECKING:
    from memory_pipeline.core.evaluation.evalsets import EvalQuestion

__all__ = [
    "KS",
    "METRICS",
    "OVERALL",
    "RUN_SCHEMA",
    "bootstrap_ci",
    "evaluate_run",
    "evidence_recall_at_k",
    "hit_at_k",
    "mrr_at_k",
    "ndcg_at_k",
    "paired_bootstrap_diff",
    "recall_all",
    "recall_any",
    "recall_at_k",
    "refs_by_unit",
    "split_questions",
    "summarize",
]

KS = (1, 3, 5, 10, 20)
PRIMARY = 2
OVERALL = "all"  # the group label of the overall row in summarize()

RUN_SCHEMA = pa.schema(
    [
        ("question_id", pa.string()),
        ("corpus_id", pa.string()),
        ("qtype", pa.string()),
        ("metric", pa.string()),
        ("k", pa.int32()),
        ("value", pa.float64()),  # null: no gold for this metric (excluded from means)
    ]
)

Ranked = Sequence[str]
Gold = Mapping[str, int]


# ----------------------------------------------------------------------------- per question


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")


def _top(ranked: Ranked, k: int) -> list[tuple[int, str]]:
    """(1-based rank, unit) of the first occurrence of each unit within the first k positions."""
    _check_k(k)
    seen: set[str] = set()
    out = []
    for rank, unit in enumerate(ranked[:k], start=1):
        if unit not in seen:
            seen.add(unit)
            out.append((rank, unit))
    return out


def _relevant(gold: Gold, primary_only: bool) -> set[str]:
    floor = PRIMARY if primary_only else 1
    return {u for u, g in gold.items() if g >= floor}


def recall_at_k(ranked: Ranked, gold: Gold, k: int, *, primary_only: bool = False) -> float | None:
    """Share of the gold units (grade >= 1, or only grade 2) found in the top k; None if no gold."""
    rel = _relevant(gold, primary_only)
    if not rel:
        return None
    return sum(1 for _, u in _top(ranked, k) if u in rel) / len(rel)


def hit_at_k(ranked: Ranked, gold: Gold, k: int, *, primary_only: bool = False) -> float | None:
    """1.0 if any gold unit is in the top k, else 0.0; None if no gold."""
    rel = _relevant(gold, primary_only)
    if not rel:
        return None
    return 1.0 if any(u in rel for _, u in _top(ranked, k)) else 0.0


def mrr_at_k(ranked: Ranked, gold: Gold, k: int, *, primary_only: bool = False) -> float | None:
    """1 / rank of the first gold unit within the top k (0.0 if none); None if no gold."""
    rel = _relevant(gold, primary_only)
    if not rel:
        return None
    return next((1.0 / rank for rank, u in _top(ranked, k) if u in rel), 0.0)


def ndcg_at_k(ranked: Ranked, gold: Gold, k: int) -> float | None:
    """Graded nDCG@k: gain 2**grade - 1, discount log2(rank + 1); None if no gold.

    The ideal DCG sorts the gold grades in descending order and cuts at k, so a question with
    more gold units than k can still reach 1.0.
    """
    grades = {u: g for u, g in gold.items() if g >= 1}
    if not grades:
        return None
    dcg = sum(
        (2.0 ** grades[u] - 1.0) / math.log2(rank + 1) for rank, u in _top(ranked, k) if u in grades
    )
    ideal = sorted(grades.values(), reverse=True)[:k]
    idcg = sum((2.0**g - 1.0) / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg


def recall_any(ranked: Ranked, gold: Gold, k: int, *, primary_only: bool = False) -> float | None:
    """LongMemEval recall_any@k: 1.0 if at least one gold unit is in the top k (= hit@k)."""
    return hit_at_k(ranked, gold, k, primary_only=primary_only)


def recall_all(ranked: Ranked, gold: Gold, k: int, *, primary_only: bool = False) -> float | None:
    """LongMemEval recall_all@k: 1.0 only if every gold unit is in the top k."""
    r = recall_at_k(ranked, gold, k, primary_only=primary_only)
    return None if r is None else float(r == 1.0)


def evidence_recall_at_k(
    ranked_units: Ranked,
    evidence_ids: Collection[str],
    unit_to_evidence: Mapping[str, Iterable[str]] | None,
    k: int,
) -> float | None:
    """LoCoMo's recall accuracy: share of the evidence ids covered by the top-k units.

    ``unit_to_evidence`` says which evidence ids (dia_ids / source_refs) a unit covers: a message
    its own, a chunk its messages', a session all of its turns'. ``None`` means each unit id *is*
    an evidence id (turn level with dia_ids as unit ids). Units missing from the mapping cover
    nothing. None if there is no evidence.
    """
    wanted = set(evidence_ids)
    if not wanted:
        return None
    covered: set[str] = set()
    for _, unit in _top(ranked_units, k):
        if unit_to_evidence is None:
            covered.add(unit)
        else:
            covered.update(unit_to_evidence.get(unit, ()))
    return len(wanted & covered) / len(wanted)


# ----------------------------------------------------------------------------- whole runs


def refs_by_unit(
    messages: pa.Table,
    units: pa.Table | None = None,
    *,
    id_column: str | None = None,
    ref_column: str = "source_ref",
) -> tuple[dict[str, frozenset[str]], dict[str, str]]:
    """(unit -> covered references, unit -> conversation_id) for :func:`evaluate_run`.

    ``messages`` is a raw_messages table (message_id, conversation_id and ``ref_column``:
    "source_ref" for LoCoMo dia_ids, "message_id" for gold given as message ids). Without
    ``units`` the units are the messages; with a chunks or sessions table (``id_column``
    defaults to chunk_id, else session_id) a unit covers the references of its message_ids.
    """
    m = messages.select(["message_id", "conversation_id", ref_column]).to_pydict()
    ref_of = dict(zip(m["message_id"], m[ref_column], strict=True))
    conv_of = dict(zip(m["message_id"], m["conversation_id"], strict=True))
    if units is None:
        refs = {mid: frozenset([r]) if r is not None else frozenset() for mid, r in ref_of.items()}
        return refs, {mid: c for mid, c in conv_of.items() if c is not None}
    if id_column is None:
        id_column = "chunk_id" if "chunk_id" in units.column_names else "session_id"
    u = units.select([id_column, "message_ids"]).to_pydict()
    unit_refs: dict[str, frozenset[str]] = {}
    unit_corpus: dict[str, str] = {}
    for uid, mids in zip(u[id_column], u["message_ids"], strict=True):
        mids = mids or []
        unit_refs[uid] = frozenset(ref_of[x] for x in mids if ref_of.get(x) is not None)
        corpus = next((conv_of[x] for x in mids if conv_of.get(x) is not None), None)
        if corpus is not None:
            unit_corpus[uid] = corpus
    return unit_refs, unit_corpus


_Metric = Callable[[Ranked, Gold, int], "float | None"]
_UNIT_METRICS: dict[str, _Metric] = {
    "recall": recall_at_k,
    "recall_primary": lambda r, g, k: recall_at_k(r, g, k, primary_only=True),
    "hit": hit_at_k,
    "mrr": mrr_at_k,
    "ndcg": ndcg_at_k,
    "recall_any": recall_any,
    "recall_all": recall_all,
}
METRICS = (*_UNIT_METRICS, "evidence_recall")


def _reverse_index(
    unit_refs: Mapping[str, Iterable[str]], unit_corpus: Mapping[str, str] | None
) -> dict[tuple[str | None, str], list[str]]:
    index: dict[tuple[str | None, str], list[str]] = defaultdict(list)
    for unit, refs in unit_refs.items():
        corpus = unit_corpus.get(unit) if unit_corpus is not None else None
        for ref in set(refs):
            index[corpus, ref].append(unit)
    return index


def evaluate_run(
    questions: Sequence[EvalQuestion],
    rankings: Mapping[str, Ranked],
    ks: Sequence[int] = KS,
    *,
    unit_refs: Mapping[str, Iterable[str]] | None = None,
    unit_corpus: Mapping[str, str] | None = None,
    metrics: Sequence[str] = METRICS,
) -> pa.Table:
    """Score one retrieval run: one row per (question, metric, k), value null when undefined.

    ``rankings`` maps question_id -> ranked unit ids; every question needs an entry (pass []
    for a retrieval that returned nothing), so a forgotten question fails loudly instead of
    silently scoring 0.

    When the units are not the gold references themselves (LoCoMo gold = dia_ids, units =
    chunks or sessions), ``unit_refs`` maps unit id -> the references it covers. The unit-level
    gold is then every unit covering a gold reference, graded with the best grade it covers;
    ``evidence_recall`` is the share of gold references covered (LoCoMo's measure). Give
    ``unit_corpus`` (unit id -> corpus id) when references repeat across corpora (every LoCoMo
    conversation has a "D1:1"): only units of the question's ``corpus_id`` are then gold.
    """
    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise ValueError(f"unknown metrics {unknown}; known: {list(METRICS)}")
    for k in ks:
        _check_k(k)
    missing = [q.question_id for q in questions if q.question_id not in rankings]
    if missing:
        raise KeyError(f"no ranking for {len(missing)} question(s), e.g. {missing[:5]}")
    index = _reverse_index(unit_refs, unit_corpus) if unit_refs is not None else None

    cols: dict[str, list] = {name: [] for name in RUN_SCHEMA.names}
    for q in questions:
        ranked = list(rankings[q.question_id])
        refs = {r: g for r, g in q.gold.items() if g >= 1}
        if index is None:
            unit_gold: dict[str, int] = refs
        else:
            unit_gold = {}
            corpus = q.corpus_id if unit_corpus is not None else None
            for ref, grade in refs.items():
                for unit in index.get((corpus, ref), ()):
                    unit_gold[unit] = max(grade, unit_gold.get(unit, 0))
        cover = unit_refs
        if unit_refs is not None and unit_corpus is not None:
            # a unit of another corpus covers nothing, even if its refs look the same
            cover = {
                u: unit_refs[u]
                for u in ranked
                if u in unit_refs and unit_corpus.get(u) == q.corpus_id
            }
        for name in metrics:
            for k in ks:
                if name == "evidence_recall":
                    value = evidence_recall_at_k(ranked, refs, cover, k)
                else:
                    value = _UNIT_METRICS[name](ranked, unit_gold, k)
                cols["question_id"].append(q.question_id)
                cols["corpus_id"].append(q.corpus_id)
                cols["qtype"].append(q.qtype)
                cols["metric"].append(name)
                cols["k"].append(k)
                cols["value"].append(value)
    return pa.table(cols, schema=RUN_SCHEMA)


def summarize(
    rows: pa.Table,
    by: Sequence[str] = ("qtype",),
    *,
    overall: bool = True,
    ci: bool = False,
    n_resamples: int = 5000,
    seed: int = 0,
    alpha: float = 0.05,
) -> pa.Table:
    """Macro-average an :func:`evaluate_run` table per group of ``by`` and overall.

    Columns: the ``by`` columns (``"all"`` in the overall rows, which average all questions, not
    the group means), metric, k, mean (null when no question has a value), n (questions
    averaged), n_excluded (questions without gold), and with ``ci=True`` a percentile-bootstrap
    interval (ci_lo, ci_hi) over questions. A group literally named "all" would merge with the
    overall rows.
    """
    by = tuple(by)
    data = rows.select([*by, "metric", "k", "value"]).to_pydict()
    groups: dict[tuple, list[float | None]] = defaultdict(list)
    order: dict[tuple[str, int], None] = {}
    for i, value in enumerate(data["value"]):
        mk = (data["metric"][i], data["k"][i])
        order.setdefault(mk, None)
        key = tuple(data[c][i] for c in by)
        if overall or not by:
            groups[(OVERALL,) * len(by) + mk].append(value)
        if by:
            groups[key + mk].append(value)
    keys = sorted({g[: len(by)] for g in groups}, key=lambda g: (g != (OVERALL,) * len(by), g))
    metric_rank = {mk: i for i, mk in enumerate(order)}
    out: dict[str, list] = {c: [] for c in (*by, "metric", "k", "mean", "n", "n_excluded")}
    if ci:
        out["ci_lo"], out["ci_hi"] = [], []
    for gkey in keys:
        for mk in sorted((m for m in order if gkey + m in groups), key=metric_rank.__getitem__):
            values = [v for v in groups[gkey + mk] if v is not None and not math.isnan(v)]
            for c, v in zip(by, gkey, strict=True):
                out[c].append(v)
            out["metric"].append(mk[0])
            out["k"].append(mk[1])
            out["mean"].append(float(np.mean(values)) if values else None)
            out["n"].append(len(values))
            out["n_excluded"].append(len(groups[gkey + mk]) - len(values))
            if ci:
                _, lo, hi = bootstrap_ci(values, n_resamples=n_resamples, seed=seed, alpha=alpha)
                out["ci_lo"].append(None if math.isnan(lo) else lo)
                out["ci_hi"].append(None if math.isnan(hi) else hi)
    types = {c: pa.string() for c in by} | {
        "metric": pa.string(),
        "k": pa.int32(),
        "mean": pa.float64(),
        "n": pa.int64(),
        "n_excluded": pa.int64(),
        "ci_lo": pa.float64(),
        "ci_hi": pa.float64(),
    }
    return pa.table({c: pa.array(v, type=types[c]) for c, v in out.items()})


# ----------------------------------------------------------------------------- statistics


def _clean(values: Iterable[float | None]) -> np.ndarray:
    arr = np.array([np.nan if v is None else v for v in values], dtype=np.float64)
    return arr[~np.isnan(arr)]


def _resample_means(values: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    """Means of ``n_resamples`` resamples drawn as one (n_resamples, n) index matrix."""
    if n_resamples < 1:
        raise ValueError("n_resamples must be >= 1")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(values), size=(n_resamples, len(values)))
    return values[idx].mean(axis=1)


def bootstrap_ci(
    values: Iterable[float | None], n_resamples: int = 5000, seed: int = 0, alpha: float = 0.05
) -> tuple[float, float, float]:
    """(mean, lo, hi): percentile bootstrap CI of the mean over questions.

    None/NaN values (questions without gold) are dropped first; no values -> (nan, nan, nan).
    The same seed and values give the same interval.
    """
    v = _clean(values)
    if v.size == 0:
        return (math.nan, math.nan, math.nan)
    means = _resample_means(v, n_resamples, seed)
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return (float(v.mean()), float(lo), float(hi))


def paired_bootstrap_diff(
    a: Sequence[float | None],
    b: Sequence[float | None],
    n_resamples: int = 5000,
    seed: int = 0,
    alpha: float = 0.05,
) -> tuple[float, float, float, float]:
    """(mean a-b, lo, hi, p): paired bootstrap over the same questions for two configurations.

    ``a[i]`` and ``b[i]`` must score the same question; pairs where either is None/NaN are
    dropped. Both runs use the same resampled questions (one index matrix over the paired
    differences), so per-question difficulty cancels out. ``p`` is the two-sided bootstrap
    p-value of "no difference": the share of centred resampled mean differences at least as far
    from 0 as the observed one, as (count + 1) / (n_resamples + 1) so it is never 0. Identical
    runs give (0, 0, 0, 1).
    """
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length: {len(a)} vs {len(b)}")
    pairs = np.array(
        [
            (np.nan if x is None else x, np.nan if y is None else y)
            for x, y in zip(a, b, strict=True)
        ],
        dtype=np.float64,
    ).reshape(-1, 2)
    pairs = pairs[~np.isnan(pairs).any(axis=1)]
    if len(pairs) == 0:
        return (math.nan, math.nan, math.nan, math.nan)
    diff = pairs[:, 0] - pairs[:, 1]
    observed = float(diff.mean())
    means = _resample_means(diff, n_resamples, seed)
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    extreme = np.abs(means - observed) >= abs(observed) - 1e-12
    p = (int(extreme.sum()) + 1) / (n_resamples + 1)
    return (observed, float(lo), float(hi), p)


def split_questions(
    question_ids: Sequence[str],
    groups: Sequence[str],
    dev_share: float = 0.5,
    seed: int = 0,
) -> tuple[list[str], list[str]]:
    """Seeded dev/test split for tuning (e.g. fusion weights) without testing on the tuning set.

    With >= 2 distinct groups (conversations), whole groups go to one side so a conversation's
    questions never leak from dev into test; ``round(dev_share * n_groups)`` groups (at least 1,
    at most n_groups - 1) go to dev. With one group it splits questions the same way. Both lists
    keep the input order; the same inputs and seed give the same split.
    """
    if len(question_ids) != len(groups):
        raise ValueError(f"{len(question_ids)} question ids but {len(groups)} groups")
    if not 0.0 < dev_share < 1.0:
        raise ValueError(f"dev_share must be in (0, 1), got {dev_share}")
    rng = np.random.default_rng(seed)
    distinct = sorted(set(groups))
    if len(distinct) >= 2:
        units, keys = distinct, list(groups)
    else:
        units, keys = sorted(set(question_ids)), list(question_ids)
    if not units:
        return [], []
    n_dev = min(max(round(dev_share * len(units)), 1), len(units) - 1) if len(units) > 1 else 1
    perm = rng.permutation(len(units))
    dev_units = {units[i] for i in perm[:n_dev]}
    dev = [q for q, key in zip(question_ids, keys, strict=True) if key in dev_units]
    test = [q for q, key in zip(question_ids, keys, strict=True) if key not in dev_units]
    return dev, test
