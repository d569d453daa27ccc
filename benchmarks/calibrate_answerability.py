"""Calibrate search's answerability (``SearchResult.confidence`` / ``answerable``) on LoCoMo dev.

Protocol (own vs foreign questions): each dev conversation is asked its own questions
(answerable: the conversation holds their evidence) and the other conversations' questions
with their two speaker names replaced by this conversation's two speakers (a person who
exists, an event that does not: unanswerable). Every search is the public default search
scoped to the conversation (``Searcher.search(..., conversation=...)``), so the features are
exactly what ``search()`` computes.

Leave-one-conversation-out: for each held-out conversation a logistic model is fitted on the
queries that involve neither its content nor its questions (host and source both other
conversations), the threshold is chosen on those same training queries (the highest one
that still calls ``--own-target`` of the training own questions answerable), and both are
applied to the held-out conversation's own and foreign queries. Reported: AUROC of the
out-of-fold confidence, the share of own questions called answerable and of foreign ones
called unanswerable, each with a 95 % bootstrap CI over host conversations (resampled with
replacement, ``--resamples`` times). The shipped model is then fitted on every conversation
and written with its threshold and provenance into ``core/retrieval/selection.json``
(``--write``), and the figures to ``benchmarks/results/answerability.md``.

Only ``locomo_dev.json`` is read (the other LoCoMo conversations are the blind test).

    python benchmarks/calibrate_answerability.py --work /tmp/answerability          # figures
    python benchmarks/calibrate_answerability.py --work /tmp/answerability --write  # + record

The corpus is built once in ``--work`` through the real pipeline
(``eval_runner.build_corpus``, dense vectors of ``embedding_text`` only: the default reads no
other) and the per-query features are cached in ``--work``/features.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("MEMORY_PIPELINE_SHARED_DATA", ROOT.parent / "shared" / "data"))
LOCOMO = SHARED / "locomo" / "locomo_dev.json"
RESULTS = ROOT / "benchmarks" / "results" / "answerability.md"
GOALS = {"auroc": 0.85, "own_answerable": 0.90, "foreign_unanswerable": 0.60}


def build(locomo: Path, work: Path) -> Path:
    """The corpus config in ``work`` (built on the first call)."""
    import memory_pipeline.eval_runner as runner
    from memory_pipeline.defs.runner import stages

    config = work / "corpus" / "memory_pipeline.toml"
    if config.exists():
        return config
    runner.CORPUS_CONFIG = runner.CORPUS_CONFIG.replace(
        'dense = ["raw_text", "summary", "embedding_text"]', 'dense = ["embedding_text"]'
    )
    runner.corpus_stages = lambda: [
        *stages("ingest", "sessions", "chunks", "representations"),
        *stages("indexes"),
    ]
    return runner.build_corpus(locomo, work / "corpus", log=lambda m: print(m, file=sys.stderr))


def speakers(locomo: Path) -> dict[str, tuple[str, str]]:
    """Each conversation's (speaker_a, speaker_b)."""
    from memory_pipeline.core.ingest.sources.locomo import load_locomo_samples

    return {
        s["sample_id"]: (s["conversation"]["speaker_a"], s["conversation"]["speaker_b"])
        for s in load_locomo_samples(locomo)
    }


def swap_names(text: str, src: tuple[str, str], dst: tuple[str, str]) -> str:
    """``text`` with ``src``'s speakers replaced by ``dst``'s (a -> a, b -> b, whole words)."""
    mapping = {src[0]: dst[0], src[1]: dst[1]}
    pattern = re.compile(r"\b(" + "|".join(re.escape(n) for n in mapping) + r")\b")
    return pattern.sub(lambda m: mapping[m.group(1)], text)


def queries(
    locomo: Path, foreign_per_host: int, seed: int, own_per_host: int = 0
) -> list[dict[str, Any]]:
    """Own and foreign queries: {host, source, text, label, as_of}."""
    from memory_pipeline.core.evaluation.evalsets import load_locomo_questions

    questions, _ = load_locomo_questions(locomo)
    names = speakers(locomo)
    as_of = {q.corpus_id: q.as_of for q in questions}
    if own_per_host:  # a seeded sample of each conversation's questions
        rng0 = random.Random(seed)
        by_host: dict[str, list] = {}
        for q in questions:
            by_host.setdefault(q.corpus_id, []).append(q)
        questions = [
            q
            for h in sorted(by_host)
            for q in (
                by_host[h]
                if len(by_host[h]) <= own_per_host
                else rng0.sample(by_host[h], own_per_host)
            )
        ]
    out = [
        {
            "host": q.corpus_id,
            "source": q.corpus_id,
            "text": q.question,
            "label": 1,
            "as_of": q.as_of,
            "qid": q.question_id,
        }
        for q in questions
    ]
    rng = random.Random(seed)
    for host in sorted(names):
        foreign = [q for q in questions if q.corpus_id != host]
        if foreign_per_host and len(foreign) > foreign_per_host:
            foreign = rng.sample(foreign, foreign_per_host)
        for q in foreign:
            text = swap_names(q.question, names[q.corpus_id], names[host])
            out.append(
                {
                    "host": host,
                    "source": q.corpus_id,
                    "text": text,
                    "label": 0,
                    "as_of": as_of[host],
                    "qid": q.question_id,
                }
            )
    return out


def features(config: Path, rows: list[dict[str, Any]], cache: Path) -> list[dict[str, Any]]:
    """Each query searched by the default search in its host conversation; its features."""
    from memory_pipeline.config import load_config
    from memory_pipeline.core.retrieval import answerability as A
    from memory_pipeline.core.retrieval.searcher import DEFAULT, Searcher

    key = [(r["host"], r["text"]) for r in rows]
    if cache.exists():
        stored = json.loads(cache.read_text())
        if [tuple(k) for k in stored["key"]] == key:
            return stored["rows"]
    searcher = Searcher(load_config(config, env={}).output_dir)
    n = len(A.FEATURES)  # features are computed only when a model is loaded: a neutral one
    for lang in ("en", "ja"):
        searcher.answer_models[lang] = A.AnswerModel(
            A.FEATURES, np.zeros(n), np.ones(n), np.zeros(n), 0.0, 0.5
        )
    t0 = time.perf_counter()
    out = []
    for i, r in enumerate(rows):
        res = searcher.search(r["text"], 5, DEFAULT, conversation=r["host"], as_of=r["as_of"])
        out.append(
            {
                **{k: v for k, v in r.items() if k != "as_of"},
                "features": res.features,
                "kind": res.kind,
            }
        )
        if (i + 1) % 500 == 0:
            print(
                f"  {i + 1}/{len(rows)} searches, {time.perf_counter() - t0:.0f} s", file=sys.stderr
            )
    cache.write_text(json.dumps({"key": key, "rows": out}))
    return out


def matrix(rows: list[dict[str, Any]], feats: tuple[str, ...], mean=None) -> np.ndarray:
    """Feature matrix; a missing feature takes the column's mean (of ``mean`` when given)."""
    x = np.array(
        [
            [np.nan if r["features"].get(f) is None else r["features"][f] for f in feats]
            for r in rows
        ],
        dtype=np.float64,
    )
    fill = np.nanmean(x, axis=0) if mean is None else mean
    fill = np.where(np.isfinite(fill), fill, 0.0)
    return np.where(np.isnan(x), fill, x)


def choose_threshold(conf: np.ndarray, labels: np.ndarray, own_target: float) -> float:
    """The highest threshold that still calls ``own_target`` of the own questions
    answerable (most foreign questions refused at that recall)."""
    own = np.sort(conf[labels == 1])
    k = int(np.floor((1.0 - own_target) * len(own)))
    return float(own[k]) if len(own) else 0.5


def fit_model(rows, feats, own_target: float, l2: float):
    from memory_pipeline.core.retrieval import answerability as A

    x = matrix(rows, feats)
    y = np.array([r["label"] for r in rows])
    mean, std, w, b = A.fit(x, y, l2=l2)
    model = A.AnswerModel(feats, mean, std, w, b, 0.5)
    conf = np.array([model.confidence(dict(zip(feats, row, strict=True))) for row in x])
    thr = choose_threshold(conf, y, own_target)
    return A.AnswerModel(feats, mean, std, w, b, thr)


def loco(rows, feats, own_target: float, l2: float):
    """Out-of-fold (confidence, answerable) per row; the fold models."""
    hosts = sorted({r["host"] for r in rows})
    conf = np.zeros(len(rows))
    called = np.zeros(len(rows), dtype=bool)
    models = {}
    for h in hosts:
        train = [r for r in rows if r["host"] != h and r["source"] != h]
        model = fit_model(train, feats, own_target, l2)
        models[h] = model
        for i, r in enumerate(rows):
            if r["host"] == h:
                f = {k: r["features"].get(k) for k in feats}
                conf[i] = model.confidence(f)
                called[i] = conf[i] >= model.threshold
    return conf, called, models


def figures(rows, conf, called) -> dict[str, float]:
    from memory_pipeline.core.retrieval.answerability import auroc

    y = np.array([r["label"] for r in rows])
    return {
        "auroc": auroc(conf, y),
        "own_answerable": float(called[y == 1].mean()),
        "foreign_unanswerable": float((~called[y == 0]).mean()),
    }


def bootstrap(rows, conf, called, resamples: int, seed: int) -> dict[str, tuple[float, float]]:
    """95 % CIs resampling host conversations with replacement."""
    hosts = sorted({r["host"] for r in rows})
    idx = {h: [i for i, r in enumerate(rows) if r["host"] == h] for h in hosts}
    rng = np.random.default_rng(seed)
    draws: dict[str, list[float]] = {k: [] for k in GOALS}
    for _ in range(resamples):
        pick = rng.choice(hosts, size=len(hosts), replace=True)
        ii = [i for h in pick for i in idx[h]]
        sub = [rows[i] for i in ii]
        f = figures(sub, conf[ii], called[ii])
        for k, v in f.items():
            if np.isfinite(v):
                draws[k].append(v)
    return {
        k: (float(np.percentile(v, 2.5)), float(np.percentile(v, 97.5))) for k, v in draws.items()
    }


def report(lines: list[str], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    from memory_pipeline.core.evaluation.selection import file_digest, packaged_path, render
    from memory_pipeline.core.retrieval import answerability as A

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--locomo", type=Path, default=LOCOMO)
    p.add_argument("--work", type=Path, default=Path("/tmp/answerability"))
    p.add_argument("--foreign-per-host", type=int, default=0, help="0: every foreign question")
    p.add_argument("--own-target", type=float, default=0.92)
    p.add_argument("--l2", type=float, default=1.0)
    p.add_argument("--resamples", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--features", default=",".join(A.FEATURES))
    p.add_argument("--write", action="store_true", help="record the model in selection.json")
    p.add_argument("--own-per-host", type=int, default=0, help="0: every own question")
    p.add_argument(
        "--language",
        default="en",
        help="whose model --write records (en: the top-level record, else languages.<lang>)",
    )
    p.add_argument("--results", type=Path, default=RESULTS)
    p.add_argument("--title", default="LoCoMo dev", help="what the data is (for the report)")
    args = p.parse_args(argv)
    feats = tuple(args.features.split(","))
    args.work.mkdir(parents=True, exist_ok=True)
    config = build(args.locomo, args.work)
    rows = features(
        config,
        queries(args.locomo, args.foreign_per_host, args.seed, args.own_per_host),
        args.work / "features.json",
    )
    n_own = sum(r["label"] for r in rows)
    print(f"{len(rows)} queries: {n_own} own, {len(rows) - n_own} foreign")
    conf, called, models = loco(rows, feats, args.own_target, args.l2)
    fig = figures(rows, conf, called)
    ci = bootstrap(rows, conf, called, args.resamples, args.seed)
    y = np.array([r["label"] for r in rows])
    singles = {}
    for f in feats:  # each signal alone, out of fold (the same protocol)
        c1, k1, _ = loco(rows, (f,), args.own_target, args.l2)
        singles[f] = figures(rows, c1, k1)
    per_host = {}
    for h in sorted({r["host"] for r in rows}):
        ii = [i for i, r in enumerate(rows) if r["host"] == h]
        per_host[h] = figures([rows[i] for i in ii], conf[ii], called[ii])
    final = fit_model(rows, feats, args.own_target, args.l2)
    lines = [
        f"# Answerability on {args.title} (leave-one-conversation-out)",
        "",
        f"Data: `{args.locomo.name}` (sha256 {file_digest(args.locomo)[:16]}…), "
        f"{len({r['host'] for r in rows})} conversations; {n_own} own questions (answerable), "
        f"{len(rows) - n_own} foreign questions with the speaker names swapped (unanswerable).",
        f"Search: the shipped default, scoped to the host conversation. Threshold per fold: "
        f"the highest calling {args.own_target:.2f} of the training own questions answerable.",
        f"CIs: 95 % bootstrap over host conversations ({args.resamples} resamples).",
        "Command: `python benchmarks/calibrate_answerability.py "
        + " ".join(sys.argv[1:] if argv is None else argv)
        + "`",
        "",
        "| figure (unseen conversation) | value | 95 % CI | goal |",
        "|---|---|---|---|",
    ]
    for k, goal in GOALS.items():
        lines.append(f"| {k} | {fig[k]:.3f} | {ci[k][0]:.3f}–{ci[k][1]:.3f} | ≥ {goal:.2f} |")
    lines += [
        "",
        "Each signal alone (same protocol):",
        "",
        "| signal | AUROC | own answerable | foreign unanswerable |",
        "|---|---|---|---|",
    ]
    for f, v in singles.items():
        lines.append(
            f"| {f} | {v['auroc']:.3f} | {v['own_answerable']:.3f} | "
            f"{v['foreign_unanswerable']:.3f} |"
        )
    lines += [
        "",
        "Per held-out conversation:",
        "",
        "| conversation | AUROC | own answerable | foreign unanswerable | threshold |",
        "|---|---|---|---|---|",
    ]
    for h, v in per_host.items():
        lines.append(
            f"| {h} | {v['auroc']:.3f} | {v['own_answerable']:.3f} | "
            f"{v['foreign_unanswerable']:.3f} | {models[h].threshold:.3f} |"
        )
    weights = ", ".join(f"{f} {w:+.2f}" for f, w in zip(feats, final.weights, strict=True))
    lines += [
        "",
        f"Shipped model (all conversations): standardized weights {weights}; "
        f"bias {final.bias:+.2f}; threshold {final.threshold:.3f}.",
    ]
    print("\n".join(lines))
    report(lines, args.results)
    if args.write:
        path = packaged_path()
        record = json.loads(path.read_text(encoding="utf-8"))
        model = final.to_dict()
        model["provenance"] = {
            "data": {
                "file": args.locomo.name,
                "sha256": file_digest(args.locomo),
                "conversations": len(per_host),
                "own": n_own,
                "foreign": len(rows) - n_own,
            },
            "protocol": "own questions (answerable) vs the other conversations' questions "
            "with the two speaker names swapped (unanswerable), searched by the default "
            "scoped to the conversation; leave-one-conversation-out; threshold: the highest "
            f"calling {args.own_target:.2f} of the training own questions answerable; CIs: "
            "bootstrap over conversations",
            "figures": {
                k: [round(fig[k], 4), round(ci[k][0], 4), round(ci[k][1], 4)] for k in GOALS
            },
            "command": "python benchmarks/calibrate_answerability.py "
            + " ".join(sys.argv[1:] if argv is None else argv),
            "date": dt.date.today().isoformat(),
        }
        if args.language == "en":
            record["answerability"] = model
        else:
            record.setdefault("languages", {}).setdefault(args.language, {})
            record["languages"][args.language]["answerability"] = model
        path.write_text(render(record), encoding="utf-8")
        print(f"wrote the model to {path}")
    _ = y
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
