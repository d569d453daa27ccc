"""Per-partition token arrays, cached by content hash, concatenated at refresh.

Why: BM25 weights depend on the whole corpus, so a refresh must rebuild every index over
every document, but nothing obliges it to redo the per-document work. Reading 857k token
lists back from the SQLite token cache, splitting them and building one Python list per
document was most of a nightly refresh (65 of 128 profiled seconds for the turn index alone),
and it is O(corpus). Here a partition's token lists are kept as one Arrow IPC file (a
``list<string>`` column per document kind) under ``<cache>/index_parts/<kind>/<key>.arrow``,
where ``key`` hashes the tokenizer identity, this module's format and every input string
the lists are computed from. A refresh recomputes only the partitions whose inputs changed
and assembles the corpus with Arrow/numpy: concatenate, one dictionary encoding, first-seen
token ids (:func:`first_seen_ids`), then ``bm25.fast_index_ids``. The vocabulary order, the
token ids and so the saved index files are the ones the per-document path writes (tested:
any build order equals a full rebuild, byte for byte).

Privacy: the files hold words and ids of messages, so forget and retention delete the whole
folder (:func:`drop_parts`; the next refresh rebuilds it from the token cache, which they
scrub entry by entry). A refresh deletes the part files it did not use (:func:`prune`), so
a partition's old content does not outlive its rewrite.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "PARTS_DIR",
    "PART_FORMAT",
    "by_partition",
    "digest",
    "drop_parts",
    "first_seen_ids",
    "gather_ranges",
    "part_key",
    "parts_root",
    "prune",
    "read_part",
    "token_list_array",
    "write_part",
]

PARTS_DIR = "index_parts"
PART_FORMAT = 1
TOKENS = pa.list_(pa.string())


def parts_root(cache_dir: Path) -> Path:
    """Where the part files live, under the pipeline's local cache folder."""
    return Path(cache_dir) / PARTS_DIR


def drop_parts(cache_dir: Path, before: dt.date | None = None) -> int:
    """Delete the part files (forget: all of them; retention: those of partitions dated
    before ``before``, and any whose name carries no date). Returns how many were deleted."""
    root = parts_root(cache_dir)
    if not root.is_dir():
        return 0
    files = [p for p in root.rglob("*") if p.is_file()]
    if before is None:
        shutil.rmtree(root, ignore_errors=True)
        return len(files)
    gone = 0
    for path in files:
        try:
            day = dt.date.fromisoformat(path.name.lstrip(".").split("_", 1)[0])
        except ValueError:
            day = None
        if day is None or day < before:
            path.unlink(missing_ok=True)
            gone += 1
    return gone


def part_key(day: object, content: str) -> str:
    """A part file's name: its partition date (what retention matches) and content hash."""
    label = day.isoformat() if isinstance(day, dt.date) else "undated"
    return f"{label}_{content}"


def digest(identity: object, arrays: Iterable[pa.Array | pa.ChunkedArray]) -> str:
    """A content hash of ``identity`` (JSON-able: tokenizer, format) and string/integer
    arrays: each array's values and their lengths, so no two inputs share a key."""
    h = hashlib.blake2b(digest_size=16)
    h.update(json.dumps([PART_FORMAT, identity], sort_keys=True, default=str).encode())
    for arr in arrays:
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        h.update(b"\x1e%d" % len(arr))
        if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
            arr = arr.fill_null("")
            h.update(pc.binary_length(arr).to_numpy(zero_copy_only=False).tobytes())
            h.update(_string_bytes(arr))
        else:
            h.update(np.ascontiguousarray(arr.fill_null(0).to_numpy()).tobytes())
    return h.hexdigest()


def _string_bytes(arr: pa.Array) -> memoryview:
    """The UTF-8 bytes of a null-free string array's values, concatenated: a view of its
    data buffer (what joining the values and encoding them gives, without the copies)."""
    offsets = np.frombuffer(
        arr.buffers()[1], dtype=np.int64 if pa.types.is_large_string(arr.type) else np.int32
    )
    start, end = int(offsets[arr.offset]), int(offsets[arr.offset + len(arr)])
    data = arr.buffers()[2]
    return memoryview(data)[start:end] if data is not None else memoryview(b"")


def token_list_array(lists: Sequence[Sequence[str]]) -> pa.Array:
    """Token lists as one ``list<string>`` array (the part files' column type)."""
    return pa.array(lists, TOKENS)


def read_part(folder: Path, key: str) -> pa.Table | None:
    """The part stored under ``key`` (None: never written, or unreadable: recompute)."""
    path = Path(folder) / f"{key}.arrow"
    try:
        with pa.memory_map(str(path)) as source:
            return pa.ipc.open_file(source).read_all()
    except (OSError, pa.ArrowException):
        return None


def write_part(folder: Path, key: str, table: pa.Table) -> None:
    """Store a part atomically (temp file, then rename: a reader never sees half a file)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{key}.{uuid.uuid4().hex}.tmp"
    with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    os.replace(tmp, folder / f"{key}.arrow")


def prune(folder: Path, keep: Iterable[str]) -> int:
    """Delete the part files of ``folder`` not in ``keep`` (a rewritten partition's old
    content); returns how many were deleted."""
    folder = Path(folder)
    if not folder.is_dir():
        return 0
    keep = set(keep)
    gone = 0
    for path in folder.iterdir():
        if path.suffix == ".arrow" and path.stem not in keep:
            path.unlink(missing_ok=True)
            gone += 1
    return gone


def gather_ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The concatenation of ``arange(s, s + n)`` for every (s, n), without a Python loop."""
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    before = np.cumsum(lengths) - lengths
    return np.repeat(starts - before, lengths) + np.arange(total, dtype=np.int64)


def first_seen_ids(codes: np.ndarray, words: pa.Array) -> tuple[dict[str, int], np.ndarray]:
    """(token -> id in first-seen order of ``codes``, code -> that id, -1 for a code absent).

    ``codes`` index ``words`` (a dictionary encoding of some larger array); ``rank[codes]``
    is what ``bm25._vocabulary`` gives for the token sequence ``words[codes]``."""
    codes = np.asarray(codes, dtype=np.int64)
    rank = np.full(len(words), -1, dtype=np.int64)
    if codes.size == 0:
        return {}, rank
    # Without a sort (np.unique sorted every token of the corpus: ~2 of a warm refresh's
    # CPU seconds): codes straight from a dictionary encoding already appear in first-seen
    # order; otherwise Arrow's hash-based unique lists them in that order. Either order is
    # verified (O(n)) and, should the check ever fail, the sort decides.
    if _in_first_seen_order(codes):
        ordered = np.arange(int(codes.max()) + 1, dtype=np.int64)
    else:
        ordered = pc.unique(pa.array(codes)).to_numpy(zero_copy_only=False).astype(np.int64)
        probe = np.full(len(words), -1, dtype=np.int64)
        probe[ordered] = np.arange(len(ordered), dtype=np.int64)
        if not _in_first_seen_order(probe[codes]):
            uniq, first = np.unique(codes, return_index=True)
            ordered = uniq[np.argsort(first, kind="stable")]
    rank[ordered] = np.arange(len(ordered), dtype=np.int64)
    names = words.take(pa.array(ordered)).to_pylist()
    return dict(zip(names, range(len(names)), strict=True)), rank


def _in_first_seen_order(ids: np.ndarray) -> bool:
    """Whether non-empty ``ids`` number their distinct values 0, 1, 2, ... in order of first
    occurrence: starts at 0, no negatives, and each value is at most one above every value
    before it (so a new value is always the next id)."""
    if ids[0] != 0 or int(ids.min()) < 0:
        return False
    before = np.maximum.accumulate(ids)
    return bool(np.all(ids[1:] <= before[:-1] + 1))


def by_partition(table: pa.Table, column: str = "local_date") -> list[tuple[object, pa.Table]]:
    """``table`` split by ``column`` as (value, rows), ascending, nulls last as (None, rows);
    one (None, table) when it has no such column: the unit a part file covers.

    Rows keep their order within a partition (a stable sort, then zero-copy slices: one
    take of the table instead of a filter per partition, each copying its rows)."""
    if column not in table.column_names or table.num_rows == 0:
        return [(None, table)]
    order = pc.sort_indices(table, [(column, "ascending")])  # stable; nulls at the end
    ordered = table.take(order)
    keys = ordered.column(column).combine_chunks()
    n = len(keys)
    valid = n - keys.null_count
    out: list[tuple[object, pa.Table]] = []
    if valid:
        codes = keys.slice(0, valid).dictionary_encode().indices.to_numpy(zero_copy_only=False)
        cuts = [0, *(np.flatnonzero(np.diff(codes)) + 1).tolist(), valid]
        out = [
            (keys[lo].as_py(), ordered.slice(lo, hi - lo))
            for lo, hi in zip(cuts[:-1], cuts[1:], strict=True)
        ]
    if valid < n:
        out.append((None, ordered.slice(valid, n - valid)))
    return out
