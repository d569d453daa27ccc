"""Whether the memory holds an answer: a calibrated confidence and the answerable call.

Display scores are min-max normalized per query, so the top hit scores about 1.0 whatever
it is: they cannot say "I don't know". The confidence here is instead built from signals a
query can be compared on across queries and corpora:

``bm25_norm``: the best raw BM25 (raw_text) in scope over the query's own maximum (the sum
of its tokens' idf; each lucene term contribution is below its idf); ``present``: the idf
share of the query's content words (speaker names left out: they occur everywhere) found
anywhere in scope; ``cov_turn`` / ``cov_chunk``: the best idf share of those words held by
one of the top turns / chunks; ``dense_top``: the best raw cosine in scope; ``dense_margin``:
how far it stands above the scope's typical candidate (the median of the top
``MARGIN_DEPTH``); ``rerank_top``: the packaged turn reranker's logit for the top turn.

A small logistic model over them (coefficients, standardization and the threshold recorded
in ``selection.json`` with their provenance, fitted by ``benchmarks/calibrate_answerability.py``
on dev conversations only) gives ``confidence`` in [0, 1]; ``answerable`` is confidence at
or above the recorded threshold. A feature a search cannot compute (no dense vectors, no
reranker) takes its training mean: it then moves the confidence neither way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

FEATURES = (
    "bm25_norm",
    "present",
    "cov_turn",
    "cov_chunk",
    "dense_top",
    "dense_margin",
    "rerank_top",
)
MARGIN_DEPTH = 50  # candidates whose median is the scope's "typical" dense score
COVER_TURNS = 5  # top turns the coverage looks at
COVER_CHUNKS = 3  # top chunks the coverage looks at
NO_RELEVANT_MEMORY = "no relevant memory"


@dataclass(frozen=True)
class AnswerModel:
    """Standardization, logistic weights and the answerable threshold (from dev data)."""

    features: tuple[str, ...]
    mean: np.ndarray
    std: np.ndarray
    weights: np.ndarray
    bias: float
    threshold: float
    provenance: Mapping[str, Any] = field(default_factory=dict)

    def confidence(self, feats: Mapping[str, float | None]) -> float:
        """P(the memory holds the answer) for one query's features (missing: the mean)."""
        x = np.array(
            [
                m if feats.get(f) is None or not math.isfinite(feats[f]) else float(feats[f])
                for f, m in zip(self.features, self.mean, strict=True)
            ]
        )
        z = float(((x - self.mean) / self.std) @ self.weights + self.bias)
        return 1.0 / (1.0 + math.exp(-max(min(z, 40.0), -40.0)))

    def to_dict(self) -> dict[str, Any]:
        """As ``selection.json`` records it (rounded: a readable, reviewable diff)."""
        return {
            "features": list(self.features),
            "mean": [round(float(v), 6) for v in self.mean],
            "std": [round(float(v), 6) for v in self.std],
            "weights": [round(float(v), 6) for v in self.weights],
            "bias": round(float(self.bias), 6),
            "threshold": round(float(self.threshold), 6),
            "provenance": dict(self.provenance),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AnswerModel:
        """A model from its record (ValueError when it names features this code lacks)."""
        feats = tuple(d["features"])
        unknown = sorted(set(feats) - set(FEATURES))
        if unknown:
            raise ValueError(f"answerability features {unknown} unknown: this code has {FEATURES}")
        return cls(
            feats,
            np.asarray(d["mean"], dtype=np.float64),
            np.asarray(d["std"], dtype=np.float64),
            np.asarray(d["weights"], dtype=np.float64),
            float(d["bias"]),
            float(d["threshold"]),
            dict(d.get("provenance", {})),
        )


def load_model(selection: Mapping[str, Any]) -> AnswerModel | None:
    """The recorded model of a selection record, or None when it has none (every search
    is then answerable with confidence 1.0 when it has hits: the behaviour before)."""
    record = selection.get("answerability")
    if not record:
        return None
    return AnswerModel.from_dict(record)


def fit(
    x: np.ndarray, y: np.ndarray, l2: float = 1.0, iterations: int = 50
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(mean, std, weights, bias) of an L2 logistic regression on standardized ``x`` by
    Newton's method: deterministic, no dependency; both classes weigh the same in total
    (foreign questions outnumber own ones several times).

    Every signal is one where more means "more likely answerable", so no weight may be
    negative: a signal that would get one (it only corrects for another, correlated one on
    the training data) is dropped and the rest refitted. A negative weight would make a
    query that matches better look less answerable on another corpus."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    mean = x.mean(axis=0)
    std = x.std(axis=0)
    std = np.where(std > 1e-9, std, 1.0)
    z = (x - mean) / std
    keep = np.ones(x.shape[1], dtype=bool)
    while True:
        w, b = _newton(z[:, keep], y, l2, iterations)
        if (w >= 0).all() or keep.sum() <= 1:
            break
        drop = np.flatnonzero(keep)[int(np.argmin(w))]
        keep[drop] = False
    weights = np.zeros(x.shape[1])
    weights[keep] = np.maximum(w, 0.0)
    return mean, std, weights, b


def _newton(z: np.ndarray, y: np.ndarray, l2: float, iterations: int) -> tuple[np.ndarray, float]:
    """Weights and bias of the class-balanced L2 logistic regression on ``z``."""
    z = np.hstack([z, np.ones((len(z), 1))])
    pos = max(float(y.sum()), 1.0)
    neg = max(float(len(y) - y.sum()), 1.0)
    sw = np.where(y > 0.5, len(y) / (2 * pos), len(y) / (2 * neg))
    w = np.zeros(z.shape[1])
    reg = np.full(z.shape[1], l2)
    reg[-1] = 0.0
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(z @ w)))
        grad = z.T @ (sw * (p - y)) + reg * w
        hess = (z * (sw * p * (1 - p))[:, None]).T @ z + np.diag(reg + 1e-9)
        step = np.linalg.solve(hess, grad)
        w -= step
        if float(np.abs(step).max()) < 1e-9:
            break
    return w[:-1], float(w[-1])


def auroc(scores: Sequence[float], labels: Sequence[int]) -> float:
    """Area under the ROC curve (ties count half): P(an answerable query outscores an
    unanswerable one)."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=bool)
    pos, neg = s[y], s[~y]
    if not len(pos) or not len(neg):
        return float("nan")
    order = np.argsort(np.concatenate([pos, neg]), kind="mergesort")
    ranks = np.empty(len(order))
    allv = np.concatenate([pos, neg])[order]
    # average ranks over ties
    i = 0
    while i < len(allv):
        j = i
        while j + 1 < len(allv) and allv[j + 1] == allv[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    r_pos = ranks[: len(pos)].sum()
    return float((r_pos - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def idf_share(query: Sequence[str], held: set[str], idf: Mapping[str, float], top: float) -> float:
    """The idf-weighted share of the ``query`` tokens found in ``held`` (a token the corpus
    never saw weighs ``top``, the largest idf possible); 0.0 for a query without tokens."""
    weights = [idf.get(t, top) for t in query]
    total = sum(weights)
    if total <= 0:
        return 0.0
    return sum(w for t, w in zip(query, weights, strict=True) if t in held) / total
