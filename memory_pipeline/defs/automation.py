"""Freshness by declaration: which assets Dagster's automation re-requests, and when.

The partitioned assets are materialized by runs someone launches (the nightly schedule, a
backfill, the source sensor). Everything unpartitioned that reads *all* partitions (the
search indexes, the memory timeline, the storage report, the warehouse views, the evaluation)
declares instead that it follows its upstream: it is requested when an upstream partition
was materialized after this asset was last requested, and not otherwise.

Why not ``eager()``: its ``any_deps_missing`` clause never lets it fire here (a day without
chat is never materialized, so a daily upstream always has missing partitions), and its
memory is tick-based (``since_last_handled``): an upstream update first seen on the tick
right after a request is reset by that request and lost, and so is one that lands while
the refresh runs. :class:`UpstreamNewerThanRequest` compares event-log storage ids instead
(newest upstream materialization vs this asset's newest *planned* materialization, written
when its run is created, before it reads anything), so there is no cursor to lose an update
and a fresh instance whose data already exists refreshes on its first tick. It waits while
an upstream or the asset itself is running (a nightly run updates chunks, then summaries,
then embeddings: one rebuild after the whole run is the point). A failed refresh is not
retried in a loop: its planned event is newer than the updates it failed on.

The condition is custom Python, so the sensor evaluates it in the code server
(``use_user_code_server=True``). Conditions are attached here, centrally, to the assets
``build_definitions`` registers (not in each decorator); ``AUTOMATION_SENSOR`` is created
RUNNING for a live configuration (no ``end_date``, ``defs/jobs.py``), so ``dagster dev``
(whose daemon ticks sensors) keeps the indexes fresh unattended; a historical corpus with an
end date creates it STOPPED, like the nightly schedule.

The same assets declare how fresh they are expected to be (:data:`FRESHNESS`, Dagster's
``FreshnessPolicy``, evaluated by the daemon's freshness loop and shown in the UI): the nightly
run updates yesterday's partitions every night, so the refresh follows within hours; a
materialization older than 26 h means one night was missed (warn), older than 50 h two (fail).
A bundled sample that nobody re-runs turns to warn a day later; that is the truth about it.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterable

import dagster as dg

from memory_pipeline.defs.catalog import WAREHOUSE
from memory_pipeline.defs.evaluation import EVALUATION
from memory_pipeline.defs.indexes import BM25, MEMORY_INDEX, TIME_META, VECTORS
from memory_pipeline.defs.jobs import FINAL_STAGE_TAG, INVOCATION_TAG, STAGE_TAG
from memory_pipeline.defs.storage import STORAGE_REPORT

AUTOMATION_SENSOR = "refresh_on_upstream_change"
# how often the daemon evaluates the conditions (seconds); Dagster's own default is 30
AUTOMATION_INTERVAL = 60


class UpstreamNewerThanRequest(dg.AutomationCondition):
    """True when an upstream asset has a materialization newer than this asset's last
    request (its latest planned or, for runs without plans, recorded materialization) that
    another run made: upstream steps of the refresh run itself (the indexes before the
    warehouse) are what that run was for."""

    @property
    def name(self) -> str:
        return "upstream_newer_than_request"

    def evaluate(self, context: dg.AutomationContext) -> dg.AutomationResult:
        instance = context.asset_graph_view.instance
        key = context.key
        mine, my_run = _latest_materialization(instance, key)
        planned = instance.get_latest_planned_materialization_info(key)
        if planned is not None and planned.storage_id > mine:
            mine, my_run = planned.storage_id, planned.run_id
        stale = False
        for dep in context.asset_graph.get(key).parent_keys:
            storage_id, run_id = _latest_materialization(instance, dep)
            if storage_id > mine and run_id != my_run:
                stale = True
                break
        subset = context.candidate_subset if stale else context.get_empty_subset()
        return dg.AutomationResult(context, true_subset=subset)


# How long after a call's stage ended its next stage may still be starting: the gap between two
# stages of `memory-pipeline run` is a fraction of a second, so a minute only rules out a call
# that died between stages (its runs stay as they were) holding the refresh back for ever.
STAGE_GAP_SECONDS = 60.0


class CliRunInFlight(dg.AutomationCondition):
    """True while a ``memory-pipeline run`` call is between its first and last stage.

    The call materializes the refreshed assets itself (its last stages are the indexes,
    evaluation and warehouse), so a refresh requested between its stages would do the same
    work twice and overlap the call. Its runs carry the call id and the call's last stage
    (``defs/jobs.py``): the newest such run unfinished, or finished but not the last stage
    and ended under :data:`STAGE_GAP_SECONDS` ago, means the call is still going."""

    @property
    def name(self) -> str:
        return "cli_run_in_flight"

    def evaluate(self, context: dg.AutomationContext) -> dg.AutomationResult:
        busy = cli_run_in_flight(context.asset_graph_view.instance)
        subset = context.candidate_subset if busy else context.get_empty_subset()
        return dg.AutomationResult(context, true_subset=subset)


def cli_run_in_flight(instance: dg.DagsterInstance, now: float | None = None) -> bool:
    """Whether the newest run made by a ``memory-pipeline run`` call has stages to follow."""
    now = time.time() if now is None else now
    for record in instance.get_run_records(limit=20):
        run = record.dagster_run
        if INVOCATION_TAG not in run.tags:
            continue
        if not run.is_finished:
            return True
        final = run.tags.get(FINAL_STAGE_TAG)
        if run.status != dg.DagsterRunStatus.SUCCESS or not final:
            return False  # a failed stage ends the call; an older call has no such tag
        ended = record.end_time or record.update_timestamp.timestamp()
        return run.tags.get(STAGE_TAG) != final and now - ended < STAGE_GAP_SECONDS
    return False


def _latest_materialization(
    instance: dg.DagsterInstance, key: dg.AssetKey
) -> tuple[int, str | None]:
    """(storage id, run id) of the newest materialization of ``key`` (any partition)."""
    records = instance.fetch_materializations(key, limit=1).records
    return (records[0].storage_id, records[0].run_id) if records else (-1, None)


def follows_upstream() -> dg.AutomationCondition:
    """Requested once after any upstream partition changed, when nothing it needs runs."""
    return (
        (
            UpstreamNewerThanRequest()
            # the evaluation reads the indexes: it joins their refresh in the same run
            | dg.AutomationCondition.any_deps_match(dg.AutomationCondition.will_be_requested())
        )
        & ~dg.AutomationCondition.any_deps_in_progress()
        & ~dg.AutomationCondition.in_progress()
        & ~CliRunInFlight()
    ).with_label("follows_upstream")


# asset -> its condition: every unpartitioned asset computed from stored partitions
AUTOMATED: dict[dg.AssetKey, dg.AutomationCondition] = {
    key: follows_upstream()
    for key in (BM25, VECTORS, TIME_META, MEMORY_INDEX, STORAGE_REPORT, WAREHOUSE, EVALUATION)
}


# expected age of what the automation keeps fresh: one nightly run (03:00) plus slack warns,
# two missed nights fail
FRESHNESS = dg.FreshnessPolicy.time_window(
    fail_window=dt.timedelta(hours=50), warn_window=dt.timedelta(hours=26)
)


def with_automation(assets: Iterable[dg.AssetsDefinition]) -> list[dg.AssetsDefinition]:
    """``assets`` with the conditions of :data:`AUTOMATED` and the :data:`FRESHNESS` policy
    attached to their specs.

    A key that no asset carries is an error: a renamed asset must not silently lose its
    freshness.
    """
    out, seen = [], set()
    for a in assets:
        if any(k in AUTOMATED for k in a.keys):
            seen |= set(a.keys) & set(AUTOMATED)
            a = a.map_asset_specs(
                lambda s: (
                    s.replace_attributes(
                        automation_condition=AUTOMATED[s.key], freshness_policy=FRESHNESS
                    )
                    if s.key in AUTOMATED
                    else s
                )
            )
        out.append(a)
    missing = set(AUTOMATED) - seen
    if missing:
        raise ValueError(
            f"automation for unknown assets: {sorted(k.to_user_string() for k in missing)}"
        )
    return out


def automation_sensor(
    status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.RUNNING,
) -> dg.AutomationConditionSensorDefinition:
    """The sensor that evaluates every asset's condition, created with ``status``
    (``defs/jobs.py``: running for a live configuration, stopped for a historical one)."""
    return dg.AutomationConditionSensorDefinition(
        AUTOMATION_SENSOR,
        target=dg.AssetSelection.all(),
        default_status=status,
        minimum_interval_seconds=AUTOMATION_INTERVAL,
        use_user_code_server=True,  # the condition is custom Python
        description="Rebuilds the search indexes, timeline, storage report, warehouse and "
        "evaluation once after the partitions they read change (nightly run, backfill, "
        "source sensor).",
    )
