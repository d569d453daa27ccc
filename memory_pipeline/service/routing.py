"""What every router of the app uses, in a module of its own (a router imports it, the app
includes the router: no import cycle): the key dependency and the fast JSON answer."""

# no `from __future__ import annotations`: FastAPI reads the dependency's annotations
import json
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from memory_pipeline.service.keys import KeyRecord


def key_with_scope(scope: str) -> Callable[[Request], Awaitable[KeyRecord]]:
    """A FastAPI dependency: the request's key, checked for ``scope`` and rate limited.
    Async: a plain-def dependency would run in a worker thread, and under load every
    thread hop waits for the GIL behind the searches (the check is a stat and a lookup)."""

    async def dependency(request: Request) -> KeyRecord:
        return request.app.state.memory.authorize(request, scope)

    return dependency


def json_response(data: Any, version: str | None = None, status: int = 200) -> Response:
    """JSON without FastAPI's encoder walk (the hot path); datetimes as ISO strings."""
    body = json.dumps(data, ensure_ascii=False, default=_iso).encode("utf-8")
    headers = {"X-Index-Version": version} if version else None
    return Response(body, status, headers=headers, media_type="application/json")


def _iso(value: Any) -> str:
    return value.isoformat() if hasattr(value, "isoformat") else str(value)
