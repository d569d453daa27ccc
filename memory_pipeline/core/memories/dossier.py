"""Per-contact living dossiers: a Markdown page per contact, folded day by day.

A dossier is rendered from a small JSON state (``DossierState``) so that day D's version needs
only day D-1's state plus D's sessions, messages, session titles and memories. The fold is
pure (no wall clock, input rows sorted inside), so a range built in one run equals building
night by night through the stored JSON.

The page (every bullet ends with its sources as ``[sessions: ses_x, ses_y]``)::

    # Dossier: Maria
    Last Updated: 2024-03-14

    ## Profile & Key Context
    - Maria works at Hikari Design (since 2024-03-05; previously: Acme) [sessions: ses_a, ses_b]
    ## Ongoing Projects & Commitments
    - 2024-03-23 — Kyoto trip [sessions: ses_c]
    ## Communication Patterns
    - Messages: 101 over 12 sessions, ... [sessions: ses_first, ses_last]
    ## Recent Topics
    - 2024-03-14 — <session title> [sessions: ses_d]
    ## Timeline
    - 2024-03-01 — Maria got the job at Hikari Design [sessions: ses_a]

Policies (documented here because the page is their only trace):

- Profile = facts, preferences, relationships and possessions whose subject is not the owner.
  A memory with an ``attribute`` is single-valued: the latest statement per (subject,
  attribute) by ``valid_from`` is current; the latest differing older value is shown as
  "previously: …" (and its session cited); older values are dropped. Memories without an
  attribute are kept per distinct (subject, kind, text), citing up to 3 sessions.
- Ongoing = plans and events of either party dated on/after the dossier date, or undated and
  stated in the last ``UNDATED_PLAN_DAYS`` days (the state drops the rest as days pass).
- Communication patterns count every message of the contact's sessions; ``system`` messages
  (LINE notices) count in the total only, not for a side, hours, weekdays or replies. A reply
  time is the gap from the last message of one side to the next message of the other side in
  the same session, kept in fixed buckets so a median needs no samples.
- Timeline = each session's ``TIMELINE_PER_SESSION`` most informative distinct statements
  about the contact side (``information_value``: names, numbers, dates, a named life change,
  content words; ties in the order of its memories, key events first, then by kind, then
  what the contact told; of two wordings of one thing the fuller one; English lines valued
  below ``MIN_TIMELINE_VALUE`` left out), each as its lead sentence cut to the clause that
  states what happened (``compact_event``), at most ``TIMELINE_CHARS_PER_PERIOD`` characters
  a month (every session's first before any second) over the last ``TIMELINE_PERIODS``
  months: what happened stays on the page after Recent Topics moves on, and the page stops
  growing.
- The owner's own statements stay off a contact's page: the owner's memories and summary
  quotes are not profile, topic points or Timeline entries, and their undated plans are not
  Ongoing; a dated plan of the owner's (a commitment to the contact) stays under Ongoing.
  Lines that say the same thing (equal words once names, dates and small words are set
  aside, or ``NEAR_DUPLICATE`` overlap) are shown once.
- Contact isolation: rows of other contacts, sessions of other days and memories of sessions
  not in the input are ignored, so callers may pass whole-day tables.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import hashlib
import json
import os
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from memory_pipeline.core.common.escape import escape_markdown as _md
from memory_pipeline.core.common.escape import unsafe_markup
from memory_pipeline.core.common.schema import DOSSIERS
from memory_pipeline.core.common.timelex import MONTH_NAME_PATTERN
from memory_pipeline.core.memories.dossier_text import (
    LIFE_EVENT,
    MIN_DISCLOSURE,
    booked_items,
    compact_event,
    cut_words,
    disclosure_score,
    find_dates,
    information_value,
    is_question,
    sentences_of,
    statement,
    whole_word_title,
)

STATE_VERSION = 3
OLD_STATE_VERSIONS = (1, 2)  # read by filling the fields added since with their defaults
METHOD = "deterministic"

PROFILE_KINDS = ("fact", "preference", "relationship", "possession")
PLAN_KINDS = ("plan", "event")

UNDATED_PLAN_DAYS = 14  # an undated plan stays "ongoing" this many days after it was stated
RECENT_TOPIC_DAYS = 30  # Recent Topics shows sessions of the last 30 days ...
RECENT_TOPICS = 5  # ... at most this many
MAX_PROFILE_BULLETS = 15
MAX_PLAN_BULLETS = 10
MAX_SESSIONS_PER_BULLET = 3
MAX_PROFILE_STATE = 200  # entries kept in the state (most recent), so it stays small
MAX_PLAN_STATE = 100
MAX_TEXT_CHARS = 300
MAX_POINT_CHARS = 160  # a Recent Topics point or a plan's context, cut at a word boundary
TOPIC_POINTS = 6  # statements shown per Recent Topics session
DISCLOSURES_PER_SIDE = 2  # what each side said about themselves, per session
MAX_AGENDA_STATE = 100
BOOKED_WINDOW = 3  # a booking counts for a day mentioned within this many messages of it
MAX_PATTERN_CITES = 40  # pattern bullets cite at most the latest this many counted sessions
TIMELINE_PER_SESSION = 5  # what a session adds to the Timeline: its key statements ...
# ... at most this many characters a month (each session's first ones first): the bound the
# page had as 12 lines of up to MAX_POINT_CHARS, kept as characters
TIMELINE_CHARS_PER_PERIOD = 12 * MAX_POINT_CHARS
TIMELINE_LEAD_WORDS = 6  # a Timeline line is a statement's lead sentence(s) of this many words
TIMELINE_PERIODS = 24  # months kept: the page covers two years and stops growing
MIN_TIMELINE_VALUE = 3  # an English line below this information_value is not an event to list
_KIND_RANK = {"event": 0, "plan": 1, "fact": 2, "relationship": 3, "possession": 4, "preference": 5}
NEAR_DUPLICATE = 0.8  # word-set overlap (Jaccard) at which two statements say the same
_PLAN_WORDS = re.compile(
    r"\b(?:will|going to|gonna|plan(?:ning)? to|tomorrow|next\s+\w+)\b|'ll\b|’ll\b"
    r"|予定|つもり|明日|来週",
    re.I,
)
_POINT_LABEL = re.compile(r"^(?:Decision|Commitment|Context|決定|約束|背景)[:：]\s*")

# Reply-time buckets: upper bounds in seconds; the last bucket is "longer than the last bound".
RESPONSE_BOUNDS = (60, 120, 300, 600, 1800, 3600, 3 * 3600, 6 * 3600, 24 * 3600)
RESPONSE_LABELS = (
    "<1 min",
    "1–2 min",
    "2–5 min",
    "5–10 min",
    "10–30 min",
    "30–60 min",
    "1–3 h",
    "3–6 h",
    "6–24 h",
    ">24 h",
)
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")

TITLE_PREFIX = "# Dossier: "
UPDATED_PREFIX = "Last Updated: "
SECTIONS = (
    "Profile & Key Context",
    "Ongoing Projects & Commitments",
    "Communication Patterns",
    "Recent Topics",
    "Timeline",
)
EMPTY_BULLET = "- (nothing yet)"
SESSION_ID_RE = re.compile(r"ses_[0-9a-f]{20}")
_CITATION_RE = re.compile(r"\s\[sessions: ([^\[\]]+)\]$")


@dataclass
class DossierState:
    """Everything tomorrow's update needs, as JSON-native values (ints, strings, lists, dicts).

    Dates are ISO strings and instants integer microseconds, so ``to_json``/``from_json`` is
    exact. ``profile`` and ``plans`` hold memory entries (see the module docstring);
    ``recent`` the last sessions with their titles and up to ``TOPIC_POINTS`` statements;
    ``agenda`` the explicit upcoming days the chats mention (spans, with context); the
    histograms are ``hours`` (local hour, 24), ``weekdays`` (Mon..Sun, 7) and reply times per
    side (``RESPONSE_BOUNDS`` + 1), and ``counted`` / ``hour_sessions`` / ``reply_sessions``
    the sessions each pattern bullet counts (so it can cite them). ``speakers`` are the
    contact-side senders: only what they say about themselves is profile.
    """

    contact_id: str
    name: str
    last_updated: str = ""
    first_date: str = ""
    first_session: str = ""
    last_session: str = ""
    last_start_us: int = 0
    sessions_total: int = 0
    messages_total: int = 0
    contact_messages: int = 0
    owner_messages: int = 0
    system_messages: int = 0
    hours: list[int] = field(default_factory=lambda: [0] * 24)
    weekdays: list[int] = field(default_factory=lambda: [0] * 7)
    contact_replies: list[int] = field(default_factory=lambda: [0] * len(RESPONSE_LABELS))
    owner_replies: list[int] = field(default_factory=lambda: [0] * len(RESPONSE_LABELS))
    profile: list[dict] = field(default_factory=list)
    plans: list[dict] = field(default_factory=list)
    recent: list[dict] = field(default_factory=list)
    agenda: list[dict] = field(default_factory=list)
    owner_name: str = ""
    speakers: list[str] = field(default_factory=list)
    counted: list[str] = field(default_factory=list)
    hour_sessions: list[list[str]] = field(default_factory=lambda: [[] for _ in range(24)])
    reply_sessions: list[str] = field(default_factory=list)
    timeline: list[dict] = field(default_factory=list)
    version: int = STATE_VERSION

    def to_json(self) -> str:
        """Canonical JSON (sorted keys, no whitespace): equal states give equal strings.

        The fields are JSON-native already, so they are dumped as they are: the recursive
        copy ``dataclasses.asdict`` makes first was about a third of a nightly fold."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return json.dumps(fields, sort_keys=True, ensure_ascii=False, separators=(",", ":"))

    def copy(self) -> DossierState:
        """A deep copy (the state is folded on a copy): of JSON-native values, so a walk of
        lists and dicts, several times cheaper than ``copy.deepcopy``'s general one."""
        return DossierState(
            **{f.name: _json_copy(getattr(self, f.name)) for f in dataclasses.fields(self)}
        )

    @classmethod
    def from_json(cls, text: str) -> DossierState:
        """Parse ``to_json`` output; refuses unknown versions and fields rather than guess."""
        data = json.loads(text)
        if data.get("version") in OLD_STATE_VERSIONS:
            data["version"] = STATE_VERSION  # the new fields start empty
        if data.get("version") != STATE_VERSION:
            raise ValueError(f"unsupported dossier state version {data.get('version')!r}")
        names = {f.name for f in dataclasses.fields(cls)}
        if unknown := sorted(set(data) - names):
            raise ValueError(f"unknown dossier state fields {unknown}")
        return cls(**data)


def _json_copy(value: Any) -> Any:
    """A deep copy of JSON-native data (lists, dicts, and immutable scalars)."""
    if isinstance(value, list):
        return [_json_copy(v) for v in value]
    if isinstance(value, dict):
        return {k: _json_copy(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_json_copy(v) for v in value)
    return value


# -- folding -----------------------------------------------------------------------------------


@dataclass
class _Msg:
    ts_us: int
    hour: int
    weekday: int
    side: str  # "owner" | "contact" | "system"
    sender: str = ""
    text: str = ""
    date: dt.date | None = None  # local date


@dataclass
class _ContactDay:
    sessions: list[dict]  # sorted by (start_us, session_id)
    memories: list[dict]  # sorted by (valid_from_us, memory_id)


def update_dossier(
    state: DossierState | None,
    *,
    contact_id: str,
    day: dt.date,
    sessions: pa.Table,
    messages: pa.Table,
    enrichment: pa.Table,
    memories: pa.Table,
) -> DossierState:
    """Yesterday's state + the contact's sessions owned by ``day`` -> today's state.

    A pure fold over ``day`` (rows of other contacts or days are ignored); ``messages`` must
    hold every message of those sessions. ``state`` is not modified. With no session of the
    contact on ``day`` the state is returned unchanged (ValueError when there is none).
    """
    if state is not None and state.contact_id != contact_id:
        raise ValueError(f"state of {state.contact_id!r} passed for {contact_id!r}")
    days = _prepare(day, sessions, messages, enrichment, memories, only=contact_id)
    if contact_id not in days:
        if state is None:
            raise ValueError(f"no sessions of {contact_id!r} on {day}: nothing to build from")
        return state.copy()
    return _fold(state, contact_id, day, *days[contact_id])


def build_day(
    prev: Mapping[str, DossierState],
    day: dt.date,
    sessions: pa.Table,
    messages: pa.Table,
    enrichment: pa.Table,
    memories: pa.Table,
) -> dict[str, DossierState]:
    """New states of every contact with sessions owned by ``day`` (others are not returned)."""
    per_contact = _prepare(day, sessions, messages, enrichment, memories, only=None)
    return {
        contact: _fold(prev.get(contact), contact, day, *per_contact[contact])
        for contact in sorted(per_contact)
    }


def _prepare(
    day: dt.date,
    sessions: pa.Table,
    messages: pa.Table,
    enrichment: pa.Table,
    memories: pa.Table,
    only: str | None,
) -> dict[str, tuple[_ContactDay, dict[str, _Msg], dict[str, str]]]:
    """Per contact: the day's sessions and memories (sorted), message facts and titles."""
    keep = pc.equal(sessions.column("local_date"), pa.scalar(day, pa.date32()))
    if only is not None:
        keep = pc.and_(keep, pc.equal(sessions.column("contact_id"), only))
    ses = sessions.filter(keep)
    if ses.num_rows == 0:
        return {}
    rows = {
        r["session_id"]: {
            "session_id": r["session_id"],
            "contact_id": r["contact_id"],
            "start_us": _us(r["start_ts"]),
            "message_ids": list(r["message_ids"]),
        }
        for r in ses.select(["session_id", "contact_id", "start_ts", "message_ids"]).to_pylist()
    }
    msgs = _message_facts(messages, {m for r in rows.values() for m in r["message_ids"]})
    titles = _titles(enrichment, set(rows))
    mems = _memories(memories, rows)
    per_contact: dict[str, _ContactDay] = {}
    for r in sorted(rows.values(), key=lambda r: (r["start_us"], r["session_id"])):
        per_contact.setdefault(r["contact_id"], _ContactDay([], [])).sessions.append(r)
    for m in mems:  # already in (valid_from, memory_id) order
        per_contact[m["contact_id"]].memories.append(m)
    return {c: (per_contact[c], msgs, titles) for c in sorted(per_contact)}


def _message_facts(messages: pa.Table, wanted: set[str]) -> dict[str, _Msg]:
    """message_id -> time, local hour/weekday and side, for the wanted ids only."""
    if not wanted:
        return {}
    sub = messages.filter(
        pc.is_in(messages.column("message_id"), value_set=pa.array(sorted(wanted), pa.string()))
    )
    ids = sub.column("message_id").to_pylist()
    ts = pc.cast(sub.column("ts"), pa.int64()).to_pylist()
    hours = pc.hour(sub.column("local_ts")).to_pylist()
    weekdays = pc.day_of_week(sub.column("local_ts")).to_pylist()  # Monday = 0
    owner = sub.column("is_owner").to_pylist()
    types = sub.column("type").to_pylist()
    senders = sub.column("sender").to_pylist()
    texts = sub.column("text").to_pylist()
    dates = [x.date() for x in sub.column("local_ts").to_pylist()]
    facts = {}
    rows = zip(ids, ts, hours, weekdays, owner, types, senders, texts, dates, strict=True)
    for mid, t, h, w, o, ty, who, text, day in rows:
        side = "system" if ty == "system" else ("owner" if o else "contact")
        spoken = text if ty == "text" and side != "system" else ""
        facts[mid] = _Msg(t, h, w, side, who or "", spoken or "", day)
    if missing := wanted - facts.keys():
        raise ValueError(
            f"{len(missing)} messages of the sessions are not in `messages` "
            f"(first: {min(missing)}); pass the messages of every day the sessions span"
        )
    return facts


def _titles(enrichment: pa.Table, session_ids: set[str]) -> dict[str, tuple[str, list[str]]]:
    """session_id -> (cleaned title, summary bullets), for the given sessions (duplicates:
    the largest wins)."""
    rows = zip(
        enrichment.column("session_id").to_pylist(),
        enrichment.column("title").to_pylist(),
        enrichment.column("bullets").to_pylist(),
        strict=True,
    )
    return dict(
        sorted((s, (_clean(t or ""), list(b or []))) for s, t, b in rows if s in session_ids)
    )


def _memories(memories: pa.Table, sessions: dict[str, dict]) -> list[dict]:
    """Memories of the given sessions whose contact matches the session's, in a fixed order.

    A memory without ``valid_from`` counts as stated at its session's start.
    """
    cols = [
        "memory_id",
        "contact_id",
        "session_id",
        "subject",
        "subject_is_owner",
        "kind",
        "attribute",
        "value",
        "text",
        "valid_from",
        "event_date",
        *(["confidence"] if "confidence" in memories.column_names else []),
    ]
    unique: dict[str, dict] = {}
    for r in memories.select(cols).to_pylist():
        session = sessions.get(r["session_id"])
        if session is None or session["contact_id"] != r["contact_id"]:
            continue  # another contact's, or a session not in today's input
        if r["kind"] not in PROFILE_KINDS + PLAN_KINDS:
            continue
        valid_from = r.pop("valid_from")
        r["valid_from_us"] = session["start_us"] if valid_from is None else _us(valid_from)
        unique[r["memory_id"]] = r
    return sorted(unique.values(), key=lambda r: (r["valid_from_us"], r["memory_id"]))


def _fold(
    state: DossierState | None,
    contact_id: str,
    day: dt.date,
    today: _ContactDay,
    msgs: dict[str, _Msg],
    titles: dict[str, tuple[str, list[str]]],
) -> DossierState:
    """Apply one day's sessions and memories of one contact to a copy of ``state``."""
    if state is None:
        st = DossierState(contact_id=contact_id, name=contact_id)
    else:
        if state.contact_id != contact_id:
            raise ValueError(f"state of {state.contact_id!r} passed for {contact_id!r}")
        if state.last_updated and day.isoformat() <= state.last_updated:
            raise ValueError(
                f"dossier of {contact_id!r} is already at {state.last_updated}; "
                f"cannot fold {day} onto it (fold days in increasing order)"
            )
        st = state.copy()
    iso = day.isoformat()
    for s in today.sessions:
        for m in (msgs[i] for i in s["message_ids"]):
            if m.side == "owner" and m.sender and not st.owner_name:
                st.owner_name = m.sender
            if m.side == "contact" and m.sender and m.sender not in st.speakers:
                st.speakers = sorted([*st.speakers, m.sender])
    session_points = {s["session_id"]: [] for s in today.sessions}
    contact_told: dict[str, list[str]] = {}
    own: list[dict] = []
    for s in today.sessions:
        session_msgs = [msgs[m] for m in s["message_ids"]]
        _count_session(st, s["session_id"], session_msgs)
        if not st.first_session:
            st.first_session, st.first_date = s["session_id"], iso
        if (s["start_us"], s["session_id"]) >= (st.last_start_us, st.last_session):
            st.last_start_us, st.last_session = s["start_us"], s["session_id"]
        raw_title, bullets = titles.get(s["session_id"], ("", []))
        title = whole_word_title(raw_title, [m.text for m in session_msgs])
        title = title or f"Conversation ({len(s['message_ids'])} messages)"
        _add_agenda(st, s, title, session_msgs)
        told = _disclosures(st, session_msgs)  # (side, time, statement)
        session_points[s["session_id"]] = [t for side, _, t, _ in told if side == "contact"] + [
            _say(st, b) for b in bullets if not _owner_said(st, b)
        ]
        about_self = [(ts, t) for side, ts, t, plan in told if side == "contact" and not plan]
        contact_told[s["session_id"]] = [t for side, _, t, _ in told if side == "contact"]
        if about_self:  # what the contact says about themselves (its best line a session)
            own.append(_self_memory(contact_id, s["session_id"], *about_self[0]))
        st.recent.append(
            {
                "session_id": s["session_id"],
                "date": iso,
                "start_us": s["start_us"],
                "title": title,
                "points": [],
            }
        )
    profile = {e["key"]: e for e in st.profile}
    plans = {e["key"]: e for e in st.plans}
    heard: dict[str, list[tuple[int, str]]] = {}  # session -> (kind rank, statement)
    stated: dict[str, list[str]] = {}
    for m in sorted([*today.memories, *own], key=lambda r: (r["valid_from_us"], r["memory_id"])):
        text = _say(st, m["text"] or "", subject=m["subject"] or "")
        m = {**m, "text": text}
        if not m["subject_is_owner"]:  # the owner's own statements stay off the contact's page
            stated.setdefault(m["session_id"], []).append(text)
            heard.setdefault(m["session_id"], []).append((_timeline_rank(m), text))
        # a dated or undated plan/event is ongoing; one that sets a single-valued attribute
        # (got a job -> employer, moving -> residence) is also who the person now is
        settled = m["attribute"] and m["event_date"] is None  # "got the job": done, not pending
        owners_own = m["subject_is_owner"] and m["event_date"] is None
        if m["kind"] in PLAN_KINDS and not settled and not owners_own:
            _apply(plans, m, iso)  # the owner's undated plans are theirs, not this contact's
        if (m["kind"] not in PLAN_KINDS or m["attribute"]) and _about_contact(st, m):
            if m["memory_id"].startswith("self:") and _said_already(profile, text):
                continue
            _apply(profile, m, iso)
    for r in st.recent:  # statements: the session's memories first, then its summary bullets
        if r["session_id"] in session_points:
            seen: set[str] = set()
            points = []
            for p in [*stated.get(r["session_id"], []), *session_points[r["session_id"]]]:
                p = _ja_point(st, p)
                p = cut_words(p, MAX_POINT_CHARS)
                n = _norm(p)
                if (
                    p
                    and not any(n in q or q in n for q in seen)
                    and not _near_duplicate(st, p, points)
                    and len(points) < TOPIC_POINTS
                ):
                    seen.add(_norm(p))
                    points.append(p)
            r["points"] = points
    st.recent = sorted(st.recent, key=lambda r: (r["start_us"], r["session_id"]))[-RECENT_TOPICS:]
    for s in today.sessions:  # its memories about the contact side, then what they told
        said = [t for _, t in sorted(heard.get(s["session_id"], []), key=lambda p: p[0])]
        _add_timeline(st, s, [*said, *contact_told.get(s["session_id"], [])], iso)
    st.profile = _keep_recent(profile.values(), MAX_PROFILE_STATE)
    st.timeline = _keep_timeline(st.timeline)
    st.plans = _keep_recent((e for e in plans.values() if _plan_open(e, day)), MAX_PLAN_STATE)
    st.agenda = sorted(
        sorted(
            (a for a in st.agenda if a["end"] >= iso),
            key=lambda a: (a["start_us"], a["key"]),
        )[-MAX_AGENDA_STATE:],
        key=lambda a: a["key"],
    )
    st.last_updated = iso
    return st


_JA_FILLER_SENTENCE = re.compile(
    r"^(?:じゃあ|では|うん|おけ|了解|助かる|ありがとう)[^。！!]{0,6}[。！!]\s*"
)
_JA_OPEN_QUESTION = re.compile(r"(?:何|どう|いつ|どこ|誰|どれ)[^。！!]*(?:思う|かな|の)$")
_JA_NO_PREDICATE = re.compile(r"[\d時分〜~ー]$")


def _ja_point(st: DossierState, text: str) -> str:
    """A Japanese point as a statement: a filler sentence after the name is dropped
    (健太は、じゃあそれで。13日に… -> 健太は13日に…); a question without its mark (何がいいと
    思う) or a line with no predicate (健太は10時〜17時) is no statement ("" = not shown)."""
    if not _JA_RUN.search(text):
        return text
    names = sorted((n for n in (*st.speakers, st.contact_id) if n), key=len, reverse=True)
    name = next((n for n in names if text.startswith(n)), "")
    head = ""
    body = text
    if name:
        found = re.match(rf"{re.escape(name)}(?:は|が|も)?[、,]?", text)
        head, body = text[: found.end()], text[found.end() :]
    rest = _JA_FILLER_SENTENCE.sub("", body)
    if not rest.strip() or _JA_OPEN_QUESTION.search(rest) or _JA_NO_PREDICATE.search(rest):
        return ""
    if rest == body:
        return text
    head = head.rstrip("、,")
    return (head if head.endswith(("は", "が", "も")) or not head else head + "は") + rest


def _timeline_rank(m: dict) -> tuple[bool, int]:
    """Timeline order inside a session: key events first (a life change the statement names,
    or a resolved date), then by kind (events, plans, facts, ...). Why: a session says many
    things; the Timeline keeps the few a person would list when asked what happened."""
    key = bool(LIFE_EVENT.search(m["text"] or "")) or m["event_date"] is not None
    return (not key, _KIND_RANK.get(m["kind"], 9))


def _disclosures(st: DossierState, messages: list[_Msg]) -> list[tuple[str, int, str, bool]]:
    """Each side's ``DISCLOSURES_PER_SIDE`` most telling sentences of a session about
    themselves (side, time, statement, is a plan), owner side first, each side's best first;
    sentences scoring below MIN_DISCLOSURE are not kept."""
    ranked: dict[str, list[tuple[int, int, int, str, str]]] = {"owner": [], "contact": []}
    for i, m in enumerate(messages):
        if m.side == "system" or not m.text:
            continue
        for sentence in sentences_of(m.text):
            score = disclosure_score(sentence)
            if score >= MIN_DISCLOSURE:
                ranked[m.side].append((-score, i, m.ts_us, m.sender, sentence))
    out = []
    for side in ("owner", "contact"):
        for _, _, ts_us, sender, sentence in sorted(ranked[side])[:DISCLOSURES_PER_SIDE]:
            said = _say(st, f"{sender}: {sentence}")
            plan = bool(_PLAN_WORDS.search(sentence) or find_dates(sentence, dt.date.min))
            out.append((side, ts_us, cut_words(said, MAX_POINT_CHARS), plan))
    return out


def _self_memory(contact_id: str, session_id: str, ts_us: int, text: str) -> dict:
    """A profile entry for what the contact said about themselves (not an extracted memory:
    the fold's own, cited to its session like one)."""
    key = f"{session_id}\x1f{text}"
    return {
        "memory_id": "self:" + hashlib.blake2b(key.encode(), digest_size=8).hexdigest(),
        "contact_id": contact_id,
        "session_id": session_id,
        "subject": "",
        "subject_is_owner": False,
        "kind": "fact",
        "attribute": "",
        "value": "",
        "text": text,
        "valid_from_us": ts_us,
        "event_date": None,
    }


def _say(st: DossierState, text: str, subject: str = "") -> str:
    """A memory text or summary bullet as a statement about its speaker (see dossier_text)."""
    text = _POINT_LABEL.sub("", _clean(text))
    contact = st.speakers[0] if len(st.speakers) == 1 else st.contact_id  # a group: its name
    owner = st.owner_name or "you"
    said = statement(text, subject=subject, owner=owner, contact=contact, speakers=st.speakers)
    return _clean(said)


def _said_already(entries: dict[str, dict], text: str) -> bool:
    """A profile entry already states this (one text contains the other)."""
    n = _norm(text)
    return any(n in _norm(e["text"]) or _norm(e["text"]) in n for e in entries.values())


def _about_contact(st: DossierState, m: dict) -> bool:
    """Profile material: about a contact-side speaker (or the contact), not the owner, and
    not someone they only talk about (a friend's transfer is that friend's news)."""
    if m["subject_is_owner"]:
        return False
    subject = m["subject"] or ""
    return not subject or subject == st.contact_id or subject in st.speakers


def _add_agenda(st: DossierState, session: dict, title: str, messages: list[_Msg]) -> None:
    """Fold the explicit upcoming days a session mentions into ``st.agenda``.

    A mention inside an existing span joins it (Kyoto, 23rd to 25th, then "on the 23rd");
    the latest session's longest statement about it becomes the context, and what its
    messages say was booked is listed.
    """
    booked_of: dict[int, list[str]] = {}  # each message's bookings, found once, on demand
    for i, m in enumerate(messages):
        if not m.text or m.date is None:
            continue
        spans = find_dates(m.text, m.date)
        if not spans:  # most messages name no day: their window's bookings are never read
            continue
        booked = []
        for k in range(max(0, i - BOOKED_WINDOW), min(len(messages), i + BOOKED_WINDOW + 1)):
            if k not in booked_of:
                booked_of[k] = booked_items(messages[k].text)
            booked += booked_of[k]
        for start, end in spans:
            a0, a1 = start.isoformat(), end.isoformat()
            item = next((a for a in st.agenda if a["date"] <= a0 and a1 <= a["end"]), None)
            if item is None:
                inside = [a for a in st.agenda if a0 <= a["date"] and a["end"] <= a1]
                item = {
                    "key": f"{a0}\x1f{a1}",
                    "date": a0,
                    "end": a1,
                    "sessions": [],
                    "title": title,
                    "context": "",
                    "context_rank": [0, 0, 0],
                    "booked": [],
                    "start_us": session["start_us"],
                }
                for a in inside:  # a wider span absorbs the days it contains
                    st.agenda.remove(a)
                    item["sessions"] += a["sessions"]
                    item["booked"] += a["booked"]
                    if a["context_rank"] > item["context_rank"]:
                        item["context"], item["context_rank"] = a["context"], a["context_rank"]
                st.agenda.append(item)
            if session["session_id"] not in item["sessions"]:
                item["sessions"].append(session["session_id"])
            said = cut_words(_say(st, f"{m.sender}: {m.text}"), MAX_POINT_CHARS)
            rank = [session["start_us"], 0 if is_question(m.text) else 1, len(said)]
            if rank > item["context_rank"]:
                item["context"], item["context_rank"] = said, rank
                item["title"], item["start_us"] = title, session["start_us"]
            item["booked"] = list(dict.fromkeys([*item["booked"], *booked]))


def _count_session(st: DossierState, session_id: str, messages: list[_Msg]) -> None:
    """Add one session's message counts, hour/weekday histograms and reply times, and note
    which pattern bullets it counts for."""
    st.sessions_total += 1
    st.messages_total += len(messages)
    st.counted.append(session_id)
    prev: _Msg | None = None
    replied = False
    for m in messages:
        if m.side == "system":
            st.system_messages += 1
            continue
        if m.side == "owner":
            st.owner_messages += 1
        else:
            st.contact_messages += 1
        st.hours[m.hour] += 1
        if session_id not in st.hour_sessions[m.hour]:
            st.hour_sessions[m.hour].append(session_id)
        st.weekdays[m.weekday] += 1
        if prev is not None and prev.side != m.side:
            hist = st.owner_replies if m.side == "owner" else st.contact_replies
            hist[response_bucket((m.ts_us - prev.ts_us) // 1_000_000)] += 1
            replied = True
        prev = m
    if replied:
        st.reply_sessions.append(session_id)


def response_bucket(seconds: int) -> int:
    """Index of the reply-time bucket holding ``seconds`` (fixed bounds, see RESPONSE_BOUNDS)."""
    for i, bound in enumerate(RESPONSE_BOUNDS):
        if seconds < bound:
            return i
    return len(RESPONSE_BOUNDS)


def median_bucket(hist: list[int]) -> int | None:
    """The bucket holding the (lower) median sample; None without samples."""
    n = sum(hist)
    if n == 0:
        return None
    rank, seen = (n + 1) // 2, 0
    for i, count in enumerate(hist):
        seen += count
        if seen >= rank:
            return i
    raise AssertionError("unreachable")


def _apply(entries: dict[str, dict], m: dict, iso: str) -> None:
    """Fold one memory into its entry: newer statements of a value supersede older ones."""
    attribute = m["attribute"] or ""
    subject = m["subject"] or ""
    text = _clean(m["text"] or "") or _clean(f"{subject} {attribute}: {m['value'] or ''}")
    if attribute:
        key = f"a\x1f{subject}\x1f{attribute}"
        norm = _norm(m["value"] or text)
    else:
        norm = _norm(text)
        key = f"t\x1f{subject}\x1f{m['kind']}\x1f{norm}"
    stmt = {
        "value": _clean(m["value"] or ""),
        "norm": norm,
        "text": text,
        "stated": iso,
        "valid_from_us": m["valid_from_us"],
        "memory_id": m["memory_id"],
        "session_id": m["session_id"],
        "event_date": m["event_date"].isoformat() if m["event_date"] else None,
    }
    order = (stmt["valid_from_us"], stmt["memory_id"])
    entry = entries.get(key)
    if entry is None:
        entries[key] = {
            "key": key,
            "kind": m["kind"],
            "subject": subject,
            "subject_is_owner": bool(m["subject_is_owner"]),
            "attribute": attribute,
            "since": iso,
            "sessions": [m["session_id"]],
            "previous": None,
            **stmt,
        }
        return
    newer = order > (entry["valid_from_us"], entry["memory_id"])
    if stmt["norm"] == entry["norm"]:
        sessions = [s for s in entry["sessions"] if s != stmt["session_id"]]
        if newer:
            entry.update(stmt, kind=m["kind"], since=min(entry["since"], iso))
            sessions.insert(0, stmt["session_id"])
        else:
            sessions.append(stmt["session_id"])
        entry["sessions"] = sessions[:MAX_SESSIONS_PER_BULLET]
    elif newer:
        old = {k: entry[k] for k in ("value", "text", "stated", "valid_from_us", "memory_id")}
        entry["previous"] = {**old, "session_id": entry["sessions"][0]}
        entry.update(stmt, kind=m["kind"], since=iso, sessions=[stmt["session_id"]])
    else:
        prev = entry["previous"]
        if prev is None or order > (prev["valid_from_us"], prev["memory_id"]):
            entry["previous"] = {
                k: stmt[k]
                for k in ("value", "text", "stated", "valid_from_us", "memory_id", "session_id")
            }


def _plan_open(entry: dict, day: dt.date) -> bool:
    """Still ongoing on ``day``: dated today or later, or undated and stated recently."""
    if entry["event_date"]:
        return entry["event_date"] >= day.isoformat()
    stated = dt.date.fromisoformat(entry["stated"])
    return (day - stated).days < UNDATED_PLAN_DAYS


def _keep_recent(entries, limit: int) -> list[dict]:
    """The ``limit`` most recently stated entries, in key order (a canonical state)."""
    ranked = sorted(entries, key=lambda e: (e["valid_from_us"], e["key"]))[-limit:]
    return sorted(ranked, key=lambda e: e["key"])


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


def _cite(session_ids: list[str]) -> str:
    return f"[sessions: {', '.join(dict.fromkeys(session_ids))}]"


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
    if _LOGISTICS.search(text):
        return False
    return any(n and text.startswith(n) for n in (*state.speakers, state.contact_id))


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


def _clean(text: str) -> str:
    """One line of plain text: whitespace collapsed, no citation look-alikes, bounded at a
    word boundary."""
    text = " ".join(text.split()).replace("[sessions:", "(sessions:")
    return cut_words(text, MAX_TEXT_CHARS)


def _norm(text: str) -> str:
    return " ".join(text.casefold().split())


def _us(ts: dt.datetime) -> int:
    """Aware datetime -> integer microseconds since the epoch (exact, no float)."""
    delta = ts - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


# -- timeline ----------------------------------------------------------------------------------


def _add_timeline(st: DossierState, session: dict, statements: list[str], iso: str) -> None:
    """A session's ``TIMELINE_PER_SESSION`` most informative distinct statements about the
    contact side join the Timeline of its month (``information_value``; ties keep the
    caller's order: key events first, then by kind, then what the contact told). Of two
    wordings of one thing the more informative stays; English lines valued below
    ``MIN_TIMELINE_VALUE`` stay off."""
    names = (*st.speakers, st.owner_name, st.contact_id)
    leads: list[str] = []
    values: list[int] = []  # information_value of each lead
    for text in statements:
        text = cut_words(_lead(_ja_point(st, text), names), MAX_POINT_CHARS)
        if not text:
            continue
        value = information_value(text, names)
        same = next((i for i, t in enumerate(leads) if _near_duplicate(st, text, [t])), None)
        if same is None:
            leads.append(text)
            values.append(value)
        elif value > values[same]:
            leads[same], values[same] = text, value  # two wordings of one thing: the fuller stays
    ranked = sorted(range(len(leads)), key=lambda i: (-values[i], i))
    # a line that says little (a pronoun-opened remark, "Here's a photo …") is left out:
    # the Timeline lists what happened (English: the value has no Japanese signals)
    ranked = [i for i in ranked if _JA_RUN.search(leads[i]) or values[i] >= MIN_TIMELINE_VALUE]
    for rank, i in enumerate(ranked[:TIMELINE_PER_SESSION]):
        st.timeline.append(
            {
                "period": iso[:7],
                "date": iso,
                "session_id": session["session_id"],
                "start_us": session["start_us"],
                "rank": rank,
                "text": leads[i],
            }
        )


def _lead(text: str, names: tuple[str, ...] = ()) -> str:
    """The sentence of a statement that states its event, so a Timeline line is one compact
    sentence: the first sentence naming a life change, else the first sentences up to
    ``TIMELINE_LEAD_WORDS`` words (a Japanese statement: its first sentence); each sentence
    as the clause that states what happened (``compact_event``: no opener, no closing
    feeling)."""
    parts = [compact_event(p, names) for p in sentences_of(text)]
    for part in parts:
        if LIFE_EVENT.search(part) and len(part.split()) >= TIMELINE_LEAD_WORDS:
            return part
    lead = ""
    for part in parts:
        lead = f"{lead} {part}".strip()
        if len(lead.split()) >= TIMELINE_LEAD_WORDS or _JA_RUN.search(lead):
            break
    return lead or text


def _keep_timeline(entries: list[dict]) -> list[dict]:
    """The last ``TIMELINE_PERIODS`` months, each holding its best entries up to
    ``TIMELINE_CHARS_PER_PERIOD`` characters: every session's first statement before any
    session's second (so each conversation of a busy month is still there), earlier sessions
    first. The order is a
    fixed key of each entry alone, so folding night by night keeps what one run keeps."""
    periods = sorted({e["period"] for e in entries})[-TIMELINE_PERIODS:]
    out: list[dict] = []
    for period in periods:
        month = sorted(
            (e for e in entries if e["period"] == period),
            key=lambda e: (e["rank"], e["start_us"], e["session_id"]),
        )
        used = 0
        for e in month:  # a character budget: compact lines let more of a month's events in
            if used + len(e["text"]) > TIMELINE_CHARS_PER_PERIOD:
                break
            used += len(e["text"])
            out.append(e)
    return sorted(out, key=lambda e: (e["start_us"], e["session_id"], e["rank"]))


def _timeline_bullets(state: DossierState) -> list[str]:
    """One line per kept statement, oldest first, dated by its session, citing it; a
    statement the Timeline already holds in other words is shown once."""
    out: list[str] = []
    said: list[str] = []
    for e in state.timeline:
        if _near_duplicate(state, e["text"], said):
            continue
        said.append(e["text"])
        out.append(f"- {_md(e['date'])} — {_md(e['text'])} {_cite([e['session_id']])}")
    return out


# -- near duplicates ---------------------------------------------------------------------------

_WORD = re.compile(r"[a-z0-9]+|[\u3040-\u30ff\u3400-\u9fff]+")
_JA_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")
# A resolved date and the word it replaced say the same ("on 9 March 2024" / "today").
_DAY_WORDS = re.compile(
    rf"\b(?:on\s+)?\d{{1,2}}\s+(?:{MONTH_NAME_PATTERN})\s+\d{{4}}\b"
    r"|\b(?:today|tonight|tomorrow|yesterday)\b",
    re.I,
)
_SMALL_WORDS = frozenset(
    "a an the and or but so to of at on in for with is are was were be will would can let s "
    "then just also really very too".split()
)


def _words(state: DossierState, text: str) -> frozenset[str]:
    """The words of a statement without the people's names ("Maria and others", "Maria and
    Yuki" are the same people), dates and small words: what two bullets are compared on."""
    return _words_of(text, (*state.speakers, state.owner_name, state.contact_id))


@functools.lru_cache(maxsize=4096)
def _words_of(text: str, people: tuple[str, ...]) -> frozenset[str]:
    names = {"others", "other"}
    for n in people:
        names |= set(_WORD.findall((n or "").casefold()))
    for n in people:  # Japanese names are runs inside words: cut them out first
        if n and _JA_RUN.search(n):
            text = text.replace(n, " ")
    words: list[str] = []
    for w in _WORD.findall(_DAY_WORDS.sub(" ", text).casefold()):
        if _JA_RUN.match(w):  # Japanese has no spaces: its character bigrams are the words
            words += [w] if len(w) == 1 else [w[i : i + 2] for i in range(len(w) - 1)]
        else:
            words.append(w)
    return frozenset(w for w in words if w not in names and w not in _SMALL_WORDS)


def _near_duplicate(state: DossierState, text: str, said: list[str]) -> bool:
    """``text`` says what one of ``said`` says: one's words inside the other's, or a Jaccard
    overlap of at least ``NEAR_DUPLICATE``."""
    a = _words(state, text)
    if not a:
        return False
    for other in said:
        b = _words(state, other)
        if b and (a <= b or b <= a or len(a & b) / len(a | b) >= NEAR_DUPLICATE):
            return True
    return False


def _owner_said(state: DossierState, bullet: str) -> bool:
    """A summary bullet quoting the owner ("背景: Yuki: ...", "Commitment: Yuki: ..."): the
    owner's own line, kept off the contact's page (a dated commitment of theirs still shows
    under Ongoing, through its memory or the day's agenda)."""
    owner = state.owner_name
    if not owner:
        return False
    found = re.match(r"^(?:[^:：]{1,20}[:：]\s*)?(?P<who>[^:：]{1,40})[:：]\s", bullet.strip())
    return found is not None and found["who"].strip() == owner


# -- rows --------------------------------------------------------------------------------------


def dossier_rows(states: Mapping[str, DossierState], day: dt.date) -> pa.Table:
    """The DOSSIERS rows of ``day`` (one per state, by contact), markdown rendered."""
    iso = day.isoformat()
    rows = []
    for contact in sorted(states):
        st = states[contact]
        if st.last_updated != iso:
            raise ValueError(f"state of {contact!r} is of {st.last_updated}, not {iso}")
        markdown = render_markdown(st)
        rows.append(
            {
                "contact_id": st.contact_id,
                "local_date": day,
                "name": st.name,
                "markdown": markdown,
                "state": st.to_json(),
                "cited_sessions": cited_sessions(markdown),
                "sessions_total": st.sessions_total,
                "messages_total": st.messages_total,
                "method": METHOD,
            }
        )
    return pa.Table.from_pylist(rows, schema=DOSSIERS)


# -- checkers (asset checks, and guards for an LLM rewrite) -----------------------------------


def _content_lines(markdown: str) -> list[str]:
    """Lines that carry content: not blank, not a heading, not the Last Updated line."""
    return [
        ln.rstrip()
        for ln in markdown.splitlines()
        if ln.strip() and not ln.lstrip().startswith("#") and not ln.startswith(UPDATED_PREFIX)
    ]


def _citation(line: str) -> list[str] | None:
    """The session ids cited at the end of a line; None when it has no valid citation."""
    found = _CITATION_RE.search(line)
    if not found:
        return None
    ids = [p.strip() for p in found.group(1).split(",")]
    return ids if all(SESSION_ID_RE.fullmatch(i) for i in ids) else None


def missing_sections(markdown: str) -> list[str]:
    """Required parts absent from a dossier: title, Last Updated, and the five sections."""
    lines = [ln.rstrip() for ln in markdown.splitlines()]
    missing = []
    if not any(ln.startswith(TITLE_PREFIX) for ln in lines):
        missing.append("title")
    if not any(re.fullmatch(r"Last Updated: \d{4}-\d{2}-\d{2}", ln) for ln in lines):
        missing.append("Last Updated")
    missing += [s for s in SECTIONS if f"## {s}" not in lines]
    return missing


def uncited_bullets(markdown: str) -> list[str]:
    """Content lines without a valid trailing citation (the empty-section line is exempt).

    Every content line of a dossier is a bullet, so stray prose counts too.
    """
    return [
        ln for ln in _content_lines(markdown) if ln.strip() != EMPTY_BULLET and not _citation(ln)
    ]


def cited_sessions(markdown: str) -> list[str]:
    """Every session id cited by a content line, sorted unique."""
    found = {s for ln in _content_lines(markdown) for s in (_citation(ln) or [])}
    return sorted(found)


def check_rewrite(original: str, rewritten: str) -> list[str]:
    """Problems with an LLM rewrite of a dossier (empty = safe to keep the rewrite).

    A rewrite may reword, but must keep every section, every cited session, cite nothing new,
    leave no line uncited and hold no raw HTML or link (a model may copy an escaped
    ``&lt;script&gt;`` back as a live tag); otherwise the caller keeps the deterministic text.
    """
    problems = [f"missing section: {s}" for s in missing_sections(rewritten)]
    before, after = set(cited_sessions(original)), set(cited_sessions(rewritten))
    problems += [f"dropped citation: {s}" for s in sorted(before - after)]
    problems += [f"invented citation: {s}" for s in sorted(after - before)]
    problems += [f"uncited line: {ln}" for ln in uncited_bullets(rewritten)]
    # the rule page escapes every chat text; a rewrite may not bring back HTML or links
    problems += [f"raw markup: {snippet}" for snippet in unsafe_markup(rewritten)]
    return problems


# -- files -------------------------------------------------------------------------------------

_HASH_SUFFIX_RE = re.compile(r"_[0-9a-f]{8}$")
_WINDOWS_RESERVED = {"CON", "PRN", "AUX", "NUL"} | {
    f"{p}{i}" for p in ("COM", "LPT") for i in range(10)
}
MAX_FILE_STEM = 80


def contact_file_name(contact_id: str) -> str:
    """``<contact>.md`` with only letters (CJK too), digits, - and _ in the stem.

    When sanitizing changes the name (or the plain name could be mistaken for a sanitized
    one), a hash of the original is appended, so distinct contacts never share a file.
    """
    stem = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in contact_id)
    stem = stem[:MAX_FILE_STEM]
    if (
        stem != contact_id
        or not stem
        or _HASH_SUFFIX_RE.search(stem)
        or stem.upper() in _WINDOWS_RESERVED
    ):
        digest = hashlib.blake2b(contact_id.encode("utf-8"), digest_size=4).hexdigest()
        stem = f"{stem or 'contact'}_{digest}"
    return f"{stem}.md"


def write_markdown_atomic(folder: Path | str, contact_id: str, markdown: str) -> Path | str:
    """Write ``folder/<contact_file_name>`` via a temp file in the same folder + os.replace,
    so a reader sees the old dossier or the new one, never a partial file. An ``s3://``
    folder gets one completed upload instead (``fs.write_text_atomic``)."""
    from memory_pipeline.core.common import fs

    if fs.is_remote(folder):
        target = fs.join(folder, contact_file_name(contact_id))
        fs.write_text_atomic(target, markdown)
        return target
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / contact_file_name(contact_id)
    tmp = folder / f".{target.name}.{uuid.uuid4().hex}.tmp"
    try:
        tmp.write_text(markdown, encoding="utf-8")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target
