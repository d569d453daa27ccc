"""retention: the ``[privacy] retain_days`` purge of the nightly job and ``memory-pipeline run``.

Ingest already refuses to write a partition past the cutoff; this asset deletes the ones
already stored (``core/privacy/retention.py``: partitions, index versions, derived tables,
warehouse, evaluation, cache entries, dossiers). It runs first in the nightly job (ingest
depends on it, see ``defs/jobs.py``) and as the first stage of ``memory-pipeline run``
(``defs/runner.py``), so the UI shows when it last ran and what it purged; with retention off
it is a recorded no-op (``cutoff`` "off"). After the nightly job the automation conditions
rebuild the indexes and the warehouse, and ``defs/sensors.py`` rebuilds the memories and
dossiers the purge deleted (``run`` rebuilds them in its own later stages over its range).
Metadata carries counts and dates only, never text.
"""

import dagster as dg

from memory_pipeline.core.privacy.retention import purge_expired, retention_cutoff
from memory_pipeline.defs.helpers import asset_info
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
def retention_asset(context: dg.AssetExecutionContext, pipeline: PipelineResource):
    cfg = pipeline.cfg
    cutoff = retention_cutoff(cfg.retain_days)
    entry = purge_expired(
        cfg.output_dir, cfg.retain_days, cache_path=cfg.cache_path, dossier_dir=cfg.dossiers_path
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
