"""retention: the scheduled path's ``[privacy] retain_days`` purge (the CLI purges in ``run``).

Ingest already refuses to write a partition past the cutoff; this asset deletes the ones
already stored (``core/privacy/retention.py``: partitions, index versions, derived tables,
warehouse, evaluation, cache entries, dossiers). It runs first in the nightly job (ingest
depends on it, see ``defs/jobs.py``); the automation conditions then rebuild the indexes and
the warehouse, and ``defs/sensors.py`` rebuilds the memories and dossiers the purge deleted.
Metadata carries counts and dates only, never text.
"""

import dagster as dg

from memory_pipeline.core.privacy.retention import purge_expired, retention_cutoff
from memory_pipeline.defs.helpers import asset_info, per_owner
from memory_pipeline.defs.resources import PipelineResource

RETENTION = dg.AssetKey("retention")
META_PURGED = "purged_dates"
META_CUTOFF = "cutoff"


@dg.asset(
    key=RETENTION,
    group_name="privacy",
    description="Purge every partition older than [privacy] retain_days (no-op when unset); "
    "the nightly job runs it before ingest.",
    **asset_info(
        "privacy",
        ("python", "parquet"),
        "memory_pipeline.defs.retention",
        "memory_pipeline.core.privacy",
    ),
)
@per_owner(name="retention")  # every owner's folder is purged by the same policy
def retention_asset(context: dg.AssetExecutionContext, pipeline: PipelineResource):
    cfg = pipeline.cfg
    cutoff = retention_cutoff(cfg.retain_days)
    entry = purge_expired(
        cfg.storage_root,
        cfg.retain_days,
        cache_path=cfg.cache_path,
        dossier_dir=cfg.dossiers_path,
        work_dir=cfg.output_dir,
    )
    purged = entry["dates"] if entry else []
    context.log.info(
        f"retention: purged {len(purged)} partitions before {cutoff}"
        if cutoff
        else "retention: off ([privacy] retain_days unset)"
    )
    return dg.MaterializeResult(
        metadata={
            META_CUTOFF: cutoff.isoformat() if cutoff else "off",
            META_PURGED: len(purged),
            "first_purged": purged[0] if purged else "",
            "last_purged": purged[-1] if purged else "",
        }
    )
