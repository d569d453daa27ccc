"""What every ``memory-pipeline`` command shares: exit codes, the config, argument types.

Also the owner's configuration of a command, the instance home, the writer's lock
(``--wait``) and the one-line messages a failed run or an OS error becomes."""

from __future__ import annotations

import argparse
import builtins
import datetime as dt
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from memory_pipeline.config import PipelineConfig, owner_config
from memory_pipeline.config import load_config as _load_config
from memory_pipeline.core.common import fs
from memory_pipeline.core.common import tables as T

# the date-partitioned tables, in DAG order: what `run` and `status` count
SUMMARY_TABLES = tuple(t.name for t in T.REGISTRY if t.partitioned)


# exit codes (README, "CLI"): like grep, 1 is "no match" for search; 2 is bad input of any kind
EXIT_OK, EXIT_NO_MATCH, EXIT_USAGE = 0, 1, 2
EXIT_FAILED = 1  # a run (or a write) that failed for a reason other than the input
EXIT_BROKEN_PIPE = 128 + 13  # what a shell reports for a writer killed by SIGPIPE
# how long a writing command waits for another one on the same output (--wait)
DEFAULT_WAIT_SECONDS = 3600


def load_config(path: str | Path | None = None) -> PipelineConfig:
    """The configuration; for an ``s3://`` output, the object store is set up from the
    AWS_* variables (what Dagster's ObjectStoreResource reads too)."""
    cfg = _load_config(path)
    if cfg.output_uri:
        from memory_pipeline.config import object_store_options

        fs.configure_s3(object_store_options())
    return cfg


def _positive_int(text: str) -> int:
    """An integer >= 1 (``--k``, ``--rrf-k``, ``--resamples``): 0 or a negative count would
    silently mean "everything" or "nothing" further down."""
    return _int_at_least(text, 1)


def _non_negative_int(text: str) -> int:
    """An integer >= 0 (``--budget``: 0 is a legal, empty pack, as in the API; ``--seed``:
    numpy refuses negative seeds deep inside the evaluation)."""
    return _int_at_least(text, 0)


def _int_at_least(text: str, low: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {text!r}")
    return value


def _unit_float(text: str) -> float:
    """A number in [0, 1] (``--beta``); NaN is refused (it compares false to both ends)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 1], got {text!r}")
    return value


def _iso_date(text: str) -> dt.date:
    """A calendar date ``YYYY-MM-DD`` (``run --start/--end``): partitions are whole days."""
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a valid date (YYYY-MM-DD): {text!r}") from None


def _iso_time(text: str) -> dt.datetime:
    """An ISO date or date-time (``--as-of``); a date means its midnight, local time."""
    try:
        return dt.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a valid ISO date or time (YYYY-MM-DD[THH:MM]): {text!r}"
        ) from None


def _text(text: str) -> str:
    """Non-blank text (a query, a question, a contact or conversation id), kept as given:
    a blank query ranks every chunk alike and a blank filter silently filters nothing."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"must be non-empty text, got {text!r}")
    return text


def _recent_messages(values: list[str] | None) -> list | None:
    """``--recent`` values as messages: each is a file (a JSON list, JSON Lines of strings
    or ``{"text", "sender", "time"}`` objects, or plain text with one message per line) when
    such a file exists, else the message itself. A bad file raises ``ValueError`` naming
    the file and line."""
    if not values:
        return None
    import json

    out: list = []
    for value in values:
        path = Path(value)
        if not (len(value) < 4096 and "\n" not in value and path.is_file()):
            out.append(value)
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = type(exc).__name__
            raise ValueError(f"{path}: cannot read recent messages ({reason})") from None
        if text.lstrip().startswith("["):
            try:
                items = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
            out.extend(items if isinstance(items, list) else [items])
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            if line.lstrip().startswith(("{", '"')):
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{n}: not valid JSON ({exc.msg})") from None
            else:
                out.append(line)
    return out


def _instance_home(cfg: PipelineConfig) -> Path:
    """DAGSTER_HOME: the env var, else ``<state>/dagster`` (memory_pipeline/state.py)."""
    from memory_pipeline.state import instance_home

    return instance_home(cfg)


def _owner_cfg(args: argparse.Namespace) -> PipelineConfig:
    """The configuration of ``--owner`` (the single owner's when omitted and there is one);
    a ValueError naming the owners when it is missing among several or unknown."""
    from memory_pipeline.state import prepare_state

    cfg = load_config(args.config)
    prepare_state(cfg)  # an output whose state is missing is refused, an older one migrated
    return owner_config(cfg, getattr(args, "owner", None))


@contextmanager
def _writing(cfg: PipelineConfig, wait: float) -> Iterator[None]:
    """Hold the output folder's writer lock for a command that writes (run, forget --yes):
    a second writer waits up to ``wait`` seconds, saying for whom, then gives up with
    LockBusy (one line, exit 2). docs/security.md, "Concurrency"."""
    from memory_pipeline.core.common.lock import output_lock

    def waiting(pid: int | None) -> None:
        who = f"pid {pid}" if pid else "another process"
        print(
            f"waiting for the run in progress ({who}) on {cfg.output_dir} "
            f"(up to {wait:.0f} s; --wait SECONDS)…",
            file=sys.stderr,
            flush=True,
        )

    with output_lock(cfg.output_dir, wait=wait, on_wait=waiting):
        from memory_pipeline.state import prepare_state

        # under the lock: migrate an older output, refuse one whose state is missing
        prepare_state(cfg, writing=True)
        yield


def _report_failure(result, stage: str, output: Path | str | None = None) -> None:
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data:
            err = event.step_failure_data.error
            user = event.step_failure_data.user_failure_data
            message = (user.description if user and user.description else None) or (
                failure_line(err, output) if err else "unknown error"
            )
            print(f"error in {stage}: {message}", file=sys.stderr)
            return
    print(f"error in {stage}: run failed", file=sys.stderr)


# every OSError subclass by name: a step failure carries class names, not classes
_OS_ERRORS = frozenset(
    n for n, c in vars(builtins).items() if isinstance(c, type) and issubclass(c, OSError)
)
_ERRNO_MESSAGE = re.compile(r"\[Errno (\d+)\] [^:\n]*(?:: '([^'\n]*)')?")


def failure_line(err, output: Path | str | None = None) -> str:
    """One line for a failed step's error (Dagster's ``SerializableErrorInfo``).

    Dagster wraps what the asset raised ("Error occurred while executing op ...:"), so the
    useful line is at the bottom of the cause chain; an ``OSError`` there (disk full, no
    permission) is said as ``<path>: <reason>``, the path from the error or, when the writer
    did not name it (a buffered write), the output folder."""
    chain = []
    while err is not None:
        chain.append(err)
        err = err.cause or err.context
    os_error = next((e for e in reversed(chain) if e.cls_name in _OS_ERRORS), None)
    if os_error is not None:
        match = _ERRNO_MESSAGE.search(os_error.message)
        if match:
            reason = os.strerror(int(match.group(1))).lower()
            where = match.group(2) or output
            return f"{where}: {reason}" if where else reason
    root = chain[-1] if chain else None
    lines = (root.message.strip().splitlines() if root else []) or ["unknown error"]
    return lines[0]


def os_error_line(exc: OSError, output: Path | str | None = None) -> str:
    """``<path>: <reason>`` for an OSError the CLI itself met (e.g. no space left on device)."""
    reason = (os.strerror(exc.errno) if exc.errno else str(exc)).lower()
    where = exc.filename or output
    return f"{where}: {reason}" if where else reason
