"""The cross-encoder stack (reranker_ce.json: the 12 logistic features + the CE logit) over the
shipped English fusion *with* the SPLADE channel, out of fold on LoCoMo dev.

train_cross_encoder.py measured the stack over the fusion without SPLADE (its ``prep``
candidates). Since then the default mixes SPLADE into a turn's own share
(``SearchConfig.splade``, ``turns.mix_splade``), which changes the top-50 candidates and the
12 features. This script redoes the comparison over the shipped fusion:

1. candidates and features: the top-50 fused turns per question under the shipped default
   (``PRESETS["default"]``, SPLADE included), computed as the evaluation computes them
   (rerank_cv.FeatureCache, the SPLADE scores joined as ``splade_locomo.py`` joins them);
2. CE scores: every (question, candidate) pair of conversation g scored by the fold model
   that never saw g (``model_<g>.pt`` of ``train_cross_encoder.py train``); pairs already in
   that run's OOF scores are reused, the others scored with torch exactly as those were
   (bottom layers, their output rounded to float16 as the cache stores it, top layers);
3. leave-one-conversation-out: the logistic reranker (12 features) against the stack
   (13 features), each trained per fold on the other conversations (the CE column of a
   training conversation h is h's own out-of-fold score, cross-fitted as before); paired
   differences per question, CIs resampling conversations then questions.

``--write``: if the stack wins (turn R@5 difference CI above 0), reranker_ce.json is
retrained over every question's OOF CE scores on this fusion (provenance: data sha256,
fusion name, the figures).

    python benchmarks/ce_splade.py --work /work/scratch/locomo_work \
        --splade-cache /work/scratch/splade/cache_np --ce /work/scratch/ce/run \
        --out /work/scratch/ce2 [--write]
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import hashlib
import pickle
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))

from locomo_loop import SESSION5, SHARED, TURN5, by_type, load  # noqa: E402
from train_cross_encoder import FROZEN, TOP_N, tokenizer  # noqa: E402

from memory_pipeline.core.evaluation import crossval as CV  # noqa: E402
from memory_pipeline.core.evaluation import evaluate as E  # noqa: E402
from memory_pipeline.core.evaluation import metrics as M  # noqa: E402
from memory_pipeline.core.evaluation.rerank_cv import FeatureCache, as_turn_config  # noqa: E402
from memory_pipeline.core.retrieval import rerank as R  # noqa: E402
from memory_pipeline.core.retrieval.config import PRESETS  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SESSION5T = ("session_by_turns", "evidence_recall", 5)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def candidates(locomo: Path, work: Path, splade_cache: Path, out: Path) -> dict:
    """Per question: the shipped fusion's top-50 turns, their 12 features, labels and the
    fused session ranking (cached in ``out/cands_splade.pkl``)."""
    path = out / "cands_splade.pkl"
    if path.exists():
        return pickle.loads(path.read_bytes())
    s, scored, cands = load(locomo, work)
    ti = s.turn_index
    units = E.Units(s)
    conv = np.array([str(s.conversation[c]) for c in ti.first_chunk], dtype=object)
    docs = sp.load_npz(splade_cache / "turns.npz").tocsr()
    qv = sp.load_npz(splade_cache / "questions.npz").tocsr()
    if docs.shape[0] != len(ti.message_ids) or qv.shape[0] != len(scored):
        raise SystemExit("the SPLADE cache does not match this corpus (splade_locomo.py)")
    raw = (qv @ docs.T.tocsr()).toarray()
    for i, q in enumerate(scored):  # as splade_locomo.write / gather store them
        v = np.where(conv == q.corpus_id, raw[i], 0.0)
        cands[q.question_id].turn["splade"] = v.astype(np.float32)
    cfg = as_turn_config(PRESETS["default"])
    if cfg.splade <= 0:
        raise SystemExit(f"the default has no SPLADE channel: {cfg.name}")
    fc = FeatureCache(s, units, cands)
    texts = {}
    questions = []
    for q in scored:
        r = fc.rows(cfg, q)
        n = len(r.x)
        for m in r.turns[:n]:
            if m not in texts:
                msg = s.message(m)
                texts[m] = (str(msg.get("sender") or ""), str(msg.get("text") or ""))
        questions.append(
            {
                "qid": q.question_id,
                "conv": q.corpus_id,
                "qtype": q.qtype,
                "question": q.question,
                "evidence": [r_ for r_, g in q.gold.items() if g >= 1],
                "turns": r.turns[:n],
                "x": r.x,
                "y": r.y,
                "sessions": r.sessions,
            }
        )
    meta = {
        "sessions_of_turn": {m: ti.layout.session_ids[ti.row_of[m]] for m in ti.message_ids},
        "ref_of": {m: units.ref_of[m] for m in ti.message_ids},
        "session_refs": {k: sorted(v) for k, v in units.session_refs.items()},
    }
    d = {"questions": questions, "texts": texts, "meta": meta, "fusion": cfg.name}
    path.write_bytes(pickle.dumps(d))
    return d


def ce_scores(d: dict, ce_dir: Path, out: Path, threads: int) -> dict[str, np.ndarray]:
    """Every question's candidates scored by its conversation's fold CE (cached)."""
    path = out / "ce_splade.pkl"
    if path.exists():
        return pickle.loads(path.read_bytes())
    from train_cross_encoder import turn_text

    old = pickle.loads((ce_dir / "data.pkl").read_bytes())
    known: dict[tuple[str, str], float] = {}
    for f in sorted(ce_dir.glob("oof_conv-*.pkl")):
        for qid, v in pickle.loads(f.read_bytes())["scores"].items():
            known.update(
                {(qid, m): float(x) for m, x in zip(oldq(old, qid)["turns"], v, strict=True)}
            )
    missing = collections.defaultdict(list)  # conv -> [(qid, mid, question)]
    for q in d["questions"]:
        for m in q["turns"]:
            if (q["qid"], m) not in known:
                missing[q["conv"]].append((q["qid"], m, q["question"]))
    total = sum(len(q["turns"]) for q in d["questions"])
    n_missing = sum(len(v) for v in missing.values())
    print(f"{total} pairs, {total - n_missing} reused from the OOF scores, {n_missing} to score")
    if n_missing:
        import torch
        from ce_model import CrossEncoder

        torch.set_num_threads(threads)
        tok = tokenizer()
        t0 = time.time()
        for conv, items in sorted(missing.items()):
            model = CrossEncoder(FROZEN, dropout=0.0)
            model.load_state_dict(torch.load(ce_dir / f"model_{conv}.pt"))
            model.eval()
            enc = tok.encode_batch([(qt, turn_text(*d["texts"][m])) for _, m, qt in items])
            flat = _score(model, enc)
            for (qid, m, _), x in zip(items, flat, strict=True):
                known[(qid, m)] = float(x)
            print(f"  {conv}: {len(items)} pairs scored, {time.time() - t0:.0f} s", flush=True)
    scores = {
        q["qid"]: np.array([known[(q["qid"], m)] for m in q["turns"]], np.float32)
        for q in d["questions"]
    }
    path.write_bytes(pickle.dumps(scores))
    return scores


def oldq(old: dict, qid: str, _index: dict = {}) -> dict:  # noqa: B006 (a memo)
    if not _index:
        _index.update({q["qid"]: q for q in old["questions"]})
    return _index[qid]


def _score(model, enc, batch: int = 64) -> np.ndarray:
    """Logits as the OOF scores were computed: bottom layers, float16 states, top layers."""
    import torch

    lens = np.array([len(e.ids) for e in enc])
    order = np.argsort(lens, kind="stable")
    out = np.zeros(len(enc), np.float32)
    with torch.no_grad():
        for b0 in range(0, len(order), batch):
            sel = order[b0 : b0 + batch]
            width = int(lens[sel].max())
            ids = np.zeros((len(sel), width), np.int64)
            types, mask = np.zeros_like(ids), np.zeros_like(ids)
            for j, i in enumerate(sel):
                n = lens[i]
                ids[j, :n], types[j, :n], mask[j, :n] = enc[i].ids, enc[i].type_ids, 1
            mt = torch.from_numpy(mask)
            h = model.bottom(torch.from_numpy(ids), torch.from_numpy(types), mt)
            out[sel] = model.top(h.half().float(), mt).numpy()
    return out


def check_reuse(ce_dir: Path, threads: int, n: int = 64) -> None:
    """The rescoring path against cached OOF scores (same pairs): max |diff|."""
    import torch
    from ce_model import CrossEncoder
    from train_cross_encoder import turn_text

    old = pickle.loads((ce_dir / "data.pkl").read_bytes())
    torch.set_num_threads(threads)
    conv = "conv-30"
    oof = pickle.loads((ce_dir / f"oof_{conv}.pkl").read_bytes())["scores"]
    qs = [q for q in old["questions"] if q["conv"] == conv][:2]
    pairs = [(q["question"], m) for q in qs for m in q["turns"]][:n]
    ref = np.concatenate([oof[q["qid"]] for q in qs])[: len(pairs)]
    model = CrossEncoder(FROZEN, dropout=0.0)
    model.load_state_dict(torch.load(ce_dir / f"model_{conv}.pt"))
    model.eval()
    enc = tokenizer().encode_batch([(qt, old["texts"][m]) for qt, m in pairs])
    got = _score(model, enc)
    print(f"rescoring check ({len(pairs)} cached pairs): max |diff| {np.abs(got - ref).max():.4f}")
    del turn_text


def loco(d: dict, feats: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per question, the logits of the logistic model trained on the other conversations."""
    qs = d["questions"]
    out = {}
    for held in sorted({q["conv"] for q in qs}):
        tr = [q for q in qs if q["conv"] != held and len(q["turns"])]
        x = np.vstack([feats[q["qid"]] for q in tr])
        y = np.concatenate([q["y"] for q in tr])
        g = [q["qid"] for q in tr for _ in q["turns"]]
        model = R.train(x, y, g)  # 12 columns: FEATURES, 13: FEATURES_CE
        for q in qs:
            if q["conv"] == held and len(q["turns"]):
                out[q["qid"]] = model.score(feats[q["qid"]])
    return out


def loco_old_fusion(d: dict, ce_dir: Path, stack: dict[str, np.ndarray]) -> dict:
    """The stack as reranker_ce.json was trained (the fusion without SPLADE: the rows of
    train_cross_encoder.py prep and its OOF CE scores), per fold on the other conversations,
    applied to this fusion's held-out rows: what the current artifact does on the new
    fusion, out of fold."""
    old = pickle.loads((ce_dir / "data.pkl").read_bytes())
    oof: dict[str, np.ndarray] = {}
    for f in sorted(ce_dir.glob("oof_conv-*.pkl")):
        oof.update(pickle.loads(f.read_bytes())["scores"])
    ref_of = old["meta"]["ref_of"]
    out = {}
    for held in sorted({q["conv"] for q in d["questions"]}):
        tr = [q for q in old["questions"] if q["conv"] != held and len(q["turns"])]
        x = np.vstack([np.column_stack([q["x"], oof[q["qid"]]]) for q in tr])
        y = np.concatenate(
            [np.array([ref_of[m] in set(q["evidence"]) for m in q["turns"]], float) for q in tr]
        )
        g = [q["qid"] for q in tr for _ in q["turns"]]
        model = R.train(x, y, g)
        for q in d["questions"]:
            if q["conv"] == held and q["qid"] in stack:
                out[q["qid"]] = model.score(stack[q["qid"]])
    return out


def reorder(turns: list[str], logits: np.ndarray | None) -> list[str]:
    if logits is None:
        return list(turns)
    top = sorted(range(len(logits)), key=lambda i: (-logits[i], i))
    return [turns[i] for i in top] + turns[len(logits) :]


def values(d: dict, order_of: dict[str, list[str]]) -> dict[tuple, list]:
    meta = d["meta"]
    srefs = meta["session_refs"]
    out = collections.defaultdict(list)
    for q in d["questions"]:
        order = order_of[q["qid"]]
        refs = list(dict.fromkeys(meta["ref_of"][m] for m in order))
        ev = q["evidence"]
        out[TURN5].append(M.evidence_recall_at_k(refs, ev, None, 5))
        out[SESSION5].append(M.evidence_recall_at_k(q["sessions"], ev, srefs, 5))
        by_turn = list(dict.fromkeys([meta["sessions_of_turn"][m] for m in order] + q["sessions"]))
        out[SESSION5T].append(M.evidence_recall_at_k(by_turn, ev, srefs, 5))
    return out


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--locomo", type=Path, default=SHARED / "locomo" / "locomo_dev.json")
    p.add_argument("--work", type=Path, required=True, help="locomo_loop corpus (read only)")
    p.add_argument("--splade-cache", type=Path, required=True, help="splade_locomo's --cache")
    p.add_argument("--ce", type=Path, required=True, help="train_cross_encoder's --out")
    p.add_argument("--out", type=Path, required=True, help="this script's cache")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--check", action="store_true", help="rescoring path vs cached scores")
    p.add_argument("--write", action="store_true", help="reranker_ce.json, if the stack wins")
    p.add_argument(
        "--force",
        action="store_true",
        help="with --write: write even without an out-of-fold win (an opt-in setting's call, "
        "not the default's)",
    )
    a = p.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    if a.check:
        check_reuse(a.ce, a.threads)
    d = candidates(a.locomo, a.work, a.splade_cache, a.out)
    qs = d["questions"]
    print(f"{len(qs)} questions, fusion {d['fusion']}")
    ce = ce_scores(d, a.ce, a.out, a.threads)
    base = {q["qid"]: q["x"] for q in qs if len(q["turns"])}
    stack = {k: np.column_stack([v, ce[k]]) for k, v in base.items()}
    lg, st = loco(d, base), loco(d, stack)
    stale = loco_old_fusion(d, a.ce, stack)
    variants = {
        "fused (no reranker)": {q["qid"]: list(q["turns"]) for q in qs},
        "logistic, 12 features (LOCO)": {
            q["qid"]: reorder(q["turns"], lg.get(q["qid"])) for q in qs
        },
        "stack, 12 + CE logit (LOCO)": {
            q["qid"]: reorder(q["turns"], st.get(q["qid"])) for q in qs
        },
        "stack trained on the old fusion (as reranker_ce.json now, LOCO)": {
            q["qid"]: reorder(q["turns"], stale.get(q["qid"])) for q in qs
        },
    }
    groups = [q["conv"] for q in qs]
    qtypes = [q["qtype"] for q in qs]

    class Q:  # by_type wants .qtype
        def __init__(self, t: str) -> None:
            self.qtype = t

    typed = [Q(t) for t in qtypes]
    vals = {k: values(d, v) for k, v in variants.items()}
    ref = vals["logistic, 12 features (LOCO)"]
    figures: dict[str, dict] = {}
    lines = [
        "| variant | turn R@5 | Δ turn vs logistic | session R@5 (fused) "
        "| session R@5 by reranked turns | Δ vs logistic (by turns) "
        "| multi-hop turn | multi-hop session (by turns) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, v in vals.items():
        cells, fig = [name], {}
        for key in (TURN5, SESSION5, SESSION5T):
            m, lo, hi = CV.cluster_bootstrap_ci(v[key], groups, 2000)
            cells.append(f"{m:.3f} [{lo:.3f}, {hi:.3f}]")
            fig[key[0]] = [round(m, 4), round(lo, 4), round(hi, 4)]
            if key != SESSION5:
                diff = [
                    None if x is None or y is None else x - y
                    for x, y in zip(v[key], ref[key], strict=True)
                ]
                dm, dlo, dhi = CV.cluster_bootstrap_ci(diff, groups, 2000)
                cells.append(f"{dm:+.3f} [{dlo:+.3f}, {dhi:+.3f}]")
                fig[f"{key[0]} minus logistic"] = [round(dm, 4), round(dlo, 4), round(dhi, 4)]
        for key in (TURN5, SESSION5T):
            mh = by_type(v[key], typed)["multi-hop"]
            cells.append(f"{mh:.3f}")
            fig[f"{key[0]} multi-hop"] = round(mh, 4)
        figures[name] = fig
        lines.append("| " + " | ".join(cells) + " |")
    per = collections.defaultdict(list)
    for x, y, g in zip(vals["stack, 12 + CE logit (LOCO)"][TURN5], ref[TURN5], groups, strict=True):
        if x is not None and y is not None:
            per[g].append(x - y)
    lines.append("")
    lines.append(
        "stack minus logistic, turn R@5, per conversation: "
        + " ".join(f"{g} {np.mean(v):+.3f}" for g, v in sorted(per.items()))
    )
    lines.append("")
    lines.append("| variant | " + " | ".join(sorted(set(qtypes))) + " |")
    lines.append("|---" * (1 + len(set(qtypes))) + "|")
    for name, v in vals.items():
        bt = by_type(v[TURN5], typed)
        lines.append(
            "| " + name + " | " + " | ".join(f"{bt[t]:.3f}" for t in sorted(set(qtypes))) + " |"
        )
    text = "\n".join(lines)
    print(text)
    (a.out / "table_splade.md").write_text(text + "\n")
    wins = figures["stack, 12 + CE logit (LOCO)"]["turn minus logistic"][1] > 0
    print(f"stack wins out of fold: {wins}")
    if a.write:
        if not wins and not a.force:
            print("not writing reranker_ce.json: the stack does not win")
            return
        write(d, ce, stack, figures, a)


def write(d: dict, ce, stack, figures: dict, a) -> None:
    """reranker_ce.json over this fusion: every question, its conversation's OOF CE scores."""
    qs = [q for q in d["questions"] if len(q["turns"])]
    x = np.vstack([stack[q["qid"]] for q in qs])
    y = np.concatenate([q["y"] for q in qs])
    g = [q["qid"] for q in qs for _ in q["turns"]]
    model = R.train(
        x,
        y,
        g,
        provenance={
            "config": d["fusion"],
            "trained_on": {"file": a.locomo.name, "sha256": sha256(a.locomo)},
            "ce_scores": "out-of-fold: each conversation scored by the CE trained without it "
            f"(train_cross_encoder.py train, {TOP_N} fused candidates per question)",
            "questions": len(d["questions"]),
            "conversations": sorted({q["conv"] for q in qs}),
            "out_of_fold": figures,
            "command": "python benchmarks/ce_splade.py --work <locomo_loop corpus> "
            "--splade-cache <splade_locomo cache> --ce <train_cross_encoder out> "
            "--out <cache> --write",
            "date": dt.date.today().isoformat(),
        },
    )
    path = ROOT / "memory_pipeline" / "core" / "retrieval" / R.ARTIFACT_CE
    path.write_text(R.render_artifact(model.to_dict()), encoding="utf-8")
    print(f"{path}: weights {dict(zip(model.features, np.round(model.weights, 3), strict=True))}")


if __name__ == "__main__":
    main()
