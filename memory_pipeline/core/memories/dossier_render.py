"""Rendering a dossier state as Markdown: the sections in order, each bullet citing its
sessions, every chat-derived text escaped.
"""

from __future__ import annotations

import datetime as dt
import functools
import re

from memory_pipeline.core.common.escape import escape_markdown as _md
from memory_pipeline.core.memories.dossier_fold import _plan_open, median_bucket
from memory_pipeline.core.memories.dossier_state import (
    EMPTY_BULLET,
    MAX_PATTERN_CITES,
    MAX_PLAN_BULLETS,
    MAX_PROFILE_BULLETS,
    RECENT_TOPIC_DAYS,
    RESPONSE_LABELS,
    SECTIONS,
    TITLE_PREFIX,
    UPDATED_PREFIX,
    WEEKDAYS,
    DossierState,
)
from memory_pipeline.core.memories.dossier_timeline import _timeline_bullets
from memory_pipeline.core.memories.dossier_words import _cite, _clean, _near_duplicate, _norm

# -- rendering ---------------------------------------------------------------------------------


def render_markdown(state: DossierState, owner_label: str = "you") -> str:
    """The dossier page: five sections, every bullet ending with its session citations.

    Every text that came from a chat (names, statements, titles, contexts, bookings) goes
    through ``escape_markdown`` here, at the last step: a page is opened in viewers that
    render HTML, and a name or message holding ``<script>`` or ``[x](javascript:…)`` must
    show as text. The state keeps the text as it was."""
    owner_label = _md(owner_label)
    day = dt.date.fromisoformat(state.last_updated)
    sections = {
        SECTIONS[0]: _profile_bullets(state, owner_label),
        SECTIONS[1]: _plan_bullets(state, day, owner_label),
        SECTIONS[2]: _pattern_bullets(state, owner_label),
        SECTIONS[3]: _topic_bullets(state, day),
        SECTIONS[4]: _timeline_bullets(state),
    }
    lines = [f"{TITLE_PREFIX}{_md(_clean(state.name))}", f"{UPDATED_PREFIX}{state.last_updated}"]
    for title, bullets in sections.items():
        lines += ["", f"## {title}", *(bullets or [EMPTY_BULLET])]
    return "\n".join(lines) + "\n"


def _who(entry: dict, state: DossierState, owner_label: str) -> str:
    """A subject prefix, unless the subject is the contact or the text already names it."""
    subject = entry["subject"]
    if not subject or subject == state.contact_id or subject in entry["text"]:
        return ""
    return f"{owner_label if entry['subject_is_owner'] else _md(subject)}: "


def _entry_sessions(entry: dict) -> list[str]:
    prev = entry["previous"]
    return [*entry["sessions"], *([prev["session_id"]] if prev else [])]


def _profile_bullets(state: DossierState, owner_label: str) -> list[str]:
    """Single-valued attributes first (the key context), then the rest, most recent first."""
    ranked = sorted(
        (e for e in state.profile if _profile_line_ok(state, e["text"])),
        key=lambda e: (not e["attribute"], -e["valid_from_us"], e["key"]),
    )[:MAX_PROFILE_BULLETS]
    out: list[str] = []
    said: list[str] = []
    for e in ranked:
        if _near_duplicate(state, e["text"], said):
            continue  # "... when Maria and Yuki arrive" beside "... when Maria and others arrive"
        said.append(e["text"])
        notes = []
        if e["attribute"]:
            notes.append(f"since {_md(e['since'])}")
        if e["previous"]:
            prev = e["previous"]["value"] or e["previous"]["text"]
            notes.append(f"previously: {_md(prev)}")
        note = f" ({'; '.join(notes)})" if notes else ""
        who = _who(e, state, owner_label)
        out.append(f"- {who}{_md(e['text'])}{note} {_cite(_entry_sessions(e))}")
    return out


# Logistics, not who someone is: a clock time or a price ("From 15:00", "18,500 yen", "19時").
_LOGISTICS = re.compile(r"\b\d{1,2}:\d{2}\b|\d{1,2}時|\d[\d,]*\s*(?:yen\b|円)|[$¥€£]\s?\d", re.I)


def _profile_line_ok(state: DossierState, text: str) -> bool:
    """A profile line states who the person is: it opens with them (their name, as subject
    or possessor) and carries no logistics. Shown only (the state keeps every entry), so
    the fold is unchanged; trip times and prices stay under Ongoing and the Timeline."""
    if _logistics(text):
        return False
    return any(n and text.startswith(n) for n in (*state.speakers, state.contact_id))


@functools.lru_cache(maxsize=8192)
def _logistics(text: str) -> bool:
    """``text`` names a clock time or a price: asked of every profile entry on every day's
    render (hundreds of entries, the same ones day after day), so remembered per text."""
    return _LOGISTICS.search(text) is not None


def _plan_bullets(state: DossierState, day: dt.date, owner_label: str) -> list[str]:
    """Dated plans and the days the chats mention, soonest first, then undated plans most
    recently stated first. A dated plan carries the context of the day it is for (what the
    chat said about that day), so "Yuki will go on the 17th" says what the 17th is."""
    iso = day.isoformat()
    open_plans = [e for e in state.plans if _plan_open(e, day)]
    agenda = sorted(
        (a for a in state.agenda if a["end"] >= iso), key=lambda a: (a["date"], a["key"])
    )
    used: set[str] = set()
    dated: list[tuple[str, str, str]] = []
    for e in sorted(
        (e for e in open_plans if e["event_date"]), key=lambda e: (e["event_date"], e["key"])
    ):
        who = _who(e, state, owner_label)
        sessions = _entry_sessions(e)
        tail = ""
        if e["previous"]:
            tail += f" (previously: {_md(e['previous']['value'] or e['previous']['text'])})"
        when = _md(e["event_date"])
        a = next((a for a in agenda if a["date"] <= e["event_date"] <= a["end"]), None)
        if a is not None and a["key"] not in used:
            used.add(a["key"])
            if _norm(a["context"]) != _norm(e["text"]):
                tail += f" — {_md(a['context'])}"
            if a["booked"]:
                tail += f" (booked: {_md(', '.join(a['booked']))})"
            if a["date"] == e["event_date"] and a["end"] != e["event_date"]:
                when = f"{when} to {_md(a['end'])}"
            sessions = [*sessions, *a["sessions"]]
        line = f"- {when} — {who}{_md(e['text'])}{tail} {_cite(sessions)}"
        dated.append((e["event_date"], e["key"], line))
    for a in agenda:
        if a["key"] in used:
            continue
        when = a["date"] if a["date"] == a["end"] else f"{a['date']} to {a['end']}"
        booked = f" (booked: {_md(', '.join(a['booked']))})" if a["booked"] else ""
        what = f"{_md(a['title'])}: {_md(a['context'])}"
        line = f"- {_md(when)} — {what}{booked} {_cite(a['sessions'])}"
        dated.append((a["date"], a["key"], line))
    undated = sorted(
        (e for e in open_plans if not e["event_date"]),
        key=lambda e: (-e["valid_from_us"], e["key"]),
    )
    out = [line for _, _, line in sorted(dated)]
    for e in undated:
        who = _who(e, state, owner_label)
        tail = f" (mentioned {_md(e['stated'])})"
        if e["previous"]:
            tail += f" (previously: {_md(e['previous']['value'] or e['previous']['text'])})"
        out.append(f"- {who}{_md(e['text'])}{tail} {_cite(_entry_sessions(e))}")
    return out[:MAX_PLAN_BULLETS]


def _pattern_cite(sessions: list[str]) -> str:
    """The sessions a pattern bullet counts (the latest MAX_PATTERN_CITES of them)."""
    return _cite(sessions[-MAX_PATTERN_CITES:])


def _pattern_bullets(state: DossierState, owner_label: str) -> list[str]:
    """Counts, active hours/days and median reply times, each citing the sessions it counts
    (the latest ``MAX_PATTERN_CITES`` when there are more, and then it says so)."""
    if not state.sessions_total:
        return []
    name = _md(_clean(state.name))
    system = f", system {state.system_messages}" if state.system_messages else ""

    def more(sessions: list[str]) -> str:
        extra = len(sessions) - MAX_PATTERN_CITES
        cited = f" (latest {MAX_PATTERN_CITES} of {len(sessions)} sessions cited)"
        return cited if extra > 0 else ""

    counted = state.counted or [state.first_session, state.last_session]
    out = [
        f"- Messages: {state.messages_total} over {state.sessions_total} sessions, "
        f"{state.first_date} to {state.last_updated} ({name} {state.contact_messages}, "
        f"{owner_label} {state.owner_messages}{system}){more(counted)} {_pattern_cite(counted)}"
    ]
    hours = _top(state.hours, 3)
    days = _top(state.weekdays, 3)
    if hours:
        hour_text = ", ".join(f"{h:02d}:00–{(h + 1) % 24:02d}:00 ({n})" for h, n in hours)
        day_text = ", ".join(f"{WEEKDAYS[d]} ({n})" for d, n in days)
        in_top = {sid for h, _ in hours for sid in state.hour_sessions[h]}
        top = [sid for sid in counted if sid in in_top] or counted
        out.append(
            f"- Most active hours: {hour_text}; most active days: {day_text}{more(top)} "
            f"{_pattern_cite(top)}"
        )
    parts = []
    for label, hist in ((name, state.contact_replies), (owner_label, state.owner_replies)):
        b = median_bucket(hist)
        if b is not None:
            parts.append(f"{label} ~{RESPONSE_LABELS[b]} (n={sum(hist)})")
    if parts:
        replies = state.reply_sessions or counted
        out.append(
            f"- Median response time: {', '.join(parts)}{more(replies)} {_pattern_cite(replies)}"
        )
    return out


def _top(hist: list[int], k: int) -> list[tuple[int, int]]:
    """The k largest non-zero bins as (index, count), ties by index."""
    ranked = sorted(((i, n) for i, n in enumerate(hist) if n), key=lambda p: (-p[1], p[0]))
    return ranked[:k]


def _topic_bullets(state: DossierState, day: dt.date) -> list[str]:
    """Titles of the latest sessions within RECENT_TOPIC_DAYS, newest first, each followed by
    its key statements as sub-bullets (one statement a line, each citing the session)."""
    floor = (day - dt.timedelta(days=RECENT_TOPIC_DAYS)).isoformat()
    recent = [r for r in reversed(state.recent) if r["date"] >= floor]
    out = []
    for r in recent:
        cite = _cite([r["session_id"]])
        out.append(f"- {_md(r['date'])} — {_md(r['title'])} {cite}")
        out += [f"  - {_md(p)} {cite}" for p in r.get("points") or []]
    return out
