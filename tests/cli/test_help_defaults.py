"""``composer COMMAND --help`` states every default that is a value, as the docs do."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from composer.cli.main import build_parser, main


def parsers(
    parser: argparse.ArgumentParser, name: str = "composer"
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for sub_name, sub in action.choices.items():
                if id(sub) not in seen:
                    seen.add(id(sub))
                    yield from parsers(sub, f"{name} {sub_name}")


def test_every_option_with_a_value_default_says_it_in_its_help() -> None:
    checked = 0
    for name, parser in parsers(build_parser()):
        formatter = parser._get_formatter()
        for action in parser._actions:
            valued = action.default not in (None, False, [], argparse.SUPPRESS)
            if action.help and valued and (action.option_strings or action.nargs == "?"):
                assert "default" in formatter._expand_help(action), (name, action.dest)
                checked += 1
    assert checked >= 15  # serve's limits, init's DIR and --team, audit's --limit, ...


def test_serve_help_shows_its_limits(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    for shown in (
        "least recently used go (default: 1000)",
        "without a turn (default: 3600)",
        "0: off (default: 100)",
        "(default: 127.0.0.1)",
    ):
        assert shown in help_text
    assert "(default: None)" not in help_text
    assert "(default: False)" not in help_text
