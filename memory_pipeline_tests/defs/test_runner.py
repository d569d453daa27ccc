"""defs/runner.py: the stage table matches the asset graph, ranges are requested the one way,
and the evaluation asset scores its own index without building another corpus inside its run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import shutil
from pathlib import Path

import dagster as dg
import pyarrow.parquet as pq
import pytest

from memory_pipeline import cli
from memory_pipeline.config import load_config
from memory_pipeline.core.evaluation.evalsets import generate_time_queries
from memory_pipeline.defs.build import scheduled_assets
from memory_pipeline.defs.jobs import RANGE_END, RANGE_START
from memory_pipeline.defs.runner import (
    STAGE_NAMES,
    STAGES,
    range_request,
    stage_for,
    stages,
)
from memory_pipeline_tests.paths import FIXTURES, ROOT, SAMPLE
from memory_pipeline_tests.pipeline_helpers import Runner, build_all, write_config

DAYS = [dt.date(2024, 3, 1) + dt.timedelta(days=i) for i in range(14)]
LOCOMO = FIXTURES / "locomo" / "locomo_mini.json"


def _assets_by_key() -> dict[dg.AssetKey, dg.AssetsDefinition]:
    """The code location's assets (with the retention purge that ingest depends on)."""
    cfg = load_config(ROOT / "memory_pipeline.toml", env={})
    return {key: a for a in scheduled_assets(cfg) for key in a.keys}


def test_every_asset_is_in_exactly_one_stage_in_dependency_order():
    assets = _assets_by_key()
    listed = [k for s in STAGES for k in s.keys]
    assert sorted(listed) == sorted(assets)  # all of them, none twice
    position = {k: i for i, s in enumerate(STAGES) for k in s.keys}
    for key, a in assets.items():
        for dep in a.asset_deps[key]:
            # a stage reads only what it or an earlier stage writes
            assert position[dep] <= position[key], (key, dep)


def test_partitioned_flag_follows_the_assets():
    assets = _assets_by_key()
    for stage in STAGES:
        flags = {assets[k].partitions_def is not None for k in stage.keys}
        assert flags == {stage.partitioned}, stage.name


def test_stage_lookup_and_ad_hoc_stages():
    assert [s.name for s in stages()] == list(STAGE_NAMES)
    assert [s.name for s in stages("indexes", "ingest")] == ["indexes", "ingest"]
    with pytest.raises(ValueError, match="unknown stages"):
        stages("nope")
    # the same keys as a table stage are that stage
    assert stage_for(["raw_messages", "quarantine", "ingest_audit"]) == stages("ingest")[0]
    one = stage_for(["dossiers"])
    assert one.partitioned and one.key_names == ["dossiers"]
    assert not stage_for(["storage_report"]).partitioned
    with pytest.raises(ValueError, match="mixes"):
        stage_for(["chunks", "bm25_index"])
    with pytest.raises(ValueError, match="in no stage"):
        stage_for(["not_an_asset"])


def test_range_request_one_day_is_a_partition_more_is_a_single_run_backfill():
    assert range_request(DAYS[:1]) == {"partition_key": "2024-03-01"}
    assert range_request(DAYS) == {"tags": {RANGE_START: "2024-03-01", RANGE_END: "2024-03-14"}}


def _with_locomo(body: str) -> str:
    """The shipped config with ``[evaluation] locomo`` set to the test fixture."""
    assert "\n[evaluation]\n" in body
    return body.replace("\n[evaluation]\n", f'\n[evaluation]\nlocomo = "{LOCOMO.as_posix()}"\n')


def test_eval_takes_the_configured_locomo_file_unless_given(tmp_path: Path):
    body = (ROOT / "memory_pipeline.toml").read_text(encoding="utf-8")
    config = write_config(tmp_path, _with_locomo(body))
    shutil.copytree(SAMPLE, tmp_path / "data" / "sample")
    args = argparse.Namespace(config=str(config), locomo=None)
    assert cli._locomo_file(args) == LOCOMO.resolve()
    other = tmp_path / "other.json"
    args = argparse.Namespace(config=str(config), locomo=str(other))
    assert cli._locomo_file(args) == other.resolve()


@pytest.fixture(scope="module")
def built_with_locomo(tmp_path_factory) -> Runner:
    """The sample built up to the indexes, with ``[evaluation] locomo`` configured."""
    root = tmp_path_factory.mktemp("eval_locomo")
    shutil.copytree(SAMPLE, root / "data" / "sample")
    body = (ROOT / "memory_pipeline.toml").read_text(encoding="utf-8")
    # templated time queries only: the sample's labelled questions are scored in their own test
    body = "\n".join(line for line in body.splitlines() if not line.startswith("questions ="))
    config = write_config(root, _with_locomo(body))
    runner = Runner(config, root / "out")
    build_all(runner, DAYS)
    return runner


def test_evaluation_asset_scores_its_own_index_without_a_nested_build(
    built_with_locomo: Runner
):
    runner = built_with_locomo
    assert runner.cfg.eval_locomo == LOCOMO.resolve()
    instance = dg.DagsterInstance.ephemeral()
    result = runner.run(["evaluation"], [], instance=instance)

    # one run, ours: no pipeline build for the LoCoMo configuration inside it
    assert len(instance.get_runs()) == 1
    out = runner.cfg.output_dir / "eval"
    assert not (out / "locomo").exists()
    [mat] = result.asset_materializations_for_node("evaluation")
    assert not [k for k in mat.metadata if k.startswith("locomo")]
    # the scores are of this corpus: its own templated time queries, nothing else
    expected = generate_time_queries(runner.store.read("sessions"))
    assert mat.metadata["time_queries"].value == len(expected) > 0
    assert mat.metadata["questions"].value == 0
    summary = pq.read_table(out / "tables" / "summary.parquet").to_pylist()
    assert {r["config"] for r in summary} == {"time_filters"}
    [overall] = [r for r in summary if r["qtype"] == "all"]
    assert overall["n"] == len(expected)
    # the configured key is not silently ignored: the run says where LoCoMo is scored
    warnings = [
        e.user_message for e in instance.all_logs(result.run_id) if e.level == logging.WARNING
    ]
    assert any("memory-pipeline eval" in w for w in warnings)
