"""The service's contract: the request and response models of every route, the one error
body, and the limits both doors (HTTP and MCP) share.

The response models name every field a client may rely on; ``extra="allow"`` lets a field
the Python API gains reach clients unchanged (``/openapi.json`` shows it as an additional
property until the model names it). The same models are the typed client's return values
(``memory_pipeline.client``).
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    WithJsonSchema,
    field_validator,
)

from memory_pipeline.core.context.packs import STRATEGIES
from memory_pipeline.core.retrieval.config import PRESETS

# -- limits (HTTP and MCP alike) -------------------------------------------------------------------
MAX_QUERY = 2_000  # characters of a query / question
MAX_RECENT = 50  # messages of `recent`
MAX_RECENT_CHARS = 8_000  # characters of all `recent` texts together (a query's cost grows)
MAX_K = 100
DEFAULT_K = 5
MAX_BUDGET = 200_000  # UTF-16 units of a context pack
DEFAULT_BUDGET = 24_000
MAX_K_MEMORIES = 50
DEFAULT_K_MEMORIES = 10
MAX_LIMIT = 200  # memories per answer
DEFAULT_LIMIT = 20
MAX_ID = 256  # characters of a contact / conversation id
MAX_PRESET = 64
MODES = ("bm25", "dense", "hybrid")

Text = Annotated[StrictStr, Field(min_length=1, max_length=MAX_QUERY, pattern=r"\S")]
Id = Annotated[StrictStr, Field(min_length=1, max_length=MAX_ID)]
def _integral(value: object) -> object:
    """JSON's integers: 5 and 5.0 (JSON Schema counts both), never true, "5" or 5.5."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("an integer")
    return value


def _count(low: int, high: int) -> Any:
    """An integer in [low, high] (the bounds in the schema, 5.0 read as 5)."""
    return Annotated[StrictInt, Field(ge=low, le=high), BeforeValidator(_integral)]

PRESET_NAMES = tuple(sorted(PRESETS))
Preset = Literal[PRESET_NAMES]  # type: ignore[valid-type]


def _iso_text(value: object) -> object:
    """Only ISO text becomes a date: a number (or a numeric string) would otherwise be
    read as a Unix timestamp, which no client means."""
    if isinstance(value, dt.date):
        return value
    if not isinstance(value, str) or not (len(value) >= 10 and value[4] == "-"):
        raise ValueError("an ISO date (YYYY-MM-DD) or date-time")
    return value


# an ISO date (local midnight) or date-time: "now" for relative dates in the query
AsOf = Annotated[
    dt.datetime | dt.date,
    BeforeValidator(_iso_text),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "format": "date"},
                {"type": "string", "format": "date-time"},
            ],
            "description": "an ISO date (its local midnight) or date-time",
        }
    ),
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RecentMessage(_Strict):
    text: Text
    sender: Annotated[StrictStr, Field(max_length=MAX_ID)] | None = None
    time: AsOf | None = None


Recent = Annotated[
    list[Text | RecentMessage],
    Field(max_length=MAX_RECENT),
]


def _recent_chars(recent: list | None) -> list | None:
    if recent is not None:
        total = sum(len(m if isinstance(m, str) else m.text) for m in recent)
        if total > MAX_RECENT_CHARS:
            raise ValueError(f"recent: more than {MAX_RECENT_CHARS} characters of text in all")
    return recent


class SearchRequest(_Strict):
    """A search of the key owner's memory (the owner is the key's: no owner field)."""

    query: Text
    k: _count(1, MAX_K) = DEFAULT_K
    contact: Id | None = None
    conversation: Id | None = None
    as_of: AsOf | None = None
    mode: Literal["bm25", "dense", "hybrid"] | None = None
    preset: Preset | None = None
    recent: Recent | None = Field(
        None, description=f"the conversation so far; at most {MAX_RECENT_CHARS} characters"
    )

    _recent = field_validator("recent")(classmethod(lambda cls, v: _recent_chars(v)))


class ContextRequest(_Strict):
    """A context pack for an LLM: memories, then their source conversations."""

    query: Text
    budget: _count(0, MAX_BUDGET) = DEFAULT_BUDGET
    strategy: Literal[STRATEGIES] = "split"  # type: ignore[valid-type]
    contact: Id | None = None
    as_of: AsOf | None = None
    k_memories: _count(1, MAX_K_MEMORIES) = DEFAULT_K_MEMORIES
    preset: Preset | None = None
    recent: Recent | None = Field(
        None, description=f"the conversation so far; at most {MAX_RECENT_CHARS} characters"
    )
    escalate: StrictBool = False
    sources: StrictBool = False

    _recent = field_validator("recent")(classmethod(lambda cls, v: _recent_chars(v)))


class ForgetRequest(_Strict):
    """Forget a contact of the key's owner; a dry run unless ``confirm`` is true."""

    contact: Id
    confirm: StrictBool = False


# -- responses ---------------------------------------------------------------------------
class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class FieldError(BaseModel):
    loc: list[str | int] = Field(description="where: body / query / path, then the field")
    msg: str
    type: str


class Error(BaseModel):
    """Every error the server answers (4xx, 5xx): ``detail`` says what, in one line;
    ``errors`` lists the fields a 422 rejected (never the values sent)."""

    detail: str
    errors: list[FieldError] | None = None


class Highlight(_Open):
    message_id: str
    sender: str | None = None
    local_ts: str | None = None
    text: str
    source_ref: str | None = None
    score: float | None = None


class ChunkHit(_Open):
    rank: int
    chunk_id: str
    score: float
    session_id: str
    conversation_id: str
    contact_id: str
    start: str | None = None
    end: str | None = None
    speakers: list[str] = []
    highlights: list[Highlight] = []
    text: str | None = None


class SessionHit(_Open):
    rank: int
    session_id: str
    score: float
    conversation_id: str
    contact_id: str
    session_index: int | None = None
    start: str | None = None
    end: str | None = None


class TurnHit(_Open):
    rank: int
    message_id: str
    score: float
    session_id: str
    sender: str | None = None
    local_ts: str | None = None
    text: str | None = None
    source_ref: str | None = None


class SearchResponse(_Open):
    """What ``memory_pipeline.search()`` returns (``SearchResult``), plus the version."""

    query: str
    kind: str
    mode: str
    filters: list[dict[str, Any]] = []
    notes: list[str] = []
    chunks: list[ChunkHit]
    sessions: list[SessionHit] = []
    turns: list[TurnHit] = []
    confidence: float | None = None
    answerable: bool | None = None
    language: str | None = None
    index_version: str


class ContextResponse(_Open):
    """The context pack: ``text`` is what an LLM reads, with citations."""

    question: str
    budget: int
    utf16: int
    strategy: str
    text: str
    memories: list[dict[str, Any]] = []
    pieces: list[dict[str, Any]] = []
    notes: list[str] = []
    index_version: str


class Memory(_Open):
    memory_id: str
    contact_id: str | None = None
    conversation_id: str | None = None
    session_id: str | None = None
    kind: str | None = None
    text: str | None = None
    valid_from: str | None = None
    valid_to: str | None = None


class MemoriesResponse(_Open):
    memories: list[Memory]
    count: int
    index_version: str


class DossierResponse(_Open):
    contact: str
    markdown: str
    index_version: str


class ForgetResponse(_Open):
    dry_run: bool
    forgotten: bool
    summary: list[str]
    rebuilt: bool | None = None


class HealthResponse(_Open):
    status: Literal["ok"]
    index_version: str | None = None


# -- the write API (POST /v1/messages, GET /v1/messages/{id}; docs/write-api.md) ---------------
MAX_MESSAGES = 500  # messages in one batch


class MessageBatch(_Strict):
    """Messages for the key owner's memory (the owner is the key's: no owner field). Each
    message is checked on its own: a bad one is refused in ``results``, not the batch."""

    messages: Annotated[list[Any], Field(min_length=1, max_length=MAX_MESSAGES)] = Field(
        description=f"1 to {MAX_MESSAGES} messages: objects with id, conversation, sender, "
        "time (ISO 8601 with an offset), text; optional type, reply_to, attachment, contact"
    )


class MessageResult(_Open):
    """One posted message's outcome, in the batch's order."""

    index: int
    id: str | None = None
    status: Literal["accepted", "duplicate", "refused", "forgotten"]
    reason: str | None = None
    detail: str | None = None
    note: str | None = Field(None, description="why an accepted message is not searchable soon")


class RefreshRequested(_Open):
    dates: list[str] = Field(description="the days a refresh was requested for")
    ticket: int | None = None


class MessagesResponse(_Open):
    """202: every accepted message is on disk."""

    accepted: int
    duplicates: int
    refused: int
    forgotten: int
    results: list[MessageResult]
    refresh: RefreshRequested


class MessageStatusResponse(_Open):
    id: str
    status: Literal["received", "searchable", "quarantined", "forgotten"]
    message_id: str | None = None
    stage: str | None = None
    reason: str | None = None
    detail: str | None = None
    refresh: dict[str, Any] | None = Field(None, description="the refresh worker's state")


# every status a route can answer besides 200 (the error body is always Error)
COMMON_ERRORS = {
    400: "malformed request",
    401: "missing, unknown or revoked key",
    403: "the key lacks the scope",
    413: "request body too large",
    422: "invalid parameters (the fields are listed)",
    429: "over the key's rate (Retry-After says when)",
    503: "nothing published yet for this owner",
    504: "the request took too long",
}
NOT_FOUND = {404: "a contact, conversation or dossier the owner's index does not hold"}
NO_MESSAGE = {404: "no message with this id was received from this owner"}
LOCKED = {423: "another process holds the output's writer lock (Retry-After: when to retry)"}


def responses(*extra: dict[int, str]) -> dict[int | str, dict[str, Any]]:
    """The ``responses=`` of a route: the common errors and ``extra``, all as Error."""
    out: dict[int | str, dict[str, Any]] = {}
    for table in (COMMON_ERRORS, *extra):
        for code, text in table.items():
            out[code] = {"model": Error, "description": text}
    return out
