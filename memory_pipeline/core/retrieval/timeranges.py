"""Combining atoms: ranges ("from May to July", 3月から5月), parts of a date and
one-sided bounds ("before March"), and the atom-to-filter step.

The grammar finds atoms one by one; whether two atoms form one range, or a part of the day
belongs to a date, depends on the words between them, which is decided here.
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import date, timedelta

from memory_pipeline.core.retrieval.timeatoms import (
    _Atom,
    _Ctx,
    _filt,
    _month_range,
    _recent_month,
    _shift_months,
    _ts_atom,
)
from memory_pipeline.core.retrieval.timefilter import TimeFilter

# ----------------------------------------------------------------------------- combination

_GAP_PART = re.compile(r"\s*(?:の|,|、)?\s*$")
_PRE_PAIR = re.compile(r"(?<![A-Za-z])(between|from)\s*$", re.I)
_GAP_AND = re.compile(r"\s*and\s*$", re.I)
_GAP_TO = re.compile(r"\s*(?:to|until|till|through|thru|-|–|—|~|〜)\s*$", re.I)
_GAP_BARE = re.compile(r"\s*(?:through|thru|-|–|—|~|〜|から|より)\s*$", re.I)  # no "from" needed
_PRE_ONE = re.compile(
    r"(?<![A-Za-z])(since|starting|from|after|before|prior\s+to|until|till|up\s+to|by)\s*$", re.I
)
_POST_ONE = re.compile(r"\s*(以降|以後|以来|から|より前|より後|以前|まで)")
_POST_MADE = re.compile(r"\s*まで")
_EVENT_EN = re.compile(
    r"(?:^|[^A-Za-z])(?:the|a|an|our|my|your|his|her|their)\s+(?!(?:time|conversation|chat|"
    r"session|phone|call|day|week|month|year)\b)[A-Za-z]+\s+(?:in|on|during|for|of|at)\s+$",
    re.I,
)
_CALENDAR_JA = re.compile(r"[\d〇一二三四五六七八九十]")  # 3月の旅行: explicit calendar time
_EVENT_JA = re.compile(
    r"の(?!会話|話|セッション|チャット|朝|昼|夜|晩|夕方|午前|午後|深夜)[\u4e00-\u9fff\u30a1-\u30fa]"
)


def _merge_parts(atoms: list[_Atom], c: _Ctx) -> list[_Atom]:
    """ "yesterday evening", 昨日の夜: one day + a bare part of day -> a local_ts range."""
    out: list[_Atom] = []
    for a in atoms:
        prev = out[-1] if out else None
        if (
            a.part is not None
            and prev is not None
            and prev.status == "ok"
            and prev.lo is not None
            and prev.lo == prev.hi
            and prev.filt is None
            and _GAP_PART.match(c.text, prev.end, a.start)
        ):
            merged = _ts_atom(prev.lo, a.part, min(prev.conf, 0.9))
            merged.start, merged.end = prev.start, a.end
            merged.text = c.text[prev.start : a.end]
            out[-1] = merged
        elif a.part is not None and a.needs_day:
            continue  # "good morning": content, not a time
        else:
            if a.part is not None:
                a.filt = _filt("hour", "between", start=a.part[0], end=a.part[1])
            out.append(a)
    return out


def _interval(a: _Atom, ref: _Atom | None, c: _Ctx) -> tuple[date, date] | None:
    if a.lo is not None and a.hi is not None:
        return a.lo, a.hi
    if a.month is not None:
        if ref is not None and ref.lo is not None:
            return _month_range(ref.lo.year, a.month)
        return _recent_month(c.today, a.month)
    return None


def _earlier(a: _Atom, d: date) -> date:
    if a.shift == "week":
        return d - timedelta(days=7)
    if a.shift == "month":
        return _shift_months(d, -1)
    if a.shift == "year":
        return _shift_months(d, -12)
    return d


def _pair(a: _Atom, b: _Atom, c: _Ctx) -> _Atom | None:
    conf = min(a.conf, b.conf)
    if a.session is not None and b.session is not None:
        lo, hi = sorted((a.session, b.session))
        return _Atom(filt=_filt("session_index", "between", start=lo, end=hi), conf=conf)
    if a.month is not None and b.month is not None:
        return _Atom(filt=_filt("month", "between", start=a.month, end=b.month), conf=conf)
    ia, ib = _interval(a, b, c), _interval(b, a, c)
    if ia is None or ib is None:
        return None
    lo, hi, note = ia[0], ib[1], ""
    if lo > hi:
        lo = _earlier(a, lo)
    if lo > hi:
        lo, hi, note = ib[0], ia[1], "reversed range swapped"
    return _Atom(lo=lo, hi=hi, conf=conf, note=note)


def _one_sided(a: _Atom, kw: str, c: _Ctx) -> _Atom | None:
    kw = re.sub(r"\s+", " ", kw.lower())
    if a.session is not None:
        lo, hi = (
            (a.session, None)
            if kw in ("since", "starting", "from", "以降", "以後", "以来", "から")
            else (None, a.session)
        )
        return _Atom(filt=_filt("session_index", "between", start=lo, end=hi), conf=a.conf)
    iv = _interval(a, None, c)
    if iv is None:
        return None
    if kw in ("since", "starting", "from", "以来", "から"):
        lo, hi = iv[0], max(iv[0], c.today)
    elif kw in ("以降", "以後"):
        lo, hi = iv[0], None
    elif kw in ("after", "より後"):
        lo, hi = iv[1] + timedelta(days=1), None
    elif kw in ("before", "prior to", "より前"):
        lo, hi = None, iv[0] - timedelta(days=1)
    else:  # until, till, up to, by, 以前, まで: inclusive end
        lo, hi = None, iv[1]
    return _Atom(filt=_filt("date", "between", start=lo, end=hi), conf=a.conf)


def _ranges(atoms: list[_Atom], c: _Ctx) -> list[_Atom]:
    """Combine atoms with between/from/to/since/before/after and から/まで/以降/以前."""
    out: list[_Atom] = []
    text, i = c.text, 0
    while i < len(atoms):
        a = atoms[i]
        prev_end = out[-1].end if out else 0
        if a.status != "ok" or a.part is not None:
            out.append(a)
            i += 1
            continue
        b = atoms[i + 1] if i + 1 < len(atoms) else None
        pre = text[prev_end : a.start]
        if b is not None and b.status == "ok" and b.part is None:
            mp = _PRE_PAIR.search(pre)
            gap_rx = {"between": _GAP_AND, "from": _GAP_TO}.get(mp[1].lower() if mp else "")
            if (gap_rx or _GAP_BARE).match(text, a.end, b.start):
                r = _pair(a, b, c)
                if r is not None:
                    r.start = prev_end + mp.start(1) if mp else a.start
                    post = _POST_MADE.match(text, b.end)
                    r.end = post.end() if post else b.end
                    out.append(_finish(r, text))
                    i += 2
                    continue
        mp = _PRE_ONE.search(pre)
        mq = _POST_ONE.match(text, a.end)
        if mp or mq:
            r = _one_sided(a, (mp or mq)[1], c)  # type: ignore[index]
            if r is not None:
                r.start = prev_end + mp.start(1) if mp else a.start
                r.end = mq.end() if mq and not mp else a.end
                out.append(_finish(r, text))
                i += 1
                continue
        out.append(a)
        i += 1
    return out


def _finish(r: _Atom, text: str) -> _Atom:
    r.text = text[r.start : r.end]
    if r.filt is None and r.lo is not None:
        r.filt = _filt("date", "between", start=r.lo, end=r.hi)
    return r


def _to_filter(a: _Atom) -> TimeFilter | None:
    f = a.filt
    if f is None:
        if a.lo is None or a.hi is None:
            return None
        if a.lo == a.hi:
            f = _filt("date", "eq", a.lo)
        else:
            f = _filt("date", "between", start=a.lo, end=a.hi)
    return replace(f, text=a.text, confidence=round(a.conf * (0.5 if a.event else 1.0), 3))
