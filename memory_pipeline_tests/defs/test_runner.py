"""defs/runner.py: the stage table matches the asset graph, ranges are requested the one way."""

from __future__ import annotations

import datetime as dt

import dagster as dg
import pytest

from memory_pipeline.config import load_config
from memory_pipeline.defs.build import build_assets
from memory_pipeline.defs.jobs import RANGE_END, RANGE_START
from memory_pipeline.defs.runner import (
    STAGE_NAMES,
    STAGES,
    range_request,
    stage_for,
    stages,
)
from memory_pipeline_tests.paths import ROOT

DAYS = [dt.date(2024, 3, 1) + dt.timedelta(days=i) for i in range(14)]


def _assets_by_key() -> dict[dg.AssetKey, dg.AssetsDefinition]:
    cfg = load_config(ROOT / "memory_pipeline.toml", env={})
    return {key: a for a in build_assets(cfg) for key in a.keys}


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
