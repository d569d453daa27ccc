"""A small typed client of the memory service (``memory-pipeline serve``) for apps.

Each method is one route and returns the route's own response model
(``memory_pipeline.service.models``), validated, so an app reads ``result.chunks[0].text``
with its editor's completion and fails loudly if the server answers something else. An
error answer raises :class:`ServiceError` with the status, the server's one-line
``detail`` and, for 429 / 423, the seconds to wait (``retry_after``)::

    from memory_pipeline.client import MemoryClient

    with MemoryClient("http://127.0.0.1:8700", key) as memory:
        hits = memory.search("when is the Kyoto trip?", k=3)
        for chunk in hits.chunks:
            print(chunk.start, chunk.contact_id, chunk.highlights[0].text)

Only ``httpx`` (installed with the MCP SDK) is needed on the app's side.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, TypeVar

from pydantic import BaseModel

from memory_pipeline.service.models import (
    DEFAULT_BUDGET,
    DEFAULT_K,
    DEFAULT_K_MEMORIES,
    DEFAULT_LIMIT,
    ContextResponse,
    DossierResponse,
    ForgetResponse,
    HealthResponse,
    MemoriesResponse,
    SearchResponse,
)

M = TypeVar("M", bound=BaseModel)

__all__ = [
    "ContextResponse",
    "DossierResponse",
    "ForgetResponse",
    "HealthResponse",
    "MemoriesResponse",
    "MemoryClient",
    "SearchResponse",
    "ServiceError",
]


class ServiceError(Exception):
    """An error answer: ``status`` (401, 404, 422, 429, ...), the server's ``detail``, the
    fields a 422 rejected (``errors``) and ``retry_after`` seconds when the server said."""

    def __init__(
        self, status: int, detail: str, errors: list | None, retry_after: float | None
    ) -> None:
        super().__init__(f"{status}: {detail}")
        self.status, self.detail = status, detail
        self.errors, self.retry_after = errors, retry_after


def _iso(value: dt.date | str | None) -> str | None:
    return value.isoformat() if isinstance(value, dt.date) else value


def _drop_none(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


class MemoryClient:
    """The service at ``url`` with one API key (its owner's memory)."""

    def __init__(
        self, url: str, key: str, *, timeout: float = 60.0, transport: Any = None
    ) -> None:
        import httpx

        self._http = httpx.Client(
            base_url=url.rstrip("/"),
            headers={"Authorization": f"Bearer {key}"},
            timeout=timeout,
            transport=transport,
        )

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _call(self, model: type[M], method: str, path: str, **kwargs: Any) -> M:
        r = self._http.request(method, path, **kwargs)
        if r.status_code != 200:
            try:
                body = r.json()
            except ValueError:
                body = {}
            wait = r.headers.get("Retry-After")
            raise ServiceError(
                r.status_code,
                str(body.get("detail") or r.reason_phrase),
                body.get("errors"),
                float(wait) if wait and wait.replace(".", "", 1).isdigit() else None,
            )
        return model.model_validate_json(r.content)

    def health(self) -> HealthResponse:
        return self._call(HealthResponse, "GET", "/v1/health")

    def search(
        self,
        query: str,
        k: int = DEFAULT_K,
        *,
        contact: str | None = None,
        conversation: str | None = None,
        as_of: dt.date | str | None = None,
        mode: str | None = None,
        preset: str | None = None,
        recent: list | None = None,
    ) -> SearchResponse:
        """``POST /v1/search``: what ``memory_pipeline.search()`` returns."""
        body = _drop_none(
            dict(
                query=query,
                k=k,
                contact=contact,
                conversation=conversation,
                as_of=_iso(as_of),
                mode=mode,
                preset=preset,
                recent=recent,
            )
        )
        return self._call(SearchResponse, "POST", "/v1/search", json=body)

    def context(
        self,
        query: str,
        budget: int = DEFAULT_BUDGET,
        *,
        strategy: str | None = None,
        contact: str | None = None,
        as_of: dt.date | str | None = None,
        k_memories: int = DEFAULT_K_MEMORIES,
        preset: str | None = None,
        recent: list | None = None,
        escalate: bool = False,
        sources: bool = False,
    ) -> ContextResponse:
        """``POST /v1/context``: the pack an LLM reads (``.text``) and its pieces."""
        body = _drop_none(
            dict(
                query=query,
                budget=budget,
                strategy=strategy,
                contact=contact,
                as_of=_iso(as_of),
                k_memories=k_memories,
                preset=preset,
                recent=recent,
                escalate=escalate,
                sources=sources,
            )
        )
        return self._call(ContextResponse, "POST", "/v1/context", json=body)

    def memories(
        self,
        q: str | None = None,
        *,
        contact: str | None = None,
        kind: str | None = None,
        as_of: dt.date | str | None = None,
        limit: int = DEFAULT_LIMIT,
    ) -> MemoriesResponse:
        """``GET /v1/memories``: remembered facts, ranked by ``q`` or newest first."""
        params = _drop_none(dict(q=q, contact=contact, kind=kind, as_of=_iso(as_of), limit=limit))
        return self._call(MemoriesResponse, "GET", "/v1/memories", params=params)

    def dossier(self, contact: str) -> DossierResponse:
        """``GET /v1/dossiers/{contact}``: the contact's dossier as Markdown."""
        from urllib.parse import quote

        return self._call(DossierResponse, "GET", f"/v1/dossiers/{quote(contact, safe='')}")

    def forget(self, contact: str, *, confirm: bool = False) -> ForgetResponse:
        """``POST /v1/forget`` (admin keys): a dry run unless ``confirm``."""
        body = {"contact": contact, "confirm": confirm}
        return self._call(ForgetResponse, "POST", "/v1/forget", json=body)
