"""``POST /v1/messages`` and ``GET /v1/messages/{id}``: apps write to the memory.

Keys need the ``write`` scope (``keys create --scope write``; admin keys may too; read keys
get 403). The owner is the key's. A batch is bounded (:data:`MAX_MESSAGES` messages, a body
of at most :data:`MAX_WRITE_BODY` bytes) and, beside the per-request rate limit every
endpoint has, each key may post :data:`WRITE_RATE` messages a second (bursts of
:data:`WRITE_BURST`): 429 with Retry-After beyond. The answer is ``202`` once every accepted
message is on disk: its ``results`` give each message's outcome in order. docs/write-api.md.
"""

# no `from __future__ import annotations`: FastAPI reads the handlers' annotations
from collections.abc import Callable
from typing import Annotated, Any

import anyio
from fastapi import FastAPI, HTTPException, Path, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from memory_pipeline.service.messages import MAX_MESSAGES, MessageLimit, messages_for

MAX_WRITE_BODY = 4 * 1024 * 1024  # bytes of a POST /v1/messages body
WRITE_RATE = 200.0  # messages per second per key (sustained)
WRITE_BURST = 2 * MAX_MESSAGES  # messages a key may post at once
WRITE_PATHS = {"/v1/messages": MAX_WRITE_BODY}  # the body limits of these paths (app.Guard)


class MessageBatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    messages: Annotated[list[Any], Field(min_length=1, max_length=MAX_MESSAGES)] = Field(
        description=f"1 to {MAX_MESSAGES} messages: objects with id, conversation, sender, "
        "time (ISO 8601 with an offset), text; optional type, reply_to, attachment, contact "
        "(docs/write-api.md)"
    )


def add_message_routes(
    app: FastAPI,
    service: Any,
    authorize: Callable[[Request, str], Any],
    *,
    refresh: bool = True,
    keys: Any = None,
) -> Any:
    """Add the routes to ``app``; returns the service's ``Messages`` (close it at shutdown).
    With ``keys``, the refresh worker starts now when a key may write."""
    messages = messages_for(service, refresh=refresh)
    messages.resume()  # posts a killed server accepted and did not refresh
    if keys is not None:
        messages.warm(keys)
    limit = MessageLimit(WRITE_RATE, WRITE_BURST)

    async def writer(request: Request) -> Any:
        return authorize(request, "write")

    @app.post("/v1/messages", tags=["write"], status_code=202)
    async def post_messages(body: MessageBatch, request: Request) -> JSONResponse:
        """Add messages to the key owner's memory: stored durably before the 202, each
        message's outcome in ``results`` (accepted, duplicate, refused with a reason,
        forgotten), searchable after the refresh the post starts."""
        key = await writer(request)
        wait = limit.take(key.key_id, len(body.messages))
        if wait > 0:
            raise HTTPException(
                429, "message rate limit exceeded", {"Retry-After": str(max(1, round(wait)))}
            )
        result = await anyio.to_thread.run_sync(
            lambda: messages.accept(key.owner, body.messages)
        )
        return JSONResponse(result, 202)

    @app.get("/v1/messages/{client_id}", tags=["write"])
    async def message_status(
        request: Request, client_id: Annotated[str, Path(min_length=1, max_length=256)]
    ) -> JSONResponse:
        """Whether a posted message is ``received``, ``searchable``, ``quarantined`` (with
        the reason) or ``forgotten``; 404 for an id never accepted."""
        key = await writer(request)
        result = await anyio.to_thread.run_sync(lambda: messages.status(key.owner, client_id))
        return JSONResponse(result)

    return messages
