"""Stable, content-derived identifiers.

Ids are hashes of what identifies a record (for a message its content plus its occurrence
index among identical messages of its file; see ``core/ingest/normalize.message_id``), never
of run-time state, so any build order, and any re-export of the same chat, yields the same ids.
"""

from __future__ import annotations

import hashlib

_SEP = "\x1f"


def stable_id(prefix: str, *parts: object, nbytes: int = 10) -> str:
    """``prefix`` + hex blake2b of the parts joined by a unit separator.

    ``surrogatepass``: a lone surrogate (from a ``\\ud800`` JSON escape or an undecodable
    file name) must not crash an id; valid text encodes exactly as before.
    """
    key = _SEP.join(map(str, parts)).encode("utf-8", "surrogatepass")
    h = hashlib.blake2b(key, digest_size=nbytes)
    return f"{prefix}_{h.hexdigest()}"


def text_hash(text: str) -> str:
    """Hash of a text, used as a cache key for expensive derived work."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
