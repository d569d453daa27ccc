"""Select the Japanese default search on JSQuAD (cross-validated over articles).

The packaged selection was made on English LoCoMo; on Japanese its fusion (linear, beta 0.9
over min-max normalized BM25 and dense) ranks below BM25 alone. This script scores the
candidate rankings on the JSQuAD validation file (paragraphs as documents, each question's
gold its paragraph; the pipeline's BM25 index with the tokenizer ``auto`` picks for Japanese,
Sudachi, and the default local embedder), selects by paragraph R@5 with 5-fold
cross-validation over **articles** (each fold selects on the other four and scores its own),
and reports the out-of-fold R@5 of the selection and every candidate's R@5, all with 95 %
article-bootstrap CIs. ``--write`` records the Japanese selection in
``core/retrieval/selection.json`` (``languages.ja``) with its provenance.

    python benchmarks/select_japanese.py --work /tmp/select_ja [--max-articles N] [--write]

Query and document vectors are cached in ``--work`` (the embedding is the slow part).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("MEMORY_PIPELINE_SHARED_DATA", ROOT.parent / "shared" / "data"))
JSQUAD = SHARED / "jsquad" / "valid-v1.3.json"
RESULTS = ROOT / "benchmarks" / "results" / "select_japanese.md"
FOLDS = 5
BETAS = (0.3, 0.5, 0.7, 0.8, 0.9, 0.95)
RRF_KS = (10, 60)


def candidates(base):
    """(name, config) of every ranking tried: each retriever alone and the fusions."""
    out = [replace(base, mode="bm25"), replace(base, mode="dense")]
    out += [replace(base, mode="hybrid", fusion="linear", beta=b) for b in BETAS]
    out += [replace(base, mode="hybrid", fusion="rrf", rrf_k=k) for k in RRF_KS]
    return [(c.chunk_name, c) for c in out]


def ranking(cfg, lexical, dense):
    from memory_pipeline.core.retrieval.fusion import linear_fusion, rrf

    if cfg.mode == "bm25":
        return lexical
    if cfg.mode == "dense":
        return dense
    if cfg.fusion == "linear":
        return linear_fusion(lexical, dense, cfg.beta)
    return rrf([lexical, dense], k=cfg.rrf_k)


def as_locomo(paragraphs, path: Path, questions=()) -> dict[str, tuple[str, str]]:
    """JSQuAD paragraphs as a LoCoMo-shaped chat file (one conversation per article, one
    session of one turn per paragraph, an hour apart) so the real pipeline can index them,
    with ``questions`` as the articles' QA (category single-hop, evidence: the paragraph's
    turn); returns each paragraph's (conversation, dia_id)."""
    by_article: dict[str, list] = {}
    for p in paragraphs:
        by_article.setdefault(p.article, []).append(p)
    start = dt.datetime(2021, 1, 1, 9, 0)
    hour = 0
    samples, dia = [], {}
    for a, paras in enumerate(by_article.values()):
        conv = {"speaker_a": "wiki", "speaker_b": "reader"}
        for i, p in enumerate(paras, 1):
            when = start + dt.timedelta(hours=hour)
            hour += 1
            conv[f"session_{i}_date_time"] = when.strftime("%-I:%M %p on %-d %B, %Y").lower()
            dia[p.paragraph_id] = f"D{i}:1"
            conv[f"session_{i}"] = [{"speaker": "wiki", "dia_id": f"D{i}:1", "text": p.text}]
        ids = {p.paragraph_id for p in paras}
        qa = [
            {"question": q.text, "answer": "", "evidence": [dia[q.gold]], "category": 4}
            for q in questions
            if q.gold in ids
        ]
        samples.append({"sample_id": f"jsq-{a}", "conversation": conv, "qa": qa})
        for p in paras:
            dia[p.paragraph_id] = (f"jsq-{a}", dia[p.paragraph_id])
    path.write_text(json.dumps(samples, ensure_ascii=False), encoding="utf-8")
    return dia


def article_folds(articles, seed: int) -> dict[str, int]:
    """Each article's fold (articles shuffled with ``seed``, dealt round-robin)."""
    order = sorted(set(articles))
    np.random.default_rng(seed).shuffle(order)
    return {a: i % FOLDS for i, a in enumerate(order)}


def cv_select(hits: dict[str, np.ndarray], articles: list[str], seed: int, prefer: str):
    """(out-of-fold hits of the per-fold choice, the choice per fold, the choice on all):
    each fold picks the best mean on the other folds (ties: ``prefer``, then name)."""
    fold_of = article_folds(articles, seed)
    q_fold = np.array([fold_of[a] for a in articles])
    oof = np.zeros(len(articles))
    picked = {}

    def best(keep):
        return max(hits, key=lambda n: (round(float(hits[n][keep].mean()), 6), n == prefer, n))

    for f in range(FOLDS):
        train, test = q_fold != f, q_fold == f
        picked[f] = best(train)
        oof[test] = hits[picked[f]][test]
    return oof, picked, best(np.ones(len(articles), dtype=bool))


def pipeline_variants():
    """The Japanese candidates: the English default and the changes that could matter on
    Japanese (time words that date the event, the retriever mix, the English-trained
    reranker, the turn weights)."""
    from memory_pipeline.core.retrieval.config import DEFAULTS

    en = DEFAULTS["en"]
    fb = replace(en, time_fallback=True)
    self_only = replace(fb, turn_self=1.0, turn_ctx=0.0, turn_chunk=0.0, lift=0.0)
    return {
        "English default": en,
        "+ time fallback": fb,
        "+ time fallback, bm25 alone": replace(fb, mode="bm25"),
        "+ time fallback, beta 0.7": replace(fb, beta=0.7),
        "+ time fallback, no reranker": replace(fb, rerank=False),
        "+ time fallback, turns 1/0/0 lift 0": self_only,
        # added with the Japanese chat check (benchmarks/japanese_chat_check.py): on chat a
        # turn's neighbours (the partner's question) and its chunk matter, on JSQuAD they
        # do not; the single retrievers with the turn weights the JSQuAD selection chose
        "+ time fallback, turns 1/0/0 lift 0, bm25 alone": replace(self_only, mode="bm25"),
        "+ time fallback, turns 1/0/0 lift 0, dense alone": replace(self_only, mode="dense"),
        "+ time fallback, turns 0.4/0.2/0.45 lift 0": replace(fb, lift=0.0),
        "+ time fallback, turns 0.5/0.2/0.3 lift 0": replace(
            fb, turn_self=0.5, turn_ctx=0.2, turn_chunk=0.3, lift=0.0
        ),
        "+ time fallback, turns 0.7/0.3/0 lift 0": replace(
            fb, turn_self=0.7, turn_ctx=0.3, turn_chunk=0.0, lift=0.0
        ),
        "+ time fallback, turns 0.6/0.2/0.2 lift 0.2": replace(
            fb, turn_self=0.6, turn_ctx=0.2, turn_chunk=0.2, lift=0.2
        ),
        "+ time fallback, turns 1/0/0 lift 0, beta 0.7": replace(self_only, beta=0.7),
        "+ time fallback, turns 1/0/0 lift 0, beta 0.5": replace(self_only, beta=0.5),
        # the single retrievers of the candidate without the reranker (its own turn weights)
        "+ time fallback, no reranker, bm25 alone": replace(fb, rerank=False, mode="bm25"),
        "+ time fallback, no reranker, dense alone": replace(fb, rerank=False, mode="dense"),
    }


def pipeline_hits(args, paragraphs, questions):
    """(questions drawn, {variant: turn hit@5 per question}) through the real pipeline."""
    from memory_pipeline.config import load_config
    from memory_pipeline.core.retrieval.searcher import Searcher

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from calibrate_answerability import build

    work = args.work / "pipeline"
    work.mkdir(parents=True, exist_ok=True)
    dia = as_locomo(paragraphs, work / "jsquad_as_locomo.json")
    config = build(work / "jsquad_as_locomo.json", work)
    searcher = Searcher(load_config(config, env={}).output_dir)
    ref = searcher.source_refs()
    rng = np.random.default_rng(args.seed)
    size = min(args.pipeline, len(questions))
    pick = sorted(rng.choice(len(questions), size=size, replace=False).tolist())
    qs = [questions[i] for i in pick]
    searcher.prime_queries([q.text for q in qs], "embedding_text")
    out = {}
    cache_path = work / "pipeline_hits.json"  # per (variant config, question): reruns add
    cache = json.loads(cache_path.read_text()) if cache_path.exists() else {}
    for name, cfg in pipeline_variants().items():
        t0 = time.perf_counter()
        key = json.dumps([asdict(cfg), [q.text for q in qs]], ensure_ascii=False)
        if key in cache:
            out[name] = np.array(cache[key])
            print(f"  {name}: {out[name].mean():.3f} (cached)", file=sys.stderr)
            continue
        hit = []
        for q in qs:
            conv, did = dia[q.gold]
            r = searcher.search(q.text, 5, cfg, language="en")  # this config, as given
            hit.append(
                float(
                    any(
                        ref.get(t.message_id) == did
                        and searcher.session(t.session_id)["conversation_id"] == conv
                        for t in r.turns[:5]
                    )
                )
            )
        out[name] = np.array(hit)
        cache[key] = hit
        cache_path.write_text(json.dumps(cache, ensure_ascii=False))
        print(
            f"  {name}: {out[name].mean():.3f} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr
        )
    return qs, out


def main(argv: list[str] | None = None) -> int:
    from memory_pipeline.core.evaluation import jsquad as J
    from memory_pipeline.core.evaluation.selection import file_digest, packaged_path, render
    from memory_pipeline.core.represent.providers.factory import DEFAULT_MODELS, make_embedder
    from memory_pipeline.core.retrieval.config import PRESETS

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jsquad", type=Path, default=JSQUAD)
    p.add_argument("--work", type=Path, default=Path("/tmp/select_ja"))
    p.add_argument("--max-articles", type=int, default=None)
    p.add_argument("--resamples", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--write", action="store_true")
    p.add_argument(
        "--qa-file",
        type=Path,
        help="write the paragraphs and questions as a LoCoMo-shaped file here and stop "
        "(the input of calibrate_answerability.py for Japanese)",
    )
    p.add_argument(
        "--pipeline",
        type=int,
        default=0,
        help="also score N questions through the real pipeline and Searcher",
    )
    args = p.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    paragraphs, questions = J.load_jsquad(args.jsquad, args.max_articles)
    if args.qa_file:
        as_locomo(paragraphs, args.qa_file, questions)
        return 0
    articles = sorted({p.article for p in paragraphs})
    print(f"{len(paragraphs)} paragraphs, {len(questions)} questions, {len(articles)} articles")
    t0 = time.perf_counter()
    lexical, bstats = J.bm25_rankings(paragraphs, questions)
    model = DEFAULT_MODELS["local"]
    cache = args.work / f"dense_{model}_{len(paragraphs)}_{len(questions)}.json"
    if cache.exists():
        dense = [[tuple(x) for x in r] for r in json.loads(cache.read_text())]
    else:
        dense, _ = J.dense_rankings(make_embedder("local", model), paragraphs, questions)
        cache.write_text(json.dumps(dense))
    print(
        f"rankings in {time.perf_counter() - t0:.0f} s (bm25 tokenizer {bstats['tokenizer']})",
        file=sys.stderr,
    )
    base = PRESETS["default"]
    cands = candidates(base)
    r5 = {
        name: J.scores_for(
            [ranking(c, a, b) for a, b in zip(lexical, dense, strict=True)], questions
        )["R@5"]
        for name, c in cands
    }
    q_article = np.array([q.article for q in questions])
    rng = np.random.default_rng(args.seed)
    order = list(articles)
    rng.shuffle(order)
    fold_of = {a: i % FOLDS for i, a in enumerate(order)}
    q_fold = np.array([fold_of[a] for a in q_article])
    oof = np.zeros(len(questions))
    picked = {}
    for f in range(FOLDS):
        train, test = q_fold != f, q_fold == f
        best = max(r5, key=lambda n: (round(float(r5[n][train].mean()), 6), n == cands[0][0]))
        picked[f] = best
        oof[test] = r5[best][test]
    mean, lo, hi = J.article_bootstrap(oof, list(q_article), args.resamples, args.seed)
    chosen = max(r5, key=lambda n: (round(float(r5[n].mean()), 6), n == cands[0][0]))
    lines = [
        "# Japanese default selection on JSQuAD",
        "",
        f"Data: `{args.jsquad.name}` ({len(paragraphs)} paragraphs, {len(questions)} questions, "
        f"{len(articles)} articles); BM25 tokenizer {bstats['tokenizer']}, dense "
        f"`{model}`; CIs: 95 % bootstrap over articles ({args.resamples} resamples).",
        f"Protocol: {FOLDS}-fold cross-validation over articles, selecting by paragraph R@5.",
        "",
        "Direct rankings (BM25 / dense / fusions over the paragraphs, outside the pipeline: "
        "no chunking, no time filters, no turn ranking):",
        "",
        f"Cross-validated choice: R@5 **{mean:.3f}** ({lo:.3f}–{hi:.3f}); folds chose "
        + ", ".join(f"`{picked[f]}`" for f in range(FOLDS))
        + ".",
        f"Selected on all articles: `{chosen}`.",
        "",
        "| ranking | R@5 | 95 % CI |",
        "|---|---|---|",
    ]
    figures = {}
    for name, _ in cands:
        m, a, b = J.article_bootstrap(r5[name], list(q_article), args.resamples, args.seed)
        figures[name] = [round(m, 4), round(a, 4), round(b, 4)]
        lines.append(f"| {name} | {m:.3f} | {a:.3f}–{b:.3f} |")
    selected = None
    if args.pipeline:
        qs, hits = pipeline_hits(args, paragraphs, questions)
        arts = [q.article for q in qs]
        oof, picked_p, chosen_p = cv_select(hits, arts, args.seed, "English default")
        sel = J.article_bootstrap(oof, arts, args.resamples, args.seed)
        variants = pipeline_variants()
        lines += [
            "",
            f"Through the pipeline and `Searcher.search` ({len(qs)} questions drawn at random, "
            f"seed {args.seed}; each paragraph a one-turn session, an hour apart, one "
            "conversation per article; R@5 = the gold paragraph among the top 5 turns):",
            "",
            f"Cross-validated selection ({FOLDS} folds over articles): turn R@5 "
            f"**{sel[0]:.3f}** ({sel[1]:.3f}–{sel[2]:.3f}); folds chose "
            + ", ".join(f"`{picked_p[f]}`" for f in range(FOLDS))
            + f". Selected on all: `{chosen_p}` = `{variants[chosen_p].name}`.",
            "",
            "| search | turn R@5 | 95 % CI |",
            "|---|---|---|",
        ]
        pfig = {}
        for name, h in hits.items():
            m, a, b = J.article_bootstrap(h, arts, args.resamples, args.seed)
            pfig[name] = {
                "config": variants[name].name,
                "R@5": [round(m, 4), round(a, 4), round(b, 4)],
            }
            lines.append(f"| {name} (`{variants[name].name}`) | {m:.3f} | {a:.3f}–{b:.3f} |")
        selected = (variants[chosen_p], sel, picked_p, pfig, len(qs))
    print("\n".join(lines))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text("\n".join(lines) + "\n", encoding="utf-8")
    if args.write:
        if selected is None:
            print("error: --write needs --pipeline N (the selection is made through it)")
            return 2
        config, sel, picked_p, pfig, n_q = selected
        path = packaged_path()
        record = json.loads(path.read_text(encoding="utf-8"))
        langs = record.setdefault("languages", {})
        ja = langs.get("ja", {})
        ja.update(
            {
                "name": config.name,
                "config": asdict(config),
                "provenance": {
                    "data": {
                        "file": args.jsquad.name,
                        "sha256": file_digest(args.jsquad),
                        "articles": len(articles),
                        "paragraphs": len(paragraphs),
                        "questions": n_q,
                    },
                    "protocol": f"JSQuAD paragraphs through the pipeline (one-turn sessions, "
                    f"one conversation per article), {n_q} questions drawn at random; "
                    f"{FOLDS}-fold cross-validation over articles by turn (paragraph) R@5; "
                    "CIs: bootstrap over articles. No Japanese chat dev data labels turns: "
                    "the turn weights are the English selection's unless a candidate changed "
                    "them",
                    "embedder": f"local {model}",
                    "cv:selected turn R@5": [round(v, 4) for v in sel],
                    "folds": {str(f): picked_p[f] for f in range(FOLDS)},
                    "figures": pfig,
                    "direct rankings R@5 (all questions)": figures,
                    "command": "python benchmarks/select_japanese.py "
                    + " ".join(sys.argv[1:] if argv is None else argv),
                    "date": dt.date.today().isoformat(),
                },
            }
        )
        langs["ja"] = ja
        path.write_text(render(record), encoding="utf-8")
        print(f"wrote the Japanese selection to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
