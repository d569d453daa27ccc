"""What of a chunk's ``raw_text`` BM25 indexes: the message texts, not the line headers.

A chunk renders each message as ``[YYYY-MM-DD HH:MM] sender: text`` (core/sessions/chunking).
Indexed as is, the header's tokens dominate the vocabulary (on the sample the most frequent
raw_text tokens were ``2024``, ``03`` and the owner's name): they match every chunk of a
month and carry no content, while a question's "2023" or "May" then ranks chunks by their
timestamps instead of their words (time questions have their own filter, core/retrieval).

``PREFIXES`` are the choices measured on the dev LoCoMo file (README, "BM25 text"):

- ``none``: the message text only;
- ``sender``: ``sender: text`` (the date/time stamp removed; speaker names stay matchable);
- ``full``: the rendering unchanged (what the index held before).

Measured with the leave-one-conversation-out protocol (6 conversations, 883 questions; CV
selected configuration, R@5 mean [95% CI]): ``full`` turn 0.532 [0.480, 0.587], session 0.859
[0.825, 0.888]; ``sender`` 0.530 [0.472, 0.589], 0.853 [0.820, 0.882]; ``none`` 0.512
[0.455, 0.575], 0.843 [0.801, 0.878]. The intervals overlap, and the rule is to keep the
better point estimate of the selection metric (session R@5), so ``full`` stays the default;
``sender``/``none`` are one argument away (``representation_table(..., raw_prefix=)``) for a
corpus where the stamps hurt. Re-measure when speaker matching or the time filter change.

Continuation lines (indented by two spaces) are message text and always kept. The chunk's
``raw_text`` column itself is unchanged: this is only the text handed to the tokenizer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["DEFAULT_PREFIX", "PREFIXES", "bm25_raw_text", "bm25_raw_texts"]

PREFIXES = ("none", "sender", "full")
DEFAULT_PREFIX = "full"  # measured best on dev LoCoMo (above)

# the stamp the chunk rendering writes (seconds / a T separator tolerated, as the parser does)
_STAMP = r"\[\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(?::\d{2})?\] "
_STAMP_RE = re.compile("^" + _STAMP, re.MULTILINE)
# stamp + sender up to the first ": " of the line (as core/represent/summarize parses it)
_HEADER_RE = re.compile("^" + _STAMP + r"[^\n]*?: ", re.MULTILINE)


def bm25_raw_text(raw_text: str, prefix: str = DEFAULT_PREFIX) -> str:
    """``raw_text`` with each message header reduced as ``prefix`` says (see the module)."""
    if prefix == "full":
        return raw_text
    if prefix == "sender":
        return _STAMP_RE.sub("", raw_text)
    if prefix == "none":
        return _HEADER_RE.sub("", raw_text)
    raise ValueError(f"BM25 raw_text prefix must be one of {PREFIXES}, got {prefix!r}")


def bm25_raw_texts(raw_texts: Iterable[str], prefix: str = DEFAULT_PREFIX) -> list[str]:
    """:func:`bm25_raw_text` of every text (the prefix is checked once)."""
    if prefix not in PREFIXES:
        raise ValueError(f"BM25 raw_text prefix must be one of {PREFIXES}, got {prefix!r}")
    return [bm25_raw_text(t, prefix) for t in raw_texts]
