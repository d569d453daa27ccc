"""The turn layout as arrays, computed once at publish and memory-mapped when a version loads.

Why: a search over turns needs, per message of the version, its session, its position in
it and the chunk rows holding it, plus those (chunk, turn) pairs sorted by chunk (see
``retrieval.turns.TurnIndex``). Deriving them from the chunk lookup at load took a Python
loop over every message (:func:`turn_layout`, then the pairs' sort): ~1.3 s of the
2.9 s a new version of all RealPersonaChat (408k messages) took to become servable. A
version is immutable, so the build computes them here with Arrow and numpy, writes them
beside the turn index (``turns/layout/``: ``.npy`` files, memory-mapped at load; the message
ids as the turn index writes its doc ids, so a load reuses that index's list; and
``layout.json``) and a load opens the files instead.

The files are a cache of what the chunk lookup decides: ``layout.json`` records the chunk
ids they were computed from (a digest), and a load whose lookup does not match, a version
published before these files, or one whose format this code does not read, computes them
as before (:func:`derive_turn_chunks` over :func:`turn_layout`). Tested: the arrays
equal the ones the loop derives, and searches rank the same with either.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from memory_pipeline.core.indexes.parts import digest, gather_ranges

LAYOUT_FOLDER = "layout"  # under a version's turn folder
LAYOUT_META = "layout.json"
LAYOUT_IDS = "message_ids.json"  # as the turn index writes its doc ids
LAYOUT_FORMAT = 1
# int64 arrays over turns or (turn, chunk) pairs, int32 for position / session length (the
# dtypes the loop gives, so a search computes with the same types either way)
LAYOUT_ARRAYS = {
    "session_code": np.int64,
    "position": np.int32,
    "session_length": np.int32,
    "rows_indptr": np.int64,
    "rows": np.int64,
    "pair_chunk": np.int64,
    "pair_turn": np.int64,
}
CHUNK_COLUMNS = ["chunk_id", "session_id", "chunk_index", "message_ids"]


@dataclass(frozen=True)
class TurnLayout:
    """Every message of the indexed chunks in session order (no text: what search needs).

    ``chunk_rows[i]``: the rows (in the chunk lookup's order) of the chunks holding message
    ``i`` (two where windows overlap); ``position[i]``: its offset in its session, and
    ``session_length[i]`` the session's message count (features of the reranker)."""

    message_ids: list[str]
    session_ids: list[str]
    chunk_rows: Sequence[list[int]]  # a list, or read from stored arrays (turn_arrays)
    position: np.ndarray
    session_length: np.ndarray


def turn_layout(chunks: pa.Table) -> TurnLayout:
    """The messages of a chunk lookup (chunk_id order), session by session (sorted ids).

    A session's messages are its chunks' message lists in ``chunk_index`` order with the
    overlap removed; a message id seen in two sessions is kept in the first (it cannot
    happen with content-derived ids, but a bad input must not duplicate a document)."""
    sessions = chunks.column("session_id").to_pylist()
    index = chunks.column("chunk_index").to_pylist()
    mids = chunks.column("message_ids").to_pylist()
    rows_of: dict[str, list[int]] = {}
    for row, sid in enumerate(sessions):
        rows_of.setdefault(sid, []).append(row)
    ids: list[str] = []
    out_sessions: list[str] = []
    out_rows: list[list[int]] = []
    position: list[int] = []
    length: list[int] = []
    placed: dict[str, int] = {}
    for sid in sorted(rows_of):
        start = len(ids)
        for row in sorted(rows_of[sid], key=lambda r: (index[r], r)):
            for m in mids[row]:
                if m not in placed:
                    placed[m] = len(ids)
                    ids.append(m)
                    out_sessions.append(sid)
                    out_rows.append([])
                elif out_sessions[placed[m]] != sid:
                    continue
                if row not in out_rows[placed[m]]:
                    out_rows[placed[m]].append(row)
        n = len(ids) - start
        position += list(range(n))
        length += [n] * n
    return TurnLayout(
        ids,
        out_sessions,
        out_rows,
        np.asarray(position, dtype=np.int32),
        np.asarray(length, dtype=np.int32),
    )


@dataclass(frozen=True)
class TurnChunks:
    """What search derives from a layout's chunk rows: each turn's session code (numbered
    by first appearance), its first and last chunk row, the rows between them for a turn in
    three or more windows, and every (chunk row, turn) pair, sorted."""

    session_code: np.ndarray
    first_chunk: np.ndarray
    last_chunk: np.ndarray
    extra_chunks: list[tuple[int, int]]
    pair_chunk: np.ndarray
    pair_turn: np.ndarray


def derive_turn_chunks(layout: TurnLayout) -> TurnChunks:
    """:class:`TurnChunks` of a layout, row by row (what a version without stored arrays
    computes at load)."""
    codes: dict[str, int] = {}
    session_code = np.array(
        [codes.setdefault(sid, len(codes)) for sid in layout.session_ids], dtype=np.int64
    )
    pairs = sorted((c, t) for t, rows in enumerate(layout.chunk_rows) for c in rows)
    return TurnChunks(
        session_code=session_code,
        first_chunk=np.array([r[0] for r in layout.chunk_rows], dtype=np.int64),
        last_chunk=np.array([r[-1] for r in layout.chunk_rows], dtype=np.int64),
        extra_chunks=[
            (t, c) for t, rows in enumerate(layout.chunk_rows) if len(rows) > 2 for c in rows[1:-1]
        ],
        pair_chunk=np.array([p[0] for p in pairs], dtype=np.int64),
        pair_turn=np.array([p[1] for p in pairs], dtype=np.int64),
    )


class CsrRows(Sequence[list[int]]):
    """``chunk_rows`` of a layout read from CSR arrays: turn ``t``'s rows are
    ``rows[indptr[t]:indptr[t + 1]]``, made a list when asked for."""

    def __init__(self, indptr: np.ndarray, rows: np.ndarray) -> None:
        self.indptr = indptr
        self.rows = rows

    def __len__(self) -> int:
        return max(len(self.indptr) - 1, 0)

    def __getitem__(self, t: int | slice):  # type: ignore[override]
        if isinstance(t, slice):
            return [self[i] for i in range(*t.indices(len(self)))]
        if t < 0:
            t += len(self)
        if not 0 <= t < len(self):
            raise IndexError(t)
        return self.rows[int(self.indptr[t]) : int(self.indptr[t + 1])].tolist()


@dataclass(frozen=True)
class TurnArrays:
    """A version's turn layout and :class:`TurnChunks` as stored (layout order)."""

    message_ids: list[str]
    session_names: list[str]  # by session code
    session_code: np.ndarray
    position: np.ndarray
    session_length: np.ndarray
    rows_indptr: np.ndarray
    rows: np.ndarray
    pair_chunk: np.ndarray
    pair_turn: np.ndarray

    def layout(self) -> TurnLayout:
        """The :class:`TurnLayout` these arrays were computed from."""
        names = np.array(self.session_names, dtype=object)
        return TurnLayout(
            self.message_ids,
            names[self.session_code].tolist() if len(names) else [],
            CsrRows(self.rows_indptr, self.rows),
            self.position,
            self.session_length,
        )

    def chunks(self) -> TurnChunks:
        """The :class:`TurnChunks` of the layout, from the stored arrays (no loop over turns:
        only the rare turns in three or more windows are listed)."""
        indptr, rows = self.rows_indptr, self.rows
        starts, ends = indptr[:-1], indptr[1:]
        many = np.flatnonzero(ends - starts > 2)
        return TurnChunks(
            session_code=self.session_code,
            first_chunk=rows[starts] if len(starts) else np.zeros(0, np.int64),
            last_chunk=rows[ends - 1] if len(ends) else np.zeros(0, np.int64),
            extra_chunks=[
                (int(t), int(c)) for t in many for c in rows[starts[t] + 1 : ends[t] - 1].tolist()
            ],
            pair_chunk=self.pair_chunk,
            pair_turn=self.pair_turn,
        )


def chunk_digest(chunk_ids: pa.Array | pa.ChunkedArray) -> str:
    """A digest of the chunk ids in lookup order: the rows the stored arrays point at."""
    return digest({"kind": "turn_layout"}, [pc.cast(chunk_ids, pa.string())])


def compute_turn_arrays(chunks: pa.Table) -> TurnArrays:
    """The arrays of ``turn_layout(chunks)`` (``chunks``: the chunk lookup, chunk_id order)
    with Arrow and numpy, in time O(listed messages) without a Python step per message.

    The same walk as :func:`turn_layout`: sessions by id, a session's chunks by
    (chunk_index, row), each chunk's messages in order; a message is placed where first
    seen, a later sighting in its session adds the chunk row (once), one in another session
    is ignored. A table with nulls in those columns takes the loop itself."""
    ids, arrays = _layout_arrays(chunks)
    return arrays if ids is None else replace(arrays, message_ids=ids.to_pylist())


def _layout_arrays(chunks: pa.Table) -> tuple[pa.Array | None, TurnArrays]:
    """(the message ids in layout order as an Arrow array, the arrays without them); the
    ids are None when the loop computed the layout (the arrays then hold them)."""
    sess = pc.cast(chunks.column("session_id"), pa.string()).combine_chunks()
    index = chunks.column("chunk_index").combine_chunks()
    lists = chunks.column("message_ids").combine_chunks()
    if sess.null_count or index.null_count or lists.null_count or lists.flatten().null_count:
        return None, _from_layout(turn_layout(chunks))
    # the walk: chunk rows by (session id, chunk_index), a stable sort (ties by row), and
    # each row's listed messages in order: ranges of the flattened lists
    order = pc.sort_indices(
        pa.table({"s": sess, "i": index}), [("s", "ascending"), ("i", "ascending")]
    ).to_numpy()
    offsets = lists.offsets.to_numpy().astype(np.int64)
    walk = gather_ranges(offsets[order], np.diff(offsets)[order])
    w_row = np.repeat(order.astype(np.int64), np.diff(offsets)[order])
    sessions = sess.dictionary_encode()
    w_session = sessions.indices.to_numpy().astype(np.int64)[w_row]
    # messages numbered in order of first sighting: a dictionary encoding in walk order
    # numbers them so (checked; else renumbered), and its dictionary is the layout's ids
    encoded = pc.cast(lists.values, pa.string()).take(pa.array(walk)).dictionary_encode()
    turn = encoded.indices.to_numpy().astype(np.int64)
    ids = encoded.dictionary
    if turn.size and not _first_seen_order(turn):
        uniq, at = np.unique(turn, return_index=True)
        placed = uniq[np.argsort(at, kind="stable")]
        renumber = np.empty(len(ids), dtype=np.int64)
        renumber[placed] = np.arange(len(placed), dtype=np.int64)
        turn, ids = renumber[turn], ids.take(pa.array(placed))
    n = len(ids)
    seen = np.maximum.accumulate(turn) if turn.size else turn
    first = np.flatnonzero(np.r_[True, turn[1:] > seen[:-1]]) if turn.size else turn
    # a message's sightings in its own session (the first one's) add their chunk rows
    keep = w_session == w_session[first][turn]
    turn, row = turn[keep], w_row[keep]
    if len(turn) > n:  # a message sighted again: each (turn, row) once, the first kept
        again = np.bincount(turn, minlength=n)[turn] > 1
        _, once = np.unique(turn[again] * len(sess) + row[again], return_index=True)
        drop = np.flatnonzero(again)
        keep = np.ones(len(turn), dtype=bool)
        keep[drop] = False
        keep[drop[once]] = True
        turn, row = turn[keep], row[keep]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(turn, minlength=n), out=indptr[1:])
    by_turn = np.argsort(turn, kind="stable")  # a turn's rows in walk order
    pairs = np.lexsort((turn, row))
    # a session's turns are adjacent and sessions come in walk order, so numbering them
    # where they change is numbering by first appearance (the loop's numbering)
    turn_session = w_session[first]
    change = np.r_[True, turn_session[1:] != turn_session[:-1]] if n else np.zeros(0, bool)
    session_code = np.cumsum(change) - 1
    starts_at = np.flatnonzero(change)
    position = np.arange(n, dtype=np.int64) - starts_at[session_code]
    length = np.diff(np.append(starts_at, n))[session_code]
    names = sessions.dictionary.take(pa.array(turn_session[starts_at])).to_pylist()
    return ids, TurnArrays(
        message_ids=[],
        session_names=names,
        session_code=session_code.astype(np.int64),
        position=position.astype(np.int32),
        session_length=length.astype(np.int32),
        rows_indptr=indptr,
        rows=row[by_turn].astype(np.int64),
        pair_chunk=row[pairs].astype(np.int64),
        pair_turn=turn[pairs].astype(np.int64),
    )


def _first_seen_order(codes: np.ndarray) -> bool:
    """Whether non-empty ``codes`` number their values 0, 1, 2, ... in order of first
    occurrence (each new value one above every value before it)."""
    seen = np.maximum.accumulate(codes)
    return bool(codes[0] == 0 and np.all(codes[1:] <= seen[:-1] + 1))


def _from_layout(layout: TurnLayout) -> TurnArrays:
    """:class:`TurnArrays` of a layout the loop computed (inputs with nulls)."""
    derived = derive_turn_chunks(layout)
    names: dict[str, int] = {}
    for sid in layout.session_ids:
        names.setdefault(sid, len(names))
    lengths = np.fromiter((len(r) for r in layout.chunk_rows), np.int64, len(layout.chunk_rows))
    indptr = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    rows = np.fromiter((c for r in layout.chunk_rows for c in r), np.int64, int(indptr[-1]))
    return TurnArrays(
        message_ids=list(layout.message_ids),
        session_names=list(names),
        session_code=derived.session_code,
        position=np.asarray(layout.position, np.int32),
        session_length=np.asarray(layout.session_length, np.int32),
        rows_indptr=indptr,
        rows=rows,
        pair_chunk=derived.pair_chunk,
        pair_turn=derived.pair_turn,
    )


def write_turn_arrays(folder: Path, chunks: pa.Table) -> dict:
    """Compute the turn layout's arrays of ``chunks`` (the chunk lookup's rows, any order:
    sorted by chunk_id here, as the lookup is read) and write them into ``folder`` (a
    version's ``turns/layout``; a temp folder renamed into place); returns stats."""
    table = chunks.select(CHUNK_COLUMNS).sort_by("chunk_id")
    ids_array, arrays = _layout_arrays(table)
    ids = arrays.message_ids if ids_array is None else ids_array.to_pylist()
    folder = Path(folder)
    tmp = folder.with_name(f".{LAYOUT_FOLDER}.{uuid.uuid4().hex}")
    tmp.mkdir(parents=True)
    for name, dtype in LAYOUT_ARRAYS.items():
        np.save(tmp / f"{name}.npy", np.ascontiguousarray(getattr(arrays, name), dtype=dtype))
    # the bytes ``Bm25Index.save`` writes for the same ids: a load then takes the turn
    # index's parsed list after one comparison of the files instead of a second parse
    (tmp / LAYOUT_IDS).write_text(json.dumps(ids, ensure_ascii=False), encoding="utf-8")
    meta = {
        "format": LAYOUT_FORMAT,
        "turns": len(ids),
        "pairs": len(arrays.pair_chunk),
        "chunks": table.num_rows,
        "chunk_digest": chunk_digest(table.column("chunk_id")),
        "session_names": arrays.session_names,
    }
    (tmp / LAYOUT_META).write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")
    shutil.rmtree(folder, ignore_errors=True)  # a rebuild into the same folder
    os.replace(tmp, folder)
    return {"turn_layout_stored": True}


def load_turn_arrays(
    folder: Path,
    chunk_ids: pa.Array | pa.ChunkedArray,
    turn_ids: list[str] | None = None,
    turn_ids_file: Path | None = None,
) -> TurnArrays | None:
    """The arrays stored in ``folder``, memory-mapped; None when there are none (a version
    published before them), in a format this code does not read, incomplete, or computed
    from other chunk rows than ``chunk_ids`` (the chunk lookup as loaded): the caller
    derives them.

    ``turn_ids``: the ``turn`` index's doc ids as read from ``turn_ids_file``; when that
    file holds the same bytes as the stored message ids (the build writes the documents in
    layout order), that list is the layout's too: no second parse, one list to compare."""
    folder = Path(folder)
    try:
        meta = json.loads((folder / LAYOUT_META).read_text(encoding="utf-8"))
        if meta.get("format") != LAYOUT_FORMAT or meta.get("chunks") != len(chunk_ids):
            return None
        if meta.get("chunk_digest") != chunk_digest(chunk_ids):
            return None
        arrays = {n: np.asarray(np.load(folder / f"{n}.npy", mmap_mode="r")) for n in LAYOUT_ARRAYS}
        raw = (folder / LAYOUT_IDS).read_bytes()
        same = turn_ids is not None and turn_ids_file is not None and _holds(turn_ids_file, raw)
        ids = turn_ids if same else None
        if ids is None:
            ids = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError, KeyError, pa.ArrowException):
        return None
    n, pairs = meta.get("turns"), meta.get("pairs")
    sizes = {
        "session_code": n,
        "position": n,
        "session_length": n,
        "rows_indptr": n + 1 if isinstance(n, int) else None,
        "rows": pairs,
        "pair_chunk": pairs,
        "pair_turn": pairs,
    }
    fits = all(
        a.ndim == 1 and len(a) == sizes[k] and a.dtype == LAYOUT_ARRAYS[k]
        for k, a in arrays.items()
    )
    if not fits or not isinstance(ids, list) or len(ids) != n:
        return None
    return TurnArrays(message_ids=ids, session_names=list(meta["session_names"]), **arrays)


def _holds(path: Path, raw: bytes) -> bool:
    """Whether the file at ``path`` holds ``raw``."""
    try:
        return Path(path).read_bytes() == raw
    except OSError:
        return False
