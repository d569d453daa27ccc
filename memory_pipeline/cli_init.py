"""``memory-pipeline init``: a personal configuration from a folder of exports.

It reads the exports exactly as a run will (``core/ingest/survey.py``), prints one row per
file and the owner it proposes, then writes ``<target>/memory_pipeline.toml``: no sample
sources, one ``kind = "auto"`` source per path given (a folder picks up later exports on the
next run), the machine's time zone, the output inside the target and no end date (a live
history: the nightly schedule and the sensors are on). It ends with the next commands.

Bad input is one line naming the path, exit 2: a missing or empty folder, an unreadable
file, an owner who sends in no conversation, an existing configuration (``--force``
replaces it). The table and the suggested queries hold names and words from the chats: they
go to the owner's terminal (stdout), never to a log.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import re
import sys
import tomllib
import unicodedata
from pathlib import Path

from memory_pipeline.cli_common import EXIT_USAGE, _text
from memory_pipeline.config import DEFAULT_CONFIG_NAME, ConfigError, parse_config
from memory_pipeline.core.common.records import R_PERMISSION, SourceError
from memory_pipeline.core.common.timeutil import zone
from memory_pipeline.core.ingest.sources import SourceSpec
from memory_pipeline.core.ingest.survey import (
    FileSurvey,
    OwnerProposal,
    Survey,
    owner_found,
    owner_missing,
    propose_owner,
    survey,
)
from memory_pipeline.core.retrieval.suggest import Suggestions, suggest_queries

OUTPUT_DIR = "output"  # inside the target folder
INSTANCE_FILE = "dagster.yaml"
# The Dagster instance's settings beside the configuration: ``memory-pipeline run`` makes
# ``<state>/dagster/dagster.yaml`` (DAGSTER_HOME when it is unset) from this file, with every
# storage path inside the state folder (memory_pipeline/state.py).
INSTANCE_YAML = """\
# The Dagster instance settings of this configuration: `memory-pipeline run` copies them to
# state/dagster/dagster.yaml (the instance: runs, event log, schedules). Written by
# `memory-pipeline init`; docs/operations.md.
concurrency:
  runs:
    max_concurrent_runs: 4
  pools:
    default_limit: 1   # one DuckDB writer at a time (pool duckdb_writer)
    granularity: op
run_monitoring:
  enabled: true
  start_timeout_seconds: 180
  max_runtime_seconds: 43200
  poll_interval_seconds: 60
telemetry:
  enabled: false
"""
WORKSPACE_FILE = "workspace.yaml"
# The code location the UI and the daemon load (`dagster dev -w workspace.yaml`), under the
# name the runs of `memory-pipeline run` record, so the UI can re-execute them. It reads the
# configuration named by MEMORY_PIPELINE_CONFIG.
WORKSPACE_YAML = """\
# The code location of this configuration: `dagster dev -w workspace.yaml` (with
# MEMORY_PIPELINE_CONFIG and DAGSTER_HOME set). Written by `memory-pipeline init`.
load_from:
  - python_module:
      module_name: memory_pipeline.definitions
      working_directory: .
      location_name: memory_pipeline
"""
MAX_NAMES = 3  # participants shown per file
MAX_FILE = 60  # columns of a file name in the table (the middle of a longer one is elided)


def add_command(sub: argparse._SubParsersAction) -> None:
    """Register ``init`` on the CLI's subparsers."""
    p = sub.add_parser(
        "init",
        help="write a personal configuration for a folder of exports (proposes the owner)",
    )
    p.add_argument("exports", nargs="+", help="a folder of exports (files, folders, zips) or files")
    p.add_argument(
        "--target",
        default=".",
        help="folder for memory_pipeline.toml and the output (default: the current folder)",
    )
    p.add_argument("--owner", type=_text, help="your sender name in the exports (else proposed)")
    p.add_argument(
        "--alias",
        action="append",
        type=_text,
        default=[],
        help="another name that means you in some exports (repeatable: owner_aliases)",
    )
    p.add_argument(
        "--timezone", type=_text, help="IANA time zone for local times (default: this machine's)"
    )
    p.add_argument("--force", action="store_true", help="replace an existing configuration")
    p.set_defaults(func=cmd_init)


def machine_timezone(env: dict[str, str] | None = None) -> str:
    """This machine's IANA time zone: $TZ, else what /etc/localtime links to, else
    /etc/timezone, else UTC."""
    env = dict(os.environ) if env is None else env
    candidates = [env.get("TZ", "").lstrip(":")]
    try:
        link = os.path.realpath("/etc/localtime")
        if "zoneinfo/" in link:
            candidates.append(link.split("zoneinfo/", 1)[1])
    except OSError:
        pass
    try:
        candidates.append(Path("/etc/timezone").read_text(encoding="utf-8").strip())
    except (OSError, UnicodeDecodeError):
        pass
    for name in candidates:
        if name and ("/" in name or name == "UTC"):
            try:
                zone(name)
                return name
            except ValueError:
                continue
    return "UTC"


def _error(message: str) -> int:
    """One line on stderr, exit 2; a line break inside a quoted path is escaped."""
    print(f"error: {ConfigError(message)}", file=sys.stderr)
    return EXIT_USAGE


def _source_name(path: Path, taken: set[str]) -> str:
    """A source name from the path (``exports``, ``whatsapp_chat_with_maria``), unique."""
    base = re.sub(r"[^a-z0-9_]+", "_", path.stem.lower()).strip("_") or "exports"
    if not base[0].isalpha():
        base = f"exports_{base}"
    name, n = base, 2
    while name in taken:
        name, n = f"{base}_{n}", n + 1
    taken.add(name)
    return name


def _toml(value: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's, plus DEL)."""
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")


def config_text(
    *,
    owner: str,
    aliases: list[str],
    timezone: str,
    start: dt.date,
    sources: list[SourceSpec],
    target: Path,
) -> str:
    """The personal configuration: the owner, the time zone, open dates, the sources."""
    lines = [
        "# memory_pipeline configuration written by `memory-pipeline init`. Every key:",
        "# docs/configuration.md. Relative paths are relative to this file.",
        "",
        "[pipeline]",
        f"owner = {_toml(owner)}",
        f"timezone = {_toml(timezone)}",
        f"output_dir = {_toml(OUTPUT_DIR)}",
        f"# no start_date: open, the memory starts with the oldest message ({start.isoformat()}"
        " today;",
        "# an older export dropped in later is read too). No end_date: a live history (the",
        "# nightly schedule and the sensors are on).",
    ]
    for spec in sources:
        path = spec.path
        shown = path.relative_to(target).as_posix() if path.is_relative_to(target) else str(path)
        lines += [
            "",
            "[[sources]]",
            f"name = {_toml(spec.name)}",
            'kind = "auto"                  # each file\'s format is recognised from its content',
            f"path = {_toml(shown or '.')}",
        ]
        if aliases:
            lines.append(f"owner_aliases = [{', '.join(_toml(a) for a in aliases)}]")
    return "\n".join(lines) + "\n"


def cmd_init(args: argparse.Namespace) -> int:
    """Survey the exports, propose the owner, write the configuration, say what to run."""
    target = Path(args.target).expanduser().resolve()
    config = target / DEFAULT_CONFIG_NAME
    if config.exists() and not args.force:
        return _error(f"{config} already exists (--force replaces it)")
    timezone = args.timezone or machine_timezone()
    try:
        zone(timezone)
    except ValueError as exc:
        return _error(f"--timezone: {exc}")
    specs, taken = [], set()
    for raw in args.exports:
        path = Path(raw).expanduser().resolve()
        if not path.exists():
            return _error(f"{path}: no such file or folder")
        if path.is_file() and not os.access(path, os.R_OK):
            return _error(f"{path}: cannot read it (permission denied)")
        if path.is_dir() and target.is_relative_to(path):
            # the output, the instance and the config would become "exports" on every run
            return _error(f"{path}: holds the target folder {target}; choose --target outside it")
        name = "exports" if len(args.exports) == 1 else _source_name(path, taken)
        specs.append(SourceSpec(name, "auto", path, timezone, None, {}))
    print(f"reading {len(specs)} path(s) as a run will read them…", flush=True)
    try:
        found = survey(specs)
    except SourceError as exc:
        return _error(str(exc))
    print_files(found, len(specs) > 1)
    unreadable = [f for f in found.files if any(r == R_PERMISSION for r, _ in f.quarantined)]
    for f in unreadable:
        print(f"warning: {f.file}: cannot read it (permission denied): quarantined on every run")
    if found.messages.num_rows == 0 or found.first is None:
        paths = ", ".join(str(s.path) for s in specs)
        return _error(f"{paths}: no chat messages in {len(found.files)} files (see the table)")
    proposal = propose_owner(found.messages)
    owner = args.owner
    if owner is None:
        if proposal.owner and args.alias:  # the names given count for the proposed owner
            missing = owner_missing(found.messages, proposal.owner, args.alias)
            proposal = dataclasses.replace(proposal, missing=tuple(missing))
        print_proposal(proposal, args.alias)
        owner = proposal.owner or "Me"
        if proposal.tied:
            names = ", ".join(proposal.tied)
            return _error(
                f"cannot tell who you are: {names} are in every conversation; pass --owner NAME"
            )
    elif proposal.conversations and not owner_found(found.messages, owner, args.alias):
        top = ", ".join(f"{c.name} ({c.conversations})" for c in proposal.candidates[:5])
        return _error(
            f"owner {owner!r} sends in none of the {proposal.conversations} conversations "
            f"found (most conversations: {top})"
        )
    text = config_text(
        owner=owner,
        aliases=args.alias,
        timezone=timezone,
        start=found.first,
        sources=specs,
        target=target,
    )
    try:
        parse_config(tomllib.loads(text), base_dir=target, env={}, origin=str(config))
    except (ConfigError, tomllib.TOMLDecodeError) as exc:  # pragma: no cover - a bug here
        return _error(f"the configuration init would write is invalid: {exc}")
    target.mkdir(parents=True, exist_ok=True)
    tmp = config.with_name(config.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, config)
    for name, text in ((INSTANCE_FILE, INSTANCE_YAML), (WORKSPACE_FILE, WORKSPACE_YAML)):
        if not (target / name).exists():  # one someone configured is theirs
            (target / name).write_text(text, encoding="utf-8")
    print(
        f"\nwrote {config}\n  owner {owner!r}, time zone {timezone}, open dates (the earliest "
        f"message is {found.first}; older exports added later are read too), output "
        f"{target / OUTPUT_DIR}"
    )
    print_next(config, suggest_queries(found.messages, [owner, *args.alias]))
    return 0


def _names(f: FileSurvey) -> str:
    names = list(f.participants[:MAX_NAMES])
    if f.exporter_marked:
        names.insert(0, "(you)")
    more = len(f.participants) - MAX_NAMES
    return ", ".join(names) + (f" +{more}" if more > 0 else "")


def _quarantined(f: FileSurvey) -> str:
    if not f.quarantined:
        return "0"
    total = sum(n for _, n in f.quarantined)
    return f"{total} (" + ", ".join(f"{r} {n}" for r, n in f.quarantined) + ")"


def print_files(found: Survey, several: bool) -> None:
    """One row per file: kind, messages, first and last date, participants, quarantine."""
    rows = [("file", "kind", "messages", "first", "last", "participants", "quarantined")]
    rows += [
        (
            _shorten(f"{f.source}: {f.file}" if several else f.file),
            f.kind or "-",
            str(f.messages),
            str(f.first or "-"),
            str(f.last or "-"),
            _shorten(_names(f), 40) or "-",
            _quarantined(f),
        )
        for f in found.files
    ]
    widths = [max(_width(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        cells = [_pad(r[i], widths[i], right=i == 2) for i in range(len(widths))]
        print("  ".join([*cells, r[-1]]).rstrip())
    total = found.messages.num_rows
    print(
        f"{len(found.files)} files, {total} messages from {found.first} to {found.last}, "
        f"{len(found.quarantine)} records quarantined (with their reasons)"
    )


def _shorten(name: str, limit: int = MAX_FILE) -> str:
    """A long path kept to ``limit`` columns: its start and its end (the file's own name)."""
    if _width(name) <= limit:
        return name
    head, tail = "", ""
    for ch in reversed(name):
        if _width(tail) + _width(ch) > limit * 2 // 3:
            break
        tail = ch + tail
    for ch in name:
        if _width(head) + _width(ch) + _width(tail) + 1 > limit:
            break
        head += ch
    return f"{head}…{tail}"


def _width(text: str) -> int:
    """Terminal columns of ``text``: wide East Asian characters take two."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _pad(text: str, width: int, *, right: bool = False) -> str:
    fill = " " * max(0, width - _width(text))
    return fill + text if right else text + fill


def print_proposal(p: OwnerProposal, aliases: list[str] | None = None) -> None:
    """Who the owner is proposed to be (with ``aliases``), and the candidates."""
    top = ", ".join(f"{c.name} ({c.conversations})" for c in p.candidates[:5])
    if p.owner is None:
        print("owner: the exports mark your own messages; you appear as 'Me' (--owner NAME)")
        return
    if p.tied:
        print(f"owner: {len(p.tied)} people are in every conversation: {', '.join(p.tied)}")
    elif p.missing:
        also = f" (with {', '.join(map(repr, aliases))})" if aliases else ""
        print(
            f"owner: {p.owner!r}{also}, in {p.conversations - len(p.missing)} of {p.conversations} "
            f"conversations; not in {len(p.missing)} ({', '.join(p.missing[:3])}"
            f"{', …' if len(p.missing) > 3 else ''}): if you appear there under another name, "
            "add it with --alias NAME"
        )
    else:
        also = f" (with {', '.join(map(repr, aliases))})" if aliases else ""
        print(f"owner: {p.owner!r}{also}, in all {p.conversations} conversations")
    print(f"  candidates (conversations): {top}; --owner NAME chooses another")


def print_next(config: Path, tips: Suggestions) -> None:
    """The commands to run next, with queries made from the person's own messages."""
    prog = "memory-pipeline"
    default = Path.cwd() / DEFAULT_CONFIG_NAME
    lines = ["", "next:"]
    if config != default:
        lines.append(f"  export MEMORY_PIPELINE_CONFIG={config}")
    lines.append(f"  {prog} run                 # builds the memory (later exports: run again)")
    if tips.search:
        lines.append(f"  {prog} search {_shell(tips.search)} --k 3")
    if tips.context:
        lines.append(f"  {prog} context {_shell(tips.context)} --budget 4000")
    lines.append("keep it fresh every night: docs/operations.md (the daemon, deploy/)")
    print("\n".join(lines))


def _shell(text: str) -> str:
    """``text`` quoted for a POSIX shell."""
    import shlex

    return shlex.quote(text)
