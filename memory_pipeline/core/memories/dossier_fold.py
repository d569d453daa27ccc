"""Folding one day into a contact's dossier state: the day's sessions, messages and
memories become profile entries, plans, communication patterns, topics and timeline entries.

Only the state changes here; rendering it is ``dossier_render``'s job, so the same state always
gives the same page.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from memory_pipeline.core.memories.dossier_state import (
    _KIND_RANK,
    _PLAN_WORDS,
    _POINT_LABEL,
    BOOKED_WINDOW,
    DISCLOSURES_PER_SIDE,
    MAX_AGENDA_STATE,
    MAX_PLAN_STATE,
    MAX_POINT_CHARS,
    MAX_PROFILE_STATE,
    MAX_SESSIONS_PER_BULLET,
    PLAN_KINDS,
    PROFILE_KINDS,
    RECENT_TOPICS,
    RESPONSE_BOUNDS,
    TOPIC_POINTS,
    UNDATED_PLAN_DAYS,
    DossierState,
)
from memory_pipeline.core.memories.dossier_text import (
    LIFE_EVENT,
    MIN_DISCLOSURE,
    booked_items,
    cut_words,
    disclosure_score,
    find_dates,
    is_question,
    sentences_of,
    statement,
    whole_word_title,
)
from memory_pipeline.core.memories.dossier_timeline import _add_timeline, _keep_timeline
from memory_pipeline.core.memories.dossier_words import (
    _clean,
    _ja_point,
    _near_duplicate,
    _norm,
    _owner_said,
    _us,
)

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
