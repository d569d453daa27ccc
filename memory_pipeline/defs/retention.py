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

import datetime as dt

import dagster as dg

from memory_pipeline.core.privacy.retention import purge_expired, retention_cutoff
from memory_pipeline.defs.helpers import asset_info
from memory_pipeline.defs.owner_fanout import per_owner
from memory_pipeline.defs.resources import PipelineResource

RETENTION = dg.AssetKey("retention")
META_PURGED = "purged_dates"
META_CUTOFF = "cutoff"
META_EXPIRED = "records_expired"
# The date `memory-pipeline run` planned its partition range with: the purge uses the same
# day, so around midnight the cutoff and the range cannot be a day apart.
TODAY_TAG = "memory_pipeline/today"


def planned_day(run: dg.DagsterRun) -> dt.date | None:
    """The run's ``TODAY_TAG`` date; None (today) for a run without one or a re-execution
    (it inherits its parent's tags, but purges on the day it runs)."""
    tag = run.tags.get(TODAY_TAG)
    if not tag or run.parent_run_id is not None:
        return None
    return dt.date.fromisoformat(tag)


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
    on = planned_day(context.run)
    cutoff = retention_cutoff(cfg.retain_days, on)
    entry = purge_expired(
        cfg.storage_root,
        cfg.retain_days,
        cache_path=cfg.cache_path,
        dossier_dir=cfg.dossiers_path,
        work_dir=cfg.output_dir,
        on=on,
        state_dir=cfg.state_root,
        inbox=cfg.inbox_path,
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
            # the accounting of what left: input records and rows per table (the log keeps
            # them per partition); counts only
            META_EXPIRED: entry["records_expired"] if entry else 0,
            "rows_purged": dg.MetadataValue.json(entry["rows"] if entry else {}),
        }
    )
