"""Cheap language detection for chat text: Japanese ("ja") or English ("en").

The pipeline only needs to choose per-language rules (summary length targets, tokenization,
wording of the embedding text), so a script count is enough: no model, no dependency, a few
microseconds per message. Anything that is not clearly Japanese is treated as English.
"""

from __future__ import annotations

import re

# Hiragana, katakana (incl. the prolonged sound mark), CJK ideographs (+ extension A and
# compatibility), half-width katakana.
_JA_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f]+")
# Latin letters, ASCII and accented (full-width latin is counted too: it is still a latin word).
_LATIN_RUN = re.compile(r"[A-Za-z\u00c0-\u024f\uff21-\uff3a\uff41-\uff5a]+")

# One kana/kanji carries about as much as a short latin word, so Japanese wins when its
# character count reaches a third of the latin letter count: "Mariaと京都に行く" and
# "LINE Payで送った" are Japanese, "I had ramen at 一蘭 today" is English.
_JA_WEIGHT = 3
DEFAULT_MAX_CHARS = 4096


def detect_lang(text: str, *, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """``"ja"`` when kana/kanji dominate latin letters (weighted 3:1), else ``"en"``.

    Only the first ``max_chars`` characters are looked at: a chat chunk does not switch
    language halfway, and the cost stays bounded for long texts. Empty text, digits and emoji
    only give ``"en"`` (the neutral default of the pipeline).
    """
    if max_chars and len(text) > max_chars:
        text = text[:max_chars]
    ja = sum(map(len, _JA_RUN.findall(text)))
    if not ja:
        return "en"
    latin = sum(map(len, _LATIN_RUN.findall(text)))
    return "ja" if ja * _JA_WEIGHT >= latin else "en"


def ja_share(text: str) -> float:
    """Share of kana/kanji among kana/kanji + latin letters (0.0 when there are none)."""
    ja = sum(map(len, _JA_RUN.findall(text)))
    latin = sum(map(len, _LATIN_RUN.findall(text)))
    total = ja + latin
    return ja / total if total else 0.0
