"""A message dated today on a live deployment (no ``end_date``): the refresh builds today's
partition although the calendar ends yesterday, and search finds the message at once.

In-process ``refresh()`` (the worker's function), no server: the HTTP path around it is
``test_messages.py``'s."""

from __future__ import annotations

import dataclasses
import datetime as dt
from zoneinfo import ZoneInfo

from memory_pipeline.config import load_config
from memory_pipeline.core.ingest.inbox import InboxStore
from memory_pipeline.core.ingest.sources.inbox import parse_entry
from memory_pipeline.defs.partitions import daily_partitions
from memory_pipeline.service.operations import MemoryService
from memory_pipeline.service.refresh import refresh
from memory_pipeline_tests.defs.test_owners_pipeline import _day_file
from memory_pipeline_tests.pipeline_helpers import write_config

TZ = "Asia/Tokyo"


def test_a_message_posted_today_is_searchable_after_the_refresh(tmp_path, monkeypatch):
    today = dt.datetime.now(ZoneInfo(TZ)).date()
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    _day_file(tmp_path / "chats", "maria", today - dt.timedelta(days=2), "Alice", "alice", "x")
    path = write_config(
        tmp_path,
        f"""
[pipeline]
owner = "Alice"
timezone = "{TZ}"
start_date = "{(today - dt.timedelta(days=3)).isoformat()}"
output_dir = "out"

[[sources]]
name = "chats"
kind = "line_json"
path = "chats"
""",
    )
    cfg = load_config(str(path))
    assert cfg.end_date is None
    # the code location's calendar ends yesterday; the refresh's includes today
    assert not daily_partitions(cfg).has_partition_key(today.isoformat())
    assert daily_partitions(cfg, in_progress=True).has_partition_key(today.isoformat())
    tomorrow = (today + dt.timedelta(days=1)).isoformat()
    assert not daily_partitions(cfg, in_progress=True).has_partition_key(tomorrow)
    ended = dataclasses.replace(cfg, end_date=today - dt.timedelta(days=1))
    assert not daily_partitions(ended, in_progress=True).has_partition_key(today.isoformat())
    raw = {
        "id": "today-1",
        "conversation": "maria",
        "sender": "Maria",
        "time": f"{today.isoformat()}T00:00:00+09:00",  # never after now
        "text": "The quokka festival starts at the harbour tonight",
    }
    InboxStore(cfg.inbox_path, TZ).append([parse_entry(raw)])

    summary = refresh(str(path), [today], wait=60)

    assert summary.startswith("refreshed "), summary  # not "nothing to refresh"
    hits = MemoryService(cfg, str(path)).search(cfg.owner_id, "quokka festival harbour", 5)
    found = [t for t in hits["turns"] if t["source_ref"] == "inbox:today-1"]
    assert [t["local_ts"][:10] for t in found] == [today.isoformat()]
