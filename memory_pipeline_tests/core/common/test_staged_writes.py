"""Staged store writes: encoded early, visible only at commit, dropped without a trace
otherwise (search_indexes encodes its tables while the indexes build and replaces them
only after the version they describe is published)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from memory_pipeline.core.common import tables as T
from memory_pipeline.core.common.owners import OWNER_COLUMN, OwnerStore
from memory_pipeline.core.common.storage import StagedWrites, TableStore
from memory_pipeline_tests.core.common.test_storage_memo import DAY, _audit


def _hidden(store: TableStore) -> list[Path]:
    return sorted(p for p in Path(store.root).rglob(".*.tmp"))


def test_a_staged_write_is_invisible_until_commit(tmp_path: Path):
    store = TableStore(tmp_path)
    store.write(T.INGEST_AUDIT, _audit(1), DAY)
    staged = store.stage(T.INGEST_AUDIT, _audit(3), DAY)
    assert store.read(T.INGEST_AUDIT, [DAY]).num_rows == 1  # still the old partition
    assert len(_hidden(store)) == 1
    assert staged.commit() == Path(store.path(T.INGEST_AUDIT, DAY))
    assert store.read(T.INGEST_AUDIT, [DAY]).num_rows == 3
    assert _hidden(store) == []


def test_staged_writes_commit_together_or_leave_nothing(tmp_path: Path):
    store = TableStore(tmp_path)
    store.write(T.INGEST_AUDIT, _audit(1), DAY)
    # closed without commit (a failed check): nothing replaced; then committed: both are
    for commit, rows in ((False, 1), (True, 7)):
        with StagedWrites(store) as staged:
            staged.stage(T.INGEST_AUDIT, _audit(2), DAY)
            staged.stage(T.INGEST_AUDIT, _audit(5), DAY + dt.timedelta(days=1))
            if commit:
                staged.commit()
        assert store.read(T.INGEST_AUDIT).num_rows == rows
        assert _hidden(store) == []  # no temporary file left either way


def test_a_failed_encoding_raises_at_commit_and_replaces_nothing(tmp_path: Path):
    store = TableStore(tmp_path)
    store.write(T.INGEST_AUDIT, _audit(1), DAY)
    with StagedWrites(store) as staged:
        staged.stage(T.INGEST_AUDIT, _audit(2), DAY)
        staged.stage(T.INGEST_AUDIT, _audit(2))  # a partitioned table without a day
        with pytest.raises(ValueError, match="partitioned"):
            staged.commit()
    assert store.read(T.INGEST_AUDIT).num_rows == 1
    assert _hidden(store) == []


def test_an_owner_store_stamps_staged_writes(tmp_path: Path):
    store = OwnerStore(tmp_path, "alice")
    path = store.stage(T.INGEST_AUDIT, _audit(2), DAY).commit()
    assert pq.read_table(path).column(OWNER_COLUMN).to_pylist() == ["alice"] * 2
    assert store.read(T.INGEST_AUDIT, [DAY]).num_rows == 2
