"""One writer at a time per output folder: an advisory lock on ``<output>/.memory-pipeline.lock``.

Two commands that write the same output (two ``run``, a ``run`` and a ``forget --yes``) would
otherwise interleave their partition writes, retention purges and warehouse swaps; one of
them could delete what the other is in the middle of writing. The lock is ``fcntl.flock``
on a file in the output folder:

- **It cannot go stale.** The kernel releases it when the holder's file descriptor closes,
  which includes the process dying (``kill -9``, out of memory, a crash): no pid file to
  clean up, no "remove this file if no run is in progress" advice.
- **The lock file itself is never deleted.** Deleting it would let a waiting process hold a
  lock on the removed file while a newcomer locks a fresh one, two writers at once.
- **It names its holder.** The holder writes its pid into the file, so a second writer can
  say whom it is waiting for.
- **It is re-entrant within one thread.** ``memory-pipeline run`` holds it and then executes
  its Dagster runs in process, in the same thread, and every Dagster run that writes takes it
  too (``defs/writer_lock.py``): a nested ``output_lock`` of a folder this thread already
  holds passes at once (two ``flock`` calls on two descriptors would block each other).
  Another thread of the process (a service's forget while a test or a run holds the lock)
  and another process still wait: each opens its own descriptor, which ``flock`` treats
  apart.

The lock is advisory and per machine: it serializes this package's writing commands, not
an arbitrary process writing into the folder, and ``flock`` on a network file system is
only as good as that file system's lock support.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_NAME = ".memory-pipeline.lock"
POLL_SECONDS = 0.2  # how often a waiting writer tries again

# (thread, lock file) this process holds -> nesting depth (re-entrancy, see the docstring)
_HELD: dict[tuple[int, str], int] = {}
_HELD_GUARD = threading.Lock()


class LockBusy(RuntimeError):
    """Another process holds the output folder's lock and ``wait`` ran out."""

    def __init__(
        self, folder: Path, holder: int | None, waited: float, how: str = "--wait SECONDS"
    ) -> None:
        who = f"pid {holder}" if holder else "another process"
        gave_up = (
            f"gave up after waiting {waited:.0f} s ({how} waits longer)"
            if waited > 0
            else f"not waiting for it ({how} waits)"
        )
        super().__init__(
            f"{folder} is being written by another memory-pipeline command ({who}); {gave_up}"
        )
        self.folder, self.holder, self.waited = folder, holder, waited


def lock_path(output_dir: Path) -> Path:
    """Where the lock of ``output_dir`` lives."""
    return Path(output_dir) / LOCK_NAME


def holder_pid(output_dir: Path) -> int | None:
    """The pid the current (or last) holder wrote, None when unreadable: only for messages,
    never to decide anything (the flock decides)."""
    try:
        text = lock_path(output_dir).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


@contextmanager
def output_lock(
    output_dir: Path,
    *,
    wait: float = 0.0,
    on_wait: Callable[[int | None], None] | None = None,
    how: str = "--wait SECONDS",
) -> Iterator[Path]:
    """Hold the exclusive lock of ``output_dir`` for the ``with`` block.

    When another process holds it, the lock is retried for up to ``wait`` seconds (0: not
    at all; ``on_wait(holder_pid)`` is called once before waiting), then :class:`LockBusy`
    is raised (``how`` names, in its message, the setting that waits longer).
    Yields the lock file's path."""
    folder = Path(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = lock_path(folder)
    key = (threading.get_ident(), os.path.realpath(path))
    with _HELD_GUARD:
        nested = key in _HELD
        if nested:
            _HELD[key] += 1
    if nested:  # this thread holds it already: the outer holder releases it
        try:
            yield path
        finally:
            with _HELD_GUARD:
                _HELD[key] -= 1
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        _acquire(fd, folder, wait, on_wait, how)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        with _HELD_GUARD:
            _HELD[key] = 1
        try:
            yield path
        finally:
            with _HELD_GUARD:
                _HELD.pop(key, None)
    finally:
        os.close(fd)  # releases the flock (as the process's death would)


def held_here(output_dir: Path) -> bool:
    """Whether this thread holds the lock of ``output_dir`` (a nested take passes)."""
    key = (threading.get_ident(), os.path.realpath(lock_path(Path(output_dir))))
    with _HELD_GUARD:
        return key in _HELD


def _acquire(
    fd: int,
    folder: Path,
    wait: float,
    on_wait: Callable[[int | None], None] | None,
    how: str,
) -> None:
    if _try_lock(fd):
        return
    if wait <= 0:
        raise LockBusy(folder, holder_pid(folder), 0.0, how)
    if on_wait is not None:
        on_wait(holder_pid(folder))
    start = time.monotonic()
    deadline = start + wait
    while time.monotonic() < deadline:
        time.sleep(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))
        if _try_lock(fd):
            return
    raise LockBusy(folder, holder_pid(folder), time.monotonic() - start, how)


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True
