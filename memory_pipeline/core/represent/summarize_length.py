"""Summary length: measuring a summary against its target and trimming text to fit.

Japanese is measured in characters and English in words, on the whole summary (speaker
prefixes and newlines included); a message that does not fit is cut at a sentence, word or
character boundary and ends with an ellipsis, so the upper bound is never exceeded.
"""

from __future__ import annotations

from collections.abc import Sequence

from memory_pipeline.core.represent.summarize_lexicon import _EN_SENTENCE_END, _JA_SENTENCE_END
from memory_pipeline.core.represent.summarize_lines import (
    ELLIPSIS,
    SEPARATOR,
    SUMMARY_TARGETS,
    Line,
    parse_raw_text,
)
from memory_pipeline.core.represent.summarize_scoring import _candidates, _clean, _render

# --------------------------------------------------------------------------- lengths


def _target_key(lang: str) -> str:
    return "ja" if lang == "ja" else "en_words"


def summary_length(summary: str, lang: str) -> int:
    """Length in the target's unit: characters for Japanese, whitespace words otherwise."""
    return len(summary) if lang == "ja" else len(summary.split())


def source_length(source: str | Sequence[Line], lang: str) -> int:
    """Length (target unit) of everything a summary could pick: all text messages rendered.

    ``source`` is a chunk's ``raw_text`` or its parsed lines. This, not ``len(raw_text)``
    (which counts timestamps, stickers and photos), is the ``source_len`` that
    ``within_target`` compares with the lower bound.
    """
    lines = parse_raw_text(source) if isinstance(source, str) else source
    lang = "ja" if lang == "ja" else "en"
    total = 0
    n = 0
    for m in _candidates(lines):
        total += summary_length(_render(m.sender, m.text), lang)
        n += 1
    if lang == "ja" and n > 1:
        total += (n - 1) * len(SEPARATOR)
    return total


def within_target(summary: str, lang: str, source_len: int) -> bool:
    """True when the summary is inside ``SUMMARY_TARGETS`` for ``lang``, or shorter than the
    lower bound only because the source itself (``source_length``) was shorter than it."""
    lo, hi = SUMMARY_TARGETS[_target_key(lang)]
    n = summary_length(summary, lang)
    if n > hi:
        return False
    return n >= lo or source_len < lo


# --------------------------------------------------------------------------- truncation


def _truncate_ja(text: str, budget: int, need: int) -> str:
    """``text`` in at most ``budget`` chars (ellipsis included), preferably at a sentence end."""
    if len(text) <= budget:
        return text
    if budget <= 1:
        return ELLIPSIS[:budget]
    cut = text[: budget - 1]
    floor = max(need - 1, budget // 2)
    best = max(cut.rfind(c) for c in _JA_SENTENCE_END)
    if best + 1 >= floor:
        cut = cut[: best + 1]
    else:
        space = cut.rfind(" ")  # latin words inside Japanese text
        if space + 1 >= max(floor, len(cut) - 12):
            cut = cut[:space]
    return cut.rstrip() + ELLIPSIS


def _truncate_en(text: str, budget: int, need: int) -> str:
    """``text`` in at most ``budget`` words (ellipsis glued to the last), at a sentence end
    when one leaves at least ``need`` words."""
    words = text.split()
    if len(words) <= budget:
        return text
    if budget <= 0:
        return ""
    cut = words[:budget]
    floor = max(need, budget // 2, 1)
    for i in range(len(cut) - 1, floor - 2, -1):
        if cut[i].endswith(_EN_SENTENCE_END):
            cut = cut[: i + 1]
            break
    last = cut[-1].rstrip(",;:-–—/")
    cut[-1] = (last or cut[-1]) + ELLIPSIS
    return " ".join(cut)


def _truncate(text: str, budget: int, need: int, lang: str) -> str:
    return _truncate_ja(text, budget, need) if lang == "ja" else _truncate_en(text, budget, need)


def trim_text(text: str, max_chars: int) -> str:
    """Whitespace-collapsed ``text`` in at most ``max_chars`` characters, cut at a word
    boundary when one is near, ending with "…" when cut (used for bullets)."""
    text = _clean(text)
    if len(text) <= max_chars:
        return text
    cut = text[: max(max_chars - 1, 0)]
    space = cut.rfind(" ")
    if space >= max_chars * 0.6:
        cut = cut[:space]
    return cut.rstrip(" ,;:") + ELLIPSIS
