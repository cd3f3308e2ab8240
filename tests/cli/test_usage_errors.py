"""A usage error on a command is answered with that command's usage (its action's, for
``audit`` and ``memory``), exit 2: an unknown flag anywhere after the command's name is the
command's mistake, not ``composer``'s; only one before the command gets the top-level usage."""

from __future__ import annotations

import pytest

from composer.cli import COMMANDS
from composer.cli.main import main

CASES = {
    "init": (["init", "team", "--forse"], "composer init"),
    "validate": (["validate", "configs", "--bogus"], "composer validate"),
    "validate, flag first": (["validate", "--every-env", "configs"], "composer validate"),
    "validate, flag with a value": (["validate", "--envv=prod", "configs"], "composer validate"),
    "preview": (["preview", "configs", "--instruction", "x", "--top", "3"], "composer preview"),
    "render": (["render", "configs", "--only-sets"], "composer render"),
    "explain": (["explain", "configs", "--only-sets"], "composer render"),
    "diff": (["diff", "configs", "--env", "a", "--env", "b", "-x"], "composer diff"),
    "test": (["test", "t.yaml", "--env-vars"], "composer test"),
    "eval": (["eval", "q.yaml", "--floor", "x"], "composer eval"),
    "schema": (["schema", "--overlays"], "composer schema"),
    "memory stats": (["memory", "stats", "m.jsonl", "--what"], "composer memory stats"),
    "audit list": (["audit", "list", "--bogus", "turns.jsonl"], "composer audit list"),
    "audit show": (["audit", "show", "turns.jsonl", "--turns", "a"], "composer audit show"),
    "audit diff": (["audit", "diff", "turns.jsonl", "a", "b", "--all"], "composer audit diff"),
    "serve": (["serve", "configs", "--prot", "80"], "composer serve"),
    "console": (["console", "turns.jsonl", "--bogus"], "composer console"),
    "completion": (["completion", "bash", "--zsh"], "composer completion"),
}


@pytest.mark.parametrize(("argv", "prog"), CASES.values(), ids=list(CASES))
def test_an_unknown_argument_gets_the_commands_own_usage(
    argv: list[str], prog: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"usage: {prog} [-h]")
    assert f"\n{prog}: error: unrecognized arguments: " in captured.err
    assert "COMMAND ..." not in captured.err  # not composer's own usage


def test_every_command_is_covered() -> None:
    assert {case.split()[0].rstrip(",") for case in CASES} >= set(COMMANDS)


def test_other_usage_errors_name_the_command_too(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["preview", "configs"]) == 2  # a required flag missing
    err = capsys.readouterr().err
    assert err.startswith("usage: composer preview [-h]")
    assert "composer preview: error: the following arguments are required: --instruction" in err
    assert main(["audit", "lst"]) == 2  # an action misspelt
    assert (
        "composer audit: error: argument ACTION: invalid choice: 'lst'" in capsys.readouterr().err
    )


def test_a_flag_before_the_command_is_composers_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--bogus", "validate"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: composer [-h] [--version] COMMAND ...")
    assert err.endswith("composer: error: unrecognized arguments: --bogus\n")
