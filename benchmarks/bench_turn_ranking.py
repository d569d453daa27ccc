"""CPU of one query's turn ranking (``TurnIndex.scores`` for ``turn`` and ``turn_ctx``, then
``fuse`` with the default search's weights: what ``Searcher.rank_turns`` does for a
Japanese query before the reranker's features), side by side: a git ref (default ``main``)
against this tree, each in its own child process, over the same turn index, queries and
chunk rankings.

The turn index (``build``): RealPersonaChat's dialogues (``--rpc``: its
dialogues.jsonl.gz, 408,619 utterances, the tokenizer ``auto`` picks), or ``--turns``
synthetic messages in sessions of 20 to 40 (RealPersonaChat's are about 30) of words drawn
from a Zipf law over ``--vocab`` words without its ``--stopwords`` most frequent ranks (the
tokenizers drop stopwords; 0 keeps words in most messages). Chunk windows of 42 every 36
(the pipeline's default). The queries are ``--n`` of its messages (as ``bench_search_cpu
--queries messages``), each with ``--chunks`` ranked chunks (random, seeded), within a
random ``--scope`` share of the chunks when given (a scope mask, as a contact filter makes).

    python benchmarks/bench_turn_ranking.py build --dir /tmp/turnbench_rpc --rpc RPC.jsonl.gz
    python benchmarks/bench_turn_ranking.py build --dir /tmp/turnbench --turns 408000
    python benchmarks/bench_turn_ranking.py run --dir /tmp/turnbench --n 200 --ref main

Figures: CPU per query p50 / p95 / mean (process time); the top turns, the lifted chunks and
the fused arrays of each side are compared query by query (hashes of their bytes).
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


def build(a: argparse.Namespace) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from memory_pipeline.core.indexes.tokenize import get_tokenizer
    from memory_pipeline.core.indexes.turns import build_turn_index
    from memory_pipeline.core.sessions.chunking import chunk_windows

    rng = np.random.default_rng(20240301)
    if a.rpc:
        dialogues = [json.loads(line) for line in gzip.open(a.rpc, "rt", encoding="utf-8")]
        sessions = [[u["text"] for u in d["utterances"]] for d in dialogues]
    else:
        sessions = _synthetic(a, rng)
    texts = [t for ss in sessions for t in ss]
    chunk_id, session_id, chunk_index, members, mids, stamps = [], [], [], [], [], []
    t0 = dt.datetime(2024, 3, 1)
    for k, ss in enumerate(sessions):
        ids = [f"m{len(mids) + j:07d}" for j in range(len(ss))]
        mids += ids
        stamps += [t0 + dt.timedelta(days=k, minutes=j) for j in range(len(ss))]
        for j, (s, e) in enumerate(chunk_windows(len(ss), a.size, a.stride)):
            chunk_id.append(f"c{k:06d}-{j:03d}")
            session_id.append(f"s{k:06d}")
            chunk_index.append(j)
            members.append(ids[s:e])
    chunks = pa.table(
        {
            "chunk_id": chunk_id,
            "session_id": session_id,
            "chunk_index": chunk_index,
            "message_ids": members,
        }
    )
    senders = ["AB"[j % 2] for j in range(len(mids))]
    messages = pa.table({"message_id": mids, "sender": senders, "local_ts": stamps, "text": texts})
    out = Path(a.dir)
    out.mkdir(parents=True, exist_ok=True)
    pq.write_table(chunks, out / "chunks.parquet")
    pq.write_table(messages, out / "messages.parquet")
    t = time.perf_counter()
    tokenizer = get_tokenizer("auto", sample_texts=texts) if a.rpc else get_tokenizer("regex")
    build_turn_index(out, chunks, messages, tokenizer)
    took = time.perf_counter() - t
    print(f"{len(mids)} turns, {chunks.num_rows} chunks, {tokenizer.name}: built in {took:.0f} s")


def _synthetic(a: argparse.Namespace, rng: np.random.Generator) -> list[list[str]]:
    """Sessions of Zipf-distributed words (see the module doc)."""
    vocab = np.array([f"w{i}" for i in range(a.vocab)])
    p = 1.0 / np.arange(a.stopwords + 1, a.stopwords + a.vocab + 1)
    p /= p.sum()
    lengths = rng.integers(a.min_words, a.max_words + 1, a.turns)
    words = vocab[rng.choice(a.vocab, size=int(lengths.sum()), p=p)]
    ends = np.cumsum(lengths).tolist()
    texts = [" ".join(words[e - n : e]) for e, n in zip(ends, lengths.tolist(), strict=True)]
    sessions, i = [], 0
    while i < len(texts):
        n = int(rng.integers(a.min_session, a.max_session + 1))
        sessions.append(texts[i : i + n])
        i += n
    return sessions


def child(a: argparse.Namespace) -> None:
    import pyarrow.parquet as pq

    from memory_pipeline.core.indexes.turns import load_turn_indexes, turn_layout
    from memory_pipeline.core.retrieval.rerank import CANDIDATES
    from memory_pipeline.core.retrieval.searcher_parts import DEFAULT, turn_weights
    from memory_pipeline.core.retrieval.turns import TurnIndex

    folder = Path(a.dir)
    chunks = pq.read_table(folder / "chunks.parquet")
    texts = pq.read_table(folder / "messages.parquet").column("text").to_pylist()
    ti = TurnIndex(turn_layout(chunks), load_turn_indexes(folder), chunks.num_rows)
    chunk_ids = chunks.column("chunk_id").to_pylist()
    chunk_row = {c: i for i, c in enumerate(chunk_ids)}
    tok = ti.indexes["turn"].tokenizer
    rng = np.random.default_rng(7)
    picks = rng.choice(len(texts), a.n + a.warm, replace=False)
    queries = [tok.tokenize(texts[i]) for i in picks]
    # a scope (a contact, a conversation) as search passes it: a mask over chunk rows, and
    # the chunk ranking made inside it
    mask = np.random.default_rng(1).random(len(chunk_ids)) < a.scope if a.scope else None
    pool = np.flatnonzero(mask) if mask is not None else np.arange(len(chunk_ids))
    rankings = []
    for _ in queries:
        rows = rng.choice(pool, min(a.chunks, pool.size), replace=False)
        scores = np.sort(rng.random(rows.size))[::-1]
        rankings.append([(chunk_ids[r], float(s)) for r, s in zip(rows, scores, strict=True)])
    weights = turn_weights(DEFAULT)  # the shipped search's weights and lift
    depth = max(5, CANDIDATES)  # what rank_turns asks of fuse for the reranker
    cpu, digests = [], []
    for j, (toks, ranked) in enumerate(zip(queries, rankings, strict=True)):
        t = time.process_time()
        own = ti.scores(toks, "turn", mask)
        ctx = ti.scores(toks, "turn_ctx", mask)
        fused = ti.fuse(ranked, chunk_row, chunk_ids, own, ctx, weights, depth)
        dt_cpu = time.process_time() - t
        if j < a.warm:
            continue
        cpu.append(dt_cpu)
        h = hashlib.blake2b(digest_size=12)
        h.update(repr((fused.chunks, fused.turns)).encode())
        for name in ("rows", "own", "ctx", "own_raw", "chunk", "session"):
            h.update(np.ascontiguousarray(getattr(fused, name)).tobytes())
        digests.append(h.hexdigest())
    ms = np.asarray(cpu) * 1e3
    result = {
        "turns": len(ti),
        "queries": len(cpu),
        "cpu_ms_p50": float(np.percentile(ms, 50)),
        "cpu_ms_p95": float(np.percentile(ms, 95)),
        "cpu_ms_mean": float(ms.mean()),
        "digests": digests,
    }
    Path(a.result).write_text(json.dumps(result), encoding="utf-8")


def run(a: argparse.Namespace) -> None:
    from bench_search_cpu import _export

    with tempfile.TemporaryDirectory() as tmp:
        sides = [(a.ref, _export(a.ref, Path(tmp) / "ref")), ("this tree", ROOT)]
        out = {}
        for label, tree in sides:
            res = Path(tmp) / f"{len(out)}.json"
            env = dict(os.environ, PYTHONPATH=str(tree))
            args = ["_child", "--dir", a.dir, "--n", str(a.n), "--warm", str(a.warm)]
            args += ["--chunks", str(a.chunks), "--scope", str(a.scope), "--result", str(res)]
            subprocess.run([sys.executable, __file__, *args], env=env, check=True)
            out[label] = json.loads(res.read_text(encoding="utf-8"))
    (ref, r), (_, t) = out.items()
    same = sum(x == y for x, y in zip(r["digests"], t["digests"], strict=True))
    scope = f", a scope of {a.scope:.0%} of the chunks" if a.scope else ""
    print(f"{r['turns']} turns, {r['queries']} queries, {a.chunks} ranked chunks each{scope}")
    for label, v in out.items():
        print(
            f"  {label:>10}: CPU/query p50 {v['cpu_ms_p50']:.2f} ms, "
            f"p95 {v['cpu_ms_p95']:.2f} ms, mean {v['cpu_ms_mean']:.2f} ms"
        )
    print(f"  identical fused results (turns, chunks, arrays): {same}/{len(r['digests'])}")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=("build", "run", "_child"))
    p.add_argument("--dir", required=True)
    p.add_argument("--turns", type=int, default=408_000)
    p.add_argument("--vocab", type=int, default=30_000)
    p.add_argument("--stopwords", type=int, default=100, help="top Zipf ranks left out")
    p.add_argument("--rpc", help="RealPersonaChat's dialogues.jsonl.gz: its texts instead")
    p.add_argument("--min-words", type=int, default=2)
    p.add_argument("--max-words", type=int, default=12)
    p.add_argument("--min-session", type=int, default=20)
    p.add_argument("--max-session", type=int, default=40)
    p.add_argument("--size", type=int, default=42, help="chunk window (the pipeline's)")
    p.add_argument("--stride", type=int, default=36)
    p.add_argument("--n", type=int, default=200)
    p.add_argument("--warm", type=int, default=10)
    p.add_argument("--chunks", type=int, default=300)
    p.add_argument("--scope", type=float, default=0.0, help="share of chunks in scope (0: none)")
    p.add_argument("--ref", default="main")
    p.add_argument("--result")
    a = p.parse_args(argv)
    {"build": build, "run": run, "_child": child}[a.what](a)


if __name__ == "__main__":
    main()
