"""RealPersonaChat in columns: the whole file parsed by pyarrow's JSON reader, no Python
object per utterance.

Why: the row reader (realpersonachat.py) builds a dict per utterance (json.loads) and a
``Message`` per utterance; at 408,619 utterances that was most of the ingest time. Here the
file is decompressed once, parsed into Arrow columns with an explicit schema, flattened, and
timestamps are parsed and shifted to UTC over whole columns.

This path gives exactly what the row reader gives, or nothing: any file it cannot prove
clean (a bad line, a blank line that would shift line numbers, a ``\\ud800`` escape, a value of
an unexpected JSON type, a dialogue without usable ids or participants, an utterance without
sender or text) returns ``None`` and the caller uses the row reader, whose quarantine rules
are the reference. pyarrow's reader is strict about types (a number where a string is
expected fails the parse), which is what makes that proof cheap. Utterances with a missing,
``NaT`` or unparseable timestamp are handled here (they are the corpus's own bad records),
through the same reason codes, details, dates and excerpts as the row reader.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import logging
import zlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from memory_pipeline.core.common.records import (
    R_BAD_TIMESTAMP,
    R_MISSING_TIMESTAMP,
    QuarantineRecord,
    SourceError,
)
from memory_pipeline.core.common.schema import TS_LOCAL, TS_UTC
from memory_pipeline.core.common.timeutil import to_utc
from memory_pipeline.core.ingest.sources.base import (
    CANDIDATES,
    MAX_JSON_DEPTH,
    SourceSpec,
    SourceTables,
    json_depth_exceeds,
    outside_source,
    register_tables,
)
from memory_pipeline.core.ingest.sources.realpersonachat import (
    _HOUR_END,
    KIND,
    NAT,
    _Clock,
    _dialogue_limit,
    _excerpt,
    _resolve,
)

log = logging.getLogger(__name__)

_UTTERANCE = pa.struct(
    [
        ("utterance_id", pa.int64()),
        ("interlocutor_id", pa.string()),
        ("text", pa.string()),
        ("timestamp", pa.string()),
    ]
)
_SCHEMA = pa.schema(
    [
        ("dialogue_id", pa.int64()),
        ("interlocutors", pa.list_(pa.string())),
        ("utterances", pa.list_(_UTTERANCE)),
    ]
)
_PARSE = pj.ParseOptions(explicit_schema=_SCHEMA, unexpected_field_behavior="ignore")
_BLOCK = 1 << 22  # a line longer than this fails the parse: the row reader takes the file
# The timestamp shape parsed in columns; any other string goes through _Clock.parse.
_ISO = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{6})?$"
_HOUR_US = 3_600_000_000


def _decompress(path) -> bytes | None:
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    try:
        return gzip.decompress(raw)
    except (gzip.BadGzipFile, EOFError, zlib.error):
        return None


def _parse(buf: bytes) -> pa.Table | None:
    """The dialogues table, or None when the file is not provably clean JSON lines."""
    # A lone-surrogate escape (\ud800) fails pyarrow's parse ("surrogate pair ... invalid"),
    # so such a file goes to the row reader, which scrubs it.
    if not buf:
        return None
    lines = buf.count(b"\n") + (0 if buf.endswith(b"\n") else 1)
    try:
        table = pj.read_json(
            pa.py_buffer(buf), read_options=pj.ReadOptions(block_size=_BLOCK), parse_options=_PARSE
        )
    except (pa.ArrowException, ValueError):  # UnicodeDecodeError is a ValueError
        return None
    if table.num_rows != lines:  # a blank line was skipped: line numbers would shift
        return None
    if _too_deep(buf):  # pyarrow reads any depth in an ignored field; json.loads cannot
        return None
    table = table.combine_chunks()
    for name in ("dialogue_id", "interlocutors", "utterances"):
        if table.column(name).null_count:
            return None
    people = table.column("interlocutors").chunk(0)
    if pc.min(pc.list_value_length(people)).as_py() == 0 or people.values.null_count:
        return None
    utts = table.column("utterances").chunk(0).values
    if utts.field("interlocutor_id").null_count or utts.field("text").null_count:
        return None
    # the JSON reader skips whitespace-only lines too; a line with only a value of another
    # shape fails the parse, so rows map to lines 1..n
    return table


def _too_deep(buf: bytes) -> bool:
    """True when a line nests deeper than ``MAX_JSON_DEPTH`` (the row reader quarantines it
    as ``too_deeply_nested``). Per line, the count of ``[`` and ``{`` bounds the depth, so
    only the rare line with more openers than the limit is scanned exactly (``bytes.find``
    and ``bytes.count`` run in C: about as fast as one pass over the buffer)."""
    start, n = 0, len(buf)
    while start < n:
        end = buf.find(b"\n", start)
        end = n if end < 0 else end
        opens = buf.count(b"[", start, end) + buf.count(b"{", start, end)
        if opens > MAX_JSON_DEPTH and json_depth_exceeds(buf[start:end]):
            return True
        start = end + 1
    return False


class _NotClean(Exception):
    """A value this path does not decide (a time outside year 1..9999): the row reader does."""


def _local_and_utc(stamps: pa.Array, clock: _Clock) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(local us, utc us, ok) per timestamp string; ``ok`` False where the row reader would
    quarantine. Strings of the common shape are parsed in columns; the others, and every
    hour whose UTC offset changes, go through ``_Clock.parse`` one by one (as the row reader
    does for all of them)."""
    n = len(stamps)
    local = np.zeros(n, np.int64)
    utc = np.zeros(n, np.int64)
    ok = np.zeros(n, bool)
    shaped = pc.fill_null(pc.match_substring_regex(stamps, _ISO), False)
    base = pc.utf8_slice_codeunits(stamps, 0, 19)
    sec = pc.strptime(base, format="%Y-%m-%dT%H:%M:%S", unit="us", error_is_null=True)
    # a date strptime normalizes (Feb 30) does not print back the same: not parsed here
    back = pc.utf8_slice_codeunits(pc.cast(sec, pa.string()), 0, 19)
    same = pc.fill_null(pc.equal(back, pc.replace_substring(base, "T", " ")), False)
    fast = pc.and_(shaped, same).to_numpy(zero_copy_only=False)
    frac = pc.utf8_slice_codeunits(stamps, 20, 26)
    has_frac = pc.and_(shaped, pc.equal(pc.utf8_length(stamps), 26))  # only ".ffffff" here
    micro = pc.cast(pc.if_else(has_frac, frac, "0"), pa.int64())
    sec_us = pc.fill_null(pc.cast(sec, pa.int64()), 0).to_numpy(zero_copy_only=False)
    micro_us = pc.fill_null(micro, 0).to_numpy(zero_copy_only=False)
    local_fast = sec_us + np.where(fast, micro_us, 0)
    hours = local_fast // _HOUR_US
    uniq, inverse = np.unique(np.where(fast, hours, 0), return_inverse=True)
    offsets = np.zeros(len(uniq), np.int64)
    constant = np.zeros(len(uniq), bool)
    epoch = dt.datetime(1970, 1, 1)
    for i, h in enumerate(uniq.tolist()):
        start = epoch + dt.timedelta(microseconds=h * _HOUR_US)
        end = start + _HOUR_END
        try:
            off_start = start - to_utc(start, clock.tz).replace(tzinfo=None)
            off_end = end - to_utc(end, clock.tz).replace(tzinfo=None)
        except OverflowError:
            continue  # the rows go through clock.parse, which decides them
        if off_start == off_end:
            constant[i] = True
            offsets[i] = off_start // dt.timedelta(microseconds=1)
    col = fast & constant[inverse]
    local[col] = local_fast[col]
    utc[col] = local_fast[col] - offsets[inverse][col]
    ok[col] = True
    slow = np.flatnonzero(~col & ~pc.is_null(stamps).to_numpy(zero_copy_only=False))
    values = stamps.take(pa.array(slow, pa.int64())).to_pylist()
    for row, s in zip(slow.tolist(), values, strict=True):
        if s == NAT:
            continue
        try:
            lt, ut = clock.parse(s)
        except ValueError:
            continue
        except OverflowError:
            raise _NotClean from None
        local[row] = (lt - epoch) // dt.timedelta(microseconds=1)
        utc[row] = (ut.replace(tzinfo=None) - epoch) // dt.timedelta(microseconds=1)
        ok[row] = True
    return local, utc, ok


def _nearest_day(days: np.ndarray, ok: np.ndarray, lo: int, hi: int, i: int) -> dt.date | None:
    """realpersonachat._nearest_date over one dialogue's rows [lo, hi)."""
    before = np.flatnonzero(ok[lo:i])
    if len(before):
        return _EPOCH_DATE + dt.timedelta(days=int(days[lo + before[-1]]))
    after = np.flatnonzero(ok[i + 1 : hi])
    if len(after):
        return _EPOCH_DATE + dt.timedelta(days=int(days[i + 1 + after[0]]))
    return None


_EPOCH_DATE = dt.date(1970, 1, 1)


@register_tables(KIND)
def read_realpersonachat_tables(spec: SourceSpec) -> SourceTables | None:
    """The columnar twin of ``read_realpersonachat`` (no date hint: ingest filters dates)."""
    path, rel = _resolve(spec)
    if spec.path.is_dir() and outside_source(path, spec.path):
        return None  # the row reader accounts for the link
    limit = _dialogue_limit(spec)
    owner, source, tz = spec.owner, spec.name, spec.timezone
    try:
        clock = _Clock(tz)
    except ValueError as exc:
        raise SourceError(f"source {source!r}: {exc}") from exc
    buf = _decompress(path)
    table = None if buf is None else _parse(buf)
    if table is None:
        return None
    people = table.column("interlocutors").chunk(0)
    people_lists = people.to_pylist()  # per dialogue, not per utterance
    if owner is not None:
        in_scope = np.array([owner in p for p in people_lists], bool)
        contacts = ["+".join(x for x in p if x != owner) for p in people_lists]
    else:
        in_scope = np.ones(len(people_lists), bool)
        contacts = ["+".join(sorted(p)) for p in people_lists]
    scope_rows = np.flatnonzero(in_scope)
    if limit is not None:
        scope_rows = scope_rows[:limit]
    if owner is not None and len(scope_rows) == 0 and limit != 0:
        return None  # the row reader raises the "owner takes part in none" error
    dialogues = table.take(pa.array(scope_rows, pa.int64()))
    line_no = pa.array(scope_rows + 1, pa.int64())
    utt_lists = dialogues.column("utterances").chunk(0)
    utts = utt_lists.flatten()
    parent = pc.list_parent_indices(utt_lists)
    offsets = utt_lists.offsets.to_numpy()[: len(scope_rows) + 1] - utt_lists.offsets[0].as_py()
    parent_np = parent.to_numpy()
    position = np.arange(len(utts), dtype=np.int64) - offsets[parent_np]

    did = pc.cast(dialogues.column("dialogue_id"), pa.string())
    conv = pc.binary_join_element_wise("rpc-", did, "").take(parent)
    uid = utts.field("utterance_id")
    order = pc.if_else(pc.is_null(uid), pa.array(position), uid)
    refs = pc.binary_join_element_wise(
        pc.binary_join_element_wise("dialogue:", did, "/utterance:", "").take(parent),
        pc.cast(order, pa.string()),
        "",
    )
    sender = utts.field("interlocutor_id")
    stamps = utts.field("timestamp")
    try:
        local_us, utc_us, ok = _local_and_utc(stamps, clock)
    except _NotClean:
        return None

    n = len(utts)
    if n == 0 and len(scope_rows):
        return None  # no utterance at all: the row reader's no_records row
    contact = pa.array(contacts, pa.string()).take(pa.array(scope_rows, pa.int64())).take(parent)
    lines = line_no.take(parent)
    is_owner = (
        pc.fill_null(pc.equal(sender, owner), False)
        if owner is not None
        else pa.array(np.zeros(n, bool))
    )
    candidates = pa.table(
        {
            "source": pa.repeat(pa.scalar(source, pa.string()), n),
            "conversation_id": conv,
            "contact_id": contact,
            "sender": sender,
            "is_owner": is_owner,
            "ts": pa.array(utc_us, pa.int64()).cast(TS_UTC),
            "local_ts": pa.array(local_us, pa.int64()).cast(TS_LOCAL),
            "tz": pa.repeat(pa.scalar(tz, pa.string()), n),
            "type": pa.repeat(pa.scalar("text", pa.string()), n),
            "text": utts.field("text"),
            "source_order": order,
            "source_ref": refs,
            "source_file": pa.repeat(pa.scalar(rel, pa.string()), n),
            "source_line": lines,
            "ts_inferred": pa.array(np.zeros(n, bool)),
        },
        schema=CANDIDATES,
    )
    quarantine = _timestamp_quarantine(
        buf, spec, rel, candidates, stamps, ok, local_us, offsets, parent_np, scope_rows
    )
    messages = candidates.filter(pa.array(ok))
    log.info(
        "realpersonachat %s (columnar): %d dialogues read, %d without owner %r skipped, "
        "%d utterances",
        source,
        len(scope_rows),
        int((~in_scope).sum()),
        owner,
        n,
    )
    return SourceTables(messages, quarantine)


def _timestamp_quarantine(
    buf: bytes,
    spec: SourceSpec,
    rel: str,
    candidates: pa.Table,
    stamps: pa.Array,
    ok: np.ndarray,
    local_us: np.ndarray,
    offsets: np.ndarray,
    parent: np.ndarray,
    scope_rows: np.ndarray,
) -> list[QuarantineRecord]:
    """The row reader's records for utterances whose timestamp does not parse.

    The excerpt is the utterance as ``json.loads`` read it (key order and extra fields as in
    the file), so those few lines are parsed again from the buffer.
    """
    bad = np.flatnonzero(~ok)
    if len(bad) == 0:
        return []
    days = local_us // 86_400_000_000
    newline = np.flatnonzero(np.frombuffer(buf, np.uint8) == 10)
    starts = np.concatenate([[0], newline + 1])
    raw_stamps = stamps.take(pa.array(bad, pa.int64())).to_pylist()
    conv = candidates.column("conversation_id").take(pa.array(bad, pa.int64())).to_pylist()
    refs = candidates.column("source_ref").take(pa.array(bad, pa.int64())).to_pylist()
    parsed_lines: dict[int, list] = {}
    out = []
    for row, s, cid, ref in zip(bad.tolist(), raw_stamps, conv, refs, strict=True):
        d = int(parent[row])
        line = int(scope_rows[d])  # 0-based
        if line not in parsed_lines:
            end = starts[line + 1] if line + 1 < len(starts) else len(buf)
            parsed_lines[line] = json.loads(buf[starts[line] : end])["utterances"]
        lo, hi = int(offsets[d]), int(offsets[d + 1])
        u = parsed_lines[line][row - lo]
        if s is None or s == NAT:  # "" is a bad timestamp for the row reader too
            reason, detail = R_MISSING_TIMESTAMP, "timestamp is missing or 'NaT'"
        else:
            reason = R_BAD_TIMESTAMP
            detail = f"timestamp is not ISO-8601 ({type(s).__name__})"
        out.append(
            QuarantineRecord(
                source=spec.name,
                source_file=rel,
                source_line=line + 1,
                record_ref=ref,
                conversation_id=cid,
                partition_date=_nearest_day(days, ok, lo, hi, row),
                reason=reason,
                detail=detail,
                raw=_excerpt(u),
            )
        )
    return out
