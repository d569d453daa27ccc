"""One BLAS thread, and our own threads over the cores: the shape of every local model here.

The local models (USE's numpy network, SPLADE's encoder) run many small matmuls: a few
hundred tokens by a few hundred columns. OpenBLAS splits each one over its threads, which
mostly spin, so two BLAS threads cost about 1.6x the CPU of one for 1.2x less wall time.
Splitting the *work* instead (independent batches on Python threads, each matmul on one
BLAS thread; numpy releases the GIL inside them) uses both cores for ~1.9x less wall time at
the CPU of one thread. A batch's rows also no longer depend on how many threads BLAS had.
"""

from __future__ import annotations

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


def single_threaded_blas() -> None:
    """BLAS on one thread in this process from now on (a call per encode is a pid check).

    Process-wide and never restored: a limit restored by one thread while
    another still encodes (the text indexes build SPLADE beside BM25, a service encodes
    queries beside a refresh) gave that encode two BLAS threads halfway through, and its
    rows other last bits, so a build on one machine did not equal itself. Every matmul
    here is small, and the parallelism is the project's own threads and processes."""
    global _PINNED
    if _PINNED != os.getpid():
        ctl = _blas()
        if ctl is not None:
            ctl.limit(limits=1, user_api="blas")  # applied now; never restored
        _PINNED = os.getpid()


_PINNED = 0  # the process that pinned BLAS to one thread (a fork re-pins its own)


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)
