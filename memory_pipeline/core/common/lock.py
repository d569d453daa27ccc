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

The lock is advisory and per machine: it serializes this package's writing commands, not
an arbitrary process writing into the folder, and ``flock`` on a network file system is
only as good as that file system's lock support.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_NAME = ".memory-pipeline.lock"
POLL_SECONDS = 0.2  # how often a waiting writer tries again


class LockBusy(RuntimeError):
    """Another process holds the output folder's lock and ``wait`` ran out."""

    def __init__(self, folder: Path, holder: int | None, waited: float) -> None:
        who = f"pid {holder}" if holder else "another process"
        gave_up = (
            f"gave up after waiting {waited:.0f} s (--wait SECONDS waits longer)"
            if waited > 0
            else "not waiting for it (--wait SECONDS waits)"
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
) -> Iterator[Path]:
    """Hold the exclusive lock of ``output_dir`` for the ``with`` block.

    When another process holds it, the lock is retried for up to ``wait`` seconds (0: not
    at all; ``on_wait(holder_pid)`` is called once before waiting), then :class:`LockBusy`
    is raised.
    Yields the lock file's path."""
    folder = Path(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = lock_path(folder)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        _acquire(fd, folder, wait, on_wait)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        yield path
    finally:
        os.close(fd)  # releases the flock (as the process's death would)


def _acquire(
    fd: int, folder: Path, wait: float, on_wait: Callable[[int | None], None] | None
) -> None:
    if _try_lock(fd):
        return
    if wait <= 0:
        raise LockBusy(folder, holder_pid(folder), 0.0)
    if on_wait is not None:
        on_wait(holder_pid(folder))
    start = time.monotonic()
    deadline = start + wait
    while time.monotonic() < deadline:
        time.sleep(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))
        if _try_lock(fd):
            return
    raise LockBusy(folder, holder_pid(folder), time.monotonic() - start)


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True
