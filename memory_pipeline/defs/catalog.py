"""warehouse: the DuckDB file with one view per table, for apps that speak SQL."""

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import dagster as dg

from memory_pipeline.core.common.catalog import local_tables, refresh_catalog, view_root
from memory_pipeline.core.common.owners import save_fingerprint, stored_fingerprint
from memory_pipeline.core.common.tables import REGISTRY
from memory_pipeline.defs.helpers import asset_info, code_version
from memory_pipeline.defs.owner_fanout import inputs_fingerprint, per_owner
from memory_pipeline.defs.resources import PipelineResource

WAREHOUSE = dg.AssetKey("warehouse")
# DuckDB holds its file exclusively: every writer goes through this pool (limit 1).
DUCKDB_POOL = "duckdb_writer"


def _warehouse_settings(scope: Any) -> str | None:
    """What the warehouse file holds besides the tables (None: the file is missing, build):
    this code and, on a local store, the views' owner filter, the folder they point at and
    which tables have files."""
    cfg = scope.cfg
    if not cfg.warehouse_path.is_file():
        return None
    code = code_version("memory_pipeline.defs.catalog", "memory_pipeline.core.common.catalog")
    if getattr(scope.store, "remote", False):
        return code
    root = Path(scope.store.parquet_root)
    present = local_tables(root)
    owner = cfg.owner_id if cfg.root_dir is not None else None
    # the views hold this absolute path: a moved output folder gets its views rewritten
    return _SEP.join([code, str(owner), view_root(root), *present])


# what the warehouse's views were last written from (fingerprints/<VIEWS>.json): a local
# warehouse is rewritten only when that changes, with one owner as with several. Its views
# read the Parquet files live (a glob per table), so a night's new partitions are in them
# already; on object storage the warehouse holds copies of the tables and the per-owner
# fingerprint over every file decides.
VIEWS = "warehouse_views"
_SEP = "\x1f"  # between the parts of the settings string (no path holds it)


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
        scope = SimpleNamespace(cfg=cfg, store=store)
        before = _warehouse_settings(scope)
        local = not getattr(store, "remote", False)
        if local and before is not None and before == stored_fingerprint(cfg.output_dir, VIEWS):
            # the views the file holds are the ones it would get (they read the files live)
            views = before.split(_SEP)[3:]
            context.log.info(f"warehouse: {len(views)} views unchanged in {cfg.warehouse_path}")
            rewritten = False
        else:
            views = refresh_catalog(cfg.warehouse_path, store.parquet_root, owner)
            context.log.info(f"warehouse: {len(views)} views in {cfg.warehouse_path}")
            rewritten = True
            if local and (after := _warehouse_settings(scope)) is not None:
                save_fingerprint(cfg.output_dir, VIEWS, after)
        return dg.MaterializeResult(
            metadata={
                "views": dg.MetadataValue.json(views),
                "rewritten": rewritten,
                "path": dg.MetadataValue.path(str(cfg.warehouse_path)),
            }
        )

    return warehouse
