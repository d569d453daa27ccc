"""warehouse: the DuckDB file with one view per table, for apps that speak SQL."""

import dagster as dg

from memory_pipeline.core.common.catalog import refresh_catalog
from memory_pipeline.defs.helpers import asset_info
from memory_pipeline.defs.resources import PipelineResource

WAREHOUSE = dg.AssetKey("warehouse")
# DuckDB holds its file exclusively: every writer goes through this pool (limit 1).
DUCKDB_POOL = "duckdb_writer"


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
    def warehouse(context: dg.AssetExecutionContext, pipeline: PipelineResource):
        cfg, store = pipeline.cfg, pipeline.store
        views = refresh_catalog(cfg.warehouse_path, store.parquet_root)
        context.log.info(f"warehouse: {len(views)} views in {cfg.warehouse_path}")
        return dg.MaterializeResult(
            metadata={
                "views": dg.MetadataValue.json(views),
                "path": dg.MetadataValue.path(str(cfg.warehouse_path)),
            }
        )

    return warehouse
