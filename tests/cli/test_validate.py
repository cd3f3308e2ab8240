"""``composer validate``: exit codes, one located line per error, warnings, plain output."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from repofiles import put

from composer import __version__, count_tokens
from composer.cli import Output, main

VALID = """
version: 1
budget: 100
providers:
  - name: house
    type: static
    priority: 10
    text: "Team {{ branch.name }}."
  - name: off
    type: static
    enabled: false
    max_tokens: 0
    text: x
"""

BROKEN = """
version: 1
budget: -1
providers:
  - name: house
    type: static
    txt: hi
  - name: house
    type: nope
"""


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("COMPOSER_ENV", raising=False)
    monkeypatch.delenv("COMPOSER_MANIFEST", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    return tmp_path


def test_a_valid_manifest_exits_0_with_a_summary(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(here / "m.yaml", VALID)
    assert main(["validate", "m.yaml"]) == 0
    out, err = capsys.readouterr()
    assert out == "m.yaml: valid; 2 providers (1 enabled), budget 100\n"
    assert err == ""


def test_a_broken_manifest_exits_1_with_every_error_located(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(here / "m.yaml", BROKEN)
    assert main(["validate", "m.yaml"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        "m.yaml:2:9: budget: must be >= 0",
        'm.yaml:4:5: provider "house": missing key "text"',
        'm.yaml:6:5: provider "house": unknown key "txt" (did you mean "text"?)',
        'm.yaml:7:11: duplicate provider name "house" (first at line 4)',
        'm.yaml:8:11: provider "house": unknown provider type "nope"; known types: '
        + err.splitlines()[-1].split("known types: ")[1],
    ]
    assert "static" in err.splitlines()[-1]


def test_env_selects_a_file_of_a_folder(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    put(here / "configs/base.yaml", VALID)
    put(here / "configs/dev.yaml", "extends: base.yaml\nbudget: 50\n")
    assert main(["validate", "configs", "--env", "dev"]) == 0
    assert capsys.readouterr().out.startswith(f"{os.path.join('configs', 'dev.yaml')}: valid;")


def test_a_folder_without_env_is_an_error(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    put(here / "configs/dev.yaml", VALID)
    assert main(["validate", "configs"]) == 1
    assert "choose an environment with --env" in capsys.readouterr().err


def test_warnings_are_located_and_still_exit_0(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    long_text = "word " * 40
    put(
        here / "m.yaml",
        f"""
        version: 1
        budget: 30
        providers:
          - name: zero
            type: static
            max_tokens: 0
            text: a
          - name: above
            type: static
            max_tokens: 500
            text: b
          - name: over-budget
            type: static
            text: "{long_text}"
          - name: over-cap
            type: static
            max_tokens: 3
            text: "five words are here now"
          - name: templated
            type: static
            max_tokens: 1
            text: "{{{{ instruction.text }}}} {long_text}"
        """,
    )
    assert main(["validate", "m.yaml"]) == 0
    out, err = capsys.readouterr()
    assert err.splitlines() == [
        'm.yaml:6:17: warning: provider "zero": max_tokens: 0 means no cap (ADR-0008 D3); '
        "remove it or set a positive cap",
        'm.yaml:10:17: warning: provider "above": max_tokens 500 is above the budget 30, '
        "so it never applies",
        f'm.yaml:14:11: warning: provider "over-budget": its fixed text is {count_tokens(long_text)} '
        "tokens, over the budget 30; it can never be admitted",
        'm.yaml:18:11: warning: provider "over-cap": its fixed text is 5 tokens, over its '
        "max_tokens 3; it can never be admitted",
    ]
    assert out.startswith("m.yaml: valid;")


def test_a_zero_budget_is_warned_about(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    put(here / "m.yaml", "version: 1\nbudget: 0\n")
    assert main(["validate", "m.yaml"]) == 0
    assert (
        capsys.readouterr().err == "m.yaml:2:9: warning: budget: 0 admits no block with any text\n"
    )


def test_usage_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "usage: composer" in capsys.readouterr().err
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"composer {__version__}\n"
    assert main(["validate", "--help"]) == 0
    assert "--env" in capsys.readouterr().out
    assert main(["nope"]) == 2


def test_plain_output_when_not_a_terminal_or_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    terminal = Terminal()
    Output(io.StringIO(), terminal).error("m.yaml:1:1: bad")
    assert "\x1b[" in terminal.getvalue()
    assert "m.yaml:1:1: bad" in terminal.getvalue()

    monkeypatch.setenv("NO_COLOR", "1")
    terminal = Terminal()
    Output(io.StringIO(), terminal).error("m.yaml:1:1: bad")
    assert terminal.getvalue() == "m.yaml:1:1: bad\n"

    pipe = io.StringIO()
    monkeypatch.delenv("NO_COLOR")
    Output(io.StringIO(), pipe).warning("m.yaml:1:1: warning: w")
    assert pipe.getvalue() == "m.yaml:1:1: warning: w\n"


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMPOSER_")}
    return subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_python_dash_m_composer(here: Path) -> None:
    put(here / "m.yaml", BROKEN)
    result = run(sys.executable, "-m", "composer", "validate", "m.yaml", cwd=here)
    assert result.returncode == 1
    assert result.stderr.splitlines()[0] == "m.yaml:2:9: budget: must be >= 0"
    assert result.stdout == ""


def test_the_console_script(here: Path) -> None:
    script = Path(sys.executable).with_name("composer")
    if not script.exists():
        pytest.skip("the composer console script is not installed in this environment")
    put(here / "m.yaml", VALID)
    result = run(str(script), "validate", "m.yaml", cwd=here)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == "m.yaml: valid; 2 providers (1 enabled), budget 100\n"
