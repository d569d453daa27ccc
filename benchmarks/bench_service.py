"""The service over HTTP vs in-process search(): latency, throughput, RSS, MCP.

Starts ``memory-pipeline serve`` as a child process on 127.0.0.1 (a free port) over an
already built output, with a temporary key file, once per ``--workers`` count (default 1
and 2 worker processes), then on the same queries:

- in-process ``memory_pipeline.search()`` (one thread): p50 / p95 / p99;
- HTTP ``POST /v1/search`` at 1, 8 and 32 concurrent closed-loop clients (httpx, one thread
  per client): p50 / p95 / p99, throughput, errors, the client's and the server's CPU, and
  the ratio of the HTTP p50 at one client to the in-process p50;
- an index switch under load (8 clients; a new version published by hard-linking the
  current one, as a run's publish would swap it): errors during the switch;
- open-loop rows (``loadgen.py``, asyncio on raw keep-alive HTTP/1.1 connections, in a child
  process): ``--open-rate`` searches/s offered with Poisson arrivals over each of
  ``--connections`` (8 and 32), a closed-loop capacity row over the first, and the open-loop
  row again with an index switch; latency from each request's scheduled send time, so the
  server's queueing shows (a closed loop hides it, and caps its own rate: 8 clients at
  200/s wait 40 ms on average by Little's law, whatever the server), with the generator's
  CPU and the server's CPU (``/proc/<pid>/stat`` of every server process) per row;
- MCP ``search`` tool calls over streamable HTTP: p50 / p95;
- the server's peak RSS (VmHWM; with workers, each worker's and their sum);
- the machine's load average before and after (``/proc/loadavg``: the cores are shared).

Every request's query is distinct (a number appended), so each pays its query embedding,
as a real app's would. Both load generators run on the same cores as the server. Run:
``python benchmarks/bench_service.py --config memory_pipeline.toml [--owner ID] [--label NAME]
[--out benchmarks/results/service.md] [--workers 2] [--open-rate 200] [--connections 8,32]
[--duration 20] [--skip-closed]``; the run's section (``## NAME``) replaces the section of
the same name in ``--out``, other sections stay. ``--open-rate 0`` leaves the open-loop rows
out; ``--skip-closed`` the threaded closed-loop rows.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from memory_pipeline.service import DEFAULT_THREADS

QUERIES = [
    "what did Maria say about the dog shelter?",
    "when is the Kyoto trip?",
    "birthday present for Misaki",
    "train tickets to Kyoto",
    "adopting a dog",
    "引っ越しの日はいつ？",
    "京都旅行の新幹線",
    "book club next meeting",
    "what did we plan for the weekend?",
    "new job manager",
    "先週の火曜日に何を話した？",
    "restaurant reservation",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def _row(name: str, lat: list[float], wall: float, errors: int, extra: tuple = ()) -> str:
    ms = [x * 1000 for x in lat]
    return (
        f"| {name} | {len(lat)} | {_pct(ms, 50):.1f} | {_pct(ms, 95):.1f} | {_pct(ms, 99):.1f} "
        f"| {len(lat) / wall:.0f} | {errors} |" + "".join(f" {x} |" for x in extra)
    )


def _per_request(cpu: float | None, n: int) -> str:
    """CPU seconds of a row as ``s (ms per request)``; "-" when not measured."""
    if cpu is None or n <= 0:
        return "-"
    return f"{cpu:.2f} ({cpu / n * 1000:.2f})"


def _queries(n: int, start: int) -> list[str]:
    return [f"{QUERIES[i % len(QUERIES)]} {start + i}" for i in range(n)]


def _vm_hwm(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _workers(pid: int) -> list[int]:
    """uvicorn's worker processes under ``pid`` (multiprocessing spawn children)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            cmd = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid and b"spawn_main" in cmd:
            out.append(int(stat.parent.name))
    return sorted(out)


def _server_pids(pid: int) -> tuple[list[int], list[int]]:
    """(every process of the server, for its CPU; the ones that hold connections)."""
    workers = _workers(pid)
    return [pid, *workers], workers or [pid]


def _cpu(pids: list[int]) -> float:
    """utime + stime of ``pids`` so far (every thread), seconds; a gone pid counts 0."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def _shown(path: object) -> str:
    """A path inside the working folder relative to it (the results name no checkout)."""
    text = str(path)
    here = str(Path.cwd()) + os.sep
    return text[len(here) :] if text.startswith(here) else text


def _loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _load(
    url: str,
    key: str,
    queries: list[str],
    clients: int,
    fresh: bool = False,
    pids: list[int] | None = None,
) -> tuple[list, float, int, float, float | None]:
    """POST every query, ``clients`` at a time (each client one keep-alive connection, or a
    new connection per request with ``fresh``); (latencies, wall seconds, errors, this
    process's CPU seconds meanwhile: the threaded httpx client's, the server's CPU seconds
    over ``pids``, None without)."""
    lat: list[float] = []
    errors = 0
    lock = threading.Lock()
    chunks = [queries[i::clients] for i in range(clients)]

    def worker(mine: list[str]) -> None:
        nonlocal errors
        with httpx.Client(timeout=60, headers={"Authorization": f"Bearer {key}"}) as c:
            for q in mine:
                t0 = time.perf_counter()
                if fresh:
                    c.close()
                    c = httpx.Client(timeout=60, headers={"Authorization": f"Bearer {key}"})
                r = c.post(f"{url}/v1/search", json={"query": q, "k": 5})
                dt_ = time.perf_counter() - t0
                with lock:
                    lat.append(dt_)
                    errors += r.status_code != 200

    t0, c0, s0 = time.perf_counter(), time.process_time(), _cpu(pids or [])
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(worker, chunks))
    server_cpu = _cpu(pids) - s0 if pids else None
    return lat, time.perf_counter() - t0, errors, time.process_time() - c0, server_cpu


def _async_load(
    port: int,
    key: str,
    pids: tuple[list[int], list[int]],
    connections: int,
    rate: float,
    duration: float,
    start: int,
    seed: int,
    loop: str,
    balance: bool = False,
) -> dict:
    """One row of ``loadgen.py`` in a child process (its CPU is its own): open loop at
    ``rate`` per second over ``connections``, or closed loop (``rate`` 0) for ``duration``."""
    job = {
        "port": port,
        "key": key,
        "connections": connections,
        "rate": rate,
        "duration": duration,
        "queries": QUERIES,
        "start": start,
        "seed": seed,
        "loop": loop,
        "cpu_pids": pids[0],
        "split_pids": pids[1],
        "balance": balance,
    }
    gen = [sys.executable, str(Path(__file__).with_name("loadgen.py"))]
    done = subprocess.run(gen, input=json.dumps(job), capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"loadgen failed:\n{done.stderr}")
    return json.loads(done.stdout)


def _async_row(name: str, offered: str, res: dict) -> str:
    ms = [x * 1000 for x in res["latency"]]
    n = len(ms) + res["errors"]
    split = "+".join(str(x) for x in res["split"])
    lag = "-" if res["lag_p99"] != res["lag_p99"] else f"{res['lag_p99'] * 1000:.1f}"  # nan: none
    return (
        f"| {name} | {offered} | {res['achieved']:.0f} | {len(ms)} | {_pct(ms, 50):.1f} "
        f"| {_pct(ms, 95):.1f} | {_pct(ms, 99):.1f} | {res['errors']} | {res['queued']} "
        f"| {_per_request(res['client_cpu'], n)} | {_per_request(res['server_cpu'], n)} "
        f"| {split} | {lag} |"
    )


def _republish(owner_dir: Path) -> str:
    from memory_pipeline.core.indexes.publish import current_version, index_root, publish

    root = Path(index_root(owner_dir))
    new = root / f"v-{uuid.uuid4().hex[:12]}"
    shutil.copytree(current_version(owner_dir), new, copy_function=os.link)
    publish(root, new)
    return new.name


async def _mcp_calls(url: str, key: str, n: int) -> list[float]:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    out = []
    async with http, Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
        for q in _queries(n, 900_000):
            t0 = time.perf_counter()
            r = await client.call_tool("search", {"query": q, "k": 5})
            out.append(time.perf_counter() - t0)
            assert not r.is_error
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="memory_pipeline.toml")
    ap.add_argument("--owner", help="the owner to query (several owners)")
    ap.add_argument("--n", type=int, default=240, help="requests per concurrency level")
    ap.add_argument("--out", default="benchmarks/results/service.md")
    ap.add_argument("--label", default="bundled sample", help="the section of --out to write")
    ap.add_argument(
        "--workers", type=int, nargs="+", default=[1, 2], help="server worker processes"
    )
    ap.add_argument("--threads", type=int, help="searches at once per worker (serve --threads)")
    ap.add_argument(
        "--open-rate",
        type=float,
        default=200,
        help="offered searches/s of the open-loop rows (loadgen.py); 0: no open-loop rows",
    )
    ap.add_argument(
        "--connections",
        default="8,32",
        help="keep-alive connections of the open-loop rows, comma-separated; the first also "
        "carries the capacity row and the index switch row",
    )
    ap.add_argument("--duration", type=float, default=20, help="seconds per open-loop row")
    ap.add_argument("--seed", type=int, default=0, help="the open loop's Poisson schedule")
    ap.add_argument(
        "--loop", choices=["uvloop", "asyncio"], default="uvloop", help="loadgen's event loop"
    )
    ap.add_argument(
        "--balance",
        action="store_true",
        help="open-loop rows: reopen connections until the server's workers hold them evenly "
        "(the kernel's accept can give 7 of 8 to one worker; each row reports the split)",
    )
    ap.add_argument(
        "--skip-closed",
        action="store_true",
        help="no threaded httpx rows (1/8/32 clients, switch): the open-loop rows only",
    )
    args = ap.parse_args()
    args.connections = [int(x) for x in str(args.connections).split(",") if x.strip()]
    load_before = _loadavg()

    import memory_pipeline
    from memory_pipeline.config import load_config, owner_config
    from memory_pipeline.service.keys import KeyStore

    cfg = load_config(args.config)
    owner = args.owner or cfg.owner_id
    owner_dir = Path(owner_config(cfg, args.owner).storage_root)
    tmp = Path(tempfile.mkdtemp(prefix="bench_service_"))
    keys = KeyStore(tmp / "keys.json")
    _, key = keys.create(owner, "read")

    # in-process, warmed, the same kind of queries
    memory_pipeline.search("warm up", 5, config=args.config, owner=args.owner)
    inproc = []
    t0 = time.perf_counter()
    for q in _queries(args.n, 0):
        t1 = time.perf_counter()
        memory_pipeline.search(q, 5, config=args.config, owner=args.owner)
        inproc.append(time.perf_counter() - t1)
    inproc_wall = time.perf_counter() - t0
    # the server's own call on its loaded version (search() also reads the config per call)
    from memory_pipeline.service.operations import MemoryService

    service = MemoryService(cfg, args.config)
    service.search(owner, "warm up", 5)
    core = []
    t0, c0 = time.perf_counter(), time.process_time()
    for q in _queries(args.n, 50_000):
        t1 = time.perf_counter()
        service.search(owner, q, 5)
        core.append(time.perf_counter() - t1)
    core_wall = time.perf_counter() - t0
    cpu_ms = (time.process_time() - c0) / args.n * 1000  # all threads of this process
    del service

    servers = [_serve(args, keys, key, owner_dir, w) for w in args.workers]
    shutil.rmtree(tmp, ignore_errors=True)

    lines = [
        f"## {args.label}",
        "",
        f"Output: `{_shown(cfg.storage_root)}` (owner `{owner}`), {os.cpu_count()} cores "
        f"shared with other jobs, {args.n} distinct queries per row (each pays its query "
        f"embedding), k = 5; load average (1/5/15 min) before {load_before}, after {_loadavg()}.",
        "",
        "| path | requests | p50 ms | p95 ms | p99 ms | req/s | errors |",
        "|---|---|---|---|---|---|---|",
        _row("in-process search()", inproc, inproc_wall, 0),
        _row("in-process, the server's call (loaded version)", core, core_wall, 0),
        "",
        f"CPU per search (the server's call, in process): {cpu_ms:.1f} ms, so "
        f"{os.cpu_count()} fully free cores answer at most "
        f"{(os.cpu_count() or 1) * 1000 / cpu_ms:.0f} searches/s, and 8 clients queue for "
        f"them: a p50 of about {8 / (os.cpu_count() or 1) * cpu_ms:.0f} ms at best.",
        "",
    ]
    if not args.skip_closed:
        lines += [
            "Closed loop, httpx clients in threads of the benchmark's process (client CPU: "
            "that process's CPU during the row; server CPU: every server process's):",
            "",
            "| path | requests | p50 ms | p95 ms | p99 ms | req/s | errors "
            "| client CPU s (ms/req) | server CPU s (ms/req) |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for run in servers:
            lines += run["rows"]
        lines.append("")
    if args.open_rate > 0:
        lines += [
            f"`loadgen.py` in a child process ({servers[0]['loop']} event loop, raw HTTP/1.1 "
            f"keep-alive connections): open loop at {args.open_rate:g} searches/s offered, "
            f"Poisson arrivals (seed {args.seed}), {args.duration:g} s per row, latency from "
            "each request's scheduled time to the end of its response (a request that finds "
            "every connection busy waits, and is counted in `queued`); the capacity row is a "
            "closed loop (each connection sends as soon as its answer arrives). Client CPU: "
            "the generator's own; server CPU: every server process's, over the same window; "
            "conns per worker: which worker process accepted each connection"
            + (" (reopened until even: `--balance`)" if args.balance else "")
            + "; send lag: scheduled time to write for requests that found a free connection "
            "(the generator's own delay). Offered: the rate asked (the Poisson schedule's "
            "own count over the row's duration).",
            "",
            "| row | offered/s | achieved/s | answered | p50 ms | p95 ms | p99 ms | errors "
            "| queued | client CPU s (ms/req) | server CPU s (ms/req) | conns per worker "
            "| send lag p99 ms |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for run in servers:
            lines += run["open_rows"]
        lines.append("")
    for run in servers:
        w = run["workers"]
        first = f"- {w} worker(s): "
        if 1 in run["lat"]:
            one = run["lat"][1]
            ratio = _pct(one, 50) / _pct(core, 50)
            first += (
                f"HTTP p50 at 1 client / the server's call in process = {ratio:.2f}x "
                f"({(_pct(one, 50) - _pct(core, 50)) * 1000:+.1f} ms); "
            )
        lines += [
            f"{first}MCP `search` over "
            f"streamable HTTP p50 {_pct(run['mcp'], 50) * 1000:.1f} ms, p95 "
            f"{_pct(run['mcp'], 95) * 1000:.1f} ms ({len(run['mcp'])} calls); peak RSS "
            f"{run['rss']}; published {', '.join(run['switch'])} during the switch row(s)",
        ]
    section = "\n".join(lines) + "\n"
    out = Path(args.out)
    head = "# Service benchmark (benchmarks/bench_service.py)\n\n"
    text = out.read_text(encoding="utf-8") if out.exists() else head
    pattern = re.compile(rf"^## {re.escape(args.label)}\n.*?(?=^## |\Z)", re.S | re.M)
    text = (
        pattern.sub(lambda _m: section + "\n", text)
        if pattern.search(text)
        else (text.rstrip("\n") + "\n\n" + section)
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text.rstrip("\n") + "\n", encoding="utf-8")
    print(section)


def _serve(args: argparse.Namespace, keys, key: str, owner_dir: Path, workers: int) -> dict:
    """One server with ``workers`` processes: every row of the table, MCP, RSS."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "memory_pipeline.cli", "--config", args.config, "serve"]
    cmd += ["--port", str(port), "--keys", str(keys.path), "--rate", "100000"]
    cmd += ["--burst", "100000", "--workers", str(workers)]
    # one key stands for all the clients here: let it use every thread (serve's default
    # gives one key one thread, for fairness between keys; bench_service_attack.py)
    cmd += ["--key-threads", str(args.threads or DEFAULT_THREADS)]
    cmd += ["--threads", str(args.threads)] if args.threads else []
    log = Path(keys.path).with_name(f"server-{workers}.log")  # kept when a run fails
    with open(log, "wb") as sink:
        server = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT)
    label = f"{workers} worker" + ("s" if workers > 1 else "")
    try:
        started = time.perf_counter()
        while True:
            try:
                if httpx.get(f"{url}/v1/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.perf_counter() - started > 300:
                raise SystemExit("server did not start")
            time.sleep(0.1)
        # every worker loads its index and model: new connections spread over them
        _load(url, key, _queries(16 * workers, 500_000), 8 * workers, fresh=True)
        pids = _server_pids(server.pid)
        rows, lat_by, switch = [], {}, []

        def closed(name: str, clients: int, start: int) -> None:
            lat, wall, errors, ccpu, scpu = _load(
                url, key, _queries(args.n, start), clients, pids=pids[0]
            )
            lat_by.setdefault(clients, lat)
            n = len(lat)
            rows.append(
                _row(name, lat, wall, errors, (_per_request(ccpu, n), _per_request(scpu, n)))
            )

        def publish_after(seconds: float) -> threading.Thread:
            def later() -> None:
                time.sleep(seconds)
                switch.append(_republish(owner_dir))

            th = threading.Thread(target=later)
            th.start()
            return th

        if not args.skip_closed:
            for i, clients in enumerate((1, 8, 32)):
                closed(f"HTTP, {label}, {clients} client(s)", clients, (i + 1) * 100_000)
            th = publish_after(1.0)
            closed(f"HTTP, {label}, 8 clients, index switch", 8, 700_000)
            th.join()
        open_rows, loop = [], None
        if args.open_rate > 0:

            def row(name: str, conns: int, rate: float, start: int, offered: str) -> None:
                nonlocal loop
                res = _async_load(
                    port,
                    key,
                    pids,
                    conns,
                    rate,
                    args.duration,
                    start,
                    args.seed,
                    args.loop,
                    args.balance,
                )
                loop = res["loop"]
                if rate > 0:
                    offered += f" ({res['scheduled'] / args.duration:.0f})"
                open_rows.append(_async_row(f"{label}, {name}", offered, res))

            rate, first = args.open_rate, args.connections[0]
            for i, conns in enumerate(args.connections):
                row(f"open loop, {conns} conns", conns, rate, 1_000_000 + i * 100_000, f"{rate:g}")
            row(f"closed loop (capacity), {first} conns", first, 0, 1_800_000, "max")
            th = publish_after(args.duration / 4)
            row(f"open loop, {first} conns, index switch", first, rate, 1_900_000, f"{rate:g}")
            th.join()
        mcp = asyncio.run(_mcp_calls(url, key, min(args.n, 60)))
        procs = _workers(server.pid) or [server.pid]
        each = [_vm_hwm(p) for p in procs]
        rss = f"{sum(each):.0f} MiB" + (
            f" ({' + '.join(f'{x:.0f}' for x in each)} per worker)" if len(each) > 1 else ""
        )
    except BaseException:
        print(f"server log: {log}", file=sys.stderr)
        raise
    finally:
        server.terminate()
        server.wait(30)
    return {
        "workers": workers,
        "rows": rows,
        "open_rows": open_rows,
        "loop": loop,
        "lat": lat_by,
        "mcp": mcp,
        "rss": rss,
        "switch": switch,
    }


if __name__ == "__main__":
    main()
