"""Forget, then rebuild: what the CLI and ``memory_pipeline.forget`` run after the purge.

Apart from ``defs/forget.py`` (the job) because it builds the whole definitions, which
register that job.
"""

from typing import Any

import dagster as dg

from memory_pipeline.config import PipelineConfig
from memory_pipeline.defs.resources import ObjectStoreResource, PipelineResource

# the unpartitioned stages over everything stored: rebuilt after a forget
REBUILD_STAGES = ("indexes", "storage", "evaluation", "warehouse")


def rebuild_after_forget(
    cfg: PipelineConfig, instance: dg.DagsterInstance | None = None, providers: Any = None
) -> bool:
    """Re-run the unpartitioned stages over the cleaned tables; True when all succeeded."""
    from memory_pipeline.defs.build import build_definitions
    from memory_pipeline.defs.runner import materialize_stages, stage_resources, stages

    defs = build_definitions(cfg)
    # the output of ``cfg`` (which may override the file's, e.g. an s3:// URI), not the file's
    resources = stage_resources(
        PipelineResource(
            config_file=str(cfg.config_path) if cfg.config_path else None,
            output_dir=str(cfg.storage_root),
            work_dir=str(cfg.output_dir) if cfg.output_uri else None,
            object_store=ObjectStoreResource.from_env(),
        ),
        providers,
    )
    runs = materialize_stages(
        defs,
        stages(*REBUILD_STAGES),
        resources=resources,
        instance=instance,
        raise_on_error=False,
    )
    return len(runs) == len(REBUILD_STAGES) and all(r.success and not r.failed for r in runs)
