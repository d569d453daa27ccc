"""Thread timeline of the refresh on a bench_nightly work folder: which function ran on which
thread, when, for how long (wall) and for how much of that thread's CPU.

Usage (from the repository root)::

    PYTHONPATH=$PWD python benchmarks/refresh_timeline.py <work folder> [--repeat N]

Runs the refresh (``--no-evaluation``, as ``profile_refresh.py``) N times in one process and
prints, for the last run, the wrapped functions of ``search_indexes`` per thread (calls, first
start, last end, summed wall and thread CPU seconds). A cProfile sees only the main thread and
py-spy's sampling counts a thread blocked in C as busy; this shows where the refresh waits on
the GIL (wall far above CPU) and what lies on its critical path. To compare two checkouts on
the same night, copy the folder before each run (a refresh publishes a new version).
"""

from __future__ import annotations

import argparse
import functools
import importlib
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

RECORDS: list[tuple[str, str, float, float, float]] = []
TARGETS = {
    "memory_pipeline.defs.indexes": [
        "_timeline",
        "_time_metadata",
        "_text_indexes",
        "build_bm25",
        "build_dense",
        "write_lookups",
        "representation_arrays",
        "build_turn_index",
        "supersede",
    ],
    "memory_pipeline.core.quality.index_checks": ["postings_agree"],
    "memory_pipeline.core.indexes.turns": ["_message_columns", "_turn_part", "_build_from_parts"],
    "memory_pipeline.core.indexes.publish_bm25": ["_bm25_from_parts"],
    "memory_pipeline.core.indexes.parts": ["first_seen_ids", "by_partition", "read_part"],
    "memory_pipeline.core.indexes.bm25": ["fast_index_ids"],
}


def _wrap(module: object, name: str) -> None:
    inner = getattr(module, name)

    @functools.wraps(inner)
    def timed(*args, **kwargs):
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            return inner(*args, **kwargs)
        finally:
            RECORDS.append(
                (
                    threading.current_thread().name,
                    name,
                    t0,
                    time.perf_counter() - t0,
                    time.thread_time() - c0,
                )
            )

    setattr(module, name, timed)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("work", type=Path)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    for k in [k for k in os.environ if k.startswith("MEMORY_PIPELINE_")]:
        del os.environ[k]
    os.environ["HF_HUB_OFFLINE"] = "1"
    import dagster as dg

    for module_name, names in TARGETS.items():
        module = importlib.import_module(module_name)
        for name in names:
            if hasattr(module, name):
                _wrap(module, name)
    from bench_nightly import refresh_stage, run_stages

    from memory_pipeline.config import load_config
    from memory_pipeline.defs.build import build_definitions
    from memory_pipeline.defs.providers import provider_resources
    from memory_pipeline.defs.resources import PipelineResource
    from memory_pipeline.defs.runner import stage_resources

    config = args.work / "memory_pipeline.toml"
    cfg = load_config(config)
    defs = build_definitions(cfg, str(config))
    resources = stage_resources(PipelineResource(config_file=str(config)), provider_resources({}))
    instance = dg.DagsterInstance.ephemeral()
    for _ in range(max(1, args.repeat)):
        RECORDS.clear()
        t0, c0 = time.perf_counter(), time.process_time()
        steps = run_stages(defs, resources, instance, [refresh_stage(False)], [])
        shown = {k: round(v, 2) for k, v in steps.items()}
        print(
            f"refresh {time.perf_counter() - t0:.2f} s wall, {time.process_time() - c0:.2f} s "
            f"cpu  {shown}",
            flush=True,
        )
    start = min((r[2] for r in RECORDS), default=0.0)
    rows: dict[tuple[str, str], list[float]] = {}
    for thread, name, t, wall, cpu in sorted(RECORDS, key=lambda r: r[2]):
        row = rows.setdefault((thread, name), [t, t, 0.0, 0.0, 0])
        row[1] = max(row[1], t + wall)
        row[2] += wall
        row[3] += cpu
        row[4] += 1
    for (thread, name), (first, last, wall, cpu, n) in rows.items():
        print(
            f"  {thread:14s} {name:22s} x{n:<4d} start {first - start:6.2f} end "
            f"{last - start:6.2f} wall {wall:5.2f} cpu {cpu:5.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
