"""Worker processes that share the connections: one ``SO_REUSEPORT`` socket per worker.

uvicorn's ``--workers`` gives every worker the same listening socket. Whichever worker's
event loop wakes first accepts every connection waiting in the queue, so the keep-alive
connections of a client pool that opens them together land on one worker: 8 of 8 and 32 of
32 on the same process in ``benchmarks/bench_service.py``'s open-loop rows, which then
served 107 searches/s at a p50 of 8.4 s while the other core idled (the same rows at 4 + 4
connections: 196/s, p50 32 ms). Here each worker listens on a socket of its own, all bound
to the same address with ``SO_REUSEPORT``: the kernel assigns each new connection to one of
them by a hash of its addresses, so connections spread evenly whatever the timing, and a
restarted worker takes over its predecessor's socket (and the connections queued on it).

Everything else is uvicorn's supervisor (health checks, restarts, signals), unchanged.
"""

from __future__ import annotations

import logging
import socket
from typing import Any

from uvicorn.config import STARTUP_FAILURE
from uvicorn.supervisors.multiprocess import Multiprocess, Process

log = logging.getLogger("memory_pipeline.service")


def reuseport_sockets(host: str, port: int, n: int) -> list[socket.socket]:
    """``n`` TCP sockets bound to ``(host, port)`` with ``SO_REUSEPORT`` (port 0: the first
    one's port, chosen by the kernel, for all)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    out: list[socket.socket] = []
    for _ in range(n):
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        try:
            sock.bind((host, port))
        except OSError:
            for s in [*out, sock]:
                s.close()
            raise
        port = sock.getsockname()[1]
        out.append(sock)
    return out


class BalancedMultiprocess(Multiprocess):
    """uvicorn's supervisor with worker ``i`` always on socket ``i`` (first start and every
    restart)."""

    def __init__(self, config: Any, sockets: list[socket.socket]) -> None:
        if len(sockets) != config.workers:
            raise ValueError(f"{config.workers} workers need as many sockets, got {len(sockets)}")
        super().__init__(config, sockets=sockets)
        self.own = sockets

    def init_processes(self) -> None:
        for sock in self.own:
            process = Process(self.config, [sock])
            process.start()
            self.processes.append(process)

    def _replace(self, idx: int) -> Process:
        process = Process(self.config, [self.own[idx]])
        process.start()
        return process

    def keep_subprocess_alive(self) -> None:
        # uvicorn's, with the replacement on the dead worker's own socket
        if self.should_exit.is_set():
            return
        for idx, process in enumerate(self.processes):
            if process.is_alive(timeout=self.config.timeout_worker_healthcheck):
                continue
            process.kill()
            process.join()
            if process.exitcode == STARTUP_FAILURE:  # a restart would fail alike
                log.error("worker process %s failed to start; stopping", process.pid)
                self.should_exit.set()
                return
            if self.should_exit.is_set():
                return
            log.info("worker process %s died; starting another on its socket", process.pid)
            self.processes[idx] = self._replace(idx)

    def restart_all(self) -> None:
        # SIGHUP: each worker replaced by a new one on the same socket, one after another
        for idx, old in enumerate(self.processes):
            if self.should_exit.is_set():
                return
            new = self._replace(idx)
            if not new.wait_until_ready(self.config.timeout_worker_healthcheck, self.should_exit):
                new.kill()
                new.join()
                return
            old.terminate()
            old.join()
            self.processes[idx] = new

    def handle_ttin(self) -> None:
        # uvicorn adds a worker on all sockets; here the count is fixed by --workers
        log.warning("SIGTTIN ignored: the number of workers is fixed (serve --workers)")

    def handle_ttou(self) -> None:
        log.warning("SIGTTOU ignored: the number of workers is fixed (serve --workers)")


def run_workers(app: str, workers: int, **options: Any) -> None:
    """``uvicorn.run(app, workers=workers, **options)`` with one socket per worker (``app``:
    an import string, loaded by each worker)."""
    import uvicorn

    config = uvicorn.Config(app, workers=workers, **options)
    sockets = reuseport_sockets(config.host, config.port, workers)
    try:
        BalancedMultiprocess(config, sockets).run()
    except KeyboardInterrupt:
        pass
    finally:
        for sock in sockets:
            sock.close()
