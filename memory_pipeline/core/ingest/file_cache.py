"""Parsed-record cache per source: a nightly ingest of a few days re-parses no unchanged export.

Why: a reader must parse a whole export file to find the records of two days (RealPersonaChat
is one gzip JSON file for every date), so an ingest of D-1..D cost half a full ingest. The
reader's output does not change while its input files and code do not, so it is kept, per
configured source, as one Parquet file under ``<output>/cache/ingest/`` keyed by:

- the content hash of every file under the source path (plus symlink targets and read
  errors, so a file that becomes readable, or a new file, invalidates),
- the source's kind, name, timezone, owner and options,
- the reader's code version: a hash of the reader module, the reader base, the reader step
  (``batches.py``), the record classes, and the modules that shape the stored text-free
  rows (``normalize.py``, ``forget_list.py``) and this module (a changed reader never
  serves stale records).

It wraps the reader step and nothing else (core/ingest/batches.py): an entry holds the
batches ``read_batches`` gave (candidate messages, then the reader's own quarantine records),
and a warm ingest reads only the rows of the wanted dates (plus the undated / too-early ones
the start partition takes) and hands them to the one ingest step as the same ``SourceTables``,
so messages, quarantine and audit are identical (tested warm vs cold). The key is per
source, not per file: readers are called on a source, not on one file of it, so a changed
file re-parses its whole source.

Privacy: the cache holds message text, so it follows the forget list and retention like the
tables. A record the forget list names, or dated before the retention cutoff, is stored only
as the text-free ``forgotten`` / ``expired`` quarantine row ingest would make of it (built by
the same functions), never as the record. :func:`scrub` applies a grown forget list or a later
cutoff to every entry in place (``apply_forget`` / ``apply_retention`` call it), and a read
re-scrubs an entry that is behind; an entry scrubbed for *more* than asked (a shorter
retention, a removed forget entry, another salt) cannot give the records back and is re-parsed.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import os
import sys
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import fields
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from memory_pipeline.core.common import records as R
from memory_pipeline.core.common.contacts import ContactBook
from memory_pipeline.core.common.forget_list import ForgetList, forgotten_row
from memory_pipeline.core.common.records import Message, QuarantineRecord, Record
from memory_pipeline.core.ingest import normalize
from memory_pipeline.core.ingest.batches import read_batches
from memory_pipeline.core.ingest.sources import READERS, SourceSpec
from memory_pipeline.core.ingest.sources.base import CANDIDATES, SourceTables

__all__ = [
    "CACHE_DIR",
    "FORMAT",
    "cache_root",
    "cached_batches",
    "entry_key",
    "scrub",
    "source_fingerprint",
]

CACHE_DIR = "ingest"
FORMAT = 1
# the entry's meta says which reader filled it (the columnar one, or the row reader)
META_COLUMNAR = "columnar"
KIND_MESSAGE, KIND_QUARANTINE, KIND_FORGOTTEN, KIND_EXPIRED = "m", "q", "f", "e"
_META = b"memory_pipeline.file_cache"
_CHUNK = 1 << 20

# Arrow type per dataclass annotation (the records module uses string annotations).
_TYPES = {
    "str": pa.string(),
    "str | None": pa.string(),
    "bool": pa.bool_(),
    "int": pa.int64(),
    "int | None": pa.int64(),
    "dt.date | None": pa.date32(),
}
_TS = {"ts": pa.timestamp("us", tz="UTC"), "local_ts": pa.timestamp("us")}
# Message is rebuilt positionally (keywords cost ~0.3 s per 20k rows); fields are in order


def _columns() -> dict[str, pa.DataType] | None:
    """Column -> type over Message and QuarantineRecord fields (shared names once), or None
    when a field has a type this cache does not know (then it stands aside: no cache)."""
    cols: dict[str, pa.DataType] = {"seq": pa.int64(), "kind": pa.string(), "day": pa.date32()}
    for cls in (Message, QuarantineRecord):
        for f in fields(cls):
            if f.name == "partition_date":
                continue  # the ``day`` column
            typ = _TS.get(f.name) if f.type == "dt.datetime" else _TYPES.get(str(f.type))
            if typ is None:
                return None
            if cols.setdefault(f.name, typ) != typ:
                return None
    return cols


_COLUMNS = _columns()
_MESSAGE_FIELDS = tuple(f.name for f in fields(Message))
_QUARANTINE_FIELDS = tuple(f.name for f in fields(QuarantineRecord))


def cache_root(cache_dir: Path) -> Path:
    """The ingest cache folder inside the pipeline's cache folder (``<output>/cache``)."""
    return Path(cache_dir) / CACHE_DIR


def _code_version(kind: str) -> str:
    """Hash of the code that shapes a cached record (reader, base, records, this module)."""
    mods = {
        READERS[kind].__module__,
        # modules the reader's output also depends on (shared helpers, the readers auto calls)
        *getattr(READERS[kind], "depends_on", ()),
        # the export readers' shared helpers, split from sources.exports into its siblings
        *(
            f"{name}_{part}"
            for name in getattr(READERS[kind], "depends_on", ())
            if name == "memory_pipeline.core.ingest.sources.exports"
            for part in ("decode", "names", "times")
        ),
        "memory_pipeline.core.ingest.sources.base",
        "memory_pipeline.core.ingest.batches",
        R.__name__,
        normalize.__name__,
        "memory_pipeline.core.common.forget_list",
        "memory_pipeline.core.common.names",
        __name__,
    }
    h = hashlib.blake2b(f"format {FORMAT}".encode(), digest_size=16)
    for name in sorted(mods):
        path = getattr(sys.modules.get(name), "__file__", None)
        h.update(name.encode())
        if path:
            h.update(Path(path).read_bytes())
    return h.hexdigest()


def _file_digest(path: Path) -> str:
    h = hashlib.blake2b(digest_size=16)
    with path.open("rb") as fh:
        while block := fh.read(_CHUNK):
            h.update(block)
    return h.hexdigest()


def source_fingerprint(path: Path) -> list[tuple[str, str]]:
    """(relative path, content hash | link target | error) of everything under ``path``.

    Symlinks are listed by target and hashed when they lead to a file; an unreadable entry
    is listed by its error, so a fix of its permissions is a change too.
    """
    path = Path(path)
    entries: list[Path] = []
    if path.is_dir() and not path.is_symlink():
        for root, dirs, files in os.walk(path, followlinks=False):
            dirs.sort()
            base = Path(root)
            entries.extend(base / d for d in dirs if (base / d).is_symlink())
            entries.extend(base / f for f in sorted(files))
    else:
        entries.append(path)
    out = []
    for p in entries:
        rel = p.name if p == path else p.relative_to(path).as_posix()
        parts = []
        if p.is_symlink():
            parts.append("link:" + os.readlink(p))
        try:
            parts.append(_file_digest(p) if p.is_file() else "dir" if p.is_dir() else "missing")
        except OSError as exc:
            parts.append(f"error:{exc.errno}")
        out.append((rel, " ".join(parts)))
    return out


def entry_key(spec: SourceSpec) -> str:
    """The cache key of ``spec``'s records: its files' contents, settings and reader code."""
    doc = {
        "kind": spec.kind,
        "name": spec.name,
        "timezone": spec.timezone,
        "owner": spec.owner,
        "options": spec.options,
        "path_is_dir": spec.path.is_dir(),
        "code": _code_version(spec.kind),
        "files": source_fingerprint(spec.path),
    }
    blob = json.dumps(doc, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.blake2b(blob.encode("utf-8", "surrogatepass"), digest_size=20).hexdigest()


def _source_dir(cache_dir: Path, spec: SourceSpec) -> Path:
    name_hash = hashlib.blake2b(spec.name.encode("utf-8", "surrogatepass"), digest_size=6)
    return cache_root(cache_dir) / name_hash.hexdigest()


# -- records <-> table -------------------------------------------------------------------------


def _salt_id(forget: ForgetList | None) -> str:
    salt = forget.salt if forget is not None else b""
    return hashlib.blake2b(salt, digest_size=8, person=b"ingestcache").hexdigest() if salt else ""


def _forget_hashes(forget: ForgetList | None) -> list[str]:
    if not forget:
        return []
    return sorted(f"{e['kind']}:{e['hash']}" for e in forget.entries)


def _scrubbed(
    rec: Record,
    forget: ForgetList | None,
    retain_from: dt.date | None,
    contacts: ContactBook | None = None,
) -> QuarantineRecord | None:
    """The text-free row ``rec`` is stored as (forgotten or expired), or None: keep ``rec``.

    Ingest checks the forget list before retention: the same order here; ``contacts`` maps
    the record's contact as ingest does (a forgotten contact id covers its spellings).
    """
    if forget and (forget.forgets(rec) or _forgotten_contact(rec, forget, contacts)):
        return forgotten_row(forget, rec, None)
    day = rec.local_date if isinstance(rec, Message) else rec.partition_date
    if retain_from is not None and day is not None and day < retain_from and forget is not None:
        if forget.salt:
            return normalize.expired_row(rec, retain_from, forget)
    return None


def _forgotten_contact(rec: Record, forget: ForgetList, contacts: ContactBook | None) -> bool:
    """True when ``contacts`` maps ``rec``'s contact to a forgotten contact id."""
    contact = getattr(rec, "contact_id", "") if contacts else ""
    mapped = contacts.resolve(contact) if contacts and contact else None
    return bool(mapped and forget.has("contact", mapped))


def _to_table(
    records: Iterable[tuple[int, Record]],
    forget: ForgetList | None,
    retain_from: dt.date | None,
    contacts: ContactBook | None = None,
) -> pa.Table:
    """Rows in reader order (``seq``); forgotten / expired records as their text-free rows."""
    assert _COLUMNS is not None
    seqs, kinds, days, recs = [], [], [], []
    for seq, rec in records:
        day = rec.local_date if isinstance(rec, Message) else rec.partition_date
        scrubbed = _scrubbed(rec, forget, retain_from, contacts)
        if scrubbed is not None:
            kinds.append(KIND_FORGOTTEN if scrubbed.reason == R.R_FORGOTTEN else KIND_EXPIRED)
            rec = scrubbed
        else:
            kinds.append(KIND_MESSAGE if isinstance(rec, Message) else KIND_QUARANTINE)
        seqs.append(seq)
        days.append(day)
        recs.append(rec)
    cols: dict[str, list] = {"seq": seqs, "kind": kinds, "day": days}
    for name in _COLUMNS:
        if name not in cols:
            cols[name] = [getattr(r, name, None) for r in recs]
    return pa.Table.from_pydict(cols, schema=pa.schema(list(_COLUMNS.items())))


def _records(table: pa.Table, start: dt.date) -> Iterator[Record]:
    """The records of ``table`` rows (in row order); ``start`` dates the forgotten / expired
    rows exactly as ingest would (their own date, or the first kept partition)."""
    utc = dt.UTC
    # a naive timestamp converts ~3x faster than a zoned one; ``ts`` is UTC by schema
    ts = table["ts"].cast(pa.timestamp("us")).to_pylist()
    msg = [ts if n == "ts" else table[n].to_pylist() for n in _MESSAGE_FIELDS]
    kinds = table["kind"].to_pylist()
    ts_at = _MESSAGE_FIELDS.index("ts")
    quarantine = None
    for i, (kind, values) in enumerate(zip(kinds, zip(*msg, strict=True), strict=True)):
        if kind == KIND_MESSAGE:
            values = list(values)
            values[ts_at] = values[ts_at].replace(tzinfo=utc)
            yield Message(*values)
            continue
        if quarantine is None:
            names = [n for n in _QUARANTINE_FIELDS if n != "partition_date"]
            quarantine = {n: table[n].to_pylist() for n in names}
            days = table["day"].to_pylist()
        kw = {n: col[i] for n, col in quarantine.items()}
        day = days[i]
        if kind == KIND_FORGOTTEN:
            day = day if day is not None and day >= start else start
        elif kind == KIND_EXPIRED:
            day = start
        yield QuarantineRecord(partition_date=day, **kw)


# -- entries -----------------------------------------------------------------------------------


def _write(path: Path, table: pa.Table, meta: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    table = table.replace_schema_metadata({_META: json.dumps(meta, sort_keys=True).encode()})
    # sorted by date in small row groups: a read of a few dates skips the rest of the file
    # by the row-group statistics (readers put seq order back)
    table = table.sort_by([("day", "ascending"), ("seq", "ascending")])
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        pq.write_table(table, tmp, compression="zstd", row_group_size=4096)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _meta(path: Path) -> dict | None:
    try:
        raw = pq.read_schema(path).metadata or {}
        return json.loads(raw[_META])
    except (OSError, KeyError, ValueError, pa.ArrowException):
        return None


def _usable(
    meta: dict,
    forget: ForgetList | None,
    retain_from: dt.date | None,
    contacts: ContactBook | None = None,
) -> bool:
    """True when the entry still holds every record ``forget`` / ``retain_from`` allow."""
    if meta.get("format") != FORMAT:
        return False
    if meta.get("contacts", "") != (contacts.digest() if contacts else ""):
        return False  # scrubbed under another [[contacts]] mapping: re-parse
    if meta.get("salt") and meta["salt"] != _salt_id(forget):
        return False
    if not set(meta.get("forget", [])) <= set(_forget_hashes(forget)):
        return False  # a listed record was dropped that is now wanted back
    scrubbed_to = meta.get("retain_from")
    if scrubbed_to and (retain_from is None or retain_from.isoformat() < scrubbed_to):
        return False  # records older than asked for were dropped
    # an expired row keeps no conversation or file: were it now forgotten, ingest would make
    # it a forgotten row, which the entry cannot tell; re-parse
    return not (_forget_grew(meta, forget) and meta.get("expired"))


def _forget_grew(meta: dict, forget: ForgetList | None) -> bool:
    return bool(set(_forget_hashes(forget)) - set(meta.get("forget", [])))


def _behind(meta: dict, forget: ForgetList | None, retain_from: dt.date | None) -> bool:
    """True when the entry must be scrubbed further (a grown list, a later cutoff)."""
    if _forget_grew(meta, forget):
        return True
    return retain_from is not None and (meta.get("retain_from") or "") < retain_from.isoformat()


def _entry_meta(
    key: str,
    table: pa.Table,
    forget: ForgetList | None,
    retain_from: dt.date | None,
    contacts: ContactBook | None = None,
) -> dict:
    return {
        "contacts": contacts.digest() if contacts else "",  # the mapping it was scrubbed with
        "format": FORMAT,
        "expired": pc.sum(pc.equal(table["kind"], KIND_EXPIRED).cast(pa.int64())).as_py() or 0,
        "key": key,
        "forget": _forget_hashes(forget),
        "salt": _salt_id(forget),  # forgotten and expired refs are salted
        "retain_from": retain_from.isoformat() if retain_from else "",
    }


def _rescrub(
    table: pa.Table,
    forget: ForgetList | None,
    retain_from: dt.date | None,
    contacts: ContactBook | None = None,
) -> pa.Table:
    """``table`` with the rows the current forget list / cutoff hits turned text-free
    (``contacts``: a forgotten contact's every listed spelling, as ingest maps them)."""
    live = pc.is_in(table["kind"], pa.array([KIND_MESSAGE, KIND_QUARANTINE]))
    hit = pa.array([False] * table.num_rows, pa.bool_())
    if retain_from is not None:
        old = pc.fill_null(pc.less(table["day"], pa.scalar(retain_from, pa.date32())), False)
        hit = pc.or_(hit, old)
    if forget:
        convs, people, srcs, files = (
            table[c].to_pylist() for c in ("conversation_id", "contact_id", "source", "source_file")
        )
        seen: dict[tuple, bool] = {}  # salted hashes per distinct (conversation, contact, file)

        def forgotten(c: str | None, k: str | None, s: str, f: str) -> bool:
            key = (c, k, s, f)
            if key not in seen:
                rec = QuarantineRecord(s, f, None, "", c or "", None, "", "")
                mapped = contacts.resolve(k) if contacts and k else None
                seen[key] = (
                    forget.forgets(rec)
                    or bool(k and forget.has("contact", k))
                    or bool(mapped and forget.has("contact", mapped))
                )
            return seen[key]

        probe = [forgotten(*row) for row in zip(convs, people, srcs, files, strict=True)]
        hit = pc.or_(hit, pa.array(probe, pa.bool_()))
    hit = pc.and_(hit, live)
    idx = pc.indices_nonzero(hit)
    if len(idx) == 0:
        return table
    start = dt.date.min
    rows = table.take(idx)
    fresh = _to_table(
        zip(rows["seq"].to_pylist(), _records(rows, start), strict=True),
        forget,
        retain_from,
        contacts,
    )
    keep = table.filter(pc.invert(hit))
    return pa.concat_tables([keep, fresh]).sort_by("seq")


def scrub(cache_dir: Path, forget: ForgetList | None, retain_from: dt.date | None = None) -> int:
    """Apply ``forget`` and ``retain_from`` to every cache entry in place (forget and
    retention call this, so no cached file keeps a forgotten or purged text); entries that
    cannot be read are deleted. Returns the number of entries rewritten or deleted."""
    root = cache_root(cache_dir)
    if not root.is_dir():
        return 0
    changed = 0
    for path in sorted(root.rglob("*.parquet")):
        meta = _meta(path)
        try:
            if meta is None:
                raise ValueError("unreadable entry")
            if not _behind(meta, forget, retain_from):
                continue
            if _forget_grew(meta, forget) and meta.get("expired"):
                raise ValueError("expired rows cannot be re-checked against the forget list")
            if _forget_grew(meta, forget) and meta.get("contacts"):
                # a forgotten contact may be any spelling [[contacts]] lists, which this
                # function does not have: the entry goes, the next run re-parses
                raise ValueError("entry mapped by [[contacts]]")
            merged_cutoff = _later(retain_from, meta)
            table = _rescrub(pq.read_table(path), forget, merged_cutoff)
            fresh = _entry_meta(meta["key"], table, forget, merged_cutoff)
            _write(path, table, {**fresh, "contacts": meta.get("contacts", "")})
        except (OSError, ValueError, KeyError, pa.ArrowException):
            path.unlink(missing_ok=True)  # never leave text we could not scrub (re-parsed)
        changed += 1
    return changed


def _later(retain_from: dt.date | None, meta: dict) -> dt.date | None:
    """The later of ``retain_from`` and the cutoff the entry was scrubbed to (None: none)."""
    value = meta.get("retain_from")
    return max(
        [d for d in (retain_from, dt.date.fromisoformat(value) if value else None) if d],
        default=None,
    )


def _wanted(table: pa.Table, dates: frozenset[dt.date] | None, start: dt.date) -> pa.Table:
    """Rows ingest may keep for ``dates`` (a superset: ingest filters again)."""
    if dates is None:
        return table
    day = table["day"]
    wanted = pa.array(sorted(dates), pa.date32())
    keep = pc.fill_null(pc.is_in(day, wanted), False)
    if start in dates:  # undated / too-early records, forgotten and expired ones go to start
        early = pc.fill_null(pc.less(day, pa.scalar(start, pa.date32())), True)
        keep = pc.or_(keep, early)
        keep = pc.or_(keep, pc.equal(table["kind"], KIND_EXPIRED))
    return table.filter(keep)


def _read_filter(dates: frozenset[dt.date] | None, start: dt.date) -> pc.Expression | None:
    """The pushed-down form of :func:`_wanted` (row groups of other dates are not read)."""
    if dates is None:
        return None
    day = pc.field("day")
    expr = day.isin(pa.array(sorted(dates), pa.date32()))
    if start in dates:
        expr = expr | day.is_null() | (day < pa.scalar(start, pa.date32()))
    return expr


def _lookup(
    spec: SourceSpec,
    wanted: frozenset[dt.date] | None,
    cache_dir: Path,
    start: dt.date,
    forget: ForgetList | None,
    retain_from: dt.date | None,
    stats: dict | None,
    contacts: ContactBook | None = None,
) -> tuple[str, Path, pa.Table | None, dict | None]:
    """(key, entry path, the entry's rows for ``wanted`` or None on a miss, its meta).

    An entry that is behind the forget list / cutoff is scrubbed in place first."""
    key = entry_key(spec)
    path = _source_dir(cache_dir, spec) / f"{key}.parquet"
    meta = _meta(path) if path.is_file() else None
    table = None
    if meta is not None and _usable(meta, forget, retain_from, contacts):
        try:
            if _behind(meta, forget, retain_from):
                cutoff = _later(retain_from, meta)
                table = _rescrub(pq.read_table(path), forget, cutoff, contacts)
                meta = {
                    **_entry_meta(key, table, forget, cutoff, contacts),
                    **_reader_meta(meta),
                }
                _write(path, table, meta)
            table = pq.read_table(path, filters=_read_filter(wanted, start))
        except (OSError, pa.ArrowException):
            table = None
    if stats is not None:
        hit = "hits" if table is not None else "misses"
        stats[hit] = stats.get(hit, 0) + 1
    return key, path, table, meta


def _reader_meta(meta: dict | None) -> dict:
    return {META_COLUMNAR: bool(meta.get(META_COLUMNAR))} if meta else {}


def _store(path: Path, key: str, table: pa.Table, meta: dict) -> None:
    """Write a fresh entry and delete the older versions of this source's entry."""
    _write(path, table, meta)
    for old in path.parent.glob("*.parquet"):  # an older version of this source's files
        if old != path:
            old.unlink(missing_ok=True)


def cached_batches(
    spec: SourceSpec,
    dates: Iterable[dt.date] | None,
    *,
    cache_dir: Path,
    start_date: dt.date,
    forget: ForgetList | None = None,
    retain_from: dt.date | None = None,
    stats: dict | None = None,
    writes: list[Callable[[], None]] | None = None,
    contacts: ContactBook | None = None,
) -> SourceTables:
    """What :func:`~memory_pipeline.core.ingest.batches.read_batches` gives for ``spec``,
    from the cache when ``spec``'s files, settings and reader code are unchanged (else parsed
    once, stored, then served); only the rows ingest of ``dates`` can use are served.

    The cache wraps the reader step and nothing else: a miss stores the reader's batches
    (messages first, then the reader's quarantine records: ingest does not depend on that
    order, its quarantine is sorted, its counts counted, its duplicates decided among
    messages), a hit serves them as Arrow columns. What it adds is privacy, not ingest
    logic: forgotten and expired records are stored only as the text-free rows ingest would
    make of them. ``start_date``, ``forget`` and ``retain_from`` are ingest's, so those rows
    are dated as ingest dates them; ``contacts`` is ingest's ``[[contacts]]`` mapping, so a
    forgotten contact is scrubbed under every spelling it lists (an entry scrubbed under
    another mapping is re-parsed). ``stats`` (optional) gets ``hits`` / ``misses`` counts.

    ``writes`` (optional): a miss appends the entry's write to it instead of writing, so
    the caller can write while it ingests (read_all_tables does, on a thread); the entry
    must then be written before anything else reads this cache."""
    wanted = None if dates is None else frozenset(dates)
    if _COLUMNS is None or spec.kind not in READERS or not spec.path.exists():
        return read_batches(spec, wanted)  # raises the reader's own error, if any
    start = start_date if retain_from is None else max(start_date, retain_from)
    key, path, table, meta = _lookup(
        spec, wanted, cache_dir, start, forget, retain_from, stats, contacts
    )
    columnar = bool(meta and meta.get(META_COLUMNAR))
    if table is None:
        source = read_batches(spec, None)  # every date: the entry serves any later run
        columnar = source.columnar
        table = _from_tables(source)
        if forget or retain_from is not None:
            table = _rescrub(table, forget, retain_from, contacts)
        meta = {
            **_entry_meta(key, table, forget, retain_from, contacts),
            META_COLUMNAR: columnar,
        }
        fill = functools.partial(_store, path, key, table, meta)
        if writes is None:
            fill()
        else:
            writes.append(fill)
    table = _wanted(table, wanted, start).sort_by("seq")
    return _tables(table, start, columnar)


cached_tables = cached_batches  # the earlier name


def _from_tables(source: SourceTables) -> pa.Table:
    """A columnar reader's output as entry rows: its messages (seq in table order), then its
    quarantine records; nothing scrubbed yet (:func:`_rescrub` does that)."""
    assert _COLUMNS is not None
    schema = pa.schema(list(_COLUMNS.items()))
    msgs = source.messages
    n = msgs.num_rows
    cols: dict[str, pa.Array | pa.ChunkedArray] = {
        "seq": pa.array(range(n), pa.int64()),
        "kind": pa.array([KIND_MESSAGE] * n, pa.string()),
        "day": pc.cast(msgs.column("local_ts"), pa.date32()),
    }
    for name, typ in _COLUMNS.items():
        if name not in cols:
            cols[name] = (
                msgs.column(name).cast(typ) if name in msgs.schema.names else pa.nulls(n, typ)
            )
    table = pa.table({name: cols[name] for name in schema.names}, schema=schema)
    if not source.quarantine:
        return table
    quarantine = _to_table(enumerate(source.quarantine, n), None, None)
    return pa.concat_tables([table, quarantine])


def _tables(table: pa.Table, start: dt.date, columnar: bool) -> SourceTables:
    """Entry rows (in seq order) as ``SourceTables``: messages stay columns."""
    is_msg = pc.equal(table["kind"], KIND_MESSAGE)
    messages = table.filter(is_msg).select(CANDIDATES.names).cast(CANDIDATES)
    rest = table.filter(pc.invert(is_msg))
    quarantine = list(_records(rest, start)) if rest.num_rows else []
    return SourceTables(messages, quarantine, columnar=columnar)
