"""The command line laid out as pip's: ``main`` holds the parser and a table of commands, each
command a module of ``composer.cli.commands`` imported only when it runs, none importing
``main``; ``explain`` is an alias of ``render``."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from repofiles import REPO

from composer.cli import COMMANDS, build_parser

CLI = REPO / "composer" / "cli"


def imports_of(path: Path) -> set[str]:
    """Every module ``path`` imports, anywhere in it (functions and TYPE_CHECKING included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_main_holds_only_the_parser_and_the_table() -> None:
    assert len((CLI / "main.py").read_text(encoding="utf-8").splitlines()) < 200


@pytest.mark.parametrize("path", sorted((CLI / "commands").glob("*.py")), ids=lambda p: p.stem)
def test_no_command_imports_main(path: Path) -> None:
    assert "composer.cli.main" not in imports_of(path)
    assert "composer.cli" not in imports_of(path)  # the package's init is main's facade


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_command_module_has_a_description_its_arguments_and_run(name: str) -> None:
    module = importlib.import_module(COMMANDS[name].module)
    assert module.__all__ == ["DESCRIPTION", "add_arguments", "run"]
    assert isinstance(module.DESCRIPTION, str)
    assert build_parser({name}).parse_args(_minimal(name)).run is module.run


def _minimal(name: str) -> list[str]:
    """The shortest command line that parses for ``name``."""
    return {
        "preview": ["preview", "--instruction", "x"],
        "test": ["test", "t.yaml"],
        "eval": ["eval", "q.yaml"],
        "memory": ["memory", "stats", "m.jsonl"],
        "audit": ["audit", "show", "turns.jsonl"],
        "console": ["console", "turns.jsonl"],
        "completion": ["completion", "bash"],
    }.get(name, [name])


def test_explain_is_an_alias_of_render() -> None:
    parser = build_parser()
    assert parser.parse_args(["explain", "m.yaml"]).run is parser.parse_args(["render"]).run


def loaded_commands(argv: list[str]) -> list[str]:
    """The command modules a fresh interpreter has imported after ``main(argv)``."""
    script = (
        "import sys, contextlib, io, json\n"
        "from composer.cli import main\n"
        f"with contextlib.redirect_stdout(io.StringIO()):\n    main({argv!r})\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('composer.cli.commands.'))))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, check=True
    )
    names: list[str] = json.loads(result.stdout)
    return names


@pytest.mark.parametrize(
    ("argv", "modules"),
    [
        (["--help"], []),
        (["--version"], []),
        (["frobnicate"], []),
        (["validate", "--help"], ["composer.cli.commands.validate"]),
        (["explain", "--help"], ["composer.cli.commands.render"]),
    ],
)
def test_a_command_line_imports_only_the_command_it_runs(
    argv: list[str], modules: list[str]
) -> None:
    assert loaded_commands(argv) == modules
