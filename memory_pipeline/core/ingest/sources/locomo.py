"""LoCoMo reader: one sample is one conversation, one canonical record per dialogue turn.

LoCoMo gives only session start times ("1:56 pm on 8 May, 2023"); turn i of a session is
placed at start + i * ``turn_seconds`` (default 30) and flagged ``ts_inferred`` so nothing
downstream mistakes the spacing for real timing. ``source_ref`` is the turn's ``dia_id``
verbatim because the benchmark's evidence lists point at it. The qa / event_summary /
observation / session_summary parts are evaluation data and are not read here.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
from collections.abc import Iterator
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
    R_TOO_DEEP,
    R_VALUE_OUT_OF_RANGE,
    Message,
    QuarantineRecord,
    Record,
    SourceError,
)
from memory_pipeline.core.common.timelex import MONTH_NUMBERS
from memory_pipeline.core.common.timeutil import zone
from memory_pipeline.core.ingest.sources.base import (
    OUT_OF_RANGE_TIME,
    DuplicateKey,
    FileRejected,
    JsonRejected,
    SourceSpec,
    duplicate_problem,
    load_json,
    path_problem,
    path_quarantine,
    register,
    utc_or_none,
)

log = logging.getLogger(__name__)

KIND = "locomo"
DEFAULT_TURN_SECONDS = 30

_SESSION_KEY = re.compile(r"session_(\d+)")
# "1:56 pm on 8 May, 2023", leniently: any case, optional/extra spaces, "p.m.", "Sept", no comma.
_SESSION_TIME = re.compile(
    r"\s*(\d{1,2})\s*:\s*(\d{2})\s*([ap])\.?\s*m\.?\s+on\s+(\d{1,2})\s+([a-z]+)\.?\s*,?\s*(\d{4})\s*",
    re.IGNORECASE,
)


def parse_session_time(value: str) -> dt.datetime:
    """LoCoMo session time -> naive local datetime; ValueError when it is not that shape.

    Equivalent to ``strptime(value, "%I:%M %p on %d %B, %Y")`` but tolerant of case and spacing,
    because hand-edited copies of the corpus vary there.
    """
    m = _SESSION_TIME.fullmatch(value)
    if m is None:
        raise ValueError("not '<h>:<mm> am|pm on <day> <Month>, <year>'")
    hour, minute, half, day, month_name, year = m.groups()
    month = MONTH_NUMBERS.get(month_name.lower())
    h = int(hour)
    if month is None or not 1 <= h <= 12:
        raise ValueError("unknown month or hour out of range")
    h = h % 12 + (12 if half.lower() == "p" else 0)
    return dt.datetime(int(year), month, int(day), h, int(minute))


def load_locomo_samples(path: Path) -> list[dict[str, Any]]:
    """Read one LoCoMo JSON file and check its top-level structure.

    Shared with evaluation (which reads ``qa`` from the same samples), so a wrong file fails
    here with a SourceError naming the file and the first offending sample, not a KeyError.
    """
    return _load(path)[0]


def _load(path: Path) -> tuple[list[dict[str, Any]], list[DuplicateKey]]:
    """(samples, duplicated keys); raises ``FileRejected`` (a SourceError with the
    quarantine reason the file gets when it lies beside other LoCoMo files)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
        parsed = load_json(raw)
    except FileNotFoundError as exc:
        raise SourceError(f"{path}: LoCoMo file not found") from exc
    except UnicodeDecodeError as exc:
        raise FileRejected(
            R_ENCODING, f"{path}: not UTF-8 JSON ({exc.reason} at byte {exc.start})"
        ) from exc
    except JsonRejected as exc:
        raise FileRejected(exc.reason, f"{path}: {exc.detail}") from exc
    except ValueError as exc:
        raise FileRejected(R_MALFORMED_JSON, f"{path}: not JSON ({exc})") from exc
    except OSError as exc:
        raise SourceError(f"{path}: cannot read ({exc})") from exc
    data = parsed.value
    if not isinstance(data, list):
        raise FileRejected(
            R_MALFORMED_JSON,
            f"{path}: LoCoMo top level must be a list of samples, got {type(data).__name__}",
        )
    for i, sample in enumerate(data):
        where = f"{path}: sample {i}"
        if not isinstance(sample, dict):
            raise FileRejected(
                R_MALFORMED_JSON, f"{where} is not an object ({type(sample).__name__})"
            )
        sid = sample.get("sample_id")
        if not isinstance(sid, str) or not sid:
            raise FileRejected(R_MISSING_FIELD, f"{where} has no string 'sample_id'")
        conv = sample.get("conversation")
        if not isinstance(conv, dict):
            raise FileRejected(R_MISSING_FIELD, f"{where} ({sid}) has no 'conversation' object")
        for key in ("speaker_a", "speaker_b"):
            if not isinstance(conv.get(key), str) or not conv[key]:
                raise FileRejected(
                    R_MISSING_FIELD, f"{where} ({sid}) has no string conversation.{key}"
                )
    return data, parsed.duplicates


def _inputs(spec: SourceSpec) -> list[tuple[Path, str]]:
    """(file, source_file) pairs: the file itself, or a directory's *.json files by name."""
    path = spec.path
    if path.is_dir():
        # every *.json is listed, readable or not: a dangling link, a loop or a link out of
        # the folder becomes a quarantine row in read_locomo instead of being skipped
        files = sorted(p for p in path.glob("*.json") if not p.name.startswith("."))
        if not files:
            raise SourceError(f"source {spec.name!r}: no *.json LoCoMo files in {path}")
        return [(p, p.relative_to(path).as_posix()) for p in files]
    if not path.is_file():
        raise SourceError(f"source {spec.name!r}: LoCoMo input not found: {path}")
    return [(path, path.name)]


def _turn_seconds(spec: SourceSpec) -> float:
    value = spec.options.get("turn_seconds", DEFAULT_TURN_SECONDS)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise SourceError(
            f"source {spec.name!r}: option turn_seconds must be a non-negative number, "
            f"got {value!r}"
        )
    return value


def _sessions(conv: dict[str, Any]) -> list[str]:
    """The "session_N" keys in numeric order of N, not JSON key order."""
    found = []
    for key in conv:
        m = _SESSION_KEY.fullmatch(key)
        if m is not None:
            found.append((int(m.group(1)), key))
    return [key for _, key in sorted(found)]


def _excerpt(obj: Any) -> str:
    try:
        return json.dumps(obj, ensure_ascii=False)[:MAX_RAW_EXCERPT]
    except (TypeError, ValueError):
        return repr(obj)[:MAX_RAW_EXCERPT]


def _turn_text(turn: dict[str, Any], text: str) -> str:
    """The turn's text plus the caption of a shared image, which is part of what was said."""
    caption = turn.get("blip_caption")
    if isinstance(caption, str) and caption.strip():
        tag = f"[image: {caption.strip()}]"
        return f"{text} {tag}" if text else tag
    return text


@register(KIND)
def read_locomo(spec: SourceSpec, dates: frozenset[dt.date] | None) -> Iterator[Record]:
    """Yield one Message or QuarantineRecord per turn of every sample the owner takes part in.

    The corpus is small, so the ``dates`` hint is not used (callers filter by date anyway).
    """
    inputs = _inputs(spec)
    turn_seconds = _turn_seconds(spec)
    try:
        zone(spec.timezone)
    except ValueError as exc:
        raise SourceError(f"source {spec.name!r}: {exc}") from exc
    read = skipped = 0
    in_folder = spec.path.is_dir()
    rejected: list[tuple[QuarantineRecord, SourceError]] = []
    loaded = 0
    for path, rel in inputs:
        if in_folder:
            problem = path_problem(path, spec.path)
            if problem is not None:
                yield _file_record(spec, rel, *problem)
                continue
        try:
            samples, dups = _load(path)
        except FileRejected as exc:
            if not in_folder:
                raise
            # one bad file beside good ones costs only itself; all bad: the setup is wrong
            rejected.append((_file_record(spec, rel, exc.reason, _REJECTED[exc.reason]), exc))
            continue
        loaded += 1
        turns = 0
        for n, sample in enumerate(samples):
            conv = sample["conversation"]
            a, b = conv["speaker_a"], conv["speaker_b"]
            owner = a if spec.owner is None else spec.owner
            if owner not in (a, b):
                skipped += 1  # another pair's conversation: not this owner's history
                continue
            read += 1
            contact = b if owner == a else a
            mine = [d for d in dups if d.path[:1] == (n,)]
            for rec in _sample_records(spec, rel, sample, owner, contact, turn_seconds, n, mine):
                turns += 1
                yield rec
        if not turns and (read or spec.owner is None):
            detail = "no dialogue turn in the samples read"
            yield _file_record(spec, rel, R_NO_RECORDS, detail)
    if rejected and not loaded:
        raise rejected[0][1]
    for rec, _ in rejected:
        yield rec
    if spec.owner is not None and read == 0:
        raise SourceError(
            f"source {spec.name!r}: owner {spec.owner!r} is a speaker in none of the "
            f'{skipped} LoCoMo samples in {spec.path} (set owner = "" on the source for '
            "benchmark mode: speaker_a of every sample)"
        )
    log.info(
        "locomo %s: %d conversations read, %d without owner %r skipped",
        spec.name,
        read,
        skipped,
        spec.owner,
    )


def _sample_records(
    spec: SourceSpec,
    rel: str,
    sample: dict[str, Any],
    owner: str,
    contact: str,
    turn_seconds: float,
    index: int = 0,
    dups: list[DuplicateKey] = (),  # type: ignore[assignment]
) -> Iterator[Record]:
    sid: str = sample["sample_id"]
    conv: dict[str, Any] = sample["conversation"]
    tz = spec.timezone
    order = 0  # global 0-based turn position in the conversation

    def quarantine(ref: str, reason: str, detail: str, raw: Any, day: dt.date | None) -> Record:
        return QuarantineRecord(
            source=spec.name,
            source_file=rel,
            source_line=None,
            record_ref=ref,
            conversation_id=sid,
            partition_date=day,
            reason=reason,
            detail=detail,
            raw=_excerpt(raw),
        )

    top = duplicate_problem(dups, (index,), _SAMPLE_KEYS) if dups else None
    for n, d in enumerate(d for d in dups if d.path == (index, "conversation")):
        if _SESSION_KEY.fullmatch(d.key) and isinstance(d.dropped, list):
            detail = f"in an earlier {d.key!r} list of a duplicated key"
            for i, turn in enumerate(d.dropped):
                ref = f"{sid}/{d.key}#{n + 1}/{i}"
                yield quarantine(ref, R_DUPLICATE_KEY, detail, turn, None)
    for key in _sessions(conv):
        turns = conv[key]
        if turns is None:
            continue  # same as an absent session
        if not isinstance(turns, list):
            # One record for the session: its turns cannot be counted.
            yield quarantine(
                f"{sid}/{key}",
                R_MALFORMED_JSON,
                f"{key} is a {type(turns).__name__}, not a list of turns",
                turns,
                None,
            )
            order += 1
            continue
        start: dt.datetime | None = None
        date_reason = date_detail = ""
        when = conv.get(f"{key}_date_time")
        if when is None or (isinstance(when, str) and not when.strip()):
            date_reason, date_detail = R_MISSING_TIMESTAMP, f"{key} has no {key}_date_time"
        elif not isinstance(when, str):
            date_reason = R_BAD_TIMESTAMP
            date_detail = f"{key}_date_time is a {type(when).__name__}, not a string"
        else:
            try:
                start = parse_session_time(when)
            except ValueError:
                date_reason = R_BAD_TIMESTAMP
                date_detail = f"{key}_date_time is not like '1:56 pm on 8 May, 2023'"

        where = (index, "conversation")
        dup = top or (duplicate_problem(dups, where, frozenset({key, f"{key}_date_time"})))
        for i, turn in enumerate(turns):
            pos = order
            order += 1
            try:
                local = start + dt.timedelta(seconds=i * turn_seconds) if start else None
                ts = utc_or_none(local, tz) if local else None
            except OverflowError:
                local = ts = None
            day = local.date() if local else None
            turn_dup = dup or duplicate_problem(dups, (*where, key, i), _TURN_KEYS)
            if turn_dup is not None:
                ref = f"{sid}/{key}/{i}"
                yield quarantine(ref, R_DUPLICATE_KEY, _duplicate_detail(turn_dup), turn, day)
                continue
            if not isinstance(turn, dict):
                yield quarantine(
                    f"{sid}/{key}/{i}", R_MALFORMED_JSON, "turn is not a JSON object", turn, day
                )
                continue
            dia_id = turn.get("dia_id")
            speaker = turn.get("speaker")
            text = turn.get("text")
            if not isinstance(dia_id, str) or not dia_id:
                ref = f"{sid}/{key}/{i}"
                yield quarantine(ref, R_MISSING_FIELD, "turn has no 'dia_id'", turn, day)
                continue
            ref = dia_id
            if not isinstance(speaker, str) or not speaker:
                yield quarantine(ref, R_MISSING_FIELD, "turn has no 'speaker'", turn, day)
            elif not isinstance(text, str):
                yield quarantine(ref, R_MISSING_FIELD, "turn has no string 'text'", turn, day)
            elif start is None:
                yield quarantine(ref, date_reason, date_detail, turn, None)
            elif local is None or ts is None:
                yield quarantine(ref, R_VALUE_OUT_OF_RANGE, OUT_OF_RANGE_TIME, turn, day)
            else:
                yield Message(
                    source=spec.name,
                    conversation_id=sid,
                    contact_id=contact,
                    sender=speaker,
                    is_owner=speaker == owner,
                    ts=ts,
                    local_ts=local,
                    tz=tz,
                    type="text",
                    text=_turn_text(turn, text),
                    source_order=pos,
                    source_ref=dia_id,
                    source_file=rel,
                    source_line=None,
                    ts_inferred=True,
                )


_SAMPLE_KEYS = frozenset({"sample_id", "conversation"})
_TURN_KEYS = frozenset({"dia_id", "speaker", "text", "blip_caption"})
# Log-safe details of a rejected file's quarantine row (the SourceError names the path).
_REJECTED = {
    R_ENCODING: "not UTF-8 JSON",
    R_MALFORMED_JSON: "not a LoCoMo JSON list of samples",
    R_MISSING_FIELD: "a sample without sample_id, conversation or speakers",
    R_TOO_DEEP: "JSON nested too deeply",
    R_VALUE_OUT_OF_RANGE: "a number too long to read",
}


def _duplicate_detail(dup: DuplicateKey) -> str:
    return f"key {str(dup.key)[:40]!r} appears twice with different values (JSON keeps the last)"


def _file_record(spec: SourceSpec, rel: str, reason: str, detail: str) -> QuarantineRecord:
    return path_quarantine(
        spec, rel, reason, detail, conversation_id=None, partition_date=None, record_ref="file"
    )
