"""The bundled sample built through Dagster with a 2-worker LocalCluster equals the serial
build: same chunk_embeddings bits, same BM25 postings table, same bm25s index files.

The cluster comes from the ``dask`` resource (``MEMORY_PIPELINE_DASK_WORKERS=2``): started
on 127.0.0.1 by the run that first needs it and closed when that run ends, which the test
checks by looking for leftover child processes.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import shutil
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest

from memory_pipeline.core.common.parallel import map_tasks
from memory_pipeline.core.indexes.publish import current_version
from memory_pipeline.defs.compute import DaskResource, dask_resource
from memory_pipeline.defs.providers import provider_resources
from memory_pipeline_tests.paths import SAMPLE
from memory_pipeline_tests.pipeline_helpers import (
    INDEX_KEYS,
    INGEST_KEYS,
    MEMORY_KEYS,
    REPRESENTATION_KEYS,
    Runner,
    write_config,
)

distributed = pytest.importorskip("distributed")
psutil = pytest.importorskip("psutil")

DAYS = [dt.date(2024, 3, 1) + dt.timedelta(days=i) for i in range(14)]
CONFIG = """
[pipeline]
owner = "Yuki"
timezone = "Asia/Tokyo"
start_date = "2024-03-01"
end_date = "2024-03-14"
output_dir = "out"

[[sources]]
name = "sample_line_json"
kind = "line_json"
path = "line_json"

[[sources]]
name = "sample_line_txt"
kind = "line_txt"
path = "line_txt"

[representations]
# two of the three (raw_text pieces are most of the sample's embedding time): enough to run
# the representations side by side on the cluster, and the test stays within its budget
dense = ["summary", "embedding_text"]
"""


def _corpus(root: Path) -> Path:
    root.mkdir()
    shutil.copytree(SAMPLE / "line_json", root / "line_json")
    shutil.copytree(SAMPLE / "line_txt", root / "line_txt")
    return write_config(root, CONFIG)


def _meta(result, key: str) -> dict:
    event = next(
        e for e in result.get_asset_materialization_events() if e.asset_key.to_user_string() == key
    )
    return {k: v.value for k, v in event.materialization.metadata.items()}


def _upstream(root: Path) -> None:
    """The stages before the heavy ones, built once (the two builds share their inputs)."""
    runner = Runner(_corpus(root), root / "out", provider_resources({}))
    for keys in (INGEST_KEYS, ["sessions"], ["chunks"], REPRESENTATION_KEYS, MEMORY_KEYS):
        runner.run(keys, DAYS)
    assert not runner.cfg.cache_path.exists() or not runner.store.dates("chunk_embeddings")


def _heavy(root: Path, env: dict[str, str]) -> tuple[Runner, dict, dict]:
    """chunk_embeddings and the indexes into ``root/out`` (its own content cache)."""
    runner = Runner(root / "memory_pipeline.toml", root / "out", provider_resources(env))
    embedded = _meta(runner.run(["chunk_embeddings"], DAYS), "chunk_embeddings")
    indexed = _meta(runner.run(INDEX_KEYS, []), "bm25_index")
    return runner, embedded, indexed


def _digest(table: pa.Table, sort: list[str]) -> str:
    """sha256 of the table's Arrow IPC stream, rows in ``sort`` order."""
    sink = pa.BufferOutputStream()
    ordered = table.sort_by([(c, "ascending") for c in sort])
    with pa.ipc.new_stream(sink, ordered.schema) as writer:
        writer.write_table(ordered)
    return hashlib.sha256(sink.getvalue().to_pybytes()).hexdigest()


def _bm25_files(runner: Runner) -> dict[str, str]:
    version = current_version(runner.cfg.output_dir)
    assert version is not None
    root = version / "bm25"
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _worker_children() -> set[int]:
    """Child processes started through multiprocessing spawn (Dask's nannies and workers;
    not multiprocessing's resource tracker, which lives as long as this process)."""
    return {
        p.pid
        for p in psutil.Process().children(recursive=True)
        if "spawn_main" in " ".join(p.cmdline())
    }


def test_local_cluster_build_is_identical_to_the_serial_build(tmp_path: Path) -> None:
    _upstream(tmp_path / "serial")
    shutil.copytree(tmp_path / "serial", tmp_path / "dask")
    serial, serial_emb, serial_idx = _heavy(tmp_path / "serial", {})
    assert serial_emb["dask_workers"] == 0 and serial_idx["dask_workers"] == 0
    before = _worker_children()

    dask, dask_emb, dask_idx = _heavy(tmp_path / "dask", {"MEMORY_PIPELINE_DASK_WORKERS": "2"})
    # the Dask path really ran, on two workers, and embedded as much as the serial run
    assert dask_emb["dask_workers"] == 2 and dask_idx["dask_workers"] == 2
    # range figures of the partitioned embedding run (see helpers.range_metadata)
    assert dask_emb["range_provider_calls"] == serial_emb["range_provider_calls"] > 0
    assert dask_emb["range_vectors"] == serial_emb["range_vectors"]
    assert dask_idx["tokens_computed"] == serial_idx["tokens_computed"] > 0
    # each run closed its cluster: no worker process outlives the run
    assert _worker_children() - before == set()

    vectors = ["representation", "chunk_id", "piece"]
    assert _digest(dask.store.read("chunk_embeddings"), vectors) == _digest(
        serial.store.read("chunk_embeddings"), vectors
    )
    postings = ["representation", "token", "chunk_id"]
    assert _digest(dask.store.read("bm25_postings"), postings) == _digest(
        serial.store.read("bm25_postings"), postings
    )
    files = _bm25_files(serial)
    assert len(files) >= 3 * 4  # arrays, vocabulary, doc ids and meta per representation
    assert _bm25_files(dask) == files
    # the published indexes answer the same way
    assert dask_idx["postings"] == serial_idx["postings"]


def test_dask_resource_from_the_environment() -> None:
    assert not dask_resource({}).enabled and dask_resource({}).runner() is None
    assert dask_resource({"MEMORY_PIPELINE_DASK_WORKERS": "3"}).local_workers == 3
    with pytest.raises(ValueError, match="MEMORY_PIPELINE_DASK_WORKERS"):
        dask_resource({"MEMORY_PIPELINE_DASK_WORKERS": "two"})
    remote = dask_resource({"MEMORY_PIPELINE_DASK_SCHEDULER": "tcp://127.0.0.1:8786"})
    assert isinstance(remote, DaskResource)
    # the address stays an EnvVar reference (resolved at run time), never a baked-in value
    assert "MEMORY_PIPELINE_DASK_SCHEDULER" in repr(remote.scheduler_address)


def _pid(_: int) -> int:
    return os.getpid()


def test_scheduler_address_from_the_environment_reaches_an_asset(monkeypatch) -> None:
    """``MEMORY_PIPELINE_DASK_SCHEDULER`` (an EnvVar, resolved at run time) connects the run to
    a running cluster; the run closes its client and leaves the cluster up."""
    cluster = distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
    )
    try:
        monkeypatch.setenv("MEMORY_PIPELINE_DASK_SCHEDULER", cluster.scheduler_address)

        @dg.asset
        def pids(dask: DaskResource) -> dg.MaterializeResult:
            got = map_tasks(_pid, [1, 2, 3], runner=dask.runner())
            here = os.getpid() in got
            return dg.MaterializeResult(metadata={"pids": len(set(got)), "here": here})

        resource = dask_resource()
        result = dg.materialize([pids], resources={"dask": resource})
        assert result.success
        [event] = result.get_asset_materialization_events()
        meta = event.materialization.metadata
        assert meta["pids"].value == 1 and meta["here"].value is False
        # the cluster is still serving (the run closed only its client)
        with distributed.Client(cluster.scheduler_address, timeout="30s") as client:
            assert map_tasks(abs, [-4], runner=client) == [4]
    finally:
        cluster.close()
