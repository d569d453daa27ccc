"""The service under attack, on 127.0.0.1, bounded in time and count.

Two owners with keys (``--victim``, ``--attacker``) on one ``memory-pipeline serve`` (the
default limits: 20 requests/s and 40 at once per key, 10 s for headers, 4 event streams a
key). Measured:

1. **Cost per request** (in process, CPU time, one BLAS thread as the server runs): the
   server's call for normal searches and context packs, and for crafted requests at every
   bound (2,000-character time expressions and word lists, ``k`` = 100, the largest
   budget, ``escalate``, an 8,000-character ``recent``): each as a multiple of the
   median normal request (goal: none above 10x).
2. **The victim's search latency** (one client, sequential, distinct queries): unloaded,
   then while, at once, 200 slow-header connections (``GET /v1/health HTTP/1.1`` and
   nothing more, reopened as the server closes them), 100 attempts to hold ``GET /mcp``
   event streams with the attacker's key, and the attacker's key sending crafted queries
   from 8 clients as fast as it is let (goal: the victim's p95 <= 2x its unloaded p95).

Run: ``python benchmarks/bench_service_attack.py --config CONFIG --victim ID --attacker ID
[--seconds 30] [--out benchmarks/results/service.md]``; the run's section (``## under
attack``) replaces the section of that name in ``--out``.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_service import QUERIES, _free_port, _loadavg, _pct, _queries  # noqa: E402

CRAFTED = {
    '"last " x 400': "last " * 400,
    '"the day before the " x 105': "the day before the " * 105,
    "300 distinct words": " ".join(f"word{i}" for i in range(300)),
    '"Kyoto trip hotel " x 117': "Kyoto trip hotel " * 117,
    '"先週の月曜日" x 300': "先週の月曜日" * 300,
    '"1/2/2023 " x 220': "1/2/2023 " * 220,
}


def _cpu(fn, repeat: int = 3) -> float:
    """The least CPU time (all threads of this process) of ``repeat`` runs of ``fn``."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def costs(cfg, config: str, owner: str) -> tuple[list[str], float, float]:
    """Rows of the cost table, the median normal request's CPU, the largest ratio."""
    from memory_pipeline.service.guards import one_blas_thread
    from memory_pipeline.service.operations import MemoryService

    one_blas_thread()
    svc = MemoryService(cfg, config)
    svc.search(owner, "warm up", 5)
    svc.context(owner, "warm up", 2000)
    normal = [_cpu(lambda q=q: svc.search(owner, q, 5)) for q in QUERIES]
    normal += [_cpu(lambda q=q: svc.context(owner, q)) for q in QUERIES[:6]]
    median = statistics.median(normal)
    recent = ["Kyoto trip hotel station " * 16] * 20  # 8,000 characters: the cap
    long = CRAFTED['"Kyoto trip hotel " x 117'][:2000]
    crafted = {f"search {name}": (lambda q=q[:2000]: svc.search(owner, q, 5)) for name, q in
               CRAFTED.items()}  # fmt: skip
    crafted |= {
        "search, k = 100, 2,000 characters": lambda: svc.search(owner, long, 100),
        "search, recent of 8,000 characters": lambda: svc.search(owner, "and then?", 5,
                                                                  recent=recent),
        "context, budget 200,000, k_memories 50, 2,000 characters": lambda: svc.context(
            owner, long, 200_000, k_memories=50),
        "context, escalate, budget 200,000": lambda: svc.context(
            owner, long, 200_000, k_memories=50, escalate=True),
        "context, recent of 8,000 characters, budget 200,000": lambda: svc.context(
            owner, "when?", 200_000, k_memories=50, recent=recent),
        "memories, q of 2,000 characters, limit 200": lambda: svc.memories(
            owner, query=long, limit=200),
    }  # fmt: skip
    rows = [
        f"| normal: {len(QUERIES)} searches + 6 context packs (median) | {median * 1000:.1f} "
        f"| 1.0x |",
        f"| normal, the most costly | {max(normal) * 1000:.1f} | {max(normal) / median:.1f}x |",
    ]
    worst = max(normal) / median
    for name, fn in crafted.items():
        cost = _cpu(fn)
        worst = max(worst, cost / median)
        rows.append(f"| {name} | {cost * 1000:.1f} | {cost / median:.1f}x |")
    return rows, median, worst


class SlowHeaders:
    """``n`` connections that never finish their headers, reopened as they are closed."""

    def __init__(self, port: int, n: int) -> None:
        self.port, self.n = port, n
        self.stop = threading.Event()
        self.closed_by_server = 0
        self.opened = 0
        self.failed = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _open(self) -> socket.socket | None:
        try:
            s = socket.create_connection(("127.0.0.1", self.port), timeout=5)
            s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n")
            s.setblocking(False)
            self.opened += 1
            return s
        except OSError:
            self.failed += 1
            return None

    def _run(self) -> None:
        import selectors

        sel = selectors.DefaultSelector()
        for _ in range(self.n):
            s = self._open()
            if s is not None:
                sel.register(s, selectors.EVENT_READ)
        while not self.stop.is_set():
            for event, _ in sel.select(timeout=0.2):
                s = event.fileobj
                try:
                    gone = s.recv(1024) == b""
                except (BlockingIOError, InterruptedError):
                    gone = False
                except OSError:
                    gone = True
                if gone:
                    sel.unregister(s)
                    s.close()
                    self.closed_by_server += 1
                    fresh = self._open()
                    if fresh is not None:
                        sel.register(fresh, selectors.EVENT_READ)
        for key in list(sel.get_map().values()):
            key.fileobj.close()


def _streams(url: str, key: str, n: int, stop: threading.Event) -> dict:
    """``n`` clients each trying to hold a ``GET /mcp`` event stream open until ``stop``."""
    counts = {"held": 0, "refused": 0, "ended": 0}
    lock = threading.Lock()

    def hold() -> None:
        headers = {"Authorization": f"Bearer {key}", "Accept": "text/event-stream"}
        with httpx.Client(timeout=httpx.Timeout(5, read=120)) as c:
            while not stop.is_set():
                try:
                    with c.stream("GET", f"{url}/mcp", headers=headers) as r:
                        with lock:
                            counts["held" if r.status_code == 200 else "refused"] += 1
                        if r.status_code == 200:
                            for _ in r.iter_bytes():
                                if stop.is_set():
                                    break
                            with lock:
                                counts["ended"] += 1
                        else:
                            stop.wait(1.0)
                except httpx.HTTPError:
                    stop.wait(0.5)

    threads = [threading.Thread(target=hold, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    counts["threads"] = threads  # type: ignore[assignment]
    return counts


def _crafted_load(url: str, key: str, clients: int, stop: threading.Event) -> dict:
    counts: dict[int, int] = {}
    lock = threading.Lock()
    queries = [q[:2000] for q in CRAFTED.values()]

    def send(i: int) -> None:
        with httpx.Client(timeout=60, headers={"Authorization": f"Bearer {key}"}) as c:
            n = i
            while not stop.is_set():
                q = queries[n % len(queries)]
                n += 1
                try:
                    code = c.post(f"{url}/v1/search", json={"query": q, "k": 100}).status_code
                except httpx.HTTPError:
                    code = 0
                with lock:
                    counts[code] = counts.get(code, 0) + 1

    threads = [threading.Thread(target=send, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    return {"counts": counts, "threads": threads}


def _victim(url: str, key: str, seconds: float, start: int) -> tuple[list[float], int]:
    lat, errors = [], 0
    deadline = time.monotonic() + seconds
    with httpx.Client(timeout=60, headers={"Authorization": f"Bearer {key}"}) as c:
        i = start
        while time.monotonic() < deadline:
            q = _queries(1, i)[0]
            i += 1
            t0 = time.perf_counter()
            r = c.post(f"{url}/v1/search", json={"query": q, "k": 5})
            lat.append(time.perf_counter() - t0)
            errors += r.status_code != 200
            time.sleep(0.05)  # an app's pace, not a flood: the victim is a normal client
    return lat, errors


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="memory_pipeline.toml")
    ap.add_argument("--victim", required=True, help="the owner whose latency is measured")
    ap.add_argument("--attacker", required=True, help="the owner whose key attacks")
    ap.add_argument("--seconds", type=float, default=30.0, help="of each latency phase")
    ap.add_argument("--slow", type=int, default=200, help="slow-header connections")
    ap.add_argument("--streams", type=int, default=100, help="event-stream clients")
    ap.add_argument("--crafted-clients", type=int, default=8)
    ap.add_argument("--no-costs", dest="costs", action="store_false", help="skip part 1")
    ap.add_argument("--out", default="benchmarks/results/service.md")
    ap.add_argument("--label", default="under attack")
    ap.add_argument(
        "--serve-arg", action="append", default=[], help="an extra `serve` flag (repeat)"
    )
    args = ap.parse_args()
    load_before = _loadavg()

    from memory_pipeline.config import load_config
    from memory_pipeline.service.keys import KeyStore

    cfg = load_config(args.config)
    cost_rows, median, worst = costs(cfg, args.config, args.victim) if args.costs else ([], 1, 0)

    tmp = Path(tempfile.mkdtemp(prefix="bench_attack_"))
    keys = KeyStore(tmp / "keys.json")
    _, victim = keys.create(args.victim, "read")
    _, attacker = keys.create(args.attacker, "read")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "memory_pipeline.cli", "--config", args.config, "serve"]
    cmd += ["--port", str(port), "--keys", str(keys.path), *args.serve_arg]
    log = tmp / "server.log"
    with open(log, "wb") as sink:
        server = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT)
    stop = threading.Event()
    try:
        started = time.monotonic()
        while True:
            try:
                if httpx.get(f"{url}/v1/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() - started > 300 or server.poll() is not None:
                raise SystemExit(f"server did not start (log: {log})")
            time.sleep(0.2)
        for k in (victim, attacker):  # load both owners' indexes
            httpx.post(f"{url}/v1/search", json={"query": "warm up"},
                       headers={"Authorization": f"Bearer {k}"}, timeout=300)  # fmt: skip
        quiet, quiet_err = _victim(url, victim, args.seconds, 0)

        slow = SlowHeaders(port, args.slow)
        slow.thread.start()
        streams = _streams(url, attacker, args.streams, stop)
        crafted = _crafted_load(url, attacker, args.crafted_clients, stop)
        time.sleep(2.0)  # the attack is on
        attacked, attacked_err = _victim(url, victim, args.seconds, 100_000)
        # a fresh connection still gets in while all of it runs
        fresh = httpx.get(f"{url}/v1/health", headers={"Authorization": f"Bearer {victim}"},
                          timeout=30).status_code  # fmt: skip
        stop.set()
        slow.stop.set()
        slow.thread.join(10)
        for t in [*crafted["threads"], *streams.pop("threads")]:
            t.join(10)
    finally:
        stop.set()
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(10)

    ms = lambda xs, p: _pct(xs, p) * 1000  # noqa: E731
    ratio = _pct(attacked, 95) / _pct(quiet, 95)
    counts = crafted["counts"]
    sent = sum(counts.values())
    span = args.seconds + 2.0
    lines = [
        f"## {args.label}",
        "",
        f"`python benchmarks/bench_service_attack.py --config CONFIG --victim {args.victim} "
        f"--attacker {args.attacker} --seconds {args.seconds:g}`; {os.cpu_count()} cores shared "
        f"with other jobs (load average before {load_before}, after {_loadavg()}); "
        f"`memory-pipeline serve` with its defaults (1 worker)"
        + (f" and `{' '.join(args.serve_arg)}`" if args.serve_arg else "")
        + ".",
        "",
        "Cost of one request, the server's call in process (CPU time, least of 3):",
        "",
        "| request | CPU ms | x median |",
        "|---|---|---|",
        *cost_rows,
        "",
        f"Largest: **{worst:.1f}x** the median normal request ({median * 1000:.1f} ms); goal "
        f"<= 10x: {'met' if worst <= 10 else 'NOT met'}.",
        "",
        "The victim's searches (one client, a request every 50 ms, distinct queries, k = 5):",
        "",
        "| phase | requests | p50 ms | p95 ms | p99 ms | errors |",
        "|---|---|---|---|---|---|",
        f"| unloaded | {len(quiet)} | {ms(quiet, 50):.1f} | {ms(quiet, 95):.1f} "
        f"| {ms(quiet, 99):.1f} | {quiet_err} |",
        f"| under attack | {len(attacked)} | {ms(attacked, 50):.1f} | {ms(attacked, 95):.1f} "
        f"| {ms(attacked, 99):.1f} | {attacked_err} |",
        "",
        f"p95 under attack / unloaded: **{ratio:.2f}x**; goal <= 2x: "
        f"{'met' if ratio <= 2 else 'NOT met'}. A new connection during the attack: {fresh}.",
        "",
        "The attack, all at once:",
        "",
        f"- {args.slow} slow-header connections: {slow.opened} opened, {slow.closed_by_server} "
        f"closed by the server's 10 s header deadline (and reopened), {slow.failed} refused;",
        f"- {args.streams} clients holding `GET /mcp` event streams with the attacker's key: "
        f"{streams['held']} streams granted, {streams['refused']} refused with 429 (4 a key), "
        f"{streams['ended']} ended by the server;",
        f"- the attacker's crafted searches (k = 100, 2,000 characters) from "
        f"{args.crafted_clients} clients: {sent} sent in about {span:.0f} s, "
        f"{counts.get(200, 0)} answered, {counts.get(429, 0)} refused with 429, "
        f"{sum(v for c, v in counts.items() if c not in (200, 429))} other.",
    ]
    section = "\n".join(lines) + "\n"
    out = Path(args.out)
    text = out.read_text(encoding="utf-8") if out.exists() else "# Service benchmark\n\n"
    pattern = re.compile(rf"^## {re.escape(args.label)}\n.*?(?=^## |\Z)", re.S | re.M)
    text = (
        pattern.sub(lambda _m: section + "\n", text)
        if pattern.search(text)
        else (text.rstrip("\n") + "\n\n" + section)
    )
    out.write_text(text.rstrip("\n") + "\n", encoding="utf-8")
    print(section)


if __name__ == "__main__":
    main()
