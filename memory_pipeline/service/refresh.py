"""Refresh after a post: the pipeline's own stages over the days that got new messages.

The batch pipeline stays the one way data is processed. When the inbox accepted messages,
the service asks a :class:`Refresher` for their dates; it waits ``delay`` seconds so a burst
of posts becomes one refresh, then runs this module as a subprocess (``python -m
memory_pipeline.service.refresh --config FILE DATE ...``), which materializes the partitioned
stages of the runner's table (ingest to memories) over each changed day and its
neighbours (``core/ingest/watch.run_ranges``: sessions cross midnight) and then the search
indexes, exactly as ``memory-pipeline run`` and the source sensor do, under the output
folder's writer lock. The new index version is published atomically; the server follows
``CURRENT`` on its next request, so searches keep being served from the previous version
until then. A subprocess, not a thread: the stages are CPU-bound and would hold the
server's GIL against the searches.

Posts that arrive while a refresh runs are collected and refreshed together right after.
Dates that are no partition yet (today, without ``end_date``) are skipped here: the nightly
run or the source sensor takes them once their partition exists (the inbox is a source).
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger("memory_pipeline.service.refresh")

PUBLISH = ("indexes",)  # after the partitioned stages (every one of the runner's table)
DEFAULT_DELAY = 0.5  # seconds a burst of posts is collected before its refresh starts
LOCK_WAIT = 900.0  # seconds a refresh waits for another writer (a nightly run)


@dataclass
class RefreshState:
    """What the refresher did: for status answers, health and the benchmark."""

    pending: set[dt.date] = field(default_factory=set)
    running: set[dt.date] = field(default_factory=set)
    requested: int = 0  # requests so far (a post with new messages is one)
    started: int = 0  # requests taken by a refresh that started
    finished: int = 0  # requests covered by a finished refresh (ok or failed)
    runs: int = 0
    failures: int = 0
    last_seconds: float | None = None
    last_error: str | None = None
    last_summary: str | None = None  # the refresh's own line: days, ranges, wall and CPU


class Refresher:
    """Coalesces refresh requests and runs one refresh subprocess at a time."""

    def __init__(
        self,
        config_path: str | None,
        *,
        delay: float = DEFAULT_DELAY,
        env: dict[str, str] | None = None,
    ) -> None:
        self.config_path = config_path
        self.delay = delay
        self.env = env
        self.state = RefreshState()
        self._cv = threading.Condition()
        self._thread: threading.Thread | None = None
        self._proc: subprocess.Popen | None = None
        self._closed = False

    def request(self, days: Iterable[dt.date]) -> int:
        """Ask for a refresh of ``days``; returns the request's number (``state.finished``
        reaching it means a refresh that saw these messages has finished)."""
        days = set(days)
        with self._cv:
            if not days or self._closed:
                return self.state.requested
            self.state.pending |= days
            self.state.requested += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="refresh", daemon=True)
                self._thread.start()
            self._cv.notify_all()
            return self.state.requested

    def snapshot(self) -> dict:
        with self._cv:
            s = self.state
            return {
                "pending": sorted(d.isoformat() for d in s.pending),
                "running": sorted(d.isoformat() for d in s.running),
                "requested": s.requested,
                "finished": s.finished,
                "runs": s.runs,
                "failures": s.failures,
                "last_seconds": s.last_seconds,
                "last_error": s.last_error,
                "last_summary": s.last_summary,
            }

    def wait_idle(self, timeout: float) -> bool:
        """Block until every request so far is covered by a finished refresh."""
        deadline = time.monotonic() + timeout
        with self._cv:
            while self.state.finished < self.state.requested:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cv.wait(left)
            return True

    def close(self, timeout: float = 30.0) -> None:
        """Stop taking requests; end a running refresh (its writes are all-or-nothing)."""
        with self._cv:
            self._closed = True
            proc = self._proc
            self._cv.notify_all()
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        if self._thread is not None:
            self._thread.join(timeout)

    def _loop(self) -> None:
        while True:
            with self._cv:
                while not self.state.pending and not self._closed:
                    self._cv.wait()
                if self._closed:
                    return
            time.sleep(self.delay)  # a burst of posts: one refresh
            with self._cv:
                if self._closed:
                    return
                days, self.state.pending = self.state.pending, set()
                self.state.running = days
                taken = self.state.requested
                self.state.started = taken
            ok, seconds, error, summary = self._run(days)
            with self._cv:
                s = self.state
                s.last_summary = summary
                s.running = set()
                s.finished = taken
                s.runs += 1
                s.last_seconds = seconds
                s.last_error = error
                s.failures += 0 if ok else 1
                self._cv.notify_all()

    def _run(self, days: set[dt.date]) -> tuple[bool, float, str | None, str | None]:
        cmd = [sys.executable, "-m", __name__]
        if self.config_path:
            cmd += ["--config", str(self.config_path)]
        cmd += sorted(d.isoformat() for d in days)
        t0 = time.perf_counter()
        try:
            with self._cv:
                if self._closed:
                    return False, 0.0, "closed", None
                self._proc = subprocess.Popen(
                    cmd,
                    env=self.env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            out, err = self._proc.communicate()
            code = self._proc.returncode
        except OSError as exc:
            return False, time.perf_counter() - t0, f"cannot start the refresh: {exc}", None
        finally:
            with self._cv:
                self._proc = None
        seconds = time.perf_counter() - t0
        summary = (out or "").strip().splitlines()[-1:] or [None]
        if code == 0:
            log.info("refresh of %d days: ok in %.1fs", len(days), seconds)
            return True, seconds, None, summary[0]
        lines = [ln for ln in (err or out or "").splitlines() if ln.strip()]
        error = lines[-1][:300] if lines else f"exit status {code}"
        log.warning("refresh of %d days failed in %.1fs: %s", len(days), seconds, error)
        return False, seconds, error, None


def refresh(config: str | None, days: Iterable[dt.date], *, wait: float = LOCK_WAIT) -> str:
    """Materialize the partitioned stages over ``days`` (with their neighbours) and then the
    indexes, as ``memory-pipeline run`` does; returns a one-line summary. Raises
    RuntimeError (one line) when a stage fails."""
    import dagster as dg

    from memory_pipeline.cli_common import _instance_home
    from memory_pipeline.config import load_config
    from memory_pipeline.core.common.lock import output_lock
    from memory_pipeline.core.ingest.inbox import clear_markers, pending_markers
    from memory_pipeline.core.ingest.watch import run_ranges
    from memory_pipeline.defs.build import build_definitions
    from memory_pipeline.defs.partitions import daily_partitions
    from memory_pipeline.defs.runner import STAGES, stages

    cfg = load_config(config)
    # the intents this refresh covers: those on disk now (a post during the refresh adds
    # its own, which stays for the next one)
    markers = [m for root in owner_inboxes(cfg) for m in pending_markers(root, days)]
    parts = daily_partitions(cfg)
    # a record dated before the first partition is accounted in it (as ingest dates it)
    wanted = sorted({max(d, cfg.start_date) for d in days})
    ranges = run_ranges(wanted, lambda d: parts.has_partition_key(d.isoformat()))
    if not ranges:
        clear_markers(markers)  # the nightly run (or the source sensor) takes them
        return f"nothing to refresh: {len(wanted)} dates wait for their partitions"
    _instance_home(cfg)
    t0 = time.perf_counter()
    with output_lock(cfg.output_dir, wait=wait):
        full = build_definitions(cfg, config)
        # the assets with their blocking checks; the great-expectations suites (seconds of
        # import and validation, non-blocking) run with the nightly, not on every post
        defs = dg.Definitions(assets=list(full.assets or ()), resources=full.resources)
        instance = dg.DagsterInstance.get()
        partitioned = [s for s in STAGES if s.partitioned]
        timings: dict[str, float] = {}
        for first, last, _ in ranges:
            _stages(defs, partitioned, [first, last], instance, timings)
        _stages(defs, stages(*PUBLISH), [], instance, timings)
    clear_markers(markers)
    covered = sum((last - first).days + 1 for first, last, _ in ranges)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return (
        f"refreshed {covered} days in {len(ranges)} ranges in {time.perf_counter() - t0:.1f}s "
        f"(process CPU {usage.ru_utime + usage.ru_stime:.1f}s with imports; "
        + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items())
        + ")"
    )


def owner_inboxes(cfg: Any) -> list[Path]:
    """Every owner's inbox folder (they may not exist yet)."""
    cfgs = [cfg.for_owner(s) for s in cfg.owner_specs()] if cfg.multi_owner else [cfg]
    from memory_pipeline.core.ingest.inbox import configured_inbox, inbox_dir

    out = []
    for c in cfgs:
        spec = configured_inbox(c.sources)
        out.append(spec.path if spec is not None else inbox_dir(c.output_dir))
    return out


def _stages(
    defs: Any, selection: list, days: list, instance: Any, timings: dict[str, float]
) -> None:
    from memory_pipeline.defs.runner import materialize_stages

    runs = materialize_stages(
        defs, selection, days=days, instance=instance, raise_on_error=False, log_level="CRITICAL"
    )
    for run in runs:
        timings[run.stage.name] = timings.get(run.stage.name, 0.0) + run.seconds
    final = runs[-1]
    if not final.success:
        raise RuntimeError(f"refresh: stage {final.stage.name} failed (see the Dagster run)")


def main(argv: list[str] | None = None) -> int:
    """``python -m memory_pipeline.service.refresh [--config FILE] DATE ...``"""
    ap = argparse.ArgumentParser(prog="memory_pipeline.service.refresh")
    ap.add_argument("--config", default=None)
    ap.add_argument("dates", nargs="+", type=dt.date.fromisoformat)
    args = ap.parse_args(argv)
    try:
        print(refresh(args.config, args.dates))
    except Exception as exc:  # one line for the server's log, never a traceback
        print(" ".join(f"{type(exc).__name__}: {exc}".split())[:300], file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
