"""Every shell and Python example in the README and docs/ runs, as printed, on the bundled sample.

The docs are a user's first contact; an example that no longer runs (a renamed flag, a moved
function, a drifted output) is a bug. This harness builds a workspace like a fresh clone (the
shipped config, the sample, the SQL files), runs ``memory-pipeline run`` there once, then every
```bash / ```python block of the README and docs/ in file order, and compares an output shown
right after a command block with what the command printed.

A block marked ``<!-- docs-test: server -->`` talks to the memory service: the harness starts
``memory-pipeline serve`` on a free port for it, exports ``KEY`` (read) and ``ADMIN_KEY``
(admin) — a placeholder line ``KEY=mpk_...`` stands for that — points ``localhost:8700`` at the
port, and makes ``curl`` fail on an HTTP error status; ``WRITE_KEY`` (write) too, with its
placeholder line ``WRITE_KEY=mpk_...``.

A block that cannot run here (it installs packages, opens the UI, needs a server, a key or data
a clone does not have) carries ``<!-- docs-test: skip: <why> -->`` on the line above its fence;
a block with neither a runnable command nor that mark fails the test, so nothing drifts silently.
Shown outputs are compared line by line with every decimal number masked (scores vary with the
embedder's float sums); ``…`` elides part of a line, and a shown line must appear in the output.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from memory_pipeline_tests.paths import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)
SKIP = re.compile(r"<!-- docs-test: skip: [^>]+ -->\s*$")
SERVER = re.compile(r"<!-- docs-test: server -->\s*$")
TIMEOUT = 300
RUN_OUTPUT = "run_output.txt"  # what the workspace's `memory-pipeline run` printed
RUN_EVAL = "run_eval_summary.parquet"  # and the evaluation summary it wrote
# a page's copy of `memory-pipeline run`'s output: a plain block that starts as the run does
TRANSCRIPT = re.compile(r"^```\n(config: .*?)^```\n", re.S | re.M)


@dataclass
class Example:
    file: Path
    line: int
    lang: str
    code: str
    skipped: bool
    shown: str | None
    server: bool = False  # the plain ``` block right after it: the output the docs show

    @property
    def where(self) -> str:
        return f"{self.file.relative_to(ROOT)}:{self.line}"


def examples() -> list[Example]:
    """Every bash/sh/python block of the docs, in file order."""
    found: list[Example] = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        blocks = list(FENCE.finditer(text))
        for i, m in enumerate(blocks):
            lang = m.group(1)
            if lang not in ("bash", "sh", "python"):
                continue
            before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
            shown = None
            nxt = blocks[i + 1] if i + 1 < len(blocks) else None
            if nxt is not None and nxt.group(1) == "" and not text[m.end() : nxt.start()].strip():
                shown = nxt.group(2)
            found.append(
                Example(
                    path,
                    text.count("\n", 0, m.start()) + 1,
                    lang,
                    m.group(2),
                    bool(SKIP.search(before)),
                    shown,
                    bool(SERVER.search(before)),
                )
            )
    return found


def _mask(text: str) -> str:
    return re.sub(r"\d+\.\d+", "<n>", text)


def shown_lines_missing(
    shown: str, printed: str, exact: tuple[str, ...] = ()
) -> list[str]:
    """The shown output's lines that the printed output lacks (``…`` elides, numbers masked,
    except in lines starting with one of ``exact``: figures a page quotes, compared as is)."""
    out = _mask(printed)
    missing = []
    for line in shown.splitlines():
        as_is = line.startswith(exact) if exact else False
        frags = [f.strip() for f in (line if as_is else _mask(line)).split("…") if f.strip()]
        if frags and not all(f in (printed if as_is else out) for f in frags):
            missing.append(line)
    return missing


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh clone's layout, with ``.venv/bin`` pointing at this interpreter, after one run."""
    ws = tmp_path_factory.mktemp("docs") / "memory_pipeline"
    ws.mkdir()
    shutil.copy(ROOT / "memory_pipeline.toml", ws / "memory_pipeline.toml")
    shutil.copytree(ROOT / "data" / "sample", ws / "data" / "sample")
    shutil.copytree(ROOT / "sql", ws / "sql")
    shutil.copy(ROOT / "dagster.yaml", ws / "dagster.yaml")
    bin_dir = ws / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name, target in (
        ("python", f'exec "{sys.executable}" "$@"'),
        ("memory-pipeline", f'exec "{sys.executable}" -m memory_pipeline.cli "$@"'),
    ):
        shim = bin_dir / name
        shim.write_text(f"#!/bin/sh\n{target}\n", encoding="utf-8")
        shim.chmod(0o755)
    done = _run("bash", ".venv/bin/memory-pipeline run --quiet", ws)
    assert done.returncode == 0, done.stderr[-2000:]
    (ws / RUN_OUTPUT).write_text(done.stdout, encoding="utf-8")
    # the run's evaluation as it printed it: the examples (a forget) rebuild it later
    shutil.copy(ws / "data" / "output" / "eval" / "tables" / "summary.parquet", ws / RUN_EVAL)
    return ws


@contextmanager
def service(ws: Path) -> Iterator[dict[str, str]]:
    """``memory-pipeline serve`` on a free port, with a read, an admin and a write key."""
    keys = {}
    for name, scope in (("KEY", "read"), ("ADMIN_KEY", "admin"), ("WRITE_KEY", "write")):
        create = f".venv/bin/memory-pipeline keys create --owner default --scope {scope}"
        made = _run("bash", create, ws)
        assert made.returncode == 0, made.stderr
        keys[name] = made.stdout.strip().splitlines()[-1]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [str(ws / ".venv" / "bin" / "memory-pipeline"), "serve", "--port", str(port)],
        cwd=ws,
        env=_env(ws),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/health", timeout=2):
                    break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "server did not start"
                time.sleep(0.5)
        yield {**keys, "PORT": str(port)}
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _env(ws: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_PIPELINE_")}
    env.update(
        PATH=f"{ws / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        DAGSTER_HOME=str(ws),
        PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p),
    )
    return env


def _run(
    lang: str, code: str, ws: Path, extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    if lang == "python":
        cmd = [sys.executable, "-c", code]
    else:
        cmd = ["bash", "-e", "-o", "pipefail", "-c", code]
    env = {**_env(ws), **(extra or {})}
    return subprocess.run(
        cmd, cwd=ws, env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False
    )


def _with_server(code: str, server: dict[str, str]) -> str:
    code = re.sub(r"^(WRITE_)?KEY=mpk_\.\.\..*$", "", code, flags=re.M)
    code = code.replace("localhost:8700", f"localhost:{server['PORT']}")
    return 'curl() { command curl --fail-with-body "$@"; }\n' + code


def test_every_example_is_run_or_marked() -> None:
    """A block must be runnable here, or say why not (the mark), never be silently left out."""
    found = examples()
    assert found, "no examples found"
    for ex in found:
        if ex.skipped:
            continue
        if ex.lang != "python":
            assert not re.search(r"…|<[a-z][^>]*>|\[--", ex.code), (
                f"{ex.where}: a synopsis with placeholders belongs in a ```text block"
            )


def test_documented_examples_run(workspace: Path) -> None:
    failures: list[str] = []
    for ex in examples():
        if ex.skipped:
            continue
        code = ex.code
        if ex.lang == "python" and "import memory_pipeline" not in code:
            code = "import memory_pipeline\nfrom memory_pipeline import *\n" + code
        if ex.server:
            with service(workspace) as server:
                done = _run(ex.lang, _with_server(code, server), workspace, server)
        else:
            done = _run(ex.lang, code, workspace)
        if done.returncode != 0:
            err = (done.stderr.strip().splitlines() or ["(no stderr)"])[-1]
            failures.append(f"{ex.where}: exit {done.returncode}: {err}")
            continue
        if ex.shown is not None:
            missing = shown_lines_missing(ex.shown, done.stdout)
            if missing:
                failures.append(f"{ex.where}: shown output not printed: {missing[:3]}")
    assert not failures, "\n".join(failures)


def test_shown_output_comparison_masks_numbers_and_elisions() -> None:
    printed = "1. Maria · score 0.9731 · session ses_1\n   [2024-03-09 17:10] Maria: hi   (a#1)\n"
    assert shown_lines_missing("1. Maria · score 1.0000 · session ses_1", printed) == []
    assert shown_lines_missing("   [2024-03-09 17:10] Maria: … (a#1)", printed) == []
    assert shown_lines_missing("2. Sam · score 0.5", printed) == ["2. Sam · score 0.5"]


def test_run_transcripts_are_what_the_run_prints(workspace: Path) -> None:
    """The README and getting-started copy `memory-pipeline run`'s output on the sample: each
    line must be what this run printed (the evaluation line's figure exactly: it is the
    sample's measured session recall), with the program named as a fresh clone calls it."""
    printed = (workspace / RUN_OUTPUT).read_text(encoding="utf-8")
    here = Path(sys.executable)
    printed = printed.replace(f"{here.name} -m memory_pipeline.cli", ".venv/bin/memory-pipeline")
    printed = printed.replace(str(here.parent / "dg"), ".venv/bin/dg")
    seen = 0
    for path in DOCS:
        for m in TRANSCRIPT.finditer(path.read_text(encoding="utf-8")):
            seen += 1
            missing = shown_lines_missing(m.group(1), printed, exact=("evaluation:",))
            assert not missing, f"{path.relative_to(ROOT)}: not printed by the run: {missing[:3]}"
    assert seen >= 2, "the README and getting-started show the run's output"


def test_sample_figures_are_the_sample_runs(workspace: Path) -> None:
    """``sample.*`` figures (docfigs.py) quote the evaluation of the bundled sample: they must
    be what this run's evaluation tables hold."""
    from memory_pipeline_tests.docfigs import sample_figures, stale

    measured = sample_figures(workspace / RUN_EVAL)
    assert not stale(extra=measured)
