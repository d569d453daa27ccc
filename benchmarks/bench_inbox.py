"""From ``POST /v1/messages`` to a ``/v1/search`` hit: latency, the refresh's cost, searches
served meanwhile, side by side with a full build and a nightly run of the same corpus.

Usage (from the repository root)::

    PYTHONPATH=$PWD python benchmarks/bench_inbox.py --work DIR/inbox          # sample
    PYTHONPATH=$PWD python benchmarks/bench_inbox.py --work DIR/inbox_rpc \\
        --rpc ../shared/data/realpersonachat [--dialogues N]               # RealPersonaChat

What it does, in a fresh work folder (``--reuse`` keeps a built one):

1. builds the corpus with ``memory-pipeline run`` (the bundled sample, or RealPersonaChat:
   all of it, or its first ``--dialogues`` dialogue lines) and times it (wall, and the CPU of
   the child process);
2. times the nightly's run for comparison: ``memory-pipeline run --start D-1 --end D`` over
   the last two days (every stage, as the nightly job and its refresh run them);
3. starts ``memory-pipeline serve`` (offline providers, a write and a read key), and a
   thread that searches without pause for the whole measurement (``--searchers`` threads),
   recording every status code;
4. ``--trials`` times: posts one message with a unique word, dated on a built day (the days
   cycle), and polls ``/v1/search`` every 0.25 s until a chunk holds the word: the latency
   from the post to the first hit; the refresher's own line gives the refresh subprocess's
   wall and CPU. Each trial waits until the refresher is idle, so trials are independent;
5. a burst: ``--burst`` posts in a row (different days), the time until every word is
   found, and how many refreshes served them.

The machine's load average is recorded before and after (the cores are shared: wall
figures move with the load; CPU figures do not). Figures go to ``--json`` (default
``benchmarks/results/inbox.json``); ``benchmarks/results/inbox.md`` discusses them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
DEFAULT_JSON = REPO / "benchmarks" / "results" / "inbox.json"
QUERIES = ["Kyoto trip hotel", "what did we plan for dinner", "旅行の予定", "birthday present"]


def _loadavg() -> str:
    return Path("/proc/loadavg").read_text().split(" ", 3)[:3].__str__()


def _children_cpu() -> float:
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def _env(work: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_PIPELINE_")}
    env["PYTHONPATH"] = str(REPO)
    # the Dagster instance a user gets: the one memory-pipeline makes in the state folder
    env.pop("DAGSTER_HOME", None)
    env["HF_HUB_OFFLINE"] = "1"
    return env


def _cli(work: Path, *args: str, timeout: float = 86_400) -> tuple[float, float, str]:
    """Run ``memory-pipeline --config <work>/memory_pipeline.toml ARGS``: wall, CPU, stdout."""
    cmd = [sys.executable, "-m", "memory_pipeline.cli", "--config"]
    cmd += [str(work / "memory_pipeline.toml"), *args]
    c0, t0 = _children_cpu(), time.perf_counter()
    done = subprocess.run(
        cmd, env=_env(work), capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {done.stderr.strip()[-800:]}")
    return time.perf_counter() - t0, _children_cpu() - c0, done.stdout


def write_config(work: Path, rpc: Path | None, dialogues: int | None) -> Path:
    out = work / "memory_pipeline.toml"
    if rpc is None:
        text = (REPO / "memory_pipeline.toml").read_text(encoding="utf-8")
        text = text.replace('"data/sample/', f'"{REPO}/data/sample/')
        text = text.replace('"data/output"', '"out"').replace('"data/exports"', f'"{work}"')
        text = text.replace('"../shared/', f'"{REPO.parent}/shared/')
        out.write_text(text, encoding="utf-8")
        return out
    sys.path.insert(0, str(REPO / "benchmarks"))
    from bench_nightly import subset
    from bench_nightly import write_config as nightly_config

    data = rpc.resolve()
    if dialogues:
        data = subset(data, work / "rpc_subset", dialogues)
    nightly_config(work, data)
    return out


def seed_cache(source: Path, work: Path) -> None:
    """Copy a provider cache into the build's output (SQLite's backup API, as `backup` copies
    it: consistent while another process still writes it); the build then embeds only what
    it lacks."""
    from memory_pipeline.config import load_config
    from memory_pipeline.core.common.backup import _sqlite_copy

    target = load_config(work / "memory_pipeline.toml", env={}).cache_path
    target.parent.mkdir(parents=True, exist_ok=True)
    _sqlite_copy(source, target)
    print(f"provider cache seeded from {source}", flush=True)


def _days(work: Path) -> tuple[list[dt.date], object]:
    from memory_pipeline.config import load_config
    from memory_pipeline.core.common import tables as T
    from memory_pipeline.core.common.storage import TableStore

    cfg = load_config(work / "memory_pipeline.toml", env={})
    return TableStore(cfg.output_dir).dates(T.RAW_MESSAGES), cfg


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _key(work: Path, owner: str, scope: str) -> str:
    _, _, out = _cli(work, "keys", "create", "--owner", owner, "--scope", scope)
    return out.strip().splitlines()[-1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--rpc", type=Path, default=None, help="RealPersonaChat folder")
    ap.add_argument("--dialogues", type=int, default=None, help="RPC: first N dialogue lines")
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--burst", type=int, default=10)
    ap.add_argument("--searchers", type=int, default=2)
    ap.add_argument("--reuse", action="store_true", help="keep a built work folder")
    ap.add_argument(
        "--seed-cache",
        type=Path,
        default=None,
        help="a provider cache (provider_cache.sqlite) to start the build's cache from, e.g. "
        "the one bench_retrieval.py fills with the same corpus's vectors",
    )
    ap.add_argument("--no-nightly", action="store_true", help="skip the nightly-style run")
    ap.add_argument("--json", type=Path, default=DEFAULT_JSON)
    ap.add_argument("--label", default=None)
    args = ap.parse_args()
    work = args.work.resolve()
    label = args.label or ("rpc" if args.rpc else "sample")
    figures: dict = {"load_before": _loadavg(), "label": label}
    if not (args.reuse and (work / "out" / "indexes" / "CURRENT").exists()):
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        write_config(work, args.rpc, args.dialogues)
        if args.seed_cache is not None:
            seed_cache(args.seed_cache, work)
        wall, cpu, _ = _cli(work, "run", "--quiet")
        figures["full_build"] = {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1)}
        print(f"full build: {wall:.1f}s wall, {cpu:.1f}s CPU", flush=True)
    days, cfg = _days(work)
    last = days[-1]
    if not args.no_nightly:
        wall, cpu, _ = _cli(
            work, "run", "--quiet", "--start", (last - dt.timedelta(days=1)).isoformat(),
            "--end", last.isoformat(),
        )  # fmt: skip
        figures["nightly_run"] = {"days": 2, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1)}
        print(f"nightly-style run (2 days, every stage): {wall:.1f}s wall, {cpu:.1f}s CPU")
    figures["messages_days"] = len(days)

    owner = cfg.owner_id
    write, read = _key(work, owner, "write"), _key(work, owner, "read")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "memory_pipeline.cli"]
    cmd += ["--config", str(work / "memory_pipeline.toml"), "serve", "--port", str(port)]
    cmd += ["--rate", "100000", "--burst", "100000"]
    # the server's log to a file: a pipe nobody reads fills up and blocks its event loop
    log = (work / "serve.log").open("ab")
    server = subprocess.Popen(cmd, env=_env(work), stdout=subprocess.DEVNULL, stderr=log)
    codes: list[int] = []
    search_ms: list[float] = []
    stop = threading.Event()
    threads: list[threading.Thread] = []
    try:
        deadline = time.monotonic() + 300
        while True:
            assert server.poll() is None, (work / "serve.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "server did not start"
            try:
                if httpx.get(f"{url}/v1/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.3)
        hr = {"Authorization": f"Bearer {read}"}
        hw = {"Authorization": f"Bearer {write}"}

        def searcher(n: int) -> None:
            with httpx.Client(timeout=120) as client:
                i = 0
                while not stop.is_set():
                    t0 = time.perf_counter()
                    try:
                        body = {"query": f"{QUERIES[i % 4]} {n}-{i}", "k": 5}
                        r = client.post(f"{url}/v1/search", json=body, headers=hr)
                        codes.append(r.status_code)
                    except httpx.HTTPError:
                        codes.append(0)
                    search_ms.append((time.perf_counter() - t0) * 1000)
                    i += 1

        def found(word: str) -> bool:
            body = {"query": word, "k": 5}
            r = httpx.post(f"{url}/v1/search", json=body, headers=hr, timeout=120)
            codes.append(r.status_code)
            hits = json.dumps(r.json().get("chunks"), ensure_ascii=False)
            return r.status_code == 200 and word in hits

        def post(cid: str, day: dt.date, word: str, minute: int) -> None:
            msg = {
                "id": cid, "conversation": "bench_inbox", "sender": "Bench",
                "time": f"{day.isoformat()}T12:{minute:02d}:00+09:00",
                "text": f"remember the {word} by the window",
            }  # fmt: skip
            r = httpx.post(f"{url}/v1/messages", json={"messages": [msg]}, headers=hw, timeout=120)
            assert r.status_code == 202 and r.json()["accepted"] == 1, r.text

        def refresh_state(cid: str) -> dict:
            return httpx.get(f"{url}/v1/messages/{cid}", headers=hw, timeout=120).json()["refresh"]

        def idle(cid: str) -> dict:
            while True:
                state = refresh_state(cid)
                if not state["pending"] and not state["running"]:
                    return state
                time.sleep(0.5)

        threads += [threading.Thread(target=searcher, args=(n,)) for n in range(args.searchers)]
        for t in threads:
            t.start()
        rng = random.Random(7)
        run = f"{int(time.time())}"  # ids unique per run: a --reuse'd inbox holds older ones
        trials = []
        for t in range(args.trials):
            day = days[(t * 7) % len(days)]
            word = f"probe{t}x{rng.randrange(10**9)}{run}q"
            t0 = time.perf_counter()
            post(f"trial-{run}-{t}", day, word, t % 60)
            while not found(word):
                assert time.perf_counter() - t0 < 900, "not found in 900 s"
                time.sleep(0.25)
            latency = time.perf_counter() - t0
            state = idle(f"trial-{run}-{t}")
            trials.append(
                {
                    "day": day.isoformat(),
                    "latency_s": round(latency, 2),
                    "refresh": state["last_summary"],
                    "refresh_wall_s": state["last_seconds"],
                }
            )
            print(f"trial {t}: {latency:.1f}s  {state['last_summary']}  {_loadavg()}", flush=True)
        runs_before = refresh_state(f"trial-{run}-0")["runs"]
        words = [f"burst{n}x{rng.randrange(10**9)}{run}q" for n in range(args.burst)]
        t0 = time.perf_counter()
        for n, word in enumerate(words):
            post(f"burst-{run}-{n}", days[(n * 5) % len(days)], word, n % 60)
        pending = set(words)
        while pending:
            pending = {w for w in pending if not found(w)}
            assert time.perf_counter() - t0 < 1800, "burst not found in 1800 s"
            time.sleep(0.25)
        burst_s = time.perf_counter() - t0
        state = idle(f"burst-{run}-0")
        figures["burst"] = {
            "posts": args.burst, "all_found_s": round(burst_s, 1),
            "refreshes": state["runs"] - runs_before, "last_refresh": state["last_summary"],
        }  # fmt: skip
        runs = state["runs"] - runs_before
        print(f"burst of {args.burst}: all found in {burst_s:.1f}s, {runs} refreshes")
    finally:
        stop.set()
        for t in threads:
            t.join(120)
        server.terminate()
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(10)
    lat = sorted(x["latency_s"] for x in trials)
    figures["trials"] = trials
    figures["latency_s"] = {
        "p50": statistics.median(lat),
        "p95": lat[min(len(lat) - 1, round(0.95 * (len(lat) - 1)))],
        "max": lat[-1],
        "n": len(lat),
    }
    figures["searches"] = {
        "requests": len(codes),
        "failed": sum(1 for c in codes if c != 200),
        "p50_ms": round(statistics.median(search_ms), 1) if search_ms else None,
    }
    figures["load_after"] = _loadavg()
    print(json.dumps({k: v for k, v in figures.items() if k != "trials"}, indent=1))
    record = json.loads(args.json.read_text()) if args.json.exists() else {}
    record[figures["label"]] = figures
    args.json.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
