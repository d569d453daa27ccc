"""The Postgres-backed Dagster instance (deploy/postgres/dagster.yaml) against the real server.

Skipped when no PostgreSQL answers on 127.0.0.1:5432; required under CI=true.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
import uuid

import dagster as dg
import pytest

from memory_pipeline_tests._env import require_or_skip
from memory_pipeline_tests.paths import ROOT
from memory_pipeline_tests.pipeline_helpers import INGEST_KEYS, Runner

HOST = os.environ.get("DAGSTER_PG_HOST", "127.0.0.1")
PORT = int(os.environ.get("DAGSTER_PG_PORT", "5432"))
USER = os.environ.get("DAGSTER_PG_USER", "postgres")


def _reachable() -> bool:
    try:
        with socket.create_connection((HOST, PORT), timeout=2):
            return True
    except OSError:
        return False


@pytest.fixture
def pg_database():
    require_or_skip(_reachable(), f"PostgreSQL not reachable at {HOST}:{PORT}")
    import psycopg2

    name = f"mp_test_{uuid.uuid4().hex[:10]}"
    admin = psycopg2.connect(host=HOST, port=PORT, user=USER, dbname="postgres")
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{name}"')
    try:
        yield name
    finally:
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def _point_instance_at(monkeypatch: pytest.MonkeyPatch, database: str) -> None:
    """The environment deploy/postgres/dagster.yaml reads, pointed at ``database``."""
    for key, value in {
        "DAGSTER_PG_HOST": HOST,
        "DAGSTER_PG_PORT": str(PORT),
        "DAGSTER_PG_USER": USER,
        "DAGSTER_PG_PASSWORD": os.environ.get("DAGSTER_PG_PASSWORD", "unused-with-trust-auth"),
        "DAGSTER_PG_DB": database,
    }.items():
        monkeypatch.setenv(key, value)


@pytest.mark.postgres
def test_materialize_sample_on_postgres_instance(pg_database, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the yaml's relative artifact folders land in tmp
    _point_instance_at(monkeypatch, pg_database)
    instance = dg.DagsterInstance.from_config(str(ROOT / "deploy" / "postgres"))
    try:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        runner = Runner(ROOT / "memory_pipeline.toml", tmp_path / "out")
        days = [dt.date(2024, 3, 1) + dt.timedelta(days=i) for i in range(14)]
        runner.run(INGEST_KEYS, days, instance=instance)
        runner.run(["sessions"], days, instance=instance)
        runner.run(["chunks"], days, instance=instance)

        runs = instance.get_runs()
        assert len(runs) == 3 and all(r.is_success for r in runs)
        materialized = instance.get_materialized_partitions(dg.AssetKey("chunks"))
        assert materialized == {d.isoformat() for d in days}
        check = instance.event_log_storage.get_latest_asset_check_execution_by_key(
            [dg.AssetCheckKey(dg.AssetKey("ingest_audit"), "conservation")]
        )
        record = next(iter(check.values()))
        assert record.status.value == "SUCCEEDED"
    finally:
        instance.dispose()

    import psycopg2

    with psycopg2.connect(host=HOST, port=PORT, user=USER, dbname=pg_database) as con:
        with con.cursor() as cur:
            cur.execute("SELECT count(*) FROM runs")
            assert cur.fetchone()[0] == 3
            cur.execute(
                "SELECT count(*) FROM event_logs WHERE dagster_event_type = 'ASSET_MATERIALIZATION'"
            )
            assert cur.fetchone()[0] == 5 * 14  # 5 partitioned tables x 14 days


def test_event_batching_default_yields_to_the_environment(monkeypatch):
    """The runner's default applies only while it runs and never over an operator's value."""
    from memory_pipeline.defs.runner import EVENT_BATCH_ENV, EVENT_BATCH_SIZE, event_batching

    monkeypatch.delenv(EVENT_BATCH_ENV, raising=False)
    with event_batching() as size:
        assert os.environ[EVENT_BATCH_ENV] == size == str(EVENT_BATCH_SIZE)
    assert EVENT_BATCH_ENV not in os.environ
    monkeypatch.setenv(EVENT_BATCH_ENV, "0")
    with event_batching() as size:
        assert size == "0"
    assert os.environ[EVENT_BATCH_ENV] == "0"


@pytest.mark.postgres
def test_batched_events_all_stored_on_postgres(pg_database, tmp_path, monkeypatch):
    """With the runner's default batching, the Postgres event log gets its materializations
    in batches, and every per-partition materialization and check result is still stored."""
    from dagster_postgres.event_log.event_log import PostgresEventLogStorage

    from memory_pipeline.defs.runner import EVENT_BATCH_ENV

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(EVENT_BATCH_ENV, raising=False)
    _point_instance_at(monkeypatch, pg_database)
    batches: list[tuple[str | None, int]] = []
    original = PostgresEventLogStorage.store_event_batch

    def spy(self, events):
        batches.append((os.environ.get(EVENT_BATCH_ENV), len(events)))
        return original(self, events)

    monkeypatch.setattr(PostgresEventLogStorage, "store_event_batch", spy)
    instance = dg.DagsterInstance.from_config(str(ROOT / "deploy" / "postgres"))
    try:
        runner = Runner(ROOT / "memory_pipeline.toml", tmp_path / "out")
        days = [dt.date(2024, 3, 1) + dt.timedelta(days=i) for i in range(14)]
        result = runner.run(INGEST_KEYS, days, instance=instance)
        assert EVENT_BATCH_ENV not in os.environ  # the default is scoped to the run
        # one batch per partitioned output at least, each of the 14 partitions' events
        assert batches and all(env == "100" for env, _ in batches)
        assert sum(n for _, n in batches) >= len(INGEST_KEYS) * len(days)
        run_id = result.run_id
        stored = instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)
        emitted = result.get_asset_materialization_events()
        assert len(stored) == len(emitted) == len(INGEST_KEYS) * len(days)
        checks = instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)
        assert len(checks) == len(list(result.get_asset_check_evaluations())) > 0
        for key in INGEST_KEYS:
            asset = dg.AssetKey(key)
            assert instance.get_materialized_partitions(asset) == {d.isoformat() for d in days}
            latest = instance.get_latest_materialization_event(asset)
            assert latest is not None and latest.run_id == run_id
    finally:
        instance.dispose()
