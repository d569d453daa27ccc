"""The one ingest step: validate, de-duplicate, forget, retention and dates, over Arrow columns.

Every source reaches it the same way (core/ingest/batches.py: the reader parses into
``SourceTables``; core/ingest/file_cache.py may serve those batches from its cache), and
:func:`ingest`, the entrance for records already in memory, converts them into one source's
batches and calls :func:`ingest_tables`: there is no second implementation of these rules.

Why columns: building one Python ``Message`` per utterance, then hashing, de-duplicating and turning
them back into columns, was most of the ingest time on RealPersonaChat (408,619 utterances).
A reader that can hands over its candidate messages as one Arrow table (``CANDIDATES``: the
``MESSAGES`` columns without ``message_id`` and ``local_date``, rows in read order) plus the
few ``QuarantineRecord``s it made itself. This module partitions, validates, assigns ids and
de-duplicates with Arrow / numpy over whole columns. Only rows that end in quarantine become
``Message`` objects, and they go through the very row builders of ``normalize``
(``validate``, ``_quarantine``, ``forgotten_row``, ``expired_row``), so a row quarantined here
is the row the record path writes. The only per-message Python left is the blake2b of the
id (neither Arrow nor DuckDB has blake2b, and the ids are pinned by tests).

The equivalence with the record path (same messages, ids, quarantine, audit) is tested on the
fixtures, on hostile input and on the whole corpus (benchmarks/bench_ingest.py).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from hashlib import blake2b

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from memory_pipeline.core.common import records as R
from memory_pipeline.core.common.contacts import ContactBook
from memory_pipeline.core.common.forget_list import ForgetList, forgotten_row
from memory_pipeline.core.common.names import canonical_names, canonical_record
from memory_pipeline.core.common.records import Message, QuarantineRecord, Record
from memory_pipeline.core.common.schema import MESSAGES
from memory_pipeline.core.ingest.batches import records_to_tables
from memory_pipeline.core.ingest.normalize import (
    _SEP,
    EXPORT_ID_PATTERN,
    IngestResult,
    _quarantine,
    _quarantine_sort_key,
    expired_row,
    export_message_id,
    validate,
)
from memory_pipeline.core.ingest.sources.base import CANDIDATES, SourceTables

_EPOCH = dt.date(1970, 1, 1)
# Every character Python's str.isspace() accepts. A blank text is empty or starts and ends
# with one of them: those rows are the empty_text candidates, and the exact test
# (normalize.validate, ``not text.strip()``) runs on them in Python.
_SPACES = pa.array([chr(c) for c in range(0x110000) if chr(c).isspace()], pa.string())
_RENDERABLE_EMPTY = sorted(R.MESSAGE_TYPES - {"text"})
_KNOWN_TYPES = pa.array(sorted(R.MESSAGE_TYPES))


@dataclass
class TableIngestResult:
    """What :func:`ingest_tables` returns: the ``IngestResult`` of the record path, with the
    messages as one sorted ``MESSAGES`` table instead of a list of objects."""

    messages: pa.Table
    quarantine: list[QuarantineRecord] = field(default_factory=list)
    read_counts: Counter[tuple[dt.date, str]] = field(default_factory=Counter)


def _maybe_blank(text: pa.ChunkedArray) -> np.ndarray:
    """Rows whose text may be all whitespace (a superset: empty, or whitespace at both ends)."""
    first = pc.is_in(pc.utf8_slice_codeunits(text, 0, 1), value_set=_SPACES)
    last = pc.is_in(pc.utf8_slice_codeunits(text, -1, 2**31 - 1), value_set=_SPACES)
    empty = pc.equal(text, "")
    return pc.or_(empty, pc.and_(first, last)).to_numpy(zero_copy_only=False)


def _day_numbers(days: Iterable[dt.date]) -> np.ndarray:
    return np.array(sorted((d - _EPOCH).days for d in days), dtype=np.int32)


def _to_messages(table: pa.Table, rows: np.ndarray) -> list[Message]:
    """Message objects for a few rows (those that end in quarantine)."""
    if len(rows) == 0:
        return []
    picked = table.take(pa.array(rows, pa.int64())).select(CANDIDATES.names)
    return [Message(**r) for r in picked.to_pylist()]


def _forgotten_mask(t: pa.Table, forget: ForgetList) -> np.ndarray:
    """``forget.forgets`` per row, hashing each distinct conversation / contact / file once."""

    def listed(values: pa.ChunkedArray | pa.Array, kind: str) -> np.ndarray:
        enc = pc.dictionary_encode(values).combine_chunks()
        hit = [bool(v) and forget.has(kind, v) for v in enc.dictionary.to_pylist()]
        return (
            np.array(hit, dtype=bool)[enc.indices.to_numpy()]
            if hit
            else np.zeros(len(values), bool)
        )

    # forget_list.file_key(source, source_file), per row
    files = pc.binary_join_element_wise(t.column("source"), t.column("source_file"), "\x1f")
    return (
        listed(t.column("conversation_id"), "conversation")
        | listed(t.column("contact_id"), "contact")
        | listed(files, "file")
    )


def _iso(local_ts: pa.Array) -> pa.Array:
    """``datetime.isoformat()`` of naive timestamps: microseconds only when non-zero."""
    s = pc.replace_substring(pc.cast(local_ts, pa.string()), " ", "T", max_replacements=1)
    us = pc.cast(local_ts, pa.int64()).to_numpy() % 1_000_000
    return pc.if_else(pa.array(us == 0), pc.utf8_slice_codeunits(s, 0, 19), s)


def _codes(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Dense integer codes of ``values``, numbered in order of first appearance."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    return pc.dictionary_encode(values).indices.to_numpy(zero_copy_only=False)


def _message_ids(v: pa.Table, key: pa.ChunkedArray) -> tuple[list[str], np.ndarray | None]:
    """normalize.message_id of every row: blake2b(content key + occurrence index).

    The occurrence index (see normalize.message_id) counts distinct ``source_order``
    positions of identical messages of one file, in read order; a repeated position repeats
    its index. Almost every row is the only one with its content, so every id is first
    hashed with index 0, and only rows whose id repeats (equal content: a handful) are
    grouped by (source, file, content) in Python and re-hashed with their real index.
    """
    zero = pc.binary_join_element_wise(key, "0", _SEP).cast(pa.binary()).to_pylist()
    ids = ["msg_" + blake2b(b, digest_size=10).hexdigest() for b in zero]
    codes = _codes(pa.array(ids, pa.string()))
    repeated = np.flatnonzero(np.bincount(codes)[codes] > 1)
    if len(repeated) == 0:
        return ids, codes  # every id unique: its codes serve the de-duplication too
    take = pa.array(repeated, pa.int64())
    src = v.column("source").take(take).to_pylist()
    files = v.column("source_file").take(take).to_pylist()
    orders = v.column("source_order").take(take).to_pylist()
    positions: dict[tuple[str, str, str], list[int]] = {}
    for row, s, f, o in zip(repeated.tolist(), src, files, orders, strict=True):
        seen = positions.setdefault((s, f, ids[row]), [])  # read order
        if o in seen:
            occ = seen.index(o)
        else:
            occ = len(seen)
            seen.append(o)
        if occ:
            suffix = f"{_SEP}{occ}".encode()
            ids[row] = "msg_" + blake2b(zero[row][:-2] + suffix, digest_size=10).hexdigest()
    return ids, None


def _export_ids(v: pa.Table, ids: list[str]) -> np.ndarray | None:
    """Give rows that carry their export's stable message id (normalize.export_id) the id
    of (conversation, export id) in ``ids``, in place; return the de-duplication priority
    per row (lower wins), or None when no row has an export id (then nothing changes).

    Why: the content rule cannot see that an edited message (same id, new text) is one
    message, so two exports of one chat kept both versions. Among rows with one export id
    the newest export wins: the one whose file reaches the latest time (an export holds its
    chat up to the moment it was made), on a tie the file read later; within that file the
    first row read. Content-identified rows keep priority 0: the first row read wins.
    """
    refs = v.column("source_ref")
    has = pc.fill_null(pc.match_substring_regex(refs, EXPORT_ID_PATTERN), False)
    has = has.to_numpy(zero_copy_only=False)
    if not has.any():
        return None
    rows = np.flatnonzero(has)
    take = pa.array(rows, pa.int64())
    convs = v.column("conversation_id").take(take).to_pylist()
    for row, conv, ref in zip(rows.tolist(), convs, refs.take(take).to_pylist(), strict=True):
        ids[row] = export_message_id(conv, ref)
    # rank of each row's file: (latest ts in the file, first row read of the file)
    files = pc.binary_join_element_wise(v.column("source"), v.column("source_file"), _SEP)
    fcode = _codes(files)
    ts = pc.cast(v.column("ts"), pa.int64()).to_numpy(zero_copy_only=False)
    latest = np.full(int(fcode.max()) + 1, np.iinfo(np.int64).min, np.int64)
    np.maximum.at(latest, fcode, ts)
    first_seen = np.unique(fcode, return_index=True)[1]  # codes are in order of appearance
    rank = np.empty_like(first_seen)
    rank[np.lexsort((first_seen, latest))] = np.arange(len(first_seen))
    return np.where(has, -rank[fcode] - 1, 0)


def ingest_tables(
    sources: Iterable[SourceTables],
    *,
    start_date: dt.date,
    dates: Iterable[dt.date] | None = None,
    forget: ForgetList | None = None,
    retain_from: dt.date | None = None,
    contacts: ContactBook | None = None,
) -> TableIngestResult:
    """Validate, de-duplicate and partition the sources' batches, keeping those of ``dates``
    (the rules: :func:`ingest`).

    Sources are taken in order, and rows in order within a source ("first copy read" wins a
    duplicate). ``contacts`` (the ``[[contacts]]`` table) maps each listed spelling of a
    person to one ``contact_id`` before anything else looks at it, so forget and retention
    by contact see one person across apps.
    """
    sources = list(sources)
    wanted = None if dates is None else frozenset(dates)
    if retain_from is not None and retain_from > start_date:
        start_date = retain_from  # nothing is placed in a purged partition
    out = TableIngestResult(MESSAGES.empty_table())
    # the readers' own quarantine records (few): placed one by one
    for q in (q for s in sources for q in s.quarantine):
        _place_quarantine(q, out, start_date, wanted, forget, retain_from)
    t = pa.concat_tables([s.messages.select(CANDIDATES.names) for s in sources]).combine_chunks()
    t = canonical_names(t)  # one spelling per name, whichever reader (core/common/names.py)
    if contacts:
        t = contacts.map_table(t)  # one person across apps (core/common/contacts.py)
    if t.num_rows == 0:
        out.quarantine.sort(key=_quarantine_sort_key)
        return out
    n = t.num_rows
    sd = (start_date - _EPOCH).days
    local_date = pc.cast(t.column("local_ts"), pa.date32())
    ld = pc.cast(local_date, pa.int32()).to_numpy(zero_copy_only=False)

    def in_wanted(days: np.ndarray) -> np.ndarray:
        return np.ones(len(days), bool) if wanted is None else np.isin(days, _day_numbers(wanted))

    start_wanted = wanted is None or start_date in wanted
    forgotten = _forgotten_mask(t, forget) if forget else np.zeros(n, bool)
    fday = np.where(ld < sd, sd, ld)
    take_f = forgotten & in_wanted(fday)
    rest = ~forgotten
    expired = np.zeros(n, bool)
    if retain_from is not None:
        expired = rest & (ld < (retain_from - _EPOCH).days)
    rest &= ~expired
    early = rest & (ld < sd)
    rest &= ~early
    rest &= in_wanted(ld)
    take_e = expired & start_wanted
    take_o = early & start_wanted

    # records read, per (partition, source)
    counted = take_f | take_e | take_o | rest
    count_day = np.where(take_f, fday, np.where(rest, ld, sd)).astype(np.int32)
    grouped = (
        pa.table({"d": pa.array(count_day).cast(pa.date32()), "s": t.column("source")})
        .filter(pa.array(counted))
        .group_by(["d", "s"])
        .aggregate([("s", "count")])
    )
    for d, s, k in zip(
        *(grouped.column(c).to_pylist() for c in ("d", "s", "s_count")), strict=True
    ):
        out.read_counts[(d, s)] += k

    start = dt.date.fromordinal(_EPOCH.toordinal() + sd)
    quarantine = out.quarantine
    for m in _to_messages(t, np.flatnonzero(take_f)):
        quarantine.append(forgotten_row(forget, m, start if m.local_date < start else m.local_date))
    for m in _to_messages(t, np.flatnonzero(take_e)):
        quarantine.append(expired_row(m, start, forget))
    for m in _to_messages(t, np.flatnonzero(take_o)):
        quarantine.append(
            _quarantine(m, R.R_OUT_OF_RANGE, f"dated {m.local_date} before start_date", start)
        )

    # validate: rows that may fail go through normalize.validate itself
    types, text = t.column("type"), t.column("text")
    suspect = (
        ~pc.is_in(types, value_set=_KNOWN_TYPES).to_numpy(zero_copy_only=False)
        | (pc.equal(types, "text").to_numpy(zero_copy_only=False) & _maybe_blank(text))
        | pc.greater(pc.utf8_length(text), R.MAX_MESSAGE_CHARS).to_numpy(zero_copy_only=False)
    )
    suspect_rows = np.flatnonzero(rest & suspect)
    for row, m in zip(suspect_rows.tolist(), _to_messages(t, suspect_rows), strict=True):
        problem = validate(m)
        if problem is not None:
            quarantine.append(_quarantine(m, *problem, m.local_date))
            rest[row] = False
    # validate()'s one repair: a sticker, photo ... with no text renders as "[sticker]"
    empty_renderable = pc.and_(
        pc.is_in(types, value_set=pa.array(_RENDERABLE_EMPTY)), pc.equal(text, "")
    )
    if pc.any(empty_renderable).as_py():
        fixed = pc.if_else(empty_renderable, pc.binary_join_element_wise("[", types, "]", ""), text)
        t = t.set_column(t.schema.get_field_index("text"), "text", fixed)

    if rest.all():
        v = t
    else:
        keep = pa.array(np.flatnonzero(rest), pa.int64())
        v, local_date = t.take(keep), local_date.take(keep)
    key = pc.binary_join_element_wise(
        v.column("conversation_id"),
        _iso(v.column("local_ts")),
        v.column("sender"),
        v.column("type"),
        v.column("text"),
        _SEP,
    )
    ids, codes = _message_ids(v, key)
    # a message with the export's own id is one message whatever its text (an edit)
    priority = _export_ids(v, ids)
    if priority is not None:
        codes = None
    id_arr = pa.array(ids, pa.string())

    # de-duplicate: the first row read with an id is kept, later ones are quarantined (for
    # export ids: the first row of the newest export, see _export_ids)
    if codes is None:
        codes = _codes(id_arr)
    first = np.zeros(len(codes), bool)
    if priority is None:
        first_row = np.unique(codes, return_index=True)[1]
    else:
        order = np.lexsort((np.arange(len(codes)), priority, codes))
        starts = np.flatnonzero(np.r_[True, codes[order][1:] != codes[order][:-1]])
        first_row = np.empty(int(codes.max()) + 1, np.int64)
        first_row[codes[order][starts]] = order[starts]
    first[first_row] = True
    dups = np.flatnonzero(~first)
    if len(dups):
        kept_of = first_row[codes[dups]]
        src, sfile = v.column("source").to_pylist(), v.column("source_file").to_pylist()
        for row, kept, m in zip(
            dups.tolist(), kept_of.tolist(), _to_messages(v, dups), strict=True
        ):
            same_input = sfile[kept] == sfile[row] and src[kept] == src[row]
            reason = R.R_DUPLICATE if same_input else R.R_DUPLICATE_EXPORT
            quarantine.append(_quarantine(m, reason, f"duplicate of {ids[row]}", m.local_date))

    cols = {name: v.column(name) for name in CANDIDATES.names}
    cols["message_id"] = id_arr
    cols["local_date"] = local_date
    if len(dups):
        firsts = pa.array(np.flatnonzero(first), pa.int64())
        cols = {name: c.take(firsts) for name, c in cols.items()}
    table = pa.table({name: cols[name] for name in MESSAGES.names}, schema=MESSAGES)
    out.messages = table.sort_by(
        [
            ("conversation_id", "ascending"),
            ("ts", "ascending"),
            ("source_order", "ascending"),
            ("message_id", "ascending"),
        ]
    ).combine_chunks()
    quarantine.sort(key=_quarantine_sort_key)
    return out


def _place_quarantine(
    rec: QuarantineRecord,
    out: TableIngestResult,
    start: dt.date,
    wanted: frozenset[dt.date] | None,
    forget: ForgetList | None,
    retain_from: dt.date | None,
) -> None:
    """A reader's quarantine record into ``out``: forget first, then retention, then its
    partition (undated or too early: ``start``, the first kept partition)."""
    canonical_record(rec)  # one spelling per name, whichever reader (core/common/names.py)
    day = rec.partition_date
    if forget and forget.forgets(rec):
        day = start if day is None or day < start else day
        if wanted is None or day in wanted:
            out.read_counts[(day, rec.source)] += 1
            out.quarantine.append(forgotten_row(forget, rec, day))
        return
    if retain_from is not None and day is not None and day < retain_from:
        if wanted is None or start in wanted:
            out.read_counts[(start, rec.source)] += 1
            out.quarantine.append(expired_row(rec, start, forget))
        return
    day = start if day is None or day < start else day
    if wanted is not None and day not in wanted:
        return
    rec.partition_date = day
    out.read_counts[(day, rec.source)] += 1
    out.quarantine.append(rec)


def ingest(
    records: Iterable[Record],
    *,
    start_date: dt.date,
    dates: Iterable[dt.date] | None = None,
    forget: ForgetList | None = None,
    retain_from: dt.date | None = None,
    contacts: ContactBook | None = None,
) -> IngestResult:
    """Validate, de-duplicate and partition ``records``, keeping those of ``dates``.

    A record dated before ``start_date``, or with no date at all, is accounted in the
    ``start_date`` partition (as quarantine), so no record is ever outside every partition.
    Duplicates keep the first copy read; the rest are quarantined with a pointer to the kept
    message. Two messages are the same when conversation, local time, sender, type, text and
    occurrence index (among identical messages of the same input file) agree: within one file
    that is a record read twice at the same ``source_order`` (``duplicate``); across files or
    sources it is the same message in an overlapping re-export (``duplicate_export``). Two
    identical messages at different positions of one file are two messages (README,
    "Re-exports").
    A record on the ``forget`` list is counted as read and becomes a text-free ``forgotten``
    quarantine row (see core/common/forget_list.py), before any other rule looks at it.
    A dated record before ``retain_from`` (``[privacy] retain_days``) is past retention: it is
    counted as read and becomes a text-free ``expired`` row in the first retained partition
    (``max(start_date, retain_from)``, which then also takes the undated and too-early
    records), so a re-run over old exports never writes a purged date or its text again.

    The row entrance of :func:`ingest_tables`: the records become one source's batches, and
    the kept messages come back as ``(message_id, Message)`` pairs.
    """
    result = ingest_tables(
        [records_to_tables(records)],
        start_date=start_date,
        dates=dates,
        forget=forget,
        retain_from=retain_from,
        contacts=contacts,
    )
    return to_records(result)


def to_records(result: TableIngestResult) -> IngestResult:
    """The messages table of ``result`` as ``(message_id, Message)`` pairs, in table order."""
    t = result.messages
    ids = t.column("message_id").to_pylist()
    msgs = [Message(**r) for r in t.select(CANDIDATES.names).to_pylist()]
    return IngestResult(list(zip(ids, msgs, strict=True)), result.quarantine, result.read_counts)
