"""``composer completion``: the scripts bash, zsh and fish load complete commands, options,
choices and paths as the parser has them, each run by the real shell as a TAB would run it
(each test skips where its shell is not installed; CI installs them)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from composer.cli.completion import SHELLS, completion_script
from composer.cli.main import COMMANDS, build_parser, main

BASH = shutil.which("bash")
needs_bash = pytest.mark.skipif(BASH is None, reason="bash is not installed")
ZSH, FISH = shutil.which("zsh"), shutil.which("fish")
needs_zsh = pytest.mark.skipif(ZSH is None, reason="zsh is not installed (apt-get install zsh)")
needs_fish = pytest.mark.skipif(FISH is None, reason="fish is not installed (apt-get install fish)")
COMPOSER = str(Path(sys.executable).with_name("composer"))

# An interactive zsh in a pseudo-terminal, told to complete the line after TAB, with compadd
# wrapped to write each candidate it is given to a file: what the menu would offer.
ZSH_TAB = r"""
zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z "PROMPT=; path=($3 \$path); fpath=($1 \$fpath); autoload -U compinit; compinit -u -D"
zpty -w z "compadd () { builtin compadd -O __hits \"\$@\"; print -l -- \$__hits >> $2 }"
zpty -w z "$4"$'\t'
for i in {1..300}; do [[ -s $2 ]] && break; sleep 0.1; done
size=0 still=0
for i in {1..100}; do  # then until the file stops growing: every compadd of the TAB is in
  sleep 0.1; n=$(wc -c < $2)
  if (( n == size )); then (( ++still >= 3 )) && break; else size=$n still=0; fi
done
zpty -d z
"""


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


def complete_in_zsh(words: list[str], folder: Path) -> list[str]:
    """What zsh's completion system offers at the end of ``composer WORDS``, in ``folder``."""
    assert ZSH is not None
    (folder / "_composer").write_text(completion_script("zsh", build_parser()), encoding="utf-8")
    (folder / "capture.zsh").write_text(ZSH_TAB, encoding="utf-8")
    hits = folder / "hits.txt"
    hits.unlink(missing_ok=True)
    line = " ".join(["composer", *words])
    subprocess.run(
        [ZSH, "-f", "capture.zsh", str(folder), str(hits), str(Path(COMPOSER).parent), line],
        cwd=folder,
        timeout=60,
        check=True,
        capture_output=True,
    )
    return sorted({word for word in hits.read_text().splitlines() if word})


def complete_in_fish(words: list[str], folder: Path) -> list[str]:
    """What fish offers at the end of ``composer WORDS`` (``complete --do-complete``)."""
    assert FISH is not None
    (folder / "composer.fish").write_text(
        completion_script("fish", build_parser()), encoding="utf-8"
    )
    line = " ".join(["composer", *words])
    done = subprocess.run(
        [FISH, "--no-config", "-c", f"source composer.fish; complete --do-complete {line!r}"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return sorted(row.split("\t")[0] for row in done.stdout.splitlines() if row)


@needs_zsh
def test_zsh_completes_commands_options_choices_and_paths(tmp_path: Path) -> None:
    names = [*COMMANDS, *(alias for command in COMMANDS.values() for alias in command.aliases)]
    assert complete_in_zsh([""], tmp_path) == sorted(names)
    assert complete_in_zsh(["pre"], tmp_path) == ["preview"]
    assert complete_in_zsh(["preview", "--ex"], tmp_path) == ["--explain"]
    assert complete_in_zsh(["serve", "--max-conn"], tmp_path) == [
        "--max-connections",
        "--max-connections-per-client",
    ]
    assert complete_in_zsh(["completion", ""], tmp_path) == sorted(SHELLS)
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "base.yaml").write_text("providers: []\n", encoding="utf-8")
    assert complete_in_zsh(["validate", "conf"], tmp_path) == ["configs"]
    assert "base.yaml" in complete_in_zsh(["validate", "configs/ba"], tmp_path)


@needs_fish
def test_fish_completes_commands_options_choices_and_paths(tmp_path: Path) -> None:
    names = [*COMMANDS, *(alias for command in COMMANDS.values() for alias in command.aliases)]
    assert complete_in_fish([""], tmp_path) == sorted(names)
    assert complete_in_fish(["pre"], tmp_path) == ["preview"]
    assert complete_in_fish(["preview", "--ex"], tmp_path) == ["--explain"]
    assert complete_in_fish(["serve", "--max-conn"], tmp_path) == [
        "--max-connections",
        "--max-connections-per-client",
    ]
    assert complete_in_fish(["completion", ""], tmp_path) == sorted(SHELLS)
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "base.yaml").write_text("providers: []\n", encoding="utf-8")
    assert complete_in_fish(["validate", "conf"], tmp_path) == ["configs/"]
    assert complete_in_fish(["validate", "configs/ba"], tmp_path) == ["configs/base.yaml"]


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
