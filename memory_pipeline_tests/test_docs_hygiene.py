"""What a user reads holds no path they do not have and no working note.

The README, every docs page, the shipped configuration, pyproject.toml and the ``--help`` of
every subcommand (walked from the parser, so a new command is covered the day it is added)
must name no folder outside the repository (``../shared``, a development machine's absolute
paths) and carry no note addressed to the people building it ("time box", "left for a
decision", "as before", issue numbers): a user cannot follow either.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from memory_pipeline_tests.paths import ROOT

# folders a user of a clone does not have
OUTSIDE = [
    r"\.\./shared",
    r"(?<![\w.])/work/",
    r"(?<![\w.])/home/\w",
    r"(?<![\w.])/Users/\w",
    r"(?<![\w.])/tmp/\w",
    r"(?<![\w.])/root/",
    r"STACK_NOTES",
]
# notes to the people building it, not to its users
NOTES = [
    r"time[- ]?box",
    r"left for a decision",
    r"\bas before\b",
    r"offline here",
    r"\bissue #?\d+",
    r"\bissues? \d+(?:,| and) \d+",
    r"\bstop \d+\b",
    r"\bround \d+\b",
    r"\bthis session\b",
    r"\bthe lead\b",
    r"\bother helpers?\b",
    r"\bTODO\b",
    r"\bFIXME\b",
    r"\bXXX\b",
]
BANNED = re.compile("|".join(f"(?:{p})" for p in OUTSIDE + NOTES), re.I)


def user_files() -> list:
    return [
        ROOT / "README.md",
        *sorted((ROOT / "docs").glob("*.md")),
        ROOT / "memory_pipeline.toml",
        ROOT / "pyproject.toml",
        ROOT / "mkdocs.yml",
    ]


def banned_in(text: str) -> list[str]:
    """``line N: …match…`` for every banned phrase or path in ``text``, also when a phrase
    is wrapped over two lines (each line is read joined to the next)."""
    lines = text.splitlines()
    found = []
    for n, line in enumerate(lines):
        window = f"{line} {lines[n + 1].lstrip()}" if n + 1 < len(lines) else line
        found += [
            f"line {n + 1}: {window[max(0, m.start() - 30) : m.end() + 30].strip()!r}"
            for m in BANNED.finditer(window)
            if m.start() < len(line)  # starts on this line: found once
        ]
    return found


def iter_parsers(parser=None, path: tuple[str, ...] = ()) -> Iterator[tuple[str, object]]:
    """``("memory-pipeline keys list", parser)`` for the top parser and every subcommand."""
    import argparse

    from memory_pipeline.cli import build_parser

    parser = parser or build_parser()
    path = path or (parser.prog,)
    yield " ".join(path), parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if sub.prog.split()[-1] == name:  # an alias shares its parser: walk it once
                    yield from iter_parsers(sub, (*path, name))


@pytest.mark.parametrize("path", user_files(), ids=lambda p: p.name)
def test_user_files_hold_no_outside_path_or_working_note(path) -> None:
    found = banned_in(path.read_text(encoding="utf-8"))
    assert not found, f"{path.relative_to(ROOT)}: " + "; ".join(found[:8])


def test_help_of_every_subcommand_holds_no_outside_path_or_working_note() -> None:
    problems = []
    for name, parser in iter_parsers():
        found = banned_in(parser.format_help())
        problems += [f"{name} --help: {f}" for f in found]
    assert not problems, "\n".join(problems)


def test_the_check_finds_what_it_bans() -> None:
    """The patterns catch the forms that slipped in before (a test that cannot fail proves
    nothing) and leave ordinary prose alone."""
    for bad in (
        "path = \"../shared/data/locomo\"",
        "MEMORY_PIPELINE_SHARED_DATA=/work/shared/data",
        "did not fit the time box",
        "the rest is left for a decision",
        "17 questions, left for a\ndecision",
        "works exactly as before",
        "cannot be installed offline here",
        "see issue 44",
        "--index /tmp/nb/out",
    ):
        assert banned_in(bad), bad
    for fine in (
        "data/output/parquet", "https://example.org/work/x", "a#1", "before the run",
        "helpers.py", "a chat in the 2nd round of",
    ):
        assert not banned_in(fine), fine


def test_docs_run_no_container_image_that_nothing_builds() -> None:
    """An image the docs run must be one the repository builds (a Dockerfile)."""
    if (ROOT / "Dockerfile").is_file():
        return
    for path in user_files():
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"docker run|podman run|:latest\b", text), path.name


def test_benchmark_records_name_no_outside_path() -> None:
    """The committed measurement pages give commands a reader can run: their folders are
    placeholders (DIR, /path/to/data), never a development machine's paths."""
    outside = re.compile("|".join(OUTSIDE), re.I)
    pages = [
        ROOT / "benchmarks" / "README.md",
        *sorted((ROOT / "benchmarks" / "results").glob("*.md")),
        *sorted((ROOT / "memory_pipeline_tests" / "fixtures").rglob("README.md")),
    ]
    found = [
        f"{p.relative_to(ROOT)}:{n}: {line.strip()[:80]}"
        for p in pages
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if outside.search(line)
    ]
    assert not found, "\n".join(found)
