"""The MCP server: the memory's search, context, memories and dossier as MCP tools, and
``remember`` (one message into the owner's inbox, as ``POST /v1/messages`` stores it).

Built with the official SDK (``mcp.server.mcpserver.MCPServer``). Over streamable HTTP it is
mounted at ``/mcp`` of the HTTP app, behind the same bearer keys (the owner comes from the
key, put in the request's ASGI scope by the app); over stdio (``memory-pipeline mcp``) the
process serves the one owner it was started for. (This module imports the SDK: only a
server imports it.)

The tools are the HTTP routes' other door: the same operations, the same parameters,
bounds and defaults (``models``), and the same gate (thread limit, timeout, CPU charged to
the key). Their answers are sized for a model's context window: by default a compact text
of each hit (date, speaker, citation, the matching lines), the full JSON with
``format="json"``. A failed call answers the same error body as HTTP (``{"status",
"detail"}``) and logs only the tool and the status: never an argument, never a traceback.
Each tool needs its HTTP route's scope: ``remember`` a write (or admin) key, the others a
read (or admin) key; a key without it gets 403.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, TextContent
from pydantic import Field

from memory_pipeline.core.common.lock import LockBusy
from memory_pipeline.core.common.records import MAX_MESSAGE_CHARS
from memory_pipeline.core.context.packs import STRATEGIES
from memory_pipeline.core.retrieval.searcher import IndexNotBuilt
from memory_pipeline.service import DEFAULT_THREADS
from memory_pipeline.service.guards import Gate, Overloaded
from memory_pipeline.service.loader import OwnerUnavailable
from memory_pipeline.service.models import (
    DEFAULT_BUDGET,
    DEFAULT_K,
    DEFAULT_K_MEMORIES,
    DEFAULT_LIMIT,
    MAX_BUDGET,
    MAX_ID,
    MAX_K,
    MAX_K_MEMORIES,
    MAX_LIMIT,
    MAX_QUERY,
    MAX_RECENT,
    MAX_RECENT_CHARS,
    Preset,
    RecentMessage,
)
from memory_pipeline.service.models import AsOf as ISODate
from memory_pipeline.service.operations import MemoryService

log = logging.getLogger("memory_pipeline.service.mcp")

INSTRUCTIONS = (
    "Long-term memory of the user's own chat history (their messages with their contacts, "
    "with dates). Use `context` to answer a question about the past with sources, `search` "
    "to find the conversations where something was said, `memories` for remembered facts "
    "(plans, preferences, events) about a contact, and `dossier` for a summary of one "
    "contact. Every answer cites the conversation it comes from. Use `remember` to keep "
    "what the user tells you (or what you told them) in that memory."
)

Query = Annotated[str, Field(min_length=1, max_length=MAX_QUERY, pattern=r"\S")]
Id = Annotated[str, Field(min_length=1, max_length=MAX_ID)]
AsOf = Annotated[ISODate | None, Field(description="ISO date or date-time: 'now' for the query")]
Recent = Annotated[
    list[Query | RecentMessage] | None,
    Field(
        max_length=MAX_RECENT,
        description=f"the conversation so far (at most {MAX_RECENT_CHARS} characters in all)",
    ),
]
Format = Literal["text", "json"]
Strategy = Literal[STRATEGIES]  # type: ignore[valid-type]
HIGHLIGHTS_PER_HIT = 3  # lines of a hit in the compact text
LINE_CHARS = 240  # characters of one line's text in the compact text
ID_CHARS = 64  # characters of an id, a sender or a citation there (k = 5: < 2,000 tokens)


class ScopeDenied(PermissionError):
    """The key lacks the tool's scope (403, as the HTTP route answers)."""


def _owner(ctx: Any, fixed: str | None, scope: str = "read") -> str:
    """The owner of this call: the stdio server's, else the one the HTTP app took from the
    key (never an argument of the tool), when the key allows ``scope`` (a write key posts
    messages and reads nothing; a read key writes nothing)."""
    if fixed is not None:
        return fixed
    request = getattr(getattr(ctx, "request_context", None), "request", None)
    owner = request.scope.get("memory_pipeline.owner") if request is not None else None
    if not owner:
        raise PermissionError("no key: call the MCP endpoint with Authorization: Bearer KEY")
    record = request.scope.get("memory_pipeline.key")  # the KeyRecord RateGate verified
    if record is not None and not record.allows(scope):
        raise ScopeDenied(f"this key lacks the {scope!r} scope")
    return owner


def _key_id(ctx: Any) -> str | None:
    """The key the HTTP app verified (its rate bucket pays for the call); None over stdio."""
    try:
        request = getattr(getattr(ctx, "request_context", None), "request", None)
    except ValueError:  # a call outside a request (the SDK's direct call_tool)
        return None
    return request.scope.get("memory_pipeline.key_id") if request is not None else None


def _status(exc: BaseException) -> tuple[int, str]:
    """The HTTP status and detail the same failure gets from the HTTP routes."""
    if isinstance(exc, Overloaded):
        return 504, "the request took too long"
    if isinstance(exc, IndexNotBuilt):
        return 503, "no index published yet"
    if isinstance(exc, OwnerUnavailable):
        return 503, "no memory published for this key's owner"
    if isinstance(exc, ScopeDenied):
        return 403, str(exc)
    if isinstance(exc, PermissionError):
        return 401, str(exc)
    if isinstance(exc, LookupError):
        return 404, str(exc).strip("'\"")
    if isinstance(exc, LockBusy):
        return 423, "the output is being written by another process"
    if isinstance(exc, ValueError):
        return 422, str(exc)
    return 500, "internal error"


def _fail(tool: str, exc: BaseException) -> CallToolResult:
    code, detail = _status(exc)
    # the tool and the status only: the detail may quote the caller's contact or query
    log.info("tool %s failed: %s %s", tool, code, type(exc).__name__)
    body = json.dumps({"status": code, "detail": detail}, ensure_ascii=False)
    return CallToolResult(content=[TextContent(type="text", text=body)], is_error=True)


def _ok(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)])


def _iso(value: Any) -> str:
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def _dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, default=_iso)


def _day(value: Any) -> str:
    return str(value or "")[:10]


def _line(text: Any, limit: int = LINE_CHARS) -> str:
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _id(value: Any) -> str:
    return _line(value, ID_CHARS)


def compact_search(result: dict) -> str:
    """A search result as a model reads it: one block per hit (rank, dates, contact,
    conversation), then its best lines with sender, time and citation."""
    chunks = result.get("chunks") or []
    if not chunks:
        return "(nothing in the memory matches this query)"
    blocks = []
    for hit in chunks:
        span = _day(hit.get("start"))
        if _day(hit.get("end")) not in ("", span):
            span += f"..{_day(hit.get('end'))}"
        head = (
            f"[{hit.get('rank')}] {span} with {_id(hit.get('contact_id'))} "
            f"(conversation {_id(hit.get('conversation_id'))}, "
            f"session {_id(hit.get('session_id'))})"
        )
        lines = [head]
        for h in (hit.get("highlights") or [])[:HIGHLIGHTS_PER_HIT]:
            when = str(h.get("local_ts") or "")[:16].replace("T", " ")
            cite = f" [{_id(h['source_ref'])}]" if h.get("source_ref") else ""
            who = _id(h.get("sender") or "?")
            lines.append(f"  {when} {who}: {_line(h.get('text'))}{cite}")
        blocks.append("\n".join(lines))
    notes = "answerable" if result.get("answerable") else "may not hold the answer"
    return "\n\n".join(blocks) + f"\n\n(index {result.get('index_version')}; {notes})"


def compact_memories(result: dict) -> str:
    rows = result.get("memories") or []
    if not rows:
        return "(no remembered facts match)"
    lines = []
    for m in rows:
        since = _day(m.get("valid_from") or m.get("local_date"))
        lines.append(
            f"- {since} {_id(m.get('contact_id') or '')} [{_id(m.get('kind') or 'fact')}] "
            f"{_line(m.get('text'))} (session {_id(m.get('session_id'))})"
        )
    return "\n".join(lines) + f"\n(index {result.get('index_version')})"


def _recent(value: list | None) -> list | None:
    if value is None:
        return None
    total = sum(len(m if isinstance(m, str) else m.text) for m in value)
    if total > MAX_RECENT_CHARS:
        raise ValueError(f"recent: more than {MAX_RECENT_CHARS} characters of text in all")
    return [m if isinstance(m, str) else m.model_dump(exclude_none=True) for m in value]


def compact_remember(result: dict) -> str:
    """``remember``'s answer in one line: the message's outcome and when it is searchable."""
    row = result["results"][0]
    line = f"{row['status']}: message {_id(row.get('id'))}"
    if row.get("reason"):
        line += f" ({row['reason']}: {_line(row.get('detail'))})"
    elif row.get("note"):
        line += f" ({_line(row['note'])})"
    dates = result.get("refresh", {}).get("dates") or []
    if dates:
        line += f"; searchable after the refresh of {', '.join(dates)} (seconds)"
    return line


def build_mcp(
    service: MemoryService,
    owner: str | None = None,
    gate: Gate | None = None,
    messages: Any = None,
) -> Any:
    """The MCP server over ``service``; ``owner`` fixed for a stdio server, None over HTTP
    (each request's key decides). ``gate``: the HTTP app's (shared limits); a stdio server
    gets one of its own with the same defaults. ``messages``: the HTTP app's inbox
    operations (one refresher for both doors); a stdio server makes its own on the first
    ``remember``."""
    gate = gate or Gate(DEFAULT_THREADS, 30.0, None, 0.0)
    mcp = MCPServer("memory-pipeline", instructions=INSTRUCTIONS, log_level="WARNING")
    inbox: dict[str, Any] = {"messages": messages}

    def _messages() -> Any:
        if inbox["messages"] is None:
            from memory_pipeline.service.messages import messages_for

            inbox["messages"] = messages_for(service)
        return inbox["messages"]

    async def call(ctx: Any, work: Callable[[str], Any], scope: str = "read") -> CallToolResult:
        tool = work.__qualname__.split(".<locals>.")[-2]  # the tool whose work this is
        try:
            who = _owner(ctx, owner, scope)
            return _ok(await gate.run(lambda: work(who), key_id=_key_id(ctx)))
        except Exception as exc:  # every failure answers, none escapes to the SDK's log
            return _fail(tool, exc)

    @mcp.tool()
    async def search(
        query: Query,
        ctx: Context,
        k: Annotated[int, Field(ge=1, le=MAX_K)] = DEFAULT_K,
        contact: Id | None = None,
        conversation: Id | None = None,
        as_of: AsOf = None,
        mode: Literal["bm25", "dense", "hybrid"] | None = None,
        preset: Preset | None = None,
        recent: Recent = None,
        format: Format = "text",
    ) -> CallToolResult:
        """Find the passages of the user's past conversations that match a query (words in
        any language, or time expressions like "last Tuesday"). Returns the hits, each with
        its dates, contact, conversation and best matching lines (sender, time, text,
        citation). Use it to locate where something was said; use `context` instead to
        answer a question. `contact` / `conversation` limit to one contact or conversation
        id; `as_of` (ISO date) is "now" for relative dates; `recent` is the conversation so
        far (resolves "it", "that trip"); `format="json"` returns the full result."""

        def work(who: str) -> str:
            result = service.search(
                who,
                query,
                k,
                contact=contact,
                conversation=conversation,
                as_of=as_of,
                mode=mode,
                preset=preset,
                recent=_recent(recent),
            )
            return _dumps(result) if format == "json" else compact_search(result)

        return await call(ctx, work)

    @mcp.tool()
    async def context(
        question: Query,
        ctx: Context,
        budget: Annotated[int, Field(ge=0, le=MAX_BUDGET)] = DEFAULT_BUDGET,
        strategy: Strategy = "split",
        contact: Id | None = None,
        as_of: AsOf = None,
        k_memories: Annotated[int, Field(ge=1, le=MAX_K_MEMORIES)] = DEFAULT_K_MEMORIES,
        preset: Preset | None = None,
        recent: Recent = None,
        escalate: bool = False,
        sources: bool = False,
        format: Format = "text",
    ) -> CallToolResult:
        """The best first call to answer a question about the user's past ("when is the
        trip with Maria?", "what did Ken say about his new job?"): remembered facts first,
        then the source conversations they come from, as text within `budget` UTF-16 units,
        each piece with its citation. Answer from this text and cite it; if it does not
        hold the answer, say the memory does not know. `format="json"` returns the pack."""

        def work(who: str) -> str:
            pack = service.context(
                who,
                question,
                budget,
                strategy=strategy,
                contact=contact,
                as_of=as_of,
                k_memories=k_memories,
                preset=preset,
                recent=_recent(recent),
                escalate=escalate,
                sources=sources,
            )
            if format == "json":
                return _dumps(pack)
            return pack["text"] or "(nothing in the memory matches this question)"

        return await call(ctx, work)

    @mcp.tool()
    async def memories(
        ctx: Context,
        query: Query | None = None,
        contact: Id | None = None,
        kind: Annotated[str | None, Field(min_length=1, max_length=64)] = None,
        as_of: AsOf = None,
        limit: Annotated[int, Field(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
        format: Format = "text",
    ) -> CallToolResult:
        """Remembered facts extracted from the conversations (plans, events, preferences,
        personal details), each with its validity dates and source session. With `query`:
        the facts most relevant to it; without: the newest. Filter by `contact` id, by
        `kind`, or by what was true at `as_of` (ISO date)."""

        def work(who: str) -> str:
            result = service.memories(
                who, query=query, contact=contact, kind=kind, as_of=as_of, limit=limit
            )
            return _dumps(result) if format == "json" else compact_memories(result)

        return await call(ctx, work)

    @mcp.tool()
    async def dossier(contact: Id, ctx: Context) -> CallToolResult:
        """A one-page Markdown profile of one contact: who they are, open plans, recent
        timeline and how you usually talk, with citations. Use it before writing to or
        about that contact. `contact` is the contact id as `search` results show it."""
        def work(who: str) -> str:
            return service.dossier(who, contact)["markdown"]

        return await call(ctx, work)

    @mcp.tool()
    async def remember(
        text: Annotated[str, Field(min_length=1, max_length=MAX_MESSAGE_CHARS)],
        ctx: Context,
        sender: Literal["person", "assistant"] = "person",
        time: Annotated[str | None, Field(max_length=64)] = None,
        id: Annotated[str | None, Field(min_length=1, max_length=MAX_ID)] = None,
        format: Format = "text",
    ) -> CallToolResult:
        """Store what was said in this conversation in the user's long-term memory, so
        `search` and `context` find it later (within seconds). `sender` is who said it:
        "person" (the user) or "assistant" (you). `time`: ISO 8601 with an offset (default:
        now). `id`: your own id for the message; a retry with the same id stores nothing
        twice (default: derived from sender, time and text). Returns the message's status:
        accepted, duplicate, refused (with the reason) or forgotten; `format="json"` the
        full answer of `POST /v1/messages`."""

        def work(who: str) -> str:
            result = _remember(_messages(), who, text, sender, time, id)
            return _dumps(result) if format == "json" else compact_remember(result)

        return await call(ctx, work, "write")

    return mcp


ASSISTANT = "assistant"  # the conversation (and sender name) of what an assistant remembers


def _remember(
    messages: Any, who: str, text: str, sender: str, time: str | None, cid: str | None
) -> dict:
    """One message into ``who``'s inbox, in the assistant's conversation."""
    import datetime as dt
    import hashlib

    name = messages.owner(who).cfg.owner if sender == "person" else ASSISTANT.title()
    when = time or dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    key = "\x1f".join((sender, when, text)).encode("utf-8", "surrogatepass")
    cid = cid or "remember-" + hashlib.blake2b(key, digest_size=10).hexdigest()
    message = {"id": cid, "conversation": ASSISTANT, "sender": name, "time": when}
    return messages.accept(who, [message | {"text": text}])


def run_stdio(service: MemoryService, owner: str) -> None:
    """Serve MCP over stdin/stdout for one owner (a desktop assistant starts this)."""
    from memory_pipeline.service.guards import one_blas_thread

    one_blas_thread()
    build_mcp(service, owner).run("stdio")
