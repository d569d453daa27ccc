"""``serve --workers N`` spreads connections over its workers (service/balance.py).

On one shared listening socket, the worker that wakes first accepts every connection in the
queue, so a pool of keep-alive connections opened together lands on one process. Each worker
on a ``SO_REUSEPORT`` socket of its own gets a share chosen by the kernel, also after a
worker is killed and replaced.
"""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONNECTIONS = 32


async def pid_app(scope, receive, send):  # noqa: ANN001, ANN201 - a bare ASGI app
    """Answers every request with the pid of the process that served it."""
    if scope["type"] != "http":
        return
    body = str(os.getpid()).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", str(len(body)).encode())]})  # fmt: skip
    await send({"type": "http.response.body", "body": body})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pids_of_connections(port: int) -> list[int]:
    """Open every connection first (a client pool), then one request on each."""
    conns = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(CONNECTIONS)]
    time.sleep(0.3)  # let the server accept them all before any request
    pids = []
    for c in conns:
        c.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        data = b""
        while b"\r\n\r\n" not in data or not data.split(b"\r\n\r\n", 1)[1]:
            data += c.recv(4096)
        pids.append(int(data.split(b"\r\n\r\n", 1)[1]))
        c.close()
    return pids


def _children(pid: int) -> set[int]:
    """The worker processes (multiprocessing's resource tracker is a child too)."""
    out = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            try:
                cmd = Path(f"/proc/{child}/cmdline").read_bytes()
            except OSError:
                continue
            if b"resource_tracker" not in cmd:
                out.add(int(child))
    return out


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads worker processes from /proc")
def test_connections_spread_over_workers_and_a_replaced_worker_takes_its_share() -> None:
    port = _free_port()
    code = (
        "from memory_pipeline.service.balance import run_workers; "
        f"run_workers('memory_pipeline_tests.service.test_balance:pid_app', 2, "
        f"host='127.0.0.1', port={port}, log_level='warning', timeout_worker_healthcheck=2)"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "server did not start"
            try:
                if len(set(_pids_of_connections(port))) == 2:
                    break
            except OSError:
                pass
            time.sleep(0.3)
        workers = _children(proc.pid)
        assert len(workers) == 2
        pids = _pids_of_connections(port)
        share = {p: pids.count(p) for p in workers}
        # a fair split of 32 by hash: each gets at least 6 but with p ~ 1e-4
        assert min(share.values()) >= 6, share

        victim = next(iter(workers))
        os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while True:
            now = _children(proc.pid)
            if len(now) == 2 and victim not in now:
                break
            assert time.monotonic() < deadline, f"no replacement for worker {victim}"
            time.sleep(0.2)
        deadline = time.monotonic() + 30
        while True:  # the replacement listens on the dead worker's socket
            pids = _pids_of_connections(port)
            share = {p: pids.count(p) for p in now}
            if min(share.values()) >= 6:
                break
            assert time.monotonic() < deadline, share
            time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0
    assert not any(Path(f"/proc/{p}").exists() for p in now)
