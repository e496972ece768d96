"""The `sandesh` parser and the command table (scripts/service/commands.py COMMANDS) agree: every
subcommand a user can type runs its function, and no function is registered for words the
parser does not accept."""
from __future__ import annotations

import argparse

from sandesh.scripts.service.cli import parser, words
from sandesh.scripts.service.commands import COMMANDS


def typed_commands(p: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """Every path of subcommand words the parser accepts (a positional `choices` counts as words)."""
    found: set[tuple[str, ...]] = set()
    subparsers = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
    for action in subparsers:
        for name, child in action.choices.items():
            found |= typed_commands(child, prefix + (name,))
    if not subparsers:
        choices = [a for a in p._actions if a.dest == "command" and a.choices]
        found |= {prefix + (c,) for a in choices for c in a.choices} if choices else {prefix}
    return found


def test_every_subcommand_has_exactly_one_registered_function():
    assert typed_commands(parser()) == set(COMMANDS)


def test_parsed_arguments_name_their_command():
    p = parser()
    assert words(p.parse_args(["workspace", "set-rates", "ws_1", "otp=100"])) == ("workspace", "set-rates")
    assert words(p.parse_args(["audit", "--limit", "3"])) == ("audit",)
    assert words(p.parse_args(["worker", "dispatch", "--host", "h"])) == ("worker", "dispatch")
    assert COMMANDS[("workspace", "set-rates")].__name__ == "workspace_set_rates"


def test_every_command_and_argument_says_what_it_is_in_its_help():
    """`sandesh … -h` explains each subcommand and each of its arguments, not only their names."""
    unexplained = []

    def walk(p: argparse.ArgumentParser, prefix: tuple[str, ...]) -> None:
        for action in p._actions:
            if isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
                continue
            if isinstance(action, argparse._SubParsersAction):
                said = {choice.dest: choice.help for choice in action._choices_actions}
                for name, child in action.choices.items():
                    if not said.get(name):
                        unexplained.append(" ".join(prefix + (name,)))
                    walk(child, prefix + (name,))
            elif not action.help:
                unexplained.append(f"{' '.join(prefix)} {'/'.join(action.option_strings) or action.dest}")

    walk(parser(), ())
    assert unexplained == []
