"""Dagster's SQLite event log against the instance storage memory-pipeline generates
(``memory_pipeline/defs/dagster_sqlite.py``), side by side in one run.

One single-run backfill of a partitioned asset with two checks over ``--partitions`` static
partitions (one materialization and two check evaluations per partition, as a first run over
years of history stores per asset and day), in-process, on a fresh SQLite instance in a
temporary folder: ``storage: sqlite:`` (Dagster's) or ``storage: custom:`` (ours), each with
``DAGSTER_EVENT_BATCH_SIZE`` 0 and 100, each in its own child process, ``--rounds`` times
alternating. Figures: wall and CPU seconds of the run, events stored, CPU and wall per event,
and the size of the instance's files.

Usage::

    python benchmarks/bench_event_log.py --partitions 300 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CHILD = r"""
import json, os, sys, time
home = sys.argv[1]; n = int(sys.argv[2])
import dagster as dg
keys = [f"p{i:05d}" for i in range(n)]
parts = dg.StaticPartitionsDefinition(keys)

@dg.asset(partitions_def=parts, backfill_policy=dg.BackfillPolicy.single_run(),
          check_specs=[dg.AssetCheckSpec("c1", asset="a"), dg.AssetCheckSpec("c2", asset="a")])
def a(context):
    yield dg.MaterializeResult(metadata={"rows": 5})
    for check in ("c1", "c2"):
        for p in context.partition_keys:
            yield dg.AssetCheckEvaluation(asset_key=dg.AssetKey("a"), check_name=check,
                                          passed=True, partition=p)
        yield dg.Output(None, output_name=f"a_{check}")

with dg.DagsterInstance.from_config(home) as instance:
    job = dg.define_asset_job("j", selection=[a], executor_def=dg.in_process_executor)
    defs = dg.Definitions(assets=[a], jobs=[job])
    t, c = time.perf_counter(), time.process_time()
    result = defs.resolve_job_def("j").execute_in_process(
        instance=instance,
        run_config={"loggers": {"console": {"config": {"log_level": "ERROR"}}}},
        tags={"dagster/asset_partition_range_start": keys[0],
              "dagster/asset_partition_range_end": keys[-1]})
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    events = len(instance.all_logs(result.run_id))
size = sum(f.stat().st_size for f in __import__("pathlib").Path(home).rglob("*") if f.is_file())
print(json.dumps({"wall_s": wall, "cpu_s": cpu, "events": events, "bytes": size}))
"""


def _yaml(home: Path, ours: bool) -> None:
    import yaml

    from memory_pipeline.state import sqlite_storage

    base = home / "storage"
    storage = sqlite_storage(base) if ours else {"sqlite": {"base_dir": str(base)}}
    body = {"storage": storage, "telemetry": {"enabled": False}}
    (home / "dagster.yaml").write_text(yaml.safe_dump(body))


def one(ours: bool, batch: int, partitions: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench_event_log_") as tmp:
        home = Path(tmp)
        _yaml(home, ours)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "DAGSTER_EVENT_BATCH_SIZE": str(batch)}
        env["DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS"] = "1"  # as the runner's runs
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(home), str(partitions)],
            env=env, capture_output=True, text=True, check=True,
        )  # fmt: skip
        return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    sides = [("dagster sqlite", False, 0), ("dagster sqlite, batch 100", False, 100),
             ("memory-pipeline", True, 0), ("memory-pipeline, batch 100", True, 100)]  # fmt: skip
    runs: dict[str, list[dict]] = {name: [] for name, _, _ in sides}
    load = os.getloadavg()[0]
    for _ in range(args.rounds):
        for name, ours, batch in sides:
            runs[name].append(one(ours, batch, args.partitions))
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"{args.partitions} partitions, 2 checks, {args.rounds} rounds, load {load:.1f} "
          f"-> {os.getloadavg()[0]:.1f} ({when})")  # fmt: skip
    print("| instance storage | events | CPU ms / event | wall ms / event | instance MB |")
    print("|---|---:|---:|---:|---:|")
    base = None
    for name, *_ in sides:
        rs = runs[name]
        ev = rs[0]["events"]
        cpu = statistics.median(r["cpu_s"] for r in rs) / ev * 1000
        wall = statistics.median(r["wall_s"] for r in rs) / ev * 1000
        mb = statistics.median(r["bytes"] for r in rs) / 1e6
        base = base or cpu
        print(f"| {name} | {ev} | {cpu:.2f} ({base / cpu:.1f}x) | {wall:.2f} | {mb:.1f} |")


if __name__ == "__main__":
    main()
