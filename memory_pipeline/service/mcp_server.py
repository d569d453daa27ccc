"""The MCP server: the memory's search, context, memories and dossier as MCP tools.

Built with the official SDK (``mcp.server.mcpserver.MCPServer``). Over streamable HTTP it is
mounted at ``/mcp`` of the HTTP app, behind the same bearer keys (the owner comes from the
key, put in the request's ASGI scope by the app); over stdio (``memory-pipeline mcp``) the
process serves the one owner it was started for. (This module imports the SDK: only a
server imports it.) The tools call the same operations as
the HTTP endpoints.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from memory_pipeline.service.operations import MemoryService

INSTRUCTIONS = (
    "Long-term memory of the user's own chat history (their messages with their contacts, "
    "with dates). Use `context` to answer a question about the past with sources, `search` "
    "to find the conversations where something was said, `memories` for remembered facts "
    "(plans, preferences, events) about a contact, and `dossier` for a summary of one "
    "contact. Every answer cites the conversation it comes from. Use `remember` to keep "
    "what the user tells you (or what you told them) in that memory."
)


def _owner(ctx: Any, fixed: str | None, scope: str = "read") -> str:
    """The owner of this call: the stdio server's, else the one the HTTP app took from the
    key (never an argument of the tool), when the key's scope allows ``scope`` (a write key
    posts messages and reads nothing)."""
    if fixed is not None:
        return fixed
    request = getattr(getattr(ctx, "request_context", None), "request", None)
    owner = request.scope.get("memory_pipeline.owner") if request is not None else None
    if not owner:
        raise PermissionError("no key: call the MCP endpoint with Authorization: Bearer KEY")
    held = request.scope.get("memory_pipeline.key_scope")
    if held is not None and held != "admin" and held != scope:
        raise ToolError(f"this key lacks the {scope!r} scope")  # the model reads it
    return owner


def build_mcp(service: MemoryService, owner: str | None = None) -> Any:
    """The MCP server over ``service``; ``owner`` fixed for a stdio server, None over HTTP
    (each request's key decides)."""
    mcp = MCPServer("memory-pipeline", instructions=INSTRUCTIONS, log_level="WARNING")

    @mcp.tool()
    def search(
        query: Annotated[str, Field(min_length=1, max_length=2000)],
        ctx: Context,
        k: Annotated[int, Field(ge=1, le=50)] = 5,
        contact: Annotated[str | None, Field(max_length=256)] = None,
        as_of: Annotated[str | None, Field(max_length=40)] = None,
    ) -> dict[str, Any]:
        """Find the passages of the user's past conversations that match a query (words in
        any language, or time expressions like "last Tuesday"). Returns ranked chunks, each
        with its contact, dates, the best matching messages (sender, time, text) and a
        source reference. Use it to locate where something was said; use `context` instead
        to answer a question. `contact` limits to one contact id; `as_of` (ISO date) is
        "now" for relative dates."""
        return service.search(_owner(ctx, owner), query, k, contact=contact, as_of=as_of)

    @mcp.tool()
    def context(
        question: Annotated[str, Field(min_length=1, max_length=2000)],
        ctx: Context,
        budget: Annotated[int, Field(ge=200, le=100_000)] = 8_000,
        contact: Annotated[str | None, Field(max_length=256)] = None,
        as_of: Annotated[str | None, Field(max_length=40)] = None,
    ) -> str:
        """The best first call to answer a question about the user's past ("when is the
        trip with Maria?", "what did Ken say about his new job?"): remembered facts first,
        then the source conversations they come from, as text within `budget` characters,
        each piece with its citation. Answer from this text and cite it; if it does not
        hold the answer, say the memory does not know."""
        pack = service.context(_owner(ctx, owner), question, budget, contact=contact, as_of=as_of)
        return pack["text"] or "(nothing in the memory matches this question)"

    @mcp.tool()
    def memories(
        ctx: Context,
        query: Annotated[str | None, Field(max_length=2000)] = None,
        contact: Annotated[str | None, Field(max_length=256)] = None,
        kind: Annotated[str | None, Field(max_length=64)] = None,
        as_of: Annotated[str | None, Field(max_length=40)] = None,
        limit: Annotated[int, Field(ge=1, le=100)] = 20,
    ) -> dict[str, Any]:
        """Remembered facts extracted from the conversations (plans, events, preferences,
        personal details), each with its validity dates and source session. With `query`:
        the facts most relevant to it; without: the newest. Filter by `contact` id, by
        `kind`, or by what was true at `as_of` (ISO date)."""
        return service.memories(
            _owner(ctx, owner),
            query=query,
            contact=contact,
            kind=kind,
            as_of=as_of,
            limit=limit,
        )

    @mcp.tool()
    def dossier(contact: Annotated[str, Field(min_length=1, max_length=256)], ctx: Context) -> str:
        """A one-page Markdown profile of one contact: who they are, open plans, recent
        timeline and how you usually talk, with citations. Use it before writing to or
        about that contact. `contact` is the contact id as `search` results show it."""
        return service.dossier(_owner(ctx, owner), contact)["markdown"]

    _add_remember(mcp, service, owner)
    return mcp


ASSISTANT = "assistant"  # the conversation (and sender name) of what an assistant remembers


def _add_remember(mcp: Any, service: MemoryService, owner: str | None) -> None:
    """The ``remember`` tool: one message into the owner's inbox, as ``POST /v1/messages``
    stores it (service/messages.py), in the assistant's conversation."""
    import datetime as dt
    import hashlib

    from memory_pipeline.service.messages import messages_for

    @mcp.tool()
    def remember(
        text: Annotated[str, Field(min_length=1, max_length=20_000)],
        ctx: Context,
        sender: Literal["person", "assistant"] = "person",
        time: Annotated[str | None, Field(max_length=64)] = None,
        id: Annotated[str | None, Field(min_length=1, max_length=256)] = None,
    ) -> dict[str, Any]:
        """Store what was said in this conversation in the user's long-term memory, so
        `search` and `context` find it later (within seconds). `sender` is who said it:
        "person" (the user) or "assistant" (you). `time`: ISO 8601 with an offset (default:
        now). `id`: your own id for the message; a retry with the same id stores nothing
        twice (default: derived from sender, time and text). Returns the message's status:
        accepted, duplicate, refused (with the reason) or forgotten."""
        who = _owner(ctx, owner, "write")
        messages = messages_for(service)
        name = messages.owner(who).cfg.owner if sender == "person" else ASSISTANT.title()
        when = time or dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        key = "\x1f".join((sender, when, text)).encode("utf-8", "surrogatepass")
        cid = id or "remember-" + hashlib.blake2b(key, digest_size=10).hexdigest()
        message = {"id": cid, "conversation": ASSISTANT, "sender": name, "time": when}
        result = messages.accept(who, [message | {"text": text}])
        return result["results"][0] | {"refresh": result["refresh"]}


def run_stdio(service: MemoryService, owner: str) -> None:
    """Serve MCP over stdin/stdout for one owner (a desktop assistant starts this)."""
    build_mcp(service, owner).run("stdio")
