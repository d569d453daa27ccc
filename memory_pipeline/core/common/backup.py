"""Backups: a consistent copy of what cannot be rebuilt, with a manifest of digests.

A backup is a folder::

    MANIFEST.json      format version, the package's, the formats of state and output,
                       and every file's SHA-256 and size
    <section>/...      one folder per section: ``state`` (the state folder), ``local_state``
                       (its local part when the state is on object storage), ``config``
                       (the configuration file), and with ``--include-derived`` ``output``
                       (and ``work``, the local working folder of an object-storage output)

Consistency while the service and the nightly run keep going: the caller holds the output's
writer lock (no run or forget writes meanwhile); every SQLite file (the Dagster instance, the
provider cache) is copied with SQLite's online backup API, which gives a transaction-consistent
copy even while another connection writes; every other file is copied, then read again and
compared with its source (a file replaced during the copy, a key created by the service, is
copied again). Restoring checks every digest first and writes nothing from a damaged backup.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from memory_pipeline.core.common import fs
from memory_pipeline.core.common.fs import Location

MANIFEST = "MANIFEST.json"
BACKUP_FORMAT = 1
SKIP_NAMES = frozenset({".memory-pipeline.lock"})  # the writer lock: never state
SQLITE_MAGIC = b"SQLite format 3\x00"
COPY_TRIES = 3


class BackupError(RuntimeError):
    """A backup or restore that cannot be done (one line, naming the file)."""


@dataclass
class Section:
    """One folder of the backup and where it comes from (or goes back to)."""

    name: str
    source: Location
    skip: Callable[[str], bool] = lambda rel: False  # relative paths left out


@dataclass
class BackupResult:
    files: int = 0
    bytes: int = 0
    notes: list[str] = field(default_factory=list)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _is_sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(16) == SQLITE_MAGIC
    except OSError:
        return False


def _sqlite_copy(src: Path, dst: Path) -> None:
    """SQLite's online backup: a consistent copy even while another connection writes."""
    source = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    target = sqlite3.connect(str(dst))
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()


def _local_files(root: Path) -> Iterable[tuple[str, Path]]:
    if not root.is_dir():
        return
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink() and p.name not in SKIP_NAMES:
            rel = p.relative_to(root).as_posix()
            # SQLite's side files: the backup API folds them into the copy of the database
            base = root / rel.rsplit("-", 1)[0]
            if rel.endswith(("-wal", "-shm", "-journal")) and base.is_file():
                continue
            yield rel, p


def _copy_local(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if _is_sqlite(src):
        _sqlite_copy(src, dst)
        return
    for _ in range(COPY_TRIES):
        before = sha256_file(src)
        shutil.copyfile(src, dst)
        if sha256_file(dst) == before == sha256_file(src):
            return
    raise BackupError(f"{src}: kept changing while it was copied ({COPY_TRIES} tries)")


def copy_tree(src: Path, dst: Path) -> int:
    """Copy a local folder (SQLite files consistently); the number of files copied."""
    n = 0
    for rel, path in _local_files(Path(src)):
        _copy_local(path, Path(dst) / rel)
        n += 1
    return n


def take_backup(dest: Path, sections: list[Section], meta: dict) -> BackupResult:
    """Copy every section into ``dest`` (a new or empty folder), then write the manifest."""
    dest = Path(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise BackupError(f"{dest}: exists and is not an empty folder; give a new one")
    dest.mkdir(parents=True, exist_ok=True)
    result = BackupResult()
    files: dict[str, dict] = {}
    for section in sections:
        target = dest / section.name
        if fs.is_remote(section.source):
            listed = [(rel, None) for rel, _ in fs.list_files(section.source, recursive=True)]
        else:
            listed = list(_local_files(Path(section.source)))
        for rel, local in listed:
            if section.skip(rel) or Path(rel).name in SKIP_NAMES:
                continue
            out = target / rel
            if local is None:
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(fs.read_bytes(fs.join(section.source, rel)))
            else:
                _copy_local(local, out)
            size = out.stat().st_size
            files[f"{section.name}/{rel}"] = {"sha256": sha256_file(out), "bytes": size}
            result.files += 1
            result.bytes += size
    body = {"backup_format": BACKUP_FORMAT, **meta, "files": files}
    (dest / MANIFEST).write_text(json.dumps(body, indent=1, sort_keys=True) + "\n", "utf-8")
    return result


def read_manifest(src: Path) -> dict:
    """The backup's manifest, every file checked against its digest (one-line errors)."""
    path = Path(src) / MANIFEST
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BackupError(f"{src}: not a memory-pipeline backup (no {MANIFEST})") from None
    except (OSError, ValueError) as exc:
        raise BackupError(f"{path}: unreadable manifest ({exc})") from None
    version = int(body.get("backup_format", 0))
    if version > BACKUP_FORMAT:
        raise BackupError(
            f"{src}: backup format {version} is newer than this release reads "
            f"({BACKUP_FORMAT}): restore it with that release or a newer one"
        )
    for rel, entry in sorted(body.get("files", {}).items()):
        p = Path(src) / rel
        if not p.is_file():
            raise BackupError(f"{p}: listed in the manifest but missing: the backup is damaged")
        if sha256_file(p) != entry["sha256"]:
            raise BackupError(f"{p}: digest differs from the manifest: the backup is damaged")
    return body


def sections_in(body: dict) -> set[str]:
    return {rel.split("/", 1)[0] for rel in body.get("files", {})}


def restore_section(src: Path, body: dict, name: str, target: Location) -> int:
    """Write section ``name`` of a checked backup to ``target``; the number of files."""
    prefix = f"{name}/"
    n = 0
    for rel in sorted(r for r in body.get("files", {}) if r.startswith(prefix)):
        data_path = Path(src) / rel
        inner = rel[len(prefix) :]
        if fs.is_remote(target):
            fs.write_bytes_atomic(fs.join(target, inner), data_path.read_bytes())
        else:
            out = Path(target) / inner
            out.parent.mkdir(parents=True, exist_ok=True)
            tmp = out.with_name(f".{out.name}.restoring")
            shutil.copyfile(data_path, tmp)
            tmp.replace(out)
        n += 1
    return n
