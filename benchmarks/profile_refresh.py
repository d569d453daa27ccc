"""Profile (or time) the refresh alone on a bench_nightly work folder: where its seconds go.

Usage (from the repository root), after ``bench_nightly.py --work <folder>``::

    PYTHONPATH=$PWD python benchmarks/profile_refresh.py <folder> [--profile out.prof]

Runs the refresh once over what the folder holds, as bench_nightly does (one run of what the
automation requests; ``--no-evaluation`` leaves the evaluation out; warm caches: what a
nightly refresh costs) and prints the seconds per stage; with
``--profile`` under cProfile, then the top functions by own time. ``--nightly DATE`` runs
(and profiles) the nightly job's run over DATE-1..DATE instead, as bench_nightly times it.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import os
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_nightly import nightly_stage, refresh_stage, run_stages  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("work", type=Path)
    ap.add_argument("--profile", type=Path, default=None)
    ap.add_argument("--wall", action="store_true", help="profile wall time instead of CPU time")
    ap.add_argument("--no-evaluation", action="store_true")
    ap.add_argument(
        "--nightly",
        type=dt.date.fromisoformat,
        default=None,
        metavar="DATE",
        help="profile the nightly run of DATE (its D-1..D partitions) instead of the refresh",
    )
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run (and time) the refresh this many times in one process: the runs after the "
        "first show a warm refresh with nothing new",
    )
    args = ap.parse_args()
    for k in [k for k in os.environ if k.startswith("MEMORY_PIPELINE_")]:
        del os.environ[k]
    os.environ["HF_HUB_OFFLINE"] = "1"
    import dagster as dg

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
    # CPU time per function by default: on this shared machine wall time is mostly waiting
    timer = time.perf_counter if args.wall else time.process_time
    prof = cProfile.Profile(timer) if args.profile else None
    t0, c0 = time.perf_counter(), time.process_time()
    if prof:
        prof.enable()
    if args.nightly is None:
        stage, days = refresh_stage(not args.no_evaluation), []
    else:
        stage, days = nightly_stage(), [args.nightly - dt.timedelta(days=1), args.nightly]
    for run in range(max(1, args.repeat)):
        if run:
            t0, c0 = time.perf_counter(), time.process_time()
        seconds = run_stages(defs, resources, instance, [stage], days)
        total, cpu = time.perf_counter() - t0, time.process_time() - c0
        print(
            f"{stage.name} {total:.1f} s ({cpu:.1f} s cpu) {seconds}; "
            f"load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
    if prof:
        prof.disable()
    if prof:
        prof.dump_stats(args.profile)
        pstats.Stats(str(args.profile)).sort_stats("tottime").print_stats(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
