"""One writer per output folder: a second ``run`` (or ``forget --yes``) waits for the first,
saying for whom, or refuses with one line and exit 2; never a traceback.

Before: two ``run`` on the same output a second apart collided: one deleted the other's
live warehouse temp file and died with a traceback. The lock is held by real processes here
(a helper that takes it and sleeps, as a run in progress does), and the CLI is a real
subprocess; the cases refuse before any data is read, so the file stays fast.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memory_pipeline.core.common.lock import LockBusy, holder_pid, lock_path, output_lock

HOLDER = """
import sys, time
from memory_pipeline.core.common.lock import output_lock
with output_lock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
print("released", flush=True)
"""

CONFIG = """\
[pipeline]
owner = "Me"
timezone = "UTC"
start_date = "2024-03-01"
end_date = "2024-03-02"
output_dir = "out"

[[sources]]
name = "chats"
kind = "line_json"
path = "src"
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _hold(folder: Path, seconds: float) -> subprocess.Popen:
    """Another process holding ``folder``'s lock for ``seconds`` (returns once it holds it)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(folder), str(seconds)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    assert proc.stdout.readline().strip() == "held", proc.stderr.read()
    return proc


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)


def _hash_tree(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_a_second_holder_is_refused_naming_the_first(tmp_path: Path):
    holder = _hold(tmp_path, 30)
    try:
        assert holder_pid(tmp_path) == holder.pid
        with pytest.raises(LockBusy) as busy:
            with output_lock(tmp_path, wait=0):
                pytest.fail("two holders at once")
        assert busy.value.holder == holder.pid
        assert f"pid {holder.pid}" in str(busy.value) and "\n" not in str(busy.value)
        assert "not waiting" in str(busy.value)
    finally:
        _stop(holder)


def test_a_waiting_holder_gets_the_lock_when_the_first_finishes(tmp_path: Path):
    holder = _hold(tmp_path, 1.0)
    waited_for: list[int | None] = []
    try:
        start = time.monotonic()
        with output_lock(tmp_path, wait=30, on_wait=waited_for.append):
            assert holder.poll() is not None or holder.stdout.readline().strip() == "released"
            assert holder_pid(tmp_path) == os.getpid()
        assert time.monotonic() - start < 25
    finally:
        _stop(holder)
    assert waited_for == [holder.pid]


def test_a_killed_holder_leaves_no_stale_lock(tmp_path: Path):
    """flock dies with its process: no pid file to clean up after kill -9."""
    holder = _hold(tmp_path, 60)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(timeout=10)
    with output_lock(tmp_path, wait=5):
        assert lock_path(tmp_path).is_file()
    assert lock_path(tmp_path).is_file()  # never deleted (a waiter could lock a ghost)


def test_a_nested_take_in_the_holding_process_passes_and_others_still_wait(tmp_path: Path):
    """``memory-pipeline run`` holds the lock and executes Dagster runs that take it again in
    the same process: they pass; the lock is released only when the outer holder leaves."""
    from memory_pipeline.core.common.lock import held_here

    probe = "import sys\nfrom memory_pipeline.core.common.lock import output_lock\n" + (
        "with output_lock(sys.argv[1]):\n    pass\n"
    )
    with output_lock(tmp_path):
        with output_lock(tmp_path, wait=0):
            assert held_here(tmp_path)
        assert held_here(tmp_path)
        other = subprocess.run(
            [sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True, env=_env()
        )
        assert other.returncode != 0 and "LockBusy" in other.stderr
    assert not held_here(tmp_path)


def test_the_lock_is_reentrant_only_by_releasing(tmp_path: Path):
    with output_lock(tmp_path):
        pass
    with output_lock(tmp_path):  # released on exit: the same process takes it again
        pass


DAY = """{"date": "2024-03-01", "contact": "Sam", "messages": [
  {"time": "10:00:00", "sender": "Sam", "type": "text", "text": "lunch?", "source_order": 0},
  {"time": "10:01:00", "sender": "Me", "type": "text", "text": "sure", "source_order": 1}]}
"""


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A config with one day of data: a run gets as far as writing (where it locks)."""
    (tmp_path / "src" / "sam").mkdir(parents=True)
    (tmp_path / "src" / "sam" / "2024-03-01.json").write_text(DAY, encoding="utf-8")
    (tmp_path / "m.toml").write_text(CONFIG, encoding="utf-8")
    (tmp_path / "out").mkdir()
    return tmp_path


def _cli(site: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = _env()
    env["DAGSTER_HOME"] = str(site / "dagster")
    return subprocess.run(
        [sys.executable, "-m", "memory_pipeline.cli", "--config", str(site / "m.toml"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=site,
        env=env,
    )


def _refused(done: subprocess.CompletedProcess, holder: subprocess.Popen) -> list[str]:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr + done.stdout
    lines = done.stderr.splitlines()
    assert lines[-1].startswith("error: ") and f"pid {holder.pid}" in lines[-1], done.stderr
    return lines


def test_run_refuses_while_another_writer_holds_the_output(site: Path):
    holder = _hold(site / "out", 120)
    before = _hash_tree(site / "out")
    try:
        done = _cli(site, "run", "--quiet", "--wait", "0")
        assert len(_refused(done, holder)) == 1  # refusing at once: no waiting line
        assert "waiting for the run" not in done.stderr
        assert _hash_tree(site / "out") == before  # nothing started, nothing written
        assert not (site / "dagster").exists() or not any((site / "dagster").rglob("*.db"))
    finally:
        _stop(holder)


def test_run_waits_saying_for_whom_then_gives_up(site: Path):
    holder = _hold(site / "out", 120)
    try:
        start = time.monotonic()
        done = _cli(site, "run", "--quiet", "--wait", "1")
        lines = _refused(done, holder)
        assert time.monotonic() - start >= 1.0
        assert len(lines) == 2 and lines[0].startswith("waiting for the run in progress")
        assert f"(pid {holder.pid})" in lines[0]
    finally:
        _stop(holder)


def test_forget_yes_waits_for_the_run_too(site: Path):
    holder = _hold(site / "out", 120)
    try:
        done = _cli(site, "forget", "--contact", "Sam", "--yes", "--wait", "0")
        assert len(_refused(done, holder)) == 1
    finally:
        _stop(holder)


def test_a_run_with_nothing_to_do_does_not_wait(site: Path):
    """The lock is taken where a run starts writing: planning an empty range needs none."""
    holder = _hold(site / "out", 120)
    try:
        done = _cli(site, "run", "--quiet", "--start", "2024-03-02", "--wait", "0")
        assert done.returncode == 0, done.stderr
        assert "nothing to do" in done.stdout and "waiting" not in done.stderr
    finally:
        _stop(holder)
