"""The CLI end to end on the bundled sample, the code location, and the SQL catalog."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import dagster as dg
import pytest

from memory_pipeline import cli
from memory_pipeline.config import load_config
from memory_pipeline.core.common import catalog
from memory_pipeline.core.common.storage import TableStore
from memory_pipeline.defs.build import build_definitions
from memory_pipeline_tests.paths import ROOT


@pytest.fixture
def sample_config(tmp_path: Path, monkeypatch) -> Path:
    """The repository config, copied next to a copy of the sample, output in tmp."""
    shutil.copytree(ROOT / "data" / "sample", tmp_path / "data" / "sample")
    shutil.copy(ROOT / "memory_pipeline.toml", tmp_path / "memory_pipeline.toml")
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.delenv("MEMORY_PIPELINE_CONFIG", raising=False)
    return tmp_path / "memory_pipeline.toml"


def _table_rows(text: str) -> dict[str, str]:
    """{table: rows} of the first ``table rows path`` block of a run summary in ``text``."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.split() == ["table", "rows", "path"])
    rows = {}
    for line in lines[start + 1 :]:
        parts = line.split()
        if len(parts) != 3:
            break
        rows[parts[0]] = parts[1]
    return rows


def test_run_then_status_then_sql(sample_config: Path, capsys):
    assert cli.main(["--config", str(sample_config), "run", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "partitions: 2024-03-01 .. 2024-03-14" in out
    for table in ("raw_messages", "quarantine", "sessions", "chunks", "warehouse.duckdb"):
        assert table in out
    assert "dg dev" in out
    # the README quotes this summary: its row counts are the ones a run prints
    assert _table_rows(out) == _table_rows((ROOT / "README.md").read_text(encoding="utf-8"))
    with dg.DagsterInstance.get() as instance:  # DAGSTER_HOME: the config's folder
        # retention off: still run (a recorded no-op), so the UI does not say "never"
        [purge] = instance.fetch_materializations(dg.AssetKey("retention"), limit=5).records
        assert purge.asset_materialization.metadata["cutoff"].value == "off"
        assert instance.get_run_by_id(purge.run_id).job_name == "stage_retention"

    assert cli.main(["--config", str(sample_config), "status"]) == 0
    status = capsys.readouterr().out
    assert "FAIL" not in status and status.count("PASS") == 5

    cfg = load_config(sample_config, env={})
    store = TableStore(cfg.output_dir)
    con = catalog.connect(cfg.warehouse_path)  # views resolve against its folder
    try:
        for table in ("raw_messages", "sessions", "chunks", "quarantine", "ingest_audit"):
            n = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            assert n == store.read(table).num_rows
        for example in sorted((ROOT / "sql" / "examples").glob("*.sql")):
            con.execute(example.read_text(encoding="utf-8")).fetchall()
    finally:
        con.close()
    # a second run rewrites the same partitions and leaves the same data
    before = store.read("chunks").sort_by("chunk_id")
    assert cli.main(["--config", str(sample_config), "run", "--quiet"]) == 0
    assert store.read("chunks").sort_by("chunk_id").equals(before)


def test_run_purges_through_the_retention_asset(sample_config: Path, monkeypatch, capsys):
    """`run` materializes the retention asset as the first run of its backfill, so the UI
    shows when the purge ran and what it removed (it said "Never materialized" while `run`
    purged behind Dagster's back)."""
    from memory_pipeline.core.privacy import retention
    from memory_pipeline.defs.retention import META_CUTOFF, META_PURGED, RETENTION
    from memory_pipeline.defs.runner import materialize_stages, stages

    # two days already ingested (ingest alone: cheaper than a first `run`)
    monkeypatch.setenv("DAGSTER_HOME", str(sample_config.parent))
    days = [dt.date(2024, 3, 13), dt.date(2024, 3, 14)]
    with dg.DagsterInstance.get() as instance:
        [pre] = materialize_stages(
            build_definitions(load_config(sample_config, env={})),
            stages("ingest"),
            days=days,
            instance=instance,
            log_level="ERROR",
        )
        assert pre.success
    store = TableStore(sample_config.parent / "data" / "output")
    assert store.dates("raw_messages") == days
    monkeypatch.setenv("MEMORY_PIPELINE_RETAIN_DAYS", "10")
    monkeypatch.setattr(retention, "today", lambda: dt.date(2024, 3, 24))  # keeps 03-14 on
    argv = ["--config", str(sample_config), "run", "--quiet", "--start", "2024-03-13"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "retention: purged 1 partitions before 2024-03-14" in out
    assert "partitions: 2024-03-14 .. 2024-03-14" in out
    assert store.dates("raw_messages") == [dt.date(2024, 3, 14)]
    with dg.DagsterInstance.get() as instance:
        [record] = instance.fetch_materializations(RETENTION, limit=10).records
        meta = record.asset_materialization.metadata
        assert (meta[META_CUTOFF].value, meta[META_PURGED].value) == ("2024-03-14", 1)
        run = instance.get_run_by_id(record.run_id)
        assert run.job_name == "stage_retention"
        # one backfill per `run`: the purge is its first run, then ingest and the rest
        backfill = run.tags["dagster/backfill"]
        runs = instance.get_runs(dg.RunsFilter(tags={"dagster/backfill": backfill}))
        assert {"stage_retention", "stage_ingest", "stage_warehouse"} <= {r.job_name for r in runs}
        raw = instance.fetch_materializations(dg.AssetKey("raw_messages"), limit=1).records[0]
        assert raw.storage_id > record.storage_id  # ingest ran after the purge


def test_invalid_config_is_a_clear_error(tmp_path: Path, capsys):
    bad = tmp_path / "memory_pipeline.toml"
    bad.write_text('[pipeline]\nowner = "x"\ntimezone = "Nowhere/Land"\n', encoding="utf-8")
    assert cli.main(["--config", str(bad), "status"]) == 2
    err = capsys.readouterr().err
    assert "invalid configuration" in err and "Nowhere/Land" in err and "Traceback" not in err


def test_unreadable_input_names_the_file(sample_config: Path, capsys):
    # A configured source that is one unusable file: the run stops, naming it in one line.
    # (Issue 13 changed the case below: beside good exports, the same file is quarantined.)
    broken = sample_config.parent / "data" / "sample" / "line_txt" / "not_an_export.txt"
    broken.write_text("this is not a LINE export\njust text\n", encoding="utf-8")
    body = sample_config.read_text(encoding="utf-8")
    sample_config.write_text(
        body.replace(
            'path = "data/sample/line_txt"', 'path = "data/sample/line_txt/not_an_export.txt"'
        ),
        encoding="utf-8",
    )
    assert cli.main(["--config", str(sample_config), "run", "--quiet"]) != 0
    captured = capsys.readouterr()
    assert "not_an_export.txt" in captured.err and "Traceback" not in captured.err


def test_garbage_export_beside_good_ones_is_quarantined_by_name(sample_config: Path):
    # issue 13: one garbage .txt used to fail the whole line_txt folder
    broken = sample_config.parent / "data" / "sample" / "line_txt" / "not_an_export.txt"
    broken.write_text("this is not a LINE export\njust text\n", encoding="utf-8")
    assert cli.main(["--config", str(sample_config), "run", "--quiet"]) == 0
    store = TableStore(sample_config.parent / "data" / "output")
    q = store.read("quarantine").to_pylist()
    assert [(r["source_file"], r["reason"]) for r in q if r["source"] == "sample_line_txt"] == [
        ("not_an_export.txt", "not_an_export")
    ]
    files = set(store.read("raw_messages").column("source_file").to_pylist())
    assert {"family_group.txt", "sam.txt"} <= files


def test_code_location_loads_with_assets_checks_jobs_schedule():
    cfg = load_config(ROOT / "memory_pipeline.toml", env={})
    defs = build_definitions(cfg)
    repo = defs.get_repository_def()
    keys = {k.to_user_string() for k in repo.asset_graph.get_all_asset_keys()}
    assert {"raw_messages", "quarantine", "ingest_audit", "sessions", "chunks"} <= keys
    assert "warehouse" in keys
    checks = {k.name for k in repo.asset_graph.asset_check_keys}
    assert {"conservation", "message_ids_unique", "chunk_windows_cover_sessions"} <= checks
    assert {j.name for j in repo.get_all_jobs()} >= {"memory_pipeline_daily", "refresh_warehouse"}
    schedule = repo.get_schedule_def("nightly")
    when = dt.datetime(2024, 3, 10, 3, 0, tzinfo=dt.UTC)
    ctx = dg.build_schedule_context(scheduled_execution_time=when)
    request = schedule.evaluate_tick(ctx).run_requests[0]
    assert request.tags["dagster/asset_partition_range_start"] == "2024-03-08"
    assert request.tags["dagster/asset_partition_range_end"] == "2024-03-09"


def test_module_definitions_import(monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("MEMORY_PIPELINE_CONFIG", raising=False)
    import importlib

    module = importlib.import_module("memory_pipeline.definitions")
    assert isinstance(module.defs, dg.Definitions)
