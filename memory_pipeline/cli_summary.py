"""What ``run`` prints after a run, and the ``status`` command.

The row counts per table (per owner on a multi-owner deployment), the retention and
evaluation lines, the purge-only run, and how the CLI names itself in a hint."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from collections import Counter
from pathlib import Path

from memory_pipeline.cli_common import (
    EXIT_USAGE,
    SUMMARY_TABLES,
    _owner_cfg,
    _report_failure,
    _writing,
)
from memory_pipeline.config import PipelineConfig
from memory_pipeline.core.common import fs
from memory_pipeline.core.common import tables as T


def _retention_line(run) -> str | None:
    """What the retention stage purged, from its materialization; None when nothing."""
    from memory_pipeline.defs.retention import META_CUTOFF, META_PURGED, RETENTION

    if RETENTION not in run.stage.keys:
        return None
    mats = [
        e.materialization
        for e in run.result.get_asset_materialization_events()
        if e.asset_key == RETENTION
    ]
    meta = {k: v.value for k, v in mats[0].metadata.items()} if mats else {}
    if not meta.get(META_PURGED):
        return None
    return f"retention: purged {meta[META_PURGED]} partitions before {meta[META_CUTOFF]}"


def _purge_only(cfg: PipelineConfig, root: Path, today: dt.date, wait: float) -> int:
    """Nothing to build, but retention is on: the purge still runs, as the retention asset
    (one run of ``stage_retention``), so expired data never outlives a run."""
    import dagster as dg

    from memory_pipeline.defs.build import build_definitions
    from memory_pipeline.defs.retention import TODAY_TAG
    from memory_pipeline.defs.runner import materialize_stages, stages

    with _writing(cfg, wait):
        [run] = materialize_stages(
            build_definitions(cfg),
            stages("retention"),
            instance=dg.DagsterInstance.get(),
            raise_on_error=False,
            log_level="CRITICAL",  # a failure is one line (_report_failure), as in cmd_run
            code_location=root,
            tags={TODAY_TAG: today.isoformat()},
        )
    if not run.success:
        _report_failure(run.result, run.stage.name, cfg.storage_root)
        return 1
    print(_retention_line(run) or "retention: nothing expired")
    return 0


def _evaluation_line(runs, cfg: PipelineConfig) -> str:
    """What the evaluation stage scored, from its materialization (not a promise)."""
    for run in runs:
        if run.stage.name != "evaluation":
            continue
        [mat] = run.result.asset_materializations_for_node("evaluation") or [None]
        if mat is None:
            break
        meta = {k: v.value for k, v in mat.metadata.items()}
        scored = f"{meta.get('time_queries', 0)} templated time queries"
        if meta.get("questions"):
            # the shipped default's figure (what search() does), not a swept configuration's
            recall = meta.get("session_recall@5")
            scored += (
                f", {meta['questions']} labelled questions (shipped default: session "
                f"recall@5 {recall})"
            )
        return f"evaluation: {scored}; report: {meta.get('report', cfg.output_dir / 'eval')}"
    return "evaluation: not run"


def print_summary(store, cfg: PipelineConfig, span, timings: dict[str, float]) -> None:
    """Rows per table and where they are: what a user wants after a run."""
    days = [span[0] + dt.timedelta(days=i) for i in range((span[1] - span[0]).days + 1)]
    rows = []
    for table in SUMMARY_TABLES:
        t = store.read(table, days)
        rows.append((table, t.num_rows, str(store.table_dir(table))))
    width = max(len(r[0]) for r in rows)
    print(f"\n{'table':<{width}}  {'rows':>9}  path")
    for name, n, path in rows:
        print(f"{name:<{width}}  {n:>9,}  {path}")
    print(f"{'warehouse':<{width}}  {'views':>9}  {cfg.warehouse_path}")
    quarantine = store.read(T.QUARANTINE, days)
    if quarantine.num_rows:
        reasons = Counter(quarantine.column("reason").to_pylist())
        print("quarantined by reason: " + ", ".join(f"{k}={v}" for k, v in sorted(reasons.items())))
    print("timings: " + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items()))


def _owner_cfgs(cfg: PipelineConfig) -> list[PipelineConfig]:
    """Each owner's configuration (``cfg`` itself for a single owner)."""
    if not cfg.multi_owner:
        return [cfg]
    return [cfg.for_owner(spec) for spec in sorted(cfg.owner_specs(), key=lambda s: s.id)]


def print_owners_summary(cfg: PipelineConfig, span, timings: dict[str, float]) -> None:
    """A multi-owner run: rows per table over every owner, and where each owner's are."""
    from memory_pipeline.core.common.owners import OWNERS_DIR, owner_store, owners_root

    days = [span[0] + dt.timedelta(days=i) for i in range((span[1] - span[0]).days + 1)]
    owners = _owner_cfgs(cfg)
    # an s3:// output: the marker is in the local working folder, the tables on the store
    stores = [owner_store(o.output_dir, o.storage_root) for o in owners]
    width = max(len(t) for t in SUMMARY_TABLES)
    where = fs.join(cfg.storage_root, OWNERS_DIR) if cfg.output_uri else owners_root(cfg.output_dir)
    print(f"\n{len(owners)} owners under {where}/<owner_id>/")
    print(f"{'table':<{width}}  {'rows':>9}  path")
    for table in SUMMARY_TABLES:
        n = sum(s.read(table, days).num_rows for s in stores)
        print(f"{table:<{width}}  {n:>9,}  <owner>/parquet/{table}")
    print(f"{'warehouse':<{width}}  {'views':>9}  <owner>/warehouse.duckdb")
    print("timings: " + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items()))
    print('search one owner:  memory-pipeline search --owner <owner_id> "what did we plan?"')


def try_lines(store, cfg: PipelineConfig, prog: str) -> str:
    """``try:`` commands made from the owner's own messages (``core/retrieval/suggest.py``):
    a search for a word that comes up on many days, a context question about the contact
    they write with most. Printed for the owner only, never logged."""
    import shlex

    from memory_pipeline.core.retrieval.suggest import COLUMNS, suggest_queries

    aliases = []
    for source in cfg.sources:
        named = source.options.get("owner_aliases", [])
        aliases += [named] if isinstance(named, str) else list(named)
    tips = suggest_queries(store.read(T.RAW_MESSAGES, columns=COLUMNS), [cfg.owner, *aliases])
    lines = []
    if tips.search:
        lines.append(f"{prog} search {shlex.quote(tips.search)} --k 3")
    if tips.context:
        lines.append(f"{prog} context {shlex.quote(tips.context)} --budget 4000")
    return "try:  " + "\n      ".join(lines) + "\n" if lines else ""


def invoked_as(argv0: str | None = None, cwd: Path | None = None) -> str:
    """How to call this CLI again, as the user can type it: the bare name when it is on PATH
    (an activated venv, pipx), else the script's path relative to the working directory
    (``.venv/bin/memory-pipeline``); ``python -m memory_pipeline.cli`` when run as a module."""
    import shutil

    argv0 = sys.argv[0] if argv0 is None else argv0
    script = Path(argv0)
    if script.name != "memory-pipeline":
        return f"{Path(sys.executable).name} -m memory_pipeline.cli"
    on_path = shutil.which("memory-pipeline")
    if on_path and Path(on_path).resolve() == script.resolve():
        return "memory-pipeline"
    here = (cwd or Path.cwd()).resolve()
    try:
        return str(script.resolve().relative_to(here))
    except ValueError:
        return str(script.resolve())


def _sibling(prog: str, name: str) -> str:
    """``name`` called the way ``prog`` was: bare when on PATH, else from the same folder."""
    if prog == "memory-pipeline":
        return name
    folder = Path(prog).parent if "/" in prog else Path(sys.executable).parent
    return str(folder / name)


def cmd_status(args: argparse.Namespace) -> int:
    from memory_pipeline.core.quality import checks as quality

    try:
        cfg = _owner_cfg(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    from memory_pipeline.core.common.owners import owner_store

    store = owner_store(cfg.output_dir, storage=cfg.storage_root)
    print(f"output: {cfg.storage_root}")
    any_data = False
    width = max(len(table) for table in SUMMARY_TABLES)
    for table in SUMMARY_TABLES:
        dates = store.dates(table)
        if not dates:
            print(f"{table:<{width}}  not materialized")
            continue
        any_data = True
        t = store.read(table, dates)
        print(
            f"{table:<{width}}  {len(dates):>5} partitions {dates[0]}..{dates[-1]} "
            f"{t.num_rows:>9,} rows"
        )
    if not any_data:
        print("nothing materialized yet: run `memory-pipeline run`")
        return 0
    msgs, quar = store.read(T.RAW_MESSAGES), store.read(T.QUARANTINE)
    sessions, chunks = store.read(T.SESSIONS), store.read(T.CHUNKS)
    checks = {
        "message ids unique": quality.unique(msgs, "message_id"),
        "conservation (read = ingested + quarantined)": quality.conservation(
            store.read(T.INGEST_AUDIT), msgs, quar
        ),
        "every message in exactly one session": quality.every_message_in_one_session(
            sessions, msgs
        ),
        "sessions ordered and gap-respecting": quality.sessions_respect_gap(
            sessions, msgs, cfg.session_gap_minutes
        ),
        "chunk windows cover sessions": quality.chunk_invariants(
            chunks, sessions, cfg.chunk_size, cfg.chunk_stride
        ),
    }
    print("\nchecks (recomputed from the stored tables):")
    ok_all = True
    for name, (ok, meta) in checks.items():
        ok_all &= bool(ok)
        extra = "" if ok else f"  {meta}"
        print(f"  {'PASS' if ok else 'FAIL'}  {name}{extra}")
    return 0 if ok_all else 1
