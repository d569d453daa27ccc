"""Run coarse, pure work units serially or on a Dask cluster, results in input order.

The heavy steps (embedding batches of texts, tokenizing batches of texts, and later one
owner's body) are pure functions of their input: same input, same output, whichever process
computes it. So the only thing a distributed engine changes is *where* they run, and the
build must come out byte-identical. This module is that seam and nothing more:

- ``runner=None`` (the default) calls ``fn(item)`` in this process, one after another:
  offline, nothing started, exactly the code path the project had before Dask.
- ``runner`` a ``distributed.Client`` ships every item to the cluster (``scatter``, so the
  payload goes to a worker, not through the scheduler's graph), runs ``fn`` there, and hands
  results back **in input order** whatever order they finish in. The driver keeps every
  side effect (cache writes, file writes), so workers need no access to local state.

A work unit should be worth shipping: a few hundred texts, not one (a Dask task costs about
a millisecond of scheduler time plus the round trip). ``batched`` cuts a list that way.

No Dagster import here (core rule) and no ``distributed`` import at module load: the serial
path must not pay for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

__all__ = ["batched", "imap_tasks", "is_serial", "map_tasks", "runner_workers"]

T = TypeVar("T")
R = TypeVar("R")


def is_serial(runner: Any) -> bool:
    """True when ``runner`` runs work in this process (None: no cluster)."""
    return runner is None


def runner_workers(runner: Any) -> int:
    """How many Dask workers ``runner`` has (1 for the serial runner), for metadata."""
    if is_serial(runner):
        return 1
    return max(1, len(runner.scheduler_info(n_workers=-1).get("workers", {})))


def _check_runner(runner: Any) -> None:
    if not (callable(getattr(runner, "map", None)) and callable(getattr(runner, "scatter", None))):
        raise TypeError(
            f"runner must be None (serial) or a distributed.Client, got {type(runner).__name__}"
        )


def imap_tasks(fn: Callable[[T], R], items: Iterable[T], runner: Any = None) -> Iterator[R]:
    """``fn(item)`` for every item, yielded in input order.

    Serial: lazy, one call per ``next``. Dask: every item is submitted at once and results
    are yielded in input order as they become available, so a caller can commit each
    result before the last one is done (the content cache does). If the caller stops early
    or a task raises, the tasks not yet consumed are cancelled; a task's exception is
    re-raised here as the original exception type.
    """
    if is_serial(runner):
        for item in items:
            yield fn(item)
        return
    _check_runner(runner)
    payload = list(items)
    if not payload:
        return
    # hash=False: keys are random, so two equal batches are still two tasks (their results
    # are consumed positionally) and scatter does not tokenize large payloads.
    data = runner.scatter(payload, hash=False)
    futures: list[Any] = runner.map(fn, data, pure=False)
    pending = list(futures)
    try:
        for i, future in enumerate(futures):
            result = future.result()
            pending[i] = None  # let the worker release it once consumed
            yield result
    finally:
        left = [f for f in pending if f is not None]
        if left:
            runner.cancel(left)
        runner.cancel(data)


def map_tasks(fn: Callable[[T], R], items: Iterable[T], runner: Any = None) -> list[R]:
    """``[fn(item) for item in items]``, serially or on the Dask cluster ``runner``.

    The result order is the input order, so ids and row order derived from it do not
    depend on which worker finished first.
    """
    return list(imap_tasks(fn, items, runner))


def batched(items: Sequence[T], size: int) -> list[Sequence[T]]:
    """``items`` cut into consecutive slices of at most ``size`` (the work units)."""
    if size < 1:
        raise ValueError(f"batch size must be >= 1, got {size}")
    return [items[i : i + size] for i in range(0, len(items), size)]
