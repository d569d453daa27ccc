"""Retention's clock: the cutoff and `memory-pipeline run`'s partition range use one clock
(UTC), also around midnight on a machine whose local zone is far from UTC (issue 13)."""

from __future__ import annotations

import datetime as dt
import time

import pytest

from memory_pipeline import cli
from memory_pipeline.core.common import timeutil
from memory_pipeline.core.privacy import retention
from memory_pipeline_tests.paths import ROOT


@pytest.fixture
def tokyo_local_zone(monkeypatch):
    """The process's local zone set to UTC+9, so local and UTC dates differ 9 hours a day."""
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def _at(monkeypatch, instant: dt.datetime) -> None:
    monkeypatch.setattr(timeutil, "utc_now", lambda: instant)


@pytest.mark.usefixtures("tokyo_local_zone")
@pytest.mark.parametrize(
    ("instant", "today"),
    [
        # 23:59:59 UTC is already 08:59 the next day in Tokyo: the UTC date counts
        (dt.datetime(2024, 3, 1, 23, 59, 59, tzinfo=dt.UTC), dt.date(2024, 3, 1)),
        (dt.datetime(2024, 3, 2, 0, 0, 0, tzinfo=dt.UTC), dt.date(2024, 3, 2)),
    ],
)
def test_the_cutoff_uses_the_utc_date_at_a_day_boundary(monkeypatch, instant, today):
    _at(monkeypatch, instant)
    assert retention.today() == today
    assert retention.retention_cutoff(7) == today - dt.timedelta(days=7)
    assert retention.retention_cutoff(None) is None


class _Planned(Exception):
    """Stops `run` once it has planned (nothing is built)."""


@pytest.mark.usefixtures("tokyo_local_zone")
def test_run_plans_its_range_and_the_cutoff_on_one_clock(monkeypatch, tmp_path):
    """At 23:59:59 UTC (next morning in Tokyo) the purge, the cutoff and the partition
    range all see the same UTC date, also when midnight passes between the planning and the
    purge (the retention asset's run purges on the day `run` planned with)."""
    from memory_pipeline.defs import retention as retention_asset
    from memory_pipeline.defs import runner

    instant = dt.datetime(2024, 3, 20, 23, 59, 59, tzinfo=dt.UTC)
    _at(monkeypatch, instant)
    seen: dict[str, object] = {}

    def purge(output_dir, retain_days, *, on=None, **_):
        seen["purge_on"] = on
        seen["cutoff"] = retention.retention_cutoff(retain_days, on)
        return None

    real_plan = cli.plan_range

    def plan(cfg, found, today):
        seen["range_today"] = today
        seen["found"] = found
        _at(monkeypatch, instant + dt.timedelta(seconds=2))  # midnight passes
        return real_plan(cfg, found, today)

    real_materialize = runner.materialize_stages

    def retention_only(defs, selection, **kw):
        """The run's first stage only (the purge), then stop: nothing is built."""
        kw.update(backfill=False, on_start=None, on_done=None)
        [run] = real_materialize(defs, [s for s in selection if s.name == "retention"], **kw)
        seen["purged_by"] = run.result.dagster_run.job_name
        raise _Planned

    monkeypatch.setattr(retention_asset, "purge_expired", purge)
    monkeypatch.setattr(cli, "plan_range", plan)
    monkeypatch.setattr(runner, "materialize_stages", retention_only)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    monkeypatch.setenv("MEMORY_PIPELINE_RETAIN_DAYS", "10")
    config = tmp_path / "memory_pipeline.toml"
    text = (ROOT / "memory_pipeline.toml").read_text(encoding="utf-8")
    text = text.replace('output_dir = "data/output"', f'output_dir = "{tmp_path / "out"}"')
    text = text.replace('path = "data/sample/', f'path = "{ROOT}/data/sample/')
    text = text.replace('questions = "data/sample/', f'questions = "{ROOT}/data/sample/')
    config.write_text(text, encoding="utf-8")
    with pytest.raises(_Planned):
        cli.main(["--config", str(config), "run", "--quiet"])
    utc_day = dt.date(2024, 3, 20)
    assert dt.datetime.fromtimestamp(instant.timestamp()).date() == dt.date(2024, 3, 21)
    assert seen["purged_by"] == "stage_retention"
    assert retention.today() == utc_day + dt.timedelta(days=1)  # the clock moved on
    assert seen["purge_on"] == seen["range_today"] == utc_day
    assert seen["cutoff"] == utc_day - dt.timedelta(days=10)
    # the dates handed to the planner are the ones on or after that same cutoff
    assert seen["found"] and min(seen["found"]) >= seen["cutoff"]


def test_the_purge_day_is_the_planned_one_except_on_a_re_execution():
    """A UI re-execution inherits its parent's tags; it purges on the day it runs."""
    from dagster._core.storage.dagster_run import DagsterRun

    from memory_pipeline.defs.retention import TODAY_TAG, planned_day

    planned = DagsterRun(job_name="stage_retention", tags={TODAY_TAG: "2024-03-20"})
    assert planned_day(planned) == dt.date(2024, 3, 20)
    again = DagsterRun(
        job_name="stage_retention",
        tags=planned.tags,
        parent_run_id=planned.run_id,
        root_run_id=planned.run_id,
    )
    assert planned_day(again) is None
    assert planned_day(DagsterRun(job_name="memory_pipeline_daily")) is None
