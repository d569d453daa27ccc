"""Session titles and bullets, extractive like the summaries.

A title is the session's date and participants with its strongest content terms; bullets
are the best-scored messages, labelled and trimmed. Nothing is written that the chat did
not say.
"""

from __future__ import annotations

from collections.abc import Sequence

from memory_pipeline.core.represent.summarize_length import trim_text
from memory_pipeline.core.represent.summarize_lexicon import (
    _ECHO_OVERLAP,
    _EN_CALENDAR,
    _EN_PHRASE,
    _EN_STOP,
    _EN_TITLE_STOP,
    _EN_WORD,
)
from memory_pipeline.core.represent.summarize_lines import BULLET_LABELS, BULLET_MAX_CHARS, Line
from memory_pipeline.core.represent.summarize_scoring import _analyze, _Msg, _render

# --------------------------------------------------------------------------- title


def _participants(lines: Sequence[Line]) -> list[str]:
    seen: dict[str, None] = {}
    for ln in lines:
        if ln.sender and ln.type != "system":
            seen.setdefault(ln.sender, None)
    return list(seen)


def _title_terms_en(lines: Sequence[Line], msgs: list[_Msg]) -> list[str]:
    speakers = {w.lower() for s in _participants(lines) for w in _EN_WORD.findall(s)}
    # key -> [score, first index, display]
    items: dict[str, list] = {}

    def add(key: str, display: str, weight: float, order: int) -> None:
        it = items.get(key)
        if it is None:
            items[key] = [weight, order, display]
        else:
            it[0] += weight

    mid_caps = set().union(*(m.names for m in msgs)) if msgs else set()

    def nickname(term: str) -> bool:  # "Mel" for the speaker Melanie
        return any(sp.startswith(term) for sp in speakers)

    def weak(word: str) -> bool:
        lw = word.lower()
        return lw in _EN_STOP or lw in _EN_TITLE_STOP or lw in _EN_CALENDAR or lw in speakers

    for m in msgs:
        seen_here: set[str] = set()
        text = m.text
        for hit in _EN_PHRASE.finditer(text):
            words = hit.group().split()
            before = text[: hit.start()].rstrip()
            if (not before or before[-1] in ".!?…") and words[0].lower() not in mid_caps:
                words.pop(0)  # "Return Nozomi 44": a capitalised sentence start is no name
            while words and weak(words[0]):
                words.pop(0)
            while words and (words[-1].lower() in _EN_STOP or words[-1].lower() in _EN_CALENDAR):
                words.pop()
            if len(words) < 2 or any(w.lower() in speakers for w in words):
                continue
            key = " ".join(words).lower()
            if key not in seen_here:
                seen_here.add(key)
                add(key, " ".join(words), 4.0, m.idx)
        for t in sorted(m.terms):
            if t in speakers or t in _EN_TITLE_STOP or t in _EN_CALENDAR:
                continue
            if t in m.names and nickname(t):
                continue
            if t in m.names:
                display = next((w for w in _EN_WORD.findall(m.text) if w.lower() == t), t)
                add(t, display, 3.0, m.idx)
            elif len(t) >= 4:
                add(t, t, 1.0 + (0.5 if m.kind else 0.0), m.idx)
    ranked = sorted(items.items(), key=lambda kv: (-kv[1][0], kv[1][1], kv[0]))
    # A name that is part of a multi-word entity is shown as the entity: "Zepp" -> "Zepp Haneda".
    phrase_of: dict[str, str] = {}
    for key, _ in ranked:
        if " " in key:
            for w in key.split():
                phrase_of.setdefault(w, key)
    out: list[str] = []
    used: list[str] = []
    for key, (score, _, display) in ranked:
        if score < 2.0 and out:
            break  # a term said once is not a topic
        if " " not in key and key in phrase_of:
            key = phrase_of[key]
            display = items[key][2]
        if any(key in u or u in key for u in used):
            continue
        out.append(display)
        used.append(key)
        if len(out) >= 6:
            break
    return out


def _title_terms_ja(lines: Sequence[Line], msgs: list[_Msg]) -> list[str]:
    speakers = set(_participants(lines))
    speakers |= {s.lower() for s in speakers}
    items: dict[str, list] = {}
    for m in msgs:
        for t in sorted(m.terms):
            if t in speakers or len(t) < 2 or t.isascii() and t not in m.names:
                continue
            if t in m.names:
                w = 2.0
            elif "\u30a1" <= t[0] <= "\u30fc":
                w = 1.0 if len(t) > 2 else 0.5  # 2-kana runs are often fragments (段ボール)
            else:
                w = 1.0
            if m.kind:
                w += 0.5
            it = items.get(t)
            if it is None:
                items[t] = [w, m.idx]
            else:
                it[0] += w
    ranked = sorted(items.items(), key=lambda kv: (-kv[1][0], kv[1][1], kv[0]))
    out: list[str] = []
    for t, (score, _) in ranked:
        if any(t in o or o in t for o in out):
            continue
        if score < 2.0 and out:
            break
        out.append(t)
        if len(out) >= 6:
            break
    return out


def _date_label(lines: Sequence[Line], lang: str) -> str:
    ts = min(ln.local_ts for ln in lines)
    return f"{ts.month}月{ts.day}日" if lang == "ja" else ts.strftime("%Y-%m-%d")


def session_title(lines: list[Line], lang: str | None = None) -> str:
    """A short deterministic title from the session's most salient terms and named entities.

    English: 3–6 words, ``"Head: term, term"`` with the top entity first (e.g.
    ``"Kyoto: ryokan, Fushimi Inari, shinkansen"``); Japanese: about 8–20 characters,
    ``"京都：旅館・新幹線"``. Speakers' own names are left out (every message has them).
    Never empty: without salient terms it falls back to participants and date.
    """
    msgs, lang = _analyze(lines, lang)
    if not lines:
        return "空のトーク" if lang == "ja" else "Empty chat, no messages"
    people = _participants(lines)
    date = _date_label(lines, lang)
    if lang == "ja":
        return _assemble_title_ja(_title_terms_ja(lines, msgs), people, date)
    return _assemble_title_en(_title_terms_en(lines, msgs), people, date)


def _assemble_title_en(terms: list[str], people: list[str], date: str) -> str:
    chosen: list[str] = []
    nwords = 0
    for t in terms:
        n = len(t.split())
        if nwords + n > 6:
            continue
        chosen.append(t)
        nwords += n
        if len(chosen) >= 4 or nwords >= 5:
            break
    if chosen:
        head = chosen[0][0].upper() + chosen[0][1:]
        title = head + (": " + ", ".join(chosen[1:]) if len(chosen) > 1 else "")
        if nwords < 3 and people:
            title = f"{title} with {people[0]}"
        if len(title.split()) < 3:
            title = f"{title}, {date}"
        return " ".join(title.split()[:6])
    who = ", ".join(people[:3]) or "unknown"
    title = f"Chat with {who}, {date}"
    words = title.split()
    return " ".join(words[:6]) if len(words) > 6 else title


def _assemble_title_ja(terms: list[str], people: list[str], date: str) -> str:
    chosen: list[str] = []
    length = 0
    for t in terms:
        add = len(t) + (1 if chosen else 0)
        if length + add > 20:
            continue
        chosen.append(t)
        length += add
        if len(chosen) >= 4:
            break
    who = "・".join(people[:2]) or "不明"
    if chosen:
        title = chosen[0] + ("：" + "・".join(chosen[1:]) if len(chosen) > 1 else "")
        for extra in (f"（{who}）", f"（{date}）", f"（{who}、{date}）"):
            if len(title) >= 8:
                break
            if len(title) + len(extra) <= 20:
                title += extra
        return title[:20]
    title = f"{who}とのトーク（{date}）"
    return title if len(title) <= 20 else f"{who[:6]}とのトーク（{date}）"


# --------------------------------------------------------------------------- bullets


def session_bullets(lines: list[Line], lang: str | None = None, max_bullets: int = 5) -> list[str]:
    """Bullets of a session's decisions, commitments and context, extracted verbatim.

    Messages with plan/decision markers (EN "let's", "booked", "deal"…; JA しよう, 決まった,
    予約…) become ``"Decision: <speaker>: <message>"``, first-person promises (EN "I'll",
    "I promise"…; JA 〜とく, 〜ておく, 送るね, 約束…) ``"Commitment: …"``; they are picked
    first, best-scored first. Remaining slots go to the most salient other messages
    (``"Context: …"``). Japanese uses 決定: / 約束: / 背景:. Near-duplicate messages are
    skipped, messages are trimmed to ~140 characters, and bullets are listed decisions,
    commitments, then context, each group in time order. Deterministic.
    """
    if max_bullets <= 0:
        return []
    msgs, lang = _analyze(lines, lang)
    labels = BULLET_LABELS[lang]
    ranked = sorted(msgs, key=lambda m: (-m.score, m.idx))
    chosen: list[tuple[str, _Msg]] = []
    covered: set[str] = set()

    def take(m: _Msg, kind: str) -> None:
        nonlocal covered
        chosen.append((kind, m))
        covered |= m.terms

    def fresh(m: _Msg) -> bool:
        return not m.terms or len(m.terms & covered) < _ECHO_OVERLAP * len(m.terms)

    for m in ranked:
        if len(chosen) >= max_bullets:
            break
        if m.kind and not m.greeting and fresh(m) and (m.terms or m.nwhen):
            take(m, m.kind)
    for m in ranked:
        if len(chosen) >= max_bullets:
            break
        if m.kind or m.greeting or m.short or not m.terms or not fresh(m):
            continue
        if m.names or m.nwhen or m.money or m.number or len(m.terms) >= 3:
            take(m, "context")
    order = {"decision": 0, "commitment": 1, "context": 2}
    chosen.sort(key=lambda km: (order[km[0]], km[1].idx))
    return [
        f"{labels[kind]} {_render(m.sender, trim_text(m.text, BULLET_MAX_CHARS))}"
        for kind, m in chosen
    ]
