"""The source sensor of a multi-owner deployment watches every owner's sources, nested
``[[owners.sources]]`` included, and the retention rebuild sees every owner's days."""

from __future__ import annotations

import datetime as dt

from memory_pipeline.config import load_config
from memory_pipeline.core.ingest.watch import WatchState, scan
from memory_pipeline.defs.resources import PipelineResource
from memory_pipeline.defs.sensors import stored_days, watched_sources
from memory_pipeline_tests.defs.test_owners_pipeline import CONFIG, DAYS, _write_owner
from memory_pipeline_tests.pipeline_helpers import INGEST_KEYS, Runner, write_config

BOB_ONLY = DAYS[-1] + dt.timedelta(days=2)  # a day only bob (a nested source) talked on


def test_every_owners_sources_are_watched_and_their_days_seen(tmp_path):
    _write_owner(tmp_path, "alice", DAYS[:1])
    _write_owner(tmp_path, "bob", [*DAYS[:1], BOB_ONLY])
    _write_owner(tmp_path, "carol", DAYS[:1])
    config = write_config(tmp_path, CONFIG)
    cfg = load_config(config)
    names = [s.name for s in watched_sources(cfg)]
    assert sorted(names) == ["alice_chats", "bob_chats", "carol_chats"]
    changes = scan(watched_sources(cfg), cfg.start_date, WatchState.from_json(None))
    assert BOB_ONLY in changes.dates and DAYS[0] in changes.dates

    runner = Runner(config, tmp_path / "out")
    runner.run(INGEST_KEYS, [DAYS[0], BOB_ONLY])
    resource = PipelineResource(config_file=str(config), output_dir=str(tmp_path / "out"))
    assert stored_days(resource) == [DAYS[0], BOB_ONLY]  # bob's day counts for the rebuild
    # the single-owner store of a multi-owner deployment holds nothing (what it read before)
    assert resource.store.dates("raw_messages") == []
