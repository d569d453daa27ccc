"""Stored partitions read through their Arrow copies: what ``store.read`` gives, always."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from memory_pipeline.core.common import tables as T
from memory_pipeline.core.common.owners import OwnerStore
from memory_pipeline.core.indexes import parts as P

DAYS = [dt.date(2024, 3, 1) + dt.timedelta(days=i) for i in range(4)]


def _chunks(day: dt.date, n: int, tag: str = "") -> pa.Table:
    schema = T.CHUNKS.schema
    base = dt.datetime(day.year, day.month, day.day, 10, tzinfo=dt.UTC)
    rows = [
        {
            "chunk_id": f"chk_{day}_{i}{tag}",
            "session_id": f"ses_{day}",
            "chunk_index": i,
            "conversation_id": "conv",
            "contact_id": "kim",
            "speakers": ["Kim", "Yuki"],
            "message_ids": [f"msg_{day}_{i}"],
            "raw_text": f"[{day} 10:00] Kim: hello {i}{tag}",
            "start_ts": base,
            "end_ts": base,
            "local_date": day,
        }
        for i in range(n)
    ]
    filled = {f.name: [r.get(f.name) for r in rows] for f in schema}
    return pa.table(filled, schema=schema)


def test_cached_reads_equal_store_reads_after_rewrites_and_deletes(tmp_path):
    store = OwnerStore(tmp_path / "out", "default", strict=False)
    folder = P.parts_root(tmp_path / "cache") / "tables"
    for i, day in enumerate(DAYS):
        store.write(T.CHUNKS, _chunks(day, i + 1), day)
    reader = P.TableParts(store, folder)
    first = reader.read(T.CHUNKS)
    assert first.equals(store.read(T.CHUNKS))
    assert reader.computed == len(DAYS)
    again = P.TableParts(store, folder)
    assert again.read(T.CHUNKS).equals(store.read(T.CHUNKS))
    assert again.computed == 0  # every partition from its Arrow copy
    # a rewritten partition is read again, a deleted one disappears, and so do their copies
    store.write(T.CHUNKS, _chunks(DAYS[1], 5, "new"), DAYS[1])
    store.delete(T.CHUNKS, DAYS[2])
    third = P.TableParts(store, folder)
    assert third.read(T.CHUNKS).equals(store.read(T.CHUNKS))
    assert third.computed == 1
    assert len(list((folder / T.CHUNKS.name).glob("*.arrow"))) == len(DAYS) - 1
    # retention's drop_parts removes the copies of purged dates too (their file names carry
    # the partition date)
    P.drop_parts(tmp_path / "cache", before=DAYS[3])
    assert [p.name[:10] for p in (folder / T.CHUNKS.name).glob("*.arrow")] == [str(DAYS[3])]


def test_an_empty_table_reads_as_the_store_reads_it(tmp_path):
    store = OwnerStore(tmp_path / "out", "default", strict=False)
    reader = P.TableParts(store, tmp_path / "cache" / "tables")
    assert reader.read(T.CHUNKS).equals(store.read(T.CHUNKS))
