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


@pytest.mark.postgres
def test_materialize_sample_on_postgres_instance(pg_database, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the yaml's relative artifact folders land in tmp
    for key, value in {
        "DAGSTER_PG_HOST": HOST,
        "DAGSTER_PG_PORT": str(PORT),
        "DAGSTER_PG_USER": USER,
        "DAGSTER_PG_PASSWORD": os.environ.get("DAGSTER_PG_PASSWORD", "unused-with-trust-auth"),
        "DAGSTER_PG_DB": pg_database,
    }.items():
        monkeypatch.setenv(key, value)
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
