"""Bad CLI input is one ``error: ...`` line on stderr, exit 2, no traceback, nothing launched.

Issue 13, finding 7: each case here printed a traceback, launched failing runs or answered
with arbitrary hits before. The cases that need a published index live in test_search.py
(beside its built sample); these need none, which is itself part of the claim: the input is
refused before any data is read or any run is started.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import memory_pipeline
from memory_pipeline import cli
from memory_pipeline_tests.paths import ROOT


@pytest.fixture
def sample_config(tmp_path: Path, monkeypatch) -> Path:
    """The repository config beside a copy of the sample; output and instance in tmp."""
    shutil.copytree(ROOT / "data" / "sample", tmp_path / "data" / "sample")
    shutil.copy(ROOT / "memory_pipeline.toml", tmp_path / "memory_pipeline.toml")
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.delenv("MEMORY_PIPELINE_CONFIG", raising=False)
    return tmp_path / "memory_pipeline.toml"


@pytest.fixture
def no_runs(monkeypatch) -> list:
    """Records (and refuses) any attempt to launch a stage run."""
    from memory_pipeline.defs import runner

    launched: list = []

    def refuse(*args, **kwargs):
        launched.append((args, kwargs))
        raise AssertionError("a run was launched")

    monkeypatch.setattr(runner, "materialize_stages", refuse)
    return launched


def _one_line_error(capsys, *needles: str) -> str:
    """The captured stderr: exactly one line starting ``error:`` and naming ``needles``."""
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("error: "), lines[0]
    assert "Traceback" not in captured.err and "usage:" not in captured.err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def _exit_code(argv: list[str]) -> int:
    """``cli.main``'s code, whether it returns it or argparse raises SystemExit."""
    try:
        return cli.main(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1


# -- argument values: refused by the parser, before a config is even read -------------------
@pytest.mark.parametrize(
    ("argv", "needles"),
    [
        (["search", "Kyoto", "--as-of", "notadate"], ["--as-of", "notadate"]),
        (["search", "Kyoto", "--as-of", "2024-02-30"], ["--as-of", "2024-02-30"]),
        (["context", "Kyoto?", "--as-of", "yesterday"], ["--as-of", "yesterday"]),
        (["context", "Kyoto?", "--budget", "-100"], ["--budget", "-100"]),
        (["context", "Kyoto?", "--budget", "lots"], ["--budget", "lots"]),
        (["run", "--start", "garbage"], ["--start", "garbage"]),
        (["run", "--start", "2024-13-01"], ["--start", "2024-13-01"]),
        (["run", "--end", "2024-03-32"], ["--end", "2024-03-32"]),
        (["search", "Kyoto", "--k", "-5"], ["--k", "-5"]),
        (["search", "Kyoto", "--k", "0"], ["--k", "0"]),
        (["search", "Kyoto", "--k", "five"], ["--k", "five"]),
        (["search", ""], ["query"]),
        (["search", "   "], ["query"]),
        (["context", " \t"], ["question"]),
        (["search", "Kyoto", "--contact", ""], ["--contact"]),
        (["search", "Kyoto", "--conversation", " "], ["--conversation"]),
        (["context", "Kyoto?", "--contact", ""], ["--contact"]),
        (["search", "Kyoto", "--beta", "1.5"], ["--beta", "1.5"]),
        (["search", "Kyoto", "--beta", "nan"], ["--beta", "nan"]),
        (["search", "Kyoto", "--rrf-k", "0"], ["--rrf-k", "0"]),
        (["search", "Kyoto", "--mode", "fuzzy"], ["--mode", "fuzzy"]),
        (["eval", "--resamples", "0"], ["--resamples", "0"]),
        (["eval", "--seed", "-1"], ["--seed", "-1"]),
        (["search"], ["query"]),
        (["frobnicate"], ["frobnicate"]),
    ],
)
def test_bad_argument_values_are_one_line_exit_2(argv, needles, sample_config, capsys, no_runs):
    assert _exit_code(["--config", str(sample_config), *argv]) == 2
    _one_line_error(capsys, *needles)
    assert capsys.readouterr().out == ""
    assert not no_runs
    assert not (sample_config.parent / "data" / "output").exists()


def test_good_argument_values_still_parse():
    parser = cli.build_parser()
    args = parser.parse_args(["search", " Kyoto ", "--k", "3", "--as-of", "2024-03-10T12:00"])
    assert args.k == 3 and args.as_of.isoformat() == "2024-03-10T12:00:00"
    assert args.query == " Kyoto "  # validated, never rewritten
    args = parser.parse_args(["context", "q", "--budget", "0", "--as-of", "2024-03-10"])
    assert args.budget == 0 and args.as_of.isoformat() == "2024-03-10T00:00:00"
    args = parser.parse_args(["run", "--start", "2024-03-02", "--end", "2024-03-03"])
    assert (args.start.isoformat(), args.end.isoformat()) == ("2024-03-02", "2024-03-03")
    args = parser.parse_args(["search", "q", "--beta", "0", "--rrf-k", "1"])
    assert (args.beta, args.rrf_k) == (0.0, 1)


# -- run ranges: refused after reading the sources, before any run ---------------------------
def test_run_start_after_end_is_an_error(sample_config, capsys, no_runs):
    argv = ["--config", str(sample_config), "run", "--start", "2024-03-10", "--end", "2024-03-05"]
    assert cli.main(argv) == 2
    _one_line_error(capsys, "2024-03-10", "2024-03-05")
    assert not no_runs
    assert not (sample_config.parent / "data" / "output").exists()


@pytest.mark.parametrize(
    "range_args",
    [
        ["--start", "2024-03-20"],  # after the last data (2024-03-14)
        ["--end", "2024-02-01"],  # before the first partition
        ["--start", "2024-04-01", "--end", "2024-04-30"],
    ],
)
def test_run_range_without_data_is_nothing_to_do(range_args, sample_config, capsys, no_runs):
    assert cli.main(["--config", str(sample_config), "run", "--quiet", *range_args]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and "days)" not in captured.out
    assert "nothing to do" in captured.out and "2024-03-01 .. 2024-03-14" in captured.out
    assert not no_runs
    assert not (sample_config.parent / "data" / "output").exists()


# -- the public API: the same rules, checked before any index is opened ---------------------
@pytest.mark.parametrize("query", ["", "   ", "\n\t"])
def test_api_rejects_an_empty_query(query, tmp_path):
    with pytest.raises(ValueError, match="query must be non-empty"):
        memory_pipeline.search(query, output_dir=tmp_path)
    with pytest.raises(ValueError, match="question must be non-empty"):
        memory_pipeline.context(query, output_dir=tmp_path)
    with pytest.raises(ValueError, match="question must be non-empty"):
        memory_pipeline.recall(query, output_dir=tmp_path)


def test_api_rejects_bad_k_and_budget(tmp_path):
    for k in (0, -5, True, 2.5):
        with pytest.raises(ValueError, match="k must be an integer >= 1"):
            memory_pipeline.search("Kyoto", k, output_dir=tmp_path)
    for budget in (-1, -100, 3.0):
        with pytest.raises(ValueError, match="budget must be an integer >= 0"):
            memory_pipeline.context("Kyoto?", budget, output_dir=tmp_path)
        with pytest.raises(ValueError, match="budget must be an integer >= 0"):
            memory_pipeline.recall("Kyoto?", budget, output_dir=tmp_path)
    with pytest.raises(ValueError, match="k_memories must be an integer >= 1"):
        memory_pipeline.context("Kyoto?", k_memories=0, output_dir=tmp_path)


# -- a closed pipe ---------------------------------------------------------------------------
def _status_argv(sample_config: Path) -> list[str]:
    return [sys.executable, "-m", "memory_pipeline.cli", "--config", str(sample_config), "status"]


@pytest.mark.parametrize("unbuffered", ["1", ""])
def test_output_to_a_closed_pipe_exits_quietly(sample_config, unbuffered):
    """The reader is gone before the first line: every write fails (deterministic)."""
    read, write = os.pipe()
    os.close(read)
    env = {**os.environ, "PYTHONUNBUFFERED": unbuffered}
    env.pop("DAGSTER_HOME", None)
    try:
        proc = subprocess.run(
            _status_argv(sample_config),
            cwd=ROOT,
            stdout=write,
            stderr=subprocess.PIPE,
            env=env,
            timeout=120,
        )
    finally:
        os.close(write)
    assert proc.stderr.decode() == ""
    assert proc.returncode == cli.EXIT_BROKEN_PIPE == 141


def test_status_piped_to_head(sample_config):
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    cmd = " ".join(f"'{a}'" for a in _status_argv(sample_config)) + " | head -1"
    proc = subprocess.run(
        ["bash", "-c", cmd], cwd=ROOT, capture_output=True, env=env, timeout=120, text=True
    )
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout.splitlines() == [f"output: {sample_config.parent / 'data' / 'output'}"]


def test_a_dagster_home_that_does_not_exist_yet_is_made(monkeypatch, tmp_path):
    """Dagster raises a traceback for a missing DAGSTER_HOME; `run` makes the folder."""
    from memory_pipeline.config import load_config

    home = tmp_path / "not" / "yet"
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    assert cli._instance_home(load_config(None)) == home and home.is_dir()


def test_the_try_hint_is_a_command_that_works_as_printed(tmp_path, monkeypatch):
    """Without an activated venv the bare name is not on PATH: the hint names the script's
    path as the user can type it from where they are; on PATH, the bare name."""
    from memory_pipeline.cli import _sibling, invoked_as

    venv_bin = tmp_path / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    script = venv_bin / "memory-pipeline"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert invoked_as(str(script), cwd=tmp_path) == ".venv/bin/memory-pipeline"
    assert _sibling(".venv/bin/memory-pipeline", "dg") == ".venv/bin/dg"
    monkeypatch.setenv("PATH", f"{venv_bin}:/usr/bin:/bin")
    assert invoked_as(str(script), cwd=tmp_path) == "memory-pipeline"
    assert _sibling("memory-pipeline", "dg") == "dg"
    assert invoked_as("/x/cli.py").endswith("-m memory_pipeline.cli")
