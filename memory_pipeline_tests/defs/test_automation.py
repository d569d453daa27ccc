"""Freshness by declaration, the source sensor and the scheduled retention purge, end to end.

The shipped definitions (``build_definitions``) on a tiny LINE export in a tmp folder: the
nightly schedule's run request is executed, then Dagster's own automation evaluation
(``dg.evaluate_automation_conditions``) says what it would launch, the test launches exactly
that, and ``memory_pipeline.search`` must find (or not yet find) a word one day holds.
"""

from __future__ import annotations

import datetime as dt
import json
import warnings
from pathlib import Path

import dagster as dg
import pytest

import memory_pipeline
from memory_pipeline.config import load_config
from memory_pipeline.core.common import tables as T
from memory_pipeline.core.privacy import retention
from memory_pipeline.defs.automation import AUTOMATED, AUTOMATION_SENSOR
from memory_pipeline.defs.build import build_definitions
from memory_pipeline.defs.jobs import INGEST_JOB, MEMORIES_JOB, RANGE_END, RANGE_START
from memory_pipeline.defs.resources import PipelineResource
from memory_pipeline.defs.sensors import RETENTION_SENSOR, SOURCE_SENSOR
from memory_pipeline_tests.pipeline_helpers import QUIET, write_config

TZ = "Asia/Tokyo"
D1, D2, D3 = dt.date(2024, 3, 8), dt.date(2024, 3, 9), dt.date(2024, 3, 10)
ONLY_D2 = "zebracorn"  # a word only day D2 holds
ONLY_D3 = "quokkaberry"  # a word only the export dropped in later (day D3) holds
REFRESHED = set(AUTOMATED)  # indexes, timeline, storage report, warehouse, evaluation


def export(contact: str, days: dict[dt.date, list[str]]) -> str:
    """A LINE txt export: a header, then per day a date line and alternating messages."""
    lines = [f"[LINE] Chat history with {contact}", "Saved on: 3/15/2024, 22:10", ""]
    for day, texts in days.items():
        lines.append(f"{day:%a}, {day.month}/{day.day}/{day.year}")
        for i, text in enumerate(texts):
            sender = contact if i % 2 == 0 else "Yuki"
            lines.append(f"10:{i:02d}\t{sender}\t{text}")
        lines.append("")
    return "\n".join(lines)


def corpus(root: Path, retain_days: int | None = None) -> Path:
    (root / "exports").mkdir(parents=True)
    (root / "exports" / "kim.txt").write_text(
        export(
            "Kim",
            {
                D1: ["morning coffee at the station", "the train was late again", "lunch?"],
                D2: [f"I saw a {ONLY_D2} at the zoo", "no way, a real one?", "photos later"],
            },
        ),
        encoding="utf-8",
    )
    privacy = f"\n[privacy]\nretain_days = {retain_days}\n" if retain_days else ""
    return write_config(
        root,
        f"""
[pipeline]
owner = "Yuki"
timezone = "{TZ}"
start_date = "{D1}"
end_date = "2024-03-12"
output_dir = "out"

[[sources]]
name = "chats"
kind = "line_txt"
path = "exports"
{privacy}""",
    )


class Deployment:
    """The shipped definitions over one tmp config and one persistent test instance."""

    def __init__(self, config: Path, instance: dg.DagsterInstance) -> None:
        self.config = config
        self.resource = PipelineResource(config_file=str(config))
        self.cfg = self.resource.cfg
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.defs = build_definitions(self.cfg, str(config))
        self.instance = instance
        self.cursor = None

    def nightly(self, night: dt.date) -> dg.RunRequest:
        """The run the nightly schedule asks for at 03:00 on ``night``, executed."""
        schedule = self.defs.resolve_schedule_def("nightly")
        when = dt.datetime(night.year, night.month, night.day, 3, tzinfo=dt.UTC)
        ctx = dg.build_schedule_context(instance=self.instance, scheduled_execution_time=when)
        [request] = list(schedule.evaluate_tick(ctx).run_requests)
        self.run_job(INGEST_JOB, tags=request.tags)
        return request

    def run_job(self, name: str, **kwargs) -> dg.ExecuteInProcessResult:
        result = self.defs.resolve_job_def(name).execute_in_process(
            instance=self.instance, run_config=QUIET, **kwargs
        )
        assert result.success
        return result

    def automation(self) -> set[dg.AssetKey]:
        """One automation tick: the asset keys it requests (cursor kept across ticks)."""
        result = dg.evaluate_automation_conditions(
            defs=self.defs, instance=self.instance, cursor=self.cursor
        )
        self.cursor = result.cursor
        return {k for k in REFRESHED | _all_keys(self.defs) if result.get_num_requested(k)}

    def launch(self, keys: set[dg.AssetKey]) -> None:
        """Materialize what the automation requested, as the sensor's run would."""
        assert keys  # an empty selection would run every asset
        job = self.defs.resolve_implicit_global_asset_job_def()
        result = job.execute_in_process(
            instance=self.instance, asset_selection=sorted(keys), run_config=QUIET
        )
        assert result.success

    def finds(self, word: str) -> bool:
        try:
            hits = memory_pipeline.search(word, 5, output_dir=self.cfg.output_dir, mode="bm25")
        except Exception as exc:  # no index published yet
            if type(exc).__name__ != "IndexNotBuilt":
                raise
            return False
        found = hits.to_dict()
        return word in json.dumps([found["chunks"], found["sessions"]], ensure_ascii=False)


def _all_keys(defs: dg.Definitions) -> set[dg.AssetKey]:
    return set(defs.resolve_asset_graph().get_all_asset_keys())


@pytest.fixture
def instance():
    with dg.instance_for_test() as inst:
        yield inst


def test_nightly_day_then_automation_makes_the_day_searchable(tmp_path, instance):
    d = Deployment(corpus(tmp_path), instance)
    assert d.automation() == set()  # nothing materialized: nothing to refresh
    d.nightly(D2)  # 03:00 on D2: builds D1
    assert d.automation() == REFRESHED
    d.launch(REFRESHED)
    assert d.automation() == set()  # the refresh itself is no reason to refresh again
    assert d.finds("coffee") and not d.finds(ONLY_D2)
    d.nightly(D3)  # 03:00 on D3: rebuilds D1 and builds D2
    assert not d.finds(ONLY_D2)  # the indexes are stale until the automation runs them
    requested = d.automation()
    assert requested == REFRESHED
    d.launch(requested)
    assert d.finds(ONLY_D2)
    assert d.automation() == set()


def test_one_tick_after_a_nightly_run_launches_the_whole_refresh_as_one_run(tmp_path, instance):
    """What bench_nightly times as one refresh run: the automation sensor turns one tick's
    requests into runs with Dagster's ``build_run_requests`` (what the sensor itself calls),
    which groups unpartitioned assets into one run."""
    from dagster._core.definitions.automation_tick_evaluation_context import build_run_requests

    d = Deployment(corpus(tmp_path), instance)
    d.nightly(D2)
    result = dg.evaluate_automation_conditions(defs=d.defs, instance=instance)
    requests = build_run_requests(
        result._requested_subsets, d.defs.resolve_asset_graph(), None, emit_backfills=False
    )
    assert len(requests) == 1
    assert set(requests[0].asset_selection) == REFRESHED


@pytest.mark.parametrize(
    ("night", "expected"),
    [
        (dt.date(2024, 3, 12), (str(D3), "2024-03-11")),  # inside: yesterday and the day before
        (dt.date(2024, 3, 13), ("2024-03-11", "2024-03-12")),
        (dt.date(2024, 3, 14), ("2024-03-12", "2024-03-12")),  # end_date 03-12 clamps the range
        (dt.date(2024, 3, 15), None),  # after the last partition: skipped, no failing run
    ],
)
def test_the_nightly_schedule_stays_inside_a_bounded_config(tmp_path, night, expected):
    d = Deployment(corpus(tmp_path), dg.DagsterInstance.ephemeral())
    schedule = d.defs.resolve_schedule_def("nightly")
    when = dt.datetime(night.year, night.month, night.day, 3, tzinfo=dt.UTC)
    ctx = dg.build_schedule_context(instance=d.instance, scheduled_execution_time=when)
    data = schedule.evaluate_tick(ctx)
    if expected is None:
        assert not data.run_requests and "after the last partition" in data.skip_message
        return
    [request] = data.run_requests
    assert (request.tags[RANGE_START], request.tags[RANGE_END]) == expected


def _live(config: Path) -> Path:
    """The same configuration without its end date: a live history."""
    text = config.read_text(encoding="utf-8")
    config.write_text(text.replace('end_date = "2024-03-12"\n', ""), encoding="utf-8")
    assert "end_date" not in config.read_text(encoding="utf-8")
    return config


@pytest.mark.parametrize("live", [True, False])
def test_the_nightly_and_the_sensors_are_on_only_for_a_live_config(tmp_path, live):
    """No end date: the schedule and every sensor that keeps search fresh start RUNNING with
    the daemon; a historical corpus (an end date, like the shipped sample) keeps them off."""
    config = corpus(tmp_path)
    defs = build_definitions(load_config(_live(config) if live else config))
    schedule = defs.resolve_schedule_def("nightly")
    expected = "RUNNING" if live else "STOPPED"
    assert schedule.default_status == dg.DefaultScheduleStatus[expected]
    for name in (AUTOMATION_SENSOR, SOURCE_SENSOR, RETENTION_SENSOR):
        assert defs.resolve_sensor_def(name).default_status == dg.DefaultSensorStatus[expected]


def test_the_automation_sensor_covers_every_refreshed_asset(tmp_path):
    d = Deployment(corpus(tmp_path), dg.DagsterInstance.ephemeral())
    sensor = d.defs.resolve_sensor_def(AUTOMATION_SENSOR)
    assert isinstance(sensor, dg.AutomationConditionSensorDefinition)
    graph = d.defs.resolve_asset_graph()
    conditioned = {k for k in graph.get_all_asset_keys() if graph.get(k).automation_condition}
    assert conditioned == REFRESHED
    # the partitioned assets stay with the schedule, backfills and the source sensor
    assert not any(graph.get(k).partitions_def for k in conditioned)


def test_refreshed_assets_declare_freshness_that_warns_after_a_missed_night(tmp_path, instance):
    import asyncio
    import time

    from dagster._core.definitions.freshness import FreshnessState
    from dagster._core.definitions.freshness_evaluator import (
        FRESHNESS_EVALUATORS_BY_POLICY_TYPE,
    )
    from dagster._core.loader import LoadingContextForTest
    from dagster._core.test_utils import freeze_time

    d = Deployment(corpus(tmp_path), instance)
    graph = d.defs.resolve_asset_graph()
    declared = {k for k in graph.get_all_asset_keys() if graph.get(k).freshness_policy}
    assert declared == REFRESHED
    node = graph.get(dg.AssetKey("bm25_index"))
    evaluator = FRESHNESS_EVALUATORS_BY_POLICY_TYPE[type(node.freshness_policy)]()

    def state(hours_later: float) -> FreshnessState:
        with freeze_time(now + hours_later * 3600):
            context = LoadingContextForTest(instance)
            return asyncio.run(evaluator.evaluate_freshness(context, node))

    now = time.time()
    assert state(0) == FreshnessState.UNKNOWN  # never materialized
    instance.report_runless_asset_event(dg.AssetMaterialization(node.key))
    now = time.time()
    assert [state(h) for h in (1, 25, 27, 49, 51)] == [
        FreshnessState.PASS,
        FreshnessState.PASS,
        FreshnessState.WARN,  # the nightly refresh did not come
        FreshnessState.WARN,
        FreshnessState.FAIL,  # two nights missed
    ]


DAY = dt.timedelta(days=1)


def _days(request: dg.RunRequest) -> tuple[dt.date, dt.date]:
    """The partition range a run request covers."""
    return (
        dt.date.fromisoformat(request.tags[RANGE_START]),
        dt.date.fromisoformat(request.tags[RANGE_END]),
    )


def _sensor(d: Deployment, name: str, cursor: str | None):
    sensor = d.defs.resolve_sensor_def(name)
    # a context manager: the definitions' Dask resource has a per-run lifecycle (a generator)
    with dg.build_sensor_context(
        instance=d.instance,
        cursor=cursor,
        definitions=d.defs,
        resources={"pipeline": d.resource},
    ) as ctx:
        return sensor.evaluate_tick(ctx)


def test_dropped_export_requests_exactly_its_date_and_becomes_searchable(tmp_path, instance):
    d = Deployment(corpus(tmp_path), instance)
    assert d.automation() == set()  # the daemon's first tick, before any data
    first = _sensor(d, SOURCE_SENSOR, None)
    # D1 and D2 changed; with their neighbours (sessions cross midnight) one range D1..D3
    assert [_days(r) for r in first.run_requests] == [(D1, D3)]
    for r in first.run_requests:
        d.run_job(INGEST_JOB, tags=r.tags)
    d.launch(d.automation())
    assert d.finds(ONLY_D2) and not d.finds(ONLY_D3)

    quiet = _sensor(d, SOURCE_SENSOR, first.cursor)
    assert quiet.run_requests == [] and quiet.skip_message
    (tmp_path / "exports" / "kim.txt").touch()  # same bytes, new mtime: still nothing
    assert _sensor(d, SOURCE_SENSOR, quiet.cursor).run_requests == []

    (tmp_path / "exports" / "ren.txt").write_text(
        export("Ren", {D3: [f"the {ONLY_D3} smoothie was great", "where?"]}), encoding="utf-8"
    )
    new = _sensor(d, SOURCE_SENSOR, quiet.cursor)
    assert [_days(r) for r in new.run_requests] == [(D2, D3 + DAY)]
    # idempotent: the same change seen again (a retried tick) asks for the same run key
    again = _sensor(d, SOURCE_SENSOR, quiet.cursor)
    assert [r.run_key for r in again.run_requests] == [r.run_key for r in new.run_requests]
    [request] = new.run_requests
    d.run_job(INGEST_JOB, tags=request.tags)
    requested = d.automation()
    assert requested == REFRESHED
    d.launch(requested)
    assert d.finds(ONLY_D3)
    assert _sensor(d, SOURCE_SENSOR, new.cursor).run_requests == []


def test_a_first_tick_after_a_full_run_requests_nothing_until_an_export_changes(tmp_path, instance):
    # `memory-pipeline run` ingested every date, then `dg dev` starts the sensor with no
    # cursor: it must not launch one run per date for data already ingested
    d = Deployment(corpus(tmp_path), instance)
    d.run_job(INGEST_JOB, tags={RANGE_START: str(D1), RANGE_END: str(D2)})
    first = _sensor(d, SOURCE_SENSOR, None)
    assert first.run_requests == [] and first.cursor
    (tmp_path / "exports" / "ren.txt").write_text(
        export("Ren", {D3: [f"the {ONLY_D3} smoothie was great", "where?"]}), encoding="utf-8"
    )
    # D3 is new: its run covers its neighbours D2..D3+1 (sessions cross midnight)
    [request] = _sensor(d, SOURCE_SENSOR, first.cursor).run_requests
    assert _days(request) == (D2, D3 + DAY)
    # a reset cursor after that change: D3 was never ingested, and D1, D2 were ingested
    # before a file changed, so they are requested again (cheap, and never stale): their
    # windows overlap, so one range run D1..D3+1 (D1 is the first partition)
    [reset] = _sensor(d, SOURCE_SENSOR, None).run_requests
    assert _days(reset) == (D1, D3 + DAY)
    # once that run has ingested them, a fresh first look skips every date again
    d.run_job(INGEST_JOB, tags=reset.tags)
    assert _sensor(d, SOURCE_SENSOR, None).run_requests == []


def test_changed_export_requests_the_changed_date_and_its_neighbours(tmp_path):
    d = Deployment(corpus(tmp_path), dg.DagsterInstance.ephemeral())
    cursor = _sensor(d, SOURCE_SENSOR, None).cursor
    path = tmp_path / "exports" / "kim.txt"
    text = path.read_text(encoding="utf-8").replace("photos later", "photos tonight")
    path.write_text(text, encoding="utf-8")
    [request] = _sensor(d, SOURCE_SENSOR, cursor).run_requests
    assert _days(request) == (D1, D3)  # D2 changed: sessions of D1..D3 read it


def _night_owl(days: dict[dt.date, list[tuple[str, str]]]) -> str:
    lines = ["[LINE] Chat history with Kim", "Saved on: 3/15/2024, 22:10", ""]
    for day, msgs in days.items():
        lines.append(f"{day:%a}, {day.month}/{day.day}/{day.year}")
        lines += [
            f"{clock}\t{'Kim' if i % 2 == 0 else 'Yuki'}\t{t}" for i, (clock, t) in enumerate(msgs)
        ]
        lines.append("")
    return "\n".join(lines)


def test_a_change_on_d_rebuilds_the_sessions_of_d_minus_1_and_d_plus_1(tmp_path, instance):
    """Messages added on D2 just after midnight (continuing D1's last session) and late on
    D2 (so D3's first message continues it): sessions of D1 and D3 change, not only D2's.
    Every message must end up in exactly one stored session."""
    d = Deployment(corpus(tmp_path), instance)
    path = tmp_path / "exports" / "kim.txt"
    before = {
        D1: [("23:40", "are you still up"), ("23:50", "yes, the late movie")],
        D2: [("10:00", "good morning")],
        D3: [("01:00", "cannot sleep either")],
    }
    path.write_text(_night_owl(before), encoding="utf-8")
    for r in _sensor(d, SOURCE_SENSOR, None).run_requests:
        d.run_job(INGEST_JOB, tags=r.tags)
    cursor = _sensor(d, SOURCE_SENSOR, None).cursor
    after = dict(before)
    after[D2] = [
        ("00:05", "the ending was strange"),
        ("10:00", "good morning"),
        ("23:30", "still awake?"),
    ]
    path.write_text(_night_owl(after), encoding="utf-8")
    [request] = _sensor(d, SOURCE_SENSOR, cursor).run_requests
    # D2 changed, and D3 (its record moved down the file); with neighbours D1..D3+1
    assert _days(request) == (D1, D3 + DAY)
    d.run_job(INGEST_JOB, tags=request.tags)
    store = d.resource.store
    messages = set(store.read(T.RAW_MESSAGES)["message_id"].to_pylist())
    sessions = store.read(T.SESSIONS)
    in_sessions = [m for ids in sessions["message_ids"].to_pylist() for m in ids]
    assert len(messages) == 6
    assert sorted(in_sessions) == sorted(messages)  # none lost, none in two sessions
    owned = sorted(
        zip(sessions["local_date"].to_pylist(), sessions["message_count"].to_pylist(), strict=True)
    )
    # D1's session took 00:05; D3's 01:00 continues D2's 23:30 session (D3 owns none)
    assert owned == [(D1, 3), (D2, 1), (D2, 2)]


@pytest.mark.parametrize("loaded", [True, False], ids=["config_cached", "config_reloaded"])
def test_vanished_source_folder_is_one_clear_error_and_keeps_the_cursor(tmp_path, loaded):
    d = Deployment(corpus(tmp_path), dg.DagsterInstance.ephemeral())
    cursor = _sensor(d, SOURCE_SENSOR, None).cursor
    (tmp_path / "exports").rename(tmp_path / "moved")
    if not loaded:  # a new code-server process reads the configuration again
        d.resource = PipelineResource(config_file=str(d.config))
    with pytest.raises(dg.Failure) as err:
        _sensor(d, SOURCE_SENSOR, cursor)
    message = err.value.description
    assert "chats" in message and str(tmp_path / "exports") in message
    assert "\n" not in message and "does not exist" in message
    (tmp_path / "moved").rename(tmp_path / "exports")  # back: nothing is re-requested
    assert _sensor(d, SOURCE_SENSOR, cursor).run_requests == []


def test_nightly_job_purges_expired_partitions_then_the_rebuild_follows(
    tmp_path, instance, monkeypatch
):
    monkeypatch.setattr(retention, "today", lambda: D3)  # nothing expired yet
    d = Deployment(corpus(tmp_path, retain_days=30), instance)
    assert d.automation() == set()
    d.nightly(D3)  # D1 and D2
    d.launch(d.automation())
    store = d.resource.store
    assert store.dates(T.RAW_MESSAGES) == [D1, D2]
    assert d.finds("coffee")
    assert _sensor(d, RETENTION_SENSOR, None).run_requests == []  # purged nothing

    # 30 days after D2: D1 is past retention
    monkeypatch.setattr(retention, "today", lambda: D2 + dt.timedelta(days=30))
    d.nightly(D3)
    assert store.dates(T.RAW_MESSAGES) == [D2]
    assert retention.retention_log(d.cfg.state_root)[-1]["dates"] == [str(D1)]
    assert not d.finds("coffee")  # the purge dropped every index version
    # the purge deleted the dossiers: the sensor asks to rebuild the memories from D2 on
    tick = _sensor(d, RETENTION_SENSOR, None)
    [request] = tick.run_requests
    assert request.job_name in (None, MEMORIES_JOB)
    assert (
        request.tags["dagster/asset_partition_range_start"],
        request.tags["dagster/asset_partition_range_end"],
    ) == (str(D2), str(D2))
    assert _sensor(d, RETENTION_SENSOR, tick.cursor).run_requests == []
    d.run_job(MEMORIES_JOB, tags=request.tags)
    assert store.dates(T.DOSSIERS) == [D2]
    requested = d.automation()
    assert {dg.AssetKey("bm25_index"), dg.AssetKey("warehouse")} <= requested
    d.launch(requested)
    assert d.finds(ONLY_D2) and not d.finds("coffee")


def test_a_cli_run_between_its_stages_holds_the_refresh_back(tmp_path, instance, monkeypatch):
    """`memory-pipeline run` materializes the refreshed assets in its own last stages: while it
    has stages to go, the automation must not start the same refresh beside it."""
    from memory_pipeline.defs import automation
    from memory_pipeline.defs.jobs import FINAL_STAGE_TAG, INVOCATION_TAG, STAGE_TAG

    d = Deployment(corpus(tmp_path), instance)
    schedule = d.defs.resolve_schedule_def("nightly")
    when = dt.datetime(D2.year, D2.month, D2.day, 3, tzinfo=dt.UTC)
    ctx = dg.build_schedule_context(instance=instance, scheduled_execution_time=when)
    [request] = list(schedule.evaluate_tick(ctx).run_requests)
    cli = {INVOCATION_TAG: "call1", STAGE_TAG: "ingest", FINAL_STAGE_TAG: "warehouse"}
    d.run_job(INGEST_JOB, tags={**request.tags, **cli})
    assert d.automation() == set()  # the call's next stage is starting
    monkeypatch.setattr(automation, "STAGE_GAP_SECONDS", 0.0)
    assert d.automation() == REFRESHED  # a call that died between stages holds nothing back
    monkeypatch.undo()
    d.run_job(INGEST_JOB, tags={**request.tags, **cli, STAGE_TAG: "warehouse"})
    assert d.automation() == REFRESHED  # its last stage done: nothing more is coming
