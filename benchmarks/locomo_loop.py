"""A fast LoCoMo dev loop: build the corpus once, cache every question's candidates, then
score search configurations on all 883 questions in seconds, analyse the default's misses,
and cross-validate a small grid leave-one-conversation-out.

``memory-pipeline eval`` rebuilds the corpus and sweeps ~400 configurations (minutes to tens
of minutes on a loaded machine). Trying one retrieval idea needs neither: the corpus
(``--work``/corpus, built by ``eval_runner.build_corpus``, the same pipeline) and the
candidate lists (``evaluate.gather``: BM25[raw_text], dense[embedding_text], the turn index
scores, the named speakers) are computed once and reused; a configuration is then the same
re-ranking of those lists that the evaluation's sweep does (``Units.rank`` +
``question_scores``), so the figures here equal the evaluation's in-sample figures.

Only ``locomo_dev.json`` is read (the other LoCoMo conversations are the blind test).

    python benchmarks/locomo_loop.py score                 # the default (no reranker)
    python benchmarks/locomo_loop.py analyse               # where the default misses, per type
    python benchmarks/locomo_loop.py grid                  # LOCO of the turn-weight grid
    python benchmarks/locomo_loop.py prf                   # PRF from the top turns
    python benchmarks/locomo_loop.py dense                 # a dense vector per turn
    python benchmarks/locomo_loop.py memkeys               # memories as turn keys (+ LOCO)
"""

from __future__ import annotations

import argparse
import collections
import itertools
import os
import pickle
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
from _common import CPU, timed

from memory_pipeline.core.evaluation import crossval as CV
from memory_pipeline.core.evaluation import evaluate as E
from memory_pipeline.core.evaluation import metrics as M
from memory_pipeline.core.evaluation.evalsets import load_locomo_questions
from memory_pipeline.core.retrieval.config import PRESETS, SearchConfig
from memory_pipeline.core.retrieval.query import boost_turns, speakers_in
from memory_pipeline.core.retrieval.searcher import Searcher, turn_weights

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("MEMORY_PIPELINE_SHARED_DATA", ROOT.parent / "shared" / "data"))
TURN5 = ("turn", "evidence_recall", 5)
SESSION5 = ("session", "evidence_recall", 5)
UNITS5 = ("units", "evidence_recall", 5)


def load(locomo: Path, work: Path):
    """(searcher, scored questions, candidates by question id): the corpus is built on the
    first call, the candidates pickled beside it (delete ``cands.pkl`` after a rebuild)."""
    from memory_pipeline.config import load_config
    from memory_pipeline.eval_runner import build_corpus

    config = work / "corpus" / "memory_pipeline.toml"
    if not config.exists():
        build_corpus(locomo, work / "corpus", log=lambda m: print(m, file=sys.stderr))
    searcher = Searcher(load_config(config, env={}).output_dir)
    questions, _ = load_locomo_questions(locomo)
    scored = [q for q in questions if q.scored]
    cache = work / "cands.pkl"
    if cache.exists():
        cands = pickle.loads(cache.read_bytes())
    else:
        cands = E.gather(searcher, scored, ["embedding_text"])
        for q in scored:
            cands[q.question_id].names = tuple(speakers_in(q.question, searcher.known_speakers))
        cache.write_bytes(pickle.dumps(cands))  # without speakers_of: a closure

    def speakers_of(c: str) -> Sequence[str]:
        return searcher.chunk(c)["speakers"]

    for c in cands.values():
        c.speakers_of = speakers_of
    return searcher, scored, cands


def by_type(values: Sequence[float | None], scored) -> dict[str, float]:
    """Mean of the per-question values overall and per question type (None left out)."""
    out: dict[str, list[float]] = collections.defaultdict(list)
    for v, q in zip(values, scored, strict=True):
        if v is not None:
            out["all"].append(v)
            out[q.qtype].append(v)
    return {k: float(np.mean(v)) for k, v in sorted(out.items())}


def score(s, scored, cands, configs: Sequence[SearchConfig]) -> None:
    units = E.Units(s)
    t: dict[str, float] = {}
    with timed(t, "sweep"):
        vals = E.sweep(configs, scored, cands, units, log=lambda _m: None)
    for cfg in configs:
        for key in (TURN5, SESSION5):
            figs = by_type(vals[cfg.name][key], scored)
            print(f"{key[0]:7s} R@5 " + " ".join(f"{k}={v:.4f}" for k, v in figs.items()))
        print(f"  ({cfg.name})")
    print(f"{len(configs)} configs x {len(scored)} questions: {t['sweep' + CPU]:.1f} s CPU")


def _turn_session(s, m: str) -> str:
    ti = s.turn_index
    return ti.layout.session_ids[ti.row_of[m]]


def cap_sessions(order: Sequence[str], session_of, m: int) -> list[str]:
    """``order`` with at most ``m`` turns per session before every turn over the cap (the
    session-diverse top-k counterfactual)."""
    out, over, count = [], [], collections.Counter()
    for t in order:
        sid = session_of(t)
        (out if count[sid] < m else over).append(t)
        count[sid] += 1 if count[sid] < m else 0
    return out + over


def analyse(s, scored, cands, cfg: SearchConfig) -> None:
    """Where the evidence of ``cfg`` (its unlearned turn ranking) ranks, how many sessions
    the evidence and the top 5 turns span, and two counterfactuals: a session cap on the
    top turns, and sessions ranked by their best turns instead of their chunks."""
    units = E.Units(s)
    ti = s.turn_index
    refs: dict[tuple[str, str], str] = {}
    for m, r in units.ref_of.items():  # a source_ref (D1:3) repeats across conversations
        if m in ti.row_of:
            refs[(str(s.conversation[ti.first_chunk[ti.row_of[m]]]), r)] = m
    rows = collections.defaultdict(lambda: collections.defaultdict(list))
    for q in scored:
        cand = cands[q.question_id]
        fused, boosted = _default_turns(s, cand, cfg, 2000)
        order = [m for m, _ in boosted]
        evidence = [r for r, g in q.gold.items() if g >= 1]
        ev_msgs = [refs[(q.corpus_id, r)] for r in evidence if (q.corpus_id, r) in refs]
        where = {m: i + 1 for i, m in enumerate(order)}
        ranks = [where.get(m, 10**6) for m in ev_msgs]
        sessions = units.sessions(fused.chunks)
        top5 = {_turn_session(s, m) for m in order[:5]}
        best_turn: dict[str, float] = {}
        for m, v in fused.turns:
            best_turn.setdefault(_turn_session(s, m), v)
        by_turn = sorted(best_turn, key=lambda k: -best_turn[k])
        r = {
            "turn@5": np.mean([x <= 5 for x in ranks]),
            "turn@10": np.mean([x <= 10 for x in ranks]),
            "turn@20": np.mean([x <= 20 for x in ranks]),
            "turn@50": np.mean([x <= 50 for x in ranks]),
            "sess@5": M.evidence_recall_at_k(sessions, evidence, units.session_refs, 5),
            "sess@10": M.evidence_recall_at_k(sessions, evidence, units.session_refs, 10),
            "ev_sessions": len({_turn_session(s, m) for m in ev_msgs}),
            "top5_sessions": len(top5),
            "ev_in_top5_sessions": np.mean([_turn_session(s, m) in top5 for m in ev_msgs]),
            "sess@5_by_best_turn": M.evidence_recall_at_k(by_turn, evidence, units.session_refs, 5),
        }
        for m in (1, 2, 3):
            capped = cap_sessions(order, lambda t: _turn_session(s, t), m)
            r[f"turn@5_cap{m}"] = M.evidence_recall_at_k(units.refs(capped, 5), evidence, None, 5)
        for qt in ("all", q.qtype):
            for k, v in r.items():
                rows[qt][k].append(v)
    print(f"analysis of {cfg.name}")
    for qt, cols in sorted(rows.items()):
        print(f"{qt} (n={len(cols['turn@5'])})")
        print("   " + " ".join(f"{k}={np.mean(v):.3f}" for k, v in cols.items()))


def grid(s, scored, cands) -> None:
    """The granularity-fusion weights of the evaluation's grid and a wider one (past its
    edges: lift 0.35, turn_chunk 0.45 and turn_self 0.4 are the edges the selection
    chose), over the default's chunk ranking, each leave-one-conversation-out."""
    base = replace(PRESETS["default"], rerank=False)
    units = E.Units(s)
    groups = [q.corpus_id for q in scored]

    def configs(ts, tc, tk, lifts) -> list[SearchConfig]:
        return [
            replace(base, turn_self=a, turn_ctx=b, turn_chunk=c, lift=d, speaker_boost=w)
            for a, b, c, d, w in itertools.product(ts, tc, tk, lifts, (0.1, 0.3))
        ]

    old = configs(E.TURN_SELF, E.TURN_CTX, E.TURN_CHUNK, E.LIFTS)
    wide = configs((0.2, 0.3, 0.4, 0.6), (0.1, 0.2), (0.3, 0.45, 0.6, 0.8), (0.2, 0.35, 0.5, 0.8))
    every = list({c.name: c for c in old + wide}.values())
    t: dict[str, float] = {}
    with timed(t, "sweep"):
        vals = E.sweep(every, scored, cands, units, log=lambda _m: None)
    print(f"swept {len(every)} configurations: {t['sweep' + CPU]:.1f} s CPU")
    for label, pool in (("evaluation grid", old), ("wider grid", old + wide)):
        names = list(dict.fromkeys(c.name for c in pool))
        cv = CV.leave_one_group_out(names, vals, groups, UNITS5)
        for key in (TURN5, SESSION5):
            mean, lo, hi = CV.cluster_bootstrap_ci(cv.oof[key], groups, 2000)
            mh = by_type(cv.oof[key], scored)["multi-hop"]
            print(f"{label}: out-of-fold {key[0]} R@5 {mean:.4f} [{lo:.4f}, {hi:.4f}] mh {mh:.4f}")
        print(f"   selected on all: {cv.selected}")


def _default_turns(s, cand, cfg: SearchConfig, depth: int):
    """The fused chunks and the boosted turns of ``cfg`` for one question's candidates."""
    fused = s.turn_index.fuse(
        cand.ranking(cfg),
        s.position,
        s.chunk_ids,
        cand.turn["turn"],
        cand.turn["turn_ctx"],
        turn_weights(cfg),
        depth,
    )
    sender = lambda m: s.message(m)["sender"]  # noqa: E731
    return fused, boost_turns(fused.turns, sender, cand.names, cfg.speaker_boost)


def turn_prf(s, scored, cands, cfg: SearchConfig) -> None:
    """Pseudo-relevance feedback from the top fused *turns* (the evaluation's PRF reads whole
    chunks, i.e. LoCoMo sessions): RM3 terms (``query.expansion_terms``) of the top ``docs``
    turns, speakers' names excluded, mixed into the chunk BM25 and both turn BM25s as
    ``(1 - lam) * BM25(query) + lam * sum_t w_t * BM25(t)``; then ``cfg``'s ranking."""
    from memory_pipeline.core.retrieval.query import expansion_terms

    units = E.Units(s)
    ti = s.turn_index
    index = s.bm25["raw_text"]
    tok, vocab = index.tokenizer, index.vocab
    names = {t for n in s.known_speakers for t in tok.tokenize(n)}
    rows = s._doc_positions("raw_text")

    def chunk_bm25(ids: list[int]) -> np.ndarray:
        return np.asarray(index.retriever.get_scores_from_ids(ids), dtype=np.float64)

    def expanded(q, cand, docs: int, n_terms: int, lam: float) -> E.Candidates:
        _, turns = _default_turns(s, cand, cfg, 40)
        q_tokens = tok.tokenize(q.question)
        texts = [tok.tokenize(s.message(m)["text"]) for m, _ in turns[:docs]]
        weights = [v for _, v in turns[:docs]]
        terms = expansion_terms([*q_tokens, *names], texts, weights, s.idf, n_terms)
        terms = [(t, w) for t, w in terms if t in vocab]
        out = E.Candidates(dense=cand.dense, names=cand.names, speakers_of=cand.speakers_of)
        out.bm25, out.turn = cand.bm25, cand.turn
        if not terms:
            return out
        mask = s.scope_mask(None, q.corpus_id)
        sc = (1 - lam) * chunk_bm25([vocab[t] for t in q_tokens if t in vocab])
        for t, w in terms:
            sc += lam * w * chunk_bm25([vocab[t]])
        sc = np.where(mask[rows], sc, 0.0)
        top = np.argsort(-sc, kind="stable")[: E.POOL]
        out.bm25 = {"raw_text": [(index.doc_ids[i], float(sc[i])) for i in top if sc[i] > 0]}
        out.turn = {}
        for rep in ("turn", "turn_ctx"):
            v = (1 - lam) * cand.turn[rep].astype(np.float64)
            for t, w in terms:
                v += lam * w * ti.scores([t], rep, mask).dense()
            out.turn[rep] = v
        return out

    for docs, n_terms, lam in (
        (1, 5, 0.3),
        (3, 10, 0.15),
        (3, 10, 0.3),
        (3, 10, 0.5),
        (5, 10, 0.3),
    ):
        new = {q.question_id: expanded(q, cands[q.question_id], docs, n_terms, lam) for q in scored}
        vals = E.sweep([cfg], scored, new, units, log=lambda _m: None)[cfg.name]
        figs = " ".join(
            f"{key[0]} {by_type(vals[key], scored)['all']:.4f} "
            f"(mh {by_type(vals[key], scored)['multi-hop']:.4f})"
            for key in (TURN5, SESSION5)
        )
        print(f"turn PRF docs={docs} terms={n_terms} lam={lam}: R@5 {figs}")


def turn_dense(s, scored, cands, cfg: SearchConfig, work: Path, model: str | None) -> None:
    """Dense per *turn* (the default embedder, one vector per ``sender: text``, cached in
    ``work``): the turn's cosine (scaled by the query's best, within its conversation) is
    added to its own BM25 share with weight ``wd``, so it reaches the turn score and, through
    the lift, its chunk and session. ``model``: a local embedder (``MEMORY_PIPELINE_
    EMBEDDING_MODEL`` names) for turns and questions instead of the index's."""
    from memory_pipeline.core.represent.providers.factory import make_embedder

    ti = s.turn_index
    units = E.Units(s)
    embedder = make_embedder("local", model) if model else s.query_embedder("embedding_text")
    path = work / (f"turn_vectors.{model}.npy" if model else "turn_vectors.npy")
    if path.exists():
        vectors = np.load(path)
    else:
        t: dict[str, float] = {}
        texts = [f"{s.message(m)['sender']}: {s.message(m)['text']}" for m in ti.message_ids]
        with timed(t, "embed"):
            emb = embedder.embed(texts, input_type="document")
            vectors = np.asarray(emb.vectors, dtype=np.float32)
        np.save(path, vectors)
        print(f"embedded {len(texts)} turns: {t['embed' + CPU]:.1f} s CPU")
    conv = np.array([str(s.conversation[c]) for c in ti.first_chunk], dtype=object)
    if model:
        asked = embedder.embed([q.question for q in scored], input_type="query").vectors
        query = {
            q.question_id: np.asarray(v, np.float32) for q, v in zip(scored, asked, strict=True)
        }
    else:
        query = {q.question_id: s.embed_query(q.question, "embedding_text") for q in scored}
    for wd in (0.0, 0.25, 0.5, 1.0):
        tv, sv = [], []
        for q in scored:
            cand = cands[q.question_id]
            d = np.where(conv == q.corpus_id, vectors @ query[q.question_id], 0)
            d = np.maximum(d, 0.0) / (float(d.max()) or 1.0)
            own = cand.turn["turn"].astype(np.float64)
            top = float(own.max()) or 1.0
            mixed = E.Candidates(dense=cand.dense, names=cand.names, speakers_of=cand.speakers_of)
            mixed.bm25 = cand.bm25
            mixed.turn = {"turn": (own / top + wd * d) * top, "turn_ctx": cand.turn["turn_ctx"]}
            fused, turns = _default_turns(s, mixed, cfg, 40)
            evidence = [r for r, g in q.gold.items() if g >= 1]
            tv.append(
                M.evidence_recall_at_k(units.refs([m for m, _ in turns], 5), evidence, None, 5)
            )
            sessions = units.sessions(fused.chunks)
            sv.append(M.evidence_recall_at_k(sessions, evidence, units.session_refs, 5))
        t_all, s_all = by_type(tv, scored), by_type(sv, scored)
        print(
            f"turn dense wd={wd}: turn R@5 {t_all['all']:.4f} (mh {t_all['multi-hop']:.4f}) "
            f"session R@5 {s_all['all']:.4f} (mh {s_all['multi-hop']:.4f})"
        )


def _memories(s, work: Path) -> list[dict]:
    """The corpus's extracted memories (``memories`` asset, every day) that cite a turn of
    the index: text, subject and the cited message ids."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from memory_pipeline.config import load_config

    config = load_config(work / "corpus" / "memory_pipeline.toml", env={})
    folder = Path(config.output_dir) / "parquet" / "memories"
    files = sorted(folder.glob("*.parquet"))
    if not files:
        raise SystemExit(f"no memories under {folder}")
    cols = ["text", "subject", "kind", "confidence", "message_ids"]
    table = pa.concat_tables([pq.read_table(f, columns=cols) for f in files])
    row_of = s.turn_index.row_of
    return [r for r in table.to_pylist() if any(m in row_of for m in r["message_ids"] or [])]


def _memory_coverage(s, scored, by_turn, heads, texts, tok) -> None:
    """Per question type: the share of evidence turns some memory cites, and the share whose
    memories hold a question token the turn document lacks (what a memory key can add)."""
    ti = s.turn_index
    units = E.Units(s)
    refs: dict[tuple[str, str], int] = {}
    for m, r in units.ref_of.items():
        if m in ti.row_of:
            refs[(str(s.conversation[ti.first_chunk[ti.row_of[m]]]), r)] = ti.row_of[m]
    cov, new = collections.defaultdict(list), collections.defaultdict(list)
    for q in scored:
        qt = set(tok.tokenize(q.question))
        for r, g in q.gold.items():
            row = refs.get((q.corpus_id, r))
            if g < 1 or row is None:
                continue
            own = set(tok.tokenize(f"{heads[row]} {texts[row]}"))
            extra = {x for m in by_turn.get(row, []) for x in tok.tokenize(m)} - own
            for k in ("all", q.qtype):
                cov[k].append(row in by_turn)
                new[k].append(bool(extra & qt))
    for k in sorted(cov):
        print(
            f"evidence turns {k} (n={len(cov[k])}): cited by a memory {np.mean(cov[k]):.3f}, "
            f"memory adds a question token {np.mean(new[k]):.3f}"
        )


def memory_keys(s, scored, cands, cfg: SearchConfig, work: Path, cv: bool) -> None:
    """Fact-augmented keys (LongMemEval, Wu et al. 2024): the memories extracted from a turn
    (``core/memories/extract.py``: rewritten with the speaker as subject) become extra BM25
    keys of that turn, two ways:

    - *append*: each ``turn`` document (speaker, date, message) with its memories' texts
      appended, re-indexed (same tokenizer, k1, b); its BM25 replaces the turn's own score;
    - *sep*: a BM25 over the memory texts alone; a turn gets the best score of the memories
      citing it, added to its own share as ``own / best + wm * mem / best_mem``;
    - *append + sep*: both (wm 0.5);
    - *cited prior* (a mechanism check, no memory text): a turn's own BM25 times
      ``1 + wp`` when some memory cites it.

    Then ``cfg``'s fusion, as the evaluation scores it. With ``cv``, the variants (default
    included) are selected leave-one-conversation-out on units R@5, pooled out of fold with
    conversation-resampling CIs, and the paired difference to the default."""
    from memory_pipeline.core.indexes.bm25 import build_index

    ti = s.turn_index
    units = E.Units(s)
    tok = s.bm25["raw_text"].tokenizer
    mems = _memories(s, work)
    by_turn: dict[int, list[str]] = collections.defaultdict(list)
    for r in mems:
        for m in r["message_ids"]:
            if m in ti.row_of:
                by_turn[ti.row_of[m]].append(r["text"])
    print(f"{len(mems)} memories cite {len(by_turn)} of {len(ti.message_ids)} turns")
    heads, texts = [], []
    for m in ti.message_ids:
        msg = s.message(m)
        ts = msg.get("local_ts")
        heads.append(f"{msg.get('sender') or ''} {ts.date().isoformat() if ts else ''}:")
        texts.append(str(msg.get("text") or ""))
    conv = np.array([str(s.conversation[c]) for c in ti.first_chunk], dtype=object)
    _memory_coverage(s, scored, by_turn, heads, texts, tok)

    def turn_scores(index, doc_rows: np.ndarray, q) -> np.ndarray:
        out = np.zeros(len(ti), dtype=np.float64)
        ids = [index.vocab[t] for t in tok.tokenize(q.question) if t in index.vocab]
        if ids:
            out[doc_rows] = np.asarray(index.retriever.get_scores_from_ids(ids), np.float64)
        return np.where(conv == q.corpus_id, out, 0.0)

    t: dict[str, float] = {}
    rows = np.arange(len(ti))
    with timed(t, "index"):
        plain = build_index(
            ti.message_ids, [f"{h} {x}" for h, x in zip(heads, texts, strict=True)], tok
        )
        appended = build_index(
            ti.message_ids,
            [
                f"{h} {x} {' '.join(by_turn.get(i, []))}"
                for i, (h, x) in enumerate(zip(heads, texts, strict=True))
            ],
            tok,
        )
        mem_rows = np.array([i for i, v in sorted(by_turn.items()) for _ in v], dtype=np.int64)
        mem_texts = [x for _, v in sorted(by_turn.items()) for x in v]
        mem_index = build_index([str(i) for i in range(len(mem_texts))], mem_texts, tok)
    print(f"indexes built: {t['index' + CPU]:.1f} s CPU")
    # the re-built plain index must give the stored turn scores (else the comparison is off)
    gap = max(
        float(np.abs(turn_scores(plain, rows, q) - cands[q.question_id].turn["turn"]).max())
        for q in scored[:100]
    )
    print(f"re-built turn index vs stored turn scores: max |diff| {gap:.2e} (100 questions)")

    def with_turn(cand, own: np.ndarray) -> E.Candidates:
        out = E.Candidates(dense=cand.dense, names=cand.names, speakers_of=cand.speakers_of)
        out.bm25 = cand.bm25
        out.turn = {"turn": own.astype(np.float32), "turn_ctx": cand.turn["turn_ctx"]}
        return out

    def mem_best(q) -> np.ndarray:
        sc = np.zeros(len(ti), dtype=np.float64)
        ids = [mem_index.vocab[x] for x in tok.tokenize(q.question) if x in mem_index.vocab]
        if ids:
            v = np.asarray(mem_index.retriever.get_scores_from_ids(ids), np.float64)
            np.maximum.at(sc, mem_rows, v)
        return np.where(conv == q.corpus_id, sc, 0.0)

    variants: dict[str, dict] = {"default": cands}
    with timed(t, "variants"):
        variants["append"] = {
            q.question_id: with_turn(cands[q.question_id], turn_scores(appended, rows, q))
            for q in scored
        }
        best = {q.question_id: mem_best(q) for q in scored}
        for wm in (0.25, 0.5, 1.0):
            new = {}
            for q in scored:
                cand = cands[q.question_id]
                own = cand.turn["turn"].astype(np.float64)
                top = float(own.max()) or 1.0
                mb = best[q.question_id]
                new[q.question_id] = with_turn(
                    cand, (own / top + wm * mb / (mb.max() or 1.0)) * top
                )
            variants[f"sep wm={wm}"] = new
        both = {}
        for q in scored:  # the appended turn documents plus the separate memory keys
            own = turn_scores(appended, rows, q)
            top = float(own.max()) or 1.0
            mb = best[q.question_id]
            both[q.question_id] = with_turn(
                cands[q.question_id], (own / top + 0.5 * mb / (mb.max() or 1.0)) * top
            )
        variants["append + sep wm=0.5"] = both
        # the mechanism check: memories add almost no question token to evidence turns, so
        # is "some memory cites this turn" (a fact-bearing turn) the signal on its own?
        cited = np.zeros(len(ti))
        cited[list(by_turn)] = 1.0
        for wp in (0.25, 0.5):
            variants[f"cited prior wp={wp}"] = {
                q.question_id: with_turn(
                    cands[q.question_id],
                    cands[q.question_id].turn["turn"].astype(np.float64) * (1 + wp * cited),
                )
                for q in scored
            }
    print(f"variant candidates: {t['variants' + CPU]:.1f} s CPU")
    vals: dict[str, dict] = {}
    for name, cd in variants.items():
        vals[name] = E.sweep([cfg], scored, cd, units, log=lambda _m: None)[cfg.name]
        figs = " ".join(
            f"{key[0]} {by_type(vals[name][key], scored)['all']:.4f} "
            f"(mh {by_type(vals[name][key], scored)['multi-hop']:.4f})"
            for key in (TURN5, SESSION5)
        )
        print(f"memory keys {name}: R@5 {figs}")
    if not cv:
        return
    groups = [q.corpus_id for q in scored]
    pools = {
        "memory keys": [n for n in vals if not n.startswith("cited")],
        "memory keys + cited prior": list(vals),
    }
    for label, names in pools.items():
        res = CV.leave_one_group_out(names, vals, groups, UNITS5)
        print(f"{label}: folds {res.folds}")
        for key in (TURN5, SESSION5):
            mean, lo, hi = CV.cluster_bootstrap_ci(res.oof[key], groups, 2000)
            base = vals["default"][key]
            diff = [
                None if a is None or b is None else a - b
                for a, b in zip(res.oof[key], base, strict=True)
            ]
            d, dlo, dhi = CV.cluster_bootstrap_ci(diff, groups, 2000)
            mh = by_type(res.oof[key], scored)["multi-hop"]
            print(
                f"  out-of-fold {key[0]} R@5 {mean:.4f} [{lo:.4f}, {hi:.4f}] mh {mh:.4f}; "
                f"minus default {d:+.4f} [{dlo:+.4f}, {dhi:+.4f}]"
            )


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("what", choices=("score", "analyse", "grid", "prf", "dense", "memkeys"))
    p.add_argument("--locomo", type=Path, default=SHARED / "locomo" / "locomo_dev.json")
    p.add_argument("--work", type=Path, default=Path("/tmp/locomo_loop"))
    p.add_argument("--cv", action="store_true", help="memkeys: leave-one-conversation-out too")
    p.add_argument("--model", help="dense: a local embedder for the turns (default: the index's)")
    a = p.parse_args(argv)
    t0 = time.process_time()
    s, scored, cands = load(a.locomo, a.work)
    print(f"{len(scored)} questions loaded: {time.process_time() - t0:.1f} s CPU")
    default = replace(PRESETS["default"], rerank=False)
    if a.what == "score":
        score(s, scored, cands, [default])
    elif a.what == "analyse":
        analyse(s, scored, cands, default)
    elif a.what == "grid":
        grid(s, scored, cands)
    elif a.what == "prf":
        turn_prf(s, scored, cands, default)
    elif a.what == "memkeys":
        memory_keys(s, scored, cands, default, a.work, a.cv)
    else:
        turn_dense(s, scored, cands, default, a.work, a.model)


if __name__ == "__main__":
    main()
