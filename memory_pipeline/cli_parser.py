"""The parser every ``memory-pipeline`` command is built with, so their help reads alike.

One class instead of a rule per command: a subcommand added anywhere (``sub.add_parser``)
gets its one-line ``help`` as the description of its own ``--help``, every option's default
is shown unless its help already says it, and a bad argument is one line on stderr.
``memory_pipeline_tests/test_cli_help.py`` walks every subcommand and holds them to it.
"""

from __future__ import annotations

import argparse
from typing import Any, NoReturn

EXIT_USAGE = 2


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, with ``(default: X)`` after an option whose default means
    something (not None, False or empty) and whose help does not name it already."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            "%(default)" in text
            or "default" in text.lower()
            or default in (None, False, argparse.SUPPRESS)
            or (isinstance(default, (list, tuple)) and not default)
            or not (action.option_strings or action.nargs in ("?", "*"))
        ):
            return text
        return f"{text} (default: %(default)s)" if text else "default: %(default)s"


class _SubCommands(argparse._SubParsersAction):
    """Subparsers whose ``add_parser(name, help=...)`` also describes the subcommand."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        if kwargs.get("help") and not kwargs.get("description"):
            text = kwargs["help"]
            kwargs["description"] = text[0].upper() + text[1:] + ("" if text.endswith(".") else ".")
        return super().add_parser(name, **kwargs)


class ArgumentParser(argparse.ArgumentParser):
    """argparse with one-line errors (``error: <message>`` on stderr, exit 2), defaults shown
    in ``--help`` and described subcommands.

    argparse prints the whole usage block before its message; in a script's log or a
    terminal the one line that names the bad value is what a user needs (``--help`` has
    the usage). Subparsers inherit the class, so every subcommand behaves the same.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        self.register("action", "parsers", _SubCommands)

    def add_subparsers(self, **kwargs: Any) -> Any:
        """Subcommands listed under "commands", each with its help line."""
        kwargs.setdefault("title", "commands")
        kwargs.setdefault("metavar", "COMMAND")
        return super().add_subparsers(**kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"error: {message}\n")
