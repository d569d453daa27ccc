"""The table registry is complete: every stored table, every column described."""

from __future__ import annotations

import pytest

from memory_pipeline.core.common import schema as S
from memory_pipeline.core.common import tables as T


def test_registry_names_every_stored_table_once():
    names = [t.name for t in T.REGISTRY]
    assert len(names) == len(set(names))
    assert set(names) == set(S.TABLES) | set(S.DYNAMIC_TABLES)


def test_constants_follow_the_table_names():
    for t in T.REGISTRY:
        assert getattr(T, t.name.upper()) is t


@pytest.mark.parametrize("table", [t for t in T.REGISTRY if t.schema is not None], ids=str)
def test_fixed_schemas_are_the_storage_schemas_and_fully_described(table):
    schema, partition = S.TABLES[table.name]
    assert table.schema is schema
    assert table.partition == partition
    assert set(table.columns) == set(schema.names)
    if table.partitioned:
        assert table.partition in schema.names


def test_embeddings_columns_described():
    assert set(T.CHUNK_EMBEDDINGS.columns) == set(S.embeddings_schema(4).names)


def test_lookup_by_name_and_table_and_a_clear_error():
    assert T.table("sessions") is T.SESSIONS
    assert T.table(T.SESSIONS) is T.SESSIONS
    assert str(T.SESSIONS) == "sessions"
    with pytest.raises(KeyError, match="unknown table 'session'.*raw_messages"):
        T.table("session")


def test_written_by_groups_tables_per_asset():
    assert [t.name for t in T.written_by("memories")] == ["memories", "memory_rejects"]
    assert [t.name for t in T.written_by("time_metadata")] == ["session_meta", "message_meta"]
