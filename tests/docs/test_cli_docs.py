"""Every command of the command line has help text and is documented in docs/cli.md.

The list of commands comes from the parser itself, so a command added later fails
here until it has a help line and a section in the docs.
"""

from __future__ import annotations

import argparse
import contextlib
import io
from pathlib import Path

import pytest

from darwin_memo.cli import build_parser, main
from darwin_memo.cli.ledger_cmd import build_ledger_parser

ROOT = Path(__file__).resolve().parents[2]
CLI_DOC = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")


def subcommands(parser: argparse.ArgumentParser) -> dict[str, str | None]:
    """Each subcommand's name and the help line shown in the parent's ``--help``."""
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert len(actions) == 1
    helps = {choice.dest: choice.help for choice in actions[0]._choices_actions}
    assert set(helps) == set(actions[0].choices)  # no command registered without a help line
    return helps


COMMANDS = subcommands(build_parser())
LEDGER_OPS = subcommands(build_ledger_parser())


def test_the_known_commands_are_all_there() -> None:
    expected = {
        "demo",
        "encode",
        "query",
        "stats",
        "ledger",
        "import",
        "migrate",
        "top",
        "why",
        "audit",
        "doctor",
        "mcp",
        "render",
        "settle-ci",
    }
    assert expected <= set(COMMANDS)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_help_text(name: str) -> None:
    help_line = COMMANDS[name]
    assert help_line and help_line.strip() and help_line != argparse.SUPPRESS


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_answers_help(name: str) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exited:
        main([name, "--help"])
    assert exited.value.code == 0
    assert out.getvalue().startswith(f"usage: darwin-memo {name}")


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_is_documented(name: str) -> None:
    assert f"## `darwin-memo {name}`" in CLI_DOC, f"docs/cli.md has no section for {name}"
    assert f"[`{name}`](#darwin-memo-{name})" in CLI_DOC, f"docs/cli.md's table lacks {name}"


@pytest.mark.parametrize("op", sorted(LEDGER_OPS))
def test_every_ledger_operation_has_help_and_is_documented(op: str) -> None:
    help_line = LEDGER_OPS[op]
    assert help_line and help_line.strip()
    assert f"| `{op}` |" in CLI_DOC, f"docs/cli.md's ledger table lacks {op}"


def test_the_docs_name_no_command_that_does_not_exist() -> None:
    import re

    documented = set(re.findall(r"^## `darwin-memo ([a-z-]+)`", CLI_DOC, flags=re.MULTILINE))
    assert documented == set(COMMANDS)
