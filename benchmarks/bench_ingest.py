"""Ingest benchmark: all of RealPersonaChat through the core functions and through Dagster.

Usage (from the repository root)::

    /work/venv/bin/python benchmarks/bench_ingest.py              # full corpus, one round
    /work/venv/bin/python benchmarks/bench_ingest.py --limit 500  # quick run: 500 dialogues
    /work/venv/bin/python benchmarks/bench_ingest.py --repeat 3   # best of 3 rounds
    /work/venv/bin/python benchmarks/bench_ingest.py --profile    # cProfile of the core path

Every dialogue is read (the source has no owner: benchmark mode), timezone Asia/Tokyo, daily
partitions 2022-07-29..2022-11-05. Each round runs two subprocesses, so their peak RSS figures
are separate:

- ``core``: no Dagster. The reader drained into a list (read), ``core.ingest.ingest`` +
  ``stages.split_ingest`` (ingest: validate/dedupe/ids, then the messages/quarantine/audit
  tables split per date), ``core.sessionize.sessionize`` and ``core.chunking.chunk_sessions``
  over the whole corpus in memory. ``stages.read_all`` is exactly ``ingest(read_source(...))``
  fused into one generator pass; it is split here so read and ingest are timed apart. Then the
  store-based path the assets use: the per-date tables written to a temporary ``TableStore``,
  ``stages.build_sessions`` and ``stages.build_chunks`` over all dates (each + its writes).
- ``dagster``: ``dagster.materialize`` of the real assets from ``defs.build.build_assets``
  (ingest multi-asset, then sessions, then chunks), each as one single-run backfill over the
  whole range (range tags), ephemeral instance, console logger at ERROR, into a temporary
  output folder. The asset checks run as part of each materialization, as in production.

Both paths must give the same messages, quarantine, sessions and chunks (counts and a digest of
the sorted ids); on the full corpus the quarantine must hold the 352 ``NaT`` utterances (plus
60 ``duplicate``: two dialogue lines appear twice in the corpus). The figures go to
benchmarks/results/ingest.json (git-ignored).
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import hashlib
import json
import os
import platform
import pstats
import subprocess
import sys
import tempfile
import time
from collections import Counter
from importlib.metadata import version
from pathlib import Path
from typing import Any

from _common import CPU, peak_rss_mib, rate, timed

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data" / "realpersonachat"
DEFAULT_JSON = REPO / "benchmarks" / "results" / "ingest.json"

SOURCE = "realpersonachat"
TIMEZONE = "Asia/Tokyo"
START = dt.date(2022, 7, 29)
END = dt.date(2022, 11, 5)
CORPUS_UTTERANCES = 408_619
CORPUS_NAT = 352
NAT_REASON = "missing_timestamp"

TARGET_CORE_MSG_S = 100_000
TARGET_DAGSTER_RATIO = 1.5
TARGET_RSS_MIB = 2048

DAGSTER_STAGES = ("ingest", "sessions", "chunks")  # stages of defs/runner.py's table
QUIET_LEVEL = "ERROR"


# --------------------------------------------------------------------------- helpers


def add_up(into: dict[str, float], name: str, parts: list[str]) -> None:
    for suffix in ("", CPU):
        into[name + suffix] = sum(into[p + suffix] for p in parts)


def days_of_range() -> list[dt.date]:
    return [START + dt.timedelta(days=i) for i in range((END - START).days + 1)]


def write_config(folder: Path, data: Path, limit: int | None) -> Path:
    """The benchmark's memory_pipeline.toml: one realpersonachat source with no owner.

    ``[pipeline].owner`` is required by config.py, and a source without ``owner`` inherits it;
    ``owner = ""`` on the source is what config.py turns into ``None`` (every dialogue).
    """
    lines = [
        "[pipeline]",
        'owner = "benchmark"  # required; the source below overrides it with no owner',
        f'timezone = "{TIMEZONE}"',
        f'start_date = "{START.isoformat()}"',
        f'end_date = "{END.isoformat()}"',
        'output_dir = "out"',
        "",
        "[[sources]]",
        f'name = "{SOURCE}"',
        'kind = "realpersonachat"',
        f"path = {json.dumps(str(data.resolve()))}",
        'owner = ""  # "" -> None: benchmark mode, every dialogue',
    ]
    if limit is not None:
        lines.append(f"dialogue_limit = {limit}")
    path = folder / "memory_pipeline.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def check_config(cfg: Any) -> None:
    (spec,) = cfg.sources
    if spec.owner is not None or spec.kind != SOURCE or cfg.timezone != TIMEZONE:
        raise SystemExit(f"benchmark config not as intended: {spec}")


def id_digest(values: list[str]) -> str:
    return hashlib.blake2b("\n".join(sorted(values)).encode(), digest_size=8).hexdigest()


def summarize(messages: Any, quarantine: Any, sessions: Any, chunks: Any) -> dict[str, Any]:
    """Counts and id digests of one path's output (computed outside every timed region)."""
    reasons = Counter(quarantine.column("reason").to_pylist())
    return {
        "messages": messages.num_rows,
        "quarantine": quarantine.num_rows,
        "quarantine_by_reason": dict(sorted(reasons.items())),
        "sessions": sessions.num_rows,
        "chunks": chunks.num_rows,
        "digests": {
            "messages": id_digest(messages.column("message_id").to_pylist()),
            "quarantine": id_digest(quarantine.column("quarantine_id").to_pylist()),
            "sessions": id_digest(sessions.column("session_id").to_pylist()),
            "chunks": id_digest(chunks.column("chunk_id").to_pylist()),
        },
    }


# --------------------------------------------------------------------------- children


def child_core(config: Path, out_dir: Path, profile: Path | None) -> dict[str, Any]:
    t0 = time.perf_counter()
    import pyarrow as pa

    from memory_pipeline.config import load_config
    from memory_pipeline.core.common import tables as T
    from memory_pipeline.core.common.storage import TableStore
    from memory_pipeline.core.ingest.normalize import ingest
    from memory_pipeline.core.ingest.sources import read_source
    from memory_pipeline.core.ingest.stage import gc_paused, read_all, split_ingest
    from memory_pipeline.core.sessions.chunking import chunk_sessions
    from memory_pipeline.core.sessions.sessionize import sessionize
    from memory_pipeline.core.sessions.stage import build_chunks, build_sessions

    cfg = load_config(config, env={})
    check_config(cfg)
    days = days_of_range()
    setup = time.perf_counter() - t0

    mem: dict[str, float] = {}
    profiler = cProfile.Profile() if profile else None
    if profiler:
        profiler.enable()
    # read and ingest are one generator pass under a paused GC in production
    # (stages.read_all); split here so they are timed apart, under the same GC regime.
    with timed(mem, "read"), gc_paused():
        records = [rec for spec in cfg.sources for rec in read_source(spec, days)]
    with timed(mem, "ingest.validate_dedupe_ids"), gc_paused():
        result = ingest(records, start_date=cfg.start_date, dates=days)
    with timed(mem, "ingest.tables_split"):
        per_day = split_ingest(result, days)
    with timed(mem, "sessionize"):
        messages = pa.concat_tables([t.messages for t in per_day.values()])
        sessions = sessionize(messages, cfg.session_gap_minutes)
    with timed(mem, "chunk"):
        chunks = chunk_sessions(sessions, messages, cfg.chunk_size, cfg.chunk_stride)
    if profiler:
        profiler.disable()
        profiler.dump_stats(str(profile))
    add_up(mem, "ingest", ["ingest.validate_dedupe_ids", "ingest.tables_split"])
    add_up(mem, "read+ingest", ["read", "ingest"])
    add_up(mem, "total", ["read+ingest", "sessionize", "chunk"])
    records_read = len(records)
    rss_in_memory = peak_rss_mib()
    quarantine = pa.concat_tables([t.quarantine for t in per_day.values()])
    in_memory = summarize(messages, quarantine, sessions, chunks)
    del records, result, sessions, chunks
    # the production call: reader and ingest fused in one generator pass (cross-check only)
    with timed(mem, "read_ingest_fused"):
        fused = read_all(cfg.sources, days, cfg.start_date)
    fused_counts = [len(fused.messages), len(fused.quarantine)]
    del fused

    store = TableStore(out_dir)
    st: dict[str, float] = {}
    with timed(st, "write_ingest"):
        for day, tables in per_day.items():
            store.write(T.RAW_MESSAGES, tables.messages, day)
            store.write(T.QUARANTINE, tables.quarantine, day)
            store.write(T.INGEST_AUDIT, tables.audit, day)
    with timed(st, "sessions"):
        for day, table in build_sessions(store, days, cfg.session_gap_minutes).items():
            store.write(T.SESSIONS, table, day)
    with timed(st, "chunks"):
        built = build_chunks(store, days, cfg.chunk_size, cfg.chunk_stride)
        for day, table in built.items():
            store.write(T.CHUNKS, table, day)
    for suffix in ("", CPU):
        st["read+ingest" + suffix] = mem["read+ingest" + suffix]
    add_up(st, "total", ["read+ingest", "write_ingest", "sessions", "chunks"])
    stored = summarize(
        store.read(T.RAW_MESSAGES),
        store.read(T.QUARANTINE),
        store.read(T.SESSIONS),
        store.read(T.CHUNKS),
    )
    return {
        "setup_s": setup,
        "records_read": records_read,
        "in_memory_s": mem,
        "store_s": st,
        "peak_rss_in_memory_mib": rss_in_memory,
        "peak_rss_mib": peak_rss_mib(),
        "dagster_imported": "dagster" in sys.modules,
        "fused_counts": fused_counts,
        "result": in_memory,
        "result_store": stored,
    }


def child_dagster(config: Path, out_dir: Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    import dagster as dg

    from memory_pipeline.core.common import tables as T
    from memory_pipeline.core.common.storage import TableStore
    from memory_pipeline.defs.build import build_assets
    from memory_pipeline.defs.providers import provider_resources
    from memory_pipeline.defs.resources import PipelineResource
    from memory_pipeline.defs.runner import materialize_stages, stage_resources, stages

    pipeline = PipelineResource(config_file=str(config), output_dir=str(out_dir))
    cfg = pipeline.cfg
    check_config(cfg)
    assets = build_assets(cfg)
    instance = dg.DagsterInstance.ephemeral()
    days = days_of_range()
    setup = time.perf_counter() - t0

    walls: dict[str, float] = {}
    checks: dict[str, int] = {}
    for stage in stages(*DAGSTER_STAGES):
        with timed(walls, stage.name):
            [run] = materialize_stages(
                assets,
                [stage],
                days=days,
                resources=stage_resources(pipeline, provider_resources(env={})),
                instance=instance,
                log_level=QUIET_LEVEL,
            )
        failed = [e.check_name for e in run.checks if not e.passed]
        if not run.success or failed:
            raise SystemExit(f"dagster stage {stage.name} failed (checks failed: {failed})")
        checks[stage.name] = len(run.checks)
    add_up(walls, "total", list(DAGSTER_STAGES))
    store = TableStore(out_dir)
    audit = store.read(T.INGEST_AUDIT)
    return {
        "setup_s": setup,
        "records_read": sum(audit.column("records_read").to_pylist()),
        "stages_s": walls,
        "checks_passed": checks,
        "peak_rss_mib": peak_rss_mib(),
        "result": summarize(
            store.read(T.RAW_MESSAGES),
            store.read(T.QUARANTINE),
            store.read(T.SESSIONS),
            store.read(T.CHUNKS),
        ),
    }


def child_main(args: argparse.Namespace) -> None:
    out_dir = Path(args.workdir) / f"{args.child}_out"
    if args.child == "core":
        prof = Path(args.profile_out) if args.profile_out else None
        data = child_core(Path(args.config), out_dir, prof)
    else:
        data = child_dagster(Path(args.config), out_dir)
    Path(args.result).write_text(json.dumps(data, default=str), encoding="utf-8")


# --------------------------------------------------------------------------- parent


def run_child(mode: str, config: Path, workdir: Path, profile: Path | None = None) -> dict:
    """Run one measurement in a fresh interpreter; its own peak RSS comes from wait4."""
    result = workdir / f"{mode}.json"
    log = workdir / f"{mode}.log"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", mode]
    cmd += ["--config", str(config), "--workdir", str(workdir), "--result", str(result)]
    if profile:
        cmd += ["--profile-out", str(profile)]
    # config.py reads MEMORY_PIPELINE_* overrides: the benchmark must not inherit any
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_PIPELINE_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    with log.open("wb") as fh:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=fh, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.stderr.write(log.read_text(errors="replace")[-6000:])
        raise SystemExit(f"{mode} child failed with exit code {proc.returncode}")
    data = json.loads(result.read_text(encoding="utf-8"))
    data["process_wall_s"] = time.perf_counter() - t0
    data["loadavg_1min"] = [load_before, os.getloadavg()[0]]
    data["peak_rss_wait4_mib"] = usage.ru_maxrss / 1024  # Linux: KiB
    return data


def run_round(data: Path, limit: int | None) -> tuple[dict, dict]:
    with tempfile.TemporaryDirectory(prefix="bench_ingest_") as tmp:
        work = Path(tmp)
        config = write_config(work, data, limit)
        core = run_child("core", config, work)
        dagster = run_child("dagster", config, work)
    return core, dagster


def verify(core: dict, dagster: dict, full: bool) -> list[tuple[str, bool, str]]:
    a, b, c = core["result"], core["result_store"], dagster["result"]
    rows = []
    for key in ("messages", "quarantine", "sessions", "chunks"):
        same = a[key] == b[key] == c[key] and (
            a["digests"][key] == b["digests"][key] == c["digests"][key]
        )
        rows.append((key, same, f"{a[key]:>9,} {b[key]:>9,} {c[key]:>9,}"))
    read = core["records_read"]
    conserved = read == dagster["records_read"] == a["messages"] + a["quarantine"]
    figures = f"{read:>9,} {dagster['records_read']:>19,}"
    rows.append(("records read = msgs + quar.", conserved, figures))
    fused = core["fused_counts"] == [a["messages"], a["quarantine"]]
    rows.append(("stages.read_all same counts", fused, f"{sum(core['fused_counts']):>9,}"))
    if full:
        nat = a["quarantine_by_reason"].get(NAT_REASON, 0)
        rows.append((f"NaT quarantined = {CORPUS_NAT}", nat == CORPUS_NAT, f"{nat:>9,}"))
        rows.append((f"all {CORPUS_UTTERANCES:,} read", read == CORPUS_UTTERANCES, f"{read:>9,}"))
    return rows


def report(rounds: list[tuple[dict, dict]], args: argparse.Namespace) -> dict[str, Any]:
    core = min((c for c, _ in rounds), key=lambda c: c["in_memory_s"]["total"])
    dag = min((d for _, d in rounds), key=lambda d: d["stages_s"]["total"])
    n = core["records_read"]
    mem, st, dg_s = core["in_memory_s"], core["store_s"], dag["stages_s"]
    res = core["result"]
    full = args.limit is None
    versions = {name: version(name) for name in ("dagster", "pyarrow")}
    out: list[str] = []
    add = out.append
    add(
        f"RealPersonaChat ingest benchmark: {n:,} utterances read, "
        f"{'every dialogue' if full else f'first {args.limit} dialogues'}, "
        f"{len(days_of_range())} daily partitions {START}..{END} ({TIMEZONE})"
    )
    add(
        f"python {platform.python_version()}, dagster {versions['dagster']}, pyarrow "
        f"{versions['pyarrow']}, {os.cpu_count()} CPUs; best of {len(rounds)} round(s); "
        "msg/s = utterances read / wall s"
    )
    loads = ", ".join(f"{c['loadavg_1min'][0]:.1f}/{d['loadavg_1min'][0]:.1f}" for c, d in rounds)
    add(f"1-min load average when each child started (core/dagster, per round): {loads}")
    add("")
    row = "{:<52}{:>8}{:>11}{:>8}"
    add(row.format("phase", "wall s", "msg/s", "cpu s"))

    def line(label: str, d: dict[str, float], key: str) -> None:
        add(row.format(label, f"{d[key]:.2f}", f"{rate(n, d[key]):,.0f}", f"{d[key + CPU]:.2f}"))

    add("core, no Dagster, whole corpus in memory")
    line("  read (reader -> records)", mem, "read")
    line("  ingest (validate/dedupe/ids + tables)", mem, "ingest")
    line("    validate, dedupe, ids (core.ingest.ingest)", mem, "ingest.validate_dedupe_ids")
    line("    tables + per-date split (stages.split_ingest)", mem, "ingest.tables_split")
    line("  sessionize (core.sessionize.sessionize)", mem, "sessionize")
    line("  chunk (core.chunking.chunk_sessions)", mem, "chunk")
    line("  total", mem, "total")
    line("  check: stages.read_all (read+ingest fused)", mem, "read_ingest_fused")
    add("core, store-based path (TableStore Parquet, all dates)")
    line("  read + ingest (as above)", st, "read+ingest")
    line("  write raw_messages/quarantine/audit", st, "write_ingest")
    line("  stages.build_sessions + write", st, "sessions")
    line("  stages.build_chunks + write", st, "chunks")
    line("  total", st, "total")
    add("dagster.materialize, ephemeral instance, one single-run backfill per stage")
    setup = f"{dag['setup_s']:.2f}"
    add(row.format("  setup: import dagster, build_assets (not counted)", setup, "", ""))
    line("  ingest multi-asset (+5 checks)", dg_s, "ingest")
    line("  sessions (+2 checks)", dg_s, "sessions")
    line("  chunks (+1 check)", dg_s, "chunks")
    line("  total", dg_s, "total")
    add("")
    ratio = dg_s["total"] / mem["total"]
    cpu_mem = dg_s["total" + CPU] / mem["total" + CPU]
    cpu_st = dg_s["total" + CPU] / st["total" + CPU]
    add(
        f"dagster / core in-memory: {ratio:.2f}x   dagster / core store-based: "
        f"{dg_s['total'] / st['total']:.2f}x   (by cpu s: {cpu_mem:.2f}x / {cpu_st:.2f}x)"
    )
    add(
        f"peak RSS (wait4 per child / VmHWM): core {core['peak_rss_wait4_mib']:,.0f} / "
        f"{core['peak_rss_mib']:,.0f} MiB (in-memory phases {core['peak_rss_in_memory_mib']:,.0f}),"
        f" dagster {dag['peak_rss_wait4_mib']:,.0f} / {dag['peak_rss_mib']:,.0f} MiB"
    )
    add("")
    add("{:<32}{:>9} {:>9} {:>9}".format("same results", "core", "store", "dagster"))
    checks = verify(core, dag, full)
    for label, ok, figures in checks:
        add(f"{label:<32}{figures:<30}  {'OK' if ok else 'DIFFERENT'}")
    reasons = ", ".join(f"{k} {v:,}" for k, v in res["quarantine_by_reason"].items())
    add(f"quarantine by reason: {reasons}")
    add("")
    core_rate = rate(n, mem["total"])
    targets = [
        (
            "core throughput",
            f">= {TARGET_CORE_MSG_S:,} msg/s",
            f"{core_rate:,.0f} msg/s",
            core_rate >= TARGET_CORE_MSG_S,
        ),
        (
            "Dagster wall / core wall",
            f"<= {TARGET_DAGSTER_RATIO}x",
            f"{ratio:.2f}x",
            ratio <= TARGET_DAGSTER_RATIO,
        ),
        (
            "peak RSS core",
            f"<= {TARGET_RSS_MIB:,} MiB",
            f"{core['peak_rss_wait4_mib']:,.0f} MiB",
            core["peak_rss_wait4_mib"] <= TARGET_RSS_MIB,
        ),
        (
            "peak RSS dagster",
            f"<= {TARGET_RSS_MIB:,} MiB",
            f"{dag['peak_rss_wait4_mib']:,.0f} MiB",
            dag["peak_rss_wait4_mib"] <= TARGET_RSS_MIB,
        ),
    ]
    tfmt = "{:<26}{:>18}{:>16}  {}"
    add(tfmt.format("target", "goal", "measured", "result"))
    for name, goal, got, ok in targets:
        add(tfmt.format(name, goal, got, "PASS" if ok else "MISS"))
    same = all(ok for _, ok, _ in checks)
    add(f"{'results identical':<26}{'core = dagster':>18}{'':>16}  {'PASS' if same else 'MISS'}")
    print("\n".join(out))
    return {
        "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "args": {"data": str(args.data), "limit": args.limit, "repeat": args.repeat},
        "env": {
            "python": platform.python_version(),
            **versions,
            "cpus": os.cpu_count(),
        },
        "records_read": n,
        "core_msg_per_s": core_rate,
        "dagster_msg_per_s": rate(n, dg_s["total"]),
        "dagster_over_core": ratio,
        "dagster_over_core_store": dg_s["total"] / st["total"],
        "dagster_over_core_cpu": cpu_mem,
        "targets": {name: {"goal": g, "measured": m, "pass": ok} for name, g, m, ok in targets},
        "results_identical": same,
        "best": {"core": core, "dagster": dag},
        "rounds": [{"core": c, "dagster": d} for c, d in rounds],
    }


def profile_core(args: argparse.Namespace) -> None:
    """The in-memory core phases under cProfile (timings inflated by the profiler)."""
    target = Path(args.json).with_name("ingest_core.prof")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench_ingest_") as tmp:
        work = Path(tmp)
        config = write_config(work, args.data, args.limit)
        data = run_child("core", config, work, profile=target)
    print("in-memory phases under cProfile (s):")
    for k, v in data["in_memory_s"].items():
        if not k.endswith(CPU):
            print(f"  {k:<32}{v:8.2f}")
    stats = pstats.Stats(str(target))
    stats.sort_stats("tottime").print_stats(args.top)
    stats.sort_stats("cumulative").print_stats(args.top)
    print(f"profile written to {target}")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="RealPersonaChat folder")
    p.add_argument("--limit", type=int, default=None, help="read only the first N dialogues")
    p.add_argument("--repeat", type=int, default=1, help="rounds; the best one is reported")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where to write the figures")
    p.add_argument("--profile", action="store_true", help="cProfile the core path instead")
    p.add_argument("--top", type=int, default=30, help="rows of the profile to print")
    p.add_argument("--child", choices=["core", "dagster"], help=argparse.SUPPRESS)
    p.add_argument("--config", help=argparse.SUPPRESS)
    p.add_argument("--workdir", help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    p.add_argument("--profile-out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child_main(args)
        return
    if args.limit is not None and args.limit < 1:
        p.error("--limit must be >= 1")
    if not (args.data / "dialogues.jsonl.gz").is_file():
        p.error(f"no dialogues.jsonl.gz in {args.data}")
    if args.profile:
        profile_core(args)
        return
    rounds = [run_round(args.data, args.limit) for _ in range(max(1, args.repeat))]
    figures = report(rounds, args)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(figures, indent=2, default=str) + "\n", encoding="utf-8")
    print(f"figures written to {args.json}")


if __name__ == "__main__":
    main()
