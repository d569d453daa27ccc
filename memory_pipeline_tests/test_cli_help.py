"""One consistent command line: every subcommand, including ones added later, is held to the
same rules (walked from the parser, so nothing has to be listed here).

- Each subcommand has a description (its own ``--help`` says what it does) and a help line
  in its parent's list; no reStructuredText markup shows in any help.
- Every argument says what it is, and every option's default that means something is shown.
- Actions are subcommands (``keys list``, ``forget list``), never verb flags (``--list``).
- ``--as-of`` means the same wherever it is shown: "answer as of then".
- docs/cli.md names every top-level command.
"""

from __future__ import annotations

import argparse
import re

import pytest

from memory_pipeline.cli import AS_OF_HELP, build_parser, main
from memory_pipeline_tests.paths import ROOT
from memory_pipeline_tests.test_docs_hygiene import iter_parsers

RST = re.compile(r"``|:(?:func|class|meth|mod|attr):`|\.\. \w+::")
VERB_FLAGS = {"--list", "--create", "--delete", "--remove", "--revoke", "--show", "--add"}


@pytest.fixture(scope="module")
def parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    return list(iter_parsers())


def _visible(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        a
        for a in parser._actions
        if a.help != argparse.SUPPRESS
        and not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))
    ]


def test_the_walk_reaches_nested_subcommands(parsers) -> None:
    names = {n for n, _ in parsers}
    assert {"memory-pipeline", "memory-pipeline search", "memory-pipeline keys list"} <= names
    assert "memory-pipeline forget list" in names


def test_every_subcommand_is_described_without_markup(parsers) -> None:
    problems = []
    for name, parser in parsers:
        if not (parser.description or "").strip():
            problems.append(f"{name}: no description")
        if RST.search(parser.format_help()):
            problems.append(f"{name}: reStructuredText markup in --help")
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                helps = {c.dest: c.help for c in action._choices_actions}
                problems += [
                    f"{name} {sub}: no help line in the command list"
                    for sub in action.choices
                    if sub in helps and not (helps[sub] or "").strip()
                ]
    assert not problems, "\n".join(problems)


def test_every_argument_is_explained_and_defaults_shown(parsers) -> None:
    problems = []
    for name, parser in parsers:
        formatter = parser._get_formatter()
        for action in _visible(parser):
            flag = "/".join(action.option_strings) or action.dest
            if not (action.help or "").strip():
                problems.append(f"{name} {flag}: no help")
                continue
            default = action.default
            meaningful = default not in (None, False, argparse.SUPPRESS) and not (
                isinstance(default, (list, tuple)) and not default
            )
            if meaningful and action.option_strings:
                shown = formatter._get_help_string(action)
                if "default" not in shown.lower():
                    problems.append(f"{name} {flag}: default {default!r} not shown")
    assert not problems, "\n".join(problems)


def test_actions_are_subcommands_not_verb_flags(parsers) -> None:
    flags = [
        f"{name} {opt}"
        for name, parser in parsers
        for action in _visible(parser)
        for opt in action.option_strings
        if opt in VERB_FLAGS
    ]
    assert not flags, f"make these subcommands (as `keys list`): {flags}"


def test_as_of_means_the_same_everywhere(parsers) -> None:
    shown = {
        name: action.help
        for name, parser in parsers
        for action in _visible(parser)
        if "--as-of" in action.option_strings
    }
    assert shown, "no command shows --as-of"
    assert all(h == AS_OF_HELP for h in shown.values()), shown


def test_cli_page_names_every_command(parsers) -> None:
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    top = [n.split()[1] for n, _ in parsers if len(n.split()) == 2]
    missing = [c for c in top if f"memory-pipeline {c}" not in page]
    assert not missing, f"docs/cli.md does not show: {missing}"


def test_old_spellings_still_parse() -> None:
    """The renamed spellings keep working for scripts: ``search --as-of`` (now ``--now``) and
    ``forget --list`` (now ``forget list``)."""
    parser = build_parser()
    args = parser.parse_args(["search", "q", "--as-of", "2024-03-10"])
    assert args.as_of.isoformat() == "2024-03-10T00:00:00"
    assert parser.parse_args(["search", "q", "--now", "2024-03-10"]).as_of == args.as_of
    assert parser.parse_args(["forget", "--list"]).list is True
    listed = parser.parse_args(["forget", "--owner", "a", "list"])
    assert listed.list is True and listed.owner == "a"
    assert parser.parse_args(["forget", "list", "--owner", "b"]).owner == "b"


def test_help_exits_zero_for_every_subcommand(parsers, capsys) -> None:
    for name, _ in parsers:
        with pytest.raises(SystemExit) as done:
            main([*name.split()[1:], "--help"])
        assert done.value.code == 0, name
    assert "commands:" in capsys.readouterr().out


def test_eval_without_a_locomo_file_says_how_to_give_one(tmp_path, monkeypatch, capsys) -> None:
    """No development path is assumed: without --locomo, [evaluation] locomo or
    MEMORY_PIPELINE_EVAL_LOCOMO, `eval` stops with one line naming the ways to give it."""
    monkeypatch.delenv("MEMORY_PIPELINE_EVAL_LOCOMO", raising=False)
    config = tmp_path / "memory_pipeline.toml"
    shipped = (ROOT / "memory_pipeline.toml").read_text(encoding="utf-8")
    config.write_text(shipped, encoding="utf-8")
    import shutil

    shutil.copytree(ROOT / "data" / "sample", tmp_path / "data" / "sample")
    code = main(["--config", str(config), "eval"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "--locomo" in err[0] and "MEMORY_PIPELINE_EVAL_LOCOMO" in err[0]
