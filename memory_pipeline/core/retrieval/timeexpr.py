"""Deterministic, LLM-free time understanding for memory queries (EN + JA).

Following Alonso et al. 2024 ("Toward Conversational Agents with Context and Time Sensitive
Long-term Memory"), a query is split into metadata filters over message/session time (their
``f_value`` -> ``op="eq"``, ``f_between`` -> ``op="between"``), speakers and the remaining
content words used for ranking. No model, no I/O: the retrieval layer can call this per query.

Conventions (all relative to ``now``, the user's local wall-clock time; tzinfo is ignored):

* Weeks start on ``week_start`` (0 = Monday, ISO; 6 = Sunday). "this week"/"last week"/先週
  cover the whole 7-day week, even the part after today.
* "last Tuesday", a bare "Tuesday", 火曜日: the most recent Tuesday *strictly before* today
  (asked on a Tuesday -> 7 days ago). "this Tuesday" = Tuesday of the current week;
  "Tuesday last week"/先週の火曜日 = Tuesday of the previous week.
* Weekends are Saturday+Sunday. "the weekend"/週末: the most recent one whose Saturday is on or
  before today; "last weekend"/先週末: the most recent one whose Sunday is before today;
  "this weekend"/今週末: the current one on Sat/Sun, otherwise the coming one (may lie ahead).
* Numeric dates: ``YYYY-MM-DD``/``YYYY/MM/DD`` are ISO; ``MM/DD/YYYY`` is US order (falls back to
  DD/MM with lower confidence only when the first number cannot be a month); two-digit years
  are 20YY unless that is after ``now``'s year. ``M/D`` without a year is read only in Japanese
  or after a preposition ("on 5/8") - otherwise it may be a fraction.
* Year-less dates ("May 8th", 5月8日, "on the 8th") resolve to the most recent such day <= today.
  A bare month ("in March", 3月) is ``month eq 3`` in any year; "last March" is the most recent
  March strictly before the current month.
* "recently"/"lately"/最近/この前: the last ``RECENT_DAYS`` (14) days including today. "the past
  N days/weeks" (with "the"/"past" or a number) is a rolling window ending today, whereas
  "last week"/"last month" are calendar periods. "N days ago" is that day; "N weeks ago" the
  week containing the day 7N days ago; "N months ago" that calendar month; "a couple of" = 2-3,
  "a few"/"several"/数 = 2-5 units.
* Parts of day (hours inclusive): morning 5-11, afternoon 12-16, evening 17-23, night 18-4
  (wraps past midnight: "last night" = yesterday 18:00 .. today 04:59:59.999999).
* Month names vs names: a bare full month name counts only after a preposition such as
  "in/during/since/before/after/until/from/to/of" (or with a day or year next to it), so
  "May said ..." is content. If the word is also a given speaker, only in/during/since/
  before/after/until/through make it a month ("talk to May" is the speaker).
* Future references (tomorrow, next week, 来週, ...) and invalid dates (February 30, 13/45/2024)
  produce no filter: the text stays in ``content`` and a note explains why.
* ``confidence`` < 0.8 means "use as a soft preference": if the hard filter returns nothing, fall
  back to ranking without it. A time phrase attached to a noun ("the trip in March", 3月の旅行)
  may describe the event rather than the conversation: its confidence is halved and its words
  are kept in ``content``.
* ``session_index`` filters: ``first``/``last`` match session 1 / the last session. For
  "time_content" queries ("the first time we talked about hiking") the retrieval layer may apply
  them to the *matching* sessions instead (earliest/latest hit); the note says so.
* Filters in a ``ParsedQuery`` are AND-ed; open range bounds are ``None``.

This module parses a query (speakers, content words, the time filters); the filter types live
in ``timefilter``, calendar atoms in ``timeatoms``, the grammar in ``timegrammar`` and the
combination of atoms into ranges in ``timeranges``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from datetime import date, datetime
from functools import lru_cache

from memory_pipeline.core.retrieval.timeatoms import _Ctx
from memory_pipeline.core.retrieval.timefilter import (
    RECENT_DAYS,
    ParsedQuery,
    TimeFilter,
    matches,
    matches_all,
)
from memory_pipeline.core.retrieval.timegrammar import _scan
from memory_pipeline.core.retrieval.timeranges import (
    _CALENDAR_JA,
    _EVENT_EN,
    _EVENT_JA,
    _merge_parts,
    _ranges,
    _to_filter,
)

__all__ = [
    "GENERIC_WORDS_EN",
    "GENERIC_WORDS_JA",
    "RECENT_DAYS",
    "ParsedQuery",
    "TimeFilter",
    "matches",
    "matches_all",
    "parse_query",
]

# Generic "what did we talk about" words: a query made only of these plus time is "time_only".
GENERIC_WORDS_EN = frozenset(
    "talk talked talking talks say said saying says discuss discussed discussing discussion "
    "discussions speak spoke spoken speaking chat chatted chatting chats mention mentioned "
    "mentioning tell told telling conversation conversations convo message messages messaged "
    "text texted session sessions topic topics subject subjects happen happened happening "
    "remember recall remind anything something stuff thing things everything".split()
)
GENERIC_WORDS_JA = frozenset(
    "何 話 会話 話題 内容 言 喋 しゃべ 事 こと もの 教 覚 思 合 いつ なに なん 誰 どんな "
    "トーク チャット メッセージ セッション".split()
)
_STOP_EN = frozenset(
    "a an the and or but of to in on at by for from with about as into onto over under "
    "between since after before until till through during within without upon prior up "
    "what when where who whom whose which why how whats "
    "did do does done doing was were is are be been being am has have had having will would "
    "shall should can could may might must i me my mine we us our ours you your yours he him "
    "his she her hers they them their theirs it its this that these those there here then "
    "any some all each every again back also just only very so too not no yes ever "
    "please kindly let lets s t d ll re ve m day days time times week weeks month months year "
    "years ago earlier "
    "early late mid later first last next previous past other each one".split()
)
_STOP_JA = frozenset(
    "以降 以後 以来 以前 前 後 間 中 頃 時 日 週 月 年 私 僕 俺 我々 皆 一緒 方 今 最初 最後"
    " 回目 番目 時間".split()
)
_JA_AUX = re.compile(
    r"(?:について|ついて|ましたっけ|でしたっけ|だっけ|たっけ|っけ|でしょう|ください|ました|ません"
    r"|ます|でした|です|だった|だ|した|して|します|しよう|しま|った|って|ている|ていた|てた|てる"
    r"|たの|けど|から|まで|より|など|とか|という|こと|もの|どんな|なに|なん|いつ|どこ|だれ|どう"
    r"|どの|それ|これ|あれ|その|この|あの|さん|くん|ちゃん|さま|かな|しゃべ|おしえて|ろう"
    r"|[ねよかのはがをにでとへもやなんたていしられるうわ])+"
)


# ----------------------------------------------------------------------------- speakers/content

_WHEN = re.compile(r"(?<![A-Za-z])when(?![A-Za-z])|いつ", re.I)
_JA_CHARS = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")
_TOKEN = re.compile(
    r"[A-Za-z0-9À-ÖØ-öø-ÿ][A-Za-z0-9À-ÖØ-öø-ÿ'’+\-]*|[\u3400-\u9fff々〆]+|[\u30a1-\u30fa\u30fc]+"
    r"|[\u3041-\u3096\u309d\u309e\u30fc]+"
)
_POSSESSIVE = re.compile(r"(?:'s|’s|'|’)$", re.I)
_HONORIFIC = r"(?:さん|くん|君|ちゃん|様|さま|氏|先生)?"


@lru_cache(maxsize=256)
def _speaker_rx(names: tuple[str, ...]) -> list[tuple[str, re.Pattern[str], str, bool]]:
    """(name, its matcher, its first word, whether the matcher ignores case) per name."""
    out = []
    for name in names:
        n = unicodedata.normalize("NFKC", str(name)).strip()
        if not n:
            continue
        words = n.split()
        body = r"\s+".join(map(re.escape, words))
        if _JA_CHARS.search(n):
            out.append((name, re.compile(body + _HONORIFIC), words[0], False))
        else:
            b = r"(?<![A-Za-z0-9À-ÖØ-öø-ÿ])"
            e = r"(?:'s|’s|'|’)?(?![A-Za-z0-9À-ÖØ-öø-ÿ])"
            out.append((name, re.compile(b + body + e, re.I), words[0], True))
    return out


# the letters re.IGNORECASE matches with an ASCII letter beyond ``str.lower`` (dotless i, long
# s) or whose full lowercase is two characters (İ); test_timeexpr checks every character
_FOLD_TO_ASCII = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s"})


def _ascii_fold(text: str) -> str:
    """``text`` lowered so that every character re.IGNORECASE matches with an ASCII letter
    becomes that letter in lower case."""
    return text.translate(_FOLD_TO_ASCII).lower() if not text.isascii() else text.lower()


def _find_speakers(
    text: str, names: tuple[str, ...], taken: list[tuple[int, int]]
) -> tuple[list[str], list[tuple[int, int]]]:
    hits: list[tuple[int, str]] = []
    spans: list[tuple[int, int]] = []
    # a name's matcher runs only where the text holds its first word (a substring test per
    # name, not a regex scan: a history has hundreds of names). Exact: a case-sensitive
    # matcher needs the word as is; a case-blind one (ASCII name) needs it in the text
    # folded as re.IGNORECASE folds it to ASCII letters (``_ascii_fold``)
    folded = _ascii_fold(text)
    for name, rx, first, fold in _speaker_rx(names):
        if not fold:
            if first not in text:
                continue
        elif first.isascii() and first.lower() not in folded:
            continue
        for m in rx.finditer(text):
            if any(s < m.end() and m.start() < e for s, e in taken):
                continue
            hits.append((m.start(), name))
            spans.append(m.span())
    seen: dict[str, None] = {}
    for _, name in sorted(hits):
        seen.setdefault(name, None)
    return list(seen), spans


_JA_GENERIC_VERB = re.compile(r"何|(?<![\u3400-\u9fff])(?:話|言|喋)(?=[しすせそさっいうわえ])")


def _content_words(text: str) -> list[tuple[int, str]]:
    """(position, word) to rank with: stop/generic words dropped; JA split by script runs."""
    words = []
    for m in _TOKEN.finditer(_JA_GENERIC_VERB.sub(" ", text)):
        w = m[0]
        ch = w[0]
        if ch.isascii() or ch < "\u3000":
            if "'" in w or "’" in w or "-" in w or "+" in w:
                w = _POSSESSIVE.sub("", w).strip("-+'") or w
            low = w.lower()
            if low in _STOP_EN or low in GENERIC_WORDS_EN:
                continue
        elif "\u3041" <= ch <= "\u309e":  # hiragana: mostly particles and verb endings
            w = w.rstrip("のはがをにでとへもやねよか")
            w = w[1:] if w[:1] in ("の", "を") and len(w) > 2 else w
            if len(w) <= 2 or _JA_AUX.fullmatch(w) or w in GENERIC_WORDS_JA:
                continue
        elif w in _STOP_JA or w in GENERIC_WORDS_JA:
            continue
        words.append((m.start(), w))
    return words


def _blank(text: str, spans: Sequence[tuple[int, int]]) -> str:
    chars = list(text)
    for s, e in spans:
        chars[s:e] = " " * (e - s)
    return "".join(chars)


# ----------------------------------------------------------------------------- entry point


def parse_query(
    query: str,
    *,
    now: datetime,
    speakers: Sequence[str] = (),
    lang: str | None = None,
    week_start: int = 0,
) -> ParsedQuery:
    """Split ``query`` into time filters, speakers and ranking words; never raises.

    ``now`` is the asker's local wall-clock time (relative expressions resolve against it),
    ``speakers`` the names to look for, ``lang`` "en"/"ja" (None: detected from the script),
    ``week_start`` 0=Monday..6=Sunday. Anything ambiguous or invalid degrades to content search
    with a note (see the module docstring for every convention).
    """
    try:
        return _parse(query, now, speakers, lang, week_start)
    except Exception as exc:  # last-resort guard: a query must never break retrieval
        content = query.strip() if isinstance(query, str) else ""
        note = f"internal error {type(exc).__name__}: content-only fallback"
        return ParsedQuery("content_only", (), (), content, "relevance", (note,))


def _speaker_names(speakers: object) -> tuple[tuple[str, ...], frozenset[str]]:
    """The usable names of ``speakers`` and their trimmed lower-case set (memoized by the
    names: a search parses against all of a history's names, hundreds, twice)."""
    try:
        key = tuple(speakers or ())  # type: ignore[call-overload]
        hash(key)
    except TypeError:  # an unhashable name: not memoized (not iterable: raised as before)
        return _names_of(speakers or ())  # type: ignore[arg-type]
    return _speaker_names_of(key)


def _names_of(speakers: Sequence[object]) -> tuple[tuple[str, ...], frozenset[str]]:
    names = tuple(s for s in speakers if isinstance(s, str) and s.strip())
    return names, frozenset(n.strip().lower() for n in names)


_speaker_names_of = lru_cache(maxsize=64)(_names_of)


def _parse(
    query: object, now: object, speakers: Sequence[str], lang: str | None, week_start: int
) -> ParsedQuery:
    notes: list[str] = []
    if not isinstance(query, str):
        notes.append("query is not a string")
        query = ""
    text = query if query.isascii() else unicodedata.normalize("NFKC", query)
    if isinstance(now, datetime):
        today = now.date()
    elif isinstance(now, date):
        today = now
    else:
        notes.append("now is not a datetime: using 1970-01-01")
        today = date(1970, 1, 1)
    if not isinstance(week_start, int) or not 0 <= week_start <= 6:
        notes.append("week_start must be 0..6: using 0 (Monday)")
        week_start = 0
    if lang not in ("en", "ja"):
        lang = "en" if text.isascii() or not _JA_CHARS.search(text) else "ja"
    notes.append(f"lang={lang}")
    if isinstance(speakers, str):
        speakers = (speakers,)
    names, lowered = _speaker_names(speakers)
    c = _Ctx(today, week_start, lang, text, lowered)

    atoms = _ranges(_merge_parts(_scan(c), c), c)
    filters: list[TimeFilter] = []
    removed: list[tuple[int, int]] = []  # blanked before tokenising
    kept: list[tuple[int, str]] = []  # time text that stays in content, verbatim
    for a in atoms:
        removed.append((a.start, a.end))
        if a.status != "ok":
            notes.append(f"{a.text!r}: {a.note or a.status}; kept as content")
            kept.append((a.start, " ".join(a.text.split())))
            continue
        if a.filt is None or a.filt.field != "session_index":
            pre = text[max(0, a.start - 60) : a.start]
            a.event = bool(_EVENT_EN.search(pre)) or (
                _EVENT_JA.match(text, a.end) is not None and _CALENDAR_JA.search(a.text) is not None
            )
        f = _to_filter(a)
        if f is None:
            continue
        if f not in filters:
            filters.append(f)
        if a.event:
            notes.append(f"{a.text!r} may date the event, not the conversation: soft filter")
            kept.append((a.start, " ".join(a.text.split())))
        if a.note:
            notes.append(f"{a.text!r}: {a.note}")

    found, speaker_spans = _find_speakers(text, names, removed)
    words = [w for _, w in sorted(_content_words(_blank(text, removed + speaker_spans)) + kept)]
    if filters:
        kind = "time_content" if words else "time_only"
    else:
        kind = "content_only"
        if not words and found:
            words = list(found)
            notes.append("only speakers: their names are the content")
    if any(f.op in ("first", "last") for f in filters) and kind == "time_content":
        notes.append("first/last: apply to the sessions matching the content")
    if not filters and _WHEN.search(text):
        notes.append("asks 'when': report the dates of the matches")
    if not text.strip():
        notes.append("empty query")
    order = "chronological" if kind == "time_only" else "relevance"
    return ParsedQuery(kind, tuple(filters), tuple(found), " ".join(words), order, tuple(notes))
