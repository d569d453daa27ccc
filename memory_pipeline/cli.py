"""``memory-pipeline``: run the pipeline and inspect what it wrote, without the UI."""

from __future__ import annotations

import argparse
import builtins
import datetime as dt
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

from memory_pipeline.config import ConfigError, PipelineConfig, owner_config
from memory_pipeline.config import load_config as _load_config
from memory_pipeline.core.common import fs
from memory_pipeline.core.common import tables as T
from memory_pipeline.core.common.lock import LockBusy
from memory_pipeline.core.common.records import SourceError

# the date-partitioned tables, in DAG order: what `run` and `status` count
SUMMARY_TABLES = tuple(t.name for t in T.REGISTRY if t.partitioned)

DEFAULT_LOCOMO = "../shared/data/locomo/locomo_dev.json"

# exit codes (README, "CLI"): like grep, 1 is "no match" for search; 2 is bad input of any kind
EXIT_OK, EXIT_NO_MATCH, EXIT_USAGE = 0, 1, 2
EXIT_FAILED = 1  # a run (or a write) that failed for a reason other than the input
EXIT_BROKEN_PIPE = 128 + 13  # what a shell reports for a writer killed by SIGPIPE
# how long a writing command waits for another one on the same output (--wait)
DEFAULT_WAIT_SECONDS = 3600


def load_config(path: str | Path | None = None) -> PipelineConfig:
    """The configuration; for an ``s3://`` output, the object store is set up from the
    AWS_* variables (what Dagster's ObjectStoreResource reads too)."""
    cfg = _load_config(path)
    if cfg.output_uri:
        from memory_pipeline.config import object_store_options

        fs.configure_s3(object_store_options())
    return cfg


class ArgumentParser(argparse.ArgumentParser):
    """argparse with one-line errors: ``error: <message>`` on stderr, exit 2.

    argparse prints the whole usage block before its message; in a script's log or a
    terminal the one line that names the bad value is what a user needs (``--help`` has
    the usage). Subparsers inherit the class, so every subcommand behaves the same.
    """

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"error: {message}\n")


def _positive_int(text: str) -> int:
    """An integer >= 1 (``--k``, ``--rrf-k``, ``--resamples``): 0 or a negative count would
    silently mean "everything" or "nothing" further down."""
    return _int_at_least(text, 1)


def _non_negative_int(text: str) -> int:
    """An integer >= 0 (``--budget``: 0 is a legal, empty pack, as in the API; ``--seed``:
    numpy refuses negative seeds deep inside the evaluation)."""
    return _int_at_least(text, 0)


def _int_at_least(text: str, low: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {text!r}")
    return value


def _unit_float(text: str) -> float:
    """A number in [0, 1] (``--beta``); NaN is refused (it compares false to both ends)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 1], got {text!r}")
    return value


def _iso_date(text: str) -> dt.date:
    """A calendar date ``YYYY-MM-DD`` (``run --start/--end``): partitions are whole days."""
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a valid date (YYYY-MM-DD): {text!r}") from None


def _iso_time(text: str) -> dt.datetime:
    """An ISO date or date-time (``--as-of``); a date means its midnight, local time."""
    try:
        return dt.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a valid ISO date or time (YYYY-MM-DD[THH:MM]): {text!r}"
        ) from None


def _text(text: str) -> str:
    """Non-blank text (a query, a question, a contact or conversation id), kept as given:
    a blank query ranks every chunk alike and a blank filter silently filters nothing."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"must be non-empty text, got {text!r}")
    return text


def _recent_messages(values: list[str] | None) -> list | None:
    """``--recent`` values as messages: each is a file (a JSON list, JSON Lines of strings
    or ``{"text", "sender", "time"}`` objects, or plain text with one message per line) when
    such a file exists, else the message itself. A bad file raises ``ValueError`` naming
    the file and line."""
    if not values:
        return None
    import json

    out: list = []
    for value in values:
        path = Path(value)
        if not (len(value) < 4096 and "\n" not in value and path.is_file()):
            out.append(value)
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = type(exc).__name__
            raise ValueError(f"{path}: cannot read recent messages ({reason})") from None
        if text.lstrip().startswith("["):
            try:
                items = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
            out.extend(items if isinstance(items, list) else [items])
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            if line.lstrip().startswith(("{", '"')):
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{n}: not valid JSON ({exc.msg})") from None
            else:
                out.append(line)
    return out


def _instance_home(cfg: PipelineConfig) -> Path:
    """DAGSTER_HOME: the env var, else the folder of the config file (holds dagster.yaml)."""
    home = os.environ.get("DAGSTER_HOME")
    if home:
        # Dagster refuses a DAGSTER_HOME that does not exist (a traceback): make it, as the
        # output folders are made
        Path(home).mkdir(parents=True, exist_ok=True)
        return Path(home)
    base = cfg.config_path.parent if cfg.config_path else Path.cwd()
    os.environ["DAGSTER_HOME"] = str(base)
    return base


def _owner_cfg(args: argparse.Namespace) -> PipelineConfig:
    """The configuration of ``--owner`` (the single owner's when omitted and there is one);
    a ValueError naming the owners when it is missing among several or unknown."""
    return owner_config(load_config(args.config), getattr(args, "owner", None))


def plan_range(
    cfg: PipelineConfig, found: list[dt.date], today: dt.date
) -> tuple[dt.date, dt.date]:
    """First and last partition to build: from the data's dates, inside the partitions."""
    last_partition = cfg.end_date or today - dt.timedelta(days=1)
    first = max(cfg.start_date, min(found))
    last = min(max(found), last_partition)
    return first, last


@contextmanager
def _writing(cfg: PipelineConfig, wait: float) -> Iterator[None]:
    """Hold the output folder's writer lock for a command that writes (run, forget --yes):
    a second writer waits up to ``wait`` seconds, saying for whom, then gives up with
    LockBusy (one line, exit 2). docs/security.md, "Concurrency"."""
    from memory_pipeline.core.common.lock import output_lock

    def waiting(pid: int | None) -> None:
        who = f"pid {pid}" if pid else "another process"
        print(
            f"waiting for the run in progress ({who}) on {cfg.output_dir} "
            f"(up to {wait:.0f} s; --wait SECONDS)…",
            file=sys.stderr,
            flush=True,
        )

    with output_lock(cfg.output_dir, wait=wait, on_wait=waiting):
        yield


def cmd_run(args: argparse.Namespace) -> int:
    import dagster as dg
    from tqdm import tqdm

    from memory_pipeline.core.common.storage import TableStore
    from memory_pipeline.core.ingest.stage import discover_dates
    from memory_pipeline.defs.build import build_definitions
    from memory_pipeline.defs.retention import TODAY_TAG
    from memory_pipeline.defs.runner import Stage, StageResult, materialize_stages, stages

    if args.start and args.end and args.start > args.end:
        print(f"error: --start {args.start} is after --end {args.end}", file=sys.stderr)
        return EXIT_USAGE
    cfg = load_config(args.config)
    home = _instance_home(cfg)
    root = cfg.config_path.parent if cfg.config_path else Path.cwd()  # where `dg dev` runs
    print(f"config: {cfg.config_path}  sources: {', '.join(s.name for s in cfg.sources)}")
    from memory_pipeline.core.privacy import retention

    today = retention.today()  # one clock (UTC) for the cutoff and the partition range
    cutoff = retention.retention_cutoff(cfg.retain_days, today)
    found = discover_dates(cfg.sources, cfg.start_date)
    if cutoff is not None:
        found = [d for d in found if d >= cutoff]
    if not found:
        print("no records in the configured sources: nothing to do")
        return _purge_only(cfg, root, today, args.wait) if cutoff is not None else 0
    first, last = plan_range(cfg, found, today)
    if args.start:
        first = max(first, args.start)
    if args.end:
        last = min(last, args.end)
    if not any(first <= d <= last for d in found):
        # an empty range is not an error (a scheduled `run --start yesterday` with no new
        # data), but launching it would record empty materializations: say so, run nothing
        asked = f"{args.start or '…'} .. {args.end or '…'}"
        print(
            f"nothing to do: no partition with data in {asked} (data: {min(found)} .. {max(found)})"
        )
        return _purge_only(cfg, root, today, args.wait) if cutoff is not None else 0
    later = sum(1 for d in found if d > last)
    print(f"partitions: {first} .. {last} ({(last - first).days + 1} days)")
    if later:
        print(f"note: {later} dates with data lie after {last}; they wait for their partitions")
    with _writing(cfg, args.wait):  # from here on the run writes the output
        # the code location's assets, great-expectations checks (non-blocking, ride along with
        # each stage) and resources
        defs = build_definitions(cfg)
        instance = dg.DagsterInstance.get()
        selection = stages()
        with tqdm(total=len(selection), unit="stage", disable=args.quiet) as bar:

            def start(stage: Stage) -> None:
                bar.set_description(stage.name)

            def done(run: StageResult) -> bool:
                purged = _retention_line(run)
                if purged:
                    tqdm.write(purged)
                for w in run.warned:
                    tqdm.write(f"warning: check {w.asset_key.to_user_string()} {w.check_name}")
                if run.failed:
                    return False
                bar.update(1)
                return True

            runs = materialize_stages(
                defs,
                selection,
                days=[first, last],
                instance=instance,
                raise_on_error=False,
                # a failed step is reported below in one line (its root cause); Dagster's own
                # ERROR event, with the stack, stays in the instance's event log (the UI)
                log_level="CRITICAL",
                on_start=start,
                on_done=done,
                backfill=True,
                code_location=root,
                tags={TODAY_TAG: today.isoformat()},  # the purge's day is the range's
            )
    final = runs[-1]
    if not final.success:
        _report_failure(final.result, final.stage.name, cfg.storage_root)
        return 1
    if final.failed:
        for f in final.failed:
            print(f"check failed: {f.asset_key.to_user_string()} {f.check_name}")
        print("the data is written; inspect it with `memory-pipeline status`")
        return 1
    checks_passed = sum(1 for run in runs for e in run.checks if e.passed)
    checks_warned = sum(len(run.warned) for run in runs)
    timings = {run.stage.name: run.seconds for run in runs}
    store = TableStore(cfg.storage_root)
    if cfg.multi_owner:
        print_owners_summary(cfg, (first, last), timings)
    else:
        print_summary(store, cfg, (first, last), timings)
    print(
        f"asset checks: {checks_passed} passed, {checks_warned} warnings, 0 failed "
        f"(one evaluation per partition and check)"
    )
    print(_evaluation_line(runs, cfg))
    backfill = runs[0].result.dagster_run.tags.get("dagster/backfill")
    prog = invoked_as()
    print(
        f"search index: {fs.join(cfg.storage_root, 'indexes')}\n"
        f"dossiers: {cfg.dossiers_path}   storage report: "
        f"{store.table_dir(T.STORAGE_REPORT)}\n"
        f'try:  {prog} search "what did we plan?" --k 3\n'
        f'      {prog} context "Which train do we take to Kyoto?" --budget 4000\n'
        f"\nDagster instance: {home}: {len(runs)} runs (jobs stage_<name>) in backfill "
        f"{backfill} (runs, checks, lineage)\n"
        f"Open the UI:  cd {root} && DAGSTER_HOME={home} {_sibling(prog, 'dg')} dev   "
        "then http://127.0.0.1:3000"
    )
    return 0


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


def _report_failure(result, stage: str, output: Path | str | None = None) -> None:
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data:
            err = event.step_failure_data.error
            user = event.step_failure_data.user_failure_data
            message = (user.description if user and user.description else None) or (
                failure_line(err, output) if err else "unknown error"
            )
            print(f"error in {stage}: {message}", file=sys.stderr)
            return
    print(f"error in {stage}: run failed", file=sys.stderr)


# every OSError subclass by name: a step failure carries class names, not classes
_OS_ERRORS = frozenset(
    n for n, c in vars(builtins).items() if isinstance(c, type) and issubclass(c, OSError)
)
_ERRNO_MESSAGE = re.compile(r"\[Errno (\d+)\] [^:\n]*(?:: '([^'\n]*)')?")


def failure_line(err, output: Path | str | None = None) -> str:
    """One line for a failed step's error (Dagster's ``SerializableErrorInfo``).

    Dagster wraps what the asset raised ("Error occurred while executing op ...:"), so the
    useful line is at the bottom of the cause chain; an ``OSError`` there (disk full, no
    permission) is said as ``<path>: <reason>``, the path from the error or, when the writer
    did not name it (a buffered write), the output folder."""
    chain = []
    while err is not None:
        chain.append(err)
        err = err.cause or err.context
    os_error = next((e for e in reversed(chain) if e.cls_name in _OS_ERRORS), None)
    if os_error is not None:
        match = _ERRNO_MESSAGE.search(os_error.message)
        if match:
            reason = os.strerror(int(match.group(1))).lower()
            where = match.group(2) or output
            return f"{where}: {reason}" if where else reason
    root = chain[-1] if chain else None
    lines = (root.message.strip().splitlines() if root else []) or ["unknown error"]
    return lines[0]


def os_error_line(exc: OSError, output: Path | str | None = None) -> str:
    """``<path>: <reason>`` for an OSError the CLI itself met (e.g. no space left on device)."""
    reason = (os.strerror(exc.errno) if exc.errno else str(exc)).lower()
    where = exc.filename or output
    return f"{where}: {reason}" if where else reason


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
    print("search one owner:  memory-pipeline search --owner <owner_id> \"what did we plan?\"")


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


def cmd_search(args: argparse.Namespace) -> int:
    import json

    from memory_pipeline import search
    from memory_pipeline.core.retrieval.searcher import IndexNotBuilt

    as_of = args.as_of
    try:
        recent = _recent_messages(args.recent)
        if _unknown_scope(args):
            return EXIT_USAGE
        result = search(
            args.query,
            args.k,
            config=args.config,
            contact=args.contact,
            conversation=args.conversation,
            as_of=as_of,
            search_config=_search_config(args),
            recent=recent,
            owner=args.owner,
        )
    except IndexNotBuilt as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:  # a bad --recent: one line naming the file/line or item
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    found = EXIT_OK if result.chunks and result.answerable else EXIT_NO_MATCH
    if args.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False, indent=1, default=str))
        return found
    if result.chunks and not result.answerable:  # the least bad hits are not evidence
        print(f"no relevant memory (confidence {result.confidence:.2f})")
        return found
    filters = ", ".join(
        f"{f['field']} {f['op']} {f.get('value') or ''}{f.get('start') or ''}"
        f"{'..' + str(f['end']) if f.get('end') else ''}"
        for f in result.filters
    )
    print(
        f"query: {result.query!r}  [{result.kind}, {result.mode}]"
        + (f"  filters: {filters}" if filters else "")
    )
    for note in result.notes:
        print(f"  note: {note}")
    if not result.chunks:
        print("no results")
    for hit in result.chunks:
        print(
            f"\n{hit.rank}. {hit.contact_id} · {hit.start} → {hit.end} · "
            f"score {hit.score:.4f} · session {hit.session_id}"
        )
        for h in hit.highlights:
            text = h.text if len(h.text) <= 160 else h.text[:157] + "…"
            print(f"   [{h.local_ts}] {h.sender}: {text}   ({h.source_ref})")
    return found


def _published_index(cfg: PipelineConfig, representation: str):
    """The published BM25 index of ``representation`` (its tokenizer and vocabulary)."""
    from memory_pipeline.core.common.representations import REPRESENTATIONS
    from memory_pipeline.core.indexes.bm25 import load_index
    from memory_pipeline.core.indexes.publish import current_version
    from memory_pipeline.core.retrieval.searcher import IndexNotBuilt

    if representation not in REPRESENTATIONS:
        raise ConfigError(
            f"unknown representation {representation!r}; known: {', '.join(REPRESENTATIONS)}"
        )
    version = current_version(cfg.storage_root)
    if version is None or not (version / "bm25" / representation).is_dir():
        raise IndexNotBuilt(
            f"no BM25 index under {fs.join(cfg.storage_root, 'indexes')}: "
            "run `memory-pipeline run`"
        )
    return load_index(version / "bm25" / representation)


def cmd_tokenize(args: argparse.Namespace) -> int:
    """The query's tokens as the published index makes them: ``$tokens`` of bm25_search.sql."""
    import json

    from memory_pipeline.core.indexes.bm25 import query_tokens
    from memory_pipeline.core.retrieval.searcher import IndexNotBuilt

    try:
        cfg = _owner_cfg(args)
        index = _published_index(cfg, args.representation)
    except (IndexNotBuilt, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    tokens = query_tokens(index, args.text)
    print(json.dumps(tokens, ensure_ascii=False))
    return EXIT_OK if tokens else EXIT_NO_MATCH


def _sql_param(text: str) -> tuple[str, object]:
    """``name=value``: the value as JSON when it parses (5, 0.5, ["a"]), else the string."""
    import json

    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    try:
        return name.strip().lstrip("$"), json.loads(value)
    except ValueError:
        return name.strip().lstrip("$"), value


def cmd_sql(args: argparse.Namespace) -> int:
    """One SELECT on the warehouse, e.g. sql/bm25_search.sql with ``--query``: the query is
    tokenized by the published index into ``$tokens``. Read-only and confined to the
    project's tables by ``catalog.connect`` (docs/security.md, "SQL surface")."""
    import json

    import duckdb

    from memory_pipeline.core.common.catalog import StatementRefused, connect
    from memory_pipeline.core.indexes.bm25 import query_tokens
    from memory_pipeline.core.retrieval.searcher import IndexNotBuilt

    if (args.statement is None) == (args.file is None):
        print("error: give one SQL statement or --file", file=sys.stderr)
        return EXIT_USAGE
    if args.file is not None:
        try:
            statement = Path(args.file).read_text(encoding="utf-8")
        except OSError as exc:
            print(f"error: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
            return EXIT_USAGE
    else:
        statement = args.statement
    try:
        cfg = _owner_cfg(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    params = dict(args.param)
    try:
        if args.query is not None:
            rep = str(params.get("representation", "raw_text"))
            params["tokens"] = query_tokens(_published_index(cfg, rep), args.query)
        if not cfg.warehouse_path.is_file():
            raise IndexNotBuilt(f"no warehouse at {cfg.warehouse_path}: run `memory-pipeline run`")
    except IndexNotBuilt as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        con = connect(cfg.warehouse_path)
    except (duckdb.Error, OSError) as exc:
        print(f"error: cannot open {cfg.warehouse_path}: {_first_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    try:
        cur = con.execute(statement, params or None)
        columns = [d[0] for d in cur.description or []]
        rows = cur.fetchall()
    except (duckdb.Error, StatementRefused) as exc:
        print(f"error: {_first_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        con.close()
    if args.json:
        out = [dict(zip(columns, r, strict=True)) for r in rows]
        print(json.dumps(out, ensure_ascii=False, indent=1, default=str))
    else:
        print("\t".join(columns))
        for r in rows:
            print("\t".join("" if v is None else str(v) for v in r))
    return EXIT_OK


def _first_line(exc: BaseException) -> str:
    """An error's first non-empty line (DuckDB appends the statement and a caret)."""
    return next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)


def cmd_context(args: argparse.Namespace) -> int:
    import json

    from memory_pipeline import context, recall
    from memory_pipeline.core.retrieval.searcher import IndexNotBuilt

    as_of = args.as_of
    common = {
        "config": args.config,
        "contact": args.contact,
        "as_of": as_of,
        "search_config": _search_config(args),
        "owner": args.owner,
    }
    try:
        recent = _recent_messages(args.recent)
        if _unknown_scope(args):
            return EXIT_USAGE
        if args.escalate:
            if recent is not None:
                print("error: --recent is not supported with --escalate", file=sys.stderr)
                return EXIT_USAGE
            sources = True if args.sources else None
            pack = recall(
                args.question, args.budget, sources=sources, strategy=args.strategy, **common
            )
        else:
            pack = context(
                args.question, args.budget, strategy=args.strategy, recent=recent, **common
            )
    except IndexNotBuilt as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(json.dumps(pack.to_dict(), ensure_ascii=False, indent=1, default=str))
        return 0
    kinds = Counter(p.kind for p in pack.pieces)
    print(
        f"# context for {args.question!r}: {pack.utf16:,} of {pack.budget:,} UTF-16 units, "
        f"strategy {pack.strategy}, "
        + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
        + (f"; {pack.reason}" if pack.reason else "")
    )
    for note in pack.notes:
        print(f"# note: {note}")
    print()
    print(pack.render())
    return 0


def _unknown_scope(args: argparse.Namespace) -> bool:
    """Say so (one line, a few known ids) when ``--contact`` / ``--conversation`` names
    nothing in the published index: an empty answer would read as "never talked about it".
    Raises IndexNotBuilt like the search itself."""
    from memory_pipeline import searcher

    s = None
    for flag, value, column in (
        ("--contact", args.contact, "contact"),
        ("--conversation", getattr(args, "conversation", None), "conversation"),
    ):
        if value is None:
            continue
        s = s or searcher(args.config, owner=getattr(args, "owner", None))
        known = sorted({str(v) for v in getattr(s, column)})
        if value not in known:
            shown = ", ".join(known[:5]) + (f", … ({len(known)} in all)" if len(known) > 5 else "")
            print(f"error: unknown {flag} {value!r}; known: {shown or 'none'}", file=sys.stderr)
            return True
    return False


def _search_config(args: argparse.Namespace):
    """The SearchConfig of the flags: the ``--preset``, with each ranking flag given
    replacing its field (a flag left out keeps the preset's value)."""
    from memory_pipeline.core.retrieval.config import resolve

    return resolve(
        args.preset,
        mode=getattr(args, "mode", None),
        fusion=getattr(args, "fusion", None),
        beta=getattr(args, "beta", None),
        rrf_k=getattr(args, "rrf_k", None),
        bm25_rep=getattr(args, "bm25_rep", None),
        dense_rep=getattr(args, "dense_rep", None),
        use_time=False if getattr(args, "no_time", False) else None,
    )


def _add_search_flags(parser: argparse.ArgumentParser, *, ranking: bool) -> None:
    """``--preset`` (both commands) and, with ``ranking``, the flags that adjust it."""
    from memory_pipeline.core.retrieval.config import FUSIONS, MODES, PRESETS, REPRESENTATIONS

    parser.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        default="default",
        help="how to rank chunks (default: hybrid BM25 + dense, RRF)",
    )
    if not ranking:
        return
    parser.add_argument("--mode", choices=list(MODES), help="default: the preset's (hybrid)")
    parser.add_argument("--fusion", choices=list(FUSIONS), help="default: the preset's (rrf)")
    parser.add_argument("--beta", type=_unit_float, help="linear fusion: weight of BM25 in [0, 1]")
    parser.add_argument("--rrf-k", type=_positive_int, help="RRF constant k (>= 1)")
    parser.add_argument("--bm25-rep", choices=list(REPRESENTATIONS), help="BM25 representation")
    parser.add_argument("--dense-rep", choices=list(REPRESENTATIONS), help="dense representation")
    parser.add_argument(
        "--no-time", action="store_true", help="no time filters: every query is content"
    )


def _add_recent_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--recent",
        action="append",
        metavar="MESSAGE_OR_FILE",
        help="the conversation so far, to resolve 'that', 'she', あれ, あの件 (repeat it; a "
        "file holds a JSON list, JSON Lines or one message per line)",
    )


def _locomo_file(args: argparse.Namespace) -> Path:
    """--locomo, else ``[evaluation] locomo`` of the config (when a config file is found:
    the benchmark needs none), else the shared dev split."""
    from memory_pipeline.config import find_config_file

    if args.locomo:
        return Path(args.locomo).resolve()
    try:
        config = find_config_file(args.config)
    except ConfigError:
        if args.config:
            raise
        config = None
    configured = load_config(config).eval_locomo if config else None
    return configured or Path(DEFAULT_LOCOMO).resolve()


def cmd_eval_jsquad(args: argparse.Namespace) -> int:
    """``eval --jsquad PATH``: Japanese paragraph retrieval, BM25 vs each local embedder."""
    import json

    from memory_pipeline.core.evaluation import jsquad as J
    from memory_pipeline.core.represent.providers.factory import LOCAL_MODELS, make_embedder

    path = Path(args.jsquad)
    if not path.is_file():
        print(f"error: JSQuAD file not found: {path}", file=sys.stderr)
        return 2
    models = args.models.split(",") if args.models else list(LOCAL_MODELS)
    try:
        paragraphs, questions = J.load_jsquad(path, args.max_articles)
    except J.JsquadFormatError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from memory_pipeline.core.represent.providers.factory import MissingExtra

    t0 = time.perf_counter()
    embedders = {}
    for m in models:
        try:
            embedders[m] = make_embedder("local", m)
        except MissingExtra as exc:
            if args.models:  # asked for by name: a one-line error, not a traceback
                print(f"error: {exc}", file=sys.stderr)
                return 2
            print(f"skipped {m}: {exc}")  # the default list compares what is installed
    rows = J.run_jsquad(
        paragraphs, questions, embedders, resamples=args.resamples, seed=args.seed
    )
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    md = J.render_markdown(rows, len(paragraphs), len({p.article for p in paragraphs}))
    (out / "jsquad.json").write_text(json.dumps(rows, ensure_ascii=False, indent=1), "utf-8")
    (out / "jsquad.md").write_text(md, encoding="utf-8")
    print(md)
    print(f"tables: {out / 'jsquad.json'}   done in {time.perf_counter() - t0:.0f}s")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from memory_pipeline.eval_runner import evaluate_locomo

    if args.jsquad:
        return cmd_eval_jsquad(args)
    locomo = _locomo_file(args)
    if not locomo.is_file():
        print(f"error: LoCoMo file not found: {locomo}", file=sys.stderr)
        return 2
    out = Path(args.out).resolve()
    t0 = time.perf_counter()
    rpc = Path(args.realpersonachat) if args.realpersonachat else None
    meta = evaluate_locomo(
        locomo, out, resamples=args.resamples, seed=args.seed, realpersonachat=rpc
    )
    print(f"\nselected on dev: {meta['selected_config']}  ({meta['selection_metric']})")
    print(f"questions: {meta['questions']}, configurations swept: {meta['configurations']}")
    print(f"tables: {out / 'tables'}   duckdb: {out / 'evaluation.duckdb'}")
    if "report_html" in meta:
        print(f"report: {meta['report_html']}  (and {meta['report_md']})")
    if "selection_proposed" in meta:
        _review_selection(meta, accept=args.accept_selection)
    print(f"done in {time.perf_counter() - t0:.0f}s")
    return 0


def _review_selection(meta: dict, *, accept: bool) -> None:
    """Show the cross-validated selection against the packaged default; write it into the
    package only when asked (a reviewable change, never a silent one)."""
    import shutil

    from memory_pipeline.core.evaluation.selection import packaged_path

    cv = meta["cv"]
    print(f"cross-validated selection (leave one conversation out): {cv['selected']}")
    if not meta["selection_diff"]:
        print("the packaged default search configuration is this selection: nothing to change")
        return
    print(meta["selection_diff"], end="")
    if accept:
        target = packaged_path()
        shutil.copyfile(meta["selection_proposed"], target)
        print(f"accepted: wrote {target} (review and commit it)")
        if meta.get("reranker_proposed"):
            from memory_pipeline.core.retrieval.rerank import packaged_path as reranker_path

            shutil.copyfile(meta["reranker_proposed"], reranker_path())
            print(f"accepted: wrote {reranker_path()} (review and commit it)")
    else:
        print(
            f"proposed: {meta['selection_proposed']}  (--accept-selection writes it as the default)"
        )


def cmd_forget(args: argparse.Namespace) -> int:
    """Forget a contact everywhere (dry run unless --yes), or list what is forgotten."""
    from memory_pipeline.core.privacy.forget import forgotten_entries

    deployment = load_config(args.config)
    try:
        cfg = owner_config(deployment, args.owner)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.list:
        entries = forgotten_entries(cfg.storage_root)
        for e in entries:
            print(f"{e['forgotten_on']}  {e['kind']:<12}  {e['hash']}")
        print(f"{len(entries)} forgotten (salted hashes; names and texts are never stored)")
        return 0
    if not args.contact:
        print("error: forget needs --contact NAME (or --list)", file=sys.stderr)
        return 2
    if not args.yes:  # a dry run writes nothing: no need to wait for a run
        return _forget(args, cfg, deployment)
    with _writing(deployment, args.wait):
        return _forget(args, cfg, deployment)


def _forget(args: argparse.Namespace, cfg: PipelineConfig, deployment: PipelineConfig) -> int:
    from memory_pipeline.core.privacy.forget import UnknownContact, apply_forget
    from memory_pipeline.defs.forget import plan_for
    from memory_pipeline.defs.forget_run import rebuild_after_forget

    try:
        plan = plan_for(cfg, args.contact)
    except UnknownContact as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("\n".join(plan.summary_lines()))
    if not args.yes:
        print("dry run: nothing was changed; pass --yes to forget")
        return 0
    import dagster as dg

    apply_forget(plan)
    _instance_home(deployment)
    # the whole deployment's rebuild: only this owner's inputs changed, so only they rebuild
    ok = rebuild_after_forget(deployment, dg.DagsterInstance.get())
    print(f"forgotten; the forget list keeps them out of every future run ({cfg.storage_root})")
    if not ok:
        print("error: rebuilding the indexes failed: run `memory-pipeline run`", file=sys.stderr)
        return 1
    return 0


def build_parser() -> argparse.ArgumentParser:
    from memory_pipeline.core.context.packs import STRATEGIES

    parser = ArgumentParser(prog="memory-pipeline", description=__doc__)
    parser.add_argument(
        "--config", help="config file (default: $MEMORY_PIPELINE_CONFIG or ./memory_pipeline.toml)"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="materialize every partition that has data")
    run.add_argument("--start", type=_iso_date, help="first partition (YYYY-MM-DD)")
    run.add_argument("--end", type=_iso_date, help="last partition (YYYY-MM-DD)")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_wait_flag(run)
    run.set_defaults(func=cmd_run)
    status = sub.add_parser("status", help="partitions, row counts and checks of the outputs")
    status.set_defaults(func=cmd_status)
    search = sub.add_parser("search", help="search the published memory")
    search.add_argument("query", type=_text)
    search.add_argument("--k", type=_positive_int, default=5, help="hits to return (>= 1)")
    search.add_argument("--json", action="store_true", help="machine-readable output")
    _add_search_flags(search, ranking=True)
    search.add_argument("--contact", type=_text, help="only conversations with this contact_id")
    search.add_argument("--conversation", type=_text, help="only this conversation_id")
    search.add_argument(
        "--as-of", type=_iso_time, help="reference time for 'yesterday', 'last Tuesday' (ISO)"
    )
    _add_recent_flag(search)
    search.set_defaults(func=cmd_search)
    ctx = sub.add_parser(
        "context", help="the context pack an LLM should read: memories + their sources"
    )
    ctx.add_argument("question", type=_text)
    ctx.add_argument(
        "--budget", type=_non_negative_int, default=24_000, help="UTF-16 code units (>= 0)"
    )
    ctx.add_argument(
        "--strategy",
        choices=["split", *(s for s in STRATEGIES if s != "split")],
        default="split",
        help="source material after the memories (split: half source sessions, half search)",
    )
    ctx.add_argument(
        "--escalate",
        action="store_true",
        help="memories alone unless their evidence is weak (or --sources is given)",
    )
    ctx.add_argument("--sources", action="store_true", help="with --escalate: always add sources")
    ctx.add_argument(
        "--contact", type=_text, help="only memories and conversations with this contact_id"
    )
    ctx.add_argument("--as-of", type=_iso_time, help="what was true then (ISO date or time)")
    ctx.add_argument("--json", action="store_true", help="machine-readable output")
    _add_search_flags(ctx, ranking=False)
    _add_recent_flag(ctx)
    ctx.set_defaults(func=cmd_context)
    ev = sub.add_parser("eval", help="score the retrievers on LoCoMo; tables + HTML report")
    ev.add_argument(
        "--locomo",
        help="a JSON file in LoCoMo's format (evaluation only: CC BY-NC); default: "
        f"[evaluation] locomo of the config, else {DEFAULT_LOCOMO}",
    )
    ev.add_argument("--out", default="data/eval/locomo", help="where tables and report go")
    ev.add_argument(
        "--resamples", type=_positive_int, default=5000, help="bootstrap resamples (>= 1)"
    )
    ev.add_argument("--seed", type=_non_negative_int, default=0)
    ev.add_argument(
        "--realpersonachat",
        help="a RealPersonaChat folder (dialogues.jsonl.gz + interlocutors.json): also score "
        "dossier coverage of the personas (evaluation only)",
    )
    ev.add_argument(
        "--jsquad",
        help="score Japanese paragraph retrieval on this JSQuAD JSON file instead of LoCoMo",
    )
    ev.add_argument("--models", help="--jsquad: local embedders, comma separated (default all)")
    ev.add_argument("--max-articles", type=_positive_int, help="--jsquad: first N articles only")
    ev.add_argument(
        "--accept-selection",
        action="store_true",
        help="write the cross-validated selection into the package as the default search "
        "configuration (without it the run only proposes it, as a diff)",
    )
    ev.set_defaults(func=cmd_eval)
    sq = sub.add_parser(
        "sql", help="one SQL statement on the warehouse, read-only (sql/bm25_search.sql too)"
    )
    sq.add_argument("statement", nargs="?", help="the SQL (or --file)")
    sq.add_argument("--file", "-f", help="read the statement from this file")
    sq.add_argument(
        "--param",
        "-p",
        action="append",
        type=_sql_param,
        default=[],
        metavar="NAME=VALUE",
        help="bind $NAME (JSON value, else a string); repeatable",
    )
    sq.add_argument(
        "--query",
        type=_text,
        help="bind $tokens to this text's tokens, made by the published index of "
        "$representation (default raw_text)",
    )
    sq.add_argument("--json", action="store_true", help="rows as JSON objects")
    sq.set_defaults(func=cmd_sql)
    tk = sub.add_parser("tokenize", help="a query's BM25 tokens, as the published index makes them")
    tk.add_argument("text", type=_text)
    tk.add_argument("--representation", default="raw_text", help="whose index (raw_text)")
    tk.set_defaults(func=cmd_tokenize)
    fg = sub.add_parser("forget", help="forget a contact everywhere, durably")
    fg.add_argument("--contact", help="contact_id or display name")
    fg.add_argument("--yes", action="store_true", help="remove (without it: only show what)")
    fg.add_argument("--list", action="store_true", help="what is forgotten (hashes and dates)")
    _add_wait_flag(fg)
    fg.set_defaults(func=cmd_forget)
    for owned in (status, search, ctx, sq, tk, fg):
        owned.add_argument(
            "--owner", type=_text, help="whose memory (required when there are several owners)"
        )
    from memory_pipeline.service.commands import add_commands

    add_commands(sub)  # serve, mcp, keys (docs/service.md)
    return parser


def _add_wait_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--wait",
        type=_non_negative_int,
        default=DEFAULT_WAIT_SECONDS,
        metavar="SECONDS",
        help="when another command is writing the same output, wait this long for it "
        f"(default {DEFAULT_WAIT_SECONDS}; 0: refuse at once)",
    )


def main(argv: list[str] | None = None) -> int:
    """Parse, run the subcommand, return its exit code (0 ok, 1 no match, 2 bad input)."""
    try:
        args = build_parser().parse_args(argv)
        try:
            return args.func(args)
        except (ConfigError, SourceError, LockBusy) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except BrokenPipeError:
            raise
        except OSError as exc:  # disk full, no permission: the command failed, one line
            print(f"error: {os_error_line(exc)}", file=sys.stderr)
            return EXIT_FAILED
        finally:
            sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at exit
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE


def _silence_stdout() -> None:
    """The reader of stdout went away (``status | head``): point stdout at /dev/null so
    the interpreter's final flush cannot fail again (the Python docs' SIGPIPE recipe).
    Not SIG_DFL for SIGPIPE: that would kill a `run` in the middle of writing a partition."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):  # stdout replaced (tests) or closed
        pass


if __name__ == "__main__":
    sys.exit(main())
