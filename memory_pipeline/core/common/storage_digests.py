"""Content digests of stored files, memoized by file identity in this process and, per
folder, in a small book beside the files, so a refresh does not re-hash every stored byte.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import threading
import uuid
from pathlib import Path

from memory_pipeline.core.common import fs
from memory_pipeline.core.common.fs import Location
from memory_pipeline.core.common.storage_memo import _identity

# file identity (device, inode, size, mtime) -> sha256 of its bytes: a partition is only ever
# replaced by a rename (a new inode), so an unchanged identity means unchanged bytes. Kept in
# this process and, per folder, in ``DIGESTS_FILE`` (file name -> identity + sha256): each
# Dagster run is a new process, and without the file every refresh re-hashed every stored
# byte (~0.7 GB on RealPersonaChat) to fingerprint its inputs and find changed partitions.
DIGESTS_FILE = ".digests.json"
_DIGESTS: dict[tuple[str, tuple[int, ...]], str] = {}
_DIGESTS_LOCK = threading.Lock()
_BOOKS: dict[Path, tuple[tuple[int, ...] | None, dict[str, list]]] = {}
# digests computed since a folder's book was last written (folder -> file name -> entry): the
# book is rewritten once they reach a quarter of it (at least FLUSH_MIN), and at exit, not once
# per new digest (a first run over 1,884 days rewrote a growing book 1,884 times per table,
# ~50 s of a 10-minute run); a digest not yet written is at worst computed again by another
# process
_PENDING: dict[Path, dict[str, list]] = {}
FLUSH_MIN = 64


def _book(folder: Path) -> dict[str, list]:
    """The folder's recorded digests (call under ``_DIGESTS_LOCK``), re-read when the file
    changed (another process recorded some)."""
    path = folder / DIGESTS_FILE
    try:
        ident: tuple[int, ...] | None = _identity(os.stat(path))
    except OSError:
        ident = None
    cached = _BOOKS.get(folder)
    if cached is not None and cached[0] == ident:
        return cached[1]
    entries: dict[str, list] = {}
    if ident is not None:
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
            entries = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError):
            entries = {}  # unreadable: recomputed and rewritten
    _BOOKS[folder] = (ident, entries)
    return entries


def _save_book(folder: Path, entries: dict[str, list]) -> None:
    """Write the folder's digests atomically (call under ``_DIGESTS_LOCK``)."""
    path = folder / DIGESTS_FILE
    tmp = folder / f".{DIGESTS_FILE}.{uuid.uuid4().hex}.tmp"
    try:
        tmp.write_text(json.dumps(entries, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)
        _BOOKS[folder] = (_identity(os.stat(path)), entries)
    except OSError:
        tmp.unlink(missing_ok=True)  # a read-only store: the digest is still returned
        _BOOKS.pop(folder, None)


def forget_digest(path: Path) -> None:
    """Drop ``path``'s recorded digest (its file is replaced or deleted): a digest of a
    partition's old bytes does not outlive them."""
    path = Path(path)
    with _DIGESTS_LOCK:
        _PENDING.get(path.parent, {}).pop(path.name, None)
        if not (path.parent / DIGESTS_FILE).is_file():
            return
        entries = _book(path.parent)
        if path.name in entries:
            entries = {k: v for k, v in entries.items() if k != path.name}
            _save_book(path.parent, entries)


def file_digest(path: Location) -> str:
    """sha256 of a stored file's bytes; a local file's is computed once per file identity
    (``_identity``: a rewrite renames a new file into place) and recorded beside it
    (``DIGESTS_FILE``), so asking again, in this process or the next, is a stat."""
    if fs.is_remote(path):
        return hashlib.sha256(fs.read_bytes(path)).hexdigest()
    path = Path(path)
    stat = os.stat(path)
    ident = _identity(stat)
    key = (str(path), ident)
    with _DIGESTS_LOCK:
        known = _DIGESTS.get(key)
        if known is None:
            entry = _book(path.parent).get(path.name)
            if entry is not None and tuple(entry[:-1]) == ident:
                known = _DIGESTS[key] = entry[-1]
    if known is not None:
        return known
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    sha = h.hexdigest()
    with _DIGESTS_LOCK:
        if len(_DIGESTS) > 100_000:
            _DIGESTS.clear()
        _DIGESTS[key] = sha
        _record(path.parent, path.name, [*ident, sha])
    return sha


def _record(folder: Path, name: str, entry: list) -> None:
    """Add ``name``'s entry to the folder's pending digests (call under ``_DIGESTS_LOCK``);
    the book is written when enough are pending."""
    pending = _PENDING.setdefault(folder, {})
    pending[name] = entry
    if len(pending) >= max(FLUSH_MIN, len(_book(folder)) // 4):
        _flush(folder)


def _flush(folder: Path) -> None:
    """Write the folder's book with its pending digests (call under ``_DIGESTS_LOCK``): over
    the book as it is on disk now (another process may have written it), each pending
    digest kept only while its file still has the identity it was computed for, so a
    digest of a deleted or replaced partition is never written."""
    pending = _PENDING.pop(folder, {})
    if not pending:
        return
    entries = dict(_book(folder))
    for name, entry in pending.items():
        try:
            ident = _identity(os.stat(folder / name))
        except OSError:
            continue
        if tuple(entry[:-1]) == ident:
            entries[name] = entry
    _save_book(folder, entries)


@atexit.register
def flush_digests() -> None:
    """Write every book with pending digests (at exit; callers may flush sooner)."""
    with _DIGESTS_LOCK:
        for folder in list(_PENDING):
            _flush(folder)
