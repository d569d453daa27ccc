"""Names and identities of the chat-export readers: senders, chats, owners, phone numbers.

Split from :mod:`~memory_pipeline.core.ingest.sources.exports` (which re-exports every name
here) so the shared helpers stay readable; these need no file or decoding helper, so they
sit below it and every reader gets the same identity rules.
"""

from __future__ import annotations

import functools
import re
import unicodedata

from memory_pipeline.core.ingest.sources.base import SourceSpec

# Bidi controls, zero-width characters, the BOM and the soft hyphen: invisible in the app,
# they make one contact two senders ("\u202a+81 90…\u202c" vs "+81 90…").
_INVISIBLE = re.compile(
    "[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]"
)
_SPACES = re.compile(r"[\s\u00a0\u202f\u2007\u2009]+")
_UNSAFE_ID = re.compile(r"[^\w\-]+")


@functools.lru_cache(maxsize=8192)
def clean_name(name: str) -> str:
    """A sender or chat name as one identity: no bidi/zero-width marks, NFC, spaces folded.
    (Cached: a chat has few senders and each message names one.)"""
    s = _INVISIBLE.sub("", name)
    s = _SPACES.sub(" ", unicodedata.normalize("NFC", s)).strip()
    return s


def clean_text(text: str) -> str:
    """Message text: NFC, CRLF -> LF, bidi marks removed (they differ between phones)."""
    t = unicodedata.normalize("NFC", text.replace("\r\n", "\n"))
    return _INVISIBLE.sub("", t) if _INVISIBLE.search(t) else t


def _digits(s: str) -> str:
    return re.sub(r"\D", "", s)


class Owners:
    """Who "me" is in a source: ``owner`` plus the ``owner_aliases`` option ("You", "あなた",
    a phone number). Phone numbers compare by their digits, so "+81 90-1234-5678" matches
    "+819012345678"."""

    def __init__(self, spec: SourceSpec) -> None:
        names = [spec.owner] if spec.owner else []
        aliases = spec.options.get("owner_aliases", [])
        if isinstance(aliases, str):
            aliases = [aliases]
        names += [a for a in aliases if isinstance(a, str)]
        self.names = frozenset(clean_name(n).casefold() for n in names if n.strip())
        self.phones = frozenset(
            _digits(n) for n in names if len(_digits(n)) >= 7 and not re.search(r"[^\d\s+\-().]", n)
        )

        self._seen: dict[str, bool] = {}

    def __contains__(self, sender: str) -> bool:
        known = self._seen.get(sender)
        if known is None:
            known = self._match(sender)
            if len(self._seen) > 65536:
                self._seen.clear()
            self._seen[sender] = known
        return known

    def _match(self, sender: str) -> bool:
        if sender.casefold() in self.names:
            return True
        return bool(self.phones) and len(d := _digits(sender)) >= 7 and d in self.phones


def safe_id(name: str, default: str = "conversation") -> str:
    """A name made into a conversation id: NFKC, lowercase, other runs -> ``_``."""
    s = unicodedata.normalize("NFKC", clean_name(name))
    return _UNSAFE_ID.sub("_", s).strip("_").lower() or default


def conversation_option(spec: SourceSpec) -> str | None:
    """The ``conversation`` option: one chat id for every file of the source (for exports
    whose names differ between devices and UI languages)."""
    value = spec.options.get("conversation")
    return safe_id(value) if isinstance(value, str) and value.strip() else None


@functools.lru_cache(maxsize=8192)
def phone_key(address: str) -> str:
    """A phone number as one key whatever its format: the last 10 digits ("+81 90-1234-5678"
    and "090-1234-5678" both give ``9012345678``); an address with letters (a short code
    name, an e-mail) is its :func:`safe_id`. A heuristic (libphonenumber compares fewer
    digits): two numbers that share their last 10 digits are taken as one."""
    s = clean_name(address)
    if re.search(r"[^\d\s+\-().]", s):
        return safe_id(s, "unknown")
    d = _digits(s)
    return d[-10:] if d else "unknown"
