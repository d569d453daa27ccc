"""What several asset modules share: table identity from the registry, check results.

Asset keys, descriptions and column metadata of the table assets are read from the table
registry (:mod:`memory_pipeline.core.common.tables`) here, so an asset and the table it
writes cannot drift apart. The check logic lives in :mod:`memory_pipeline.core.quality`; an
asset only names the check and hands its ``(passed, metadata)`` result here, so every check
reports metadata the same way and no module imports another's private helpers.
"""

from typing import Any

import dagster as dg

from memory_pipeline.core.common.storage import TableStore
from memory_pipeline.core.common.tables import Table
from memory_pipeline.core.quality.checks import Result

COLUMN_SCHEMA = "dagster/column_schema"


def asset_key(table: Table) -> dg.AssetKey:
    """The key of the asset that writes ``table`` (the table's own name for a table asset)."""
    return dg.AssetKey(table.asset)


def column_schema(table: Table) -> dg.TableSchema:
    """The table's columns as Dagster shows them: registry name, Arrow type, description."""
    types = table.column_types()
    return dg.TableSchema(
        columns=[
            dg.TableColumn(name, type_, table.columns.get(name)) for name, type_ in types.items()
        ]
    )


def table_asset(table: Table) -> dict[str, Any]:
    """Definition arguments of the asset that IS ``table``: key, description, column schema.

    Spread into ``@dg.asset(...)`` or ``dg.AssetSpec(...)``; the metadata is definition
    metadata, so the UI lists the columns before anything is materialized.
    """
    if table.asset != table.name:
        raise ValueError(f"table {table.name!r} is written by asset {table.asset!r}, not its own")
    return {
        "key": asset_key(table),
        "description": table.description,
        "metadata": {COLUMN_SCHEMA: column_schema(table)},
    }


def table_path(store: TableStore, table: Table) -> dg.MetadataValue:
    """The ``path`` metadata of a table asset's materialization: the table's folder."""
    return dg.MetadataValue.path(str(store.table_dir(table)))


def check_result(
    asset: dg.AssetKey,
    name: str,
    result: Result,
    severity: dg.AssetCheckSeverity = dg.AssetCheckSeverity.ERROR,
) -> dg.AssetCheckResult:
    """The ``AssetCheckResult`` of check ``name`` on ``asset`` from a core check's result.

    Nested dicts become JSON metadata (Dagster takes scalars as they are, but not dicts);
    ``severity`` is ERROR, Dagster's default, unless a check is only worth a warning.
    """
    ok, meta = result
    return dg.AssetCheckResult(
        asset_key=asset,
        check_name=name,
        passed=bool(ok),
        severity=severity,
        metadata={
            k: dg.MetadataValue.json(v) if isinstance(v, dict) else v for k, v in meta.items()
        },
    )
