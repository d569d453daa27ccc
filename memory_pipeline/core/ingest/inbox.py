"""The inbox: messages apps post (``POST /v1/messages``, MCP ``remember``), kept durably as
one more source the ingest entrance reads like any export (``kind = "inbox"``).

Why a source and not a second store: every rule the pipeline applies to a record (the
validator, re-export de-duplication, contacts, the forget list, retention, redaction in
the representations) then applies to a posted message too, and a rebuild from the sources
gives the same tables whatever the mix of exports and posts.

Layout: ``<owner's local state folder>/inbox/<conversation key>/<YYYY-MM-DD>.jsonl`` (the
state: posted messages are source data, the output may be deleted), one JSON object per
line and per accepted message, the date being the message's local date in the source's
timezone. The conversation key is a hash of the conversation id, so forgetting a contact
can forget its files (the forget list names files) without touching another
conversation's, and no name appears in a path. A line is appended with ``write`` + ``fsync``
of the file (and of the folders it created) before the caller is told "accepted": a
``kill -9`` afterwards loses nothing. A torn line (a crash mid-write, never acknowledged) is
closed with a newline before the next append, so it stays one malformed line that ingest
quarantines, never a corruption of the next message.

Idempotency is by the client's message id, per owner: an id seen before with the same
content is a ``duplicate`` (a retried batch adds nothing); with other content it is refused
(``id_conflict``), never silently kept or dropped. The id table is rebuilt from the files
(each file read from where the last look stopped, under an ``flock``), so several server
processes share one inbox.

A message of a forgotten contact or conversation is refused before anything is written;
the inbox keeps only a text-free line (the hashed position a ``forgotten`` quarantine row
carries), so its status can be told and ingest accounts it like any forgotten record.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import shutil
import threading
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_pipeline.core.common.contacts import ContactBook
from memory_pipeline.core.common.forget_list import ForgetList
from memory_pipeline.core.ingest.sources.base import SourceSpec
from memory_pipeline.core.ingest.sources.exports_names import Owners
from memory_pipeline.core.ingest.sources.inbox import (
    FORGOTTEN_KEY,
    KIND,
    R_ID_CONFLICT,
    SOURCE_NAME,
    Entry,
    Refused,
    date_or,
    file_day,
    file_rel,
    forgotten_line,
    inbox_files,
    parse_entry,
    to_message,
)

INBOX_DIR = "inbox"  # under the owner's local state folder (was: the output folder)
LOCK_FILE = ".lock"


# -- the store --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Located:
    """Where the inbox holds a client id: its file, line, date and content fingerprint."""

    rel: str
    line: int
    day: dt.date | None
    fingerprint: str | None  # None: the text-free line of a refused forgotten message
    conversation: str | None


@dataclass
class _FileState:
    ino: int = 0
    offset: int = 0
    lines: int = 0
    ends_clean: bool = True  # the file ends with a newline (no torn line)
    ids: list[str] = field(default_factory=list)


@dataclass
class Appended:
    """What :meth:`InboxStore.append` did per entry (in order): ``accepted``, ``duplicate``
    or ``forgotten``, or a :class:`Refused` (``id_conflict``)."""

    results: list[str | Refused]
    days: set[dt.date]


class InboxStore:
    """One owner's inbox folder: durable appends, the id table, lookups, the forget scrub."""

    def __init__(self, root: Path, timezone: str) -> None:
        self.root = Path(root)
        self.timezone = timezone
        self._mutex = threading.Lock()
        self._files: dict[str, _FileState] = {}
        self._ids: dict[str, Located] = {}

    # -- reading the id table -------------------------------------------------------------
    def _catch_up(self) -> None:
        """Read what other processes (or an earlier life of this one) appended since the
        last look: each file from its last offset; a replaced file (the forget scrub) anew."""
        present = {p.relative_to(self.root).as_posix(): p for p in inbox_files(self.root)}
        for rel in [r for r in self._files if r not in present]:
            self._drop_file(rel)
        for rel, path in present.items():
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            state = self._files.get(rel)
            if state is not None and state.ino != st.st_ino:
                self._drop_file(rel)
                state = None
            if state is None:
                state = self._files[rel] = _FileState(ino=st.st_ino)
            if st.st_size > state.offset:
                self._read_from(rel, path, state)

    def _drop_file(self, rel: str) -> None:
        state = self._files.pop(rel, None)
        for cid in state.ids if state else ():
            if self._ids.get(cid) and self._ids[cid].rel == rel:
                del self._ids[cid]

    def _read_from(self, rel: str, path: Path, state: _FileState) -> None:
        day = file_day(path)
        with path.open("rb") as f:
            f.seek(state.offset)
            data = f.read()
        end = data.rfind(b"\n") + 1  # a torn last line is re-read once it is closed
        for raw in data[:end].split(b"\n")[:-1]:
            state.lines += 1
            try:
                obj = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(obj, dict) or not isinstance(obj.get("id"), str):
                continue
            cid = obj["id"]
            if cid in self._ids:
                continue
            if obj.get(FORGOTTEN_KEY) is True:
                when = date_or(obj.get("date"), day)
                self._ids[cid] = Located(rel, state.lines, when, None, None)
            else:
                try:
                    e = parse_entry(obj, stored=True)
                except Refused:
                    continue
                self._ids[cid] = Located(rel, state.lines, day, e.fingerprint(), e.conversation)
            state.ids.append(cid)
        state.offset += end
        state.ends_clean = end == len(data)

    def lookup(self, client_id: str) -> Located | None:
        """Where the inbox holds ``client_id`` (None: never accepted)."""
        with self._locked():
            self._catch_up()
            return self._ids.get(client_id)

    def ids(self) -> dict[str, Located]:
        with self._locked():
            self._catch_up()
            return dict(self._ids)

    # -- appending --------------------------------------------------------------------------
    def _locked(self) -> Any:
        return _FileLock(self, self.root / LOCK_FILE)

    def append(
        self,
        entries: Iterable[Entry],
        *,
        forgotten: Mapping[str, dict[str, Any]] | None = None,
        received: str | None = None,
    ) -> Appended:
        """Append the new entries durably (fsync) and say what became of each one.

        ``forgotten`` maps the ids refused as forgotten to their text-free line (written
        instead of the message). Returns only after every accepted line is on disk."""
        entries = list(entries)
        forgotten = forgotten or {}
        received = received or dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")
        results: list[str | Refused] = []
        days: set[dt.date] = set()
        with self._locked():
            self._catch_up()
            batch: dict[str, list[tuple[str, dict[str, Any], Entry]]] = {}
            fresh: dict[str, Entry] = {}
            for e in entries:
                known = self._ids.get(e.id)
                pending = fresh.get(e.id)
                if known is None and pending is None:
                    fresh[e.id] = e
                    day = e.day(self.timezone)
                    rel = file_rel(e.conversation, day)
                    if e.id in forgotten:
                        line = forgotten[e.id]
                        results.append(FORGOTTEN_KEY)
                    else:
                        line = {**e.as_line(), "received": received}
                        results.append("accepted")
                        days.add(day)
                    batch.setdefault(rel, []).append((e.id, line, e))
                    continue
                if known is not None and known.fingerprint is None:
                    results.append(FORGOTTEN_KEY)
                    continue
                fp = known.fingerprint if known is not None else pending.fingerprint()  # type: ignore[union-attr]
                if fp == e.fingerprint():
                    results.append("duplicate")
                else:
                    results.append(
                        Refused(R_ID_CONFLICT, "this id was accepted before with other content")
                    )
            for rel, items in batch.items():
                self._write(rel, items)
        return Appended(results, days)

    def _write(self, rel: str, items: list[tuple[str, dict[str, Any], Entry]]) -> None:
        path = self.root / rel
        folder_new = not path.parent.exists()
        if folder_new:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            _fsync_dir(self.root)
        state = self._files.get(rel)
        created = state is None and not path.exists()
        body = b"".join(
            json.dumps(line, ensure_ascii=False).encode("utf-8", "surrogatepass") + b"\n"
            for _, line, _ in items
        )
        if state is not None and not state.ends_clean:
            body = b"\n" + body  # close a torn line: it stays one malformed line
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            view = memoryview(body)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
            ino = os.fstat(fd).st_ino
        finally:
            os.close(fd)
        if created or folder_new:
            _fsync_dir(path.parent)
        if state is None:
            state = self._files[rel] = _FileState(ino=ino)
        day = file_day(path)
        if not state.ends_clean:
            state.lines += 1  # the torn line, now closed
            state.ends_clean = True
        for cid, line, e in items:
            state.lines += 1
            fp = None if line.get(FORGOTTEN_KEY) is True else e.fingerprint()
            when = date_or(line.get("date"), day) if fp is None else day
            conv = None if fp is None else e.conversation
            self._ids[cid] = Located(rel, state.lines, when, fp, conv)
            state.ids.append(cid)
        # we hold the lock: nobody else appended, the file ends where this write did
        state.offset = os.stat(path).st_size

    # -- forget ---------------------------------------------------------------------------
    def scrub(
        self, forget: ForgetList, source: str = SOURCE_NAME, contacts: ContactBook | None = None
    ) -> int:
        """Replace every stored message ``forget`` now forgets by its text-free line (each
        file rewritten atomically, fsynced); returns how many lines were replaced.

        Why: the inbox is the one source the pipeline itself keeps; forgetting a contact
        must not leave their words in it (an export folder is the user's own files). The
        match is ingest's (``ForgetList.forgets``: conversation, contact, file)."""
        if not forget or not self.root.is_dir():
            return 0
        spec = SourceSpec(source, KIND, self.root, self.timezone)
        owners = Owners(spec)
        replaced = 0
        with self._locked():
            for path in inbox_files(self.root):
                rel = path.relative_to(self.root).as_posix()
                day = file_day(path)
                out: list[bytes] = []
                hit = 0
                with path.open("rb") as f:
                    for n, raw in enumerate(f, 1):
                        line = raw if raw.endswith(b"\n") else raw + b"\n"
                        try:
                            e = parse_entry(json.loads(raw), stored=True)
                        except (ValueError, Refused):
                            out.append(line)
                            continue
                        msg = to_message(e, spec, rel, line=n, order=0, owners=owners)
                        if contacts:
                            msg.contact_id = contacts.resolve(msg.contact_id) or msg.contact_id
                        if forget.forgets(msg):
                            tomb = forgotten_line(forget, source, e, day or e.day(self.timezone))
                            text = json.dumps(tomb, ensure_ascii=False)
                            out.append(text.encode("utf-8", "surrogatepass") + b"\n")
                            hit += 1
                        else:
                            out.append(line)
                if hit:
                    _replace(path, b"".join(out))
                    replaced += hit
            self._files.clear()
            self._ids.clear()
        return replaced

    def purge_before(self, cutoff: dt.date) -> int:
        """Delete the day files older than ``cutoff`` (retention: ingest already treats
        their records as expired; the inbox must not keep their text either); how many.
        Their ids are forgotten with them: a re-post is stored again, and expires again."""
        if not self.root.is_dir():
            return 0
        gone = 0
        with self._locked():
            for path in inbox_files(self.root):
                day = file_day(path)
                if day is not None and day < cutoff:
                    path.unlink()
                    _fsync_dir(path.parent)
                    gone += 1
            self._files.clear()
            self._ids.clear()
        return gone

    # -- refresh intents --------------------------------------------------------------------
    def mark_pending(self, days: Iterable[dt.date]) -> list[Path]:
        """Record durably that ``days`` wait for a refresh (one marker file per day and
        call, fsynced), so a server killed before its refresh ran resumes it on start."""
        folder = self.root / PENDING_DIR
        made = []
        if not self.root.exists():  # the owner's only: 0700, as the lock would make it
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            _fsync_dir(self.root.parent)
        if not folder.exists():
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            _fsync_dir(self.root)
        for day in sorted(set(days)):
            path = folder / f"{day.isoformat()}.{uuid.uuid4().hex[:12]}"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.close(fd)
            made.append(path)
        if made:
            _fsync_dir(folder)
        return made


PENDING_DIR = ".pending"  # refresh intents: <date>.<id> files under the inbox


def pending_markers(root: Path, days: Iterable[dt.date] | None = None) -> list[Path]:
    """The refresh intents under an inbox (of ``days`` only, when given)."""
    folder = Path(root) / PENDING_DIR
    if not folder.is_dir():
        return []
    wanted = None if days is None else {d.isoformat() for d in days}
    return sorted(
        p for p in folder.iterdir() if wanted is None or p.name.split(".", 1)[0] in wanted
    )


def pending_days(root: Path) -> set[dt.date]:
    """The days an inbox's refresh intents name."""
    out = set()
    for p in pending_markers(root):
        try:
            out.add(dt.date.fromisoformat(p.name.split(".", 1)[0]))
        except ValueError:
            continue
    return out


def clear_markers(paths: Iterable[Path]) -> None:
    """Remove refresh intents a finished refresh covered (those it saw when it started)."""
    for p in paths:
        p.unlink(missing_ok=True)


class _FileLock:
    """The store's thread mutex plus an ``flock`` on the inbox's lock file (other
    processes serving the same owner)."""

    def __init__(self, store: InboxStore, path: Path) -> None:
        self.store, self.path = store, path
        self.fd: int | None = None

    def __enter__(self) -> _FileLock:
        self.store._mutex.acquire()
        try:
            if not self.path.parent.exists():
                self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                _fsync_dir(self.path.parent.parent)
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except BaseException:
            if self.fd is not None:
                os.close(self.fd)
            self.store._mutex.release()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self.fd is not None:
                fcntl.flock(self.fd, fcntl.LOCK_UN)
                os.close(self.fd)
        finally:
            self.store._mutex.release()


def _fsync_dir(folder: Path) -> None:
    """Make a created entry of ``folder`` durable (the file's own fsync does not)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _replace(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def inbox_dir(state_dir: Path) -> Path:
    """An owner's inbox folder: ``<owner's local state folder>/inbox``. Posted messages
    are source data, not derived: they live with the state, so deleting the output (the
    documented reset) or a backup of the state alone keeps them."""
    return Path(state_dir) / INBOX_DIR


IMPLICIT = "implicit"  # option marking the inbox source no [[sources]] table configured


def inbox_spec(state_dir: Path, timezone: str, owner: str | None) -> SourceSpec:
    """The implicit inbox source of an owner's state folder (the configuration names none)."""
    path = inbox_dir(state_dir)
    return SourceSpec(SOURCE_NAME, KIND, path, timezone, owner or None, {IMPLICIT: True})


def configured_inbox(sources: Iterable[SourceSpec]) -> SourceSpec | None:
    """The inbox among ``sources`` (a configured one, or the implicit one), if any."""
    return next((s for s in sources if s.kind == KIND), None)


def with_inbox(
    sources: tuple[SourceSpec, ...],
    state_dir: Path,
    timezone: str,
    owner: str | None,
    legacy: Path | None = None,
) -> tuple[SourceSpec, ...]:
    """``sources`` plus the owner's inbox once it exists (apps posted), unless a configured
    source already is the inbox (or takes its name): a deployment that never received a
    post reads exactly its configured sources. An implicit inbox of another folder (a copy
    of the configuration for another output) is replaced. ``legacy``: the output folder
    whose ``inbox`` an older release kept there (:func:`migrate_inbox` moves it before a
    run reads it), so the source is known before the move."""
    base = tuple(s for s in sources if not s.options.get(IMPLICIT))
    if any(s.kind == KIND or s.name == SOURCE_NAME for s in base):
        return base
    old = inbox_dir(legacy) if legacy is not None else None
    if not inbox_dir(state_dir).is_dir() and not (old is not None and old.is_dir()):
        return base
    return (*base, inbox_spec(state_dir, timezone, owner))


def _line_id(raw: bytes) -> bytes:
    """A stored line's client id (``b""`` for a line without one): what makes it a copy."""
    try:
        obj = json.loads(raw)
    except ValueError:
        return b""
    cid = obj.get("id") if isinstance(obj, dict) else None
    return b"id:" + cid.encode("utf-8", "surrogatepass") if isinstance(cid, str) else b""


def migrate_inbox(legacy: Path, target: Path) -> list[str]:
    """Move an inbox an older release kept in the output folder (``legacy``) to ``target``
    (in the state folder); the notice (one line), none when there was nothing to move.

    A rename when ``target`` does not exist yet; else file by file under the old inbox's
    lock: a day file the target lacks is moved, one both hold gets the lines whose id it
    lacks appended (ids are idempotent: an id seen twice is one message)."""
    legacy, target = Path(legacy), Path(target)
    if not legacy.is_dir() or (target.exists() and legacy.resolve() == target.resolve()):
        return []
    notice = [f"moved the inbox (messages apps posted) from {legacy} to {target}"]
    if not target.exists():
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            os.rename(legacy, target)
        except OSError:
            pass  # another file system: file by file below
        else:
            _fsync_dir(target.parent)
            _fsync_dir(legacy.parent)
            return notice
    target.mkdir(mode=0o700, parents=True, exist_ok=True)
    lock = os.open(legacy / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for src in sorted(p for p in legacy.rglob("*") if p.is_file()):
            rel = src.relative_to(legacy)
            if rel.as_posix() == LOCK_FILE:
                continue
            dst = target / rel
            if not dst.parent.exists():
                dst.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not dst.exists():
                _replace(dst, src.read_bytes())
            elif dst.suffix == ".jsonl":
                have = dst.read_bytes()
                seen = set(have.splitlines()) | {_line_id(ln) for ln in have.splitlines()}
                extra = [
                    ln
                    for ln in src.read_bytes().splitlines()
                    if ln and ln not in seen and (_line_id(ln) or b"-") not in seen
                ]
                if extra:
                    head = have if not have or have.endswith(b"\n") else have + b"\n"
                    _replace(dst, head + b"\n".join(extra) + b"\n")
            src.unlink()
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        os.close(lock)
    shutil.rmtree(legacy, ignore_errors=True)
    return notice
