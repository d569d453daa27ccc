"""The warehouse is rewritten when what its views say changes, not for every new partition."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

from memory_pipeline.core.common import tables as T
from memory_pipeline.core.common.catalog import local_tables
from memory_pipeline.core.common.storage import TableStore
from memory_pipeline.core.common.tables import REGISTRY
from memory_pipeline.defs.catalog import _warehouse_settings
from memory_pipeline.defs.owner_fanout import inputs_fingerprint
from memory_pipeline_tests.factories import msg, table


def _scope(tmp_path, store) -> SimpleNamespace:
    cfg = SimpleNamespace(
        warehouse_path=tmp_path / "out" / "warehouse.duckdb", owner_id="default", root_dir=None
    )
    return SimpleNamespace(cfg=cfg, store=store)


def test_a_new_partition_keeps_the_views_a_new_table_changes_them(tmp_path):
    store = TableStore(tmp_path / "out")
    scope = _scope(tmp_path, store)
    day = dt.date(2024, 3, 1)
    store.write(T.RAW_MESSAGES, table(msg(f"{day} 10:00", "hi")), day)
    assert _warehouse_settings(scope) is None  # no warehouse file yet: build
    scope.cfg.warehouse_path.write_bytes(b"")
    first = _warehouse_settings(scope)
    assert first is not None
    # another day's file: the views' globs read it already
    store.write(T.RAW_MESSAGES, table(msg("2024-03-02 10:00", "again")), dt.date(2024, 3, 2))
    assert _warehouse_settings(scope) == first
    # a table with its first file needs a view: rewrite
    store.write(T.QUARANTINE, T.QUARANTINE.schema.empty_table(), day)
    assert _warehouse_settings(scope) != first
    # the views hold the folder's absolute path: the same tables elsewhere need new views
    elsewhere = _scope(tmp_path / "moved", TableStore(tmp_path / "moved" / "out"))
    elsewhere.cfg.warehouse_path.parent.mkdir(parents=True)
    elsewhere.cfg.warehouse_path.write_bytes(b"")
    for d in (1, 2):
        moved_day = dt.date(2024, 3, d)
        rows = store.read(T.RAW_MESSAGES, [moved_day])
        elsewhere.store.write(T.RAW_MESSAGES, rows, moved_day)
    elsewhere.store.write(T.QUARANTINE, T.QUARANTINE.schema.empty_table(), day)
    assert local_tables(elsewhere.store.parquet_root) == local_tables(store.parquet_root)
    assert _warehouse_settings(elsewhere) != _warehouse_settings(scope)
    # the views filter on the owner in a multi-owner folder
    before = _warehouse_settings(scope)
    scope.cfg.root_dir = tmp_path
    assert _warehouse_settings(scope) != before


def test_the_per_owner_fingerprint_counts_every_file(tmp_path, monkeypatch):
    """Which owners run at all (and, on object storage, where the warehouse holds copies of
    the tables, whether it is rebuilt): a new partition counts."""
    store = TableStore(tmp_path / "out")
    scope = _scope(tmp_path, store)
    scope.cfg.warehouse_path.parent.mkdir(parents=True)
    scope.cfg.warehouse_path.write_bytes(b"")
    store.write(T.RAW_MESSAGES, table(msg("2024-03-01 10:00", "hi")), dt.date(2024, 3, 1))
    fingerprint = inputs_fingerprint(REGISTRY, _warehouse_settings)
    for remote in (False, True):
        monkeypatch.setattr(store, "remote", remote)
        first = fingerprint(scope)
        day = dt.date(2024, 3, 2 + remote)
        store.write(T.RAW_MESSAGES, table(msg(f"{day} 10:00", "again")), day)
        assert fingerprint(scope) != first
