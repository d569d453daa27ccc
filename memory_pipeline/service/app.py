"""The HTTP API (FastAPI on uvicorn): ``/v1/...`` endpoints, ``/mcp``, ``/openapi.json``.

Hostile clients meet, in this order: the body limit (413, before the body is read), the
key (401 missing/unknown/revoked, 403 lacking scope), the key's rate limit (429, a token
bucket per key), request validation (422: types, query length, ``k`` and budget bounds,
unknown fields such as an ``owner``), then a per-request timeout (504). The owner is the
key's, never the body's. The access log records method, path (never the query string),
status, duration and key id: no query or message text.
"""

# no `from __future__ import annotations`: FastAPI reads the handlers' annotations,
# which name dependencies local to create_app
import asyncio
import dataclasses
import json
import logging
import math
import os
import threading
import time
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import anyio
from fastapi import Depends, FastAPI, HTTPException, Path, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

from memory_pipeline.core.context.packs import STRATEGIES
from memory_pipeline.core.retrieval.searcher import IndexNotBuilt
from memory_pipeline.service import DEFAULT_THREADS
from memory_pipeline.service.keys import KeyRecord, KeyStore
from memory_pipeline.service.loader import OwnerUnavailable
from memory_pipeline.service.operations import MemoryService
from memory_pipeline.service.routes_messages import WRITE_PATHS, add_message_routes

log = logging.getLogger("memory_pipeline.service.access")

MAX_QUERY = 2_000  # characters of a query / question
MAX_K = 100
MAX_BUDGET = 200_000  # UTF-16 units of a context pack
MAX_ID = 256  # characters of a contact / conversation id
MAX_RECENT = 50  # messages of `recent`
OWNER_SCOPE_KEY = "memory_pipeline.owner"  # ASGI scope entry /mcp reads the owner from
KEY_SCOPE_KEY = "memory_pipeline.key_scope"  # ... and the key's scope
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
    processes: int = 1  # uvicorn worker processes, each with its own loaded index
    cors_origins: list[str] = field(default_factory=list)  # empty: CORS off
    mcp: bool = True
    warm: bool = True  # load the keyed owners' indexes at start, in the background
    refresh: bool = True  # refresh the index after posts to /v1/messages (service/refresh.py)


class TokenBucket:
    """Per-key token buckets: ``rate`` tokens a second up to ``burst``; one per request."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate, self.burst = rate, burst
        self._state: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, key: str) -> float:
        """0 when allowed, else the seconds until a token is free (Retry-After)."""
        now = time.monotonic()
        with self._lock:
            tokens, last = self._state.get(key, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - last) * self.rate)
            if tokens >= 1.0:
                self._state[key] = (tokens - 1.0, now)
                return 0.0
            self._state[key] = (tokens, now)
            return (1.0 - tokens) / self.rate if self.rate > 0 else 60.0


# -- request models ---------------------------------------------------------------------------
Text = Annotated[str, Field(min_length=1, max_length=MAX_QUERY)]
Id = Annotated[str, Field(min_length=1, max_length=MAX_ID)]
AsOf = Annotated[str, Field(max_length=40, description="ISO date or date-time")]


class RecentMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: Annotated[str, Field(max_length=MAX_QUERY)]
    sender: Annotated[str, Field(max_length=MAX_ID)] | None = None
    time: AsOf | None = None


Recent = Annotated[
    list[Annotated[str, Field(max_length=MAX_QUERY)] | RecentMessage],
    Field(max_length=MAX_RECENT),
]


class SearchRequest(BaseModel):
    """A search of the key owner's memory (the owner is the key's: no owner field)."""

    model_config = ConfigDict(extra="forbid")
    query: Text
    k: Annotated[StrictInt, Field(ge=1, le=MAX_K)] = 5
    contact: Id | None = None
    conversation: Id | None = None
    as_of: AsOf | None = None
    mode: Literal["bm25", "dense", "hybrid"] | None = None
    preset: Annotated[str, Field(max_length=64)] | None = None
    recent: Recent | None = None


class ContextRequest(BaseModel):
    """A context pack for an LLM: memories, then their source conversations."""

    model_config = ConfigDict(extra="forbid")
    query: Text
    budget: Annotated[StrictInt, Field(ge=0, le=MAX_BUDGET)] = 24_000
    strategy: Literal[STRATEGIES] = "split"  # type: ignore[valid-type]
    contact: Id | None = None
    as_of: AsOf | None = None
    k_memories: Annotated[StrictInt, Field(ge=1, le=50)] = 10
    preset: Annotated[str, Field(max_length=64)] | None = None
    recent: Recent | None = None
    escalate: StrictBool = False
    sources: StrictBool = False


class ForgetRequest(BaseModel):
    """Forget a contact of the key's owner; a dry run unless ``confirm`` is true."""

    model_config = ConfigDict(extra="forbid")
    contact: Id
    confirm: StrictBool = False


def _recent(value: list | None) -> list | None:
    if value is None:
        return None
    return [v.model_dump(exclude_none=True) if isinstance(v, BaseModel) else v for v in value]


def _json(data: Any, version: str | None = None) -> Response:
    """JSON without FastAPI's encoder walk (the hot path); datetimes as ISO strings."""
    body = json.dumps(data, ensure_ascii=False, default=_iso).encode("utf-8")
    headers = {"X-Index-Version": version} if version else None
    return Response(body, media_type="application/json", headers=headers)


def _iso(value: Any) -> str:
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


# -- ASGI guards --------------------------------------------------------------------------------
class Guard:
    """Outermost ASGI layer: the body size limit and the access log.

    The limit is checked on ``Content-Length`` before anything is read, and on the bytes
    actually received (a chunked body cannot announce its size)."""

    def __init__(self, app: Any, max_body: int, limits: dict[str, int] | None = None) -> None:
        self.app, self.max_body, self.limits = app, max_body, limits or {}

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = {"code": 0}
        max_body = self.limits.get(scope.get("path", ""), self.max_body)

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
            # no query string, no body: the path and who asked
            log.info(
                "%s %s %s %.1fms key=%s",
                scope.get("method"),
                scope.get("path"),
                status["code"],
                (time.perf_counter() - start) * 1000,
                scope.get("memory_pipeline.key_id", "-"),
            )


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


def _seconds(wait: float) -> str:
    return str(max(1, math.ceil(wait)))


def _bearer(headers: Any) -> str | None:
    value = headers.get("authorization") if headers is not None else None
    if not value:
        return None
    kind, _, token = value.partition(" ")
    return token.strip() if kind.lower() == "bearer" else None


# -- the app --------------------------------------------------------------------------------------
def create_app(service: MemoryService, keys: KeyStore, settings: ServiceSettings) -> Any:
    """The ASGI app: FastAPI for ``/v1`` and the schema, ``/mcp`` beside it."""
    bucket = TokenBucket(settings.rate, settings.burst)
    limiter = anyio.CapacityLimiter(settings.threads)
    mcp = None
    if settings.mcp:
        from memory_pipeline.service.mcp_server import build_mcp

        mcp = build_mcp(service)
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
        if mcp is not None:
            async with mcp.session_manager.run():
                yield
        else:
            yield
        messages.close()  # a running refresh ends (its writes are all-or-nothing)

    app = FastAPI(
        title="memory_pipeline",
        version="1",
        description="Search, context packs, memories and dossiers of the key owner's memory.",
        lifespan=lifespan,
    )
    if settings.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type"],
        )

    def authorize(request: Request, scope: str) -> KeyRecord:
        record = keys.verify(_bearer(request.headers))
        if record is None:
            raise HTTPException(
                401, "missing, unknown or revoked key", {"WWW-Authenticate": "Bearer"}
            )
        request.scope["memory_pipeline.key_id"] = record.key_id
        if not record.allows(scope):
            raise HTTPException(403, f"this key lacks the {scope!r} scope")
        wait = bucket.take(record.key_id)
        if wait > 0:
            raise HTTPException(429, "rate limit exceeded", {"Retry-After": _seconds(wait)})
        return record

    # async: FastAPI runs a plain-def dependency in a worker thread, and under load every
    # thread hop waits for the GIL behind the searches (the check is a stat and a lookup)
    async def reader(request: Request) -> KeyRecord:
        return authorize(request, "read")

    async def admin(request: Request) -> KeyRecord:
        return authorize(request, "admin")

    Reader = Annotated[KeyRecord, Depends(reader)]
    Admin = Annotated[KeyRecord, Depends(admin)]

    async def run(request: Request, fn: Callable[[], Any], timeout: float | None) -> Any:
        """``fn`` in a worker thread, within the timeout; skipped when the client left
        while it waited for a thread (a disconnected client costs no search)."""

        async def call() -> Any:
            async with limiter:
                if await request.is_disconnected():
                    return None
                # abandoned on timeout: the answer is dropped, the thread ends on its own
                return await anyio.to_thread.run_sync(fn, abandon_on_cancel=True)

        try:
            return await asyncio.wait_for(call(), timeout)
        except TimeoutError:
            raise HTTPException(504, "the request took too long") from None

    @app.exception_handler(IndexNotBuilt)
    async def _not_built(_r: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"detail": "no index published yet"}, 503)

    @app.exception_handler(OwnerUnavailable)
    async def _no_owner(_r: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, 503)

    @app.exception_handler(LookupError)
    async def _lookup(_r: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"detail": str(exc).strip("'\"")}, 404)

    @app.exception_handler(ValueError)
    async def _value(_r: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, 422)

    @app.get("/v1/health", tags=["service"])
    async def health(request: Request) -> dict:
        """Liveness, no key needed. With a valid key: the version served to its owner."""
        out: dict[str, Any] = {"status": "ok"}
        record = keys.verify(_bearer(request.headers))
        if record is not None:
            try:
                snap = await run(request, lambda: service.snapshot(record.owner), 10.0)
                out["index_version"] = snap.version if snap else None
            except (IndexNotBuilt, OwnerUnavailable):
                out["index_version"] = None
        elif not service.cfg.multi_owner:
            loaded = service.loader.loaded()
            out["index_version"] = next(iter(loaded.values()), None)
        return out

    @app.post("/v1/search", tags=["memory"])
    async def search(body: SearchRequest, request: Request, key: Reader) -> Response:
        """The chunks, sessions and turns ``search()`` returns, with highlights."""
        result = await run(
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
            settings.timeout,
        )
        return _json(result, result and result["index_version"])

    @app.post("/v1/context", tags=["memory"])
    async def context(body: ContextRequest, request: Request, key: Reader) -> Response:
        """The context pack an LLM should read (``text``) and its cited pieces."""
        result = await run(
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
            settings.timeout,
        )
        return _json(result, result and result["index_version"])

    @app.get("/v1/memories", tags=["memory"])
    async def memories(
        request: Request,
        key: Reader,
        q: Annotated[str | None, Query(min_length=1, max_length=MAX_QUERY)] = None,
        contact: Annotated[str | None, Query(min_length=1, max_length=MAX_ID)] = None,
        kind: Annotated[str | None, Query(min_length=1, max_length=64)] = None,
        as_of: Annotated[str | None, Query(max_length=40)] = None,
        limit: Annotated[int, Query(ge=1, le=200)] = 20,
    ) -> Response:
        """Remembered facts, filtered; ranked by ``q`` when given, else newest first."""
        result = await run(
            request,
            lambda: service.memories(
                key.owner, query=q, contact=contact, kind=kind, as_of=as_of, limit=limit
            ),
            settings.timeout,
        )
        return _json(result, result and result["index_version"])

    @app.get("/v1/dossiers/{contact}", tags=["memory"])
    async def dossier(
        request: Request,
        contact: Annotated[str, Path(min_length=1, max_length=MAX_ID)],
        key: Reader,
    ) -> Response:
        """The contact's current dossier, as Markdown."""
        result = await run(request, lambda: service.dossier(key.owner, contact), settings.timeout)
        return _json(result, result and result["index_version"])

    @app.post("/v1/forget", tags=["admin"])
    async def forget(body: ForgetRequest, key: Admin) -> Response:
        """Forget a contact everywhere (admin keys). A dry run unless ``confirm`` is true;
        when it returns, the contact is never served again."""
        result = await anyio.to_thread.run_sync(
            lambda: service.forget(key.owner, body.contact, confirm=body.confirm)
        )
        return _json(result)

    messages = add_message_routes(
        app, service, authorize, refresh=settings.refresh, keys=keys if settings.warm else None
    )

    if mcp is not None:
        session_app = mcp.session_manager.asgi_app

        async def mcp_endpoint(scope: dict, receive: Callable, send: Callable) -> None:
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
            record = keys.verify(_bearer(headers))
            if record is None:
                await _plain(
                    send, 401, "missing, unknown or revoked key", {"WWW-Authenticate": "Bearer"}
                )
                return
            scope["memory_pipeline.key_id"] = record.key_id
            wait = bucket.take(record.key_id)
            if wait > 0:
                await _plain(send, 429, "rate limit exceeded", {"Retry-After": _seconds(wait)})
                return
            scope[OWNER_SCOPE_KEY] = record.owner
            scope[KEY_SCOPE_KEY] = record.scope  # the tools check it (remember needs write)
            await session_app(scope, receive, send)

        from starlette.routing import Route

        app.router.routes.append(Route("/mcp", endpoint=_AsgiEndpoint(mcp_endpoint)))

    return Guard(app, settings.max_body, WRITE_PATHS)


class _AsgiEndpoint:
    """Starlette treats a non-function endpoint as a raw ASGI app (all methods)."""

    def __init__(self, fn: Callable[..., Awaitable[None]]) -> None:
        self.fn = fn

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        await self.fn(scope, receive, send)


WORKER_ENV = "MEMORY_PIPELINE_SERVE_WORKER"  # what a worker process builds its app from


def serve(service: MemoryService, keys: KeyStore, settings: ServiceSettings) -> None:
    """Run the server until interrupted (uvicorn; its own access log is off: it prints the
    query string, which may hold a memory query).

    With ``settings.processes > 1`` uvicorn starts that many worker processes on one socket:
    a search is CPU-bound and holds the GIL, so one process uses one core whatever its
    threads. Each worker builds its own app from :data:`WORKER_ENV` (config path, key
    file, settings) and loads, follows and drops index versions on its own; the key file is
    re-checked per request in every worker; rate limits are per worker."""
    import uvicorn

    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    common = dict(
        host=settings.host,
        port=settings.port,
        access_log=False,
        log_level="info",
        timeout_graceful_shutdown=10,
    )
    if settings.processes > 1:
        config = service.cfg.config_path or service.config_path
        os.environ[WORKER_ENV] = json.dumps(
            {
                "config": str(config) if config else None,
                "keys": str(keys.path),
                "settings": dataclasses.asdict(settings),
            }
        )
        uvicorn.run(f"{__name__}:worker_app", factory=True, workers=settings.processes, **common)
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
    return create_app(service, KeyStore(state["keys"]), ServiceSettings(**state["settings"]))
