"""The one way to run pipeline stages outside a Dagster daemon.

``memory-pipeline run``, ``memory-pipeline eval`` (its benchmark corpus), the test helpers and
the benchmarks all materialize the real assets stage by stage, each stage as one in-process run
over a date range. They used to each carry their own stage list, ``dg.materialize`` loop, quiet
logger config and range tags; this module holds the stage table and the one function that does
it (``materialize_stages``), so a new asset or a change of how a range is requested is made
once. It is the only caller of ``dg.materialize`` outside the tests.

A stage is a set of assets that run together in one run. Partitioned stages take the date
range: one day is requested as that partition, several days as a single-run backfill (the
``dagster/asset_partition_range_*`` tags, see ``defs/jobs.py``), never one run per day.
Unpartitioned stages (indexes, storage report, evaluation, warehouse) always cover everything
stored, so they get no range.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg

from memory_pipeline.defs.catalog import WAREHOUSE
from memory_pipeline.defs.chunks import CHUNKS
from memory_pipeline.defs.evaluation import EVALUATION
from memory_pipeline.defs.indexes import BM25, MEMORY_INDEX, TIME_META, VECTORS
from memory_pipeline.defs.ingest import AUDIT, QUARANTINE, RAW
from memory_pipeline.defs.jobs import RANGE_END, RANGE_START
from memory_pipeline.defs.memories import DOSSIERS, MEMORIES
from memory_pipeline.defs.providers import provider_resources
from memory_pipeline.defs.representations import (
    EMBEDDING_TEXTS,
    EMBEDDINGS,
    ENRICHMENT,
    SUMMARIES,
)
from memory_pipeline.defs.resources import PipelineResource
from memory_pipeline.defs.sessions import SESSIONS
from memory_pipeline.defs.storage import STORAGE_REPORT


@dataclass(frozen=True)
class Stage:
    """Assets materialized together in one run; ``partitioned`` ones take the date range."""

    name: str
    keys: tuple[dg.AssetKey, ...]
    partitioned: bool = True

    @property
    def key_names(self) -> list[str]:
        """The asset keys as strings, for messages and progress output."""
        return [k.to_user_string() for k in self.keys]


# In dependency order: each stage reads only what the stages before it wrote.
STAGES: tuple[Stage, ...] = (
    Stage("ingest", (RAW, QUARANTINE, AUDIT)),
    Stage("sessions", (SESSIONS,)),
    Stage("chunks", (CHUNKS,)),
    Stage("representations", (SUMMARIES, EMBEDDING_TEXTS, ENRICHMENT, EMBEDDINGS)),
    Stage("memories", (MEMORIES, DOSSIERS)),
    Stage("indexes", (BM25, VECTORS, TIME_META, MEMORY_INDEX), partitioned=False),
    Stage("storage", (STORAGE_REPORT,), partitioned=False),
    Stage("evaluation", (EVALUATION,), partitioned=False),
    Stage("warehouse", (WAREHOUSE,), partitioned=False),
)
STAGE_NAMES: tuple[str, ...] = tuple(s.name for s in STAGES)
_BY_NAME = {s.name: s for s in STAGES}
_STAGE_OF = {k: s for s in STAGES for k in s.keys}


def stages(*names: str) -> list[Stage]:
    """Stages of the table by name, in the order given (all of them when no name is given)."""
    unknown = [n for n in names if n not in _BY_NAME]
    if unknown:
        raise ValueError(f"unknown stages {unknown}; known: {', '.join(STAGE_NAMES)}")
    return [_BY_NAME[n] for n in names] if names else list(STAGES)


def stage_for(keys: Iterable[str | dg.AssetKey], name: str | None = None) -> Stage:
    """An ad-hoc stage of some assets (tests and benchmarks run single assets).

    Whether it takes the date range follows the table, so a caller cannot get it wrong.
    """
    asset_keys = tuple(dg.AssetKey.from_coercible(k) for k in keys)
    if not asset_keys:
        raise ValueError("a stage needs at least one asset key")
    for stage in STAGES:
        if stage.keys == asset_keys:
            return stage if name is None else Stage(name, asset_keys, stage.partitioned)
    unknown = [k.to_user_string() for k in asset_keys if k not in _STAGE_OF]
    if unknown:
        raise ValueError(f"assets {unknown} are in no stage of the table")
    partitioned = {_STAGE_OF[k].partitioned for k in asset_keys}
    if len(partitioned) != 1:
        raise ValueError(f"{asset_keys} mixes partitioned and unpartitioned assets")
    label = name or ", ".join(k.to_user_string() for k in asset_keys)
    return Stage(label, asset_keys, partitioned.pop())


def quiet_run_config(log_level: str = "WARNING") -> dict[str, Any]:
    """Run config that keeps Dagster's console logger to ``log_level`` and above.

    The console logger prints every event at DEBUG; the full event log stays in the
    instance (``dagster dev`` shows it), so progress output and tests need no more.
    """
    return {"loggers": {"console": {"config": {"log_level": log_level}}}}


def stage_resources(
    pipeline: PipelineResource, providers: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The resources every stage needs: the pipeline config plus the provider resources
    (from the environment unless given: tests and benchmarks pin the offline defaults)."""
    return {"pipeline": pipeline, **(provider_resources() if providers is None else providers)}


def range_request(days: Sequence[dt.date]) -> dict[str, Any]:
    """``dg.materialize`` keywords that request ``days`` (sorted, non-empty).

    One day is that partition; a longer range is one single-run backfill over
    ``days[0]..days[-1]`` (the assets use ``BackfillPolicy.single_run()``).
    """
    if len(days) == 1:
        return {"partition_key": days[0].isoformat()}
    return {"tags": {RANGE_START: days[0].isoformat(), RANGE_END: days[-1].isoformat()}}


@dataclass
class StageResult:
    """One stage's run: the Dagster result and its wall seconds."""

    stage: Stage
    result: dg.ExecuteInProcessResult
    seconds: float

    @property
    def success(self) -> bool:
        return self.result.success

    @property
    def checks(self) -> list[dg.AssetCheckEvaluation]:
        return list(self.result.get_asset_check_evaluations())

    @property
    def warned(self) -> list[dg.AssetCheckEvaluation]:
        """Failed checks of WARN severity: reported, the data stays usable."""
        return [e for e in self.checks if not e.passed and e.severity == dg.AssetCheckSeverity.WARN]

    @property
    def failed(self) -> list[dg.AssetCheckEvaluation]:
        """Failed checks of ERROR severity: the stage's data must not be trusted."""
        return [e for e in self.checks if not e.passed and e.severity != dg.AssetCheckSeverity.WARN]


def materialize_stages(
    assets: dg.Definitions | Sequence[Any],
    selection: Sequence[Stage | str],
    *,
    days: Sequence[dt.date] = (),
    resources: Mapping[str, Any] | None = None,
    instance: dg.DagsterInstance | None = None,
    log_level: str = "WARNING",
    raise_on_error: bool = True,
    on_start: Callable[[Stage], None] | None = None,
    on_done: Callable[[StageResult], bool | None] | None = None,
) -> list[StageResult]:
    """Materialize ``selection`` in order, each stage as one run, over ``days``.

    ``assets`` is a ``Definitions`` (its assets, checks and resources) or a list of assets and
    checks; ``resources`` replaces the Definitions' resources when given. Partitioned stages
    get ``range_request(sorted(days))``; with no days they run without a partition request
    (as for unpartitioned stages). ``instance=None`` is an ephemeral instance. The loop stops
    after a failed run (``raise_on_error=False``) or when ``on_done`` returns ``False``; the
    last result tells which. Returns one ``StageResult`` per run made, with wall seconds.
    """
    if isinstance(assets, dg.Definitions):
        defs = assets
        assets = [*(defs.assets or ()), *(defs.asset_checks or ())]
        resources = dict(defs.resources or {}) if resources is None else resources
    wanted = [s if isinstance(s, Stage) else stages(s)[0] for s in selection]
    window = sorted(days)
    run_config = quiet_run_config(log_level)
    results: list[StageResult] = []
    for stage in wanted:
        if on_start:
            on_start(stage)
        request = range_request(window) if stage.partitioned and window else {}
        t0 = time.perf_counter()
        result = dg.materialize(
            assets,
            selection=list(stage.keys),
            resources=dict(resources or {}),
            instance=instance,
            run_config=run_config,
            raise_on_error=raise_on_error,
            **request,
        )
        done = StageResult(stage, result, time.perf_counter() - t0)
        results.append(done)
        if not result.success:
            break
        if on_done and on_done(done) is False:
            break
    return results
