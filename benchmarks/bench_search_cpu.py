"""CPU per search, side by side: the shipped code (a git ref, default ``main``) against this
tree, in one run, over the same published index and the same queries.

Each side runs in its own child process with its own code on ``PYTHONPATH`` (the ref is
exported with ``git archive`` into a temporary folder), so the two never share a cache:

- ``search``: load the version as the service does (``Searcher`` + one warm-up search,
  ``service.loader.prime``), then ``search_with`` over that one searcher, k = 5, every
  query distinct (each pays its query embedding). Figures: load CPU/wall, CPU per search
  p50/p95 (process time, all threads: the machine is shared, so CPU is the figure; wall is
  reported beside it), peak RSS. Each side's rankings (chunks, sessions, turns at k) are
  compared query by query: identical rankings mean identical recall.
- ``encode``: the SPLADE encoder alone: the document side (CPU per 1,000 turn texts) and
  the query side (CPU per query: encode + every turn's score).

    python benchmarks/bench_search_cpu.py search --output DIR --queries locomo --label "LoCoMo dev"
    python benchmarks/bench_search_cpu.py search --output DIR --queries messages --label "all RPC"
    python benchmarks/bench_search_cpu.py encode --turns 1000
    python benchmarks/bench_search_cpu.py load-parts --tables OUT/parquet

``--out`` (default benchmarks/results/search_cpu.json) collects each run's figures by label.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("MEMORY_PIPELINE_SHARED_DATA", ROOT.parent / "shared" / "data"))
LOCOMO = SHARED / "locomo" / "locomo_dev.json"


def _pct(values: list[float], p: float) -> float:
    return float(np.percentile(np.asarray(values) * 1e3, p)) if values else float("nan")


def _peak_rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _export(ref: str, into: Path) -> Path:
    """The package of ``ref`` (git archive) under ``into``."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref, "memory_pipeline"],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def locomo_queries(n: int | None) -> list[str]:
    """LoCoMo dev questions, in file order (the evaluation's questions)."""
    data = json.loads(LOCOMO.read_text(encoding="utf-8"))
    qs = [q["question"] for conv in data for q in conv.get("qa", []) if q.get("question")]
    return qs[:n] if n else qs


def message_queries(output: Path, n: int, seed: int = 20221105) -> list[str]:
    """``n`` random non-blank messages of the published version (the retrieval benchmark's
    corpus queries), seeded."""
    from memory_pipeline.core.indexes.publish import current_version, read_lookups

    texts = read_lookups(current_version(output))[1].column("text").to_pylist()
    order = np.random.default_rng(seed).permutation(len(texts))
    out: list[str] = []
    for i in order:
        t = (texts[i] or "").strip()
        if len(t) >= 4:
            out.append(t)
        if len(out) == n:
            break
    return out


# -- children -------------------------------------------------------------------------------


def child_search(a: argparse.Namespace) -> dict:
    import memory_pipeline
    from memory_pipeline.core.retrieval.searcher import Searcher

    queries = json.loads(Path(a.queries_file).read_text(encoding="utf-8"))
    from memory_pipeline.service import loader

    # as a serving process runs (this tree's service sets it; the shipped one did not)
    one_blas_thread = getattr(loader, "one_blas_thread", None)
    if one_blas_thread is not None:
        one_blas_thread()
    c0, w0 = time.process_time(), time.perf_counter()
    s = Searcher(a.output)
    load = {"searcher_cpu_s": time.process_time() - c0, "searcher_wall_s": time.perf_counter() - w0}
    s.turn_index  # noqa: B018 - as the service's prime
    memory_pipeline.search_with(s, "warm up", 1)
    load["primed_cpu_s"] = time.process_time() - c0
    load["primed_wall_s"] = time.perf_counter() - w0
    for i, q in enumerate(queries[: a.warm]):
        memory_pipeline.search_with(s, f"{q} warm {i}", a.k)
    cpu, wall, rankings = [], [], []
    for q in queries:
        c, w = time.process_time(), time.perf_counter()
        r = memory_pipeline.search_with(s, q, a.k)
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - w)
        rankings.append(
            [
                [c.chunk_id for c in r.chunks],
                [x.session_id for x in r.sessions],
                [t.message_id for t in r.turns],
                round(float(r.confidence), 4),
            ]
        )
    # a new version arriving in a warm process (the service's switch): the query model is
    # kept (loader._load passes it on), the rest of the version is loaded and primed
    c0, w0 = time.process_time(), time.perf_counter()
    s2 = Searcher(a.output, embedder=s._embedder)
    s2.turn_index  # noqa: B018
    memory_pipeline.search_with(s2, "warm up", 1)
    load["switch_cpu_s"] = time.process_time() - c0
    load["switch_wall_s"] = time.perf_counter() - w0
    return {
        "package": memory_pipeline.__file__,
        "load": load,
        "cpu": cpu,
        "wall": wall,
        "rankings": rankings,
        "peak_rss_mib": _peak_rss_mib(),
    }


def child_encode(a: argparse.Namespace) -> dict:
    import memory_pipeline
    from memory_pipeline.core.indexes import splade as SP

    data = json.loads(LOCOMO.read_text(encoding="utf-8"))
    texts = [
        f"{t['speaker']}: {t.get('text', '')}"
        for conv in data
        for key, turns in conv["conversation"].items()
        if key.startswith("session_") and isinstance(turns, list)
        for t in turns
    ][: a.turns]
    queries = locomo_queries(a.n)
    enc = SP.packaged()
    enc.encode(texts[:8])
    c0 = time.process_time()
    docs = enc.encode(texts)
    doc_cpu = time.process_time() - c0
    scorer_cls = getattr(SP, "QueryScorer", None)
    c0 = time.process_time()
    scorer = scorer_cls(enc, docs) if scorer_cls is not None else None
    prep = time.process_time() - c0
    per_q = []
    for q in queries:
        c = time.process_time()
        if scorer is not None:
            scorer.scores(q)
        else:
            SP.turn_scores(docs, enc.encode([q]))
        per_q.append(time.process_time() - c)
    return {
        "package": memory_pipeline.__file__,
        "turns": len(texts),
        "doc_cpu_s": doc_cpu,
        "doc_cpu_per_1000_s": doc_cpu / max(len(texts), 1) * 1000,
        "nonzeros": int(docs.nnz),
        "vocabulary_used": int(np.unique(docs.indices).size),
        "scorer_prep_cpu_s": prep,
        "query_cpu_p50_ms": _pct(per_q, 50),
        "query_cpu_p95_ms": _pct(per_q, 95),
        "peak_rss_mib": _peak_rss_mib(),
    }


def run_load_parts(a: argparse.Namespace) -> dict:
    """The parts of a version's load that grow with the messages, on a store's Parquet
    tables (``--tables OUT/parquet``: raw_messages/ and chunks/ partitions): what the shipped
    searcher did per message (a dict each, via ``to_pylist``) against ``MessageRows``."""
    import glob

    import pyarrow as pa
    import pyarrow.parquet as pq

    from memory_pipeline.core.indexes.turns import turn_layout
    from memory_pipeline.core.retrieval.message_rows import MessageRows
    from memory_pipeline.core.retrieval.turns import TurnIndex

    out: dict[str, float] = {}

    def clock(name, f):
        t = time.process_time()
        value = f()
        out[name] = time.process_time() - t
        print(f"{name}: {out[name]:.2f} s CPU", flush=True)
        return value

    cols = ["message_id", "sender", "local_ts", "text", "source_ref"]
    files = sorted(glob.glob(f"{a.tables}/raw_messages/*.parquet"))
    msgs = clock(
        "read messages", lambda: pa.concat_tables(pq.read_table(f, columns=cols) for f in files)
    )
    chunk_files = sorted(glob.glob(f"{a.tables}/chunks/*.parquet"))
    chunks = pa.concat_tables(pq.read_table(f) for f in chunk_files).sort_by("chunk_id")
    print(f"{msgs.num_rows:,} messages, {chunks.num_rows:,} chunks")
    old = clock(
        "shipped: a dict per message", lambda: {r["message_id"]: r for r in msgs.to_pylist()}
    )
    rows = clock("now: MessageRows", lambda: MessageRows(msgs))
    layout = clock("turn_layout", lambda: turn_layout(chunks))
    ids = layout.message_ids
    clock(
        "shipped: senders and lengths",
        lambda: (
            [(old.get(m) or {}).get("sender") or "" for m in ids],
            [len((old.get(m) or {}).get("text") or "") for m in ids],
        ),
    )
    clock(
        "now: senders and lengths",
        lambda: ([x or "" for x in rows.column("sender", ids)], rows.text_lengths(ids)),
    )
    clock("TurnIndex", lambda: TurnIndex(layout, {}, chunks.num_rows))
    return {"label": a.label, "messages": msgs.num_rows, "chunks": chunks.num_rows, "cpu_s": out}


def _run_child(tree: Path, args: list[str], env_extra: dict | None = None) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        result = Path(f.name)
    env = dict(os.environ, PYTHONPATH=str(tree), **(env_extra or {}))
    subprocess.run(
        [sys.executable, __file__, *args, "--result", str(result)], check=True, env=env, cwd=tree
    )
    data = json.loads(result.read_text(encoding="utf-8"))
    result.unlink()
    return data


def _sides(a: argparse.Namespace, tmp: Path) -> list[tuple[str, Path, dict]]:
    """(name, code, environment): the shipped code as it runs, the shipped code with BLAS
    on one thread (what part of the gain is the thread setting alone), this tree."""
    ref = _export(a.ref, tmp / "ref")
    sides = [(f"{a.ref} (shipped)", ref, {})]
    if a.one_thread_ref:
        sides.append((f"{a.ref}, BLAS on 1 thread", ref, {"OPENBLAS_NUM_THREADS": "1"}))
    return [*sides, ("this tree", ROOT, {})]


def run_search(a: argparse.Namespace) -> dict:
    output = Path(a.output).resolve()
    queries = locomo_queries(a.n) if a.queries == "locomo" else message_queries(output, a.n or 300)
    with tempfile.TemporaryDirectory(prefix="bench_search_cpu_") as tmp:
        qfile = Path(tmp) / "queries.json"
        qfile.write_text(json.dumps(queries, ensure_ascii=False), encoding="utf-8")
        sides = {}
        for name, tree, env in _sides(a, Path(tmp)):
            args = ["_search", "--output", str(output), "--queries-file", str(qfile)]
            args += ["--k", str(a.k), "--warm", str(a.warm)]
            sides[name] = _run_child(tree, args, env)
            d = sides[name]
            print(
                f"{name}: CPU per search p50 {_pct(d['cpu'], 50):.2f} ms p95 "
                f"{_pct(d['cpu'], 95):.2f} ms (wall p50 {_pct(d['wall'], 50):.2f}); load "
                f"{d['load']['primed_cpu_s']:.2f} s CPU / {d['load']['primed_wall_s']:.2f} s wall, "
                f"a new version in a warm process {d['load']['switch_cpu_s']:.2f} s CPU / "
                f"{d['load']['switch_wall_s']:.2f} s wall; "
                f"peak RSS {d['peak_rss_mib']:.0f} MiB",
                flush=True,
            )
    base, mine = next(iter(sides.values())), sides["this tree"]
    pairs = list(zip(base["rankings"], mine["rankings"], strict=True))
    diff = {
        part: sum(x[j] != y[j] for x, y in pairs)
        for j, part in enumerate(("chunks", "sessions", "turns", "confidence"))
    }
    print(f"rankings differing at k={a.k} over {len(pairs)} queries: {diff}")
    return {
        "label": a.label,
        "output": str(output),
        "queries": len(queries),
        "k": a.k,
        "loadavg": Path("/proc/loadavg").read_text().split()[:3],
        "sides": {
            n: {
                "cpu_p50_ms": _pct(d["cpu"], 50),
                "cpu_p95_ms": _pct(d["cpu"], 95),
                "wall_p50_ms": _pct(d["wall"], 50),
                "wall_p95_ms": _pct(d["wall"], 95),
                "load": d["load"],
                "peak_rss_mib": d["peak_rss_mib"],
            }
            for n, d in sides.items()
        },
        "rankings_differing": diff,
    }


def run_encode(a: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench_search_cpu_") as tmp:
        sides = {}
        for name, tree, env in _sides(a, Path(tmp)):
            args = ["_encode", "--turns", str(a.turns), "--n", str(a.n)]
            sides[name] = _run_child(tree, args, env)
            print(name, json.dumps(sides[name]), flush=True)
    return {"label": a.label, "sides": sides}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=("search", "encode", "load-parts", "_search", "_encode"))
    p.add_argument("--tables", help="load-parts: a store's parquet folder")
    p.add_argument("--output", help="a pipeline output folder with a published version")
    p.add_argument("--queries", choices=("locomo", "messages"), default="locomo")
    p.add_argument("--queries-file")
    p.add_argument("--n", type=int, default=None, help="queries (default: all / 300)")
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--warm", type=int, default=10)
    p.add_argument("--turns", type=int, default=1000)
    p.add_argument("--ref", default="main", help="the shipped code's git ref")
    p.add_argument(
        "--one-thread-ref",
        action="store_true",
        help="also the shipped code with OPENBLAS_NUM_THREADS=1",
    )
    p.add_argument("--label", default="run")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "search_cpu.json")
    p.add_argument("--result", help="(children) where to write the figures")
    a = p.parse_args(argv)
    if a.what.startswith("_"):
        data = child_search(a) if a.what == "_search" else child_encode(a)
        Path(a.result).write_text(json.dumps(data), encoding="utf-8")
        return
    if a.what == "encode" and a.n is None:
        a.n = 200
    run = {"search": run_search, "encode": run_encode, "load-parts": run_load_parts}
    figures = run[a.what](a)
    old = json.loads(a.out.read_text(encoding="utf-8")) if a.out.exists() else {}
    old[f"{a.what}: {a.label}"] = figures
    a.out.write_text(json.dumps(old, indent=1, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
