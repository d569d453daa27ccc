"""The Japanese chat check: retrieval and answerability on RealPersonaChat speakers' histories.

Questions: ``memory_pipeline_tests/fixtures/rpc_chat_check/questions.jsonl``
(``core/evaluation/evalsets_rpc``; how it was built and its limits: the ``README.md`` beside
it). Each corpus is one speaker's history
indexed through the real pipeline (``benchmarks/rpc_corpora.py``); every search is
``Searcher.search`` on it.

``retrieval``: BM25 alone, dense alone, the shipped Japanese default and the other Japanese
candidates (``select_japanese.pipeline_variants`` and the fusion weights), each scored by
turn R@5 (an evidence utterance among the top 5 turns) and dialogue R@5 (a top-5 session in
an evidence dialogue), with 95 % CIs resampling speakers then questions
(``crossval.cluster_bootstrap_ci``), and the leave-one-speaker-out selection among them.

``answerability``: the protocol of ``calibrate_answerability.py`` on this set: each speaker's
history is asked its own questions (answerable) and the other speakers' questions with the
name replaced by this speaker's (unanswerable: a person who exists, a fact they never
stated). Reported for the English-fit model applied to Japanese, the uncalibrated rule
(answerable whenever there are hits: what Japanese searches do with no Japanese model) and
a model fitted on this set leave-one-speaker-out; ``--write`` records the model fitted on
every speaker as ``languages.ja.answerability`` in ``selection.json``.

    python benchmarks/japanese_chat_check.py retrieval --work /work/scratch/ja/rpc
    python benchmarks/japanese_chat_check.py answerability --work /work/scratch/ja/rpc [--write]

Corpora are built on first use (about 1.5 min each); hits and features are cached in --work.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from rpc_corpora import RPC, build_speaker  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "japanese_chat_check.md"
ANSWER_RESULTS = ROOT / "benchmarks" / "results" / "answerability_ja.md"
K = 5


def variants() -> dict[str, Any]:
    """The rankings scored: the single retrievers, the shipped Japanese default and the
    Japanese candidates (the English default's changes that could matter on Japanese and
    the fusion weights), all with the shipped Japanese turn settings unless named."""
    from memory_pipeline.core.retrieval.config import DEFAULTS

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from select_japanese import pipeline_variants

    ja = DEFAULTS["ja"]
    out = {
        "Japanese default (shipped)": ja,
        "bm25 alone": replace(ja, mode="bm25"),
        "dense alone": replace(ja, mode="dense"),
        "beta 0.7": replace(ja, beta=0.7),
        "beta 0.5": replace(ja, beta=0.5),
        "rrf k=60": replace(ja, fusion="rrf", rrf_k=60),
        "no reranker": replace(ja, rerank=False),
    }
    for name, cfg in pipeline_variants().items():
        out.setdefault(f"JSQuAD candidate: {name}", cfg)
    return out


def searcher_for(work: Path, speaker: str):
    from memory_pipeline.config import load_config
    from memory_pipeline.core.retrieval.searcher import Searcher

    config = build_speaker(RPC, work, speaker)
    return Searcher(load_config(config, env={}).output_dir)


def retrieval_hits(questions, work: Path) -> dict[str, dict[str, list]]:
    """{variant: {"turn": [hit], "dialogue": [hit], "top": [top-5 turn refs]}} in question
    order (cached in ``work``/chat_hits.json)."""
    vs = variants()
    cache = work / "chat_hits.json"
    key = [[q.question_id, q.question, sorted(q.gold)] for q in questions]
    names = {n: asdict(c) for n, c in vs.items()}
    if cache.exists():
        stored = json.loads(cache.read_text())
        if stored["key"] == key and stored["variants"] == names:
            return stored["hits"]
    out = {
        n: {"turn": [None] * len(questions), "dialogue": [None] * len(questions), "top": []}
        for n in vs
    }
    for n in vs:
        out[n]["top"] = [None] * len(questions)
    by_speaker: dict[str, list[int]] = {}
    for i, q in enumerate(questions):
        by_speaker.setdefault(q.corpus_id, []).append(i)
    t0 = time.perf_counter()
    for speaker, idx in sorted(by_speaker.items()):
        s = searcher_for(work, speaker)
        ref = s.source_refs()
        s.prime_queries([questions[i].question for i in idx], "embedding_text")
        for i in idx:
            q = questions[i]
            dialogues = {"rpc-" + r.split("/")[0].split(":")[1] for r in q.gold}
            for n, cfg in vs.items():
                r = s.search(q.question, K, cfg, language="ja")
                top = [ref.get(t.message_id) for t in r.turns[:K]]
                out[n]["top"][i] = top
                out[n]["turn"][i] = float(any(t in q.gold for t in top))
                out[n]["dialogue"][i] = float(
                    any(
                        s.session(h.session_id)["conversation_id"] in dialogues
                        for h in r.sessions[:K]
                    )
                )
        print(
            f"  {speaker}: {len(idx)} questions ({time.perf_counter() - t0:.0f} s)", file=sys.stderr
        )
    cache.write_text(json.dumps({"key": key, "variants": names, "hits": out}, ensure_ascii=False))
    return out


def retrieval(args: argparse.Namespace) -> int:
    from memory_pipeline.core.evaluation.crossval import cluster_bootstrap_ci, leave_one_group_out
    from memory_pipeline.core.evaluation.evalsets_rpc import load_rpc_chat_check
    from memory_pipeline.core.retrieval.config import DEFAULTS

    questions = load_rpc_chat_check(args.questions)
    groups = [q.corpus_id for q in questions]
    hits = retrieval_hits(questions, args.work)
    vs = variants()
    sweep = {
        n: {("turn", "hit", K): h["turn"], ("dialogue", "hit", K): h["dialogue"]}
        for n, h in hits.items()
    }
    cv = leave_one_group_out(list(vs), sweep, groups, ("turn", "hit", K))
    oof = cluster_bootstrap_ci(cv.oof[("turn", "hit", K)], groups, args.resamples, args.seed)
    oof_d = cluster_bootstrap_ci(cv.oof[("dialogue", "hit", K)], groups, args.resamples, args.seed)
    figs = {}
    for n in vs:
        figs[n] = {
            lvl: cluster_bootstrap_ci(hits[n][lvl], groups, args.resamples, args.seed)
            for lvl in ("turn", "dialogue")
        }
    chosen = sorted(set(cv.folds.values()))
    lines = [
        "## Retrieval on the chat check",
        "",
        f"{len(questions)} questions over {len(set(groups))} speakers' histories; every search "
        f"`Searcher.search(question, {K}, config, language='ja')` on the speaker's own index. "
        f"turn R@{K}: an evidence utterance among the top {K} turns; dialogue R@{K}: one of the "
        f"top {K} sessions is in an evidence dialogue. 95 % CIs resample speakers, then "
        f"questions ({args.resamples} resamples).",
        "",
        f"| search | turn R@{K} | 95 % CI | dialogue R@{K} | 95 % CI |",
        "|---|---|---|---|---|",
    ]
    for n, c in vs.items():
        t, d = figs[n]["turn"], figs[n]["dialogue"]
        lines.append(
            f"| {n} (`{c.name}`) | {t[0]:.3f} | {t[1]:.3f}–{t[2]:.3f} | {d[0]:.3f} | "
            f"{d[1]:.3f}–{d[2]:.3f} |"
        )
    lines += [
        "",
        f"Leave-one-speaker-out selection among these by turn R@{K}: out of fold "
        f"**{oof[0]:.3f}** ({oof[1]:.3f}–{oof[2]:.3f}), dialogue R@{K} {oof_d[0]:.3f} "
        f"({oof_d[1]:.3f}–{oof_d[2]:.3f}); folds chose {', '.join(f'`{c}`' for c in chosen)}; "
        f"selected on all: `{cv.selected}`.",
    ]
    text = "\n".join(lines)
    print(text)
    (args.work / "retrieval.md").write_text(text + "\n", encoding="utf-8")
    (args.work / "retrieval.json").write_text(
        json.dumps(
            {
                "figures": {n: {k: list(v) for k, v in f.items()} for n, f in figs.items()},
                "configs": {n: c.name for n, c in vs.items()},
                "cv": {
                    "folds": cv.folds,
                    "selected": cv.selected,
                    "oof turn": list(oof),
                    "oof dialogue": list(oof_d),
                },
                "questions": len(questions),
                "speakers": len(set(groups)),
            },
            ensure_ascii=False,
            indent=1,
        )
    )
    _ = DEFAULTS
    return 0


# ------------------------------------------------------------------------- answerability


def answer_queries(questions, foreign_per_host: int, seed: int) -> list[dict[str, Any]]:
    """Own and foreign queries ({host, source, text, label, qid}) of the calibration protocol:
    the foreign ones are the other speakers' questions asked about the host."""
    import random

    from memory_pipeline.core.evaluation.evalsets_rpc import swap_speaker

    hosts = sorted({q.corpus_id for q in questions})
    out = [
        {
            "host": q.corpus_id,
            "source": q.corpus_id,
            "text": q.question,
            "label": 1,
            "qid": q.question_id,
        }
        for q in questions
    ]
    rng = random.Random(seed)
    for host in hosts:
        foreign = [q for q in questions if q.corpus_id != host]
        if foreign_per_host and len(foreign) > foreign_per_host:
            foreign = rng.sample(foreign, foreign_per_host)
        out.extend(
            {
                "host": host,
                "source": q.corpus_id,
                "text": swap_speaker(q.question, q.corpus_id, host),
                "label": 0,
                "qid": q.question_id,
            }
            for q in foreign
        )
    return out


def answer_features(rows, work: Path) -> list[dict[str, Any]]:
    """Each query searched by the shipped Japanese default on its host's history, with the
    answerability features (computed under a neutral model) and the English model's and the
    shipped rule's calls; cached in ``work``/chat_features.json."""
    from memory_pipeline.core.retrieval import answerability as A
    from memory_pipeline.core.retrieval.searcher import DEFAULT

    cache = work / "chat_features.json"
    key = [[r["host"], r["text"]] for r in rows]
    if cache.exists():
        stored = json.loads(cache.read_text())
        if stored["key"] == key:
            return stored["rows"]
    n = len(A.FEATURES)
    neutral = A.AnswerModel(A.FEATURES, np.zeros(n), np.ones(n), np.zeros(n), 0.0, 0.5)
    out: list[dict[str, Any] | None] = [None] * len(rows)
    by_host: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        by_host.setdefault(r["host"], []).append(i)
    t0 = time.perf_counter()
    for host, idx in sorted(by_host.items()):
        s = searcher_for(work, host)
        s.answer_models["ja"] = neutral
        s.prime_queries([rows[i]["text"] for i in idx], "embedding_text")
        for i in idx:
            res = s.search(rows[i]["text"], K, DEFAULT, language="ja")
            out[i] = {
                **rows[i],
                "features": res.features,
                "kind": res.kind,
                "hits": bool(res.chunks),
            }
        print(f"  {host}: {len(idx)} queries ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    cache.write_text(json.dumps({"key": key, "rows": out}, ensure_ascii=False))
    return out  # type: ignore[return-value]


def fixed_model_figures(rows, model) -> tuple[np.ndarray, np.ndarray]:
    """(confidence, called) of a given model on every row (no fitting)."""
    conf = np.array([model.confidence(r["features"]) for r in rows])
    return conf, conf >= model.threshold


def answerability(args: argparse.Namespace) -> int:
    import calibrate_answerability as C

    from memory_pipeline.core.evaluation.evalsets_rpc import PACKAGED, load_rpc_chat_check
    from memory_pipeline.core.evaluation.selection import file_digest, packaged_path, render
    from memory_pipeline.core.retrieval import answerability as A
    from memory_pipeline.core.retrieval.searcher_parts import SELECTION

    questions = load_rpc_chat_check(args.questions)
    rows = answer_features(answer_queries(questions, args.foreign_per_host, args.seed), args.work)
    feats = tuple(args.features.split(","))
    n_own = sum(r["label"] for r in rows)
    hosts = sorted({r["host"] for r in rows})

    def line(name, conf, called):
        f = C.figures(rows, conf, called)
        ci = C.bootstrap(rows, conf, called, args.resamples, args.seed)
        cells = [
            f"{f[k]:.3f} ({ci[k][0]:.3f}–{ci[k][1]:.3f})" if np.isfinite(f[k]) else "–"
            for k in C.GOALS
        ]
        return f"| {name} | " + " | ".join(cells) + " |", f, ci

    table = []
    en = A.load_model(SELECTION)
    conf_en, called_en = fixed_model_figures(rows, en)
    table.append(
        line("English-fit model (shipped for English) applied to Japanese", conf_en, called_en)[0]
    )
    hits = np.array([bool(r["hits"]) for r in rows])
    table.append(
        line(
            "no Japanese model (shipped): answerable when there are hits", hits.astype(float), hits
        )[0]
    )
    conf, called, models = C.loco(rows, feats, args.own_target, args.l2)
    row_cv, fig, ci = line(
        f"fitted on this set, leave-one-speaker-out (own target {args.own_target:.2f})",
        conf,
        called,
    )
    table.append(row_cv)
    singles = {}
    for f in feats:
        c1, k1, _ = C.loco(rows, (f,), args.own_target, args.l2)
        singles[f] = C.figures(rows, c1, k1)
    final = C.fit_model(rows, feats, args.own_target, args.l2)
    weights = ", ".join(f"{f} {w:+.2f}" for f, w in zip(feats, final.weights, strict=True))
    meets = all(fig[k] >= g for k, g in C.GOALS.items())
    lines = [
        "## Answerability on the chat check",
        "",
        f"{len(hosts)} speakers' histories; {n_own} own questions (answerable), "
        f"{len(rows) - n_own} foreign questions (another speaker's question with the name "
        f"replaced by the host's: unanswerable"
        + (
            f", {args.foreign_per_host} drawn per host, seed {args.seed}"
            if args.foreign_per_host
            else ", all of them"
        )
        + "). Search: the shipped Japanese default on the host's history. CIs: 95 % bootstrap "
        f"over host speakers ({args.resamples} resamples).",
        "",
        "| model | AUROC | own answerable | foreign unanswerable |",
        "|---|---|---|---|",
        *table,
        "| goal | ≥ 0.85 | ≥ 0.90 | ≥ 0.60 |",
        "",
        "Each signal alone (same leave-one-speaker-out protocol):",
        "",
        "| signal | AUROC | own answerable | foreign unanswerable |",
        "|---|---|---|---|",
        *[
            f"| {f} | {v['auroc']:.3f} | {v['own_answerable']:.3f} | "
            f"{v['foreign_unanswerable']:.3f} |"
            for f, v in singles.items()
        ],
        "",
        f"Model fitted on every speaker: standardized weights {weights}; bias "
        f"{final.bias:+.2f}; threshold {final.threshold:.3f}. Meets every goal out of fold: "
        f"{'yes' if meets else 'no'}.",
    ]
    text = "\n".join(lines)
    print(text)
    (args.work / "answerability.md").write_text(text + "\n", encoding="utf-8")
    (args.work / "answerability.json").write_text(
        json.dumps(
            {
                "cv": {k: [fig[k], *ci[k]] for k in C.GOALS},
                "model": final.to_dict(),
                "per_host": {h: models[h].threshold for h in hosts},
            },
            indent=1,
        )
    )
    if args.write:
        path = packaged_path()
        record = json.loads(path.read_text(encoding="utf-8"))
        model = final.to_dict()
        model["provenance"] = {
            "data": {
                "file": Path(args.questions).name,
                "sha256": file_digest(Path(args.questions)),
                "corpus": "RealPersonaChat v1.0.0 dialogues.jsonl.gz (CC BY-SA 4.0)",
                "speakers": len(hosts),
                "own": n_own,
                "foreign": len(rows) - n_own,
            },
            "protocol": "the Japanese chat check: each speaker's history asked its own questions "
            "(answerable) and the other speakers' questions with the name replaced by the "
            "host's (unanswerable), searched by the Japanese default on the host's history; "
            "leave-one-speaker-out; threshold: the highest calling "
            f"{args.own_target:.2f} of the training own questions answerable; CIs: bootstrap "
            "over speakers",
            "figures": {
                k: [round(fig[k], 4), round(ci[k][0], 4), round(ci[k][1], 4)] for k in C.GOALS
            },
            "command": "python benchmarks/japanese_chat_check.py answerability "
            + " ".join(a for a in sys.argv[2:]),
            "date": dt.date.today().isoformat(),
        }
        record.setdefault("languages", {}).setdefault("ja", {})["answerability"] = model
        path.write_text(render(record), encoding="utf-8")
        print(f"wrote the Japanese model to {path}")
    _ = PACKAGED
    return 0


def main(argv: list[str] | None = None) -> int:
    from memory_pipeline.core.evaluation.evalsets_rpc import PACKAGED
    from memory_pipeline.core.retrieval import answerability as A

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("part", choices=("retrieval", "answerability"))
    p.add_argument("--work", type=Path, default=Path("/tmp/rpc_chat_check"))
    p.add_argument("--questions", type=Path, default=PACKAGED)
    p.add_argument("--resamples", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--foreign-per-host", type=int, default=0, help="0: every foreign question")
    p.add_argument("--own-target", type=float, default=0.92)
    p.add_argument("--l2", type=float, default=1.0)
    p.add_argument("--features", default=",".join(A.FEATURES))
    p.add_argument("--write", action="store_true")
    args = p.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    return retrieval(args) if args.part == "retrieval" else answerability(args)


if __name__ == "__main__":
    raise SystemExit(main())
