"""Helpers every benchmark uses: wall + CPU timing, peak RSS, rates.

The benchmarks run as scripts (``python benchmarks/bench_x.py``), so this folder is on
``sys.path`` and they import it as ``_common``, children included.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CPU = "/cpu"  # suffix of the process-CPU-seconds entry beside a wall-seconds entry


@contextmanager
def timed(into: dict[str, float], name: str) -> Iterator[None]:
    """Wall seconds into ``into[name]``, process CPU seconds (all threads) into
    ``into[name + CPU]``: on a loaded machine the two differ, and both are reported."""
    c0, t0 = time.process_time(), time.perf_counter()
    yield
    into[name] = time.perf_counter() - t0
    into[name + CPU] = time.process_time() - c0


def peak_rss_mib() -> float:
    """VmHWM of this process (peak resident set size), MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rate(n: int, seconds: float) -> float:
    """Items per second (inf for a zero duration rather than a crash)."""
    return n / seconds if seconds > 0 else float("inf")
