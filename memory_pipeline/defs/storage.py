"""storage_report: bytes per 1,000 sessions of raw text, indexes, vectors, memories, dossiers."""

import dagster as dg

from memory_pipeline.core.common import tables as T
from memory_pipeline.core.indexes.publish import current_version
from memory_pipeline.core.quality.storage_report import markdown_table, storage_report
from memory_pipeline.defs.chunks import CHUNKS
from memory_pipeline.defs.helpers import ROW_COUNT, asset_info, asset_key, table_asset, table_path
from memory_pipeline.defs.indexes import BM25, MEMORY_INDEX, TIME_META, VECTORS
from memory_pipeline.defs.ingest import RAW
from memory_pipeline.defs.memories import DOSSIERS, MEMORIES
from memory_pipeline.defs.owner_fanout import inputs_fingerprint, per_owner
from memory_pipeline.defs.representations import EMBEDDINGS
from memory_pipeline.defs.resources import PipelineResource
from memory_pipeline.defs.sessions import SESSIONS

STORAGE_REPORT = asset_key(T.STORAGE_REPORT)


def _published(output_dir) -> str | None:
    """The report measures the published index too: its version is part of the input."""
    version = current_version(output_dir)
    return None if version is None else version.name


@dg.asset(
    **table_asset(T.STORAGE_REPORT),
    deps=[
        RAW,
        SESSIONS,
        CHUNKS,
        EMBEDDINGS,
        MEMORIES,
        DOSSIERS,
        BM25,
        VECTORS,
        TIME_META,
        MEMORY_INDEX,
    ],
    group_name="reports",
    **asset_info(
        "storage",
        ("python", "parquet"),
        "memory_pipeline.defs.storage",
        "memory_pipeline.core.quality.storage_report",
    ),
)
@per_owner(
    inputs_fingerprint(
        [t for t in T.REGISTRY if t is not T.STORAGE_REPORT],
        lambda scope: _published(scope.cfg.storage_root),
    ),
    name=T.STORAGE_REPORT.name,
)
def storage_report_asset(context: dg.AssetExecutionContext, pipeline: PipelineResource):
    cfg, store = pipeline.cfg, pipeline.store
    report = storage_report(cfg.storage_root, cfg.dossiers_path, cfg.cache_path.parent)
    store.write(T.STORAGE_REPORT, report)
    total = sum(r["bytes"] for r in report.to_pylist() if r["category"] != "source") or 0
    context.log.info(f"storage_report: {report.num_rows} components")
    return dg.MaterializeResult(
        metadata={
            "report": dg.MetadataValue.md(markdown_table(report)),
            "derived_bytes": total,
            ROW_COUNT: report.num_rows,
            "path": table_path(store, T.STORAGE_REPORT),
        }
    )
