"""The state folder: what cannot be rebuilt, kept apart from the output (which can).

The output (tables, indexes, warehouse, caches, evaluation) is derived from the exports and
may be deleted at any time. What is *not* derived lives in the state folder
(docs/state-and-backup.md): the forget list and its salt, the retention log, the service's
key file and the Dagster instance. Deleting the output and running again therefore keeps
every forgotten person forgotten: the next ingest reads the forget list from the state.

Two small ``FORMAT.json`` records tie the two together:

- ``<state>/FORMAT.json``: the state's format version.
- ``<output>/FORMAT.json``: the output's format version and, once anything was forgotten or
  purged, the fingerprint of the forget list's salt (``salt_id``). An output that carries a
  fingerprint its state folder does not hold (the state is gone, or it is another one) is
  refused in one line: rebuilding it from the exports would bring forgotten people back.

An output written before the state moved out (format 0: no ``FORMAT.json``, the forget list
in ``<output>/privacy/``, the keys in ``<output>/service/``) is migrated on first use, with
a one-line notice. A later format change declares, per step, what it migrates or which
derived parts the next ``run`` rebuilds (:data:`UPGRADES`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from memory_pipeline.core.common import fs
from memory_pipeline.core.common.forget_list import LIST_FILE, PRIVACY_DIR, SALT_FILE
from memory_pipeline.core.common.fs import Location
from memory_pipeline.core.common.storage import write_text_atomic

FORMAT_FILE = "FORMAT.json"
OUTPUT_FORMAT = 1  # 0: before FORMAT.json (state inside the output)
STATE_FORMAT = 1
KEYS_FILE = Path("service") / "keys.json"  # in the local state folder (was: in the output)
DAGSTER_DIR = "dagster"  # the local state's Dagster instance (DAGSTER_HOME by default)
RETENTION_LOG = "retention_log.json"  # counts of every purge: history, not derived
# files of <output>/privacy that are state (the refold mark stays: it is about the output)
STATE_PRIVACY_FILES = (SALT_FILE, LIST_FILE, RETENTION_LOG)


class StateError(RuntimeError):
    """The output and the state folder do not belong together, or a format is unknown."""


@dataclass(frozen=True)
class Upgrade:
    """One output-format step: what a release reading format ``source`` does with it.

    ``rebuild`` names derived parts (:data:`DERIVED_PARTS`) deleted so the next ``run``
    rebuilds them; ``migrate`` changes files in place (output, state) and returns notices."""

    source: int
    rebuild: tuple[str, ...] = ()
    migrate: Callable[[Location, Location], list[str]] | None = None
    why: str = ""


# a derived part of the output and the paths (relative to it) that hold it
DERIVED_PARTS: dict[str, tuple[str, ...]] = {
    "search indexes": ("indexes",),
    "warehouse": ("warehouse.duckdb", "warehouse.duckdb.wal", "fingerprints"),
    "evaluation": ("eval",),
}


def salt_id(salt: bytes) -> str:
    """A fingerprint of a salt: names it without revealing it."""
    return hashlib.blake2b(salt, digest_size=8, person=b"mp-salt-id").hexdigest()


def read_format(root: Location) -> dict | None:
    """``<root>/FORMAT.json``, None when there is none."""
    path = fs.join(root, FORMAT_FILE)
    try:
        text = fs.read_text(path)
    except FileNotFoundError:
        return None
    try:
        body = json.loads(text)
        if not isinstance(body, dict):
            raise ValueError("not an object")
        return body
    except ValueError as exc:
        raise StateError(f"{path}: not a format record ({exc})") from None


def _write_format(root: Location, body: dict) -> None:
    if read_format(root) != body:
        write_text_atomic(fs.join(root, FORMAT_FILE), json.dumps(body, indent=1, sort_keys=True))


def _read(path: Location) -> str | None:
    try:
        return fs.read_text(path)
    except FileNotFoundError:
        return None


def state_salt(state: Location) -> bytes | None:
    """The state's forget-list salt, None when it has none yet."""
    text = _read(fs.join(state, PRIVACY_DIR, SALT_FILE))
    return bytes.fromhex(text.strip()) if text is not None else None


def _has_content(folder: Location) -> bool:
    if fs.is_remote(folder):
        return bool(fs.list_files(folder) or fs.list_dirs(folder))
    p = Path(folder)
    return p.is_dir() and any(c.name != ".memory-pipeline.lock" for c in p.iterdir())


def output_format(output: Location) -> int:
    """The output's format version: 0 before ``FORMAT.json`` existed."""
    body = read_format(output)
    return int(body.get("output_format", 0)) if body else 0


def bind(output: Location, state: Location, version: str = "") -> None:
    """Record in the output which state it was written with (the salt's fingerprint)."""
    salt = state_salt(state)
    body = {"output_format": OUTPUT_FORMAT}
    if salt is not None:
        body["salt_id"] = salt_id(salt)
    old = read_format(output) or {}
    body["written_by"] = version or old.get("written_by", "")
    _write_format(output, body)


def ensure_state(state: Location, *, write: bool = True) -> None:
    """The state's format record, written once (``write``); a newer one is refused."""
    body = read_format(state)
    if body is None:
        if write:
            _write_format(state, {"state_format": STATE_FORMAT})
    elif int(body.get("state_format", 0)) > STATE_FORMAT:
        raise StateError(
            f"{state} was written by a newer memory-pipeline (state format "
            f"{body.get('state_format')}; this release reads up to {STATE_FORMAT}): upgrade it"
        )


def check(output: Location, state: Location) -> None:
    """Refuse an output whose forget list is not in ``state`` (one line)."""
    body = read_format(output)
    if not body:
        return
    if int(body.get("output_format", 0)) > OUTPUT_FORMAT:
        raise StateError(
            f"{output} was written by a newer memory-pipeline (output format "
            f"{body.get('output_format')}; this release reads up to {OUTPUT_FORMAT}): upgrade it"
        )
    want = body.get("salt_id")
    if not want:
        return
    salt = state_salt(state)
    if salt is None or salt_id(salt) != want:
        what = "has no forget list" if salt is None else "holds another forget list"
        raise StateError(
            f"{output} was built with a forget list that the state folder {state} {what}; "
            "restore the state (memory-pipeline restore BACKUP) or set [pipeline] state_dir "
            "to it: rebuilding without it would bring forgotten people back"
        )


def migrate_privacy(output: Location, state: Location) -> list[str]:
    """Move the forget list, its salt and the retention log from ``<output>/privacy`` (where
    format 0 kept them) into ``<state>/privacy``; the notices (one line each)."""
    src, dst = fs.join(output, PRIVACY_DIR), fs.join(state, PRIVACY_DIR)
    found = {n: t for n in STATE_PRIVACY_FILES if (t := _read(fs.join(src, n))) is not None}
    if not found:
        return []
    have = state_salt(state)
    old_salt = found.get(SALT_FILE)
    if have is not None and old_salt is not None and bytes.fromhex(old_salt.strip()) != have:
        raise StateError(
            f"{src} holds a forget list with another salt than the state folder {state}'s; "
            "move one of them away (they cannot be merged)"
        )
    if SALT_FILE in found and have is None:
        write_text_atomic(fs.join(dst, SALT_FILE), found[SALT_FILE])
    if LIST_FILE in found:
        entries = json.loads(found[LIST_FILE])["entries"]
        current = _read(fs.join(dst, LIST_FILE))
        merged = json.loads(current)["entries"] if current else []
        seen = {(e["kind"], e["hash"]) for e in merged}
        merged += [e for e in entries if (e["kind"], e["hash"]) not in seen]
        body = json.dumps({"entries": merged}, indent=1, sort_keys=True)
        write_text_atomic(fs.join(dst, LIST_FILE), body)
    if RETENTION_LOG in found:
        current = _read(fs.join(dst, RETENTION_LOG))
        purges = json.loads(current)["purges"] if current else []
        purges += json.loads(found[RETENTION_LOG])["purges"]
        body = json.dumps({"purges": purges}, indent=1, sort_keys=True)
        write_text_atomic(fs.join(dst, RETENTION_LOG), body)
    for name in found:  # only once the state holds them
        fs.delete_file(fs.join(src, name))
    if not fs.is_remote(src) and not any(Path(src).iterdir()):
        Path(src).rmdir()
    return [f"moved the forget list ({', '.join(sorted(found))}) from {src} to {dst}"]


def migrate_keys(legacy: Path, target: Path) -> list[str]:
    """Move the service's key file from the output (format 0) into the local state."""
    if not legacy.is_file() or legacy.resolve() == target.resolve():
        return []
    old = json.loads(legacy.read_text(encoding="utf-8")).get("keys", [])
    if target.is_file():
        records = json.loads(target.read_text(encoding="utf-8")).get("keys", [])
        seen = {r["key_id"] for r in records}
        records += [r for r in old if r["key_id"] not in seen]
    else:
        records = old
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.migrating")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(json.dumps({"keys": records}, indent=1) + "\n")
    os.replace(tmp, target)
    legacy.unlink()
    with_nothing = legacy.parent
    if with_nothing.is_dir() and not any(with_nothing.iterdir()):
        with_nothing.rmdir()
    return [f"moved the service's key file from {legacy} to {target}"]


def _format_0_to_1(output: Location, state: Location) -> list[str]:
    return migrate_privacy(output, state)


# what a release does with an older output, one step per format version
UPGRADES: dict[int, Upgrade] = {
    0: Upgrade(0, migrate=_format_0_to_1, why="the forget list moved to the state folder"),
}


@dataclass
class Prepared:
    """What :func:`prepare` did: one-line notices, and derived parts deleted for a rebuild."""

    notices: list[str] = field(default_factory=list)
    rebuild: list[str] = field(default_factory=list)


def upgrade_output(output: Location, state: Location, *, writing: bool) -> Prepared:
    """Bring an older output to :data:`OUTPUT_FORMAT`: migrate in place, or (only when the
    command writes) delete the derived parts a step rebuilds, saying so in one line."""
    done = Prepared()
    version = output_format(output)
    if version >= OUTPUT_FORMAT or not _has_content(output):
        return done
    steps = [UPGRADES[v] for v in range(version, OUTPUT_FORMAT)]
    rebuild = sorted({p for s in steps for p in s.rebuild})
    if rebuild and not writing:
        raise StateError(
            f"{output} has output format {version}; this release reads format "
            f"{OUTPUT_FORMAT} after rebuilding its {', '.join(rebuild)}: run "
            "`memory-pipeline run` once"
        )
    for step in steps:
        if step.migrate is not None:
            done.notices.extend(step.migrate(output, state))
    if rebuild:
        for part in rebuild:
            for rel in DERIVED_PARTS[part]:
                _delete(fs.join(output, rel))
        done.rebuild = rebuild
        why = "; ".join(s.why for s in steps if s.rebuild and s.why)
        done.notices.append(
            f"upgrade: {output} had output format {version}; rebuilding its "
            f"{', '.join(rebuild)} in this run" + (f" ({why})" if why else "")
        )
    return done


def _delete(location: Location) -> None:
    if fs.is_remote(location):
        if not fs.delete_file(location):
            fs.delete_tree(location)
        return
    p = Path(location)
    if p.is_dir():
        shutil.rmtree(p)
    else:
        p.unlink(missing_ok=True)


def prepare(
    pairs: list[tuple[Location, Location]],
    *,
    keys: tuple[Path, Path] | None = None,
    writing: bool = False,
    version: str = "",
) -> Prepared:
    """Migrate, check and stamp each (output, state) pair; the notices to print.

    Raises :class:`StateError` (one line) for an output whose state is missing or foreign,
    or a format newer than this release reads."""
    done = Prepared()
    for output, state in pairs:
        body = read_format(output)
        if body and int(body.get("output_format", 0)) > OUTPUT_FORMAT:
            check(output, state)  # says "newer"
        moved = migrate_privacy(output, state)
        check(output, state)
        step = upgrade_output(output, state, writing=writing)
        changed = bool(moved or step.notices)
        # a reading command writes nothing unless it migrated; a writing one stamps both
        ensure_state(state, write=writing or changed)
        if (writing or changed) and (writing or _has_content(output)):
            bind(output, state, version)
        done.notices.extend(moved + step.notices)
        done.rebuild.extend(step.rebuild)
    if keys is not None:
        done.notices.extend(migrate_keys(*keys))
    return done

