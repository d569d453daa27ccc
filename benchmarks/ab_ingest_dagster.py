"""The Dagster child of bench_ingest.py on two checkouts, alternated, with where its wall went.

Why: on this shared 2-core machine a Dagster ingest's wall time moves by 2x between runs of
the same code (other jobs' load), so a wall-time change between two versions is only a
finding when runs of both alternate and the waiting is split into its kinds. Each run is
``bench_ingest.py --child dagster`` (ephemeral instance, full corpus unless ``--limit``) of one
checkout, with ``PYTHONPATH`` set to it; the parent records from ``os.wait4`` the child's
user/sys CPU and its voluntary (it blocked) and involuntary (it was preempted) context
switches, and polls ``/proc/<pid>/task/*/schedstat`` for each thread's run delay (runnable,
waiting for a CPU: the machine's share). ``main blocked`` = wall - main thread's CPU - main
thread's run delay: the main thread's own waits (I/O, locks, other threads, sleeps).

Usage (from the repository root)::

    git worktree add --detach ../ingest-before 392a0aa^
    .venv/bin/python benchmarks/ab_ingest_dagster.py \\
        --tree before=../ingest-before --tree after=$PWD --pairs 3

One JSON line per run is appended to ``--out``; the results are in
benchmarks/results/search_cpu.md ("The Dagster ingest wall time").
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

# as bench_ingest.py: the shared data folder beside the checkout, unless the environment says
DATA = (
    Path(
        os.environ.get(
            "MEMORY_PIPELINE_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"
        )
    )
    / "realpersonachat"
)


def _write_config(tree: Path, folder: Path, data: Path, limit: int | None) -> Path:
    """The tree's own bench_ingest.write_config (the child checks the config it expects)."""
    code = (
        "import sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]);"
        "import bench_ingest as b;"
        "print(b.write_config(Path(sys.argv[2]), Path(sys.argv[3]),"
        " None if sys.argv[4] == '-' else int(sys.argv[4])))"
    )
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            str(tree / "benchmarks"),
            str(folder),
            str(data),
            "-" if limit is None else str(limit),
        ],
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip().splitlines()[-1])


def _poll_schedstat(pid: int, seen: dict[str, tuple[int, int]], done: threading.Event) -> None:
    """Last (cpu ns, run delay ns) of every thread of ``pid`` until ``done``."""
    while not done.is_set():
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            tids = []
        for tid in tids:
            try:
                cpu, delay, _ = Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()
                seen[tid] = (int(cpu), int(delay))
            except (OSError, ValueError):
                pass
        done.wait(0.05)


def run_one(label: str, tree: Path, data: Path, limit: int | None) -> dict:
    """One Dagster child of ``tree``: wall, rusage, run delays and the child's stage figures."""
    with tempfile.TemporaryDirectory(prefix=f"ab_{label}_") as tmp:
        config = _write_config(tree, Path(tmp), data, limit)
        result = Path(tmp) / "r.json"
        cmd = [
            sys.executable,
            str(tree / "benchmarks" / "bench_ingest.py"),
            "--child",
            "dagster",
            "--config",
            str(config),
            "--workdir",
            tmp,
            "--result",
            str(result),
            "--data",
            str(data),
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_PIPELINE_")}
        env["PYTHONPATH"] = str(tree)
        load0 = os.getloadavg()[0]
        seen: dict[str, tuple[int, int]] = {}
        done = threading.Event()
        t0 = time.perf_counter()
        with (Path(tmp) / "child.log").open("wb") as log:
            proc = subprocess.Popen(cmd, cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT)
            poller = threading.Thread(target=_poll_schedstat, args=(proc.pid, seen, done))
            poller.start()
            _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        done.set()
        poller.join()
        if os.waitstatus_to_exitcode(status) != 0:
            sys.stderr.write((Path(tmp) / "child.log").read_text(errors="replace")[-4000:])
            raise SystemExit(f"{label}: dagster child failed")
        child = json.loads(result.read_text(encoding="utf-8"))
    main_cpu, main_delay = (v / 1e9 for v in seen.get(str(proc.pid), (0, 0)))
    return {
        "label": label,
        "wall": wall,
        "user": usage.ru_utime,
        "sys": usage.ru_stime,
        "cpu": usage.ru_utime + usage.ru_stime,
        "nvcsw": usage.ru_nvcsw,
        "nivcsw": usage.ru_nivcsw,
        "inblock": usage.ru_inblock,
        "oublock": usage.ru_oublock,
        "load": [load0, os.getloadavg()[0]],
        "threads": len(seen),
        "run_delay": sum(d for _, d in seen.values()) / 1e9,
        "main_cpu": main_cpu,
        "main_run_delay": main_delay,
        "main_blocked": wall - main_cpu - main_delay,
        "setup": child["setup_s"],
        "stages": child["stages_s"],
        "result": child["result"],
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tree", action="append", required=True, help="label=checkout, in order")
    p.add_argument("--data", type=Path, default=DATA, help="RealPersonaChat folder")
    p.add_argument("--limit", type=int, default=None, help="read only the first N dialogues")
    p.add_argument("--pairs", type=int, default=3, help="rounds; each runs every tree once")
    p.add_argument("--out", type=Path, default=Path("ab_ingest_dagster.jsonl"))
    args = p.parse_args(argv)
    trees = [(t.split("=", 1)[0], Path(t.split("=", 1)[1]).resolve()) for t in args.tree]
    for i in range(args.pairs):
        for label, tree in trees:
            row = {"round": i, **run_one(label, tree, args.data, args.limit)}
            with args.out.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(row) + "\n")
            s = row["stages"]
            print(
                f"{i} {label:8} wall {row['wall']:5.1f} cpu {row['cpu']:5.1f}"
                f" load {row['load'][0]:4.1f} vcsw {row['nvcsw']:5d} ivcsw {row['nivcsw']:5d}"
                f" | ingest {s['ingest']:.1f}/{s['ingest/cpu']:.1f}"
                f" sessions {s['sessions']:.1f}/{s['sessions/cpu']:.1f}"
                f" chunks {s['chunks']:.1f}/{s['chunks/cpu']:.1f}"
                f" | main: cpu {row['main_cpu']:.1f} run delay {row['main_run_delay']:.1f}"
                f" blocked {row['main_blocked']:.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
