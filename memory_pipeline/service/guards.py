"""What keeps one client from starving the others: read deadlines and a connection cap on
every connection, a cap on each key's open event streams, and one shared gate (threads,
timeout, CPU charged to the key) that the HTTP routes and the MCP tools both pass.

uvicorn has no deadline for a request's headers or body: a client that sends
``GET / HTTP/1.1\\r\\n`` and nothing more holds a connection (and a file descriptor) until
it leaves. :class:`GuardedHttpProtocol` is uvicorn's HTTP protocol with two deadlines and a cap
added: the headers must be complete ``header_timeout`` seconds after a request's first
byte (or after the connection opens), its body ``body_timeout`` seconds after the headers;
and when ``max_connections`` connections are open, the connection whose headers have been
pending longest is closed to make room (a slow client gives way, a new one gets in).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import resource
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

RESERVED_FILES = 64  # descriptors kept for the index files, logs and the key file


def max_connections_for(wanted: int) -> int:
    """``wanted``, lowered to what the process's open-file limit allows (a connection is a
    descriptor: past the limit, accept() fails for everyone)."""
    try:
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return wanted
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(8, min(wanted, int(soft) - RESERVED_FILES))


@dataclass(frozen=True)
class ConnectionLimits:
    """Per worker process (``serve --header-timeout / --body-timeout / --max-connections``)."""

    header_timeout: float = 10.0
    body_timeout: float = 30.0
    max_connections: int = 1000


class GuardedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with read deadlines and the connection cap of
    :attr:`limits` (pass the class as ``uvicorn.Config(http=...)``; a module-level class, so
    ``--workers`` processes can import it; each process calls :func:`configure`)."""

    limits = ConnectionLimits()
    cap = max_connections_for(ConnectionLimits().max_connections)
    _deadline: asyncio.TimerHandle | None = None
    _pending_since: float | None = None  # headers not complete since (monotonic)

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._expire)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self) -> None:
        self._deadline = None
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()  # the request never arrived whole: no answer owed

    def connection_made(self, transport: Any) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._pending_since = time.monotonic()
        self._arm(self.limits.header_timeout)
        if len(self.connections) > self.cap:
            _evict(self.connections, self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._pending_since = None
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._pending_since is None:  # a keep-alive connection's next request
            self._pending_since = time.monotonic()
            self._arm(self.limits.header_timeout)

    def on_headers_complete(self) -> None:
        self._pending_since = None
        self._arm(self.limits.body_timeout)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()


def configure(limits: ConnectionLimits) -> type[GuardedHttpProtocol]:
    """Set this process's connection limits; returns the protocol class to serve with."""
    GuardedHttpProtocol.limits = limits
    GuardedHttpProtocol.cap = max_connections_for(limits.max_connections)
    return GuardedHttpProtocol


def _evict(connections: Any, newcomer: Any) -> None:
    """Close the connection whose headers have been pending longest (never the newcomer
    unless it is the only candidate): slow clients give way to new ones."""
    pending = [
        c
        for c in connections
        if getattr(c, "_pending_since", None) is not None and c is not newcomer
    ]
    victim = min(pending, key=lambda c: c._pending_since) if pending else newcomer
    victim._disarm()
    victim.transport.close()


class StreamLimiter:
    """Open event streams per key: at most ``per_key`` at once, each closed after
    ``idle`` seconds without a byte sent."""

    def __init__(self, per_key: int, idle: float) -> None:
        self.per_key, self.idle = per_key, idle
        self._open: dict[str, int] = {}
        self._lock = threading.Lock()

    def try_open(self, key_id: str) -> bool:
        with self._lock:
            if self._open.get(key_id, 0) >= self.per_key:
                return False
            self._open[key_id] = self._open.get(key_id, 0) + 1
            return True

    def close(self, key_id: str) -> None:
        with self._lock:
            left = self._open.get(key_id, 1) - 1
            if left > 0:
                self._open[key_id] = left
            else:
                self._open.pop(key_id, None)

    def open_count(self, key_id: str) -> int:
        return self._open.get(key_id, 0)

    async def serve(self, app: Callable, scope: dict, receive: Callable, send: Callable) -> None:
        """Run ``app`` for one stream; ended (the response closed properly) once it has sent
        nothing for ``idle`` seconds."""
        last = [time.monotonic()]
        state = {"started": False, "done": False}

        async def send_timed(message: dict) -> None:
            last[0] = time.monotonic()
            if message["type"] == "http.response.start":
                state["started"] = True
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                state["done"] = True
            await send(message)

        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                while True:
                    await anyio.sleep(max(0.05, min(1.0, self.idle / 4)))
                    if time.monotonic() - last[0] > self.idle:
                        tg.cancel_scope.cancel()
                        return

            tg.start_soon(watch)
            await app(scope, receive, send_timed)
            tg.cancel_scope.cancel()
        if state["started"] and not state["done"]:
            await send({"type": "http.response.body", "body": b"", "more_body": False})


class Overloaded(Exception):
    """The request did not fit its timeout (504)."""


class Gate:
    """The one way a request's work runs, for HTTP and MCP alike: at most ``threads`` at
    once per process and ``per_key`` of them for one key (a key flooding the server queues
    behind itself, not in front of other keys), within ``timeout`` seconds, and its CPU
    time charged to the key's rate bucket (a request costing ``n`` times ``cpu_unit``
    seconds of CPU spends ``n`` tokens: a key sending costly requests meets 429 sooner, at
    the same CPU rate as one sending cheap ones)."""

    def __init__(
        self, threads: int, timeout: float, bucket: Any, cpu_unit: float, per_key: int = 0
    ) -> None:
        self.limiter = anyio.CapacityLimiter(threads)
        self.timeout, self.bucket, self.cpu_unit = timeout, bucket, cpu_unit
        self.per_key = per_key
        self._keys: dict[str, anyio.CapacityLimiter] = {}

    def _key_limiter(self, key_id: str | None) -> Any:
        if key_id is None or self.per_key <= 0:
            return contextlib.nullcontext()
        found = self._keys.get(key_id)
        if found is None:
            found = self._keys[key_id] = anyio.CapacityLimiter(self.per_key)
        return found

    async def run(
        self,
        fn: Callable[[], Any],
        *,
        key_id: str | None = None,
        timeout: float | None = None,
        disconnected: Callable[[], Any] | None = None,
    ) -> Any:
        """``fn()`` in a worker thread; :class:`Overloaded` past the timeout (the thread is
        abandoned: its answer is dropped). Skipped (None) when ``disconnected()`` says the
        client left while it waited for a thread."""
        spent = [0.0]

        def timed() -> Any:
            start = time.thread_time()
            try:
                return fn()
            finally:
                spent[0] = time.thread_time() - start
                if key_id is not None and self.bucket is not None and self.cpu_unit > 0:
                    extra = spent[0] / self.cpu_unit - 1.0
                    if extra > 0:
                        self.bucket.charge(key_id, extra)

        async def call() -> Any:
            async with self._key_limiter(key_id), self.limiter:
                if disconnected is not None and await disconnected():
                    return None
                return await anyio.to_thread.run_sync(timed, abandon_on_cancel=True)

        limit = self.timeout if timeout is None else timeout
        try:
            return await asyncio.wait_for(call(), limit)
        except TimeoutError:
            raise Overloaded("the request took too long") from None


GIL_SWITCH = 0.001  # seconds a thread holds the GIL while another waits (Python: 0.005)


def one_blas_thread() -> None:
    """One BLAS thread for the process (``loader.one_blas_thread``: on the query encoders'
    small matrices OpenBLAS's spinning threads cost 2-6x the CPU of the work itself, and a
    long query paid that most, benchmarks/results/service.md), and a shorter GIL switch
    interval: a short request waiting behind a long one gets its turn after 1 ms, not 5."""
    import sys

    from memory_pipeline.service.loader import one_blas_thread as blas_on_one_thread

    blas_on_one_thread()
    sys.setswitchinterval(GIL_SWITCH)


def retry_after(wait: float) -> str:
    """A ``Retry-After`` header value: whole seconds, at least 1."""
    return str(max(1, math.ceil(wait)))
