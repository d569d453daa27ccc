"""Sparse range benchmark: a `memory-pipeline run` over many days, messages on three of them.

Usage (from the repository root)::

    /work/main/.venv/bin/python benchmarks/bench_sparse.py               # 120 days
    /work/main/.venv/bin/python benchmarks/bench_sparse.py --days 30 60  # several sizes

A tiny line_json corpus (one contact, five messages on the first, middle and last day) is
built in ``--work`` with its config; every stage of ``memory-pipeline run`` then runs as the
CLI runs it (``materialize_stages`` over the whole range: one single-run backfill per stage,
on a SQLite instance under the work folder, with the run's backfill record). Printed per
size: wall and CPU seconds, the stages' seconds, and the events the instance stored by type.

Why events: on the SQLite instance every stored event is two connections and commits (the
run's shard and the asset index), ~5-90 ms each depending on the disk's load; a ranged run
stores per partition one planned and one materialization event per asset and, before the
empty-partition cut, one evaluation per check. Those writes were >90 % of a sparse run's
wall time (cProfile, 120 days: 522 of 571 s in ``store_event``), and their count does not
depend on the machine's load, so the count is the figure to compare, with the seconds beside
it. Results go to benchmarks/results/sparse.json (git-ignored); the figures measured when
the cut was made are in benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import sqlite3
import sys
from collections import Counter
from pathlib import Path

from _common import CPU, timed

REPO = Path(__file__).resolve().parents[1]
DEFAULT_WORK = REPO / "benchmarks" / "results" / "sparse_work"
DEFAULT_JSON = REPO / "benchmarks" / "results" / "sparse.json"
FIRST = dt.date(2024, 1, 1)


def corpus(root: Path, days: int) -> tuple[Path, dt.date, dt.date]:
    """The corpus and config in ``root``: messages on the first, middle and last day."""
    shutil.rmtree(root, ignore_errors=True)
    folder = root / "json" / "kenta"
    folder.mkdir(parents=True)
    last = FIRST + dt.timedelta(days=days - 1)
    for day in sorted({FIRST, FIRST + dt.timedelta(days=days // 2), last}):
        msgs = [
            {
                "time": f"1{i}:00:00",
                "sender": "kenta" if i % 2 == 0 else "Yuki",
                "type": "text",
                "text": f"message {i} of {day}: the Kyoto trip, ramen near the station",
                "source_order": i,
            }
            for i in range(5)
        ]
        body = {"date": day.isoformat(), "contact": "kenta", "messages": msgs}
        (folder / f"{day}.json").write_text(json.dumps(body), encoding="utf-8")
    config = root / "memory_pipeline.toml"
    config.write_text(
        f"""
[pipeline]
owner = "Yuki"
timezone = "Asia/Tokyo"
start_date = "{FIRST}"
end_date = "{last}"
output_dir = "out"

[[sources]]
name = "chat"
kind = "line_json"
path = "json"
""",
        encoding="utf-8",
    )
    return config, FIRST, last


def stored_events(home: Path) -> Counter[str]:
    """Events stored in the instance's run shards, by type (the index shard mirrors some)."""
    counts: Counter[str] = Counter()
    for db in sorted((home / "history" / "runs").glob("*.db")):
        if db.name == "index.db":
            continue
        con = sqlite3.connect(db)
        try:
            rows = con.execute(
                "SELECT dagster_event_type, count(*) FROM event_logs GROUP BY 1"
            ).fetchall()
        finally:
            con.close()
        counts.update({str(k or "log"): n for k, n in rows})
    return counts


def run_once(work: Path, days: int) -> dict:
    import dagster as dg

    from memory_pipeline.config import load_config
    from memory_pipeline.defs.build import build_definitions
    from memory_pipeline.defs.runner import materialize_stages, stages

    root = work / f"d{days}"
    config, first, last = corpus(root, days)
    (root / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
    os.environ["DAGSTER_HOME"] = str(root)
    cfg = load_config(config, env={})
    figures: dict[str, float] = {}
    with dg.DagsterInstance.get() as instance, timed(figures, "run"):
        runs = materialize_stages(
            build_definitions(cfg),
            stages(),
            days=[first, last],
            instance=instance,
            backfill=True,
            code_location=root,
            log_level="ERROR",
            raise_on_error=False,
        )
    events = stored_events(root)
    return {
        "days": days,
        "days_with_messages": 3,
        "ok": all(r.success for r in runs),
        "wall_s": round(figures["run"], 1),
        "cpu_s": round(figures["run" + CPU], 1),
        "stages_s": {r.stage.name: round(r.seconds, 1) for r in runs},
        "events": sum(events.values()),
        "events_by_type": dict(events.most_common()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, nargs="+", default=[120])
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK)
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    args = parser.parse_args(argv)
    results = []
    for days in args.days:
        r = run_once(args.work, days)
        results.append(r)
        checks = r["events_by_type"].get("ASSET_CHECK_EVALUATION", 0)
        print(
            f"{days} days (3 with messages): wall {r['wall_s']} s, CPU {r['cpu_s']} s, "
            f"{r['events']} events stored ({checks} check evaluations), ok={r['ok']}"
        )
        print("  " + ", ".join(f"{k} {v}" for k, v in r["stages_s"].items()))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
