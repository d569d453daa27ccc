"""What a context pack is measured in, and the settings every part of a pack shares.

Budgets count UTF-16 code units (what the consumers count); a cut never splits a
surrogate pair, a combining mark or a ZWJ emoji sequence."""

from __future__ import annotations

import unicodedata
from dataclasses import replace

from memory_pipeline.core.retrieval.config import PRESETS

MEMORY_TIMELINE_FILE = "memory_timeline.parquet"  # inside the published index version
# recall(): memory evidence is strong when some lexically matching memory holds at least a
# third of the question's content words (stopwords gone, names left out: every memory about
# Maria matches "Maria"). "Where did Maria get a job?" -> {get, job}: "job" matches, strong;
# "What is the name of Maria's cat?" -> {name, cat}: nothing matches, weak. Questions word
# things differently from memories (company/job), hence a third rather than a half.
WEAK_BELOW = 0.33
SEP = "\n\n"  # between pieces
MIN_SOURCE_TEXT = 40  # UTF-16 units of text below which a source piece is not worth adding
SEARCH_K = 20  # chunks asked from the searcher for the "split" half and for seeding
# How packs rank chunks (the "split" half, seeding, each memory's session score): the
# default search; highlights are not shown in a pack, so none are computed.
PACK_SEARCH = replace(PRESETS["default"], highlights=0)

_ZWJ = "\u200d"


# ---------------------------------------------------------------------------------------
# UTF-16


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units (what the budget counts): astral characters count 2."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _units(ch: str) -> int:
    return 2 if ord(ch) > 0xFFFF else 1


def _joins_previous(ch: str) -> bool:
    """True for a character that belongs to the grapheme before it (cutting before it
    would orphan a skin tone, a variation selector, a combining mark or a ZWJ member)."""
    cp = ord(ch)
    return (
        ch == _ZWJ
        or 0xFE00 <= cp <= 0xFE0F  # variation selectors
        or 0x1F3FB <= cp <= 0x1F3FF  # skin tones
        or 0xE0020 <= cp <= 0xE007F  # tag characters (subdivision flags)
        or 0xDC00 <= cp <= 0xDFFF  # a low surrogate kept as a code point (surrogatepass)
        or unicodedata.category(ch) in ("Mn", "Me", "Mc")
    )


def _safe_cut(text: str, i: int) -> int:
    """Move a cut position left until it falls between two grapheme clusters."""
    while 0 < i < len(text) and (_joins_previous(text[i]) or text[i - 1] == _ZWJ):
        i -= 1
    # regional indicators pair up into flags: never keep an odd one at the end
    run = 0
    while run < i and 0x1F1E6 <= ord(text[i - 1 - run]) <= 0x1F1FF:
        run += 1
    if run % 2 and i < len(text) and 0x1F1E6 <= ord(text[i]) <= 0x1F1FF:
        i -= 1
    return i


def truncate_utf16(text: str, limit: int, marker: str = "") -> str:
    """``text`` cut to at most ``limit`` UTF-16 units (``marker`` included when cut).

    Never splits a surrogate pair or an emoji sequence (skin tone, ZWJ family, flag), and
    cuts at the last line break when that keeps at least half of what fits, so a message
    is not left half-shown when a whole line can go instead.
    """
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    if utf16_len(text) <= limit:
        return text
    room = limit - utf16_len(marker)
    if room <= 0:
        return ""
    used, i = 0, 0
    for ch in text:
        w = _units(ch)
        if used + w > room:
            break
        used += w
        i += 1
    i = _safe_cut(text, i)
    newline = text.rfind("\n", 0, i)
    if newline > 0 and newline >= i // 2:
        i = newline
    return text[:i] + marker
