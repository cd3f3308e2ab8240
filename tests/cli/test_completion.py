"""``composer completion``: the script bash sources completes commands, options, choices and
paths as the parser has them (the completion function run by a real bash, as a TAB would)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from composer.cli.completion import SHELLS, completion_script
from composer.cli.main import COMMANDS, build_parser, main

BASH = shutil.which("bash")
needs_bash = pytest.mark.skipif(BASH is None, reason="bash is not installed")


def complete(words: list[str], folder: Path) -> list[str]:
    """What bash offers at the end of ``composer WORDS`` (the last word being typed), with the
    completion script sourced and its function called as readline calls it, in ``folder``."""
    assert BASH is not None
    (folder / "composer.bash").write_text(
        completion_script("bash", build_parser()), encoding="utf-8"
    )
    line = " ".join(["composer", *words])
    program = "\n".join(
        [
            "source ./composer.bash",
            f"COMP_WORDS=(composer {' '.join(repr(word) for word in words)})",
            f"COMP_CWORD={len(words)}",
            f"COMP_LINE={line!r}",
            "COMP_POINT=${#COMP_LINE}",
            "function=$(complete -p composer | sed -E 's/.* -F ([^ ]+) .*/\\1/')",
            f'"$function" composer {words[-1]!r} {(["composer", *words])[-2]!r}',
            'printf "%s\\n" "${COMPREPLY[@]}"',
        ]
    )
    done = subprocess.run(
        [BASH, "--norc", "--noprofile", "-c", program],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return [word.strip() for word in done.stdout.splitlines() if word.strip()]


@needs_bash
def test_a_command_completes_from_its_first_letters(tmp_path: Path) -> None:
    assert complete(["pre"], tmp_path) == ["preview"]
    assert sorted(complete([""], tmp_path)) == sorted(
        [*COMMANDS, *(alias for command in COMMANDS.values() for alias in command.aliases)]
    )


@needs_bash
def test_options_and_choices_complete_as_the_parser_has_them(tmp_path: Path) -> None:
    assert complete(["preview", "--ex"], tmp_path) == ["--explain"]
    assert complete(["serve", "--max-conn"], tmp_path) == [
        "--max-connections",
        "--max-connections-per-client",
    ]
    assert sorted(complete(["completion", ""], tmp_path)) == sorted(SHELLS)


@needs_bash
def test_a_manifest_argument_completes_as_a_path(tmp_path: Path) -> None:
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "base.yaml").write_text("providers: []\n", encoding="utf-8")
    assert complete(["validate", "conf"], tmp_path) == ["configs"]
    assert complete(["validate", "configs/ba"], tmp_path) == ["configs/base.yaml"]


@pytest.mark.parametrize("shell", SHELLS)
def test_the_command_prints_the_script_of_each_shell(
    shell: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["completion", shell]) == 0
    printed = capsys.readouterr().out
    assert printed.rstrip("\n") == completion_script(shell, build_parser()).rstrip("\n")
    for name in COMMANDS:
        assert name in printed


def test_an_unknown_shell_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "powershell"]) == 2
    assert "invalid choice" in capsys.readouterr().err
