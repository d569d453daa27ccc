"""A version's messages by id, read from the Arrow lookup on demand.

A searcher used to turn every message of its version into a Python dict when it loaded
(``to_pylist``): on 400k messages that alone took seconds, while a search reads a few
hundred rows. :class:`MessageRows` keeps the columns as Arrow arrays and an id -> row
index, and builds a row's dict when it is asked for (the same dict ``to_pylist`` gave).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

MADE_ROWS = 50_000  # built rows kept (then all dropped: cheap to rebuild)


class MessageRows(Mapping[str, Mapping[str, Any]]):
    """``{message_id: {column: value}}`` over a messages table (read-only, lazy rows)."""

    def __init__(self, messages: pa.Table) -> None:
        self.names = list(messages.column_names)
        self.columns = {n: messages.column(n).combine_chunks() for n in self.names}
        ids = self.columns["message_id"].to_pylist()
        self.row = {m: i for i, m in enumerate(ids)}  # a repeated id: the last row wins
        self._made: dict[str, dict[str, Any]] = {}  # rows already built (searches repeat)

    def __getitem__(self, message_id: str) -> dict[str, Any]:
        hit = self._made.get(message_id)
        if hit is None:
            i = self.row[message_id]
            hit = {n: self.columns[n][i].as_py() for n in self.names}
            if len(self._made) >= MADE_ROWS:
                self._made.clear()
            self._made[message_id] = hit
        return dict(hit)  # a copy: a caller's change does not reach the next caller

    def __contains__(self, message_id: object) -> bool:
        return message_id in self.row

    def __iter__(self) -> Iterator[str]:
        return iter(self.row)

    def __len__(self) -> int:
        return len(self.row)

    def column(self, name: str, message_ids: Sequence[str]) -> list[Any]:
        """``name`` of each message (None for an id the version does not hold)."""
        rows = [self.row.get(m, -1) for m in message_ids]
        arr = np.asarray(rows, dtype=np.int64)
        taken = self.columns[name].take(pa.array(np.where(arr < 0, 0, arr)))
        values = taken.to_pylist()
        return [None if r < 0 else v for r, v in zip(rows, values, strict=True)]

    def text_lengths(self, message_ids: Sequence[str]) -> list[int]:
        """Characters of each message's text (0: no text or an unknown id)."""
        rows = np.asarray([self.row.get(m, -1) for m in message_ids], dtype=np.int64)
        lengths = pc.fill_null(pc.utf8_length(self.columns["text"]), 0).to_numpy()
        safe = np.where(rows < 0, 0, rows)
        return np.where(rows < 0, 0, lengths[safe]).tolist() if len(rows) else []

    def senders_and_lengths(self, message_ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Each message's sender (an object array; "" for none or an unknown id) and text
        length in characters (0: no text or an unknown id), as ``column("sender")`` and
        :meth:`text_lengths` give them, with one lookup per id and only the asked rows read
        (what a turn index reads for the turns a query's reranker scores)."""
        n = len(message_ids)
        get = self.row.get
        rows = np.fromiter((get(m, -1) for m in message_ids), np.int64, n)
        known = rows >= 0
        senders = np.full(n, "", dtype=object)
        lengths = np.zeros(n, dtype=np.int64)
        if not known.any():
            return senders, lengths
        taken = pa.array(rows[known])
        encoded = self.columns["sender"].take(taken).dictionary_encode()
        names = np.array([x or "" for x in encoded.dictionary.to_pylist()] + [""], dtype=object)
        codes = pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False)  # -1: ""
        senders[known] = names[codes]
        text = pc.fill_null(pc.utf8_length(self.columns["text"].take(taken)), 0)
        lengths[known] = text.to_numpy(zero_copy_only=False)
        return senders, lengths

    def latest(self, name: str = "local_ts") -> Any:
        """The largest value of ``name`` (None for no messages)."""
        return pc.max(self.columns[name]).as_py() if len(self.row) else None

    def as_dict(self, name: str) -> dict[str, Any]:
        """``{message_id: name}`` for every message."""
        ids, values = self.columns["message_id"].to_pylist(), self.columns[name].to_pylist()
        return dict(zip(ids, values, strict=True))
