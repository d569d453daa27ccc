"""``memory-pipeline``: run the pipeline and inspect what it wrote, without the UI."""

# This module holds the parser, ``main`` and ``run``; the other commands are in
# ``cli_summary`` (``status``), ``cli_search`` (``search``, ``context``), ``cli_sql``
# (``sql``, ``tokenize``), ``cli_eval`` and ``cli_forget``, and what they share in
# ``cli_common``. The names other code and tests use are re-exported here.

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
from pathlib import Path

from memory_pipeline.cli_common import (
    DEFAULT_WAIT_SECONDS,
    EXIT_BROKEN_PIPE,
    EXIT_FAILED,
    EXIT_NO_MATCH,
    EXIT_OK,
    EXIT_USAGE,
    SUMMARY_TABLES,
    _instance_home,
    _iso_date,
    _iso_time,
    _non_negative_int,
    _positive_int,
    _report_failure,
    _text,
    _writing,
    failure_line,
    load_config,
    os_error_line,
)
from memory_pipeline.cli_eval import _locomo_file as _locomo_file  # tests read it here
from memory_pipeline.cli_eval import cmd_eval, cmd_eval_jsquad
from memory_pipeline.cli_forget import cmd_forget
from memory_pipeline.cli_parser import ArgumentParser
from memory_pipeline.cli_search import _add_recent_flag, _add_search_flags, cmd_context, cmd_search
from memory_pipeline.cli_search import _search_config as _search_config  # tests read it here
from memory_pipeline.cli_sql import _sql_param, cmd_sql, cmd_tokenize
from memory_pipeline.cli_summary import (
    _evaluation_line,
    _purge_only,
    _retention_line,
    _sibling,
    cmd_status,
    invoked_as,
    print_owners_summary,
    print_summary,
    try_lines,
)
from memory_pipeline.config import ConfigError, PipelineConfig
from memory_pipeline.core.common import fs
from memory_pipeline.core.common import tables as T
from memory_pipeline.core.common.lock import LockBusy
from memory_pipeline.core.common.records import SourceError
from memory_pipeline.core.common.state import StateError

__all__ = [
    "ArgumentParser",
    "DEFAULT_WAIT_SECONDS",
    "EXIT_BROKEN_PIPE",
    "EXIT_FAILED",
    "EXIT_NO_MATCH",
    "EXIT_OK",
    "EXIT_USAGE",
    "SUMMARY_TABLES",
    "build_parser",
    "cmd_context",
    "cmd_eval",
    "cmd_eval_jsquad",
    "cmd_forget",
    "cmd_run",
    "cmd_search",
    "cmd_sql",
    "cmd_status",
    "cmd_tokenize",
    "failure_line",
    "invoked_as",
    "load_config",
    "main",
    "os_error_line",
    "plan_range",
    "print_owners_summary",
    "print_summary",
]


# the top-level --help description (plain text: argparse prints it as is)
DESCRIPTION = (
    "Turn chat exports into a retrieval memory and use it: run the pipeline, search it, "
    "build context for an LLM, serve it to apps, forget people."
)
# --as-of means one thing wherever it appears; `search` takes the reference time as --now
AS_OF_HELP = (
    "answer as of this time (ISO date or date-time): what was true then, nothing said "
    "after it, and 'yesterday' counts from it"
)
NOW_HELP = (
    "the time 'yesterday' and 'last Tuesday' count from (ISO date or date-time; "
    "default: the current time); later messages are still searched"
)


def plan_range(
    cfg: PipelineConfig, found: list[dt.date], today: dt.date
) -> tuple[dt.date, dt.date]:
    """First and last partition to build: from the data's dates, inside the partitions."""
    last_partition = cfg.end_date or today - dt.timedelta(days=1)
    first = max(cfg.start_date, min(found))
    last = min(max(found), last_partition)
    return first, last


def _stored_dates(cfg: PipelineConfig) -> list[dt.date]:
    """The dates earlier runs stored records on (every owner's, in a multi-owner setup)."""
    from memory_pipeline.core.common.storage import TableStore
    from memory_pipeline.core.ingest.stage import stored_dates

    if not cfg.multi_owner:
        return stored_dates(TableStore(cfg.storage_root))
    found: set[dt.date] = set()
    for spec in cfg.owner_specs():
        found.update(stored_dates(TableStore(cfg.for_owner(spec).storage_root)))
    return sorted(found)


def cmd_run(args: argparse.Namespace) -> int:
    import dagster as dg
    from tqdm import tqdm

    from memory_pipeline.core.common.storage import TableStore
    from memory_pipeline.core.ingest.stage import discover_dates, plan_days
    from memory_pipeline.defs.build import build_definitions
    from memory_pipeline.defs.retention import TODAY_TAG
    from memory_pipeline.defs.runner import Stage, StageResult, materialize_stages, stages

    if args.start and args.end and args.start > args.end:
        print(f"error: --start {args.start} is after --end {args.end}", file=sys.stderr)
        return EXIT_USAGE
    cfg = load_config(args.config)
    from memory_pipeline.state import check_state

    check_state(cfg)  # before reading any export: a missing state is refused at once
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
    # only the days with data (and stored days that may need clearing): an empty day is
    # never materialized, so a run costs what the data holds, not what the calendar spans
    clear_from = max(args.start or cfg.start_date, cutoff or cfg.start_date)
    days = plan_days(found, _stored_dates(cfg), first, last, clear_from)
    print(
        f"partitions: {first} .. {last} ({len(days)} days with data "
        f"of {(last - first).days + 1} calendar days)"
    )
    if later:
        print(f"note: {later} dates with data lie after {last}; they wait for their partitions")
    with _writing(cfg, args.wait):  # from here on the run writes the output
        # the code location's assets, great-expectations checks (non-blocking, ride along with
        # each stage) and resources
        defs = build_definitions(cfg, days=days)
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
                days=days,
                instance=instance,
                raise_on_error=False,
                # a failed step is reported below in one line (its root cause); Dagster's own
                # ERROR event, with the stack, stays in the instance's event log (the UI)
                log_level="CRITICAL",
                on_start=start,
                on_done=done,
                backfill=True,
                backfill_defs=build_definitions(cfg),  # recorded on the code location's calendar
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
        # queries from the owner's own messages (one owner; many owners: their summary says)
        f"{'' if cfg.multi_owner else try_lines(store, cfg, prog)}"
        f"\nDagster instance: {home}: {len(runs)} runs (jobs stage_<name>) in backfill "
        f"{backfill} (runs, checks, lineage)\n"
        f"Open the UI:  {_ui_command(root, home, cfg, prog)}   then http://127.0.0.1:3000"
    )
    return 0


def _ui_command(root: Path, home: Path, cfg: PipelineConfig, prog: str) -> str:
    """How to open the UI on this configuration: ``dg dev`` in the repository (a dg project),
    ``dagster dev`` on the workspace.yaml of a folder ``init`` set up (no project there), with
    the configuration named (the code location reads MEMORY_PIPELINE_CONFIG)."""
    if (root / "pyproject.toml").is_file() or not (root / "workspace.yaml").is_file():
        return f"cd {root} && DAGSTER_HOME={home} {_sibling(prog, 'dg')} dev"
    return (
        f"cd {root} && MEMORY_PIPELINE_CONFIG={cfg.config_path} DAGSTER_HOME={home} "
        f"{_sibling(prog, 'dagster')} dev -w workspace.yaml"
    )


def build_parser() -> argparse.ArgumentParser:
    from memory_pipeline.core.context.packs import STRATEGIES

    parser = ArgumentParser(prog="memory-pipeline", description=DESCRIPTION)
    parser.add_argument(
        "--config", help="config file (default: $MEMORY_PIPELINE_CONFIG or ./memory_pipeline.toml)"
    )
    from memory_pipeline.cli_state import add_state_commands, version_line

    parser.add_argument("--version", action="version", version=version_line())
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
    search.add_argument("query", type=_text, help="what to look for, in any words or language")
    search.add_argument("--k", type=_positive_int, default=5, help="hits to return (>= 1)")
    search.add_argument("--json", action="store_true", help="machine-readable output")
    _add_search_flags(search, ranking=True)
    search.add_argument("--contact", type=_text, help="only conversations with this contact_id")
    search.add_argument("--conversation", type=_text, help="only this conversation_id")
    search.add_argument("--now", dest="as_of", type=_iso_time, metavar="TIME", help=NOW_HELP)
    # the earlier name of --now, kept so scripts keep working; hidden: --as-of means
    # "as of then" everywhere it is shown
    search.add_argument("--as-of", dest="as_of", type=_iso_time, help=argparse.SUPPRESS)
    _add_recent_flag(search)
    search.set_defaults(func=cmd_search)
    ctx = sub.add_parser(
        "context", help="the context pack an LLM should read: memories + their sources"
    )
    ctx.add_argument("question", type=_text, help="the question the LLM is to answer")
    ctx.add_argument(
        "--budget", type=_non_negative_int, default=24_000, help="size in UTF-16 code units (>= 0)"
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
    ctx.add_argument("--as-of", type=_iso_time, metavar="TIME", help=AS_OF_HELP)
    ctx.add_argument("--json", action="store_true", help="machine-readable output")
    _add_search_flags(ctx, ranking=False)
    _add_recent_flag(ctx)
    ctx.set_defaults(func=cmd_context)
    ev = sub.add_parser("eval", help="score the retrievers on LoCoMo; tables + HTML report")
    ev.add_argument(
        "--locomo",
        help="a JSON file in LoCoMo's format (evaluation only: CC BY-NC); default: "
        "[evaluation] locomo of the config (MEMORY_PIPELINE_EVAL_LOCOMO)",
    )
    ev.add_argument("--out", default="data/eval/locomo", help="where tables and report go")
    ev.add_argument(
        "--resamples", type=_positive_int, default=5000, help="bootstrap resamples (>= 1)"
    )
    ev.add_argument("--seed", type=_non_negative_int, default=0, help="bootstrap random seed")
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
    tk.add_argument("text", type=_text, help="the text to tokenize")
    tk.add_argument("--representation", default="raw_text", help="whose index")
    tk.set_defaults(func=cmd_tokenize)
    fg = sub.add_parser(
        "forget",
        help="forget a contact's conversations everywhere, durably (a group chat as a whole)",
    )
    fg.add_argument("--contact", help="contact_id or display name")
    fg.add_argument("--yes", action="store_true", help="remove (without it: only show what)")
    # `forget list` is the subcommand (as `keys list`); --list stays as a hidden alias
    fg.add_argument("--list", action="store_true", help=argparse.SUPPRESS)
    _add_wait_flag(fg)
    fg.set_defaults(func=cmd_forget)
    fsub = fg.add_subparsers(dest="forget_command", metavar="[list]")
    fl = fsub.add_parser("list", help="what is forgotten: kind, salted hash, date")
    fl.set_defaults(func=cmd_forget, list=True)
    for owned in (status, search, ctx, sq, tk, fg, fl):
        owned.add_argument(
            "--owner",
            type=_text,
            # on `forget list`, an --owner given before `list` is kept
            default=argparse.SUPPRESS if owned is fl else None,
            help="whose memory (required when there are several owners)",
        )
    from memory_pipeline.cli_init import add_command as add_init
    from memory_pipeline.service.commands import add_commands

    add_init(sub)  # init: a personal configuration from a folder of exports
    add_commands(sub)  # serve, mcp, keys (docs/service.md)
    add_state_commands(sub)  # backup, restore (docs/state-and-backup.md)
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
        except (ConfigError, SourceError, LockBusy, StateError) as exc:
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
