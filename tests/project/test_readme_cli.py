"""The shell reference ("From a shell", in docs/operations.md) is checked against the CLI's own parser:
every line parses, and every command and option the CLI offers is shown at least once."""

from __future__ import annotations

import argparse
import re
import shlex

from docs_support import DOCS, section

from lowkiq.cli import ops as ops_cli

PAGE = DOCS / "operations.md"


def shell_reference() -> list[list[str]]:
    block = re.search(r"```sh\n(.*?)```", section("From a shell", PAGE), re.S)
    assert block, "the From a shell section has no sh block"
    return [shlex.split(line, comments=True) for line in block.group(1).splitlines() if line.strip()]


def subparsers(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def commands(p: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], argparse.ArgumentParser]:
    """Every leaf command (("jobs", "find"), ("stats",), ...) and its parser."""
    out = {}
    for name, sub in subparsers(p).items():
        nested = commands(sub, (*prefix, name))
        out.update(nested or {(*prefix, name): sub})
    return out


def test_every_line_of_the_reference_parses():
    lines = shell_reference()
    assert len(lines) >= 8
    for words in lines:
        assert words[0] == "lowkiq", words
        try:
            ops_cli.parser().parse_args(words[1:])
        except SystemExit:
            raise AssertionError(f"the shell reference shows a command the CLI refuses: {shlex.join(words)}") from None


def test_every_command_and_option_is_shown():
    lines = shell_reference()
    common = {"--redis-url", "--app", "--json", "--utc", "-h", "--help"}  # explained in the prose above the block
    for path, sub in commands(ops_cli.parser()).items():
        shown = [words for words in lines if tuple(words[1:1 + len(path)]) == path]
        assert shown, f"lowkiq {' '.join(path)} is not in the shell reference ({PAGE.name})"
        used = {word.split("=")[0] for words in shown for word in words if word.startswith("-")}
        offered = {s for action in sub._actions for s in action.option_strings if s.startswith("--")} - common
        missing = {option for option in offered if option not in used and not any(
            alias in used for action in sub._actions if option in action.option_strings
            for alias in action.option_strings)}
        assert not missing, f"lowkiq {' '.join(path)}: {sorted(missing)} not shown in the shell reference ({PAGE.name})"
