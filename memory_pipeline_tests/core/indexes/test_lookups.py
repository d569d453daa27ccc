"""A version's lookups: links of the store's chunks and raw_messages files, or copies.

The links must hold exactly the rows the version was built from: kept only when the store's
files are still the linked ones after they were read, else the rows read are written.
"""

from __future__ import annotations

import datetime as dt
import os

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from memory_pipeline.core.common import tables as T
from memory_pipeline.core.common.storage import TableStore
from memory_pipeline.core.indexes import publish as P
from memory_pipeline.core.sessions.chunking import chunk_sessions
from memory_pipeline.core.sessions.sessionize import sessionize
from memory_pipeline_tests.factories import msg, table

DAYS = [dt.date(2024, 3, 1), dt.date(2024, 3, 2)]


def _day(day: dt.date, texts: list[str]) -> tuple[pa.Table, pa.Table]:
    """(raw messages, chunks) of one day's conversation."""
    messages = table(
        *[
            msg(f"{day} 10:0{i}", t, "AB"[i % 2], conv=f"c{day.day}", order=i)
            for i, t in enumerate(texts)
        ]
    )
    return messages, chunk_sessions(sessionize(messages, 30), messages)


def _store(tmp_path) -> TableStore:
    store = TableStore(tmp_path / "out")
    for day, texts in zip(
        DAYS, (["hi", "kyoto trip?"], ["ryokan booked", "nice", "ok"]), strict=True
    ):
        messages, chunks = _day(day, texts)
        store.write(T.RAW_MESSAGES, messages, day)
        store.write(T.CHUNKS, chunks, day)
    return store


def _sorted(t: pa.Table, key: str) -> pa.Table:
    return t.take(pc.sort_indices(t.column(key)))


def _read(store: TableStore) -> tuple[pa.Table, pa.Table]:
    return (
        store.read(T.CHUNKS),
        store.read(T.RAW_MESSAGES, columns=list(P.MESSAGE_LOOKUP_COLUMNS)),
    )


def _session_lookup(version) -> None:
    # has_lookups and read_lookups ask for it too (time metadata, not tested here)
    pq.write_table(pa.table({"session_id": ["s"]}), version / P.SESSION_LOOKUP)


def _read_as_copies(tmp_path, store: TableStore, version) -> None:
    """``version``'s lookups read as the copies ``write_lookups`` makes of the stored rows
    (messages in any order: search keys them by id)."""
    chunks, messages = _read(store)
    copies = tmp_path / "copies"
    copies.mkdir()
    P.write_lookups(copies, chunks, messages)
    _session_lookup(copies)
    want_chunks, want_messages, _ = P.read_lookups(copies)
    got_chunks, got_messages, _ = P.read_lookups(version)
    assert got_chunks.equals(want_chunks)
    assert _sorted(got_messages, "message_id").equals(want_messages)


def test_unchanged_files_are_kept_as_links_that_read_as_the_copies(tmp_path):
    store = _store(tmp_path)
    version = P.new_version(P.index_root(store.root))
    linked = P.link_lookups(version, store)
    assert linked is not None and set(linked) == {"chunks", "raw_messages"}
    chunks, messages = _read(store)
    stats = P.finish_lookups(version, store, linked, chunks, messages)
    assert stats == {"lookup_chunks": chunks.num_rows, "lookup_messages": 5, "lookups_linked": True}
    assert not (version / P.CHUNK_LOOKUP).exists()
    for day in DAYS:  # the store's very files: one inode, no copy
        for t in (T.CHUNKS, T.RAW_MESSAGES):
            link = version / P.LOOKUP_LINKS / t.name / f"{day}.parquet"
            assert os.path.samefile(link, store.path(t, day))
    assert not P.has_lookups(version)  # no session lookup yet
    _session_lookup(version)
    assert P.has_lookups(version)
    _read_as_copies(tmp_path, store, version)
    # a later rewrite of a partition leaves the version's snapshot as it was
    messages2, chunks2 = _day(DAYS[1], ["ryokan booked", "changed"])
    store.write(T.RAW_MESSAGES, messages2, DAYS[1])
    assert P.read_lookups(version)[1].num_rows == 5


@pytest.mark.parametrize("change", ["rewritten", "added", "deleted"])
def test_a_file_changed_after_linking_gives_copies_of_the_rows_read(tmp_path, change):
    store = _store(tmp_path)
    version = P.new_version(P.index_root(store.root))
    linked = P.link_lookups(version, store)
    day = dt.date(2024, 3, 3) if change == "added" else DAYS[1]
    if change == "deleted":
        store.delete(T.RAW_MESSAGES, day)
    else:
        messages, chunks = _day(day, ["a new", "day"])
        store.write(T.RAW_MESSAGES, messages, day)
        store.write(T.CHUNKS, chunks, day)
    chunks, messages = _read(store)  # the build read the store after the change
    stats = P.finish_lookups(version, store, linked, chunks, messages)
    assert stats["lookups_linked"] is False
    assert not (version / P.LOOKUP_LINKS).exists()
    _session_lookup(version)
    got_chunks, got_messages, _ = P.read_lookups(version)
    assert got_chunks.equals(_sorted(chunks.select(list(P.CHUNK_LOOKUP_COLUMNS)), "chunk_id"))
    assert got_messages.num_rows == messages.num_rows


def test_no_links_where_the_file_system_refuses_them(tmp_path, monkeypatch):
    store = _store(tmp_path)
    version = P.new_version(P.index_root(store.root))

    def refuse(src, dst):
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", refuse)
    assert P.link_lookups(version, store) is None
    assert not (version / P.LOOKUP_LINKS).exists()
    chunks, messages = _read(store)
    stats = P.finish_lookups(version, store, None, chunks, messages)
    assert stats["lookups_linked"] is False and (version / P.CHUNK_LOOKUP).is_file()
