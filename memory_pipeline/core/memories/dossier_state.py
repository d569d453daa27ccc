"""A contact's dossier state and the limits and labels every part of the dossier shares.

:class:`DossierState` is what a day's fold carries to the next (profile, plans, patterns,
topics, timeline), as JSON-safe values so it can be stored in the DOSSIERS table and read back
unchanged; the constants bound how much of it is kept and shown.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from typing import Any

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


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _json_copy(value: Any) -> Any:
    """A deep copy of JSON-native data (lists, dicts, and immutable scalars). A list of
    scalars (the session ids the pattern bullets cite, thousands over years) is copied in
    one step, and a dict's scalar values are taken as they are: most of a state is scalars,
    and a call per scalar was most of the copy."""
    if isinstance(value, list):
        if all(type(v) in _SCALARS for v in value):
            return value.copy()
        return [_json_copy(v) for v in value]
    if isinstance(value, dict):
        return {k: v if type(v) in _SCALARS else _json_copy(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_json_copy(v) for v in value)
    return value
