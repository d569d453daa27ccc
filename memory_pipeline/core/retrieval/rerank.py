"""A learned turn reranker: a logistic model over cheap features of the fused candidates.

The granularity fusion (turns.py) adds scores with fixed weights; which signal matters
depends on the question (a speaker named in the query, a date, a turn that only makes sense
with its neighbours). A logistic model over those signals, trained on labelled dev
questions, reorders the top ``CANDIDATES`` fused turns. It is small enough to ship as JSON
(one weight per feature), deterministic (Newton's method from zero, no sampling), loads with
the standard library, and when the artifact is absent or of another version search keeps
the unlearned ranking.

Features (per candidate turn, each computed from arrays search already holds):
``own``/``ctx``: BM25 of the turn / its neighbours scaled by the query's best;
``own_raw``: log1p of the turn's BM25; ``chunk``: its best chunk's fused score (scaled);
``session``: its session's best chunk; ``fused``: the unlearned turn score; ``inv_rank``:
1 / its unlearned rank; ``speaker``: the query names the turn's speaker; ``time``: the
turn's date matches a time expression of the query (0 when the query has none);
``position``: offset in its session / session length; ``first``: the session's first turn;
``length``: log1p of the turn's token count.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np

FEATURES = (
    "own",
    "ctx",
    "own_raw",
    "chunk",
    "session",
    "fused",
    "inv_rank",
    "speaker",
    "time",
    "position",
    "first",
    "length",
)
ARTIFACT = "reranker.json"
ARTIFACT_VERSION = 1
CANDIDATES = 50  # fused turns the model reorders (the rest keep their unlearned order)
L2 = 1.0


@dataclass(frozen=True)
class Reranker:
    """Standardization and weights of a trained logistic model, with its provenance."""

    features: tuple[str, ...]
    mean: np.ndarray
    std: np.ndarray
    weights: np.ndarray
    bias: float
    provenance: Mapping[str, Any]

    def score(self, x: np.ndarray) -> np.ndarray:
        """The model's logit for each row of ``x`` (columns in ``FEATURES`` order)."""
        z = (np.asarray(x, dtype=np.float64) - self.mean) / self.std
        return z @ self.weights + self.bias

    def to_dict(self) -> dict[str, Any]:
        """The artifact as stored (rounded: a readable, reviewable diff)."""
        return {
            "version": ARTIFACT_VERSION,
            "features": list(self.features),
            "mean": [round(float(v), 6) for v in self.mean],
            "std": [round(float(v), 6) for v in self.std],
            "weights": [round(float(v), 6) for v in self.weights],
            "bias": round(float(self.bias), 6),
            "provenance": dict(self.provenance),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Reranker:
        """A model from its artifact (ValueError: another version or other features)."""
        if d.get("version") != ARTIFACT_VERSION or tuple(d.get("features", ())) != FEATURES:
            raise ValueError(
                f"reranker artifact version {d.get('version')!r} with features "
                f"{d.get('features')!r}: this code reads version {ARTIFACT_VERSION} {FEATURES}"
            )
        return cls(
            FEATURES,
            np.asarray(d["mean"], dtype=np.float64),
            np.asarray(d["std"], dtype=np.float64),
            np.asarray(d["weights"], dtype=np.float64),
            float(d["bias"]),
            dict(d.get("provenance", {})),
        )


def train(
    x: np.ndarray,
    y: np.ndarray,
    groups: Sequence[str] | None = None,
    l2: float = L2,
    iterations: int = 50,
    provenance: Mapping[str, Any] | None = None,
) -> Reranker:
    """Logistic regression by Newton's method (L2 ``l2`` on the standardized weights).

    Deterministic: same rows in, same weights out. Each question's candidate rows are
    weighted so every question counts once (``groups``: the question of each row), not in
    proportion to how many candidates it had."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != len(FEATURES) or len(y) != len(x):
        raise ValueError(f"need an (n, {len(FEATURES)}) matrix and n labels, got {x.shape}")
    mean = x.mean(axis=0) if len(x) else np.zeros(x.shape[1])
    std = x.std(axis=0) if len(x) else np.ones(x.shape[1])
    std = np.where(std > 1e-9, std, 1.0)
    z = np.hstack([(x - mean) / std, np.ones((len(x), 1))])
    if groups is not None:
        _, inverse, counts = np.unique(np.asarray(groups), return_inverse=True, return_counts=True)
        sw = 1.0 / counts[inverse]
        sw = sw * (len(x) / sw.sum()) if len(x) else sw
    else:
        sw = np.ones(len(x))
    w = np.zeros(z.shape[1])
    reg = np.full(z.shape[1], l2)
    reg[-1] = 0.0  # the bias is not shrunk
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(z @ w)))
        grad = z.T @ (sw * (p - y)) + reg * w
        hess = (z * (sw * p * (1 - p))[:, None]).T @ z + np.diag(reg + 1e-9)
        step = np.linalg.solve(hess, grad)
        w -= step
        if float(np.abs(step).max()) < 1e-8:
            break
    return Reranker(FEATURES, mean, std, w[:-1], float(w[-1]), dict(provenance or {}))


def rerank(turns: Sequence[tuple[str, float]], x: np.ndarray, model: Reranker | None) -> list:
    """``turns`` (the unlearned ranking, best first) with its first ``len(x)`` reordered by
    the model's score (ties: the unlearned order); unchanged when ``model`` is None."""
    if model is None or len(x) == 0:
        return list(turns)
    n = len(x)
    logits = model.score(x)
    order = sorted(range(n), key=lambda i: (-logits[i], i))
    return [(turns[i][0], float(logits[i])) for i in order] + list(turns[n:])


def render_artifact(d: Mapping[str, Any]) -> str:
    """An artifact dict as the package stores it (stable order, one trailing newline)."""
    return json.dumps(d, indent=1, ensure_ascii=False) + "\n"


def packaged_path() -> Any:
    """Where the packaged artifact lives (a source checkout's file, when accepting one)."""
    from pathlib import Path

    return Path(__file__).with_name(ARTIFACT)


def load_packaged() -> Reranker | None:
    """The packaged artifact (``core/retrieval/reranker.json``), or None when it is absent
    or unreadable by this code: search then ranks turns without it."""
    try:
        text = resources.files(__package__).joinpath(ARTIFACT).read_text(encoding="utf-8")
    except (FileNotFoundError, OSError):
        return None
    try:
        return Reranker.from_dict(json.loads(text))
    except (ValueError, KeyError, TypeError):
        return None
