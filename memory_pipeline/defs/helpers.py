"""What several asset modules share to turn a core check into a Dagster check result.

The check logic lives in :mod:`memory_pipeline.core.quality`; an asset only names the check
and hands its ``(passed, metadata)`` result here, so every check reports metadata the same
way and no module imports another's private helpers.
"""

import dagster as dg

from memory_pipeline.core.quality.checks import Result


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
