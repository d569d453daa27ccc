"""Reader for a Slack workspace export (the zip, or the folder it unpacks to).

The export holds ``users.json``, ``channels.json`` (and ``groups.json``/``mpims.json``/
``dms.json`` in private exports) and one folder per channel of day files
``<channel>/<YYYY-MM-DD>.json``, each a list of messages. Each entry of a day file is one
record; the workspace files hold no messages (zero records) and give the names. ``ts`` is
the instant (epoch seconds with microseconds, a string); the sender is the user's display
name, else real name, else handle (``users.json``, else the message's ``user_profile``); a
``bot_message`` is sent by its ``username``/bot name. Mentions and links in Slack's markup
are resolved: ``<@U123>`` -> ``@Maria``, ``<#C1|general>`` -> ``#general``, ``<url|label>``
-> ``label (url)``, ``&lt;``/``&gt;``/``&amp;`` unescaped. Joins, leaves, topic and name
changes are ``system`` (said in words when the export left their text out); shared files
give the type (``photo``, ``video``, ``audio``, ``file``), the text is the caption, else
the files' titles. A bot's message without text is read from its ``attachments`` or
``blocks``. Edit and thread events (``message_changed``, ``message_replied``) carry a
message: its newest text is read into that message (the event is a ``duplicate`` row), or,
when the message is not in the file, the carried message is read in its place; deletion
events are ``unknown_type`` rows. One conversation per channel folder (``slack_<name>``);
``source_ref`` is ``slack:<channel>/<ts>``, the message's id in Slack.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import re
import zipfile
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Any

from memory_pipeline.core.common.records import (
    R_BAD_TIMESTAMP,
    R_DUPLICATE,
    R_EMPTY_TEXT,
    R_ENCODING,
    R_MISSING_TIMESTAMP,
    R_NOT_AN_EXPORT,
    R_UNKNOWN_TYPE,
    Record,
)
from memory_pipeline.core.common.timeutil import zone
from memory_pipeline.core.ingest.sources.base import SourceSpec, register
from memory_pipeline.core.ingest.sources.exports import (
    ZIP_MAX_MEMBER_BYTES,
    ExportFile,
    Owners,
    Rejected,
    clean_name,
    clean_text,
    conversation_option,
    has_bad_bytes,
    head_text,
    load_json,
    message,
    quarantine,
    read_exports,
    register_detector,
    safe_id,
)

KIND = "slack"
WORKSPACE_FILES = frozenset(
    "users.json channels.json groups.json mpims.json dms.json integration_logs.json "
    "canvases.json org_users.json huddles.json file_conversations.json".split()
)
_SYSTEM = {
    "channel_join", "channel_leave", "channel_topic", "channel_purpose", "channel_name",
    "channel_archive", "channel_unarchive", "group_join", "group_leave", "group_topic",
    "group_purpose", "group_name", "pinned_item", "unpinned_item", "bot_add", "bot_remove",
    "reminder_add", "channel_convert_to_private", "channel_convert_to_public",
}  # fmt: skip
_CALLS = {"huddle_thread", "sh_room_created"}
_DELETIONS = {"message_deleted", "file_comment_deleted"}
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}\.json$")
_MARKUP = re.compile(r"<([@#!])?([^<>|]*)(?:\|([^<>]*))?>")
_TS = re.compile(r"(\d{1,12})(?:\.(\d{1,6}))?")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_TYPE_MESSAGE = re.compile(r'"type"\s*:\s*"message"')
_TS_VALUE = re.compile(r'"ts"\s*:\s*"\d+\.\d+"')
_OPEN_OBJECT = re.compile(r"\[\s*\{")
# keys only Slack's message objects carry (with a day file's name, one is enough)
_SLACK_KEY = re.compile(
    r'"(?:ts|thread_ts)"\s*:\s*"?\d|"(?:client_msg_id|bot_id|subtype)"\s*:\s*"'
    r'|"user"\s*:\s*"[UWB][A-Z0-9]+"'
)
_GENERIC_NAMES = frozenset({"users.json", "channels.json"})  # names other apps use too
_CHANNEL_KEYS = ('"is_archived"', '"members"', '"creator"', '"is_general"')
# events that carry another message (``message``): an edit, a thread's reply bookkeeping
_NESTED = {"message_changed", "message_replied"}


def sniff(f: ExportFile) -> bool:
    """A day file (a JSON list of ``type: message`` entries with ``ts``, or a list of
    objects with Slack's message keys in a file named ``YYYY-MM-DD.json``) or a workspace
    file (``users.json``'s ``profile``, ``channels.json``'s ``created`` + ``is_archived``).

    The whole head (64 KiB) is looked at, not its start: exports with sorted keys, or a
    first message with a large ``files``/``blocks`` block, put ``ts`` and ``type`` far
    from the first bracket."""
    head = head_text(f, 65536).lstrip()
    name = PurePosixPath(f.rel).name.lower()
    if name in WORKSPACE_FILES and name not in _GENERIC_NAMES:
        # Slack's own names (dms.json, integration_logs.json, canvases.json, ...): any JSON
        return head.startswith(("[", "{"))
    if not head.startswith("["):
        return False
    if _TYPE_MESSAGE.search(head) and _TS_VALUE.search(head):
        return True
    if _DAY.fullmatch(name) and _OPEN_OBJECT.match(head) is not None:
        # a first message longer than the head (a huge blocks/files block) shows no key
        return _SLACK_KEY.search(head) is not None or len(f.head(65536)) == 65536
    if name in WORKSPACE_FILES:
        return (
            ('"profile"' in head and ('"team_id"' in head or '"real_name"' in head))
            or ('"created"' in head and any(k in head for k in _CHANNEL_KEYS))
            or head.rstrip() in ("[]", "[\n]")
        )
    return False


def parse_ts(ts: object) -> dt.datetime | None:
    """Slack's ``ts`` (``"1709251200.000200"``) as aware UTC, to the microsecond."""
    m = _TS.fullmatch(str(ts).strip()) if ts is not None else None
    if m is None:
        return None
    micro = int((m[2] or "0").ljust(6, "0"))
    return _EPOCH + dt.timedelta(seconds=int(m[1]), microseconds=micro)


class Workspace:
    """Names of one export: user id -> (display name, handle), channel name -> id."""

    def __init__(self, users: Any, channels: list[Any]) -> None:
        self.users: dict[str, tuple[str, str]] = {}
        for u in users if isinstance(users, list) else []:
            if not isinstance(u, dict) or not u.get("id"):
                continue
            p = u.get("profile") if isinstance(u.get("profile"), dict) else {}
            shown = (
                p.get("display_name") or p.get("real_name") or u.get("real_name") or u.get("name")
            )
            self.users[str(u["id"])] = (clean_name(str(shown or u["id"])), str(u.get("name") or ""))
        self.channels: dict[str, str] = {}
        self.dm_members: dict[str, list[str]] = {}  # a DM (dms.json, no name): its members
        for block in channels:
            for c in block if isinstance(block, list) else []:
                if isinstance(c, dict) and c.get("id"):
                    self.channels[str(c["id"])] = str(c.get("name") or c["id"])
                    if not c.get("name") and isinstance(c.get("members"), list):
                        self.dm_members[str(c["id"])] = [str(x) for x in c["members"]]

    def name(self, uid: str) -> str:
        return self.users.get(uid, (uid, ""))[0]

    def render(self, text: str) -> str:
        """Slack markup as the app shows it (mentions and channel links by name)."""

        def sub(m: re.Match[str]) -> str:
            sigil, target, label = m[1], m[2], m[3]
            if sigil == "@":
                return "@" + (label or self.name(target))
            if sigil == "#":
                return "#" + (label or self.channels.get(target, target))
            if sigil == "!":
                return "@" + (label.lstrip("@") if label else target.split("^")[0])
            return f"{label} ({target})" if label and label != target else target

        return html.unescape(_MARKUP.sub(sub, text)) if "<" in text or "&" in text else text


_EMPTY = Workspace([], [])


def _read_member(zpath: Path, stamp: tuple[int, int], inside: str) -> bytes | None:
    """One small workspace file of a zip (None when absent or too large)."""
    del stamp  # part of the cache key only
    try:
        with zipfile.ZipFile(zpath) as z:
            info = z.getinfo(inside)
            return z.read(info) if info.file_size <= ZIP_MAX_MEMBER_BYTES // 16 else None
    except (KeyError, OSError, zipfile.BadZipFile, ValueError):
        return None


@lru_cache(maxsize=16)
def _workspace_zip(zpath: Path, stamp: tuple[int, int], prefix: str) -> Workspace:
    def load(name: str) -> Any:
        data = _read_member(zpath, stamp, f"{prefix}{name}")
        try:
            return json.loads(data) if data else []
        except (ValueError, RecursionError):  # a damaged or hostile users.json: no names
            return []

    return Workspace(load("users.json"), [load(n) for n in ("channels.json", "groups.json",
                                                           "mpims.json", "dms.json")])  # fmt: skip


@lru_cache(maxsize=16)
def _workspace_dir(root: Path, stamp: tuple[int, int]) -> Workspace:
    del stamp

    def load(name: str) -> Any:
        try:
            return json.loads((root / name).read_bytes())
        except (OSError, ValueError, RecursionError):  # damaged or hostile: no names
            return []

    return Workspace(load("users.json"), [load(n) for n in ("channels.json", "groups.json",
                                                           "mpims.json", "dms.json")])  # fmt: skip


def _stamp(p: Path) -> tuple[int, int]:
    try:
        st = p.stat()
        return st.st_mtime_ns, st.st_size
    except OSError:
        return 0, 0


def workspace(spec: SourceSpec, f: ExportFile) -> Workspace:
    """The names of the export a day file belongs to: the ``users.json`` beside its channel
    folder, on disk or in the same zip."""
    if f.path is not None:
        folder = f.path.parent.parent
        return _workspace_dir(folder, _stamp(folder / "users.json"))
    rel = PurePosixPath(f.rel)
    parts = rel.parts
    for i, part in enumerate(parts):
        if part.lower().endswith(".zip"):
            zpath = spec.path if spec.path.is_file() else spec.path.joinpath(*parts[: i + 1])
            inner = parts[i + 1 : -2]
            prefix = "/".join(inner) + "/" if inner else ""
            return _workspace_zip(zpath, _stamp(zpath), prefix)
    return _EMPTY


def _files_kind(files: list[Any]) -> str:
    f = next((x for x in files if isinstance(x, dict)), {})
    mime = str(f.get("mimetype") or "")
    for prefix, kind in (("image/", "photo"), ("video/", "video"), ("audio/", "audio")):
        if mime.startswith(prefix):
            return kind
    return "file"


def _files(m: dict) -> list[dict]:
    """The files a message shares: ``files`` (today), or the single ``file`` of older
    exports' ``file_share``/``file_comment`` rows."""
    files = m.get("files")
    if isinstance(files, list):
        return [x for x in files if isinstance(x, dict)] or ([{}] if files else [])
    return [m["file"]] if isinstance(m.get("file"), dict) else []


def _file_names(files: list[dict]) -> str:
    """What names the shared files: title, else name (a hidden or deleted file has neither:
    the message then renders as ``[file]``)."""
    names = [str(x.get("title") or x.get("name") or "").strip() for x in files]
    return ", ".join(n for n in names if n)


def _block_text(value: Any) -> str:
    """The plain text of Slack's ``blocks`` (rich_text sections, section/header text),
    for messages whose ``text`` is empty."""
    out: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, list):
            for x in node:
                walk(x)
        elif isinstance(node, dict):
            kind = node.get("type")
            if kind in ("text", "plain_text", "mrkdwn") and isinstance(node.get("text"), str):
                out.append(node["text"])
            elif kind == "link":
                out.append(str(node.get("text") or node.get("url") or ""))
            elif kind == "emoji" and node.get("name"):
                out.append(f":{node['name']}:")
            elif isinstance(node.get("text"), dict):
                walk(node["text"])
            for key in ("elements", "fields"):
                if key in node:
                    walk(node[key])

    walk(value)
    return "".join(out).strip()


def _attachment_text(value: Any) -> str:
    """The readable part of legacy ``attachments`` (bots and integrations post only those)."""
    parts: list[str] = []
    for a in value if isinstance(value, list) else []:
        if not isinstance(a, dict):
            continue
        keys = ("pretext", "title", "text") if a.get("text") or a.get("title") else ("fallback",)
        parts += [str(a[k]).strip() for k in keys if isinstance(a.get(k), str) and a[k].strip()]
    return "\n".join(parts)


def _system_text(subtype: str, who: str) -> str:
    """A join/leave/... row Slack exported without text, said in words."""
    return f"{who or 'someone'} {_SYSTEM_VERBS.get(subtype, subtype.replace('_', ' '))}"


_SYSTEM_VERBS = {
    "channel_join": "joined the channel", "group_join": "joined the channel",
    "channel_leave": "left the channel", "group_leave": "left the channel",
    "channel_archive": "archived the channel", "channel_unarchive": "unarchived the channel",
}  # fmt: skip


def _nested(doc: list[Any]) -> dict[str, dict]:
    """The latest version of each message an edit event of this file carries, by its ts."""
    out: dict[str, tuple[float, dict]] = {}
    for m in doc:
        if not (isinstance(m, dict) and m.get("subtype") in _NESTED):
            continue
        inner = m.get("message")
        if not isinstance(inner, dict) or not inner.get("ts"):
            continue
        when = parse_ts(m.get("ts"))
        key = when.timestamp() if when is not None else 0.0
        its = str(inner["ts"])
        if its not in out or key >= out[its][0]:
            out[its] = (key, inner)
    return {k: v for k, (_, v) in out.items()}


def parse(spec: SourceSpec, f: ExportFile, dates: frozenset[dt.date] | None) -> Iterator[Record]:
    """Records of one day file; a workspace file has none (raises Rejected before the first).

    Every entry is one record. Edit and thread events (``message_changed``,
    ``message_replied``) carry a message: when that message is in the same file, its newest
    text is read into it and the event is a ``duplicate`` row; otherwise the carried
    message is read in the event's place. A deletion event is an ``unknown_type`` row;
    joins, leaves and topic changes are ``system``; a message that only shares files is a
    typed message named by its files; a bot's message without text is read from its
    attachments or blocks.
    """
    doc = load_json(f, "a Slack export day file")
    name = PurePosixPath(f.rel).name.lower()
    if name in WORKSPACE_FILES and isinstance(doc, list | dict):
        return
    if not isinstance(doc, list) or not any(isinstance(m, dict) and "ts" in m for m in doc):
        raise Rejected(R_NOT_AN_EXPORT, "JSON that is not a Slack day file (a list with 'ts')")
    ws = workspace(spec, f)
    channel = PurePosixPath(f.rel).parent.name or f.stem
    channel = ws.channels.get(channel, channel)
    conv = conversation_option(spec) or f"slack_{safe_id(channel)}"
    contact = f"#{clean_name(channel)}"
    owners = Owners(spec)
    if channel in ws.dm_members:  # a DM is named by the people in it, not by its id
        people = [ws.name(u) for u in ws.dm_members[channel]]
        others = [p for p, u in zip(people, ws.dm_members[channel], strict=True)
                  if p not in owners and u not in owners]  # fmt: skip
        contact = ", ".join(others or people) or contact
    tz = zone(spec.timezone)
    edits = _nested(doc)
    here = {
        str(m.get("ts")) for m in doc if isinstance(m, dict) and m.get("subtype") not in _NESTED
    }
    for i, entry in enumerate(doc):
        raw = json.dumps(entry, ensure_ascii=False)[:2000]
        if not isinstance(entry, dict):
            yield quarantine(spec, f, R_UNKNOWN_TYPE, "entry is not an object", conv=conv,
                             day=None, ref=f"slack:{channel}/{i}", raw=raw)  # fmt: skip
            continue
        m = entry
        subtype = str(m.get("subtype") or "")
        inner = m.get("message") if subtype in _NESTED else None
        if isinstance(inner, dict) and inner.get("ts"):
            its = str(inner["ts"])
            if its in here:
                ref = f"slack:{channel}/{m.get('ts') or i}"
                yield quarantine(spec, f, R_DUPLICATE,
                                 f"{subtype} event of message {its}, read into that message",
                                 conv=conv, day=None, ref=ref, raw=raw)  # fmt: skip
                continue
            if edits.get(its) is not inner:  # an older edit of a message not in the file
                ref = f"slack:{channel}/{m.get('ts') or i}"
                yield quarantine(spec, f, R_DUPLICATE,
                                 f"{subtype} event superseded by a later edit of {its}",
                                 conv=conv, day=None, ref=ref, raw=raw)  # fmt: skip
                continue
            m = {**inner, "type": inner.get("type", "message")}
            subtype = str(m.get("subtype") or "")
        elif str(m.get("ts")) in edits:
            newer = edits[str(m.get("ts"))]
            m = {**m, **{k: newer[k] for k in ("text", "files", "blocks", "attachments")
                         if k in newer}}  # fmt: skip
        ts = str(m.get("ts", ""))
        ref = f"slack:{channel}/{ts or i}"
        if has_bad_bytes(m):
            yield quarantine(spec, f, R_ENCODING, "invalid UTF-8 in the message", conv=conv,
                             day=None, ref=ref, raw=raw)  # fmt: skip
            continue
        utc = parse_ts(ts)
        if utc is None:
            reason = R_MISSING_TIMESTAMP if not ts else R_BAD_TIMESTAMP
            yield quarantine(spec, f, reason, "no usable ts", conv=conv, day=None, ref=ref,
                             raw=raw)  # fmt: skip
            continue
        local = utc.astimezone(tz).replace(tzinfo=None)
        if dates is not None and local.date() not in dates:
            continue
        if m.get("type", "message") != "message":
            yield quarantine(spec, f, R_UNKNOWN_TYPE, "entry type is not message", conv=conv,
                             day=local.date(), ref=ref, raw=raw)  # fmt: skip
            continue
        if subtype in _DELETIONS:
            yield quarantine(spec, f, R_UNKNOWN_TYPE,
                             f"a {subtype} event (a message removed), not a message",
                             conv=conv, day=local.date(), ref=ref, raw=raw)  # fmt: skip
            continue
        uid = str(m.get("user") or "")
        if subtype == "bot_message" or (not uid and m.get("bot_id")):
            bot = m.get("bot_profile") if isinstance(m.get("bot_profile"), dict) else {}
            sender = clean_name(str(m.get("username") or bot.get("name") or m.get("bot_id") or ""))
            handle = ""
        elif uid in ws.users:
            sender, handle = ws.users[uid]
        else:
            prof = m.get("user_profile") if isinstance(m.get("user_profile"), dict) else {}
            shown = prof.get("display_name") or prof.get("real_name") or prof.get("name") or uid
            sender, handle = clean_name(str(shown)), str(prof.get("name") or "")
        text = ws.render(str(m.get("text") or ""))
        if not text.strip():
            text = ws.render(_block_text(m.get("blocks")) or _attachment_text(m.get("attachments")))
        files = _files(m)
        if subtype in _SYSTEM or subtype == "tombstone":
            kind = "system"
            if not text.strip():
                text = _system_text(subtype, sender)
        elif subtype in _CALLS:
            kind = "call"
        elif files:
            kind = _files_kind(files)
            if not text.strip():
                text = _file_names(files)
        elif isinstance(m.get("comment"), dict) and not text.strip():
            kind, text = "text", ws.render(str(m["comment"].get("comment") or ""))
        else:
            kind = "text"
        if kind == "text" and not text.strip():
            yield quarantine(spec, f, R_EMPTY_TEXT,
                             "message without text, files, attachments or blocks",
                             conv=conv, day=local.date(), ref=ref, raw=raw)  # fmt: skip
            continue
        out = message(
            spec, f, conv=conv, contact=contact, sender="" if kind == "system" else sender,
            owners=owners, local=local, utc=utc, type_=kind, text=clean_text(text), order=i,
            line=None, ref=ref,
        )  # fmt: skip
        if kind != "system" and not out.is_owner:
            out.is_owner = bool(uid and uid in owners) or bool(handle and handle in owners)
        yield out


def _accept(path: Path) -> bool:
    return path.suffix.lower() == ".json"


@register(KIND)
def read_slack(spec: SourceSpec, dates: frozenset[dt.date] | None) -> Iterator[Record]:
    """Every day file of the Slack export(s) under the source path."""
    yield from read_exports(spec, dates, parse, _accept)


read_slack.depends_on = ("memory_pipeline.core.ingest.sources.exports",)  # type: ignore[attr-defined]
register_detector(KIND, sniff, parse, rank=10)
