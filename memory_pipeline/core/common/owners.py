"""Owners: one deployment, many people's memories, each strictly apart from the others.

An *owner* is the person a memory belongs to. A single-owner configuration keeps today's
layout (``<output_dir>/parquet/...``); with several owners each one gets a folder of its own,
``<output_dir>/owners/<owner_id>/``, holding that owner's Parquet tables, index versions,
dossiers, warehouse file, caches and privacy files. Forgetting or deleting one owner is then
a matter of one folder, and no reader of one owner's folder can reach another's rows.

Defence in depth: every stored table also carries an ``owner_id`` column. :class:`OwnerStore`
stamps it on write and, on read, checks every row against the store's owner and raises
:class:`OwnerMismatch` otherwise, so a file copied into the wrong folder fails loudly instead
of leaking into a search.

Owners are data, not Dagster partitions (Dagster advises at most ~100,000 partitions per
asset; owner x date would not scale to a million owners): a date partition's run loops over
the owners with input near that date, through :func:`map_owners`, a plain map that runs
serially or ships each owner to a Dask worker (:mod:`~memory_pipeline.core.common.parallel`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from memory_pipeline.core.common import fs
from memory_pipeline.core.common.parallel import map_tasks
from memory_pipeline.core.common.records import QuarantineRecord, Record
from memory_pipeline.core.common.storage import (
    Staged,
    TableRef,
    TableStore,
    file_digest,
    map_files,
    write_text_atomic,
)
from memory_pipeline.core.common.tables import Table, table

OWNER_COLUMN = "owner_id"
DEFAULT_OWNER_ID = "default"
OWNERS_DIR = "owners"  # <output_dir>/owners/<owner_id>/ in a multi-owner deployment
MARKER = "owner.json"  # <owner folder>/owner.json: which owner the folder belongs to
OWNER_ID_PATTERN = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
FINGERPRINTS_DIR = "fingerprints"  # <owner folder>/fingerprints/<asset>.json

T = TypeVar("T")
R = TypeVar("R")


class OwnerMismatch(ValueError):
    """A stored row belongs to another owner than the folder it was read from."""


def valid_owner_id(owner_id: str) -> bool:
    """An owner id is a slug (lowercase letters, digits, ``_`` and ``-``, at most 64): it is a
    folder name, so it can never climb out of ``owners/`` or collide by case."""
    return isinstance(owner_id, str) and OWNER_ID_PATTERN.fullmatch(owner_id) is not None


def owner_slug(name: str, prefix: str = "") -> str:
    """The owner id a display name or speaker id becomes (``"AA"`` -> ``"aa"``).

    Characters outside the slug alphabet become ``-``; when that loses information (the
    name was not already a lowercase slug apart from case) a short hash of the name is
    appended, so two different names never share one folder.
    """
    base = re.sub(r"[^a-z0-9_-]+", "-", name.strip().lower()).strip("-_")
    lossless = base == name.strip().lower()
    if not base or not lossless:
        digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:8]
        base = f"{base[:50]}-{digest}" if base else digest
    slug = (prefix + base)[:64]
    if not valid_owner_id(slug):
        raise ValueError(f"cannot make an owner id from {name!r} (prefix {prefix!r})")
    return slug


def owners_root(output_dir: Path) -> Path:
    """Where the owner folders of a multi-owner deployment live."""
    return Path(output_dir) / OWNERS_DIR


def owner_dir(output_dir: Path, owner_id: str) -> Path:
    """The folder of one owner of a multi-owner deployment (the id is validated first)."""
    if not valid_owner_id(owner_id):
        raise ValueError(f"invalid owner id {owner_id!r}: lowercase slug [a-z0-9][a-z0-9_-]*")
    return owners_root(output_dir) / owner_id


def write_marker(folder: Path, owner_id: str, owner: str = "", *, strict: bool = True) -> None:
    """Record which owner ``folder`` belongs to (read by :func:`owner_store`); ``strict``:
    the folder is one owner's of many, so a file without ``owner_id`` is refused."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / MARKER
    marker = {"owner_id": owner_id, "owner": owner, "strict": strict}
    text = json.dumps(marker, ensure_ascii=False) + "\n"
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        write_text_atomic(path, text)


def read_marker(folder: Path) -> dict | None:
    """``{"owner_id", "owner"}`` of an owner folder, None when it has no marker."""
    path = Path(folder) / MARKER
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def discover_owner_ids(output_dir: Path) -> list[str]:
    """The owners present on disk (folders with a marker), sorted: what the API can serve."""
    root = owners_root(output_dir)
    if not root.is_dir():
        return []
    return sorted(
        p.name for p in root.iterdir() if p.is_dir() and valid_owner_id(p.name) and read_marker(p)
    )


def owner_store(folder: Path, storage: Path | str | None = None) -> OwnerStore:
    """The store of an output folder, for the owner its marker names (the default owner when
    it has none: a single-owner folder written before owners existed).

    ``storage``: where the tables are when not in ``folder`` (an ``s3://`` output, whose
    local working folder ``folder`` holds the marker)."""
    marker = read_marker(folder) or {}
    return OwnerStore(
        folder if storage is None else storage,
        str(marker.get("owner_id") or DEFAULT_OWNER_ID),
        strict=bool(marker.get("strict", False)),
    )


def _stamped(t: Table) -> Table:
    """``t`` with an ``owner_id`` string column appended to its fixed schema."""
    if t.schema is None or OWNER_COLUMN in t.schema.names:
        return t
    return dataclasses.replace(t, schema=t.schema.append(pa.field(OWNER_COLUMN, pa.string())))


class OwnerStore(TableStore):
    """A :class:`TableStore` of one owner: writes stamp ``owner_id``, reads verify it.

    What callers see is unchanged: ``read`` returns the registry schema (the column is
    checked, then dropped), so every stage works on one owner's rows without knowing about
    owners. A row of another owner raises :class:`OwnerMismatch` naming the table and
    folder; so does a file without the column when ``strict`` (a folder of a multi-owner
    deployment). A single-owner folder is not strict: files written before owners existed
    (no column) are that owner's, so upgrading never makes a folder unreadable.
    """

    def __init__(self, root: Path, owner_id: str, *, strict: bool = True) -> None:
        if not valid_owner_id(owner_id):
            raise ValueError(f"invalid owner id {owner_id!r}")
        super().__init__(root)
        self.owner_id = owner_id
        self.strict = strict

    def stage(self, name: TableRef, data: pa.Table, day: dt.date | None = None) -> Staged:
        """Every write (``write`` is ``stage(...).commit()``) stamps the owner."""
        t = table(name)
        if t.schema is not None:
            data = data.select(t.schema.names).cast(t.schema)
        elif OWNER_COLUMN in data.column_names:
            data = data.drop_columns([OWNER_COLUMN])
        stamp = pa.repeat(pa.scalar(self.owner_id, pa.string()), data.num_rows)
        return super().stage(_stamped(t), data.append_column(OWNER_COLUMN, stamp), day)

    def read(
        self,
        name: TableRef,
        days: Iterable[dt.date] | None = None,
        columns: list[str] | None = None,
    ) -> pa.Table:
        t = table(name)
        if not self.strict:
            return self._read_lenient(t, days, columns)
        wanted = None if columns is None else [*columns, OWNER_COLUMN]
        try:
            data = super().read(_stamped(t), days, wanted)
        except (ValueError, KeyError, pa.ArrowInvalid) as exc:
            raise OwnerMismatch(
                f"table {t.name!r} under {self.root}: files without a valid {OWNER_COLUMN} "
                f"column ({str(exc).splitlines()[0][:120]})"
            ) from None
        if OWNER_COLUMN not in data.column_names:
            if data.num_rows == 0 and t.schema is not None:
                return data
            raise OwnerMismatch(f"table {t.name!r} under {self.root}: no {OWNER_COLUMN} column")
        stamp = data.column(OWNER_COLUMN)
        bad = data.num_rows - (pc.sum(pc.equal(stamp, self.owner_id)).as_py() or 0)
        if bad:
            raise OwnerMismatch(
                f"table {t.name!r} under {self.root}: {bad} rows do not belong to owner "
                f"{self.owner_id!r}"
            )
        return data.drop_columns([OWNER_COLUMN])

    def _read_lenient(
        self, t: Table, days: Iterable[dt.date] | None, columns: list[str] | None
    ) -> pa.Table:
        """Per file: a stamped file must be this owner's; an unstamped one is accepted."""
        if not t.partitioned:
            files = [(None, self.path(t))] if self.has(t) else []
        else:
            if days is None:  # the listing: every file exists
                files = [(d, self.path(t, d)) for d in self.dates(t)]
            else:
                files = [(d, self.path(t, d)) for d in sorted(set(days)) if self.has(t, d)]
        parts = []
        # one read of each file, its stamp included when it has one (overlapped: map_files)
        read = map_files(
            lambda path: self.read_file_with(t, path, columns, OWNER_COLUMN),
            [path for _day, path in files],
            self.remote,
        )
        for part, stamped in read:
            if not stamped:
                parts.append(part)  # written before owners existed
                continue
            stamp = part.column(OWNER_COLUMN)
            bad = len(stamp) - (pc.sum(pc.equal(stamp, self.owner_id)).as_py() or 0)
            if bad:
                raise OwnerMismatch(
                    f"table {t.name!r} under {self.root}: {bad} rows do not belong to "
                    f"owner {self.owner_id!r}"
                )
            parts.append(part.drop_columns([OWNER_COLUMN]))
        if not parts:
            return super().read(t, [] if t.partitioned else None, columns)
        if len(parts) == 1:
            return parts[0]
        return pa.concat_tables(parts, promote_options="permissive")


def map_owners(fn: Callable[[T], R], owners: Sequence[T], runner: Any = None) -> list[R]:
    """``[fn(o) for o in owners]``, in this process or on a Dask cluster: the one place the
    per-owner loop runs.

    ``runner`` is :func:`~memory_pipeline.core.common.parallel.map_tasks`'s: None (serial) or
    a ``distributed.Client``. The per-owner body shares nothing with the others, so shipping
    each owner to a worker changes only where it runs; results come back in ``owners``
    order. ``fn`` and each owner must pickle and ``fn`` must return plain data (the shell
    builds its events from it), since both cross a process boundary on a cluster.
    """
    return map_tasks(fn, owners, runner)


# ----------------------------------------------------------------------------- fingerprints


def input_fingerprint(store: TableStore, tables: Iterable[TableRef], extra: str = "") -> str:
    """A hash of the stored files of ``tables`` (names and bytes) plus ``extra`` (config and
    code version): equal fingerprints mean an unpartitioned build over them would repeat."""
    digest = hashlib.sha256(extra.encode("utf-8"))
    for ref in tables:
        t = table(ref)
        folder = store.table_dir(t)
        files = sorted(name for name, _ in fs.list_files(folder, ".parquet"))  # local or s3://
        digest.update(f"\x00{t.name}\x00{len(files)}".encode())
        for name in files:
            digest.update(name.encode())
            # the file's sha256, memoized per file identity (the same bytes as before, so
            # fingerprints recorded by earlier builds stay valid)
            digest.update(bytes.fromhex(file_digest(fs.join(folder, name))))
    return digest.hexdigest()


def fingerprint_path(folder: Path, asset: str) -> Path:
    return Path(folder) / FINGERPRINTS_DIR / f"{asset}.json"


def stored_fingerprint(folder: Path, asset: str) -> str | None:
    """The fingerprint of the inputs ``asset`` was last built from in ``folder`` (or None)."""
    path = fingerprint_path(folder, asset)
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8")).get("inputs")


def save_fingerprint(folder: Path, asset: str, fingerprint: str) -> None:
    """Record a successful build's input fingerprint, written last (after the publish)."""
    path = fingerprint_path(folder, asset)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps({"inputs": fingerprint}) + "\n")


# ----------------------------------------------------------------------------- fan-out


@dataclasses.dataclass
class FanOut:
    """A corpus read once, split into the records of each of its speakers."""

    records: dict[str, list[Record]]  # speaker id -> that speaker's records, in source order
    unassigned: int = 0  # quarantine records of no known dialogue (counted, never dropped silently)


def fan_out_by_speaker(
    records: Iterable[Record], speakers: Iterable[str] | None = None, separator: str = "+"
) -> FanOut:
    """Split one corpus read (every dialogue, contact = the speakers joined by ``+``) into
    one record list per speaker: a dialogue belongs to each of its speakers.

    For speaker ``s`` a message's contact becomes the other speakers and ``is_owner`` whether
    ``s`` sent it: exactly what a read with ``owner = s`` yields, so ids (content-derived,
    owner-independent) and every later stage are the same as for a single-owner config.
    A quarantine record goes to the speakers of its dialogue; a bad line, or a record of a
    dialogue without one readable utterance (only messages name the speakers), is counted in
    ``unassigned`` (the caller logs it). ``speakers`` keeps only those (None: everyone).
    """
    keep = None if speakers is None else set(speakers)
    out: dict[str, list[Record]] = {}
    people_of: dict[str, tuple[str, ...]] = {}
    pending: list[QuarantineRecord] = []
    for rec in records:
        if isinstance(rec, QuarantineRecord):
            pending.append(rec)
            continue
        people = people_of.get(rec.conversation_id)
        if people is None:
            people = tuple(sorted(p for p in rec.contact_id.split(separator) if p))
            people_of[rec.conversation_id] = people
        for person in people:
            if keep is not None and person not in keep:
                continue
            contact = separator.join(p for p in people if p != person)
            out.setdefault(person, []).append(
                dataclasses.replace(rec, contact_id=contact, is_owner=rec.sender == person)
            )
    unassigned = 0
    for rec in pending:
        people = people_of.get(rec.conversation_id or "")
        if not people:
            unassigned += 1
            continue
        for person in people:
            if keep is None or person in keep:
                out.setdefault(person, []).append(rec)
    return FanOut(out, unassigned)


# ----------------------------------------------------------------------------- the API side


class OwnerError(ValueError):
    """No owner named where several exist, or an owner that does not exist (one line)."""


def _listing(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:10])
    return shown + (f", … ({len(ids)} in all)" if len(ids) > 10 else "")


def remote_owner_ids(root: str) -> list[str]:
    """The owners of a deployment on object storage: the ``owners/<id>/`` prefixes under
    ``root`` (no marker there: markers live in the local working folder), sorted."""
    return [n for n in fs.list_dirs(fs.join(root, OWNERS_DIR)) if valid_owner_id(n)]


def resolve_owner_dir(
    output_dir: Path | str, owner: str | None, *, owner_id: str | None = None
) -> Path | str:
    """The folder (or ``s3://`` prefix) the API reads for ``owner`` in the deployment at
    ``output_dir``, a local folder or an ``s3://bucket/prefix``.

    Several owners present: ``owner`` is required (the error lists them) and must be one of
    them; one owner (the single-owner layout): ``owner`` may be omitted or name that owner
    (its marker's id locally; ``owner_id`` when the caller knows it, e.g. from the config).
    Never a folder outside ``owners/``: the id is checked against the owners present. On
    object storage the owners are the prefixes under ``owners/`` (one listing call).
    """
    remote = fs.is_remote(output_dir)
    root: Path | str = fs.normalize(output_dir) if remote else Path(output_dir)
    ids = remote_owner_ids(str(root)) if remote else discover_owner_ids(Path(root))
    if ids:
        if owner is None:
            raise OwnerError(
                f"{len(ids)} owners in {root}: pass owner= (--owner ID); owners: {_listing(ids)}"
            )
        if owner not in ids:
            raise OwnerError(f"unknown owner {owner!r} in {root}; owners: {_listing(ids)}")
        return fs.join(root, OWNERS_DIR, owner) if remote else owners_root(Path(root)) / owner
    if owner is not None:
        if not valid_owner_id(owner):
            raise OwnerError(f"invalid owner id {owner!r}: lowercase slug [a-z0-9][a-z0-9_-]*")
        mine = owner_id
        if mine is None and not remote:
            mine = str((read_marker(Path(root)) or {}).get("owner_id") or DEFAULT_OWNER_ID)
        if mine is not None and owner != mine:
            raise OwnerError(f"unknown owner {owner!r}: {root} holds one owner, {mine!r}")
    return root
