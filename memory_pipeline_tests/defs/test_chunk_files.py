"""Which chunk partitions the refresh keys by their files (``defs/indexes._chunk_files``)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from memory_pipeline.core.common import tables as T
from memory_pipeline.defs.indexes import _chunk_files

D1, D2, D3 = (dt.date(2024, 3, d) for d in (1, 2, 3))


class _Store:
    """The two store calls ``_chunk_files`` makes: partition dates and file digests."""

    def __init__(self, files: dict, remote: bool = False) -> None:
        self.files, self.remote = files, remote

    def dates(self, table):
        return sorted(self.files.get(table.name, {}))

    def digest(self, table, day):
        return self.files[table.name][day]


def _rows(pairs: list[tuple[str, dt.date]], column: str) -> pa.Table:
    return pa.table(
        {
            "chunk_id": [c for c, _ in pairs],
            column: ["x"] * len(pairs),
            "local_date": pa.array([d for _, d in pairs], pa.date32()),
        }
    )


def test_a_partition_is_keyed_by_its_three_files_unless_a_row_lives_elsewhere():
    by_id = pa.table(
        {
            "chunk_id": ["a", "b", "c", "d"],
            "local_date": pa.array([D1, D1, D2, D3], pa.date32()),
        }
    )
    store = _Store(
        {
            T.CHUNKS.name: {D1: "c1", D2: "c2", D3: "c3"},
            T.CHUNK_SUMMARIES.name: {D1: "s1", D2: "s2", D3: "s3"},
            T.EMBEDDING_TEXTS.name: {D1: "e1", D2: "e2"},  # no file for D3
        }
    )
    # "c"'s summary is stored under D3 (another partition's file decides it); "d" has none
    summaries = _rows([("a", D1), ("b", D1), ("c", D3)], "summary")
    texts = _rows([("a", D1), ("b", D1), ("c", D2)], "embedding_text")
    got = _chunk_files(store, by_id, (summaries, texts))
    assert set(got) == {D1, D3}  # D2 keeps the content key
    assert got[D1].endswith("|c1|s1|e1")
    assert got[D3].endswith("|c3|s3|-")  # a missing file is part of the key
    assert (
        got[D1]
        != _chunk_files(
            _Store({**store.files, T.CHUNK_SUMMARIES.name: {D1: "s1'", D2: "s2", D3: "s3"}}),
            by_id,
            (summaries, texts),
        )[D1]
    )
    # object storage: no digests (each would download the file)
    assert _chunk_files(_Store(store.files, remote=True), by_id, (summaries, texts)) is None
