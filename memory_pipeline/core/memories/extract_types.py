"""What memory extraction passes around: the kinds, reject reasons, a session's messages,
a candidate memory and the extractor protocol.

Kept apart from the rules so that an extractor of its own (the LLM one in ``llm``) and the
per-language rule modules share these types without importing each other.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Protocol

KINDS = ("fact", "preference", "plan", "event", "relationship", "possession")
RULES_METHOD = "rules"
MAX_TEXT_CHARS = 300

# Reject reasons (MEMORY_REJECTS.reason).
R_NO_SOURCE = "no_source"
R_UNKNOWN_MESSAGE = "unknown_message"
R_OUTSIDE_SESSION = "message_outside_session"
R_EMPTY_TEXT = "empty_text"
R_BAD_KIND = "bad_kind"
R_EXTRACTOR_ERROR = "extractor_error"


# ----------------------------------------------------------------------------- data types


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One message of a session as extractors see it."""

    message_id: str
    sender: str
    is_owner: bool
    ts: dt.datetime  # UTC
    local_ts: dt.datetime  # naive local wall time: relative dates resolve against it
    type: str
    text: str


@dataclass(frozen=True, slots=True)
class SessionMessages:
    """A session with its messages in session order: the unit every extractor works on."""

    session_id: str
    conversation_id: str
    contact_id: str
    local_date: dt.date
    messages: tuple[ChatMessage, ...]


@dataclass(slots=True)
class MemoryCandidate:
    """What an extractor proposes; it becomes a memory only if its sources validate.

    ``message_ids`` cite the stating message (and e.g. the question it answers).
    ``subject_is_owner=None`` lets ``extract_memories`` decide from the session's senders.
    """

    subject: str
    kind: str
    attribute: str
    value: str
    text: str
    message_ids: tuple[str, ...]
    event_date: dt.date | None = None
    lang: str = ""  # "" = detected from the text
    subject_is_owner: bool | None = None
    confidence: float = 0.5


@dataclass(slots=True)
class SessionExtraction:
    """An extractor's answer for one session; ``error`` when it could not extract."""

    candidates: list[MemoryCandidate] = field(default_factory=list)
    error: str | None = None


class MemoryExtractor(Protocol):
    """Anything that proposes memory candidates for one session (rules, an LLM)."""

    method: str

    def extract_session(self, session: SessionMessages) -> SessionExtraction: ...


@dataclass(slots=True)
class _Hit:
    kind: str
    attribute: str
    value: str
    confidence: float
    date_direction: int = 0  # 0: no date; +1 plan-like; -1 event-like
    subject: str | None = None  # None = the sender
    require_date: bool = False
    future_only: bool = False
    general: bool = False  # the general statement rule: merged per message
    text: str = ""  # the statement the rule wrote itself (about another person), else ""
