"""A life, not a corpus: the whole ``memory-pipeline run`` on synthetic multi-app histories.

Each case generates export files (``life_corpus.py``: WhatsApp, LINE, Telegram, SMS Backup,
Discord), writes a personal configuration (open dates, one ``auto`` source) and runs the real
command, ``memory-pipeline --config … run --quiet``, in a fresh process with a fresh Dagster
instance: the one ``memory-pipeline`` makes in the state folder (``state/dagster``, SQLite, as
a user gets it; ``--stock-instance`` uses Dagster's own SQLite storage instead, in
``dagster_home`` beside the config). Figures per run: wall seconds, CPU
seconds and peak RSS of the child (``os.wait4``), the wall seconds of each stage (its Dagster
run's start and end), and the events the instance stored for the call (all of them, and the
materializations, planned materializations and check evaluations among them).

Cases (``--cases``, comma separated):

- ``sparse``: the same 10 messages spanning 3 years and spanning 3 days, side by side (goal:
  3 years <= 1.5 x 3 days, and the event counts equal);
- ``life``: ``--messages`` over ``--years`` on 5 apps: the first run (goal for 100,000 over
  10 years: <= 10 min on 2 cores, peak RSS <= 4 GB), then "a night with one new day": one
  more day of messages appended as a new export and ``run --start D-1 --end D`` (goal <= 60 s);
- ``gap``: two days with data 400 days apart vs 1 day apart (event counts must be equal).

Usage::

    python benchmarks/bench_life.py --cases sparse,gap
    python benchmarks/bench_life.py --cases life --messages 10000 --years 10
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import life_corpus as lc  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
TODAY = dt.date.today()


def cli() -> list[str]:
    """The ``memory-pipeline`` command of this interpreter, run from this checkout."""
    return [sys.executable, "-m", "memory_pipeline.cli"]


STOCK_INSTANCE = False  # --stock-instance: Dagster's SQLite storage, not the generated one


def instance_home(root: Path) -> Path:
    """The Dagster instance a run in ``root`` uses."""
    return root / "dagster_home" if STOCK_INSTANCE else root / "state" / "dagster"


def run_cli(root: Path, *extra: str) -> dict:
    """``memory-pipeline run`` in a child process; wall, CPU and peak RSS of that child."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("DAGSTER_HOME", None)
    if STOCK_INSTANCE:
        env["DAGSTER_HOME"] = str(instance_home(root))
        instance_home(root).mkdir(parents=True, exist_ok=True)
    env.setdefault("HF_HUB_OFFLINE", "1")
    cmd = [*cli(), "--config", str(root / "memory_pipeline.toml"), "run", "--quiet", *extra]
    t0 = time.perf_counter()
    with (root / "run.log").open("a") as log:
        proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        tail = (root / "run.log").read_text()[-3000:]
        raise SystemExit(f"memory-pipeline run failed ({code}) in {root}:\n{tail}")
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
    }


def instance_figures(root: Path, since: float) -> dict:
    """Events and per-stage seconds of the runs the instance recorded after ``since``."""
    os.environ["DAGSTER_HOME"] = str(instance_home(root))
    import dagster as dg

    counts = {"events": 0, "materializations": 0, "planned": 0, "check_evaluations": 0}
    stages: dict[str, float] = {}
    with dg.DagsterInstance.get() as instance:
        records = [
            r for r in instance.get_run_records() if r.create_timestamp.timestamp() >= since - 1
        ]
        for record in records:
            run = record.dagster_run
            stage = run.tags.get("memory_pipeline/stage", run.job_name)
            if record.start_time and record.end_time:
                stages[stage] = round(record.end_time - record.start_time, 2)
            for entry in instance.all_logs(run.run_id):
                counts["events"] += 1
                event = entry.dagster_event
                if event is None:
                    continue
                kind = event.event_type_value
                if kind == "ASSET_MATERIALIZATION":
                    counts["materializations"] += 1
                elif kind == "ASSET_MATERIALIZATION_PLANNED":
                    counts["planned"] += 1
                elif kind == "ASSET_CHECK_EVALUATION":
                    counts["check_evaluations"] += 1
        counts["runs"] = len(records)
    return {**counts, "stages_s": stages}


def measured_run(root: Path, *extra: str) -> dict:
    since = time.time()
    out = run_cli(root, *extra)
    return {**out, **instance_figures(root, since)}


def make_case(root: Path, msgs: list[lc.Msg]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    lc.write_exports(root / "exports", msgs)
    lc.write_config(root, Path("exports"), Path("out"))
    return root


def spread(msgs: list[lc.Msg], days: list[dt.date]) -> list[lc.Msg]:
    """The same messages moved onto ``days`` (message i on day i * len(days) // n), times kept."""
    n = len(msgs)
    out = []
    for i, m in enumerate(sorted(msgs, key=lambda m: m.ts)):
        day = days[i * len(days) // n]
        out.append(lc.Msg(dt.datetime.combine(day, m.ts.time()), m.app, m.contact, m.from_owner,
                          m.text))  # fmt: skip
    return out


def case_sparse(work: Path) -> dict:
    """10 messages over 3 years vs the same 10 over 3 days (WhatsApp + SMS)."""
    last = TODAY - dt.timedelta(days=2)
    base = lc.life(10, last - dt.timedelta(days=2), last, ("whatsapp", "sms"), seed=1)
    three_years = [last - dt.timedelta(days=round(i * 1095 / 9)) for i in range(10)][::-1]
    three_days = [last - dt.timedelta(days=2 - i) for i in range(3)]
    out = {}
    for name, days in (("3_days", three_days), ("3_years", three_years)):
        root = make_case(work / f"sparse_{name}", spread(base, days))
        out[name] = measured_run(root)
        out[name]["days_with_data"] = len({m.ts.date() for m in spread(base, days)})
        out[name]["calendar_days"] = (days[-1] - days[0]).days + 1
    out["ratio_wall"] = round(out["3_years"]["wall_s"] / out["3_days"]["wall_s"], 2)
    out["ratio_cpu"] = round(out["3_years"]["cpu_s"] / out["3_days"]["cpu_s"], 2)
    return out


def case_gap(work: Path) -> dict:
    """Two days with data 1 day apart vs 400 days apart: the same events."""
    last = TODAY - dt.timedelta(days=2)
    base = lc.life(6, last - dt.timedelta(days=1), last, ("whatsapp",), seed=2)
    out = {}
    for name, gap in (("1_day", 1), ("400_days", 400)):
        days = [last - dt.timedelta(days=gap), last]
        root = make_case(work / f"gap_{name}", spread(base, days))
        out[name] = measured_run(root)
    return out


def case_life(work: Path, messages: int, years: float) -> dict:
    """The first run of a ``years`` life of ``messages`` on 5 apps, then one new night."""
    last = TODAY - dt.timedelta(days=2)
    first = last - dt.timedelta(days=round(365.25 * years) - 1)
    msgs = lc.life(messages, first, last, lc.APPS, seed=3)
    root = make_case(work / "life", msgs)
    out = {
        "messages": len(msgs),
        "days_with_data": len({m.ts.date() for m in msgs}),
        "calendar_days": (last - first).days + 1,
        "first_run": measured_run(root),
    }
    # the night: yesterday's messages arrive as one more export; the nightly builds D-1..D
    night = last + dt.timedelta(days=1)
    new = [
        lc.Msg(dt.datetime.combine(night, dt.time(20, 0)) + dt.timedelta(minutes=i), "whatsapp",
               "Sam Carter", i % 2 == 0, f"night message {i}: see you at the lake house")
        for i in range(40)
    ]  # fmt: skip
    path = root / "exports" / "WhatsApp Chat with Sam Carter (new).txt"
    with path.open("w", encoding="utf-8") as fh:
        for m in new:
            fh.write(f"{m.ts:%d/%m/%Y, %H:%M} - {lc._sender(m)}: {m.text}\n")
    out["night"] = measured_run(root, "--start", last.isoformat(), "--end", night.isoformat())
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="sparse,gap")
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--years", type=float, default=10)
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    ap.add_argument(
        "--stock-instance",
        action="store_true",
        help="Dagster's own SQLite storage (DAGSTER_HOME without a dagster.yaml), for comparison",
    )
    args = ap.parse_args()
    global STOCK_INSTANCE
    STOCK_INSTANCE = args.stock_instance
    work = Path(tempfile.mkdtemp(prefix="bench_life_"))
    results: dict = {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                     "load_1min": os.getloadavg()[0], "stock_instance": STOCK_INSTANCE,
                     "cases": {}}  # fmt: skip
    try:
        for case in args.cases.split(","):
            if case == "sparse":
                results["cases"]["sparse"] = case_sparse(work)
            elif case == "gap":
                results["cases"]["gap"] = case_gap(work)
            elif case == "life":
                results["cases"]["life"] = case_life(work, args.messages, args.years)
            else:
                raise SystemExit(f"unknown case {case!r}")
            print(json.dumps({case: results["cases"][case]}, indent=1), flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"work folder: {work}")
    RESULTS.mkdir(exist_ok=True)
    name = (
        "life_" + "_".join(args.cases.split(",")) + ("_stock" if STOCK_INSTANCE else "") + ".json"
    )
    (RESULTS / name).write_text(json.dumps(results, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
