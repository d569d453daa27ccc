"""The table registry is complete: every stored table, every column described."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from memory_pipeline.core.common import schema as S
from memory_pipeline.core.common import tables as T
from memory_pipeline.core.common.catalog import views_sql
from memory_pipeline.core.common.storage import TableStore

# Every Arrow schema schema.py defines for a stored table (embeddings_schema builds the
# run-dependent one of chunk_embeddings).
SCHEMAS = {name: v for name, v in vars(S).items() if isinstance(v, pa.Schema)}


def test_registry_names_every_stored_table_once():
    names = [t.name for t in T.REGISTRY]
    assert len(names) == len(set(names))
    assert set(T.BY_NAME) == set(names)


def test_every_storage_schema_belongs_to_exactly_one_table():
    """A schema added to schema.py without a registry entry would never be applied."""
    used = [t.schema for t in T.REGISTRY if t.schema is not None]
    assert len({id(s) for s in used}) == len(used)
    assert {id(s) for s in SCHEMAS.values()} == {id(s) for s in used}


def test_constants_follow_the_table_names():
    for t in T.REGISTRY:
        assert getattr(T, t.name.upper()) is t


@pytest.mark.parametrize("table", [t for t in T.REGISTRY if t.schema is not None], ids=str)
def test_fixed_schemas_are_fully_described_and_hold_the_partition(table):
    schema = table.schema
    assert set(table.columns) == set(schema.names)
    assert all(table.columns.values())
    if table.partitioned:
        assert schema.field(table.partition).type == pa.date32()
    assert table.column_types() == {f.name: str(f.type) for f in schema}


def test_run_dependent_tables_say_so_in_their_column_types():
    assert set(T.CHUNK_EMBEDDINGS.column_types().values()) == {T.RUN_DEPENDENT}
    assert T.BM25_POSTINGS.column_types() == {}


def test_embeddings_columns_described():
    assert set(T.CHUNK_EMBEDDINGS.columns) == set(S.embeddings_schema(4).names)
    assert T.CHUNK_EMBEDDINGS.partition in S.embeddings_schema(4).names


def test_every_table_has_a_description_and_a_writing_asset():
    for t in T.REGISTRY:
        assert t.description.strip() and t.asset, t.name


def test_lookup_by_name_and_table_and_a_clear_error():
    assert T.table("sessions") is T.SESSIONS
    assert T.table(T.SESSIONS) is T.SESSIONS
    assert str(T.SESSIONS) == "sessions"
    with pytest.raises(KeyError, match="unknown table 'session'.*raw_messages"):
        T.table("session")


def test_tables_key_mappings():
    assert {T.SESSIONS: 1}[T.table("sessions")] == 1
    assert len({*T.REGISTRY}) == len(T.REGISTRY)


def test_written_by_groups_tables_per_asset():
    assert [t.name for t in T.written_by("memories")] == ["memories", "memory_rejects"]
    assert [t.name for t in T.written_by("time_metadata")] == ["session_meta", "message_meta"]


def test_the_registry_is_the_only_table_list():
    """schema.py holds the Arrow schemas only; which tables exist is the registry's."""
    assert not hasattr(S, "TABLES")
    assert not hasattr(S, "DYNAMIC_TABLES")


# ----------------------------------------------------------------------------- the readers


def test_views_follow_the_registry():
    sql = views_sql("p")
    positions = [sql.index(f"VIEW {t.name} AS") for t in T.REGISTRY]
    assert positions == sorted(positions)
    assert views_sql("p", [T.SESSIONS]) == views_sql("p", ["sessions"])


def test_store_takes_a_table_or_its_name_and_applies_the_registry_schema(tmp_path):
    store = TableStore(tmp_path)
    day = dt.date(2024, 3, 1)
    row = {"session_id": "s", "local_date": day, "lang": "en", "title": "t", "bullets": []}
    store.write(T.SESSION_ENRICHMENT, pa.Table.from_pylist([{**row, "method": "m"}]), day)
    assert store.dates("session_enrichment") == [day]
    assert store.read(T.SESSION_ENRICHMENT).schema == S.SESSION_ENRICHMENT
    assert store.read("session_enrichment", [day]).num_rows == 1
    assert store.read(T.SESSIONS).schema == S.SESSIONS  # absent: empty, in its schema
    with pytest.raises(KeyError, match="unknown table"):
        store.read("session")


def test_store_refuses_a_partition_mismatch(tmp_path):
    store = TableStore(tmp_path)
    with pytest.raises(ValueError, match="partitioned"):
        store.write(T.SESSIONS, S.SESSIONS.empty_table())
    with pytest.raises(ValueError, match="unpartitioned"):
        store.write(T.STORAGE_REPORT, S.STORAGE_REPORT.empty_table(), dt.date(2024, 3, 1))
    store.write(T.STORAGE_REPORT, S.STORAGE_REPORT.empty_table())
    assert store.has(T.STORAGE_REPORT) and store.read(T.STORAGE_REPORT).num_rows == 0
