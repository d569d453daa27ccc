"""Published search indexes: BM25 per representation, dense matrices (+ HNSW), time metadata,
and the chunk and message lookups a search reads.

A build writes a new version folder and then swaps ``CURRENT`` (one atomic rename), so a
reader (the search API, the CLI) sees either the previous complete version or the new one,
never a half-written index. The last two versions are kept.

On object storage (an ``s3://`` output) there is no rename: a version is built in a local
staging folder, uploaded file by file under ``indexes/<version>/``, then its
``MANIFEST.json`` (every file and its size) is written, and ``CURRENT`` *last*. A reader
follows ``CURRENT`` to a version that has a manifest, downloads it into a local cache
folder (``fs.cache_dir``), checks every file against the manifest and only then loads it;
an interrupted publish leaves ``CURRENT`` naming the previous version, and a version
without a manifest is never read. Versions are immutable, so a cached copy stays valid.

A version is self-contained: the searcher reads only its folder, never the live ``chunks``
and ``raw_messages`` tables, so a session re-chunked (or a table rewritten) after the build
cannot make index N point at rows of N+1.

This module names, publishes, finds and prunes versions; what goes into one is built in
``publish_bm25`` (the texts and BM25 indexes), ``publish_dense`` (matrices and ANN graphs) and
``publish_lookups`` (the rows a search reads). The names other code uses are re-exported here.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

from memory_pipeline.core.common import fs
from memory_pipeline.core.common.fs import Location
from memory_pipeline.core.indexes.publish_bm25 import (
    Bm25Build,
    build_bm25,
    load_bm25,
    representation_arrays,
    representation_table,
)
from memory_pipeline.core.indexes.publish_dense import ANN_KINDS, DENSE_COLUMNS, build_dense
from memory_pipeline.core.indexes.publish_lookups import (
    CHUNK_LOOKUP,
    CHUNK_LOOKUP_COLUMNS,
    LOOKUP_LINKS,
    MESSAGE_LOOKUP,
    MESSAGE_LOOKUP_COLUMNS,
    SESSION_LOOKUP,
    finish_lookups,
    has_lookups,
    link_lookups,
    read_lookups,
    sorted_by,
    write_lookups,
)

__all__ = [
    "ANN_KINDS",
    "CHUNK_LOOKUP",
    "CHUNK_LOOKUP_COLUMNS",
    "CURRENT",
    "DENSE_COLUMNS",
    "KEEP_VERSIONS",
    "LOOKUP_LINKS",
    "MANIFEST",
    "MESSAGE_LOOKUP",
    "MESSAGE_LOOKUP_COLUMNS",
    "SESSION_LOOKUP",
    "Bm25Build",
    "build_bm25",
    "build_dense",
    "current_version",
    "drop_local_copies",
    "finish_lookups",
    "has_lookups",
    "index_root",
    "link_lookups",
    "list_versions",
    "load_bm25",
    "new_version",
    "publish",
    "read_lookups",
    "representation_arrays",
    "representation_table",
    "sorted_by",
    "write_lookups",
]

CURRENT = "CURRENT"
MANIFEST = "MANIFEST.json"  # object storage: written after a version's files, before CURRENT
KEEP_VERSIONS = 2


def index_root(output_dir: Location) -> Location:
    return fs.join(output_dir, "indexes")


def new_version(root: Location) -> Path:
    """A fresh, private folder to build the next version in (local staging for a remote
    root: the build tools write local files; ``publish`` uploads them)."""
    name = f"v-{uuid.uuid4().hex[:12]}"
    if fs.is_remote(root):
        path = fs.cache_dir(root) / "staging" / name
        path.mkdir(parents=True)
        return path
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    path = root / name
    path.mkdir()
    return path


def publish(root: Location, version: Path) -> None:
    """Make ``version`` current atomically, then drop versions older than the last two."""
    if fs.is_remote(root):
        _publish_remote(str(root), Path(version))
        return
    root = Path(root)
    tmp = root / f".{CURRENT}.{uuid.uuid4().hex}"
    tmp.write_text(version.name, encoding="utf-8")
    os.replace(tmp, root / CURRENT)
    versions = sorted((p for p in root.glob("v-*") if p.is_dir()), key=lambda p: p.stat().st_mtime)
    for old in versions[:-KEEP_VERSIONS]:
        if old.name != version.name:
            shutil.rmtree(old, ignore_errors=True)


def _publish_remote(root: str, version: Path) -> None:
    """Upload, manifest, then pointer; then delete complete versions other than the new and
    the previous one. The staging folder becomes the local cached copy of the version."""
    previous = _pointer(root)
    remote = fs.join(root, version.name)
    files = fs.upload_tree(version, remote)
    manifest = {"version": version.name, "files": dict(files)}
    fs.write_text_atomic(fs.join(remote, MANIFEST), json.dumps(manifest, sort_keys=True))
    fs.write_text_atomic(fs.join(root, CURRENT), version.name)  # the commit point
    for name in fs.list_dirs(root):
        if name.startswith("v-") and name not in (version.name, previous):
            # only complete versions: one without a manifest may be another run's upload
            if fs.is_file(fs.join(root, name, MANIFEST)):
                fs.delete_tree(fs.join(root, name))
    cached = fs.cache_dir(root) / "versions" / version.name
    (version / MANIFEST).write_text(json.dumps(manifest, sort_keys=True), encoding="utf-8")
    if not cached.exists():
        cached.parent.mkdir(parents=True, exist_ok=True)
        os.replace(version, cached)
    _prune_cache(root, keep={version.name, previous or ""})


def _pointer(root: Location) -> str | None:
    try:
        return fs.read_text(fs.join(root, CURRENT)).strip() or None
    except FileNotFoundError:
        return None


def current_version(output_dir: Location) -> Path | None:
    """The published version folder, or None before the first index build (for a remote
    output: a verified local copy of it)."""
    root = index_root(output_dir)
    if fs.is_remote(root):
        return _fetch_remote(str(root))
    try:
        name = (Path(root) / CURRENT).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    path = Path(root) / name
    return path if path.is_dir() else None


def _fetch_remote(root: str) -> Path | None:
    """The local copy of the version ``CURRENT`` names, downloaded and checked against its
    manifest on first use (into a temp folder renamed into place: a reader never loads a
    half-downloaded copy); None when nothing complete is published."""
    name = _pointer(root)
    if name is None:
        return None
    try:
        manifest = json.loads(fs.read_text(fs.join(root, name, MANIFEST)))
    except FileNotFoundError:
        return None
    cached = fs.cache_dir(root) / "versions" / name
    if cached.is_dir():
        return cached
    tmp = cached.with_name(f".{name}.{uuid.uuid4().hex}")
    try:
        got = dict(fs.download_tree(fs.join(root, name), tmp))
        got.pop(MANIFEST, None)
        if got != manifest["files"]:
            raise OSError(f"index version {name} under {root} does not match its manifest")
        try:
            os.replace(tmp, cached)
        except OSError:  # another reader renamed its copy first
            if not cached.is_dir():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _prune_cache(root, keep={name})
    return cached


def _prune_cache(root: str, keep: set[str]) -> None:
    """Drop local copies of versions no longer published (they hold forgotten data too)."""
    folder = fs.cache_dir(root) / "versions"
    for p in folder.glob("v-*") if folder.is_dir() else []:
        if p.name not in keep:
            shutil.rmtree(p, ignore_errors=True)


def drop_local_copies(root: Location) -> None:
    """Delete every local copy and staging folder of a remote index root (forget: the
    copies hold the contact's texts); nothing for a local root."""
    if fs.is_remote(root):
        for sub in ("versions", "staging"):
            shutil.rmtree(fs.cache_dir(root) / sub, ignore_errors=True)


def list_versions(root: Location) -> list[Location]:
    """Every version folder under ``root`` (complete or not), by name."""
    if not fs.is_remote(root):
        root = Path(root)
        return sorted(p for p in root.glob("v-*") if p.is_dir()) if root.is_dir() else []
    return [fs.join(root, n) for n in fs.list_dirs(root) if n.startswith("v-")]
