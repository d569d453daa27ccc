"""Memories and dossiers benchmark: all of RealPersonaChat in one backfill, then the nightly update.

Usage (from the repository root)::

    /work/venv/bin/python benchmarks/bench_memories.py             # full corpus, one round
    /work/venv/bin/python benchmarks/bench_memories.py --repeat 3  # best of 3 rounds
    /work/venv/bin/python benchmarks/bench_memories.py --days 10   # smoke run: first 10 partitions
    /work/venv/bin/python benchmarks/bench_memories.py --reuse     # keep the upstream tables

The configuration is bench_ingest's (the ``realpersonachat`` source with ``owner = ""``: every
dialogue, contact = the sorted speaker pair; Asia/Tokyo; daily partitions 2022-07-29..2022-11-05).
Every measurement runs in a fresh interpreter (peak RSS per child from ``wait4``):

- ``prep`` (once, not part of the figures): the real Dagster assets raw_messages / quarantine /
  ingest_audit, sessions and session_enrichment, each one single-run backfill over the range,
  into ``<work>/out``. Chunks and embeddings are not inputs of memories or dossiers.
- ``dagster``: the full build, ``memories`` then ``dossiers``, each one single-run backfill over
  every partition (range tags, ephemeral instance, console logger at ERROR; the blocking asset
  checks run inside, as in production). Then the nightly shape, with everything before already
  built: memories + dossiers of the last day only (one run per asset, as a fresh run worker
  would: the first runs of the process), of the last two days D-1..D (what the nightly schedule
  requests), and the last day again (warm process). The last days of RealPersonaChat are nearly
  empty, so the update is also run in place on a typical and on the busiest day (see
  ``incremental_spans``). The rebuilt partitions must equal the full build's (content digest).
- ``core``: the same work without Dagster in a copy of the upstream tables:
  ``stages.build_memories`` over all dates + writes, the fold ``stages.write_dossiers``
  (partition writes + the current ``.md`` files); then the one-day and two-day updates through
  the same functions.

Thin wrappers (a few microseconds per call) time the parts of each run: ``TableStore.read`` /
``write`` per table, ``prior_dossier_states``, ``extract_memories``, ``build_day``,
``dossier_rows``, the asset checks' quality functions and the ``.md`` writes; times are exclusive
(a read inside ``prior_dossier_states`` counts as a read), and "Dagster + unwrapped" is the run's
wall time minus all of them. Figures go to benchmarks/results/memories.json (git-ignored).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

from _common import CPU, peak_rss_mib, rate, timed

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data" / "realpersonachat"
DEFAULT_WORK = REPO / "benchmarks" / "results" / "memories_work"
DEFAULT_JSON = REPO / "benchmarks" / "results" / "memories.json"

SOURCE = "realpersonachat"
TIMEZONE = "Asia/Tokyo"
START = dt.date(2022, 7, 29)
END = dt.date(2022, 11, 5)
CORPUS_SPEAKERS = 233
CORPUS_PAIRS = 1_572

TARGET_INCREMENTAL_SHARE = 0.05  # a one-day update costs <= 5 % of the full build
TARGET_RSS_MIB = 2048

UPSTREAM_STAGES = (
    ("ingest", ["raw_messages", "quarantine", "ingest_audit"]),
    ("sessions", ["sessions"]),
    ("session_enrichment", ["session_enrichment"]),
)
OUTPUT_TABLES = ("memories", "memory_rejects", "dossiers")
UPSTREAM_TABLES = ("raw_messages", "quarantine", "ingest_audit", "sessions", "session_enrichment")
QUIET_LEVEL = "ERROR"  # Dagster's console logger (defs/runner.py quiet_run_config)
INCR_LABELS = {  # see incremental_spans
    "one_day": "last day D (first runs)",
    "two_days": "last two days (nightly)",
    "one_day_warm": "last day D again (warm)",
    "typical_day": "typical day, in place",
    "busiest_day": "busiest day, in place",
    "busiest_two_days": "busiest day-1..day, in place",
}


# --------------------------------------------------------------------------- helpers


def days_of_range(n_days: int | None) -> list[dt.date]:
    n = (END - START).days + 1
    return [START + dt.timedelta(days=i) for i in range(min(n, n_days or n))]


def write_config(folder: Path, data: Path, days: list[dt.date]) -> Path:
    """bench_ingest's memory_pipeline.toml (``owner = ""``: every dialogue), end = last day."""
    lines = [
        "[pipeline]",
        'owner = "benchmark"  # required; the source below overrides it with no owner',
        f'timezone = "{TIMEZONE}"',
        f'start_date = "{days[0].isoformat()}"',
        f'end_date = "{days[-1].isoformat()}"',
        'output_dir = "out"',
        'dossier_dir = "dossiers"',
        "",
        "[[sources]]",
        f'name = "{SOURCE}"',
        'kind = "realpersonachat"',
        f"path = {json.dumps(str(data.resolve()))}",
        'owner = ""  # "" -> None: benchmark mode, every dialogue',
    ]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "memory_pipeline.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def check_config(cfg: Any) -> None:
    (spec,) = cfg.sources
    if spec.owner is not None or spec.kind != SOURCE or cfg.timezone != TIMEZONE:
        raise SystemExit(f"benchmark config not as intended: {spec}")


def digest(values: list[Any]) -> str:
    data = "\n".join(sorted(json.dumps(v, default=str, ensure_ascii=False) for v in values))
    return hashlib.blake2b(data.encode(), digest_size=8).hexdigest()


def table_digest(table: Any, columns: list[str]) -> str:
    return digest([list(r.values()) for r in table.select(columns).to_pylist()])


MEMORY_COLUMNS = ["memory_id", "session_id", "kind", "text", "local_date"]
DOSSIER_COLUMNS = ["contact_id", "local_date", "markdown", "state"]


def outputs_summary(store: Any, dossier_dir: Path, days: list[dt.date]) -> dict[str, Any]:
    """Counts and digests of memories / rejects / dossiers (outside every timed region)."""
    from memory_pipeline.core.common import tables as T
    from memory_pipeline.core.memories.extract import count_by_kind

    memories = store.read(T.MEMORIES, days)
    rejects = store.read(T.MEMORY_REJECTS, days)
    dossiers = store.read(T.DOSSIERS, days)
    return {
        "memories": memories.num_rows,
        "memories_by_kind": count_by_kind(memories),
        "memory_rejects": rejects.num_rows,
        "dossier_versions": dossiers.num_rows,
        "contacts": len(set(dossiers.column("contact_id").to_pylist())),
        "md_files": len(list(dossier_dir.glob("*.md"))) if dossier_dir.is_dir() else 0,
        "digests": {
            "memories": table_digest(memories, MEMORY_COLUMNS),
            "dossiers": table_digest(dossiers, DOSSIER_COLUMNS),
        },
    }


# --------------------------------------------------------------------------- probe


class Probe:
    """Exclusive wall time per label of wrapped functions (nested calls subtract)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._stack: list[float] = []  # child time accumulated per open frame

    def reset(self) -> None:
        self.seconds.clear()
        self.calls.clear()

    def snapshot(self) -> dict[str, dict[str, float]]:
        return {
            k: {"s": self.seconds[k], "calls": self.calls[k]}
            for k in sorted(self.seconds, key=lambda k: -self.seconds[k])
        }

    def wrap(self, owner: Any, attr: str, label: str | Callable[..., str]) -> None:
        original = getattr(owner, attr)
        probe = self

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            name = label(*args, **kwargs) if callable(label) else label
            probe._stack.append(0.0)
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - t0
                children = probe._stack.pop()
                probe.seconds[name] += elapsed - children
                probe.calls[name] += 1
                if probe._stack:
                    probe._stack[-1] += elapsed

        wrapper.__wrapped__ = original  # type: ignore[attr-defined]
        setattr(owner, attr, wrapper)


def install_probe() -> Probe:
    from memory_pipeline.core.common import storage
    from memory_pipeline.core.memories import dossier
    from memory_pipeline.core.memories import extract as memories
    from memory_pipeline.core.memories import stage as stages
    from memory_pipeline.core.quality import checks as quality

    probe = Probe()
    probe.wrap(storage.TableStore, "read", lambda self, table, *a, **k: f"read {table}")
    probe.wrap(storage.TableStore, "write", lambda self, table, *a, **k: f"write {table}")
    probe.wrap(stages, "prior_dossier_states", "prior_dossier_states (excl. reads)")
    probe.wrap(memories, "extract_memories", "extract_memories")
    probe.wrap(dossier, "build_day", "build_day (fold)")
    probe.wrap(dossier, "dossier_rows", "dossier_rows (render)")
    probe.wrap(quality, "memories_cite_sources", "check memories_cite_sources")
    probe.wrap(quality, "unique", "check unique")
    probe.wrap(quality, "dossiers_valid", "check dossiers_valid")
    # stages.write_dossiers imports it at call time, so wrapping the module attribute covers
    # the asset and the core path alike
    probe.wrap(dossier, "write_markdown_atomic", "write .md files")
    return probe


# --------------------------------------------------------------------------- children


def child_prep(config: Path, out_dir: Path, days: list[dt.date]) -> dict[str, Any]:
    import dagster as dg

    from memory_pipeline.core.common.storage import TableStore
    from memory_pipeline.defs.build import build_assets
    from memory_pipeline.defs.providers import provider_resources
    from memory_pipeline.defs.resources import PipelineResource
    from memory_pipeline.defs.runner import materialize_stages, stage_for, stage_resources

    pipeline = PipelineResource(config_file=str(config), output_dir=str(out_dir))
    check_config(pipeline.cfg)
    assets = build_assets(pipeline.cfg)
    instance = dg.DagsterInstance.ephemeral()
    walls: dict[str, float] = {}
    for stage, keys in UPSTREAM_STAGES:
        with timed(walls, stage):
            [run] = materialize_stages(
                assets,
                [stage_for(keys, stage)],
                days=days,
                resources=stage_resources(pipeline, provider_resources(env={})),
                instance=instance,
                log_level=QUIET_LEVEL,
            )
        failed = [e.check_name for e in run.checks if not e.passed]
        if not run.success or failed:
            raise SystemExit(f"upstream stage {stage} failed (checks failed: {failed})")
    store = TableStore(out_dir)
    return {"stages_s": walls, "peak_rss_mib": peak_rss_mib(), **corpus_counts(store, days)}


def corpus_counts(store: Any, days: list[dt.date]) -> dict[str, Any]:
    from memory_pipeline.core.common import tables as T

    sessions = store.read(T.SESSIONS, days).select(["contact_id", "local_date"])
    messages = store.read(T.RAW_MESSAGES, days)
    per_day = {d.isoformat(): 0 for d in days}
    for d in sessions.column("local_date").to_pylist():
        per_day[d.isoformat()] += 1
    speakers = (
        set(messages.column("sender").to_pylist()) if "sender" in messages.schema.names else set()
    )
    return {
        "sessions": sessions.num_rows,
        "messages": messages.num_rows,
        "contacts_with_sessions": len(set(sessions.column("contact_id").to_pylist())),
        "speakers": len(speakers),
        "sessions_per_day": per_day,
    }


class DagsterRunner:
    """materialize() of the real memories / dossiers assets into one output folder."""

    def __init__(self, config: Path, out_dir: Path) -> None:
        import dagster as dg

        from memory_pipeline.defs import runner
        from memory_pipeline.defs.build import build_assets
        from memory_pipeline.defs.providers import provider_resources
        from memory_pipeline.defs.resources import PipelineResource

        self.runner = runner
        self.pipeline = PipelineResource(config_file=str(config), output_dir=str(out_dir))
        self.cfg = self.pipeline.cfg
        check_config(self.cfg)
        self.assets = build_assets(self.cfg)
        self.resources = runner.stage_resources(self.pipeline, provider_resources(env={}))
        self.instance = dg.DagsterInstance.ephemeral()

    def run(self, key: str, days: list[dt.date]) -> dict[str, Any]:
        # one day is that partition, more a single-run backfill (defs/runner.py range_request)
        [done] = self.runner.materialize_stages(
            self.assets,
            [self.runner.stage_for([key])],
            days=days,
            resources=self.resources,
            instance=self.instance,
            log_level=QUIET_LEVEL,
        )
        res = done.result
        failed = [e.check_name for e in res.get_asset_check_evaluations() if not e.passed]
        if not res.success or failed:
            raise SystemExit(f"{key} over {days[0]}..{days[-1]} failed (checks: {failed})")
        # a single-run backfill reports one materialization per partition; the run's own
        # figures (seconds, calls) are named range_* (defs/helpers.py range_metadata)
        meta = res.get_asset_materialization_events()[0].materialization.metadata
        return {k: getattr(v, "value", v) for k, v in meta.items() if k != "by_kind"}


def timed_run(runner: DagsterRunner, probe: Probe, key: str, days: list[dt.date]) -> dict:
    probe.reset()
    out: dict[str, Any] = {}
    with timed(out, "wall"):
        meta = runner.run(key, days)
    parts = probe.snapshot()
    wrapped = sum(p["s"] for p in parts.values())
    return {
        "wall": out["wall"],
        "cpu": out["wall" + CPU],
        "days": [days[0].isoformat(), days[-1].isoformat(), len(days)],
        "asset_seconds": meta.get("range_seconds"),
        "metadata": {k: v for k, v in meta.items() if isinstance(v, int | float | str)},
        "parts": parts,
        "dagster_and_unwrapped": out["wall"] - wrapped,
    }


def child_dagster(config: Path, out_dir: Path, days: list[dt.date]) -> dict[str, Any]:
    t0 = time.perf_counter()
    import dagster  # noqa: F401  (import time is setup)

    import memory_pipeline.defs.memories  # noqa: F401
    from memory_pipeline.core.common.storage import TableStore

    runner = DagsterRunner(config, out_dir)
    probe = install_probe()
    store = TableStore(out_dir)
    setup = time.perf_counter() - t0
    full = {key: timed_run(runner, probe, key, days) for key in ("memories", "dossiers")}
    rss_full = peak_rss_mib()
    summary = outputs_summary(store, runner.cfg.dossiers_path, days)
    spans = incremental_spans(store, days)
    before = {
        name: outputs_summary(store, runner.cfg.dossiers_path, span)["digests"]
        for name, span in spans.items()
    }
    incremental: dict[str, dict[str, Any]] = {}
    for name, span in spans.items():
        incremental[name] = {
            key: timed_run(runner, probe, key, span) for key in ("memories", "dossiers")
        }
        after = outputs_summary(store, runner.cfg.dossiers_path, span)["digests"]
        incremental[name]["same_as_full"] = after == before[name]
        incremental[name]["span"] = [d.isoformat() for d in span]
    return {
        "setup_s": setup,
        "full": full,
        "incremental": incremental,
        "result": summary,
        "peak_rss_full_mib": rss_full,
        "peak_rss_mib": peak_rss_mib(),
    }


def incremental_spans(store: Any, days: list[dt.date]) -> dict[str, list[dt.date]]:
    """The nightly shapes measured, in order.

    ``one_day`` / ``two_days``: the last partition (D, and D-1..D as the nightly schedule runs
    it) with everything before built: the literal nightly. On RealPersonaChat the last days are
    nearly empty, so the same update is also measured in place on a ``typical_day`` (session
    count closest to the mean per day) and the ``busiest_day`` (and D-1..D ending on it): the
    partitions before it are built, later ones exist and stay untouched.
    """
    from memory_pipeline.core.common import tables as T

    counts = {d: 0 for d in days}
    for d in store.read(T.SESSIONS, days).column("local_date").to_pylist():
        counts[d] += 1
    mean = sum(counts.values()) / len(days)
    busy = max(days, key=lambda d: (counts[d], -d.toordinal()))
    typical = min((d for d in days if counts[d]), key=lambda d: (abs(counts[d] - mean), d))
    i = days.index(busy)
    return {
        "one_day": days[-1:],
        "two_days": days[-2:],
        "one_day_warm": days[-1:],
        "typical_day": [typical],
        "busiest_day": [busy],
        "busiest_two_days": days[i - 1 : i + 1] if i else days[:2],
    }


def child_core(out_dir: Path, upstream: Path, config: Path, days: list[dt.date]) -> dict[str, Any]:
    t0 = time.perf_counter()
    from memory_pipeline.config import load_config
    from memory_pipeline.core.common import tables as T
    from memory_pipeline.core.common.storage import TableStore
    from memory_pipeline.core.memories.stage import (
        build_memories,
        prior_dossier_states,
        write_dossiers,
    )

    cfg = load_config(config, env={})
    check_config(cfg)
    probe = install_probe()
    store = TableStore(out_dir)
    dossier_dir = out_dir / "dossiers_md"
    setup = time.perf_counter() - t0
    if "dagster" in sys.modules:
        raise SystemExit("the core child imported dagster")

    def memories_step(span: list[dt.date]) -> None:
        for day, (mem, rejects) in build_memories(store, span).per_day.items():
            store.write(T.MEMORIES, mem, day)
            store.write(T.MEMORY_REJECTS, rejects, day)

    def dossiers_step(span: list[dt.date]) -> None:
        write_dossiers(store, span, dossier_dir)

    def measure(step: Callable[[list[dt.date]], None], span: list[dt.date]) -> dict[str, Any]:
        probe.reset()
        out: dict[str, float] = {}
        with timed(out, "wall"):
            step(span)
        return {"wall": out["wall"], "cpu": out["wall" + CPU], "parts": probe.snapshot()}

    full = {"memories": measure(memories_step, days), "dossiers": measure(dossiers_step, days)}
    rss_full = peak_rss_mib()
    summary = outputs_summary(store, dossier_dir, days)
    incremental = {}
    for name, span in incremental_spans(store, days).items():
        if name == "one_day_warm":
            continue
        incremental[name] = {
            "memories": measure(memories_step, span),
            "dossiers": measure(dossiers_step, span),
            "span": [d.isoformat() for d in span],
        }
    prior: dict[str, float] = {}
    with timed(prior, "prior_dossier_states"):
        states = prior_dossier_states(store, days[-1])
    prior["contacts"] = len(states)
    return {
        "setup_s": setup,
        "full": full,
        "incremental": incremental,
        "prior_dossier_states_last_day": prior,
        "result": summary,
        "peak_rss_full_mib": rss_full,
        "peak_rss_mib": peak_rss_mib(),
    }


def child_main(args: argparse.Namespace) -> None:
    work = Path(args.work)
    config = work / "memory_pipeline.toml"
    days = days_of_range(args.days)
    if args.child == "prep":
        data = child_prep(config, work / "out", days)
    elif args.child == "dagster":
        data = child_dagster(config, work / "out", days)
    else:
        data = child_core(work / "core_out", work / "out", config, days)
    Path(args.result).write_text(json.dumps(data, default=str), encoding="utf-8")


# --------------------------------------------------------------------------- parent


def run_child(mode: str, work: Path, n_days: int | None) -> dict[str, Any]:
    result = work / f"{mode}.json"
    log = work / f"{mode}.log"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", mode, "--work", str(work)]
    cmd += ["--result", str(result)]
    if n_days:
        cmd += ["--days", str(n_days)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_PIPELINE_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    with log.open("wb") as fh:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=fh, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.stderr.write(log.read_text(errors="replace")[-6000:])
        raise SystemExit(f"{mode} child failed with exit code {code}")
    data = json.loads(result.read_text(encoding="utf-8"))
    data["process_wall_s"] = time.perf_counter() - t0
    data["loadavg_1min"] = [load_before, os.getloadavg()[0]]
    data["peak_rss_wait4_mib"] = usage.ru_maxrss / 1024
    data["cpu_children_s"] = usage.ru_utime + usage.ru_stime
    return data


def clear_outputs(work: Path) -> None:
    """Remove memories / rejects / dossiers (tables and .md files) of earlier rounds."""
    for table in OUTPUT_TABLES:
        shutil.rmtree(work / "out" / "parquet" / table, ignore_errors=True)
    shutil.rmtree(work / "dossiers", ignore_errors=True)
    shutil.rmtree(work / "core_out", ignore_errors=True)
    for table in UPSTREAM_TABLES:  # the core path works on its own copy of the inputs
        src = work / "out" / "parquet" / table
        if src.is_dir():
            shutil.copytree(src, work / "core_out" / "parquet" / table)


def upstream_ready(work: Path, days: list[dt.date]) -> bool:
    folder = work / "out" / "parquet"
    return all(
        (folder / t / f"{d.isoformat()}.parquet").is_file() for t in UPSTREAM_TABLES for d in days
    )


def pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.2f} %" if whole > 0 else "-"


def report(
    prep: dict[str, Any], rounds: list[tuple[dict, dict]], args: argparse.Namespace
) -> dict[str, Any]:
    def full_total(d: dict) -> float:
        return d["full"]["memories"]["wall"] + d["full"]["dossiers"]["wall"]

    dag = min((d for d, _ in rounds), key=full_total)
    core = min((c for _, c in rounds), key=full_total)
    days = days_of_range(args.days)
    n_sessions = prep["sessions"]
    last = days[-1].isoformat()
    per_day = prep["sessions_per_day"]
    full_wall = full_total(dag)
    full_cpu = dag["full"]["memories"]["cpu"] + dag["full"]["dossiers"]["cpu"]
    core_wall = full_total(core)
    core_cpu = core["full"]["memories"]["cpu"] + core["full"]["dossiers"]["cpu"]

    def best_incr(name: str, who: str = "dagster") -> dict[str, float]:
        pool = [d if who == "dagster" else c for d, c in rounds]
        best = min(
            pool,
            key=lambda r: sum(r["incremental"][name][k]["wall"] for k in ("memories", "dossiers")),
        )
        inc = best["incremental"][name]
        return {
            "memories": inc["memories"]["wall"],
            "dossiers": inc["dossiers"]["wall"],
            "total": inc["memories"]["wall"] + inc["dossiers"]["wall"],
            "cpu": inc["memories"]["cpu"] + inc["dossiers"]["cpu"],
            "same_as_full": inc.get("same_as_full", True),
            "span": inc.get("span"),
        }

    incr = {name: best_incr(name) for name in INCR_LABELS}
    incr_core = {name: best_incr(name, "core") for name in INCR_LABELS if name != "one_day_warm"}
    share = {name: x["total"] / full_wall for name, x in incr.items()}
    share_one, share_two = share["one_day"], share["two_days"]
    res = dag["result"]
    versions = {name: version(name) for name in ("dagster", "pyarrow")}
    out: list[str] = []
    add = out.append
    add(
        f"RealPersonaChat memories + dossiers benchmark: {n_sessions:,} sessions, "
        f"{prep['messages']:,} messages, {prep['speakers']} speakers, "
        f"{prep['contacts_with_sessions']:,} contacts (speaker pairs), {len(days)} daily "
        f"partitions {days[0]}..{days[-1]} ({TIMEZONE})"
    )
    add(
        f"python {platform.python_version()}, dagster {versions['dagster']}, pyarrow "
        f"{versions['pyarrow']}, {os.cpu_count()} CPUs; best of {len(rounds)} round(s); "
        f"rule-based memory extractor"
    )
    loads = ", ".join(f"{d['loadavg_1min'][0]:.1f}/{c['loadavg_1min'][0]:.1f}" for d, c in rounds)
    add(f"1-min load average when each child started (dagster/core, per round): {loads}")
    add(
        "upstream (prep, Dagster, not counted): "
        + ", ".join(f"{k} {v:.1f} s" for k, v in prep["stages_s"].items() if not k.endswith(CPU))
        + ("" if "reused" not in prep else " [reused from an earlier run]")
    )
    add("")
    row = "{:<62}{:>9}{:>9}{:>12}{:>10}"
    add(
        row.format(
            "full build (one single-run backfill per asset)",
            "wall s",
            "cpu s",
            "sessions/s",
            "% full",
        )
    )

    def line(label: str, wall: float, cpu: float, n: int | None = n_sessions) -> None:
        r = f"{rate(n, wall):,.0f}" if n else ""
        add(row.format(label, f"{wall:.2f}", f"{cpu:.2f}", r, pct(wall, full_wall)))

    add(f"dagster (setup: import + build_assets {dag['setup_s']:.1f} s, not counted)")
    for key in ("memories", "dossiers"):
        f = dag["full"][key]
        line(f"  {key}", f["wall"], f["cpu"])
    line("  memories + dossiers", full_wall, full_cpu)
    add("core, no Dagster (stages.build_memories + writes / write_dossiers)")
    for key in ("memories", "dossiers"):
        f = core["full"][key]
        line(f"  {key}", f["wall"], f["cpu"])
    line("  memories + dossiers", core_wall, core_cpu)
    add(f"  dagster / core: {full_wall / core_wall:.2f}x wall, {full_cpu / core_cpu:.2f}x cpu")
    add("")
    add(
        f"incremental update, everything before built (mean sessions per day "
        f"{n_sessions / len(days):.0f}; the last days of the corpus are nearly empty)"
    )
    add(row.format("", "wall s", "cpu s", "sessions", "% full"))

    def span_sessions(span: list[str]) -> int:
        return sum(per_day[d] for d in span)

    for who, table in (("dagster", incr), ("core", incr_core)):
        for name, x in table.items():
            span = x["span"] or [last]
            when = span[0] if len(span) == 1 else f"{span[0]}..{span[-1]}"
            label = f"{who} {INCR_LABELS[name]} {when}"
            add(
                row.format(
                    label[:61],
                    f"{x['total']:.2f}",
                    f"{x['cpu']:.2f}",
                    f"{span_sessions(span):,}",
                    pct(x["total"], full_wall),
                )
            )
            same = (
                "" if who == "core" else f"; = full build: {'yes' if x['same_as_full'] else 'NO'}"
            )
            add(f"    memories {x['memories']:.2f} s, dossiers {x['dossiers']:.2f} s{same}")
    prior = core["prior_dossier_states_last_day"]
    add(
        f"  prior_dossier_states(before={last}) alone: {prior['prior_dossier_states']:.2f} s "
        f"({prior['contacts']:,} contacts, reads every earlier dossier partition)"
    )
    add("")
    add("where the time goes (exclusive seconds of wrapped calls; rest = Dagster + unwrapped)")
    for title, run in (
        ("full memories", dag["full"]["memories"]),
        ("full dossiers", dag["full"]["dossiers"]),
        ("one day memories", dag["incremental"]["one_day"]["memories"]),
        ("one day dossiers", dag["incremental"]["one_day"]["dossiers"]),
        ("warm one day memories", dag["incremental"]["one_day_warm"]["memories"]),
        ("warm one day dossiers", dag["incremental"]["one_day_warm"]["dossiers"]),
        ("typical day memories", dag["incremental"]["typical_day"]["memories"]),
        ("typical day dossiers", dag["incremental"]["typical_day"]["dossiers"]),
        ("busiest day memories", dag["incremental"]["busiest_day"]["memories"]),
        ("busiest day dossiers", dag["incremental"]["busiest_day"]["dossiers"]),
    ):
        parts = sorted(run["parts"].items(), key=lambda kv: -kv[1]["s"])
        shown = ", ".join(
            f"{k} {v['s']:.2f}" + (f" ({v['calls']}x)" if v["calls"] > 1 else "")
            for k, v in parts
            if v["s"] >= 0.01
        )
        add(
            f"  {title} ({run['wall']:.2f} s): {shown}; "
            f"Dagster + unwrapped {run['dagster_and_unwrapped']:.2f}"
        )
    add("")
    kinds = ", ".join(f"{k} {v:,}" for k, v in res["memories_by_kind"].items())
    add(f"memories {res['memories']:,} ({kinds}); rejected candidates {res['memory_rejects']:,}")
    add(
        f"dossier versions {res['dossier_versions']:,}, contacts {res['contacts']:,}, "
        f".md files written {res['md_files']:,}"
    )
    same = (
        res["digests"] == core["result"]["digests"]
        and res["contacts"] == core["result"]["contacts"]
    )
    add(f"core and dagster give the same memories and dossiers: {'yes' if same else 'NO'}")
    add(
        f"peak RSS (wait4 per child): dagster {dag['peak_rss_wait4_mib']:,.0f} MiB (after the full "
        f"build {dag['peak_rss_full_mib']:,.0f}), core {core['peak_rss_wait4_mib']:,.0f} MiB, "
        f"prep {prep.get('peak_rss_wait4_mib', 0):,.0f} MiB"
    )
    add("")
    full_corpus = args.days is None
    targets = [
        (
            "one day / full build",
            f"<= {TARGET_INCREMENTAL_SHARE:.0%}",
            f"{100 * share_one:.2f} %",
            share_one <= TARGET_INCREMENTAL_SHARE,
        ),
        (
            "two days / full (info)",
            f"<= {TARGET_INCREMENTAL_SHARE:.0%}",
            f"{100 * share_two:.2f} %",
            share_two <= TARGET_INCREMENTAL_SHARE,
        ),
        (
            "one day / full, cpu s",
            f"<= {TARGET_INCREMENTAL_SHARE:.0%}",
            f"{100 * incr['one_day']['cpu'] / full_cpu:.2f} %",
            incr["one_day"]["cpu"] / full_cpu <= TARGET_INCREMENTAL_SHARE,
        ),
        (
            "typical day / full (info)",
            f"<= {TARGET_INCREMENTAL_SHARE:.0%}",
            f"{100 * share['typical_day']:.2f} %",
            share["typical_day"] <= TARGET_INCREMENTAL_SHARE,
        ),
        (
            "busiest day / full (info)",
            f"<= {TARGET_INCREMENTAL_SHARE:.0%}",
            f"{100 * share['busiest_day']:.2f} %",
            share["busiest_day"] <= TARGET_INCREMENTAL_SHARE,
        ),
        (
            "peak RSS dagster",
            f"<= {TARGET_RSS_MIB:,} MiB",
            f"{dag['peak_rss_wait4_mib']:,.0f} MiB",
            dag["peak_rss_wait4_mib"] <= TARGET_RSS_MIB,
        ),
        ("core = dagster results", "same", "same" if same else "different", same),
        (
            "incremental = full",
            "same partitions",
            "same" if all(x["same_as_full"] for x in incr.values()) else "different",
            all(x["same_as_full"] for x in incr.values()),
        ),
    ]
    if full_corpus:
        targets.append(
            (
                "contacts",
                f"= {CORPUS_PAIRS:,}",
                f"{res['contacts']:,}",
                res["contacts"] == CORPUS_PAIRS,
            )
        )
        targets.append(
            (
                "speakers",
                f"= {CORPUS_SPEAKERS}",
                f"{prep['speakers']}",
                prep["speakers"] == CORPUS_SPEAKERS,
            )
        )
    tfmt = "{:<26}{:>18}{:>16}  {}"
    add(tfmt.format("target", "goal", "measured", "result"))
    for name, goal, got, ok in targets:
        add(tfmt.format(name, goal, got, "PASS" if ok else "MISS"))
    print("\n".join(out))
    return {
        "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "args": {
            "data": str(args.data),
            "days": args.days,
            "repeat": args.repeat,
            "work": str(args.work),
        },
        "env": {"python": platform.python_version(), **versions, "cpus": os.cpu_count()},
        "corpus": {k: v for k, v in prep.items() if k != "sessions_per_day"},
        "sessions_per_day": per_day,
        "full_build_s": {
            "dagster": {k: dag["full"][k]["wall"] for k in ("memories", "dossiers")}
            | {"total": full_wall, "cpu": full_cpu},
            "core": {k: core["full"][k]["wall"] for k in ("memories", "dossiers")}
            | {"total": core_wall, "cpu": core_cpu},
        },
        "sessions_per_s": {
            "dagster_memories": rate(n_sessions, dag["full"]["memories"]["wall"]),
            "dagster_dossiers": rate(n_sessions, dag["full"]["dossiers"]["wall"]),
            "dagster_total": rate(n_sessions, full_wall),
            "core_total": rate(n_sessions, core_wall),
        },
        "incremental_s": {"dagster": incr, "core": incr_core},
        "incremental_share_of_full": share,
        "prior_dossier_states_last_day": prior,
        "result": res,
        "targets": {name: {"goal": g, "measured": m, "pass": ok} for name, g, m, ok in targets},
        "prep": prep,
        "best": {"dagster": dag, "core": core},
        "rounds": [{"dagster": d, "core": c} for d, c in rounds],
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="RealPersonaChat folder")
    p.add_argument("--work", type=Path, default=DEFAULT_WORK, help="work folder (outputs)")
    p.add_argument("--days", type=int, default=None, help="only the first N partitions (smoke run)")
    p.add_argument("--repeat", type=int, default=1, help="rounds; the best one is reported")
    p.add_argument("--reuse", action="store_true", help="reuse upstream tables already in --work")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where to write the figures")
    p.add_argument("--child", choices=["prep", "dagster", "core"], help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child_main(args)
        return
    if args.days is not None and args.days < 2:
        p.error("--days must be >= 2 (the two-day update needs two partitions)")
    if not (args.data / "dialogues.jsonl.gz").is_file():
        p.error(f"no dialogues.jsonl.gz in {args.data}")
    work = args.work.resolve()
    days = days_of_range(args.days)
    config = work / "memory_pipeline.toml"
    wanted = write_config(work / ".next", args.data, days).read_text(encoding="utf-8")
    shutil.rmtree(work / ".next")
    prep_json = work / "prep_figures.json"
    reuse = (
        args.reuse
        and config.is_file()
        and config.read_text(encoding="utf-8") == wanted
        and prep_json.is_file()
        and upstream_ready(work, days)
    )
    if reuse:
        prep = json.loads(prep_json.read_text(encoding="utf-8")) | {"reused": True}
        print(f"reusing the upstream tables in {work}")
    else:
        shutil.rmtree(work / "out", ignore_errors=True)
        write_config(work, args.data, days)
        print(f"building the upstream tables into {work}/out ...", flush=True)
        prep = run_child("prep", work, args.days)
        prep_json.write_text(json.dumps(prep, default=str), encoding="utf-8")
    rounds = []
    for i in range(max(1, args.repeat)):
        clear_outputs(work)
        print(f"round {i + 1}: dagster ...", flush=True)
        dag = run_child("dagster", work, args.days)
        print(f"round {i + 1}: core ...", flush=True)
        core = run_child("core", work, args.days)
        rounds.append((dag, core))
    print()
    figures = report(prep, rounds, args)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(figures, indent=2, default=str) + "\n", encoding="utf-8")
    print(f"figures written to {args.json}")


if __name__ == "__main__":
    main()
