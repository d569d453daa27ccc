"""The ``backup`` and ``restore`` commands, and ``--version`` (docs/state-and-backup.md)."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import time
from pathlib import Path
from typing import Any

from memory_pipeline.cli_common import DEFAULT_WAIT_SECONDS, _non_negative_int, load_config
from memory_pipeline.config import PipelineConfig
from memory_pipeline.core.common import backup as B
from memory_pipeline.core.common import fs
from memory_pipeline.core.common import state as S
from memory_pipeline.service.keys import KEYS_ENV
from memory_pipeline.state import (
    instance_home,
    package_version,
    prepare_state,
    sqlite_base_dir,
    version_line,
    write_instance_yaml,
)

__all__ = ["add_state_commands", "cmd_backup", "cmd_restore", "version_line"]

EXIT_OK, EXIT_USAGE = 0, 2


def add_state_commands(sub: Any) -> None:
    """Add ``backup`` and ``restore`` to the CLI's subparsers."""
    bk = sub.add_parser(
        "backup",
        help="copy what cannot be rebuilt (state, configuration) into a new folder",
        description="A consistent snapshot, safe while the service and the nightly run go "
        "on: the forget list and its salt, the service's keys, the Dagster instance and the "
        "configuration, with a manifest of digests.",
    )
    bk.add_argument("dest", help="a new (or empty) folder for the backup")
    bk.add_argument(
        "--include-derived",
        action="store_true",
        help="also copy the output (tables, indexes, warehouse, provider cache): a restore "
        "then needs no rebuild (default: state only)",
    )
    bk.add_argument(
        "--wait",
        type=_non_negative_int,
        default=DEFAULT_WAIT_SECONDS,
        metavar="SECONDS",
        help=f"wait this long for a run in progress (default {DEFAULT_WAIT_SECONDS})",
    )
    bk.set_defaults(func=cmd_backup)
    rs = sub.add_parser(
        "restore",
        help="put a backup back (state, and the output when it holds one)",
        description="Checks every digest first; refuses to overwrite an existing state "
        "unless --force (even then no forgotten contact comes back).",
    )
    rs.add_argument("src", help="a folder written by `memory-pipeline backup`")
    rs.add_argument(
        "--force", action="store_true", help="replace an existing state (and output)"
    )
    rs.set_defaults(func=cmd_restore)


def _instance_storage(cfg: PipelineConfig) -> tuple[str, Path | None]:
    """("sqlite", its storage folder) or ("postgres", None) of the instance in use."""
    import yaml

    home = instance_home(cfg)
    path = home / "dagster.yaml"
    body = yaml.safe_load(path.read_text(encoding="utf-8")) or {} if path.is_file() else {}
    storage = body.get("storage") or {}
    if "postgres" in storage:
        return "postgres", None
    base = sqlite_base_dir(storage)
    # a relative folder is Dagster's working directory's (where the commands run)
    return "sqlite", (Path(base) if base else home / "storage").resolve()


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.relative_to(folder.resolve())
    except ValueError:
        return False
    return True


def _sections(cfg: PipelineConfig, include_derived: bool) -> tuple[list[B.Section], list[str]]:
    notes: list[str] = []
    state = cfg.state_root
    sections = [B.Section("state", state)]
    if fs.is_remote(state):
        sections.append(B.Section("local_state", cfg.local_state_dir))
    if os.environ.get(KEYS_ENV):
        notes.append(f"the key file (${KEYS_ENV}) is outside the state folder: back it up yourself")
    kind, storage = _instance_storage(cfg)
    if kind == "postgres":
        notes.append("the Dagster instance is on PostgreSQL: back it up with pg_dump")
    elif storage is not None and not _inside(storage, cfg.local_state_dir):
        notes.append(
            f"the Dagster instance's storage ({storage}) is outside the state folder: "
            "back it up yourself"
        )
    if cfg.config_path is not None:
        sections.append(B.Section("config", cfg.config_path.parent, _only(cfg.config_path.name)))
    if include_derived:
        sections.append(B.Section("output", cfg.storage_root))
        if cfg.output_uri:
            sections.append(B.Section("work", cfg.output_dir))
    return sections, notes


def _only(name: str):
    return lambda rel: rel != name


def cmd_backup(args: argparse.Namespace) -> int:
    """Snapshot the state (and with --include-derived the output) into ``args.dest``."""
    from memory_pipeline.cli_common import _writing

    cfg = load_config(args.config)
    prepare_state(cfg, move_keys=not os.environ.get(KEYS_ENV))
    start, cpu = time.perf_counter(), time.process_time()
    # the writer's lock: no run or forget changes the output or the forget list meanwhile
    # (the service keeps answering; its key file and the SQLite files copy consistently)
    with _writing(cfg, args.wait):
        sections, notes = _sections(cfg, args.include_derived)
        meta = {
            "package_version": package_version(),
            "output_format": S.OUTPUT_FORMAT,
            "state_format": S.STATE_FORMAT,
            "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "include_derived": bool(args.include_derived),
            "config_name": cfg.config_path.name if cfg.config_path else None,
            "notes": notes,
        }
        try:
            done = B.take_backup(Path(args.dest), sections, meta)
        except B.BackupError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_USAGE
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    what = "state and output" if args.include_derived else "state"
    print(
        f"backup of the {what}: {done.files} files, {done.bytes:,} bytes in {args.dest} "
        f"({time.perf_counter() - start:.1f} s, {time.process_time() - cpu:.1f} s CPU)"
    )
    return EXIT_OK


# made by any command that opens the instance: not state worth refusing a restore for
GENERATED = frozenset({f"{S.DAGSTER_DIR}/dagster.yaml"})


def _occupied(location: fs.Location) -> bool:
    if fs.is_remote(location):
        return bool(fs.list_files(location) or fs.list_dirs(location))
    p = Path(location)
    return any(
        f.name not in B.SKIP_NAMES and f.relative_to(p).as_posix() not in GENERATED
        for f in (p.rglob("*") if p.is_dir() else ())
        if f.is_file()
    )


def cmd_restore(args: argparse.Namespace) -> int:
    """Check a backup's digests, then write it back into this configuration's folders."""
    cfg = load_config(args.config)
    src = Path(args.src)
    try:
        body = B.read_manifest(src)
    except B.BackupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    have = B.sections_in(body)
    targets: dict[str, fs.Location] = {"state": cfg.state_root}
    if "local_state" in have:
        targets["local_state"] = cfg.local_state_dir
    if "output" in have:
        targets["output"] = cfg.storage_root
    if "work" in have:
        targets["work"] = cfg.output_dir
    busy = [str(t) for n, t in targets.items() if n != "work" and _occupied(t)]
    if busy and not args.force:
        print(
            f"error: {', '.join(busy)} already hold data; restore into an empty place, or "
            "pass --force to replace it",
            file=sys.stderr,
        )
        return EXIT_USAGE
    kept = _forget_entries_now(cfg) if args.force else []
    for name, target in targets.items():
        if args.force and name in ("output", "work") and _occupied(target):
            _clear(target)
        B.restore_section(src, body, name, target)
    if kept:
        _keep_forgotten(cfg, kept)
    if "output" in have:
        _repoint_warehouses(cfg)
    _private(cfg.local_state_dir)
    home = cfg.local_state_dir / S.DAGSTER_DIR
    if (home / "dagster.yaml").is_file() or (home / "storage").is_dir():
        # the restored instance's storage paths point at this state folder
        write_instance_yaml(home, cfg.config_path.parent if cfg.config_path else None)
    if "config" in have:
        print(f"note: the backup's configuration is in {src / 'config'} (not copied over yours)")
    # an older backup goes through this release's upgrade (migrate, or say what is rebuilt)
    prepare_state(cfg, writing="output" not in have)
    files = len(body.get("files", {}))
    then = body.get("package_version", "?")
    print(f"restored {files} files from {src} (written by memory-pipeline {then})")
    if "output" not in have:
        print("the output is rebuilt from your exports by `memory-pipeline run`")
    return EXIT_OK


def _forget_entries_now(cfg: PipelineConfig) -> list[tuple[fs.Location, bytes, list[dict]]]:
    """Every forget list of the current state (with its salt), before --force replaces it."""
    from memory_pipeline.core.common.forget_list import load_forget_list
    from memory_pipeline.state import pairs

    found = []
    for _, state in pairs(cfg):
        fl = load_forget_list(state)
        if fl.entries:
            found.append((state, fl.salt, list(fl.entries)))
    return found


def _keep_forgotten(cfg: PipelineConfig, kept: list[tuple[fs.Location, bytes, list[dict]]]) -> None:
    """A forced restore never un-forgets: the replaced state's entries are added back when the
    restored salt is the same; a different salt is refused."""
    from memory_pipeline.core.common.forget_list import (
        ForgetList,
        load_forget_list,
        save_forget_list,
    )

    for state, salt, entries in kept:
        restored = load_forget_list(state)
        if restored.salt and restored.salt != salt:
            raise S.StateError(
                f"{state}: the backup's forget list has another salt than the one it replaced; "
                f"{len(entries)} forgotten entries could not be carried over"
            )
        seen = {(e["kind"], e["hash"]) for e in restored.entries}
        merged = restored.entries + [e for e in entries if (e["kind"], e["hash"]) not in seen]
        save_forget_list(state, ForgetList(salt=salt, entries=merged))


def _repoint_warehouses(cfg: PipelineConfig) -> None:
    """A local warehouse's views name its tables' folder by absolute path: rewrite them for
    where the output was restored (it may be another folder or machine)."""
    from memory_pipeline.core.common.catalog import refresh_catalog

    if cfg.output_uri:  # its warehouse holds the tables' rows, no paths
        return
    scopes = [cfg.for_owner(s) for s in cfg.owner_specs()] if cfg.multi_owner else [cfg]
    for scope in scopes:
        if scope.warehouse_path.is_file():
            owner = scope.owner_id if scope.root_dir is not None else None
            refresh_catalog(scope.warehouse_path, scope.output_dir / "parquet", owner)


def _clear(location: fs.Location) -> None:
    if fs.is_remote(location):
        fs.delete_tree(location)
        return
    import shutil

    for child in Path(location).iterdir():
        if child.name in B.SKIP_NAMES:
            continue
        shutil.rmtree(child) if child.is_dir() else child.unlink()


def _private(folder: Path) -> None:
    """The restored key file is readable by its owner only, as ``keys create`` writes it."""
    keys = folder / S.KEYS_FILE
    if keys.is_file():
        keys.chmod(0o600)
