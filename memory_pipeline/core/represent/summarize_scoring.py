"""Scoring chat messages as summary candidates (no morphological analyzer).

Each text message becomes a :class:`_Msg` with its terms (EN: words minus stop words; JA:
kanji compounds, katakana runs and latin words) and features (names, dates, money, plans,
events); :func:`_analyze` scores them TF-IDF-like within the chunk, as the summarize module's
docstring describes.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import chain, pairwise

from memory_pipeline.core.common.lang import detect_lang
from memory_pipeline.core.represent.summarize_lexicon import (
    _EN_CALENDAR,
    _EN_COMMIT_PAIRS,
    _EN_COMMIT_WORDS,
    _EN_CURRENCY,
    _EN_DECIDE_PAIRS,
    _EN_DECIDE_WORDS,
    _EN_EVENT_PAIRS,
    _EN_EVENT_WORDS,
    _EN_GREETING_WORDS,
    _EN_MONTHS,
    _EN_NUMBER,
    _EN_PAIR_FIRSTS,
    _EN_SENTENCE_END,
    _EN_STOP,
    _EN_STRIP,
    _EN_WHEN_PAIRS,
    _EN_WHEN_WORDS,
    _EN_WORD,
    _GREETING_FACTOR,
    _JA_COMMIT,
    _JA_DECIDE,
    _JA_EVENT,
    _JA_GREETING,
    _JA_HONORIFIC_KANJI,
    _JA_NAME_BEFORE_HONORIFIC,
    _JA_NOT_COMMIT,
    _JA_NOT_DECIDE,
    _JA_NUMBER,
    _JA_STOP,
    _JA_TOKEN,
    _JA_WHEN_WORDS,
    _JA_YEN,
    _LENGTH_EXPONENT,
    _MAX_NAMES,
    _MAX_WHEN,
    _SHORT_FACTOR,
    _W_EVENT,
    _W_MONEY,
    _W_NAME,
    _W_NUMBER,
    _W_PLAN,
    _W_SINGLE,
    _W_WHEN,
    _W_WHEN_MORE,
)
from memory_pipeline.core.represent.summarize_lines import _MARKER_TYPES, Line

# --------------------------------------------------------------------------- analysis


class _Msg:
    """One candidate message with its features (internal; slots for speed)."""

    __slots__ = (
        "idx",
        "sender",
        "text",
        "units",
        "terms",
        "names",
        "nwhen",
        "money",
        "number",
        "kind",
        "event",
        "greeting",
        "short",
        "score",
    )

    def __init__(self, idx: int, sender: str, text: str) -> None:
        self.idx = idx
        self.sender = sender
        self.text = text
        self.units = 0
        self.terms: frozenset[str] = frozenset()
        self.names: frozenset[str] = frozenset()
        self.nwhen = 0
        self.money = False
        self.number = False
        self.kind = ""  # "decision" | "commitment" | ""
        self.event = False
        self.greeting = False
        self.short = False
        self.score = 0.0


def _clean(text: str) -> str:
    return " ".join(text.split())


def _candidates(lines: Sequence[Line]) -> list[_Msg]:
    """Text messages worth considering, whitespace-collapsed (one summary line each)."""
    out = []
    for i, ln in enumerate(lines):
        if ln.type != "text":
            continue
        text = ln.text
        if text.startswith("[") and _MARKER_TYPES.get(text.strip().lower()):
            continue
        text = _clean(text)
        if text:
            out.append(_Msg(i, ln.sender, text))
    return out


def _resolve_lang(lang: str | None, msgs: Sequence[_Msg]) -> str:
    if lang:
        return "ja" if lang.lower().startswith("ja") else "en"
    sample: list[str] = []
    size = 0
    for m in msgs:
        sample.append(m.text)
        size += len(m.text)
        if size > 600:
            break
    return detect_lang("\n".join(sample))


def _prefix_units(sender: str, lang: str) -> int:
    if not sender:
        return 0
    return len(sender) + 2 if lang == "ja" else len(sender.split())


def _render(sender: str, text: str) -> str:
    return f"{sender}: {text}" if sender else text


def _offsets(msgs: list[_Msg]) -> tuple[str, list[int]]:
    """The chunk's texts joined by newlines, and where each message starts in it."""
    starts = []
    pos = 0
    for m in msgs:
        starts.append(pos)
        pos += len(m.text) + 1
    return "\n".join([m.text for m in msgs]), starts


def _features_ja(msgs: list[_Msg]) -> None:
    joined, starts = _offsets(msgs)
    for hit in _JA_NUMBER.finditer(joined):
        m = msgs[bisect_right(starts, hit.start()) - 1]
        m.number = True
        if hit.group(1):
            m.money = True
        elif hit.group(2):
            m.nwhen += 1
    if "¥" in joined or "￥" in joined:
        for hit in _JA_YEN.finditer(joined):
            msgs[bisect_right(starts, hit.start()) - 1].money = True
    for hit in _JA_WHEN_WORDS.finditer(joined):
        msgs[bisect_right(starts, hit.start()) - 1].nwhen += 1
    for hit in _JA_COMMIT.finditer(joined):
        if hit.group() not in _JA_NOT_COMMIT:
            msgs[bisect_right(starts, hit.start()) - 1].kind = "commitment"
    for hit in _JA_DECIDE.finditer(joined):
        m = msgs[bisect_right(starts, hit.start()) - 1]
        if not m.kind and hit.group() not in _JA_NOT_DECIDE:
            m.kind = "decision"
    for hit in _JA_EVENT.finditer(joined):
        msgs[bisect_right(starts, hit.start()) - 1].event = True


# raw token -> (lower-cased core, term or "", capitalised, ends a sentence); bounded cache.
_EN_TOKEN_INFO: dict[str, tuple[str, str, bool, bool]] = {}
_TOKEN_CACHE_MAX = 200_000


def _en_token_info(tok: str) -> tuple[str, str, bool, bool]:
    core = tok.strip(_EN_STRIP)
    low = core.lower()
    term = low[:-2] if low.endswith(("'s", "’s")) else low
    if len(term) < 3 or term in _EN_STOP or not term[0].isalpha():
        term = ""
    return low, term, core[:1].isupper(), tok.endswith(_EN_SENTENCE_END)


def _en_token_infos(toks: list[str]) -> list[tuple[str, str, bool, bool]]:
    cache = _EN_TOKEN_INFO
    get = cache.get
    infos = [get(t) for t in toks]
    if None in infos:
        for i, info in enumerate(infos):
            if info is None:
                infos[i] = cache[toks[i]] = _en_token_info(toks[i])
    return infos  # type: ignore[return-value]


_EN_START = ("", "", False, True)  # a virtual token before each message: a sentence ends


def _analyze_en(msgs: list[_Msg], speakers: Iterable[str]) -> None:
    if len(_EN_TOKEN_INFO) > _TOKEN_CACHE_MAX:
        _EN_TOKEN_INFO.clear()
    # Speakers are not "names" for the bonus: in their own chat they are mostly vocatives.
    not_names = set(_EN_CALENDAR)
    for s in speakers:
        not_names.update(w.lower() for w in _EN_WORD.findall(s))
    mid_caps: set[str] = set()
    per_msg = []
    for m in msgs:
        toks = m.text.split()
        infos = _en_token_infos(toks)
        lows = [i[0] for i in infos]
        m.terms = terms = frozenset([i[1] for i in infos if i[1]])
        # Capitalised terms not at a sentence start are name candidates ("at Hikari Design").
        mid_caps.update(
            [c[1] for p, c in pairwise([_EN_START, *infos]) if c[2] and c[1] and not p[3]]
        )
        n = len(toks)
        m.units = n + _prefix_units(m.sender, "en")
        words = set(lows)
        nwhen = len(words & _EN_WHEN_WORDS)
        commit = not _EN_COMMIT_WORDS.isdisjoint(words)
        decide = not _EN_DECIDE_WORDS.isdisjoint(words) or lows[-1:] == ["then"]
        event = not _EN_EVENT_WORDS.isdisjoint(words)
        if not _EN_PAIR_FIRSTS.isdisjoint(words):
            bigrams = set(pairwise(lows))
            nwhen += len(bigrams & _EN_WHEN_PAIRS)
            if not _EN_MONTHS.isdisjoint(words):
                nwhen += sum(1 for a, b in bigrams if a in _EN_MONTHS and b[:1].isdigit())
            commit = commit or not _EN_COMMIT_PAIRS.isdisjoint(bigrams)
            decide = decide or not _EN_DECIDE_PAIRS.isdisjoint(bigrams)
            event = event or not _EN_EVENT_PAIRS.isdisjoint(bigrams)
        m.nwhen = nwhen
        m.kind = "commitment" if commit else "decision" if decide else ""
        m.event = event
        m.short = n < 4
        m.greeting = n < 7 and bool(lows) and lows[0] in _EN_GREETING_WORDS
        per_msg.append((m, len(terms) / n if n else 0.0))
    _numbers_en(msgs)
    mid_caps -= not_names
    for m, _ in per_msg:
        m.names = m.terms & mid_caps
    _score(per_msg)


def _numbers_en(msgs: list[_Msg]) -> None:
    joined, starts = _offsets(msgs)
    for hit in _EN_NUMBER.finditer(joined):
        m = msgs[bisect_right(starts, hit.start()) - 1]
        m.number = True
        if hit.group(3):
            m.money = True
        elif hit.group(1) or hit.group(2):
            m.nwhen += 1
    if "$" in joined or "¥" in joined or "€" in joined or "£" in joined:
        for hit in _EN_CURRENCY.finditer(joined):
            msgs[bisect_right(starts, hit.start()) - 1].money = True


# token -> (term or "" to drop, is a name candidate); bounded: cleared when it grows too big.
_JA_TOKEN_INFO: dict[str, tuple[str, bool]] = {}


def _ja_token_info(t: str) -> tuple[str, bool]:
    if t in _JA_STOP:
        return "", False
    c = t[0]
    if len(t) > 2 and t.endswith(_JA_HONORIFIC_KANJI):
        return t[:-2], True  # 佐藤先輩 -> 佐藤
    if "\u30a1" <= c <= "\u30fc" or "\uff66" <= c <= "\uff9f":
        return t, len(t) > 2  # katakana: given names and loanwords, both worth keeping
    if c.isascii():
        if len(t) < 2 or t.lower() in _EN_STOP:
            return "", False
        return t, c.isupper() and not t.isupper()  # "Mochi", not "LINE" or "OK"
    return t, False


def _analyze_ja(msgs: list[_Msg], speakers: Iterable[str]) -> None:
    cache = _JA_TOKEN_INFO
    if len(cache) > _TOKEN_CACHE_MAX:
        cache.clear()
    names: set[str] = set()
    per_msg = []
    for m in msgs:
        text = m.text
        n = len(text)
        m.units = n + _prefix_units(m.sender, "ja")
        terms = set()
        content_chars = 0
        for t in _JA_TOKEN.findall(text):
            info = cache.get(t)
            if info is None:
                info = cache[t] = _ja_token_info(t)
            term, is_name = info
            if term:
                terms.add(term)
                content_chars += len(term)
                if is_name:
                    names.add(term)
        m.terms = frozenset(terms)
        m.short = n < 8
        m.greeting = n < 16 and _JA_GREETING.match(text) is not None
        per_msg.append((m, content_chars / n if n else 0.0))
    _features_ja(msgs)
    joined = "".join(m.text for m in msgs)
    if "さん" in joined or "ちゃん" in joined or "くん" in joined or "君" in joined:
        names.update(_JA_NAME_BEFORE_HONORIFIC.findall(joined))
    names.difference_update(speakers)
    for m, _ in per_msg:
        m.names = m.terms & names
    _score(per_msg)


def _score(per_msg: list[tuple[_Msg, float]]) -> None:
    """Salience = (topic mass x density + bonuses) / length**0.6; see the module docstring."""
    df = Counter(chain.from_iterable(m.terms for m, _ in per_msg))
    # Topic words (used by several messages) weigh 1 + ln(df); a word said once weighs less;
    # a single character (one kanji) says little and counts half.
    weight = {
        t: (1.0 + math.log(n) if n > 1 else _W_SINGLE) * (1.0 if len(t) > 1 else 0.5)
        for t, n in df.items()
    }
    get = weight.__getitem__
    for m, density in per_msg:
        mass = sum(map(get, m.terms)) * (0.4 + min(density, 1.0))
        bonus = _W_NAME * min(len(m.names), _MAX_NAMES)
        if m.nwhen:
            bonus += _W_WHEN + _W_WHEN_MORE * (min(m.nwhen, _MAX_WHEN) - 1)
        if m.money:
            bonus += _W_MONEY
        elif m.number:
            bonus += _W_NUMBER
        if m.kind:
            bonus += _W_PLAN
        if m.event:
            bonus += _W_EVENT
        s = (mass + bonus) / max(m.units, 8) ** _LENGTH_EXPONENT
        if m.greeting:
            s *= _GREETING_FACTOR
        if m.short:
            s *= _SHORT_FACTOR
        m.score = s


def _analyze(lines: Sequence[Line], lang: str | None) -> tuple[list[_Msg], str]:
    msgs = _candidates(lines)
    lang = _resolve_lang(lang, msgs)
    speakers = {ln.sender for ln in lines}
    if lang == "ja":
        _analyze_ja(msgs, speakers)
    else:
        _analyze_en(msgs, speakers)
    return msgs, lang
