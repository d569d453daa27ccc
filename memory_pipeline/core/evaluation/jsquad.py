"""Japanese paragraph retrieval on JSQuAD: does dense retrieval work on Japanese at all?

LoCoMo is English, so it cannot tell a multilingual embedder from an English-only one.
JSQuAD (v1.3, the JGLUE reading-comprehension set) gives Japanese Wikipedia paragraphs with
questions written about each: the paragraphs are the documents, each question's gold is the
paragraph it was asked on. Retrievers: BM25 with the project's Japanese tokenizer (``auto``
picks it from the texts), dense with each embedder (long paragraphs split to the model
window, scored by the best piece, as in the pipeline), and two hybrids fixed in advance (RRF
k=60, and linear fusion at the packaged selection's beta), so nothing is tuned on JSQuAD.

CIs: percentile bootstrap that resamples **articles** (questions of one article share its
paragraphs and topic, so they are not independent), with the mean over the resampled
articles' questions.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from memory_pipeline.core.indexes.bm25 import build_index
from memory_pipeline.core.represent.build import split_for
from memory_pipeline.core.represent.providers.base import Embedder
from memory_pipeline.core.retrieval.fusion import Ranked, linear_fusion, rrf

POOL = 100
KS = (1, 5, 10)
RRF_K = 60


class JsquadFormatError(ValueError):
    """The file is not in SQuAD/JSQuAD JSON format (one line naming file and place)."""


@dataclass(frozen=True)
class Paragraph:
    paragraph_id: str
    article: str
    text: str


@dataclass(frozen=True)
class Question:
    question_id: str
    article: str
    text: str
    gold: str  # paragraph_id


def load_jsquad(
    path: Path, max_articles: int | None = None
) -> tuple[list[Paragraph], list[Question]]:
    """Paragraphs and answerable questions of a JSQuAD file (the first ``max_articles``).

    A context is ``"title [SEP] text"``; the title stays in the document (as a newline), as
    a chunk's identity sentence does. Questions marked impossible are left out.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))["data"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise JsquadFormatError(f"{path}: not a JSQuAD file ({type(exc).__name__})") from None
    paragraphs: list[Paragraph] = []
    questions: list[Question] = []
    for a, article in enumerate(data[:max_articles] if max_articles else data):
        try:
            title = str(article["title"])
            for p, para in enumerate(article["paragraphs"]):
                pid = f"a{a}p{p}"
                text = str(para["context"]).replace(" [SEP] ", "\n", 1)
                paragraphs.append(Paragraph(pid, title, text))
                for qa in para["qas"]:
                    if qa.get("is_impossible"):
                        continue
                    questions.append(Question(str(qa["id"]), title, str(qa["question"]), pid))
        except (KeyError, TypeError) as exc:
            raise JsquadFormatError(
                f"{path}: article {a} ({type(exc).__name__}: {exc}) is not in JSQuAD format"
            ) from None
    return paragraphs, questions


def dense_rankings(
    embedder: Embedder, paragraphs: Sequence[Paragraph], questions: Sequence[Question]
) -> tuple[list[Ranked], dict]:
    """Top-``POOL`` paragraphs per question by max-sim over each paragraph's pieces."""
    t0 = time.perf_counter()
    pieces = split_for(embedder, [p.text for p in paragraphs])
    flat = [x for ps in pieces for x in ps]
    owner = np.array([i for i, ps in enumerate(pieces) for _ in ps], dtype=np.int64)
    docs = embedder.embed(flat, input_type="document").vectors
    t1 = time.perf_counter()
    queries = embedder.embed([q.text for q in questions], input_type="query").vectors
    t2 = time.perf_counter()
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    ids = [p.paragraph_id for p in paragraphs]
    out: list[Ranked] = []
    for row in range(0, len(questions), 256):
        scores = queries[row : row + 256] @ docs.T
        best = np.maximum.reduceat(scores, starts, axis=1)
        top = np.argsort(-best, axis=1, kind="stable")[:, :POOL]
        for r, cols in enumerate(top):
            out.append([(ids[c], float(best[r, c])) for c in cols])
    stats = {
        "documents_per_s": round(len(flat) / max(t1 - t0, 1e-9), 1),
        "queries_per_s": round(len(questions) / max(t2 - t1, 1e-9), 1),
        "pieces": len(flat),
        "split_paragraphs": int(sum(len(ps) > 1 for ps in pieces)),
    }
    return out, stats


def bm25_rankings(
    paragraphs: Sequence[Paragraph], questions: Sequence[Question], tokenizer: str = "auto"
) -> tuple[list[Ranked], dict]:
    """Top-``POOL`` paragraphs per question by BM25 (the pipeline's index and tokenizer)."""
    index = build_index([p.paragraph_id for p in paragraphs], [p.text for p in paragraphs],
                        tokenizer)
    ranked = index.search_many([q.text for q in questions], k=POOL)
    return [list(r) for r in ranked], {"tokenizer": index.tokenizer.name}


def scores_for(ranked: Sequence[Ranked], questions: Sequence[Question]) -> dict[str, np.ndarray]:
    """Per question: hit@k for ``KS`` and reciprocal rank (0 beyond the pool)."""
    out: dict[str, list[float]] = {f"R@{k}": [] for k in KS}
    out["MRR"] = []
    for r, q in zip(ranked, questions, strict=True):
        ids = [c for c, _ in r]
        rank = ids.index(q.gold) + 1 if q.gold in ids else None
        for k in KS:
            out[f"R@{k}"].append(1.0 if rank is not None and rank <= k else 0.0)
        out["MRR"].append(1.0 / rank if rank else 0.0)
    return {k: np.asarray(v, dtype=np.float64) for k, v in out.items()}


def article_bootstrap(
    values: np.ndarray, articles: Sequence[str], resamples: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """(mean, lo, hi) of a per-question metric, resampling articles with replacement."""
    names = sorted(set(articles))
    where = {a: i for i, a in enumerate(names)}
    group = np.array([where[a] for a in articles])
    sums = np.bincount(group, weights=values, minlength=len(names))
    counts = np.bincount(group, minlength=len(names)).astype(np.float64)
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, len(names), size=(resamples, len(names)))
    means = sums[pick].sum(axis=1) / np.maximum(counts[pick].sum(axis=1), 1.0)
    lo, hi = np.quantile(means, [0.025, 0.975])
    return float(values.mean()), float(lo), float(hi)


def run_jsquad(
    paragraphs: Sequence[Paragraph],
    questions: Sequence[Question],
    embedders: Mapping[str, Embedder],
    *,
    tokenizer: str = "auto",
    beta: float = 0.9,
    resamples: int = 2000,
    seed: int = 0,
) -> list[dict]:
    """One row per retriever: R@1/R@5/R@10/MRR with article-bootstrap 95% CIs."""
    articles = [q.article for q in questions]
    runs: dict[str, tuple[list[Ranked], dict]] = {}
    lexical, bstats = bm25_rankings(paragraphs, questions, tokenizer)
    runs["bm25"] = (lexical, bstats)
    for name, embedder in embedders.items():
        dense, dstats = dense_rankings(embedder, paragraphs, questions)
        runs[f"dense[{name}]"] = (dense, dstats)
        runs[f"rrf{RRF_K}[bm25+{name}]"] = (
            [rrf([a, b], k=RRF_K) for a, b in zip(lexical, dense, strict=True)],
            {},
        )
        runs[f"linear{beta}[bm25+{name}]"] = (
            [linear_fusion(a, b, beta) for a, b in zip(lexical, dense, strict=True)],
            {},
        )
    rows = []
    for name, (ranked, stats) in runs.items():
        row: dict = {"retriever": name, "questions": len(questions)}
        for metric, values in scores_for(ranked, questions).items():
            mean, lo, hi = article_bootstrap(values, articles, resamples, seed)
            row[metric] = round(mean, 4)
            row[f"{metric}_ci"] = [round(lo, 4), round(hi, 4)]
        row.update(stats)
        rows.append(row)
    return rows


def render_markdown(rows: Sequence[dict], paragraphs: int, articles: int) -> str:
    """The rows as a Markdown table (CIs in brackets)."""
    lines = [
        f"JSQuAD paragraph retrieval: {paragraphs} paragraphs, {rows[0]['questions']} questions,"
        f" {articles} articles; 95% CI resampling articles",
        "",
        "| retriever | R@1 | R@5 | MRR |",
        "| --- | --- | --- | --- |",
    ]
    for r in rows:
        cells = [f"{r[m]:.3f} [{r[m + '_ci'][0]:.3f}, {r[m + '_ci'][1]:.3f}]"
                 for m in ("R@1", "R@5", "MRR")]
        lines.append(f"| {r['retriever']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


__all__ = [
    "JsquadFormatError",
    "Paragraph",
    "Question",
    "article_bootstrap",
    "bm25_rankings",
    "dense_rankings",
    "load_jsquad",
    "render_markdown",
    "run_jsquad",
    "scores_for",
]
