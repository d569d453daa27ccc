"""The write memo of TableStore: a partition this process just wrote is read back without
decoding its Parquet file, and never when the file changed since (another writer, a delete)."""

from __future__ import annotations

import datetime as dt
import hashlib
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from memory_pipeline.core.common import storage, storage_digests
from memory_pipeline.core.common import tables as T
from memory_pipeline.core.common.owners import OwnerStore
from memory_pipeline.core.common.storage import TableStore, WriteMemo

DAY = dt.date(2024, 3, 1)


def _audit(n: int, source: str = "s") -> pa.Table:
    return pa.table(
        {
            "partition_date": [DAY] * n,
            "source": [f"{source}{i}" for i in range(n)],
            "records_read": list(range(n)),
            "ingested": list(range(n)),
            "quarantined": [0] * n,
        }
    ).cast(T.INGEST_AUDIT.schema)


@pytest.fixture
def memo(monkeypatch):
    fresh = WriteMemo(64 * 2**20)
    monkeypatch.setattr(storage, "WRITE_MEMO", fresh)
    return fresh


def _no_parquet_reads(monkeypatch):
    def refuse(*_a, **_k):
        raise AssertionError("read the Parquet file instead of the memo")

    monkeypatch.setattr(storage.pq, "read_table", refuse)
    monkeypatch.setattr(storage.pq, "ParquetFile", refuse)


def test_a_partition_read_from_disk_is_what_read_table_gives(tmp_path, memo):
    store = TableStore(tmp_path)
    store.write(T.INGEST_AUDIT, _audit(5), DAY)
    memo.clear()
    path = store.path(T.INGEST_AUDIT, DAY)
    got = store.read(T.INGEST_AUDIT, [DAY])
    assert got.equals(pq.read_table(path).cast(T.INGEST_AUDIT.schema))
    cols = store.read(T.INGEST_AUDIT, [DAY], columns=["records_read", "source"])
    assert cols.column_names == ["records_read", "source"]
    # a column the file lacks fails as pq.read_table fails (ParquetFile would skip it)
    with pytest.raises(pa.ArrowInvalid):
        storage._read_local(path, ["records_read", "no_such_column"])


def test_a_written_partition_reads_back_from_memory_as_from_disk(tmp_path, memo, monkeypatch):
    store = TableStore(tmp_path)
    data = _audit(5)
    store.write(T.INGEST_AUDIT, data, DAY)
    from_disk = pq.read_table(store.path(T.INGEST_AUDIT, DAY)).cast(T.INGEST_AUDIT.schema)
    _no_parquet_reads(monkeypatch)
    got = store.read(T.INGEST_AUDIT, [DAY])
    assert got.equals(from_disk)
    assert got.schema == from_disk.schema
    cols = store.read(T.INGEST_AUDIT, [DAY], columns=["records_read", "source"])
    assert cols.column_names == ["records_read", "source"]
    assert cols.equals(from_disk.select(["records_read", "source"]))


def test_a_file_replaced_by_another_writer_is_read_from_disk(tmp_path, memo):
    store = TableStore(tmp_path)
    store.write(T.INGEST_AUDIT, _audit(5), DAY)
    other = _audit(2, source="other")
    pq.write_table(other, store.path(T.INGEST_AUDIT, DAY))  # not through this store
    assert store.read(T.INGEST_AUDIT, [DAY]).column("source").to_pylist() == ["other0", "other1"]
    assert len(memo) == 0  # the stale entry is gone


def test_a_deleted_partition_is_not_served(tmp_path, memo):
    store = TableStore(tmp_path)
    store.write(T.INGEST_AUDIT, _audit(3), DAY)
    assert store.delete(T.INGEST_AUDIT, DAY)
    assert store.read(T.INGEST_AUDIT, [DAY]).num_rows == 0
    assert len(memo) == 0


def test_the_memo_keeps_within_its_budget_and_drops_the_oldest(tmp_path, monkeypatch):
    one = _audit(2000).get_total_buffer_size()
    small = WriteMemo(int(one * 2.5))
    monkeypatch.setattr(storage, "WRITE_MEMO", small)
    store = TableStore(tmp_path)
    days = [DAY + dt.timedelta(days=i) for i in range(4)]
    for day in days:
        store.write(T.INGEST_AUDIT, _audit(2000), day)
    assert small.bytes <= small.budget
    assert len(small) == 2
    assert [p.name for p in small.paths()] == [f"{d.isoformat()}.parquet" for d in days[2:]]
    # an evicted partition still reads, from its file
    assert store.read(T.INGEST_AUDIT, [days[0]]).num_rows == 2000


def test_partitions_sliced_from_one_table_count_its_buffers_once(tmp_path, monkeypatch):
    whole = _audit(4000)
    memo = WriteMemo(int(whole.get_total_buffer_size() * 1.5))
    monkeypatch.setattr(storage, "WRITE_MEMO", memo)
    store = TableStore(tmp_path)
    days = [DAY + dt.timedelta(days=i) for i in range(4)]
    for i, day in enumerate(days):  # what split_by_date hands over: slices of one table
        store.write(T.INGEST_AUDIT, whole.slice(i * 1000, 1000), day)
    assert len(memo) == 4
    assert memo.bytes <= whole.get_total_buffer_size()
    memo.clear()
    assert memo.bytes == 0


def test_an_owner_store_reads_its_stamped_partition_from_the_memo(tmp_path, memo, monkeypatch):
    store = OwnerStore(tmp_path, "default", strict=False)
    data = _audit(4)
    store.write(T.INGEST_AUDIT, data, DAY)
    _no_parquet_reads(monkeypatch)
    monkeypatch.setattr(storage.pq, "read_schema", lambda *_a, **_k: 1 / 0)
    got = store.read(T.INGEST_AUDIT, [DAY])
    assert got.equals(data)
    strict = OwnerStore(tmp_path, "default", strict=True)
    assert strict.read(T.INGEST_AUDIT, [DAY]).equals(data)


def test_a_partition_digest_follows_its_bytes_and_is_asked_again_as_a_stat(tmp_path, monkeypatch):
    store = TableStore(tmp_path)
    store.write(T.INGEST_AUDIT, _audit(3), DAY)
    path = store.path(T.INGEST_AUDIT, DAY)
    first = store.digest(T.INGEST_AUDIT, DAY)
    assert first == hashlib.sha256(path.read_bytes()).hexdigest()
    calls = []
    real = hashlib.sha256
    monkeypatch.setattr(storage_digests.hashlib, "sha256", lambda *a: calls.append(1) or real(*a))
    assert store.digest(T.INGEST_AUDIT, DAY) == first and calls == []  # memoized
    store.write(T.INGEST_AUDIT, _audit(4), DAY)  # rewritten: a new file renamed into place
    second = store.digest(T.INGEST_AUDIT, DAY)
    assert calls and second != first
    assert second == real(path.read_bytes()).hexdigest()


# ----------------------------------------------------------------------------- digests


def _hashes(monkeypatch) -> list[str]:
    """The files file_digest hashes from here on (a recorded digest is not hashed again)."""
    seen: list[str] = []
    real = hashlib.sha256

    def counting(*args, **kwargs):
        seen.append("sha256")
        return real(*args, **kwargs)

    monkeypatch.setattr(storage_digests.hashlib, "sha256", counting)
    return seen


def test_a_digest_is_recorded_for_the_next_process_and_dropped_with_its_file(tmp_path, monkeypatch):
    """Each Dagster run is a new process: the digests a run computed are kept beside the
    files, so the next run's fingerprint is a stat per file, not a hash of every byte; a
    replaced or deleted partition's digest is dropped with it."""
    store = TableStore(tmp_path)
    path = store.write(T.INGEST_AUDIT, _audit(3), DAY)
    want = hashlib.sha256(path.read_bytes()).hexdigest()
    hashed = _hashes(monkeypatch)
    assert store.digest(T.INGEST_AUDIT, DAY) == want
    assert len(hashed) == 1
    book = path.parent / storage.DIGESTS_FILE
    storage_digests.flush_digests()  # as the process exits (or enough digests are pending)
    assert book.is_file() and want in book.read_text()
    storage.clear_process_memos()  # as a new process starts
    assert store.digest(T.INGEST_AUDIT, DAY) == want
    assert len(hashed) == 1  # read back, not hashed again
    # a rewrite drops the old digest at once and the new bytes are hashed on demand
    store.write(T.INGEST_AUDIT, _audit(5), DAY)
    assert want not in book.read_text()
    storage.clear_process_memos()
    new = store.digest(T.INGEST_AUDIT, DAY)
    assert new == hashlib.new("sha256", path.read_bytes()).hexdigest() != want
    assert len(hashed) == 2
    store.delete(T.INGEST_AUDIT, DAY)
    assert new not in book.read_text()
    # the book is never read as a partition
    assert store.read(T.INGEST_AUDIT).num_rows == 0


def test_a_stale_or_broken_digest_book_is_never_trusted(tmp_path, monkeypatch):
    store = TableStore(tmp_path)
    path = store.write(T.INGEST_AUDIT, _audit(3), DAY)
    want = store.digest(T.INGEST_AUDIT, DAY)
    book = path.parent / storage.DIGESTS_FILE
    # a file changed behind the store's back (same name, another identity): hashed again
    entries = {path.name: [0, 0, 0, 0, "f" * 64]}
    book.write_text(json.dumps(entries))
    storage.clear_process_memos()
    assert store.digest(T.INGEST_AUDIT, DAY) == want
    book.write_text("{not json")
    storage.clear_process_memos()
    assert store.digest(T.INGEST_AUDIT, DAY) == want


def test_many_new_digests_rewrite_the_book_a_few_times_and_never_keep_a_gone_file(
    tmp_path, monkeypatch
):
    """A first run digests a partition per day: the book is rewritten when a quarter of it
    is new, not once per digest, and what it finally holds is every digest of a file that
    still exists with the bytes it was computed for."""
    store = TableStore(tmp_path)
    days = [DAY + dt.timedelta(days=i) for i in range(600)]
    for day in days:
        store.write(T.INGEST_AUDIT, _audit(2), day)
    saves = []
    real_save = storage_digests._save_book
    monkeypatch.setattr(storage_digests, "_save_book", lambda *a: saves.append(1) or real_save(*a))
    want = {d: store.digest(T.INGEST_AUDIT, d) for d in days}
    assert 1 <= len(saves) <= 12
    gone, replaced = days[-1], days[-2]
    store.delete(T.INGEST_AUDIT, gone)  # after its digest was computed, maybe not written
    store.write(T.INGEST_AUDIT, _audit(3), replaced)
    storage.clear_process_memos()  # the process ends: what is pending is written
    book = json.loads((store.path(T.INGEST_AUDIT, DAY).parent / storage.DIGESTS_FILE).read_text())
    assert {v[-1] for v in book.values()} == {want[d] for d in days[:-2]}
    hashed = _hashes(monkeypatch)
    assert all(store.digest(T.INGEST_AUDIT, d) == want[d] for d in days[:-2])
    assert hashed == []  # the next process reads them all from the book
