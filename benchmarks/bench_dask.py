"""Dask benchmark: embedding and BM25 tokenization serially vs on 1 and 2 local workers.

Usage (from the repository root)::

    python benchmarks/bench_dask.py                       # 1,500 dialogues, 150 chunks embedded
    python benchmarks/bench_dask.py --dialogues 300 --embed-chunks 40   # quick run

RealPersonaChat (``--dialogues`` first dialogues, every speaker: benchmark mode, timezone
Asia/Tokyo) goes through the core functions to chunks, extractive summaries and
embedding_texts (``prep``, not measured). Then, for each runner (serial in this process, a
``LocalCluster`` of 1 worker, of 2 workers; 1 thread per worker, 127.0.0.1):

- ``embed``: ``core.represent.build.embed_chunks`` of the first ``--embed-chunks`` chunks,
  representation embedding_text, the default local model (USE multilingual v3), a fresh
  content cache each time (every piece is a miss): pieces/s;
- ``tokenize``: ``core.indexes.publish.build_bm25`` over every chunk's three representations
  with the ``auto`` tokenizer (Sudachi on this Japanese corpus), no token cache: texts/s
  (the bm25s indexing, done in this process, is included).

Every cluster run is checked against the serial output (vector and postings digests must be
equal). Reported: wall and this process's CPU seconds, cluster start-up seconds, peak RSS of
this process and of each worker (VmHWM), and the 1-minute load average before and after each
measurement (the machine's 2 cores are shared: a load above 2 means other work competed).
Figures go to benchmarks/results/dask.json (git-ignored).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import CPU, peak_rss_mib, rate, timed

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
# $MEMORY_PIPELINE_SHARED_DATA (as the tests), else ../shared/data beside the repository
SHARED = Path(os.environ.get("MEMORY_PIPELINE_SHARED_DATA") or REPO.parent / "shared" / "data")
DEFAULT_DATA = SHARED / "realpersonachat"
DEFAULT_JSON = REPO / "benchmarks" / "results" / "dask.json"
START, END = dt.date(2022, 7, 29), dt.date(2022, 11, 5)


def _worker_peak_rss_mib() -> float:
    """VmHWM of the calling process (runs on each worker through ``Client.run``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _worker_cpu_s() -> float:
    """CPU seconds of the calling process, all threads (runs on each worker)."""
    return time.process_time()


def _cluster_cpu(runner: Any) -> float:
    """CPU seconds used so far by every worker of ``runner`` (0 when serial)."""
    return sum(runner.run(_worker_cpu_s).values()) if runner is not None else 0.0


def prep(data: Path, dialogues: int, workdir: Path) -> tuple[Any, Any, Any]:
    """chunks, summaries, embedding_texts of the first ``dialogues`` dialogues (core only)."""
    from memory_pipeline.config import load_config
    from memory_pipeline.core.ingest.normalize import messages_table
    from memory_pipeline.core.ingest.stage import read_all
    from memory_pipeline.core.represent.build import embedding_texts, summarize_chunks
    from memory_pipeline.core.sessions.chunking import chunk_sessions
    from memory_pipeline.core.sessions.sessionize import sessionize

    config = workdir / "memory_pipeline.toml"
    config.write_text(
        "\n".join(
            [
                "[pipeline]",
                'owner = "benchmark"',
                'timezone = "Asia/Tokyo"',
                f'start_date = "{START}"',
                f'end_date = "{END}"',
                'output_dir = "out"',
                "[[sources]]",
                'name = "realpersonachat"',
                'kind = "realpersonachat"',
                f"path = {json.dumps(str(data.resolve()))}",
                'owner = ""',
                f"dialogue_limit = {dialogues}",
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    cfg = load_config(config, env={})
    days = [START + dt.timedelta(days=i) for i in range((END - START).days + 1)]
    messages = messages_table(read_all(cfg.sources, days, cfg.start_date).messages)
    sessions = sessionize(messages, cfg.session_gap_minutes)
    chunks = chunk_sessions(sessions, messages, cfg.chunk_size, cfg.chunk_stride).sort_by(
        "chunk_id"
    )
    summaries = summarize_chunks(chunks)
    return chunks, summaries, embedding_texts(chunks, summaries)


def _digest(values: list[Any]) -> str:
    return hashlib.sha256(repr(values).encode("utf-8")).hexdigest()[:16]


def _table_digest(table: Any, sort: list[str]) -> str:
    """sha256 of the Arrow IPC stream of ``table`` in ``sort`` order."""
    import pyarrow as pa

    ordered = table.sort_by([(c, "ascending") for c in sort])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, ordered.schema) as writer:
        writer.write_table(ordered)
    return hashlib.sha256(sink.getvalue().to_pybytes()).hexdigest()[:16]


def measure(runner: Any, tables: tuple, embed_chunks_n: int, workdir: Path, tag: str) -> dict:
    """One embedding and one tokenization measurement with ``runner``."""
    from memory_pipeline.core.indexes.publish import build_bm25, representation_table
    from memory_pipeline.core.represent.build import embed_chunks
    from memory_pipeline.core.represent.cache import ContentCache
    from memory_pipeline.core.represent.providers.factory import make_embedder

    chunks, summaries, texts = tables
    sub = chunks.slice(0, embed_chunks_n)
    out: dict[str, Any] = {}
    t: dict[str, float] = {}
    load0 = os.getloadavg()[0]
    embedder = make_embedder("local")
    w0 = _cluster_cpu(runner)
    with ContentCache(workdir / f"cache-{tag}.sqlite") as cache:
        with timed(t, "embed"):
            table, stats = embed_chunks(
                sub,
                summaries,
                texts,
                embedder=embedder,
                cache=cache,
                representations=("embedding_text",),
                runner=runner,
            )
    load1 = os.getloadavg()[0]
    cpu = t["embed" + CPU] + _cluster_cpu(runner) - w0
    vectors = table.column("vector").to_pylist()
    out["embed"] = {
        "chunks": sub.num_rows,
        "pieces": stats["vectors"],
        "batches": stats["provider_calls"],
        "wall_s": round(t["embed"], 2),
        "cpu_s_here": round(t["embed" + CPU], 2),
        "cpu_s_total": round(cpu, 2),
        "pieces_per_s": round(rate(stats["vectors"], t["embed"]), 1),
        "pieces_per_cpu_s": round(rate(stats["vectors"], cpu), 1),
        "digest": _digest(vectors),
        "load_1min": [round(load0, 2), round(load1, 2)],
    }
    reps = representation_table(chunks, summaries, texts)
    folder = workdir / f"bm25-{tag}"
    n_texts = sum(len(v[1]) for v in reps.values())
    load0 = os.getloadavg()[0]
    w0 = _cluster_cpu(runner)
    with timed(t, "tokenize"):
        bm25 = build_bm25(reps, folder, "auto", cache=None, runner=runner)
    load1 = os.getloadavg()[0]
    cpu = t["tokenize" + CPU] + _cluster_cpu(runner) - w0
    out["tokenize"] = {
        "texts": n_texts,
        "tokenizer": bm25.stats["tokenizer"],
        "wall_s": round(t["tokenize"], 2),
        "cpu_s_here": round(t["tokenize" + CPU], 2),
        "cpu_s_total": round(cpu, 2),
        "texts_per_s": round(rate(n_texts, t["tokenize"]), 1),
        "texts_per_cpu_s": round(rate(n_texts, cpu), 1),
        "digest": _table_digest(bm25.postings, ["representation", "token", "chunk_id"]),
        "postings": bm25.postings.num_rows,
        "load_1min": [round(load0, 2), round(load1, 2)],
    }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--dialogues", type=int, default=1500)
    parser.add_argument("--embed-chunks", type=int, default=150)
    parser.add_argument("--workers", default="0,1,2", help="0 is serial, in this process")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    args = parser.parse_args()
    from distributed import Client, LocalCluster

    results: dict[str, Any] = {
        "args": {k: str(v) for k, v in vars(args).items()},
        "cpus": os.cpu_count(),
        "load_start": os.getloadavg(),
    }
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        t0 = time.perf_counter()
        tables = prep(args.data, args.dialogues, workdir)
        results["prep_s"] = round(time.perf_counter() - t0, 2)
        results["chunks"] = tables[0].num_rows
        print(f"prep: {tables[0].num_rows} chunks in {results['prep_s']} s", flush=True)
        runs = {}
        for n in (int(w) for w in args.workers.split(",")):
            if n == 0:
                runs["serial"] = measure(None, tables, args.embed_chunks, workdir, "serial")
                runs["serial"]["peak_rss_mib_here"] = round(peak_rss_mib(), 1)
                print("serial", json.dumps(runs["serial"]), flush=True)
                continue
            t0 = time.perf_counter()
            cluster = LocalCluster(
                n_workers=n,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address=None,
            )
            client = Client(cluster, timeout="120s")
            try:
                start_s = time.perf_counter() - t0
                run = measure(client, tables, args.embed_chunks, workdir, f"w{n}")
                run["cluster_start_s"] = round(start_s, 2)
                run["worker_peak_rss_mib"] = sorted(
                    round(v, 1) for v in client.run(_worker_peak_rss_mib).values()
                )
            finally:
                client.close()
                cluster.close()
            runs[f"{n}_workers"] = run
            print(f"{n} workers", json.dumps(run), flush=True)
        results["runs"] = runs
    serial = runs.get("serial")
    if serial:
        for name, run in runs.items():
            for step in ("embed", "tokenize"):
                if run[step]["digest"] != serial[step]["digest"]:
                    raise SystemExit(f"{name} {step}: output differs from the serial run")
    results["load_end"] = os.getloadavg()
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")
    print(
        f"\n{'runner':<10} {'embed/s':>8} {'/cpu-s':>7} {'tokens/s':>9} {'/cpu-s':>7} "
        f"{'start s':>8} {'worker RSS MiB':>15}  load 1-min (embed, tokenize)"
    )
    for name, run in runs.items():
        e, k = run["embed"], run["tokenize"]
        print(
            f"{name:<10} {e['pieces_per_s']:>8} {e['pieces_per_cpu_s']:>7} "
            f"{k['texts_per_s']:>9} {k['texts_per_cpu_s']:>7} "
            f"{run.get('cluster_start_s', 0):>8} {str(run.get('worker_peak_rss_mib', '-')):>15}  "
            f"{e['load_1min']} {k['load_1min']}"
        )
    print(f"(outputs equal to serial; figures in {args.json})")


if __name__ == "__main__":
    main()
