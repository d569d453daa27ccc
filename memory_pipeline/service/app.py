"""The HTTP API (FastAPI on uvicorn): ``/v1/...`` endpoints, ``/mcp``, ``/openapi.json``.

Hostile clients meet, in this order: the connection's read deadlines and the connection
cap (``guards.GuardedHttpProtocol``: headers within 10 s, the body within 30 s), the body
limit (413, before the body is read), the key (401 missing/unknown/revoked, 403 lacking
scope), the key's rate limit (429, a token bucket per key; health checks too), request
validation (422: types, query and ``recent`` length, ``k`` and budget bounds, unknown
fields such as an ``owner``), then the gate every request's work passes, HTTP and MCP
alike (``guards.Gate``: the thread limit, the timeout (504), the CPU a request used
charged to its key's bucket). The owner is the key's, never the body's. The access log
records method, the route's template (``/v1/dossiers/{contact}``, never the path a client
sent, nor a query string), status, duration and key id. Every error is one body
(``models.Error``); ``/openapi.json`` lists every status a route can answer.

Another router joins with one line in :func:`create_app` (``app.include_router(...)``);
its handlers take the key with ``Depends(key_with_scope("..."))`` and run their work
through ``request.app.state.memory.gate``.
"""

# no `from __future__ import annotations`: FastAPI reads the handlers' annotations
import dataclasses
import json
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

from memory_pipeline.core.common.lock import LockBusy
from memory_pipeline.core.retrieval.searcher import IndexNotBuilt
from memory_pipeline.service import DEFAULT_THREADS
from memory_pipeline.service.guards import (
    ConnectionLimits,
    Gate,
    Overloaded,
    StreamLimiter,
    configure,
    one_blas_thread,
    retry_after,
)
from memory_pipeline.service.keys import KeyRecord, KeyStore
from memory_pipeline.service.loader import OwnerUnavailable
from memory_pipeline.service.models import (
    LOCKED,
    MAX_ID,
    MAX_LIMIT,
    MAX_QUERY,
    NOT_FOUND,
    AsOf,
    ContextRequest,
    ContextResponse,
    DossierResponse,
    ForgetRequest,
    ForgetResponse,
    HealthResponse,
    MemoriesResponse,
    SearchRequest,
    SearchResponse,
    responses,
)
from memory_pipeline.service.operations import MemoryService
from memory_pipeline.service.routing import json_response, key_with_scope

log = logging.getLogger("memory_pipeline.service.access")
errors_log = logging.getLogger("memory_pipeline.service.errors")

OWNER_SCOPE_KEY = "memory_pipeline.owner"  # ASGI scope entry /mcp reads the owner from
KEY_SCOPE_KEY = "memory_pipeline.key_id"
RECORD_SCOPE_KEY = "memory_pipeline.key"  # the verified KeyRecord (RateGate)
LOG_FORMAT = "%(asctime)s %(process)d %(name)s %(message)s"


@dataclass
class ServiceSettings:
    """What ``memory-pipeline serve`` configures (flags; docs/service.md)."""

    host: str = "127.0.0.1"
    port: int = 8700
    max_body: int = 64 * 1024  # bytes of a request body
    rate: float = 20.0  # requests per second per key (sustained)
    burst: int = 40  # requests a key may send at once
    timeout: float = 30.0  # seconds per request (forget excepted: it rebuilds)
    threads: int = DEFAULT_THREADS  # searches running at once per worker process
    key_threads: int = 1  # of those, at most this many for one key (the others queue)
    processes: int = 1  # uvicorn worker processes, each with its own loaded index
    cors_origins: list[str] = field(default_factory=list)  # empty: CORS off
    mcp: bool = True
    warm: bool = True  # load the keyed owners' indexes at start, in the background
    header_timeout: float = 10.0  # seconds for a request's headers to arrive whole
    body_timeout: float = 30.0  # seconds for its body, once the headers are in
    max_connections: int = 1000  # open connections per worker (capped by the file limit)
    streams_per_key: int = 4  # open MCP event streams (GET /mcp) per key
    stream_idle: float = 60.0  # seconds an event stream may stay silent before it is closed
    # CPU seconds one request's token pays for: a request using n times this spends n
    # tokens of its key's bucket (a normal search uses ~0.01-0.04 s)
    cpu_unit: float = 0.02
    forget_wait: float = 5.0  # seconds forget waits for the writer lock, then 423
    refresh: bool = True  # refresh the index after posts to /v1/messages (service/refresh.py)

    @property
    def connection_limits(self) -> ConnectionLimits:
        return ConnectionLimits(self.header_timeout, self.body_timeout, self.max_connections)


class TokenBucket:
    """Per-key token buckets: ``rate`` tokens a second up to ``burst``; one per request,
    more for a request that used more CPU (:meth:`charge`)."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate, self.burst = rate, burst
        self._state: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def _now(self, key: str, now: float) -> float:
        tokens, last = self._state.get(key, (float(self.burst), now))
        return min(float(self.burst), tokens + (now - last) * self.rate)

    def take(self, key: str) -> float:
        """0 when allowed, else the seconds until a token is free (Retry-After)."""
        now = time.monotonic()
        with self._lock:
            tokens = self._now(key, now)
            if tokens >= 1.0:
                self._state[key] = (tokens - 1.0, now)
                return 0.0
            self._state[key] = (tokens, now)
            return (1.0 - tokens) / self.rate if self.rate > 0 else 60.0

    def charge(self, key: str, tokens: float) -> None:
        """Spend ``tokens`` more (may go below zero: the key then waits them out)."""
        now = time.monotonic()
        with self._lock:
            left = self._now(key, now) - tokens
            self._state[key] = (max(left, -float(self.burst)), now)


@dataclass
class ServiceState:
    """What every router of the app shares (``request.app.state.memory``)."""

    service: MemoryService
    keys: KeyStore
    settings: ServiceSettings
    bucket: TokenBucket
    gate: Gate
    streams: StreamLimiter
    messages: Any = None  # the inbox operations (service/messages.py), HTTP's and MCP's
    message_limit: Any = None  # messages per key (routes_messages.message_limit)

    def authorize(self, request: Request, scope: str) -> KeyRecord:
        """The request's key record, allowed ``scope`` (its rate was checked before the
        request reached the routes: :class:`RateGate`); else 401 / 403."""
        record = request.scope.get(RECORD_SCOPE_KEY) or self.keys.verify(
            _bearer(request.headers)
        )
        if record is None:
            raise HTTPException(
                401, "missing, unknown or revoked key", {"WWW-Authenticate": "Bearer"}
            )
        request.scope[KEY_SCOPE_KEY] = record.key_id
        if not record.allows(scope):
            raise HTTPException(403, f"this key lacks the {scope!r} scope")
        return record

    async def run(self, request: Request, fn: Callable[[], Any], timeout: float | None = None):
        """``fn`` through the gate, charged to the request's key."""
        return await self.gate.run(
            fn,
            key_id=request.scope.get(KEY_SCOPE_KEY),
            timeout=timeout,
            disconnected=request.is_disconnected,
        )


Reader = Annotated[KeyRecord, Depends(key_with_scope("read"))]
Admin = Annotated[KeyRecord, Depends(key_with_scope("admin"))]


def _recent(value: list | None) -> list | None:
    if value is None:
        return None
    return [v.model_dump(exclude_none=True) if isinstance(v, BaseModel) else v for v in value]


_json = json_response


def _error(code: int, detail: str, headers: dict | None = None, **extra: Any) -> JSONResponse:
    return JSONResponse({"detail": detail, **extra}, code, headers=headers)


# -- ASGI guards --------------------------------------------------------------------------------
class Guard:
    """Outermost ASGI layer: the body size limit and the access log.

    The limit (``limits``: per path, else ``max_body``) is checked on ``Content-Length``
    before anything is read, and on the bytes actually received (a chunked body cannot
    announce its size). The log names the route's
    template, never the path sent: ``/v1/dossiers/{contact}``, not the contact."""

    def __init__(self, app: Any, max_body: int, limits: dict[str, int] | None = None) -> None:
        self.app, self.max_body, self.limits = app, max_body, limits or {}

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = {"code": 0}
        max_body = self.limits.get(scope.get("path", ""), self.max_body)  # per path

        async def send_logged(message: dict) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            length = dict(scope.get("headers") or []).get(b"content-length")
            if length is not None and (not length.isdigit() or int(length) > max_body):
                await _plain(send_logged, 413, "request body too large")
                return
            if length is None and scope.get("method") in ("POST", "PUT", "PATCH"):
                # no Content-Length (chunked): read it here, at most the limit, then replay
                body, more = b"", True
                while more:
                    message = await receive()
                    if message["type"] != "http.request":
                        return  # the client left
                    body += message.get("body", b"")
                    more = message.get("more_body", False)
                    if len(body) > max_body:
                        await _plain(send_logged, 413, "request body too large")
                        return
                replayed = False

                async def replay() -> dict:
                    nonlocal replayed
                    if replayed:
                        return await receive()
                    replayed = True
                    return {"type": "http.request", "body": body, "more_body": False}

                await self.app(scope, replay, send_logged)
            else:
                await self.app(scope, receive, send_logged)
        finally:
            log.info(
                "%s %s %s %.1fms key=%s",
                scope.get("method"),
                route_template(scope),
                status["code"],
                (time.perf_counter() - start) * 1000,
                scope.get(KEY_SCOPE_KEY, "-"),
            )


def route_template(scope: dict) -> str:
    """The matched route's template (``/v1/dossiers/{contact}``); ``-`` for a path no route
    matched (it is the client's text, which may be a name)."""
    route = scope.get("route")
    template = getattr(route, "path", None) or getattr(route, "path_format", None)
    if template:
        return template
    return scope["path"] if scope.get("path") in _STATIC_PATHS else "-"


_STATIC_PATHS = frozenset({"/mcp", "/openapi.json", "/docs", "/redoc", "/v1/health"})


class RateGate:
    """The key and its rate, before any routing: a request over its key's rate (or, without
    a valid key, its client address's: health checks, the schema, failed keys) is refused
    here with 429, so a client flooding
    past its limit costs a hash and a dict lookup per request, not a trip through the
    framework. The verified key rides along in the scope for the routes."""

    def __init__(self, app: Any, keys: KeyStore, bucket: TokenBucket) -> None:
        self.app, self.keys, self.bucket = app, keys, bucket

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        token = None
        for name, value in scope.get("headers") or ():
            if name == b"authorization":
                token = _bearer({"authorization": value.decode("latin-1")})
                break
        record = self.keys.verify(token)
        if record is not None:
            scope[RECORD_SCOPE_KEY] = record
            scope[KEY_SCOPE_KEY] = record.key_id
            bucket_key = record.key_id
        else:  # no valid key (health, the schema, or a 401 to come): per client address
            client = scope.get("client")
            bucket_key = f"addr:{client[0] if client else '-'}"
        wait = self.bucket.take(bucket_key)
        if wait > 0:
            await _plain(send, 429, "rate limit exceeded", {"Retry-After": retry_after(wait)})
            return
        await self.app(scope, receive, send)


async def _plain(send: Callable, code: int, detail: str, headers: dict | None = None) -> None:
    body = json.dumps({"detail": detail}).encode()
    extra = [(k.lower().encode(), str(v).encode()) for k, v in (headers or {}).items()]
    await send(
        {
            "type": "http.response.start",
            "status": code,
            "headers": [(b"content-type", b"application/json"), *extra],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _bearer(headers: Any) -> str | None:
    value = headers.get("authorization") if headers is not None else None
    if not value:
        return None
    kind, _, token = value.partition(" ")
    return token.strip() if kind.lower() == "bearer" else None


# -- the app --------------------------------------------------------------------------------------
def create_app(service: MemoryService, keys: KeyStore, settings: ServiceSettings) -> Any:
    """The ASGI app: FastAPI for ``/v1`` and the schema, ``/mcp`` beside it."""
    from memory_pipeline.service import routes_messages
    from memory_pipeline.service.messages import messages_for

    one_blas_thread()
    bucket = TokenBucket(settings.rate, settings.burst)
    gate = Gate(
        settings.threads, settings.timeout, bucket, settings.cpu_unit, settings.key_threads
    )
    state = ServiceState(
        service, keys, settings, bucket, gate,
        StreamLimiter(settings.streams_per_key, settings.stream_idle),
        messages_for(service, refresh=settings.refresh), routes_messages.message_limit(),
    )  # fmt: skip
    state.messages.resume()  # posts a killed server accepted and did not refresh
    if settings.warm:
        state.messages.warm(keys)  # the refresh worker starts now when a key may write
    mcp = None
    if settings.mcp:
        from memory_pipeline.service.mcp_server import build_mcp

        mcp = build_mcp(service, gate=gate, messages=state.messages)
        mcp_asgi = mcp.streamable_http_app(
            streamable_http_path="/mcp",
            stateless_http=True,
            json_response=True,
            host=settings.host,
            max_request_body_size=settings.max_body,
        )
        del mcp_asgi  # only its session manager is used, under our own route and auth

    def warm() -> None:
        """Load the index of every owner with a key, and the query model, before the first
        request needs them (a first search would otherwise take seconds)."""
        owners = sorted({r.owner for r in keys.records() if r.revoked is None})
        for owner in owners:
            try:
                service.snapshot(owner)  # loads and primes the version (loader.prime)
            except Exception:  # no index yet, unknown owner: the requests will say so
                log.debug("warm-up skipped for one owner", exc_info=False)

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        if settings.warm:
            threading.Thread(target=warm, name="warm-indexes", daemon=True).start()
        try:
            if mcp is not None:
                async with mcp.session_manager.run():
                    yield
            else:
                yield
        finally:
            state.messages.close()  # a running refresh ends (its writes are all-or-nothing)

    app = FastAPI(
        title="memory_pipeline",
        version="1",
        description="Search, context packs, memories and dossiers of the key owner's memory; "
        "apps with a write key add messages to it.",
        lifespan=lifespan,
    )
    app.state.memory = state
    if settings.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type"],
        )
    _error_handlers(app)
    app.include_router(memory_router())
    # another router joins here, one line each: app.include_router(module.router)
    app.include_router(routes_messages.router)
    if mcp is not None:
        _mount_mcp(app, state, mcp)
    return Guard(RateGate(app, keys, bucket), settings.max_body, routes_messages.WRITE_PATHS)


def _error_handlers(app: FastAPI) -> None:
    """Every error as one body (models.Error), none with a traceback or a client's value."""

    @app.exception_handler(HTTPException)
    async def _http(_r: Request, exc: HTTPException) -> JSONResponse:
        return _error(exc.status_code, str(exc.detail), exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_r: Request, exc: RequestValidationError) -> JSONResponse:
        fields = [
            {"loc": [str(p) for p in e.get("loc", ())], "msg": e.get("msg", ""), "type": e["type"]}
            for e in exc.errors()
        ]
        where = ", ".join(sorted({".".join(f["loc"]) for f in fields})) or "request"
        return _error(422, f"invalid request: {where}", errors=fields)

    @app.exception_handler(IndexNotBuilt)
    async def _not_built(_r: Request, exc: Exception) -> JSONResponse:
        return _error(503, "no index published yet")

    @app.exception_handler(OwnerUnavailable)
    async def _no_owner(_r: Request, exc: Exception) -> JSONResponse:
        return _error(503, "no memory published for this key's owner")

    @app.exception_handler(LookupError)
    async def _lookup(_r: Request, exc: Exception) -> JSONResponse:
        return _error(404, str(exc).strip("'\""))

    @app.exception_handler(ValueError)
    async def _value(_r: Request, exc: Exception) -> JSONResponse:
        return _error(422, str(exc))

    @app.exception_handler(Overloaded)
    async def _slow(_r: Request, exc: Exception) -> JSONResponse:
        return _error(504, "the request took too long")

    @app.exception_handler(LockBusy)
    async def _busy(_r: Request, exc: Exception) -> JSONResponse:
        headers = {"Retry-After": "30"}
        return _error(423, "the output is being written by another process", headers)

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception) -> JSONResponse:
        # the class only: a message may quote what the client sent
        errors_log.error("%s on %s", type(exc).__name__, route_template(request.scope))
        return _error(500, "internal error")


def memory_router() -> Any:
    """The ``/v1`` routes of the memory: health, search, context, memories, dossiers,
    forget."""
    from fastapi import APIRouter

    router = APIRouter()

    @router.get(
        "/v1/health",
        tags=["service"],
        response_model=HealthResponse,
        responses=responses(),
    )
    async def health(request: Request) -> Response:
        """Liveness; no key needed. With a valid key: the version served to its owner.
        Rate limited like the rest: per key, or per client address without one."""
        state: ServiceState = request.app.state.memory
        record = request.scope.get(RECORD_SCOPE_KEY)  # rate checked by RateGate
        out: dict[str, Any] = {"status": "ok"}
        service = state.service
        if record is not None:
            try:
                snap = await state.run(request, lambda: service.snapshot(record.owner), 10.0)
                out["index_version"] = snap.version if snap else None
            except (IndexNotBuilt, OwnerUnavailable):
                out["index_version"] = None
        elif not service.cfg.multi_owner:
            loaded = service.loader.loaded()
            out["index_version"] = next(iter(loaded.values()), None)
        return _json(out)

    @router.post(
        "/v1/search",
        tags=["memory"],
        response_model=SearchResponse,
        responses=responses(NOT_FOUND),
    )
    async def search(body: SearchRequest, request: Request, key: Reader) -> Response:
        """The chunks, sessions and turns ``search()`` returns, with highlights."""
        service = request.app.state.memory.service
        result = await request.app.state.memory.run(
            request,
            lambda: service.search(
                key.owner,
                body.query,
                body.k,
                contact=body.contact,
                conversation=body.conversation,
                as_of=body.as_of,
                mode=body.mode,
                preset=body.preset,
                recent=_recent(body.recent),
            ),
        )
        return _json(result, result and result["index_version"])

    @router.post(
        "/v1/context",
        tags=["memory"],
        response_model=ContextResponse,
        responses=responses(NOT_FOUND),
    )
    async def context(body: ContextRequest, request: Request, key: Reader) -> Response:
        """The context pack an LLM should read (``text``) and its cited pieces."""
        service = request.app.state.memory.service
        result = await request.app.state.memory.run(
            request,
            lambda: service.context(
                key.owner,
                body.query,
                body.budget,
                strategy=body.strategy,
                contact=body.contact,
                as_of=body.as_of,
                k_memories=body.k_memories,
                preset=body.preset,
                recent=_recent(body.recent),
                escalate=body.escalate,
                sources=body.sources,
            ),
        )
        return _json(result, result and result["index_version"])

    @router.get(
        "/v1/memories",
        tags=["memory"],
        response_model=MemoriesResponse,
        responses=responses(NOT_FOUND),
    )
    async def memories(
        request: Request,
        key: Reader,
        q: Annotated[str | None, Query(min_length=1, max_length=MAX_QUERY, pattern=r"\S")] = None,
        contact: Annotated[str | None, Query(min_length=1, max_length=MAX_ID)] = None,
        kind: Annotated[str | None, Query(min_length=1, max_length=64)] = None,
        as_of: Annotated[AsOf | None, Query()] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 20,
    ) -> Response:
        """Remembered facts, filtered; ranked by ``q`` when given, else newest first."""
        service = request.app.state.memory.service
        result = await request.app.state.memory.run(
            request,
            lambda: service.memories(
                key.owner, query=q, contact=contact, kind=kind, as_of=as_of, limit=limit
            ),
        )
        return _json(result, result and result["index_version"])

    @router.get(
        "/v1/dossiers/{contact}",
        tags=["memory"],
        response_model=DossierResponse,
        responses=responses(NOT_FOUND),
    )
    async def dossier(
        request: Request,
        contact: Annotated[str, Path(min_length=1, max_length=MAX_ID)],
        key: Reader,
    ) -> Response:
        """The contact's current dossier, as Markdown."""
        service = request.app.state.memory.service
        result = await request.app.state.memory.run(
            request, lambda: service.dossier(key.owner, contact)
        )
        return _json(result, result and result["index_version"])

    @router.post(
        "/v1/forget",
        tags=["admin"],
        response_model=ForgetResponse,
        responses=responses(NOT_FOUND, LOCKED),
    )
    async def forget(body: ForgetRequest, request: Request, key: Admin) -> Response:
        """Forget a contact everywhere (admin keys). A dry run unless ``confirm`` is true;
        when it returns, the contact is never served again. Takes the output's writer lock
        as ``memory-pipeline forget --yes`` does: while a run or another forget holds it,
        waits a few seconds, then 423 with ``Retry-After``."""
        import anyio

        state: ServiceState = request.app.state.memory
        # no request timeout (it rebuilds), but the same thread pool limit
        result = await anyio.to_thread.run_sync(
            lambda: state.service.forget(
                key.owner, body.contact, confirm=body.confirm, lock_wait=state.settings.forget_wait
            ),
            limiter=state.gate.limiter,
        )
        return _json(result)

    return router


def _mount_mcp(app: FastAPI, state: ServiceState, mcp: Any) -> None:
    """``/mcp`` (streamable HTTP, stateless) behind the same keys and rate limit; an event
    stream (GET) counts against the key's open streams and closes when silent."""
    session_app = mcp.session_manager.asgi_app

    async def mcp_endpoint(scope: dict, receive: Callable, send: Callable) -> None:
        record = scope.get(RECORD_SCOPE_KEY)  # verified and rate checked by RateGate
        if record is None:
            await _plain(
                send, 401, "missing, unknown or revoked key", {"WWW-Authenticate": "Bearer"}
            )
            return
        scope[OWNER_SCOPE_KEY] = record.owner
        if scope.get("method") != "GET":
            await session_app(scope, receive, send)
            return
        if not state.streams.try_open(record.key_id):
            detail = f"this key has {state.streams.per_key} event streams open already"
            await _plain(send, 429, detail, {"Retry-After": retry_after(state.streams.idle)})
            return
        try:
            await state.streams.serve(session_app, scope, receive, send)
        finally:
            state.streams.close(record.key_id)

    from starlette.routing import Route

    app.router.routes.append(Route("/mcp", endpoint=_AsgiEndpoint(mcp_endpoint)))


class _AsgiEndpoint:
    """Starlette treats a non-function endpoint as a raw ASGI app (all methods)."""

    def __init__(self, fn: Callable[..., Awaitable[None]]) -> None:
        self.fn = fn

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        await self.fn(scope, receive, send)


WORKER_ENV = "MEMORY_PIPELINE_SERVE_WORKER"  # what a worker process builds its app from


def uvicorn_options(settings: ServiceSettings) -> dict[str, Any]:
    """The uvicorn settings every server of the app uses (also the tests' servers): the
    guarded HTTP protocol, no uvicorn access log (it prints paths and query strings)."""
    return dict(
        http=configure(settings.connection_limits),
        access_log=False,
        timeout_graceful_shutdown=10,
        ws="none",
        lifespan="on",
    )


def serve(service: MemoryService, keys: KeyStore, settings: ServiceSettings) -> None:
    """Run the server until interrupted (uvicorn; its own access log is off: it prints the
    query string, which may hold a memory query).

    With ``settings.processes > 1`` uvicorn's supervisor starts that many worker processes,
    each on a socket of its own bound with ``SO_REUSEPORT`` (``service/balance.py``: the
    kernel spreads connections over them; on one shared socket a burst of keep-alive
    connections went to one worker): a search is CPU-bound and holds the GIL, so one process
    uses one core whatever its threads. Each worker builds its own app from
    :data:`WORKER_ENV` (config path, key file, settings) and loads, follows and drops index
    versions on its own; the key file is re-checked per request in every worker; rate limits
    are per worker."""
    import uvicorn

    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    common = dict(host=settings.host, port=settings.port, log_level="info")
    common |= uvicorn_options(settings)
    if settings.processes > 1:
        config = service.cfg.config_path or service.config_path
        os.environ[WORKER_ENV] = json.dumps(
            {
                "config": str(config) if config else None,
                "keys": str(keys.path),
                "settings": dataclasses.asdict(settings),
            }
        )
        from memory_pipeline.service.balance import run_workers

        run_workers(f"{__name__}:worker_app", settings.processes, factory=True, **common)
        return
    uvicorn.run(create_app(service, keys, settings), **common)


def worker_app() -> Any:
    """The app of one worker process (``serve --workers N``), from :data:`WORKER_ENV`."""
    from memory_pipeline.config import load_config

    state = json.loads(os.environ[WORKER_ENV])
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    cfg = load_config(state["config"])
    if cfg.output_uri:  # as the parent: the object store from the AWS_* variables
        from memory_pipeline.config import object_store_options
        from memory_pipeline.core.common import fs

        fs.configure_s3(object_store_options())
    service = MemoryService(cfg, state["config"])
    settings = ServiceSettings(**state["settings"])
    configure(settings.connection_limits)  # this process's protocol class
    return create_app(service, KeyStore(state["keys"]), settings)
