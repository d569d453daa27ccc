"""A low-overhead HTTP load generator for ``POST /v1/search``: open loop or closed loop.

Why not httpx in threads (``bench_service.py``'s closed-loop rows): a threaded httpx client
spends several ms of CPU per request on the same 2 cores the server needs, and a closed loop
cannot show a latency goal and a rate goal in one row (8 clients at 200/s have a mean latency
of 8/200 = 40 ms by Little's law, whatever the server does). Here one asyncio event loop
(uvloop when installed) writes hand-made HTTP/1.1 requests on C keep-alive connections and
parses only the status line, the headers and a Content-Length (or chunked) body.

Open loop: requests are *scheduled* at a fixed offered rate with seeded exponential
(Poisson) inter-arrival times, whatever the server's speed; a request's latency runs from its
scheduled time to the end of its response (no coordinated omission), so a request that finds
all C connections busy waits for one, and that wait counts (it is also counted: ``queued``).
Closed loop (``rate`` 0): C connections send back to back for the duration (capacity).

Run as a child process so its CPU is its own: ``python benchmarks/loadgen.py`` reads one JSON
job on stdin and writes one JSON result on stdout (:func:`run_job`). The child also reads
the server's CPU (``/proc/<pid>/stat`` of the given pids) at the start and end of its
measured window, and which server process holds each connection.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def poisson_schedule(rate: float, duration: float, seed: int) -> list[float]:
    """Send times (seconds from the start, increasing, all < ``duration``) of a Poisson
    process at ``rate`` per second: seeded exponential gaps, so a row is reproducible and the
    arrivals bunch as independent users' would (a fixed period would hide queueing)."""
    if rate <= 0 or duration <= 0:
        return []
    rng = random.Random(seed)
    out: list[float] = []
    t = rng.expovariate(rate)
    while t < duration:
        out.append(t)
        t += rng.expovariate(rate)
    return out


def percentile(values: list[float], p: float) -> float:
    """The ``p``-th percentile by nearest rank on the sorted values (nan when empty): the
    same rule as the closed-loop rows of ``bench_service.py``, so the rows compare."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def request_bytes(host: str, path: str, key: str, body: bytes) -> bytes:
    """One keep-alive HTTP/1.1 POST with a JSON body, written by hand (no client library)."""
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode("ascii") + body


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes, bool]:
    """(status, body, the server will close) of one HTTP/1.1 response."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    if "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        parts = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")  # no trailers from this server
                break
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
        body = b"".join(parts)
    else:
        body = await reader.read()  # until the server closes
        return status, body, True
    return status, body, headers.get("connection", "").lower() == "close"


def _cpu_ticks(pids: list[int]) -> float:
    """utime + stime of ``pids`` (every thread of each), seconds; a gone pid counts 0."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def _holders(server_port: int, client_ports: list[int], pids: list[int]) -> dict[int, int]:
    """Which of ``pids`` holds each of our connections (client port -> pid; a connection
    not accepted yet is missing). The kernel gives a new connection to whichever worker
    accepts first, so a few long-lived connections can split unevenly, and that matters."""
    wanted = set(client_ports)
    port_of: dict[str, int] = {}  # the server side's socket inode -> our port
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            local = int(cols[1].rsplit(":", 1)[1], 16)
            remote = int(cols[2].rsplit(":", 1)[1], 16)
            if local == server_port and remote in wanted:
                port_of[f"socket:[{cols[9]}]"] = remote
    out: dict[int, int] = {}
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target in port_of:
                out[port_of[target]] = pid
    return out


def _port(conn: _Conn) -> int:
    """The local (client) port of an open connection."""
    assert conn.writer is not None
    return conn.writer.get_extra_info("sockname")[1]


async def _place(conns: list[_Conn], port: int, pids: list[int], balance: bool) -> list[int]:
    """Wait (up to 5 s) until the server has accepted every connection; with ``balance``,
    reopen connections of the busiest worker until no worker holds two more than another
    (a pool that reconnects until even; up to 100 tries). Returns connections per pid."""

    def held() -> dict[int, int]:
        return _holders(port, [_port(c) for c in conns], pids)

    def counts(owner: dict[int, int]) -> list[int]:
        return [sum(1 for p in owner.values() if p == pid) for pid in pids]

    if not pids:
        return []
    owner = held()
    for _ in range(200):
        if len(owner) == len(conns):
            break
        await asyncio.sleep(0.025)
        owner = held()
    for _ in range(100 if balance and len(pids) > 1 else 0):
        n = counts(owner)
        if max(n) - min(n) <= 1:
            break
        busiest = pids[n.index(max(n))]
        conn = next(c for c in conns if owner.get(_port(c)) == busiest)
        conn.close()
        await conn.open()
        for _ in range(200):
            owner = held()
            if len(owner) == len(conns):
                break
            await asyncio.sleep(0.025)
    return counts(owner)


@dataclass
class _Conn:
    host: str
    port: int
    reader: asyncio.StreamReader | None = None
    writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None

    async def post(self, data: bytes, timeout: float) -> int:
        """Send one request and read its response; its status (0 on a transport error, and
        the connection is reopened before the next request)."""
        try:
            if self.writer is None:
                await self.open()
            assert self.reader is not None and self.writer is not None
            self.writer.write(data)
            status, _body, closing = await asyncio.wait_for(read_response(self.reader), timeout)
            if closing:
                self.close()
            return status
        except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError):
            self.close()
            return 0


@dataclass
class _Tally:
    latency: list[float] = field(default_factory=list)  # seconds, successful requests
    lag: list[float] = field(default_factory=list)  # scheduled -> written, unqueued, s
    errors: int = 0
    queued: int = 0
    last_end: float = 0.0


async def _run(job: dict[str, Any]) -> dict[str, Any]:
    host, port = job.get("host", "127.0.0.1"), int(job["port"])
    conns = [_Conn(host, port) for _ in range(int(job["connections"]))]
    await asyncio.gather(*(c.open() for c in conns))
    pids = [int(p) for p in job.get("cpu_pids", [])]  # the server's CPU: every process
    holders = [int(p) for p in job.get("split_pids", [])]  # its workers
    split = await _place(conns, port, holders, bool(job.get("balance", False)))
    queries = job["queries"]
    start = int(job.get("start", 0))
    key, timeout = job["key"], float(job.get("timeout", 60))
    hostname = f"{host}:{port}"

    def payload(i: int) -> bytes:
        q = f"{queries[i % len(queries)]} {start + i}"
        body = json.dumps({"query": q, "k": int(job.get("k", 5))}, ensure_ascii=False)
        return request_bytes(hostname, "/v1/search", key, body.encode("utf-8"))

    rate, duration = float(job.get("rate", 0)), float(job["duration"])
    schedule = poisson_schedule(rate, duration, int(job.get("seed", 0)))
    tally = _Tally()
    cpu0, srv0 = time.process_time(), _cpu_ticks(pids)
    t0 = time.perf_counter()
    if rate > 0:
        await _open_loop(conns, schedule, payload, timeout, t0, tally)
    else:
        await _closed_loop(conns, payload, timeout, t0 + duration, tally)
    wall = time.perf_counter() - t0
    cpu, srv = time.process_time() - cpu0, _cpu_ticks(pids) - srv0
    for c in conns:
        c.close()
    done = len(tally.latency)
    return {
        "latency": tally.latency,
        # the generator's own delay: scheduled -> written for requests that found a free
        # connection (a late timer or a busy loop, never the server's queue)
        "lag_p99": percentile(tally.lag, 99),
        "errors": tally.errors,
        "queued": tally.queued,
        "sent": done + tally.errors,
        "scheduled": len(schedule),
        "wall": wall,
        # answered per second, over the first schedule slot to the last response
        "achieved": done / (tally.last_end - t0) if tally.last_end > t0 else 0.0,
        "client_cpu": cpu,
        "server_cpu": srv if pids else None,
        "split": split,
        "loop": type(asyncio.get_running_loop()).__module__.split(".")[0],
    }


async def _open_loop(
    conns: list[_Conn],
    schedule: list[float],
    payload: Callable[[int], bytes],
    timeout: float,
    t0: float,
    tally: _Tally,
) -> None:
    """Each connection a worker; the dispatcher hands request ``i`` at ``t0 + schedule[i]``
    to an idle worker, or, when none is idle, appends it to a FIFO (and counts it queued)."""
    loop = asyncio.get_running_loop()
    idle: deque[asyncio.Future] = deque()  # workers waiting for a request
    pending: deque = deque()  # requests waiting for a worker

    async def worker(conn: _Conn) -> None:
        while True:
            if pending:
                item = pending.popleft()
            else:
                fut = loop.create_future()
                idle.append(fut)
                item = await fut
            if item is None:
                return
            i, data, queued = item
            sent = time.perf_counter()
            status = await conn.post(data, timeout)
            end = time.perf_counter()
            if not queued:
                tally.lag.append(sent - (t0 + schedule[i]))
            if status == 200:
                tally.latency.append(end - (t0 + schedule[i]))
            else:
                tally.errors += 1
            tally.last_end = max(tally.last_end, end)

    workers = [asyncio.create_task(worker(c)) for c in conns]
    await asyncio.sleep(0)  # every worker idle before the first slot
    for i, at in enumerate(schedule):
        data = payload(i)  # built before its slot: its bytes are not its delay
        delay = t0 + at - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        if idle:
            idle.popleft().set_result((i, data, False))
        else:
            pending.append((i, data, True))
            tally.queued += 1
    for _ in workers:
        if idle:
            idle.popleft().set_result(None)
        else:
            pending.append(None)
    await asyncio.gather(*workers)


async def _closed_loop(
    conns: list[_Conn],
    payload: Callable[[int], bytes],
    timeout: float,
    t_end: float,
    tally: _Tally,
) -> None:
    """Every connection sends its next request as soon as its last answer arrives."""
    counter = iter(range(10**9))

    async def worker(conn: _Conn) -> None:
        while time.perf_counter() < t_end:
            data = payload(next(counter))
            sent = time.perf_counter()
            status = await conn.post(data, timeout)
            end = time.perf_counter()
            if status == 200:
                tally.latency.append(end - sent)
            else:
                tally.errors += 1
            tally.last_end = max(tally.last_end, end)

    await asyncio.gather(*(worker(c) for c in conns))


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """Run one row in this process (uvloop when installed and ``job["loop"]`` allows)."""
    if job.get("loop", "uvloop") == "uvloop":
        try:
            import uvloop

            return uvloop.run(_run(job))
        except ImportError:
            pass
    return asyncio.run(_run(job))


if __name__ == "__main__":
    json.dump(run_job(json.load(sys.stdin)), sys.stdout)
