"""A representation's dense matrix as monthly segment files, carried from version to version.

Why: the dense index is the one part of a refresh whose input is large. A night changes two
``chunk_embeddings`` partitions (D-1 re-chunked, D new), but the refresh decoded every
partition from Parquet (~3.6 CPU s for 289k vectors of 512 floats on all RealPersonaChat),
compared every vector with the previous version's to find the changed ones (2.3 s) and wrote
the whole float32 matrix again (1.9 s for 592 MB). Here the matrix is split by month:

- each partition's rows are sorted by (chunk_id, piece), and a month's segment is its days'
  rows in date order: ``dense/<rep>.<YYYY-MM>.<hash>.npy``, where the hash covers this
  module's format, the representation and every (day, digest of the day's stored file);
- a refresh takes an unchanged month's segment from the previous version as a hard link (the
  same bytes, nothing decoded or written; a copy where links fail), and for a month with a
  changed day it decodes only the changed days, taking the others' rows from the previous
  segment;
- ``dense/segments.json`` records the digest of every day, and each segment's days with their
  row ranges, so the next refresh knows what it can take over. The rows of the decoded days
  are the only ones whose vectors can differ from the previous version's (``fresh``): the
  HNSW update compares only those (``hnsw.save_graph``).

The segments depend only on the stored partitions, not on the build history: any order of
builds writes the same files as a full rebuild (same names, same bytes). Months, not days:
the searcher memory-maps every segment, and a day per file would hold 365 open maps per
representation for a year of history; a month's segment is rewritten by at most ~31 nights.

Versions written before segments have one ``<rep>.npy``; :func:`load_matrix` reads both.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "SEGMENTS_FILE",
    "SEGMENT_FORMAT",
    "DensePart",
    "RepRows",
    "SplitChunk",
    "SegmentedMatrix",
    "assemble",
    "load_matrix",
    "month_of",
]

SEGMENT_FORMAT = 1
SEGMENTS_FILE = "segments.json"


@dataclass(frozen=True)
class DensePart:
    """One stored partition of the embeddings: its label (the ISO date; ``"all"`` for one
    in-memory table), a digest of its stored content (None: never taken over; a callable
    is asked once, when the build starts) and how to read its rows (only called when the
    previous version cannot supply them)."""

    day: str
    digest: str | Callable[[], str] | None
    load: Callable[[], pa.Table]


class SplitChunk(ValueError):
    """A chunk id has rows in two partitions, so its pieces would not be consecutive rows."""


class SegmentedMatrix:
    """Row-wise concatenation of (memory-mapped) float32 segments, read as one matrix.

    Supports what search and the graph update ask of a matrix: ``shape``, ``len``, rows by
    an index array (``m[rows]``), ``m @ q``, and ``np.asarray(m)`` (one in-memory copy, for
    a full graph build)."""

    def __init__(self, parts: Sequence[np.ndarray], dim: int) -> None:
        # plain ndarray views of the memory maps: ``p @ q`` on an np.memmap returns a memmap
        # and pays its bookkeeping per call (most of a small corpus's dense scan)
        self.parts = [np.asarray(p) for p in parts if len(p)]
        self.offsets = np.cumsum([0, *(len(p) for p in self.parts)]).astype(np.int64)
        self.shape = (int(self.offsets[-1]), int(dim))
        self.dtype = np.dtype(np.float32)
        self.ndim = 2

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, rows: object) -> np.ndarray:
        rows = np.asarray(rows)
        if rows.dtype == bool:
            rows = np.flatnonzero(rows)
        scalar = rows.ndim == 0
        rows = np.atleast_1d(rows).astype(np.int64)
        rows = np.where(rows < 0, rows + self.shape[0], rows)
        if len(rows) and (rows.min() < 0 or rows.max() >= self.shape[0]):
            raise IndexError(f"row out of range for a matrix of {self.shape[0]} rows")
        out = np.empty((len(rows), self.shape[1]), dtype=np.float32)
        seg = np.searchsorted(self.offsets, rows, side="right") - 1
        for s in np.unique(seg):
            at = seg == s
            out[at] = self.parts[s][rows[at] - self.offsets[s]]
        return out[0] if scalar else out

    def __matmul__(self, q: np.ndarray) -> np.ndarray:
        if not self.parts:
            return np.zeros(0, dtype=np.float32)
        if len(self.parts) == 1:
            return self.parts[0] @ q
        return np.concatenate([p @ q for p in self.parts])

    def __array__(self, dtype: object = None, copy: object = None) -> np.ndarray:
        whole = (
            np.concatenate(self.parts)
            if self.parts
            else np.zeros((0, self.shape[1]), dtype=np.float32)
        )
        return whole if dtype is None else whole.astype(dtype)


def load_matrix(dense: Path, rep: str) -> np.ndarray | SegmentedMatrix:
    """``rep``'s matrix in a version's ``dense`` folder: its segments (memory-mapped), or the
    single ``<rep>.npy`` of a version written before segments."""
    dense = Path(dense)
    index = _read_index(dense)
    segs = (index or {}).get("reps", {}).get(rep)
    if segs is None:
        return np.load(dense / f"{rep}.npy", mmap_mode="r")
    parts = [np.load(dense / s["file"], mmap_mode="r") for s in segs]
    if len(parts) == 1:
        return parts[0]
    return SegmentedMatrix(parts, int(index["dims"][rep]))


def month_of(day: str) -> str:
    """A day's segment label: ``YYYY-MM`` of an ISO date; any other label is its own."""
    return day[:7] if len(day) == 10 and day[4] == "-" and day[7] == "-" else day


@dataclass
class RepRows:
    """One representation's rows, assembled: the matrix (segments), each row's chunk id and
    graph key, which rows were decoded this build (the only ones that can have changed),
    and the provider, model and dim they were embedded with."""

    matrix: np.ndarray | SegmentedMatrix
    ids: list[str]
    keys: np.ndarray
    fresh: np.ndarray
    provider: str
    model: str
    dim: int


def _read_index(dense: Path) -> dict | None:
    try:
        index = json.loads((Path(dense) / SEGMENTS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return index if index.get("format") == SEGMENT_FORMAT else None


class _Previous:
    """What the previous version can supply: per representation and day, the rows of a day
    whose digest is unchanged (matrix slice, ids, keys), and its segment files by name. A
    previous version whose segment records do not match its files supplies nothing (every
    day is decoded again)."""

    def __init__(self, previous: Path | None) -> None:
        self.dense = Path(previous) / "dense" if previous is not None else None
        self.index = _read_index(self.dense) if self.dense is not None else None
        self.meta: dict = {}
        self._rows: dict[str, tuple] = {}
        if self.index is not None:
            try:
                self.meta = json.loads((self.dense / "meta.json").read_text(encoding="utf-8"))
                for rep in self.index.get("reps", {}):
                    self._rows[rep] = self._load(rep)
            except (OSError, ValueError, KeyError, TypeError):
                self.index, self.meta, self._rows = None, {}, {}
        self.digests: dict[str, str] = dict((self.index or {}).get("days", {}))

    def has_day(self, day: str, digest: str | None) -> bool:
        return digest is not None and self.digests.get(day) == digest

    def segment_files(self, rep: str) -> set[str]:
        return {s["file"] for s in (self.index or {}).get("reps", {}).get(rep, [])}

    def _load(self, rep: str) -> tuple:
        """(matrix parts by file, ids, keys, {day: (file, start in file, rows, global start)})."""
        segs = self.index["reps"][rep]
        ids = json.loads((self.dense / f"{rep}.ids.json").read_text(encoding="utf-8"))
        keys = np.load(self.dense / f"{rep}.keys.npy", mmap_mode="r")
        days, at = {}, 0
        for s in segs:
            if not (self.dense / s["file"]).is_file():
                raise ValueError(f"previous segment {s['file']} missing")
            for day, start, n in s["days"]:
                days[day] = (s["file"], start, n, at + start)
            at += s["rows"]
        if at != len(ids) or len(keys) != len(ids):
            raise ValueError("previous dense segments disagree with their ids")
        return {}, ids, keys, days

    def day_rows(self, rep: str, day: str) -> tuple[np.ndarray, list[str], np.ndarray] | None:
        """The previous version's rows of ``day`` for ``rep`` (None: it had none)."""
        if rep not in self._rows:
            return None
        files, ids, keys, days = self._rows[rep]
        if day not in days:
            return None
        file, start, n, g = days[day]
        if file not in files:
            files[file] = np.load(self.dense / file, mmap_mode="r")
        return files[file][start : start + n], ids[g : g + n], np.asarray(keys[g : g + n])

    def link(self, file: str, target: Path) -> None:
        """The previous version's segment ``file`` as ``target``: a hard link (same bytes, no
        copy; the previous folder is only read), a copy across file systems."""
        try:
            os.link(self.dense / file, target)
        except OSError:
            shutil.copyfile(self.dense / file, target)


def _sorted_rows(table: pa.Table, rep: str) -> tuple[np.ndarray, list[str], list[int]]:
    """A part's valid rows of ``rep`` in (chunk_id, piece) order: the float32
    matrix (one numpy gather: Arrow's take over a list column cost ~4 s of a 276k-piece
    refresh), the chunk ids and piece numbers."""
    table = table.filter(pc.equal(table.column("representation"), rep))
    if table.num_rows == 0:
        return np.zeros((0, 0), np.float32), [], []
    order = pc.sort_indices(
        table.select(["chunk_id", "piece"]),
        sort_keys=[("chunk_id", "ascending"), ("piece", "ascending")],
    )
    dim = table.column("dim")[0].as_py()
    flat = pc.list_flatten(table.column("vector")).to_numpy(zero_copy_only=False)
    matrix = np.ascontiguousarray(flat.reshape(-1, dim)[order.to_numpy()], dtype=np.float32)
    ids = pc.take(table.column("chunk_id"), order).to_pylist()
    pieces = pc.take(table.column("piece"), order).to_pylist()
    return matrix, ids, pieces


def _valid(table: pa.Table) -> pa.Table:
    """Rows with a vector (a provider error leaves it null); ``piece`` for old tables."""
    if table.column("vector").null_count:
        table = table.filter(pc.is_valid(table.column("vector")))
    if "piece" not in table.column_names:  # tables written before pieces existed
        table = table.append_column("piece", pa.array([0] * table.num_rows, pa.int32()))
    return table


def _identity_of(table: pa.Table, rep: str) -> tuple[str, str, int] | None:
    part = table.filter(pc.equal(table.column("representation"), rep))
    if part.num_rows == 0:
        return None
    return (
        part.column("provider")[0].as_py(),
        part.column("model")[0].as_py(),
        int(part.column("dim")[0].as_py()),
    )


def assemble(
    parts: Sequence[DensePart],
    dense: Path,
    previous: Path | None,
    piece_keys: Callable[[Sequence[str], Sequence[int]], np.ndarray],
) -> tuple[dict[str, RepRows], dict]:
    """Write every representation's segments for ``parts`` into ``dense`` (taking over what
    the ``previous`` version folder holds unchanged) and ``segments.json``; return each
    representation's rows and the statistics (days decoded, segments linked and written).

    A chunk's pieces must be consecutive rows (the exact scan's max-sim reads runs of equal
    ids): a chunk id that appears in two partitions breaks that, and raises
    :class:`SplitChunk` (the caller then builds from one table)."""
    dense = Path(dense)
    prev = _Previous(previous)
    days = [
        DensePart(p.day, p.digest() if callable(p.digest) else p.digest, p.load)
        for p in sorted(parts, key=lambda p: p.day)
    ]
    if len({p.day for p in days}) != len(days):
        raise ValueError("two dense parts share a day")
    decoded: dict[str, pa.Table] = {}
    reps: set[str] = set()
    for p in days:
        if prev.has_day(p.day, p.digest):
            reps |= {r for r in prev.meta if prev.day_rows(r, p.day) is not None}
        else:
            decoded[p.day] = _valid(p.load())
            reps |= set(pc.unique(decoded[p.day].column("representation")).to_pylist())
    months: dict[str, list[DensePart]] = {}
    for p in days:
        months.setdefault(month_of(p.day), []).append(p)
    out: dict[str, RepRows] = {}
    stats = {"dense_days": len(days), "dense_days_decoded": len(decoded)}
    linked = written = 0
    index = {"format": SEGMENT_FORMAT, "days": {}, "reps": {}, "dims": {}}
    for p in days:
        if p.digest is not None:
            index["days"][p.day] = p.digest
    for rep in sorted(reps):
        identity = None
        for day_table in decoded.values():
            identity = identity or _identity_of(day_table, rep)
        if identity is None:
            m = prev.meta[rep]
            identity = (m["provider"], m["model"], int(m["dim"]))
        dim = identity[2]
        mats, ids, keys, fresh, segs = [], [], [], [], []
        for month, members in sorted(months.items()):
            blocks = []  # (day, matrix, ids, keys, fresh)
            for p in members:
                if p.day in decoded:
                    m, i, pieces = _sorted_rows(decoded[p.day], rep)
                    if i:
                        k = piece_keys(i, pieces)
                        blocks.append((p.day, m, i, k, True))
                else:
                    got = prev.day_rows(rep, p.day)
                    if got is not None and len(got[1]):
                        blocks.append((p.day, got[0], got[1], got[2], False))
            if not blocks:
                continue
            name = _segment_name(rep, month, members, blocks)
            target = dense / name
            if name in prev.segment_files(rep) and not any(b[4] for b in blocks):
                prev.link(name, target)
                linked += 1
            else:
                _save_rows(target, [b[1] for b in blocks], dim)
                written += 1
            seg_days, start = [], 0
            for b in blocks:
                seg_days.append([b[0], start, len(b[2])])
                start += len(b[2])
            segs.append({"file": name, "rows": start, "days": seg_days})
            mats.append(np.load(target, mmap_mode="r"))
            for b in blocks:
                ids.extend(b[2])
                keys.append(np.asarray(b[3], dtype=np.int64))
                fresh.append(np.full(len(b[2]), b[4], dtype=bool))
        if not ids:
            continue
        if not _grouped(ids):
            raise SplitChunk(f"a chunk of {rep!r} has rows in two partitions")
        matrix = mats[0] if len(mats) == 1 else SegmentedMatrix(mats, dim)
        out[rep] = RepRows(
            matrix=matrix,
            ids=ids,
            keys=np.concatenate(keys),
            fresh=np.concatenate(fresh),
            provider=identity[0],
            model=identity[1],
            dim=dim,
        )
        index["reps"][rep] = segs
        index["dims"][rep] = dim
    (dense / SEGMENTS_FILE).write_text(json.dumps(index, indent=1), encoding="utf-8")
    stats |= {"dense_segments_linked": linked, "dense_segments_written": written}
    return out, stats


def _save_rows(target: Path, blocks: Sequence[np.ndarray], dim: int) -> None:
    """``np.save`` of the blocks' rows as one float32 matrix, written block by block: the
    same file without the two copies of the month (concatenate, then astype) it cost."""
    rows = sum(int(b.shape[0]) for b in blocks)
    header = {
        "descr": np.lib.format.dtype_to_descr(np.dtype(np.float32)),
        "fortran_order": False,
        "shape": (rows, dim),
    }
    with open(target, "wb") as f:
        np.lib.format.write_array_header_1_0(f, header)
        for b in blocks:
            f.write(np.ascontiguousarray(b, dtype=np.float32).data)


def _segment_name(rep: str, month: str, members: Sequence[DensePart], blocks: list) -> str:
    """``<rep>.<month>.<hash>.npy``: the hash covers the format, the representation and each
    day's digest, so equal names mean equal bytes. One in-memory table (the single part
    ``"all"``, never taken over) is ``<rep>.npy``, the layout before segments."""
    if [p.day for p in members] == ["all"] and members[0].digest is None:
        return f"{rep}.npy"
    h = hashlib.blake2b(digest_size=8)
    h.update(json.dumps([SEGMENT_FORMAT, rep, month]).encode())
    for p in members:
        h.update(json.dumps([p.day, p.digest]).encode())
    if any(p.digest is None for p in members):
        for b in blocks:
            h.update(np.ascontiguousarray(b[1], dtype=np.float32).tobytes())
            h.update("\x1f".join(b[2]).encode())
    return f"{rep}.{month}.{h.hexdigest()}.npy"


def _grouped(ids: Sequence[str]) -> bool:
    """Whether each id's rows are consecutive (as many runs of equal ids as distinct ids),
    counted on whole columns."""
    if not ids:
        return True
    arr = pa.array(ids, pa.string())
    runs = 1 + int((~same_as_previous(arr)).sum())
    return runs == pc.count_distinct(arr).as_py()


def same_as_previous(ids: pa.Array) -> np.ndarray:
    """For each row after the first, whether its id equals the one before (the runs of a
    piece list: ``_grouped`` here, ``publish_dense._split_chunks``), on whole columns."""
    n = len(ids)
    if n < 2:
        return np.zeros(0, dtype=bool)
    return pc.equal(ids.slice(1), ids.slice(0, n - 1)).to_numpy(zero_copy_only=False)
