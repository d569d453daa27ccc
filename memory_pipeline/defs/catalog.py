"""warehouse: the DuckDB file with one view per table, for apps that speak SQL."""

from typing import Any

import dagster as dg

from memory_pipeline.core.common.catalog import refresh_catalog
from memory_pipeline.core.common.tables import REGISTRY
from memory_pipeline.defs.helpers import asset_info, code_version, inputs_fingerprint, per_owner
from memory_pipeline.defs.resources import PipelineResource

WAREHOUSE = dg.AssetKey("warehouse")
# DuckDB holds its file exclusively: every writer goes through this pool (limit 1).
DUCKDB_POOL = "duckdb_writer"


def _warehouse_settings(scope: Any) -> str | None:
    """The views depend on which tables exist (their files are read live): rebuild when the
    file is missing or this code changed, else only when an owner's tables changed."""
    if not scope.cfg.warehouse_path.is_file():
        return None
    return code_version("memory_pipeline.defs.catalog", "memory_pipeline.core.common.catalog")


def build_catalog_asset(upstream: list[dg.AssetKey]) -> dg.AssetsDefinition:
    """The unpartitioned catalog asset, downstream of every table it exposes."""

    @dg.asset(
        key=WAREHOUSE,
        deps=upstream,
        pool=DUCKDB_POOL,
        group_name="catalog",
        **asset_info(
            "warehouse",
            ("duckdb", "sql"),
            "memory_pipeline.defs.catalog",
            "memory_pipeline.core.common.catalog",
        ),
        description="DuckDB database with a view per Parquet table (see sql/).",
    )
    @per_owner(inputs_fingerprint(REGISTRY, _warehouse_settings), name="warehouse")
    def warehouse(context: dg.AssetExecutionContext, pipeline: PipelineResource):
        cfg, store = pipeline.cfg, pipeline.store
        # one warehouse file per owner; its views filter on the owner (defence in depth)
        owner = cfg.owner_id if cfg.root_dir is not None else None
        views = refresh_catalog(cfg.warehouse_path, store.parquet_root, owner)
        context.log.info(f"warehouse: {len(views)} views in {cfg.warehouse_path}")
        return dg.MaterializeResult(
            metadata={
                "views": dg.MetadataValue.json(views),
                "path": dg.MetadataValue.path(str(cfg.warehouse_path)),
            }
        )

    return warehouse
