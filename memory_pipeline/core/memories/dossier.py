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

This module holds the day's entry points (``update_dossier``, ``build_day``), the rows, the
checkers and the files; the state and its limits live in ``dossier_state``, the fold in
``dossier_fold``, the Timeline in ``dossier_timeline``, rendering in ``dossier_render`` and
the shared text helpers in ``dossier_words``. The names other code uses are re-exported here.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import re
import uuid
from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa

from memory_pipeline.core.common.escape import unsafe_markup
from memory_pipeline.core.common.schema import DOSSIERS
from memory_pipeline.core.memories.dossier_fold import (
    _fold,
    _prepare,
    median_bucket,
    response_bucket,
)
from memory_pipeline.core.memories.dossier_render import render_markdown
from memory_pipeline.core.memories.dossier_state import (
    _CITATION_RE,
    EMPTY_BULLET,
    METHOD,
    RESPONSE_BOUNDS,
    SECTIONS,
    SESSION_ID_RE,
    STATE_VERSION,
    TIMELINE_CHARS_PER_PERIOD,
    TITLE_PREFIX,
    UPDATED_PREFIX,
    DossierState,
)

__all__ = [
    "DossierState",
    "EMPTY_BULLET",
    "MAX_FILE_STEM",
    "RESPONSE_BOUNDS",
    "SECTIONS",
    "STATE_VERSION",
    "TIMELINE_CHARS_PER_PERIOD",
    "build_day",
    "check_rewrite",
    "cited_sessions",
    "contact_file_name",
    "dossier_rows",
    "median_bucket",
    "missing_sections",
    "render_markdown",
    "response_bucket",
    "uncited_bullets",
    "update_dossier",
    "write_markdown_atomic",
]


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
