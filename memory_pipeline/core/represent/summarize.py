"""Offline, deterministic EXTRACTIVE summaries, titles and bullets of chat chunks and sessions.

Nothing here writes new sentences: every summary line and every bullet is a message of the
chat (possibly trimmed), prefixed by its speaker, so a summary can always be traced back to
the raw text and never hallucinates. That is what the LINE paper's ``embedding_text`` needs
(an informative digest next to the raw excerpt) without an LLM, an API key or a model file,
and fast enough to run on every chunk of a corpus (≥ 2,000 chunks/s on one core).

How a chunk is summarized (``extractive_summary``):

1. Only ``type == "text"`` messages are candidates (stickers, photos, calls and system lines
   never are; ``parse_raw_text`` infers those types from the rendered markers).
2. Each candidate is tokenized without a morphological analyzer (EN: whitespace tokens minus
   stop words; JA: one regex for kanji compounds, katakana runs and latin words) and scored,
   TF-IDF-like within the chunk: content mass = sum over its distinct terms of ``1 + ln(df)``
   (df = how many messages of the chunk use the term, so the chunk's topic words weigh more;
   a term used once weighs 0.6) times a density factor (content terms per word/char), plus
   bonuses for proper names (EN: words capitalised mid-sentence; JA: katakana runs and names
   before honorifics; the speakers themselves are not counted), dates/times, money, other
   numbers, plan/decision/commitment markers and life events; divided by length**0.6 so a
   long message must carry more to win; greetings/acknowledgements and very short messages
   are down-weighted.
3. Messages are taken best-first until the middle of the length target is reached
   (skipping near-copies of what is already picked), then put back in chronological order,
   one per line: ``"Maria: Let's meet at Sangenjaya station, south exit, 9:40"``.

Length targets (``SUMMARY_TARGETS``): 200–500 characters for Japanese, 60–120 words for
English, measured on the whole summary (speaker prefixes and newlines included) by
``summary_length``. The upper bound is never exceeded: a message that does not fit is cut
at a sentence, word or character boundary and ends with "…". When the candidate messages of
the chunk together are shorter than the lower bound, the summary is all of them (shorter
than the target): ``within_target`` accepts that case given ``source_length``.

The parts live beside this module: parsing ``raw_text`` into lines (``summarize_lines``), the
word lists (``summarize_lexicon``), scoring (``summarize_scoring``), lengths and trimming
(``summarize_length``), and session titles and bullets (``session_titles``); the names other
code uses are re-exported here.
"""

from __future__ import annotations

from memory_pipeline.core.represent.session_titles import session_bullets, session_title
from memory_pipeline.core.represent.summarize_length import (
    _target_key,
    _truncate,
    source_length,
    summary_length,
    trim_text,
    within_target,
)
from memory_pipeline.core.represent.summarize_lexicon import _ECHO_OVERLAP
from memory_pipeline.core.represent.summarize_lines import (
    BULLET_LABELS,
    BULLET_MAX_CHARS,
    ELLIPSIS,
    SEPARATOR,
    SUMMARY_TARGETS,
    Line,
    infer_type,
    parse_raw_text,
)
from memory_pipeline.core.represent.summarize_scoring import _analyze, _Msg, _prefix_units, _render

__all__ = [
    "BULLET_LABELS",
    "BULLET_MAX_CHARS",
    "ELLIPSIS",
    "Line",
    "SEPARATOR",
    "SUMMARY_TARGETS",
    "extractive_summary",
    "infer_type",
    "parse_raw_text",
    "session_bullets",
    "session_title",
    "source_length",
    "summary_length",
    "trim_text",
    "within_target",
]


# --------------------------------------------------------------------------- summary


def extractive_summary(
    lines: list[Line], lang: str | None = None, *, target: tuple[int, int] | None = None
) -> str:
    """EXTRACTIVE summary of a chunk: its most informative messages, verbatim, in time order.

    Each summary line is ``"<speaker>: <message>"`` (newline-separated). ``lang`` ("ja"/"en")
    is detected from the messages when None; ``target`` overrides ``SUMMARY_TARGETS`` as
    (lower, upper) in the language's unit (characters for ja, words for en). The upper bound
    is never exceeded (one over-long message is cut with "…"); when all text messages of the
    chunk are shorter than the lower bound the summary is all of them, and it is "" when the
    chunk has no text message at all. Deterministic: same lines, same summary.
    """
    msgs, lang = _analyze(lines, lang)
    if not msgs:
        return ""
    lo, hi = target if target is not None else SUMMARY_TARGETS[_target_key(lang)]
    if hi < lo:
        raise ValueError(f"target upper bound {hi} is below lower bound {lo}")
    aim = (lo + hi) // 2  # fill to the middle of the target, then stop
    sep = len(SEPARATOR) if lang == "ja" else 0
    min_piece = 12 if lang == "ja" else 4

    picked: list[tuple[_Msg, str]] = []
    covered: set[str] = set()
    total = 0
    for m in sorted(msgs, key=lambda m: (-m.score, m.idx)):
        if total >= aim:
            break
        if total >= lo and (m.greeting or m.short):
            break  # only used to reach the lower bound
        if total >= lo and m.terms and len(m.terms & covered) >= _ECHO_OVERLAP * len(m.terms):
            continue
        gap = sep if picked else 0
        if total + gap + m.units <= hi:
            picked.append((m, m.text))
            total += gap + m.units
            covered |= m.terms
            continue
        if total >= lo:
            continue
        prefix = _prefix_units(m.sender, lang)
        budget = hi - total - gap - prefix
        need = lo - total - gap - prefix
        want = min(budget, max(need, aim - total - gap - prefix, min_piece))
        if want < min_piece and want < need:
            continue
        text = _truncate(m.text, want, need, lang)
        if not text:
            continue
        picked.append((m, text))
        total += gap + prefix + summary_length(text, lang)
        covered |= m.terms
    picked.sort(key=lambda p: p[0].idx)
    return SEPARATOR.join(_render(m.sender, text) for m, text in picked)
