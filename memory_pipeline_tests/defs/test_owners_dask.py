"""Many owners on a Dask cluster: each owner's body is one task on a 2-worker LocalCluster,
and the build equals the serial one owner for owner (every table, every index file).

One cluster (127.0.0.1, no dashboard) serves every run of the build through
``MEMORY_PIPELINE_DASK_SCHEDULER``; it is closed at the end of the module, and the runs only
close their clients. The owners are the three colliding owners of test_owners_pipeline.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from memory_pipeline.core.indexes.publish import current_version
from memory_pipeline.defs.compute import SCHEDULER_ENV
from memory_pipeline.defs.helpers import OWNER_WORKERS
from memory_pipeline.defs.providers import provider_resources
from memory_pipeline_tests.defs.test_owners_pipeline import CONFIG, DAYS, OWNERS, _write_owner
from memory_pipeline_tests.pipeline_helpers import (
    INDEX_KEYS,
    INGEST_KEYS,
    MEMORY_KEYS,
    REPRESENTATION_KEYS,
    Runner,
    write_config,
)

distributed = pytest.importorskip("distributed")

STAGES = [INGEST_KEYS, ["sessions"], ["chunks"], REPRESENTATION_KEYS, ["chunk_embeddings"],
          MEMORY_KEYS]
UNPARTITIONED = [INDEX_KEYS, ["storage_report"], ["warehouse"]]


def _corpus(root: Path) -> Path:
    root.mkdir()
    _write_owner(root, "alice", DAYS)
    _write_owner(root, "bob", DAYS)
    _write_owner(root, "carol", DAYS[:1])
    # one dense representation (the shortest texts) keeps the two builds within budget
    return write_config(root, CONFIG + '\n[representations]\ndense = ["summary"]\n')


def _owner_workers(result, key: str) -> int:
    [event] = [
        e for e in result.get_asset_materialization_events()
        if e.asset_key.to_user_string() == key
    ][:1]
    return event.materialization.metadata[OWNER_WORKERS].value


def _build(root: Path, env: dict[str, str]) -> dict[str, int]:
    """Every stage, then the unpartitioned assets; ``owner_workers`` of each run."""
    runner = Runner(_corpus(root), root / "out", provider_resources(env))
    workers = {}
    for keys in STAGES:
        workers[keys[0]] = _owner_workers(runner.run(keys, DAYS), keys[0])
    for keys in UNPARTITIONED:
        workers[keys[0]] = _owner_workers(runner.run(keys, []), keys[0])
    return workers


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("owners_dask")
    serial = _build(root / "serial", {})
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
        dashboard_address=None,
    )
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv(SCHEDULER_ENV, cluster.scheduler_address)
            on_dask = _build(root / "dask", {SCHEDULER_ENV: cluster.scheduler_address})
    finally:
        cluster.close()
    return root, serial, on_dask


def _files(folder: Path) -> dict[str, str]:
    """Every file of an owner's record, by content: Parquet decoded (a table per file),
    index files by bytes. Caches, the warehouse file and fingerprints are derived state."""
    out = {}
    for p in sorted((folder / "parquet").rglob("*.parquet")):
        t = pq.read_table(p)
        out[str(p.relative_to(folder))] = hashlib.sha256(
            repr(t.schema).encode() + repr(t.to_pylist()).encode()
        ).hexdigest()
    version = current_version(folder)
    assert version is not None
    for p in sorted(version.rglob("*")):  # a version's name is new per build: not compared
        if p.is_file():
            out[f"index/{p.relative_to(version)}"] = hashlib.sha256(p.read_bytes()).hexdigest()
    for p in sorted((folder / "dossiers").glob("*.md")):
        out[str(p.relative_to(folder))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def test_owners_ran_on_the_cluster_and_serially(builds):
    _, serial, on_dask = builds
    assert set(serial.values()) == {0}  # no cluster: every owner here
    assert on_dask == {k: 2 for k in serial}  # every multi-owner stage shipped its owners


@pytest.mark.parametrize("oid", sorted(OWNERS))
def test_each_owner_is_built_the_same_on_two_workers(builds, oid: str):
    root, _, _ = builds
    want = _files(root / "serial" / "out" / "owners" / oid)
    got = _files(root / "dask" / "out" / "owners" / oid)
    assert any("/raw_messages/" in k for k in want)
    assert any(k.startswith("index/bm25/") for k in want)
    assert any(k.startswith("dossiers/") for k in want)
    assert got == want


def test_no_worker_outlives_the_cluster(builds):
    import psutil

    children = [
        p for p in psutil.Process().children(recursive=True)
        if "spawn_main" in " ".join(p.cmdline())
    ]
    assert children == []

