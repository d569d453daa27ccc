"""Which partition dates changed in the source folders since the last look (the sensor's core).

A look is cheap when nothing moved: every file's (size, mtime) is compared with the cursor
and only a file whose stat changed is hashed (sha256). When a file's content changed (or a
file appeared or vanished), its whole source is read once and every date gets a digest of
the records it holds; the dates whose digest differs from the cursor's are the affected
dates, and nothing else. A re-export that repeats the whole history plus one new day thus
affects that one day, and a touched but identical file affects none.

The state is plain JSON (the sensor's cursor); digests and hashes only, never text. A
configured source path that does not exist raises :class:`SourceMissingError` before
anything is compared: a vanished (unmounted, renamed) folder must never read as "every
file deleted".
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_pipeline.core.common.records import Message
from memory_pipeline.core.ingest.sources import SourceSpec, read_source

STATE_VERSION = 1
_HASH_BLOCK = 1 << 20


class SourceMissingError(RuntimeError):
    """A configured source path vanished: one line naming the source and the path."""


@dataclass
class WatchState:
    """What the last look saw: per file (size, mtime_ns, sha256), per source date digests."""

    files: dict[str, dict[str, Any]] = field(default_factory=dict)  # "source/rel" -> stat+hash
    dates: dict[str, dict[str, str]] = field(default_factory=dict)  # source -> date -> digest
    pending: list[str] = field(default_factory=list)  # changed dates not requested yet

    def to_json(self) -> str:
        return json.dumps(
            {
                "version": STATE_VERSION,
                "files": self.files,
                "dates": self.dates,
                "pending": self.pending,
            },
            sort_keys=True,
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str | None) -> WatchState:
        """The state a cursor holds; a missing or older-format cursor is an empty state."""
        if not text:
            return cls()
        data = json.loads(text)
        if data.get("version") != STATE_VERSION:
            return cls()
        return cls(files=data["files"], dates=data["dates"], pending=data.get("pending", []))


# How many saved states stay beside the newest: a failed tick keeps the previous cursor, which
# must still find its state; older ones are never read again.
KEEP_STATES = 3


def save_state(state: WatchState, folder: Path) -> str:
    """Store ``state`` in ``folder`` under its content digest and return the short cursor that
    names it (``v1:<digest> files=N dates=M pending=P``).

    The state lists every source file and a digest per source date, which grows with the
    exports; Dagster shows a sensor's cursor verbatim on its page, so the cursor carries only
    the digest and a readable count, and the state lives in a file named by it. The file is
    written before the cursor is returned, so a cursor never names a state that is missing."""
    text = state.to_json()
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:20]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{digest}.json"
    if not path.exists():
        tmp = folder / f".{digest}.{os.getpid()}.tmp"
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    others = sorted(
        (p for p in folder.glob("*.json") if p != path), key=lambda p: p.stat().st_mtime_ns
    )
    for old in others[: max(0, len(others) - KEEP_STATES)]:
        old.unlink(missing_ok=True)
    path.touch()
    n_dates = sum(len(d) for d in state.dates.values())
    return f"v1:{digest} files={len(state.files)} dates={n_dates} pending={len(state.pending)}"


def load_state(cursor: str | None, folder: Path) -> WatchState:
    """The state a cursor names; an empty state when there is no cursor, its file is gone
    (a new output folder) or it is a cursor of the older inline format (a first look again)."""
    if not cursor or not cursor.startswith("v1:"):
        return WatchState()
    digest = cursor[3:].split(" ", 1)[0]
    path = folder / f"{digest}.json"
    if not digest.isalnum() or not path.is_file():
        return WatchState()
    return WatchState.from_json(path.read_text(encoding="utf-8"))


@dataclass
class Changes:
    """The dates to rebuild (with a digest of their new content) and the state to save."""

    dates: dict[dt.date, str]  # date -> digest over every source's records of that date
    state: WatchState
    changed_sources: list[str]


def file_hash(path: Path) -> str:
    """sha256 of a file, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(_HASH_BLOCK):
            h.update(block)
    return h.hexdigest()


def _files(spec: SourceSpec) -> list[Path]:
    if spec.path.is_file():
        return [spec.path]
    return sorted(
        p
        for p in spec.path.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(spec.path).parts)
    )


def date_digests(spec: SourceSpec, start_date: dt.date) -> dict[str, str]:
    """Per partition date (as ingest assigns it), a digest of the records on that date."""
    hashes: dict[str, Any] = {}
    for rec in read_source(spec):
        day = rec.local_date if isinstance(rec, Message) else rec.partition_date
        day = start_date if day is None or day < start_date else day
        key = day.isoformat()
        h = hashes.get(key)
        if h is None:
            h = hashes[key] = hashlib.blake2b(digest_size=12)
        h.update(repr(rec).encode("utf-8", "surrogatepass"))
        h.update(b"\x1e")
    return {k: h.hexdigest() for k, h in hashes.items()}


def scan(sources: Sequence[SourceSpec], start_date: dt.date, previous: WatchState) -> Changes:
    """The dates whose records changed since ``previous``, and the state to remember.

    Raises :class:`SourceMissingError` (nothing compared, ``previous`` still valid) when a
    configured path is gone.
    """
    for spec in sources:
        if not spec.path.exists():
            raise SourceMissingError(
                f"source {spec.name!r}: {spec.path} does not exist (moved or unmounted?); "
                "no run requested, the cursor is kept until it is back"
            )
    state = WatchState(files={}, dates={})
    changed_sources: list[str] = []
    for spec in sources:
        prefix = f"{spec.name}/"
        touched = False
        for path in _files(spec):
            rel = path.name if spec.path.is_file() else path.relative_to(spec.path).as_posix()
            key = prefix + rel
            st = path.stat()
            old = previous.files.get(key)
            if old and old["size"] == st.st_size and old["mtime_ns"] == st.st_mtime_ns:
                state.files[key] = old
                continue
            digest = file_hash(path)
            state.files[key] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": digest}
            touched |= old is None or old["sha256"] != digest
        gone = [k for k in previous.files if k.startswith(prefix) and k not in state.files]
        if touched or gone or spec.name not in previous.dates:
            changed_sources.append(spec.name)
            state.dates[spec.name] = date_digests(spec, start_date)
        else:
            state.dates[spec.name] = previous.dates[spec.name]
    affected = _affected(previous.dates, state.dates, changed_sources)
    affected |= {dt.date.fromisoformat(d) for d in previous.pending}
    return Changes(
        dates={d: _combined(state.dates, d) for d in sorted(affected)},
        state=state,
        changed_sources=changed_sources,
    )


def _affected(
    before: dict[str, dict[str, str]], after: dict[str, dict[str, str]], names: Iterable[str]
) -> set[dt.date]:
    out: set[dt.date] = set()
    for name in names:
        old, new = before.get(name, {}), after.get(name, {})
        out |= {dt.date.fromisoformat(d) for d in set(old) | set(new) if old.get(d) != new.get(d)}
    # a source dropped from the configuration: its dates change too
    for name in set(before) - set(after):
        out |= {dt.date.fromisoformat(d) for d in before[name]}
    return out


def _combined(dates: dict[str, dict[str, str]], day: dt.date) -> str:
    """One digest of a date over every source (a run key: same content, same key)."""
    key = day.isoformat()
    h = hashlib.blake2b(digest_size=8)
    for name in sorted(dates):
        h.update(f"{name}={dates[name].get(key, '-')};".encode())
    return h.hexdigest()


def defer(state: WatchState, days: Iterable[dt.date]) -> WatchState:
    """``state`` with ``days`` kept as pending: the next look reports them again.

    The sensor defers dates that are no partition yet (today's messages before midnight):
    they are requested once their partition exists, even if no file changes meanwhile.
    """
    pending = sorted(set(state.pending) | {d.isoformat() for d in days})
    return dataclasses.replace(state, pending=pending)


def newest_change_ns(sources: Sequence[SourceSpec]) -> int:
    """The latest change time (ns) of any file of ``sources``: the newer of mtime and ctime.

    ctime counts too because a copy that keeps an old mtime (``cp -p``, ``rsync -a``) still
    gets a new ctime, which no tool can set back. A missing path counts as no file.
    """
    newest = 0
    for spec in sources:
        if not spec.path.exists():
            continue
        for path in _files(spec):
            st = path.stat()
            newest = max(newest, st.st_mtime_ns, st.st_ctime_ns)
    return newest


def not_yet_ingested(
    dates: dict[dt.date, str], ingested_at: dict[dt.date, float], newest_change_ns: int
) -> dict[dt.date, str]:
    """``dates`` without those an ingest already read in their current content.

    For the sensor's first look (no cursor): every date then reads as new, although
    ``memory-pipeline run`` may have just ingested them all. A date whose partition was
    materialized (``ingested_at``, epoch seconds) after the newest change of any source file
    saw the files as they are now, so it is not requested again; a date never ingested, or
    ingested before some file changed, is.
    """
    newest = newest_change_ns / 1e9
    return {d: h for d, h in dates.items() if not ingested_at.get(d, float("-inf")) > newest}


# Sessions of D are built from raw_messages D-1..D+1 (the window dependency in defs/sessions.py): a
# session belongs to the date of its first message and may run past midnight. Changed records
# on D can therefore lengthen, shorten or split a session *owned by D-1* (one that ran into
# D), and can make D+1's first session a continuation of D's last one (or stop being one), so
# D+1's stored sessions would duplicate or lose messages. A changed date re-runs both
# neighbours (ingest of an unchanged date rewrites the same rows: the cost is the price of
# correct sessions, and the parsed-record cache keeps it small).
NEIGHBOURS = (1, 1)  # (days before, days after) a changed date that its change reaches


def run_ranges(
    changed: Iterable[dt.date],
    is_partition: Callable[[dt.date], bool],
    neighbours: tuple[int, int] = NEIGHBOURS,
) -> list[tuple[dt.date, dt.date, list[dt.date]]]:
    """(first, last, changed dates inside) of the runs that rebuild ``changed`` dates.

    Each changed date that is a partition spans ``neighbours`` days either side, clipped to
    partitions; windows that overlap or touch merge into one range, so no two requested
    runs write the same partition (they could run at the same time).
    """
    before, after = (dt.timedelta(days=n) for n in neighbours)
    windows = []
    for day in sorted(set(changed)):
        if not is_partition(day):
            continue
        lo, hi = day, day
        while lo > day - before and is_partition(lo - dt.timedelta(days=1)):
            lo -= dt.timedelta(days=1)
        while hi < day + after and is_partition(hi + dt.timedelta(days=1)):
            hi += dt.timedelta(days=1)
        windows.append((lo, hi, day))
    out: list[tuple[dt.date, dt.date, list[dt.date]]] = []
    for lo, hi, day in windows:
        if out and lo <= out[-1][1] + dt.timedelta(days=1):
            first, last, days = out[-1]
            out[-1] = (first, max(last, hi), [*days, day])
        else:
            out.append((lo, hi, [day]))
    return out


def range_digest(dates: dict[dt.date, str], days: Iterable[dt.date]) -> str:
    """One digest over the changed dates of a range and their content (its run key)."""
    h = hashlib.blake2b(digest_size=8)
    for day in sorted(days):
        h.update(f"{day.isoformat()}={dates[day]};".encode())
    return h.hexdigest()
