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

    python benchmarks/japanese_chat_check.py retrieval --work W        # chat check, every variant
    python benchmarks/japanese_chat_check.py jsquad --work W            # the JSQuAD candidates
    python benchmarks/japanese_chat_check.py select --work W [--write]  # -> languages.ja
    python benchmarks/japanese_chat_check.py answerability --work W --foreign-per-host 30 [--write]
    python benchmarks/japanese_chat_check.py audit --work W --foreign-per-host 30  # foreign labels
    python benchmarks/japanese_chat_check.py probe --work W --sample-output OUT     # bundled sample

(exact commands and figures: ``benchmarks/results/japanese_chat_check.md``)

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
    Japanese candidates (fusion weights, RRF, no reranker, and the English turn weights the
    JSQuAD selection left), all with the shipped Japanese turn settings unless named."""
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
    for name, cfg in pipeline_variants().items():  # the candidates JSQuAD scores too
        if cfg not in out.values() and name != "English default":
            out[f"JSQuAD candidate: {name}"] = cfg
    return out


def loso_select(
    hits: dict[str, list[float]], groups: list[str], prefer: str
) -> tuple[list[float], dict[str, str], str]:
    """Leave-one-speaker-out selection by mean hit: (out-of-fold hit per question, the choice
    per held-out speaker, the choice on all). Ties go to ``prefer`` (the shipped default: a
    change must win, not tie), then to the name."""

    def best(keep: list[bool]) -> str:
        def score(n: str) -> tuple:
            v = [h for h, k in zip(hits[n], keep, strict=True) if k]
            return (round(float(np.mean(v)), 6), n == prefer, n)

        return max(hits, key=score)

    oof = [0.0] * len(groups)
    folds = {}
    for held in sorted(set(groups)):
        chosen = best([g != held for g in groups])
        folds[held] = chosen
        for i, g in enumerate(groups):
            if g == held:
                oof[i] = hits[chosen][i]
    return oof, folds, best([True] * len(groups))


def searcher_for(work: Path, speaker: str):
    from memory_pipeline.config import load_config
    from memory_pipeline.core.retrieval.searcher import Searcher

    config = build_speaker(RPC, work, speaker)
    return Searcher(load_config(config, env={}).output_dir)


def built(work: Path, speakers) -> list[str]:
    """The speakers whose corpus is built in ``work`` (a finished build leaves ``DONE``)."""
    return [s for s in speakers if (work / s / "DONE").exists()]


def _load(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def retrieval_hits(questions, work: Path) -> dict[str, dict[str, list]]:
    """{variant: {"turn": [hit], "dialogue": [hit], "top": [top-5 turn refs]}} in question
    order; each (question, variant) is cached in ``work``/chat_hits.json, so a run after more
    corpora are built searches only what is new."""
    vs = variants()
    cache_path = work / "chat_hits.json"
    cache = _load(cache_path)

    def key(q, n) -> str:
        return json.dumps([q.question_id, q.question, sorted(q.gold), asdict(vs[n])])

    by_speaker: dict[str, list[int]] = {}
    for i, q in enumerate(questions):
        if any(key(q, n) not in cache for n in vs):
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
                if key(q, n) in cache:
                    continue
                r = s.search(q.question, K, cfg, language="ja")
                top = [ref.get(t.message_id) for t in r.turns[:K]]
                cache[key(q, n)] = {
                    "top": top,
                    "turn": float(any(t in q.gold for t in top)),
                    "dialogue": float(
                        any(
                            s.session(h.session_id)["conversation_id"] in dialogues
                            for h in r.sessions[:K]
                        )
                    ),
                }
        cache_path.write_text(json.dumps(cache, ensure_ascii=False))
        print(
            f"  {speaker}: {len(idx)} questions ({time.perf_counter() - t0:.0f} s)", file=sys.stderr
        )
    return {
        n: {f: [cache[key(q, n)][f] for q in questions] for f in ("turn", "dialogue", "top")}
        for n in vs
    }


def selected_questions(args: argparse.Namespace):
    """The questions, or with ``--built-only`` those of the speakers already built."""
    from memory_pipeline.core.evaluation.evalsets_rpc import load_rpc_chat_check

    questions = load_rpc_chat_check(args.questions)
    if args.built_only:
        ok = set(built(args.work, sorted({q.corpus_id for q in questions})))
        questions = [q for q in questions if q.corpus_id in ok]
        print(f"built-only: {len(questions)} questions of {len(ok)} speakers", file=sys.stderr)
    return questions


def retrieval(args: argparse.Namespace) -> int:
    from memory_pipeline.core.evaluation.crossval import cluster_bootstrap_ci
    from memory_pipeline.core.retrieval.config import DEFAULTS

    questions = selected_questions(args)
    groups = [q.corpus_id for q in questions]
    hits = retrieval_hits(questions, args.work)
    vs = variants()
    shipped = "Japanese default (shipped)"
    oof_t, folds, selected = loso_select({n: h["turn"] for n, h in hits.items()}, groups, shipped)
    oof_dh = [hits[folds[g]]["dialogue"][i] for i, g in enumerate(groups)]
    oof = cluster_bootstrap_ci(oof_t, groups, args.resamples, args.seed)
    oof_d = cluster_bootstrap_ci(oof_dh, groups, args.resamples, args.seed)
    figs = {}
    for n in vs:
        figs[n] = {
            lvl: cluster_bootstrap_ci(hits[n][lvl], groups, args.resamples, args.seed)
            for lvl in ("turn", "dialogue")
        }
    chosen = sorted(set(folds.values()))
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
        f"selected on all: `{selected}`.",
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
                    "folds": folds,
                    "selected": selected,
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
    singles = ("bm25 alone", "dense alone")
    best_single = max(figs[n]["turn"][0] for n in singles)
    default_ok = figs[shipped]["turn"][0] >= best_single
    verdict = (
        f"the shipped Japanese default ({figs[shipped]['turn'][0]:.3f}) is "
        + ("≥" if default_ok else "<")
        + f" the best single retriever ({best_single:.3f}) by turn R@{K}"
    )
    print(verdict)
    if args.write:
        from memory_pipeline.core.evaluation.selection import file_digest, packaged_path, render

        if selected != shipped:
            print("error: the selection changed: rerun select_japanese.py with both checks")
            return 2
        path = packaged_path()
        record = json.loads(path.read_text(encoding="utf-8"))
        ja = record["languages"]["ja"]
        if ja["config"] != asdict(DEFAULTS["ja"]):
            print("error: languages.ja in selection.json is not the config measured here")
            return 2
        ja["provenance"]["chat check"] = {
            "data": {
                "file": "memory_pipeline_tests/fixtures/rpc_chat_check/"
                + Path(args.questions).name,
                "sha256": file_digest(Path(args.questions)),
                "corpus": "RealPersonaChat v1.0.0 (CC BY-SA 4.0), one index per speaker",
                "speakers": len(set(groups)),
                "questions": len(questions),
            },
            "protocol": f"turn R@{K} (an evidence utterance among the top {K} turns) and "
            f"dialogue R@{K} through Searcher.search on each speaker's history; CIs: bootstrap "
            "over speakers then questions; leave-one-speaker-out selection among the "
            "candidates (ties: the shipped default)",
            "figures": {
                n: {lvl: [round(v, 4) for v in figs[n][lvl]] for lvl in ("turn", "dialogue")}
                for n in (shipped, *singles)
            },
            "cv:selected turn R@5": [round(v, 4) for v in oof],
            "folds chose": sorted(set(folds.values())),
            "verdict": verdict,
            "command": "python benchmarks/japanese_chat_check.py " + " ".join(sys.argv[1:]),
            "date": dt.date.today().isoformat(),
        }
        path.write_text(render(record), encoding="utf-8")
        print(f"recorded the chat check in {path} (languages.ja.provenance)")
    return 0


def jsquad(args: argparse.Namespace) -> int:
    """Every JSQuAD pipeline candidate (``select_japanese.pipeline_variants``) on the JSQuAD
    check, as ``select_japanese.py --pipeline N`` scores it (same corpus, same seeded draw of
    questions), into ``--jsquad-work``/pipeline (hits cached per variant) and
    ``--work``/jsquad.json: turn R@5 per variant with 95 % article-bootstrap CIs."""
    from select_japanese import JSQUAD, pipeline_hits

    from memory_pipeline.core.evaluation import jsquad as J

    ns = argparse.Namespace(work=args.jsquad_work, seed=args.seed, pipeline=args.jsquad_n)
    ns.work.mkdir(parents=True, exist_ok=True)
    paragraphs, questions = J.load_jsquad(JSQUAD)
    qs, hits = pipeline_hits(ns, paragraphs, questions)
    arts = [q.article for q in qs]
    out = {
        name: {
            "hits": h.tolist(),
            "R@5": list(J.article_bootstrap(h, arts, args.resamples, args.seed)),
        }
        for name, h in hits.items()
    }
    (args.work / "jsquad.json").write_text(
        json.dumps({"questions": len(qs), "articles": arts, "variants": out}, indent=1)
    )
    for name, v in out.items():
        print(f"{name}: {v['R@5'][0]:.3f} ({v['R@5'][1]:.3f}–{v['R@5'][2]:.3f})")
    return 0


PROTOCOL = (
    "candidates scored on both Japanese checks through the pipeline (JSQuAD: 600 questions, "
    "one-turn sessions; chat: the RealPersonaChat chat check, one index per speaker); "
    "eligible when JSQuAD turn R@5 >= {floor} and at or above its own best single retriever "
    "(the same config with BM25 or dense alone) on JSQuAD and on chat turn and dialogue R@5; "
    "selected among the eligible by chat turn R@5, leave-one-speaker-out with eligibility "
    "recomputed on each fold's training speakers (ties: the previous default); CIs: JSQuAD "
    "bootstrap over articles, chat bootstrap over speakers then questions"
)


def select(args: argparse.Namespace) -> int:
    """The Japanese selection on both Japanese checks: among the candidates scored on both
    (``retrieval`` and ``jsquad`` must have run), those whose JSQuAD turn R@5 stays at or
    above ``--jsquad-floor`` (a guard: the JSQuAD check must not regress), selected by chat
    turn R@5 leave-one-speaker-out (ties: the shipped default). ``--write`` records the choice
    as ``languages.ja`` with the provenance of both checks."""
    from memory_pipeline.core.evaluation.crossval import cluster_bootstrap_ci
    from memory_pipeline.core.evaluation.selection import file_digest, packaged_path, render

    questions = selected_questions(args)
    groups = [q.corpus_id for q in questions]
    hits = retrieval_hits(questions, args.work)
    vs = variants()
    jq = json.loads((args.work / "jsquad.json").read_text())
    from select_japanese import JSQUAD, pipeline_variants

    jcfg = pipeline_variants()
    jsq = {}
    for n, c in vs.items():
        for jn, jc in jcfg.items():
            if jc == c and jn in jq["variants"]:
                jsq[n] = (jn, jq["variants"][jn]["R@5"])
    shipped = "Japanese default (shipped)"
    guarded = {n for n, (_, r) in jsq.items() if r[0] >= args.jsquad_floor}

    def ranking_key(c) -> str:
        """A config's identity as a ranking: a single retriever ignores the fusion fields."""
        d = asdict(c)
        if c.mode != "hybrid":
            for f in ("fusion", "beta", "rrf_k"):
                d.pop(f)
        return repr(d)

    by_cfg0 = {ranking_key(c): n for n, c in vs.items() if n in jsq}

    def singles_of(n: str) -> list[str] | None:
        out = [by_cfg0.get(ranking_key(replace(vs[n], mode=m))) for m in ("bm25", "dense")]
        return None if None in out else out

    def eligible(keep: list[bool]) -> set[str]:
        """Guarded candidates at or above their own best single retriever (the same config
        with BM25 or dense alone) on JSQuAD and, on the kept speakers, on chat turn and
        dialogue R@5: the rule every Japanese default must meet."""

        def mean(n: str, lvl: str) -> float:
            return float(np.mean([h for h, k in zip(hits[n][lvl], keep, strict=True) if k]))

        ok = set()
        for n in guarded:
            single = singles_of(n)
            if single is None:
                continue
            if (
                jsq[n][1][0] >= max(jsq[x][1][0] for x in single)
                and mean(n, "turn") >= max(mean(x, "turn") for x in single)
                and mean(n, "dialogue") >= max(mean(x, "dialogue") for x in single)
            ):
                ok.add(n)
        return ok

    oof_t = [0.0] * len(groups)
    folds = {}

    def pick(keep: list[bool]) -> str:
        names = eligible(keep) or {shipped}
        return max(
            names,
            key=lambda n: (
                round(
                    float(np.mean([h for h, k in zip(hits[n]["turn"], keep, strict=True) if k])), 6
                ),
                n == shipped,
                n,
            ),
        )

    for held in sorted(set(groups)):
        folds[held] = pick([g != held for g in groups])
        for i, g in enumerate(groups):
            if g == held:
                oof_t[i] = hits[folds[held]]["turn"][i]
    chosen = pick([True] * len(groups))
    final_ok = eligible([True] * len(groups))
    oof_dh = [hits[folds[g]]["dialogue"][i] for i, g in enumerate(groups)]
    oof = cluster_bootstrap_ci(oof_t, groups, args.resamples, args.seed)
    oof_d = cluster_bootstrap_ci(oof_dh, groups, args.resamples, args.seed)
    fig = {
        n: {
            lvl: cluster_bootstrap_ci(hits[n][lvl], groups, args.resamples, args.seed)
            for lvl in ("turn", "dialogue")
        }
        for n in jsq
    }
    lines = [
        "## The Japanese selection on both checks",
        "",
        f"Candidates scored on both checks: {len(jsq)}; kept by the JSQuAD guard (turn R@5 ≥ "
        f"{args.jsquad_floor:.2f} on {jq['questions']} JSQuAD questions): {len(guarded)}; of "
        f"those, at or above their own best single retriever (the same config with BM25 or "
        f"dense alone) on JSQuAD and on chat turn and dialogue R@{K} (on all speakers): "
        f"{len(final_ok)} ({', '.join(f'`{n}`' for n in sorted(final_ok)) or 'none'}). "
        f"Selection among the eligible by chat turn R@{K}, leave-one-speaker-out over "
        f"{len(set(groups))} speakers (eligibility recomputed on each fold's training "
        "speakers; ties and an empty set: the shipped default).",
        "",
        f"| candidate | JSQuAD turn R@{K} (95 % CI) | chat turn R@{K} (95 % CI) | "
        f"chat dialogue R@{K} (95 % CI) |",
        "|---|---|---|---|",
    ]
    for n, (_jn, r) in jsq.items():
        t, d = fig[n]["turn"], fig[n]["dialogue"]
        mark = (
            " (eligible)"
            if n in final_ok
            else (" (fails the guard)" if n not in guarded else " (below a single retriever)")
        )
        lines.append(
            f"| {n}{mark} (`{vs[n].name}`) | {r[0]:.3f} ({r[1]:.3f}–{r[2]:.3f}) | "
            f"{t[0]:.3f} ({t[1]:.3f}–{t[2]:.3f}) | {d[0]:.3f} ({d[1]:.3f}–{d[2]:.3f}) |"
        )
    lines += [
        "",
        f"Out of fold (chat): turn R@{K} **{oof[0]:.3f}** ({oof[1]:.3f}–{oof[2]:.3f}), dialogue "
        f"R@{K} {oof_d[0]:.3f} ({oof_d[1]:.3f}–{oof_d[2]:.3f}); folds chose "
        + ", ".join(f"`{c}` ×{list(folds.values()).count(c)}" for c in sorted(set(folds.values())))
        + f"; selected on all: `{chosen}` = `{vs[chosen].name}`.",
    ]
    by_cfg = {asdict(c).__repr__(): n for n, c in vs.items() if n in jsq}
    for n in dict.fromkeys([shipped, chosen]):
        singles = [by_cfg.get(asdict(replace(vs[n], mode=m)).__repr__()) for m in ("bm25", "dense")]
        if None in singles:
            lines.append(f"- `{n}`: its single retrievers are not scored on both checks.")
            continue
        parts = []
        for check, val in (
            ("JSQuAD", lambda x: jsq[x][1][0]),
            ("chat turn", lambda x: fig[x]["turn"][0]),
            ("chat dialogue", lambda x: fig[x]["dialogue"][0]),
        ):
            best = max(val(x) for x in singles)
            parts.append(f"{check} {val(n):.3f} {'≥' if val(n) >= best else '<'} {best:.3f}")
        lines.append(f"- `{n}` vs its best single retriever: " + "; ".join(parts) + ".")
    text = "\n".join(lines)
    print(text)
    (args.work / "select.md").write_text(text + "\n", encoding="utf-8")
    if args.write and chosen != shipped:
        path = packaged_path()
        record = json.loads(path.read_text(encoding="utf-8"))
        old = record["languages"]["ja"]
        jn, jr = jsq[chosen]
        record["languages"]["ja"] = {
            **old,
            "name": vs[chosen].name,
            "config": asdict(vs[chosen]),
            "provenance": {
                "checks": "JSQuAD (guard) and the Japanese chat check (selection)",
                "protocol": PROTOCOL.format(floor=args.jsquad_floor),
                "embedder": "local use-multilingual-v3",
                "jsquad": {
                    "file": JSQUAD.name,
                    "sha256": file_digest(JSQUAD),
                    "questions": jq["questions"],
                    "candidate": jn,
                    "turn R@5": [round(v, 4) for v in jr],
                },
                "chat check": {
                    "file": "memory_pipeline_tests/fixtures/rpc_chat_check/"
                    + Path(args.questions).name,
                    "sha256": file_digest(Path(args.questions)),
                    "speakers": len(set(groups)),
                    "questions": len(questions),
                    "cv:selected turn R@5": [round(v, 4) for v in oof],
                    "cv:selected dialogue R@5": [round(v, 4) for v in oof_d],
                    "folds chose": sorted(set(folds.values())),
                },
                "figures": {
                    n: {
                        "config": vs[n].name,
                        "jsquad turn R@5": [round(v, 4) for v in jsq[n][1]],
                        "chat turn R@5": [round(v, 4) for v in fig[n]["turn"]],
                        "chat dialogue R@5": [round(v, 4) for v in fig[n]["dialogue"]],
                    }
                    for n in jsq
                },
                "previous": {"name": old["name"], "provenance": old.get("provenance", {})},
                "command": "python benchmarks/japanese_chat_check.py " + " ".join(sys.argv[1:]),
                "date": dt.date.today().isoformat(),
            },
        }
        path.write_text(render(record), encoding="utf-8")
        print(f"wrote the Japanese selection to {path}")
    return 0


# ------------------------------------------------------------------------- answerability


def answer_queries(questions, foreign_per_host: int, seed: int) -> list[dict[str, Any]]:
    """Own and foreign queries ({host, source, text, label, qid, kind}) of the calibration
    protocol: the foreign ones are the other speakers' questions asked about the host (every
    specific one; ``foreign_per_host`` > 0 draws that many of the slot ones per host)."""
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
            "kind": q.qtype,
        }
        for q in questions
    ]
    rng = random.Random(seed)
    for host in hosts:
        others = [q for q in questions if q.corpus_id != host]
        slot = [q for q in others if q.qtype == "persona-slot"]
        if foreign_per_host and len(slot) > foreign_per_host:  # every specific one is kept
            slot = rng.sample(slot, foreign_per_host)
        foreign = [q for q in others if q.qtype != "persona-slot" or q in slot]
        out.extend(
            {
                "host": host,
                "source": q.corpus_id,
                "text": swap_speaker(q.question, q.corpus_id, host),
                "label": 0,
                "qid": q.question_id,
                "kind": q.qtype,
            }
            for q in foreign
        )
    return out


def answer_features(rows, work: Path) -> list[dict[str, Any]]:
    """Each query searched by the shipped Japanese default on its host's history, with the
    answerability features (computed under a neutral model), whether it had hits and its top
    turns; each (host, text, default) is cached in ``work``/chat_features.json."""
    from memory_pipeline.core.retrieval import answerability as A
    from memory_pipeline.core.retrieval.config import DEFAULTS
    from memory_pipeline.core.retrieval.searcher import DEFAULT

    cache_path = work / "chat_features.json"
    cache = _load(cache_path)
    default = DEFAULTS["ja"].name  # the features are the shipped Japanese default's

    def key(r) -> str:
        return json.dumps([r["host"], r["text"], default], ensure_ascii=False)

    n = len(A.FEATURES)
    neutral = A.AnswerModel(A.FEATURES, np.zeros(n), np.ones(n), np.zeros(n), 0.0, 0.5)
    by_host: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        if key(r) not in cache:
            by_host.setdefault(r["host"], []).append(i)
    t0 = time.perf_counter()
    for host, idx in sorted(by_host.items()):
        s = searcher_for(work, host)
        s.answer_models["ja"] = neutral
        s.prime_queries([rows[i]["text"] for i in idx], "embedding_text")
        ref = s.source_refs()
        for i in idx:
            res = s.search(rows[i]["text"], K, DEFAULT, language="ja")
            cache[key(rows[i])] = {
                "features": res.features,
                "kind_of_search": res.kind,
                "hits": bool(res.chunks),
                "top": [ref.get(t.message_id) for t in res.turns[:K]],
            }
        cache_path.write_text(json.dumps(cache, ensure_ascii=False))
        print(f"  {host}: {len(idx)} queries ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    return [{**r, **cache[key(r)]} for r in rows]


def fixed_model_figures(rows, model) -> tuple[np.ndarray, np.ndarray]:
    """(confidence, called) of a given model on every row (no fitting)."""
    conf = np.array([model.confidence(r["features"]) for r in rows])
    return conf, conf >= model.threshold


def answerability(args: argparse.Namespace) -> int:
    """Figures of the models on the own vs foreign protocol, for two foreign sets: every
    other speaker's question, and only the ``specific`` ones (a slot question such as "what is
    X's job" is often answerable about anyone: its foreign label is then wrong)."""
    import calibrate_answerability as C

    from memory_pipeline.core.evaluation.selection import file_digest, packaged_path, render
    from memory_pipeline.core.retrieval import answerability as A
    from memory_pipeline.core.retrieval.searcher_parts import SELECTION

    questions = selected_questions(args)
    rows_all = answer_features(
        answer_queries(questions, args.foreign_per_host, args.seed), args.work
    )
    sets = {
        "all foreign": rows_all,
        "specific foreign": [
            r for r in rows_all if r["label"] == 1 or r["kind"] == "persona-specific"
        ],
    }
    feats = tuple(args.features.split(","))
    en = A.load_model(SELECTION)
    hosts = sorted({r["host"] for r in rows_all})

    def cells(rows, conf, called):
        f = C.figures(rows, conf, called)
        ci = C.bootstrap(rows, conf, called, args.resamples, args.seed)
        return (
            f,
            ci,
            [
                f"{f[k]:.3f} ({ci[k][0]:.3f}–{ci[k][1]:.3f})" if np.isfinite(f[k]) else "–"
                for k in C.GOALS
            ],
        )

    lines = [
        "## Answerability on the chat check",
        "",
        f"{len(hosts)} speakers' histories; every own question (answerable) and the other "
        "speakers' questions with the name replaced by the host's (unanswerable by the "
        "protocol's assumption), either all of them or only the `specific` ones"
        + (
            f" (every specific one and {args.foreign_per_host} slot ones drawn per host, "
            f"seed {args.seed})"
            if args.foreign_per_host
            else ""
        )
        + ". Search: the shipped Japanese default on the host's history. CIs: 95 % bootstrap "
        f"over host speakers ({args.resamples} resamples). Fitted models: leave-one-speaker-"
        f"out (a fold's model never saw the held-out speaker's history or questions), "
        f"threshold calling {args.own_target:.2f} of the training own questions answerable.",
        "",
        "| foreign set (own / foreign) | model | AUROC | own answerable | foreign unanswerable |",
        "|---|---|---|---|---|",
    ]
    results = {}
    for set_name, rows in sets.items():
        n_own = sum(r["label"] for r in rows)
        size = f"{set_name} ({n_own} / {len(rows) - n_own})"
        conf_en = np.array([en.confidence(r["features"]) for r in rows])
        hits = np.array([bool(r["hits"]) for r in rows])
        conf, called, models = C.loco(rows, feats, args.own_target, args.l2)
        for name, (cf, cl) in {
            "English-fit model (shipped for English) applied to Japanese": (
                conf_en,
                conf_en >= en.threshold,
            ),
            "no Japanese model (shipped): answerable when there are hits": (
                hits.astype(float),
                hits,
            ),
            "fitted on this set, leave-one-speaker-out": (conf, called),
        }.items():
            f, ci, row = cells(rows, cf, cl)
            lines.append(f"| {size} | {name} | " + " | ".join(row) + " |")
            results[(set_name, name)] = (f, ci)
        results[(set_name, "models")] = models
    lines.append("| | goal | ≥ 0.85 | ≥ 0.90 | ≥ 0.60 |")
    chosen = sets[args.fit_on]
    singles = {}
    for f in feats:
        c1, k1, _ = C.loco(chosen, (f,), args.own_target, args.l2)
        singles[f] = C.figures(chosen, c1, k1)
    final = C.fit_model(chosen, feats, args.own_target, args.l2)
    fig, ci = results[(args.fit_on, "fitted on this set, leave-one-speaker-out")]
    weights = ", ".join(f"{f} {w:+.2f}" for f, w in zip(feats, final.weights, strict=True))
    meets = all(fig[k] >= g for k, g in C.GOALS.items())
    lines += [
        "",
        f"Each signal alone ({args.fit_on}, same leave-one-speaker-out protocol):",
        "",
        "| signal | AUROC | own answerable | foreign unanswerable |",
        "|---|---|---|---|",
        *[
            f"| {f} | {v['auroc']:.3f} | {v['own_answerable']:.3f} | "
            f"{v['foreign_unanswerable']:.3f} |"
            for f, v in singles.items()
        ],
        "",
        f"Model fitted on every speaker ({args.fit_on}): standardized weights {weights}; bias "
        f"{final.bias:+.2f}; threshold {final.threshold:.3f}. Meets every goal out of fold: "
        f"{'yes' if meets else 'no'}.",
    ]
    text = "\n".join(lines)
    print(text)
    (args.work / "answerability.md").write_text(text + "\n", encoding="utf-8")
    (args.work / "answerability.json").write_text(
        json.dumps(
            {
                "fit_on": args.fit_on,
                "cv": {k: [fig[k], *ci[k]] for k in C.GOALS},
                "model": final.to_dict(),
            },
            indent=1,
        )
    )
    if args.write:
        n_own = sum(r["label"] for r in chosen)
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
                "foreign": len(chosen) - n_own,
                "foreign set": args.fit_on,
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
            "command": "python benchmarks/japanese_chat_check.py " + " ".join(sys.argv[1:]),
            "date": dt.date.today().isoformat(),
        }
        record.setdefault("languages", {}).setdefault("ja", {})["answerability"] = model
        path.write_text(render(record), encoding="utf-8")
        print(f"wrote the Japanese model to {path}")
    return 0


def audit(args: argparse.Namespace) -> int:
    """A seeded sample of foreign queries with the host's top turns, for reading: is the
    foreign label right (the host's history does not answer it)? Prints; judge by hand."""
    import random

    from memory_pipeline.core.evaluation.evalsets_rpc import RPC_FILE, read_utterances

    rows = answer_features(
        answer_queries(selected_questions(args), args.foreign_per_host, args.seed), args.work
    )
    foreign = [r for r in rows if r["label"] == 0]
    sample = random.Random(args.seed).sample(foreign, args.audit)
    utts = read_utterances(args.rpc / RPC_FILE, [t for r in sample for t in r["top"] if t])
    for n, r in enumerate(sample, 1):
        print(f"{n}. [{r['kind']}] {r['text']}  (host {r['host']}, from {r['source']})")
        for t in r["top"]:
            who, text, _ = utts.get(t, ("?", "", ()))
            print(f"     {t} {who}: {text}")
    return 0


# the bundled sample's questions a user would ask in other words (Japanese) and the English one
# the English model refuses; the sample's own labelled Japanese questions are added to these
PROBES = (
    "When is the Kyoto trip?",
    "京都旅行はいつ？",
    "京都にはいつ行く？",
    "美咲の送別会の店は？",
    "バイトの時給はいくら？",
    "健太はいつ引っ越す？",
    "お父さんの誕生日はどこで祝う？",
    "美咲の車の色は？",  # not in the sample (no car colour, no university in it)
    "佐藤先輩の出身大学は？",
)


def probe(args: argparse.Namespace) -> int:
    """Confidence and the answerable call on the bundled sample (built by ``memory-pipeline
    run`` into ``--sample-output``) for natural questions, under the shipped models and, when
    ``--work`` holds one, the Japanese model fitted by ``answerability``."""
    from memory_pipeline.core.evaluation.evalsets import load_jsonl_questions
    from memory_pipeline.core.retrieval import answerability as A
    from memory_pipeline.core.retrieval.searcher import DEFAULT, Searcher

    s = Searcher(args.sample_output)
    labelled, _ = load_jsonl_questions(ROOT / "data" / "sample" / "eval_questions.jsonl")
    queries = [*PROBES, *(q.question for q in labelled if q.question_id.startswith("ja-"))]
    fitted = args.work / "answerability.json"
    models = {
        "shipped": dict(s.answer_models),
        "English model on ja": {**s.answer_models, "ja": s.answer_models["en"]},
    }
    if fitted.exists():
        ja = A.AnswerModel.from_dict(json.loads(fitted.read_text())["model"])
        models["fitted ja"] = {**s.answer_models, "ja": ja}
    head = " | ".join(f"{m}: confidence, answerable" for m in models)
    lines = [f"| query | language | {head} |", "|---|---|" + "---|" * len(models)]
    for q in queries:
        cells = []
        lang = None
        for m in models.values():
            s.answer_models = dict(m)
            r = s.search(q, K, DEFAULT)
            lang = r.language
            cells.append(f"{r.confidence:.3f}, {'yes' if r.answerable else 'no'}")
        lines.append(f"| {q} | {lang} | " + " | ".join(cells) + " |")
    text = "\n".join(lines)
    print(text)
    (args.work / "probe.md").write_text(text + "\n", encoding="utf-8")
    return 0


def main(argv: list[str] | None = None) -> int:
    from memory_pipeline.core.evaluation.evalsets_rpc import PACKAGED
    from memory_pipeline.core.retrieval import answerability as A

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "part", choices=("retrieval", "answerability", "probe", "audit", "jsquad", "select")
    )
    p.add_argument("--work", type=Path, default=Path("/tmp/rpc_chat_check"))
    p.add_argument("--questions", type=Path, default=PACKAGED)
    p.add_argument("--resamples", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--foreign-per-host", type=int, default=0, help="slot foreign questions per host (0: all)"
    )
    p.add_argument("--own-target", type=float, default=0.92)
    p.add_argument("--l2", type=float, default=1.0)
    p.add_argument("--features", default=",".join(A.FEATURES))
    p.add_argument("--write", action="store_true")
    p.add_argument("--sample-output", type=Path, help="probe: the sample's output_dir")
    p.add_argument(
        "--fit-on",
        choices=("all foreign", "specific foreign"),
        default="specific foreign",
        help="answerability: the foreign set the reported/written model is fitted on",
    )
    p.add_argument("--audit", type=int, default=40, help="audit: foreign queries to print")
    p.add_argument("--rpc", type=Path, default=RPC)
    p.add_argument("--jsquad-work", type=Path, default=Path("/tmp/select_ja"))
    p.add_argument("--jsquad-n", type=int, default=600, help="JSQuAD questions drawn")
    p.add_argument("--jsquad-floor", type=float, default=0.95, help="select: the JSQuAD guard")
    p.add_argument(
        "--built-only", action="store_true", help="only the speakers whose corpus is built"
    )
    args = p.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    parts = {
        "retrieval": retrieval,
        "answerability": answerability,
        "probe": probe,
        "audit": audit,
        "jsquad": jsquad,
        "select": select,
    }
    return parts[args.part](args)


if __name__ == "__main__":
    raise SystemExit(main())
