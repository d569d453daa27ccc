"""The table assets are the registry's: key, description and column schema come from it.

Why: the Dagster UI is where a table's columns are looked up; if an asset's description or
columns were written by hand they would drift from what the storage layer actually writes.
"""

from __future__ import annotations

import os

import dagster as dg
import pytest

from memory_pipeline.config import ENV_PREFIX, load_config
from memory_pipeline.core.common import tables as T
from memory_pipeline.defs.build import build_definitions
from memory_pipeline.defs.helpers import COLUMN_SCHEMA, asset_key, column_schema, table_asset
from memory_pipeline_tests.paths import ROOT

OWN_ASSET = [t for t in T.REGISTRY if t.asset == t.name]


@pytest.fixture(scope="module")
def graph():
    with pytest.MonkeyPatch.context() as mp:
        for name in list(os.environ):
            if name.startswith(ENV_PREFIX):
                mp.delenv(name)
        cfg = load_config(
            ROOT / "memory_pipeline.toml", env={f"{ENV_PREFIX}END_DATE": "2024-03-31"}
        )
        return build_definitions(cfg).get_repository_def().asset_graph


def test_every_writing_asset_is_in_the_graph(graph):
    keys = graph.get_all_asset_keys()
    assert {asset_key(t) for t in T.REGISTRY} <= keys


@pytest.mark.parametrize("table", OWN_ASSET, ids=str)
def test_a_table_asset_carries_the_registry_description_and_columns(graph, table):
    node = graph.get(asset_key(table))
    assert node.description == table.description
    columns = node.metadata[COLUMN_SCHEMA].columns
    assert [c.name for c in columns] == list(table.column_types())
    assert all(c.description == table.columns[c.name] for c in columns)
    if table.schema is not None:
        assert [c.type for c in columns] == [str(f.type) for f in table.schema]


def test_the_column_schema_of_a_fixed_and_a_run_dependent_table():
    sessions = {c.name: c for c in column_schema(T.SESSIONS).columns}
    assert sessions["message_ids"].type == "list<item: string>"
    assert sessions["local_date"].description == T.SESSIONS.columns["local_date"]
    vectors = {c.name: c.type for c in column_schema(T.CHUNK_EMBEDDINGS).columns}
    assert vectors["vector"] == T.RUN_DEPENDENT


def test_table_asset_refuses_a_table_another_asset_writes():
    assert table_asset(T.SESSIONS)["key"] == dg.AssetKey("sessions")
    with pytest.raises(ValueError, match="bm25_index"):
        table_asset(T.BM25_POSTINGS)
