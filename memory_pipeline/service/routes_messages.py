"""``POST /v1/messages`` and ``GET /v1/messages/{id}``: apps write to the memory.

Keys need the ``write`` scope (``keys create --scope write``; admin keys may too; read keys
get 403). The owner is the key's. A batch is bounded (:data:`~models.MAX_MESSAGES` messages,
a body of at most :data:`MAX_WRITE_BODY` bytes, checked by ``app.Guard`` before it is read)
and, beside the per-request rate every route has (``app.RateGate``), each key may post
:data:`WRITE_RATE` messages a second (bursts of :data:`WRITE_BURST`): 429 with Retry-After
beyond. The work runs through the app's gate (threads, timeout, CPU charged to the key).
The answer is ``202`` once every accepted message is on disk: its ``results`` give each
message's outcome in order. docs/write-api.md.
"""

# no `from __future__ import annotations`: FastAPI reads the handlers' annotations
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Path, Request
from fastapi.responses import Response

from memory_pipeline.service.guards import retry_after
from memory_pipeline.service.keys import KeyRecord
from memory_pipeline.service.messages import MessageLimit
from memory_pipeline.service.models import (
    MAX_ID,
    MAX_MESSAGES,
    NO_MESSAGE,
    MessageBatch,
    MessagesResponse,
    MessageStatusResponse,
    responses,
)
from memory_pipeline.service.routing import json_response, key_with_scope

MAX_WRITE_BODY = 4 * 1024 * 1024  # bytes of a POST /v1/messages body
WRITE_RATE = 200.0  # messages per second per key (sustained)
WRITE_BURST = 2 * MAX_MESSAGES  # messages a key may post at once
WRITE_PATHS = {"/v1/messages": MAX_WRITE_BODY}  # the body limits of these paths (app.Guard)

Writer = Annotated[KeyRecord, Depends(key_with_scope("write"))]


def message_limit() -> MessageLimit:
    """The per-key message bucket of one app (a request's own bucket counts requests: one
    batch of 500 must not cost what one search costs)."""
    return MessageLimit(WRITE_RATE, WRITE_BURST)


router = APIRouter()


@router.post(
    "/v1/messages",
    tags=["write"],
    status_code=202,
    response_model=MessagesResponse,
    responses=responses(),
)
async def post_messages(body: MessageBatch, request: Request, key: Writer) -> Response:
    """Add messages to the key owner's memory: stored durably before the 202, each
    message's outcome in ``results`` (accepted, duplicate, refused with a reason,
    forgotten), searchable after the refresh the post starts."""
    state = request.app.state.memory  # app.ServiceState
    wait = state.message_limit.take(key.key_id, len(body.messages))
    if wait > 0:
        raise HTTPException(429, "message rate limit exceeded", {"Retry-After": retry_after(wait)})
    messages = state.messages
    result = await state.run(request, lambda: messages.accept(key.owner, body.messages))
    return json_response(result, status=202)


@router.get(
    "/v1/messages/{client_id}",
    tags=["write"],
    response_model=MessageStatusResponse,
    responses=responses(NO_MESSAGE),
)
async def message_status(
    request: Request,
    client_id: Annotated[str, Path(min_length=1, max_length=MAX_ID)],
    key: Writer,
) -> Response:
    """Whether a posted message is ``received``, ``searchable``, ``quarantined`` (with
    the reason) or ``forgotten``; 404 for an id never accepted."""
    state = request.app.state.memory  # app.ServiceState
    messages = state.messages
    return json_response(await state.run(request, lambda: messages.status(key.owner, client_id)))
