"""Incremental == full rebuild, on real RealPersonaChat dialogues that cross midnight.

Every table must come out identical (same ids, same rows) whether the partitions are built
as one backfill, one at a time in date order, in reverse order, or night by night (the
nightly job rebuilds yesterday too); and re-running a partition changes nothing.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow.compute as pc
import pytest

from memory_pipeline_tests.pipeline_helpers import INGEST_KEYS, Runner, rpc_corpus

OWNER = "DT"  # a speaker with several dialogues that run past midnight
FIRST, LAST = "2022-08-09", "2022-08-15"
DAYS = [dt.date(2022, 8, 9) + dt.timedelta(days=i) for i in range(7)]


@pytest.fixture(scope="module")
def corpus(shared_data: Path, tmp_path_factory) -> Path:
    return rpc_corpus(shared_data, tmp_path_factory.mktemp("rpc"), OWNER, FIRST, LAST)


def runner(corpus: Path, tmp_path: Path, name: str) -> Runner:
    return Runner(corpus / "memory_pipeline.toml", tmp_path / name)


@pytest.fixture(scope="module")
def full(corpus: Path, tmp_path_factory) -> Runner:
    r = runner(corpus, tmp_path_factory.mktemp("full"), "out")
    r.run(INGEST_KEYS, DAYS)
    r.run(["sessions"], DAYS)
    r.run(["chunks"], DAYS)
    return r


def test_fixture_really_has_midnight_sessions_and_defects(full: Runner):
    t = full.tables()
    crossing = pc.sum(
        pc.not_equal(t["sessions"].column("local_date"), t["sessions"].column("end_local_date"))
    ).as_py()
    assert crossing >= 3
    assert "missing_timestamp" in t["quarantine"].column("reason").to_pylist()
    assert t["raw_messages"].num_rows > 1000


@pytest.mark.parametrize("order", ["date_order", "reverse_order"])
def test_one_partition_at_a_time_equals_backfill(full: Runner, corpus: Path, tmp_path, order):
    r = runner(corpus, tmp_path, order)
    days = DAYS if order == "date_order" else list(reversed(DAYS))
    for keys in (INGEST_KEYS, ["sessions"], ["chunks"]):
        for day in days:
            r.run(keys, [day])
    assert r.tables() == full.tables()


def test_nightly_runs_equal_backfill(full: Runner, corpus: Path, tmp_path):
    """Night by night: each night ingests its day and rebuilds sessions/chunks of D-1 and D."""
    r = runner(corpus, tmp_path, "nightly")
    for i in range(len(DAYS)):
        window = DAYS[max(0, i - 1) : i + 1]
        r.run(INGEST_KEYS, window)
        r.run(["sessions"], window)
        r.run(["chunks"], window)
    assert r.tables() == full.tables()


def test_rerunning_a_partition_is_idempotent(full: Runner, corpus: Path, tmp_path):
    r = runner(corpus, tmp_path, "again")
    for keys in (INGEST_KEYS, ["sessions"], ["chunks"]):
        r.run(keys, DAYS)
    before = r.tables()
    mtime = r.store.path("chunks", DAYS[2]).stat().st_mtime_ns
    for keys in (INGEST_KEYS, ["sessions"], ["chunks"]):
        r.run(keys, [DAYS[2]])
    assert r.store.path("chunks", DAYS[2]).stat().st_mtime_ns != mtime  # really rewritten
    assert r.tables() == before == full.tables()
    leftovers = list(r.store.parquet_root.rglob("*.tmp"))
    assert not leftovers
