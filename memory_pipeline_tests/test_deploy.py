"""The systemd units in ``deploy/systemd``: the documented production path (docs/operations.md,
"Keep it running") for the Dagster daemon, the web UI and ``memory-pipeline serve``.

Each unit's ``ExecStart`` names a program this package installs, with options its own
command-line parser accepts (parsed, not run); the three units agree on the configuration,
the instance, the environment file and the workspace ``init`` writes; and where
``systemd-analyze`` exists, ``systemd-analyze verify`` passes on the units rendered for a
home folder whose venv is this test's.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memory_pipeline.cli import build_parser
from memory_pipeline.cli_init import WORKSPACE_FILE, WORKSPACE_YAML
from memory_pipeline.config import DEFAULT_CONFIG_NAME
from memory_pipeline_tests.paths import ROOT

DEPLOY = ROOT / "deploy" / "systemd"
UNITS = {
    "memory-pipeline-daemon.service": "dagster-daemon",
    "memory-pipeline-ui.service": "dagster-webserver",
    "memory-pipeline-serve.service": "memory-pipeline",
}
VENV_BIN = "%h/memory_pipeline/.venv/bin"
ENV_FILE = "-%h/.config/memory-pipeline/env"


def parse_unit(path: Path) -> dict[str, list[tuple[str, str]]]:
    """A unit file as section -> [(key, value)] in order (keys may repeat: Environment=)."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current = None
    for n, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], [])
            continue
        assert current is not None and "=" in line, f"{path.name}:{n}: {raw!r}"
        key, _, value = line.partition("=")
        current.append((key.strip(), value.strip()))
    return sections


def _one(entries: list[tuple[str, str]], key: str) -> str:
    [value] = [v for k, v in entries if k == key]
    return value


@pytest.fixture(scope="module")
def units() -> dict[str, dict[str, list[tuple[str, str]]]]:
    assert sorted(p.name for p in DEPLOY.glob("*.service")) == sorted(UNITS)
    return {name: parse_unit(DEPLOY / name) for name in UNITS}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    """The units with ``%h`` set to a home folder laid out as docs/operations.md says: the
    clone's venv (this interpreter's) and the folder ``init --target ~/memories`` fills."""
    root = tmp_path_factory.mktemp("deploy")
    home = root / "home"
    (home / "memories").mkdir(parents=True)
    (home / "memories" / WORKSPACE_FILE).write_text(WORKSPACE_YAML, encoding="utf-8")
    (home / "memory_pipeline" / ".venv").mkdir(parents=True)
    (home / "memory_pipeline" / ".venv" / "bin").symlink_to(Path(sys.executable).parent)
    for name in UNITS:
        text = (DEPLOY / name).read_text(encoding="utf-8").replace("%h", str(home))
        (root / name).write_text(text, encoding="utf-8")
    return root


def test_each_unit_runs_an_installed_program_with_options_it_accepts(units, rendered):
    import click
    from dagster._daemon.cli import cli as daemon_cli
    from dagster_webserver.cli import cli as webserver_cli

    for name, program in UNITS.items():
        service = units[name]["Service"]
        argv = shlex.split(_one(service, "ExecStart"))
        assert argv[0] == f"{VENV_BIN}/{program}", name
        # the console script this package's install puts beside the interpreter
        assert (Path(sys.executable).parent / program).is_file(), program
        args = shlex.split(_one(parse_unit(rendered / name)["Service"], "ExecStart"))[1:]
        if program == "dagster-daemon":
            assert args[0] == "run"
            assert isinstance(daemon_cli, click.Group)
            daemon_cli.commands["run"].make_context("dagster-daemon run", args[1:])
        elif program == "dagster-webserver":
            ctx = webserver_cli.make_context("dagster-webserver", list(args))
            assert ctx.params["host"] == "127.0.0.1"  # never on every interface by default
        else:
            parsed = build_parser().parse_args(args)
            assert parsed.command == "serve" and parsed.host == "127.0.0.1"


def test_the_units_agree_on_config_instance_workspace_and_environment(units):
    envs = set()
    for name, unit in units.items():
        service = unit["Service"]
        env = dict(v.split("=", 1) for k, v in service if k == "Environment")
        envs.add(tuple(sorted(env.items())))
        config = Path(env["MEMORY_PIPELINE_CONFIG"])
        assert config.name == DEFAULT_CONFIG_NAME
        # the folder `memory-pipeline init --target` fills: config, workspace, and the
        # state folder whose dagster/ holds the instance `memory-pipeline run` uses
        assert env["DAGSTER_HOME"] == str(config.parent / "state" / "dagster")
        assert _one(service, "WorkingDirectory") == str(config.parent)
        assert _one(service, "EnvironmentFile") == ENV_FILE
        assert _one(service, "Restart") == "on-failure"
        assert _one(unit["Install"], "WantedBy") == "default.target"  # user units, lingering
        argv = shlex.split(_one(service, "ExecStart"))
        if "-w" in argv:
            assert argv[argv.index("-w") + 1] == str(config.parent / WORKSPACE_FILE), name
    assert len(envs) == 1  # one configuration for the three


def test_the_docs_name_every_unit_and_the_environment_file():
    ops = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    for name in [*UNITS, "memory-pipeline.env", "loginctl enable-linger"]:
        assert name in ops, name
    for key in ("MEMORY_PIPELINE_CONFIG", "DAGSTER_HOME"):
        assert key in (DEPLOY / "memory-pipeline.env").read_text(encoding="utf-8")


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_systemd_analyze_verifies_the_units(rendered):
    """Rendered for a home folder whose venv is this interpreter's, as after installing."""
    done = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", *(str(rendered / n) for n in UNITS)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr
