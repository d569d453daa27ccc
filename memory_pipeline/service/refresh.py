"""Refresh after a post: the pipeline's own stages over the days that got new messages.

The batch pipeline stays the one way data is processed. When the inbox accepted messages,
the service asks a :class:`Refresher` for their dates; it waits ``delay`` seconds so a burst
of posts becomes one refresh, then hands them to a worker subprocess of this module
(``python -m memory_pipeline.service.refresh --serve``, kept between refreshes so its
imports and embedding model load once), which materializes the partitioned
stages of the runner's table (ingest to memories) over each changed day and its
neighbours (``core/ingest/watch.run_ranges``: sessions cross midnight) and then the search
indexes, exactly as ``memory-pipeline run`` and the source sensor do, under the output
folder's writer lock. The new index version is published atomically; the server follows
``CURRENT`` on its next request, so searches keep being served from the previous version
until then. A subprocess, not a thread: the stages are CPU-bound and would hold the
server's GIL against the searches.

Posts that arrive while a refresh runs are collected and refreshed together right after.
Today is refreshed too (within ``end_date``), although a live calendar ends yesterday: the
stages run over the refreshed days as static partition keys (as ``memory-pipeline run`` runs
over its days with data), so today's key needs no calendar entry; the nightly rebuilds the
day once it is over, which finalizes it. Dates after today or after ``end_date`` are
skipped: a later run takes them once their partition exists.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
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
DEFAULT_DELAY = 2.0  # seconds a burst of posts is collected before its refresh starts
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

    def warm(self) -> None:
        """Start the worker now (a server with write keys), so the first post does not wait
        for its imports."""
        with self._cv:
            if not self._closed and (self._proc is None or self._proc.poll() is not None):
                self._proc = self._spawn()

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
            proc.terminate()  # a refresh in progress ends: its writes are all-or-nothing
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
        """One refresh by the worker process (started, or started again, when needed: a
        worker that ended on its own between two refreshes gets the request again)."""
        request = json.dumps(sorted(d.isoformat() for d in days)) + "\n"
        t0 = time.perf_counter()
        line, proc = "", None
        for attempt in range(2):
            try:
                with self._cv:
                    if self._closed:
                        return False, 0.0, "closed", None
                    proc = self._proc
                    if proc is None or proc.poll() is not None or attempt:
                        proc = self._proc = self._spawn()
                proc.stdin.write(request)
                proc.stdin.flush()
                line = proc.stdout.readline()
            except OSError:  # its pipe closed: it ended; the next attempt starts one
                line = ""
            if line or self._closed:
                break
        seconds = time.perf_counter() - t0
        try:
            answer = json.loads(line)
        except ValueError:
            code = proc.poll() if proc is not None else None
            return False, seconds, f"the refresh worker ended (exit status {code})", None
        if answer.get("ok"):
            log.info("refresh of %d days: ok in %.1fs", len(days), seconds)
            return True, seconds, None, answer.get("summary")
        error = str(answer.get("error") or "failed")[:300]
        log.warning("refresh of %d days failed in %.1fs: %s", len(days), seconds, error)
        return False, seconds, error, None

    def _spawn(self) -> subprocess.Popen:
        """The worker: ``python -m memory_pipeline.service.refresh --serve``. It keeps the
        imports and the embedding model loaded between refreshes (seconds of CPU each) and
        ends itself when idle or after ``WORKER_RUNS`` refreshes; its log is the server's."""
        cmd = [sys.executable, "-m", __name__, "--serve"]
        if self.config_path:
            cmd += ["--config", str(self.config_path)]
        return subprocess.Popen(
            cmd,
            env=self.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,  # the server's own stderr: never an unread pipe
            text=True,
        )


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

    c0 = time.process_time()
    cfg = load_config(config)
    # the intents this refresh covers: those on disk now (a post during the refresh adds
    # its own, which stays for the next one)
    markers = [m for root in owner_inboxes(cfg) for m in pending_markers(root, days)]
    parts = daily_partitions(cfg, in_progress=True)  # up to today without end_date
    # a record dated before the first partition is accounted in it (as ingest dates it)
    wanted = sorted({max(d, cfg.start_date) for d in days})
    ranges = run_ranges(wanted, lambda d: parts.has_partition_key(d.isoformat()))
    if not ranges:
        clear_markers(markers)  # the nightly run (or the source sensor) takes them
        return f"nothing to refresh: {len(wanted)} dates wait for their partitions"
    _instance_home(cfg)
    t0 = time.perf_counter()
    with output_lock(cfg.output_dir, wait=wait):
        # over exactly the refreshed days (static keys, today's too: see the module's note)
        keys = [
            first + dt.timedelta(days=i)
            for first, last, _ in ranges
            for i in range((last - first).days + 1)
        ]
        full = build_definitions(cfg, config, days=keys)
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
    return (
        f"refreshed {covered} days in {len(ranges)} ranges in {time.perf_counter() - t0:.1f}s "
        f"(CPU {time.process_time() - c0:.1f}s; "
        + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items())
        + ")"
    )


def owner_inboxes(cfg: Any) -> list[Path]:
    """Every owner's inbox folder (they may not exist yet)."""
    cfgs = [cfg.for_owner(s) for s in cfg.owner_specs()] if cfg.multi_owner else [cfg]
    return [c.inbox_path for c in cfgs]


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


WORKER_RUNS = 20  # refreshes a worker serves before it ends (the next request starts one)
WORKER_IDLE = 1800.0  # seconds a worker waits for a request before it ends (frees its memory)


def _warm_up() -> None:
    """What every refresh needs, loaded before the first request waits for it: the stages'
    imports and, for the local embedder (never a remote one: no call leaves the machine),
    its model. A failure here is the first refresh's to report."""
    import memory_pipeline.defs.build  # noqa: F401
    import memory_pipeline.defs.runner  # noqa: F401
    from memory_pipeline.defs.providers import provider_resources

    try:
        embedder = provider_resources()["embedder"]
        if embedder.provider == "local":
            embedder.build().embed(["warm up"])
    except Exception as exc:  # the refresh itself will say what is wrong
        log.warning("refresh worker warm-up: %s", " ".join(str(exc).split())[:200])


def serve(config: str | None) -> int:
    """The worker loop: one JSON list of dates per stdin line, one JSON answer per stdout
    line (``{"ok", "summary"}`` or ``{"ok": false, "error"}``). Anything else the stages
    print goes to stderr, so the answers stay one line each."""
    import select

    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # stray prints of libraries: to the log, not into the protocol
    sys.stdout = sys.stderr
    _warm_up()
    for _ in range(WORKER_RUNS):
        ready, _, _ = select.select([sys.stdin], [], [], WORKER_IDLE)
        if not ready:
            return 0
        line = sys.stdin.readline()
        if not line:
            return 0
        try:
            days = [dt.date.fromisoformat(d) for d in json.loads(line)]
            answer = {"ok": True, "summary": refresh(config, days)}
        except Exception as exc:  # one line for the server's log, never a traceback
            answer = {"ok": False, "error": " ".join(f"{type(exc).__name__}: {exc}".split())}
        answers.write(json.dumps(answer) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m memory_pipeline.service.refresh [--config FILE] (--serve | DATE ...)``"""
    ap = argparse.ArgumentParser(prog="memory_pipeline.service.refresh")
    ap.add_argument("--config", default=None)
    ap.add_argument("--serve", action="store_true", help="the worker loop (the server's)")
    ap.add_argument("dates", nargs="*", type=dt.date.fromisoformat)
    args = ap.parse_args(argv)
    if args.serve:
        return serve(args.config)
    if not args.dates:
        ap.error("give the dates to refresh, or --serve")
    try:
        print(refresh(args.config, args.dates))
    except Exception as exc:  # one line for the server's log, never a traceback
        print(" ".join(f"{type(exc).__name__}: {exc}".split())[:300], file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
