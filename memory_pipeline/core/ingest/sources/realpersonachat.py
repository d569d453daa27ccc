"""RealPersonaChat reader: one dialogue per gzip JSON line, one canonical record per utterance.

Mapping (see docs/source_formats_corpora.md): a dialogue is a conversation
``rpc-{dialogue_id}``; with ``spec.owner`` set only the owner's dialogues are read (the others
are not part of that person's history) and the other interlocutor is the contact; with no
owner (benchmark mode) every dialogue is read and the contact is the sorted speaker pair.
Timestamps are naive ISO local times in ``spec.timezone``; ``"NaT"`` becomes a quarantine
record dated by its nearest timestamped neighbour. The hot loop is tuned: the full corpus
(408,619 utterances) must read in well under 3 s.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import logging
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from memory_pipeline.core.common.records import (
    MAX_RAW_EXCERPT,
    R_BAD_TIMESTAMP,
    R_DUPLICATE_KEY,
    R_ENCODING,
    R_MALFORMED_JSON,
    R_MISSING_FIELD,
    R_MISSING_TIMESTAMP,
    R_NO_RECORDS,
    R_SYMLINK_OUTSIDE,
    R_VALUE_OUT_OF_RANGE,
    Message,
    QuarantineRecord,
    Record,
    SourceError,
)
from memory_pipeline.core.common.timeutil import to_utc, zone
from memory_pipeline.core.ingest.sources.base import (
    OUT_OF_RANGE_TIME,
    SYMLINK_OUTSIDE_DETAIL,
    DuplicateKey,
    JsonRejected,
    SourceSpec,
    duplicate_problem,
    fits_int64,
    load_json,
    outside_source,
    register,
)

log = logging.getLogger(__name__)

KIND = "realpersonachat"
FILE_NAME = "dialogues.jsonl.gz"
NAT = "NaT"

_UTC = dt.UTC
_HOUR_END = dt.timedelta(hours=1) - dt.timedelta(microseconds=1)
_fromiso = dt.datetime.fromisoformat

# Message is built positionally in the hot loop (keyword construction costs ~0.35 s over the
# corpus); if records.py ever reorders these fields, fall back to keywords instead of breaking.
_MESSAGE_ARGS = (
    "source",
    "conversation_id",
    "contact_id",
    "sender",
    "is_owner",
    "ts",
    "local_ts",
    "tz",
    "type",
    "text",
    "source_order",
    "source_ref",
    "source_file",
    "source_line",
)


def _message_by_keywords(*args: Any) -> Message:
    return Message(**dict(zip(_MESSAGE_ARGS, args, strict=True)))


_new_message = (
    Message
    if tuple(f.name for f in fields(Message))[: len(_MESSAGE_ARGS)] == _MESSAGE_ARGS
    else _message_by_keywords
)

# The keys the reader reads: a duplicate of one of them (with another value) is ambiguous.
DIALOGUE_KEYS = frozenset({"dialogue_id", "interlocutors"})
UTTERANCE_KEYS = frozenset({"utterance_id", "interlocutor_id", "text", "timestamp"})

# A parsed timestamp: (naive local wall time, aware UTC instant), or a quarantine reason code.
_Parsed = tuple[dt.datetime, dt.datetime] | str


@dataclass
class RpcStats:
    """What one pass over the file saw; the reader logs it, ``count_skipped`` returns part of it."""

    lines: int = 0
    dialogues_read: int = 0
    skipped_without_owner: int = 0
    skipped_by_dates: int = 0
    bad_lines: int = 0
    limited: bool = False


class _Clock:
    """ISO local-time strings -> (local, UTC) fast.

    ``to_utc`` costs ~1.6 us per call, too slow for 400k utterances. Within one wall-clock hour
    without a UTC-offset change the offset is constant, so the offset is cached per
    ``"YYYY-MM-DDTHH"`` prefix and applied by parsing the same string as UTC and subtracting.
    Hours containing a transition are marked and always go through ``to_utc``, so the result
    is identical to ``to_utc`` for every input.
    """

    __slots__ = ("tz", "zone", "offsets")

    def __init__(self, tz: str) -> None:
        self.tz = tz
        self.zone = zone(tz)
        # hour prefix -> constant offset, or None when the offset changes inside that hour
        self.offsets: dict[str, dt.timedelta | None] = {}

    def parse(self, s: str) -> tuple[dt.datetime, dt.datetime]:
        """Parse one timestamp string; ValueError when it is not ISO-8601."""
        off = self.offsets.get(s[:13])
        if off is not None:
            try:
                return _fromiso(s), _fromiso(s + "+00:00") - off
            except ValueError:
                pass  # same hour prefix but another shape (offset, "Z"): slow path below
        local = _fromiso(s)
        if local.tzinfo is not None:  # an explicit offset wins over spec.timezone
            ts = local.astimezone(_UTC)
            return ts.astimezone(self.zone).replace(tzinfo=None), ts
        ts = to_utc(local, self.tz)
        if len(s) >= 13 and s[4] == "-" and s[7] == "-" and s[10] in "T ":
            self._learn_hour(s[:13], local)
        return local, ts

    def _learn_hour(self, key: str, local: dt.datetime) -> None:
        if key in self.offsets:
            return
        start = local.replace(minute=0, second=0, microsecond=0)
        end = start + _HOUR_END
        off_start = start - to_utc(start, self.tz).replace(tzinfo=None)
        off_end = end - to_utc(end, self.tz).replace(tzinfo=None)
        self.offsets[key] = off_start if off_start == off_end else None


def _resolve(spec: SourceSpec) -> tuple[Path, str]:
    """The dialogues file and its ``source_file`` name (relative to spec.path)."""
    path = spec.path
    if path.is_dir():
        path, rel = path / FILE_NAME, FILE_NAME
        if outside_source(path, spec.path):
            return path, rel  # not read: the reader accounts for it (symlink_outside_source)
    else:
        rel = path.name
    if not path.is_file():
        raise SourceError(f"source {spec.name!r}: RealPersonaChat file not found: {path}")
    return path, rel


def _dialogue_limit(spec: SourceSpec) -> int | None:
    limit = spec.options.get("dialogue_limit")
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise SourceError(
            f"source {spec.name!r}: option dialogue_limit must be a non-negative int, got {limit!r}"
        )
    return limit


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(1-based line number, raw line); a damaged gzip stream is a SourceError naming the file."""
    try:
        with gzip.open(path, "rb") as fh:
            yield from enumerate(fh, 1)
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise SourceError(f"{path}: not a readable gzip file ({exc})") from exc
    except OSError as exc:
        raise SourceError(f"{path}: cannot read ({exc})") from exc


def _participants(obj: dict[str, Any], utts: list[Any]) -> list[str]:
    """The dialogue's ``interlocutors``; derived from the utterances when that field is bad."""
    people = obj.get("interlocutors")
    if isinstance(people, list) and people and all(isinstance(p, str) for p in people):
        return people
    return sorted(
        {
            u["interlocutor_id"]
            for u in utts
            if isinstance(u, dict) and isinstance(u.get("interlocutor_id"), str)
        }
    )


def _excerpt(obj: Any) -> str:
    if isinstance(obj, bytes):
        return obj.decode("utf-8", "replace").rstrip("\r\n")[:MAX_RAW_EXCERPT]
    try:
        return json.dumps(obj, ensure_ascii=False)[:MAX_RAW_EXCERPT]
    except (TypeError, ValueError):
        return repr(obj)[:MAX_RAW_EXCERPT]


def _parse_line(line: bytes) -> tuple[Any, str, str, list[DuplicateKey]]:
    """(object, "", "", duplicated keys) or (None, reason, detail, []); the detail never
    quotes the line. Lone surrogates are scrubbed (``load_json``)."""
    try:
        parsed = load_json(line)
        return parsed.value, "", "", parsed.duplicates
    except UnicodeDecodeError as exc:
        return None, R_ENCODING, f"line is not valid UTF-8 (byte offset {exc.start})", []
    except JsonRejected as exc:
        return None, exc.reason, exc.detail, []
    except ValueError as exc:
        pos = getattr(exc, "pos", None)
        return None, R_MALFORMED_JSON, f"line is not valid JSON (char {pos})", []


def _nearest_date(parsed: list[_Parsed], i: int) -> dt.date | None:
    """Local date of the nearest timestamped utterance: the previous one, else the next one."""
    for j in range(i - 1, -1, -1):
        p = parsed[j]
        if type(p) is tuple:
            return p[0].date()
    for j in range(i + 1, len(parsed)):
        p = parsed[j]
        if type(p) is tuple:
            return p[0].date()
    return None


def _outside(parsed: list[_Parsed], dates: frozenset[dt.date], first: dt.date) -> bool:
    """True when no record of the dialogue can belong to ``dates``.

    Only dialogues whose every known date is later than the first wanted date and not wanted
    qualify: ingest accounts records dated before start_date in the start_date partition, so an
    early dialogue may still matter; a dialogue without any timestamp is never skipped.
    """
    days = [p[0].date() for p in parsed if type(p) is tuple]
    return bool(days) and all(d >= first and d not in dates for d in days)


def _parse_timestamps(utts: list[Any], clock: _Clock) -> list[_Parsed]:
    """Pass 1 over a dialogue: every utterance's (local, utc) or the timestamp reason code."""
    out: list[_Parsed] = []
    append = out.append
    parse = clock.parse
    offsets = clock.offsets
    fromiso = _fromiso
    for u in utts:
        s = u.get("timestamp") if type(u) is dict else None
        if type(s) is str and s != NAT:
            off = offsets.get(s[:13])  # the _Clock.parse fast path, inlined: it is the hot loop
            if off is not None:
                try:
                    append((fromiso(s), fromiso(s + "+00:00") - off))
                    continue
                except (ValueError, OverflowError):
                    pass
            try:
                append(parse(s))
            except ValueError:
                append(R_BAD_TIMESTAMP)
            except OverflowError:  # year 1 east of UTC, year 9999 west of it
                append(R_VALUE_OUT_OF_RANGE)
        elif s is None or s == NAT or s == "":
            append(R_MISSING_TIMESTAMP)
        else:
            append(R_BAD_TIMESTAMP)
    return out


@register(KIND)
def read_realpersonachat(spec: SourceSpec, dates: frozenset[dt.date] | None) -> Iterator[Record]:
    """Yield one Message or QuarantineRecord per utterance of the dialogues in scope.

    A line that is not a dialogue object is one QuarantineRecord (its utterances cannot be
    counted). ``dates`` only lets whole dialogues be skipped that cannot land on those dates.
    """
    return _read(spec, dates, RpcStats())


def count_skipped(spec: SourceSpec) -> int:
    """How many well-formed dialogues the reader skips because the owner is not in them.

    They are not the owner's history, so they are not input records of this source; this count
    lets a report reconcile the corpus total with what was read. Honours ``dialogue_limit``.
    """
    stats = RpcStats()
    for _ in _read(spec, None, stats, emit=False):
        pass
    return stats.skipped_without_owner


def _read(
    spec: SourceSpec,
    dates: frozenset[dt.date] | None,
    stats: RpcStats,
    emit: bool = True,
) -> Iterator[Record]:
    path, rel = _resolve(spec)
    limit = _dialogue_limit(spec)
    owner = spec.owner
    source = spec.name
    tz = spec.timezone
    try:
        clock = _Clock(tz)
    except ValueError as exc:
        raise SourceError(f"source {source!r}: {exc}") from exc

    def line_record(no: int, raw: bytes | Any, reason: str, detail: str) -> QuarantineRecord:
        return QuarantineRecord(
            source=source,
            source_file=rel,
            source_line=no,
            record_ref=f"line:{no}",
            conversation_id=None,
            partition_date=None,
            reason=reason,
            detail=detail,
            raw=_excerpt(raw),
        )

    # Bad lines seen before the first dialogue object are held back: if no line of the file
    # is a dialogue, the whole input is unreadable (SourceError), not a pile of quarantines.
    if spec.path.is_dir() and outside_source(path, spec.path):
        if emit:
            yield line_record(0, b"", R_SYMLINK_OUTSIDE, SYMLINK_OUTSIDE_DETAIL)
        return
    first_wanted = min(dates) if dates else None
    utterances = 0  # in the dialogues in scope: a file of none is one no_records row
    pending: list[QuarantineRecord] | None = []
    in_scope = 0  # lines that produce records; what dialogue_limit counts
    valid = 0
    for no, line in _lines(path):
        stats.lines = no
        if limit is not None and in_scope >= limit:
            stats.limited = True
            break
        if not line.strip():
            continue  # blank lines (e.g. a trailing newline) are not records
        obj, reason, detail, dups = _parse_line(line)
        utts = obj.get("utterances") if type(obj) is dict else None
        if type(utts) is not list:
            if not reason:
                reason = R_MALFORMED_JSON if type(obj) is not dict else R_MISSING_FIELD
                detail = (
                    "line is not a JSON object"
                    if type(obj) is not dict
                    else "dialogue has no 'utterances' list"
                )
            in_scope += 1
            stats.bad_lines += 1
            rec = line_record(no, line, reason, detail)
            if pending is not None:
                pending.append(rec)
            elif emit:
                yield rec
            continue
        valid += 1
        if pending:
            if emit:
                yield from pending
        pending = None

        people = _participants(obj, utts)
        if owner is not None:
            if owner not in people:
                stats.skipped_without_owner += 1
                continue
            contact = "+".join(p for p in people if p != owner)
        else:
            contact = "+".join(sorted(people))
        in_scope += 1
        stats.dialogues_read += 1
        utterances += len(utts)
        if dups:
            utterances += sum(len(v) for v in _dropped_utterances(dups))
        if not emit:
            continue

        parsed = _parse_timestamps(utts, clock)
        if dups:
            yield from _duplicate_records(spec, rel, no, obj, parsed, dups)
        if first_wanted is not None and _outside(parsed, dates, first_wanted):
            stats.skipped_by_dates += 1
            continue
        yield from _dialogue_records(spec, rel, no, obj, utts, parsed, contact, dups)

    if pending is not None and not stats.limited:
        # Every non-blank line was bad (or the file is empty): nothing here is a dialogue.
        what = f"{stats.bad_lines} lines, none" if stats.bad_lines else "no lines; nothing"
        raise SourceError(f"{path}: not RealPersonaChat JSON lines ({what} is a dialogue object)")
    if pending:
        if emit:
            yield from pending
    if emit and stats.dialogues_read and not utterances:
        detail = f"{stats.dialogues_read} dialogues in scope, none with an utterance"
        yield line_record(0, b"", R_NO_RECORDS, detail)
    if emit:
        log.info(
            "realpersonachat %s: %d dialogues read, %d without owner %r skipped, %d skipped by "
            "date hint, %d bad lines",
            source,
            stats.dialogues_read,
            stats.skipped_without_owner,
            owner,
            stats.skipped_by_dates,
            stats.bad_lines,
        )
    if owner is not None and stats.dialogues_read == 0 and not stats.limited:
        raise SourceError(
            f"source {source!r}: owner {owner!r} takes part in none of the {valid} dialogues "
            f'in {path} (set owner = "" on the source for benchmark mode: every dialogue)'
        )


def _dialogue_records(
    spec: SourceSpec,
    rel: str,
    line_no: int,
    obj: dict[str, Any],
    utts: list[Any],
    parsed: list[_Parsed],
    contact: str,
    dups: list[DuplicateKey] = (),  # type: ignore[assignment]
) -> list[Record]:
    """Pass 2 over one dialogue: exactly one record per utterance, in file order.

    Returns a list rather than yielding: one generator level less per utterance is measurable.
    """
    source = spec.name
    owner = spec.owner
    tz = spec.timezone
    did = obj.get("dialogue_id")
    id_ok = type(did) is int or (type(did) is str and did != "")
    conv = f"rpc-{did}" if id_ok else None
    ref_prefix = f"dialogue:{did}/utterance:" if id_ok else f"line:{line_no}/utterance:"
    new_message = _new_message
    out: list[Record] = []
    append = out.append

    top = duplicate_problem(dups, (), DIALOGUE_KEYS) if dups else None
    for i, u in enumerate(utts):
        p = parsed[i]
        dup = top or (duplicate_problem(dups, ("utterances", i), UTTERANCE_KEYS) if dups else None)
        if type(u) is dict:
            uid = u.get("utterance_id", i)
            uid_ok = type(uid) is not int or fits_int64(uid)
            order = uid if type(uid) is int and uid_ok else i
            sender = u.get("interlocutor_id")
            text = u.get("text")
            if (
                type(p) is tuple
                and id_ok
                and type(sender) is str
                and type(text) is str
                and uid_ok
                and dup is None
            ):
                append(
                    new_message(
                        source,
                        conv,
                        contact,
                        sender,
                        sender == owner,
                        p[1],
                        p[0],
                        tz,
                        "text",
                        text,
                        order,
                        f"{ref_prefix}{order}",
                        rel,
                        line_no,
                    )
                )
                continue
            if dup is not None:
                reason, detail = R_DUPLICATE_KEY, _duplicate_detail(dup)
            elif not id_ok:
                reason, detail = R_MISSING_FIELD, "dialogue has no usable 'dialogue_id'"
            elif not uid_ok:
                reason, detail = R_VALUE_OUT_OF_RANGE, "utterance_id does not fit 64 bits"
            elif type(sender) is not str:
                reason, detail = R_MISSING_FIELD, "utterance has no string 'interlocutor_id'"
            elif type(text) is not str:
                reason, detail = R_MISSING_FIELD, "utterance has no string 'text'"
            elif p == R_MISSING_TIMESTAMP:
                reason, detail = p, "timestamp is missing or 'NaT'"
            elif p == R_VALUE_OUT_OF_RANGE:
                reason, detail = p, OUT_OF_RANGE_TIME
            else:
                ts_raw = u.get("timestamp")
                reason = R_BAD_TIMESTAMP
                detail = f"timestamp is not ISO-8601 ({type(ts_raw).__name__})"
        else:
            order = i
            reason, detail = R_MALFORMED_JSON, "utterance is not a JSON object"
        append(
            QuarantineRecord(
                source=source,
                source_file=rel,
                source_line=line_no,
                record_ref=f"{ref_prefix}{order}",
                conversation_id=conv,
                partition_date=p[0].date() if type(p) is tuple else _nearest_date(parsed, i),
                reason=reason,
                detail=detail,
                raw=_excerpt(u),
            )
        )
    return out


def _duplicate_detail(dup: DuplicateKey) -> str:
    return f"key {dup.key[:40]!r} appears twice with different values (JSON keeps the last)"


def _dropped_utterances(dups: list[DuplicateKey]) -> list[list[Any]]:
    """The earlier ``utterances`` arrays of a duplicated key (a non-list value as one item)."""
    return [
        d.dropped if isinstance(d.dropped, list) else [d.dropped]
        for d in dups
        if d.path == () and d.key == "utterances"
    ]


def _duplicate_records(
    spec: SourceSpec,
    rel: str,
    line_no: int,
    obj: dict[str, Any],
    parsed: list[_Parsed],
    dups: list[DuplicateKey],
) -> Iterator[QuarantineRecord]:
    """One ``duplicate_key`` record per utterance of an earlier ``utterances`` array (JSON
    keeps the last array; the earlier ones are input records too)."""
    did = obj.get("dialogue_id")
    id_ok = type(did) is int or (type(did) is str and did != "")
    day = next((p[0].date() for p in parsed if type(p) is tuple), None)
    for n, values in enumerate(_dropped_utterances(dups), 1):
        for j, u in enumerate(values):
            prefix = f"dialogue:{did}" if id_ok else f"line:{line_no}"
            yield QuarantineRecord(
                source=spec.name,
                source_file=rel,
                source_line=line_no,
                record_ref=f"{prefix}/utterances#{n}[{j}]",
                conversation_id=f"rpc-{did}" if id_ok else None,
                partition_date=day,
                reason=R_DUPLICATE_KEY,
                detail=f"in an earlier 'utterances' array (number {n}) of a duplicated key",
                raw=_excerpt(u),
            )
