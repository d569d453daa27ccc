"""One BLAS thread, and our own threads over the cores: the shape of every local model here.

The local models (USE's numpy network, SPLADE's encoder) run many small matmuls: a few
hundred tokens by a few hundred columns. OpenBLAS splits each one over its threads, which
mostly spin, so two BLAS threads cost about 1.6x the CPU of one for 1.2x less wall time.
Splitting the *work* instead (independent batches on Python threads, each matmul on one
BLAS thread; numpy releases the GIL inside them) uses both cores for ~1.9x less wall time at
the CPU of one thread. A batch's rows also no longer depend on how many threads BLAS had.
"""

from __future__ import annotations

import contextlib
import functools
import os
from typing import Any

__all__ = ["single_threaded_blas", "usable_cores"]


@functools.cache
def _blas() -> Any:
    """threadpoolctl's controller for the BLAS numpy uses, or None without threadpoolctl."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - a dependency
        return None
    return ThreadpoolController()


def single_threaded_blas() -> Any:
    """A context in which BLAS runs on one thread (process-wide while it is open)."""
    ctl = _blas()
    if ctl is None:  # pragma: no cover
        return contextlib.nullcontext()
    return ctl.limit(limits=1, user_api="blas")


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)
