"""The open-loop load generator measures from each request's scheduled time.

A closed-loop client measures from when it sends, so a slow server slows the client down
and the queueing never shows (coordinated omission). ``benchmarks/loadgen.py`` keeps a
seeded Poisson schedule whatever the server does: against a server that answers one
request at a time slower than they are offered, requests must be counted as queued and the
late ones must carry their wait in their latency.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import threading

import pytest

from benchmarks.loadgen import percentile, poisson_schedule, read_response, run_job


def test_the_schedule_is_seeded_poisson_within_the_duration() -> None:
    a = poisson_schedule(200, 20, seed=0)
    assert a == poisson_schedule(200, 20, seed=0)
    assert a != poisson_schedule(200, 20, seed=1)
    assert all(0 < x < 20 for x in a) and a == sorted(a)
    assert 3600 < len(a) < 4400  # 4000 expected, sd 63
    gaps = [y - x for x, y in zip(a, a[1:], strict=False)]
    # exponential gaps: the mean is 1/rate and the sd about the mean (a fixed period: sd 0)
    assert statistics.mean(gaps) == pytest.approx(1 / 200, rel=0.1)
    assert statistics.stdev(gaps) == pytest.approx(1 / 200, rel=0.15)
    assert poisson_schedule(0, 20, seed=0) == []


def test_percentile_is_nearest_rank() -> None:
    values = [float(x) for x in range(1, 101)]
    assert percentile(values, 50) == 51.0  # round(0.5 * 99) = 50 -> the 51st
    assert percentile(values, 99) == 99.0
    assert percentile(values[::-1], 0) == 1.0
    assert percentile([], 50) != percentile([], 50)  # nan


def _parse(raw: bytes) -> tuple[int, bytes, bool]:
    async def go() -> tuple[int, bytes, bool]:
        reader = asyncio.StreamReader()
        reader.feed_data(raw)
        reader.feed_eof()
        return await read_response(reader)

    return asyncio.run(go())


def test_read_response_takes_length_chunked_and_close() -> None:
    body = '{"q": "京都"}'.encode()
    head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    assert _parse(head + body + b"HTTP/1.1 200 OK\r\n") == (200, body, False)
    chunked = b"HTTP/1.1 429 Too Many\r\nTransfer-Encoding: chunked\r\n\r\n"
    chunked += b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
    assert _parse(chunked) == (429, b"abcde", False)
    closing = b"HTTP/1.1 503 X\r\nConnection: close\r\nContent-Length: 2\r\n\r\nno"
    assert _parse(closing) == (503, b"no", True)


class _SlowServer:
    """An HTTP/1.1 keep-alive server on 127.0.0.1 that answers each request ``delay``
    seconds after it arrives, one at a time per connection; 401 without the key."""

    def __init__(self, delay: float) -> None:
        self.delay, self.bodies = delay, []
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert self.ready.wait(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(asyncio.start_server(self._conn, "127.0.0.1", 0))
        self.port = self.server.sockets[0].getsockname()[1]
        self.ready.set()
        self.loop.run_forever()

    async def _conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode()
                length = int(head.lower().split("content-length:")[1].split("\r\n")[0])
                self.bodies.append(json.loads(await reader.readexactly(length)))
                await asyncio.sleep(self.delay)
                status = "200 OK" if "Bearer k1\r\n" in head else "401 No"
                writer.write(f"HTTP/1.1 {status}\r\nContent-Length: 2\r\n\r\n{{}}".encode())
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture
def slow_server():
    server = _SlowServer(delay=0.02)
    yield server
    server.stop()


def _job(port: int, **extra: object) -> dict:
    job = {"port": port, "key": "k1", "queries": ["dog", "京都"], "loop": "asyncio"}
    return job | {"start": 7, "seed": 0, "duration": 0.25} | extra


def test_open_loop_counts_the_queue_in_the_latency(slow_server: _SlowServer) -> None:
    # 200/s offered for 0.25 s on one connection served at 50/s: a growing queue
    schedule = poisson_schedule(200, 0.25, seed=0)
    res = run_job(_job(slow_server.port, connections=1, rate=200))
    n = len(schedule)
    assert len(res["latency"]) == n and res["errors"] == 0
    assert res["queued"] >= n // 2
    # request j ends no sooner than (j + 1) * 0.02 s after the start: the last one waited
    # for every earlier one, and its latency (from its scheduled time) says so
    assert max(res["latency"]) >= n * 0.02 - schedule[-1] - 0.005
    assert res["achieved"] <= 1 / 0.02 + 1
    # every request distinct (a number appended), in schedule order over one connection
    assert [b["query"] for b in slow_server.bodies[:3]] == ["dog 7", "京都 8", "dog 9"]
    assert res["client_cpu"] >= 0 and res["server_cpu"] is None


def test_closed_loop_measures_from_the_send(slow_server: _SlowServer) -> None:
    res = run_job(_job(slow_server.port, connections=2, rate=0, key="wrong"))
    assert res["latency"] == [] and res["errors"] >= 4  # every answer a 401
    res = run_job(_job(slow_server.port, connections=2, rate=0))
    assert res["queued"] == 0 and len(res["latency"]) >= 4
    assert statistics.median(res["latency"]) < 0.1  # one service time (0.02 s), no queue
