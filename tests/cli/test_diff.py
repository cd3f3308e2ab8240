"""``composer diff``: what differs between two environments, value by value, with locations."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from repofiles import CONFIGS, put

from composer.cli import main

SECRET = "s3cret-Token-7f9a"
QUOTE = '"'


def where(file: str, needle: str, value: str) -> str:
    """``path:line:col`` of ``value`` on the one line of ``configs/<file>`` holding ``needle``."""
    path = CONFIGS / file
    lines = path.read_text(encoding="utf-8").splitlines()
    found = [i for i, line in enumerate(lines) if needle in line]
    assert len(found) == 1, (file, needle, found)
    line = lines[found[0]]
    return f"{path}:{found[0] + 1}:{line.index(value, line.index(needle)) + 1}"


def test_dev_against_prod(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("STATUS_TOKEN", SECRET)
    assert main(["diff", str(CONFIGS), "--env", "dev", "--env", "prod"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert SECRET not in out
    lines = out.splitlines()
    assert lines[0] == f"# dev -> prod: {len(lines) - 1} differences"
    changes = {line.split(":")[0]: line for line in lines[1:]}
    base, dev, prod = "base.yaml", "dev.yaml", "prod.yaml"
    assert changes["~ budget"] == (
        f"~ budget: 1200 -> 2000  # {where(base, 'budget:', '1')} -> {where(prod, 'budget:', '2')}"
    )
    assert changes["~ providers.runbooks.max_tokens"] == (
        "~ providers.runbooks.max_tokens: 600 -> 800"
        f"  # {where(base, 'max_tokens: 600', '6')} -> {where(prod, 'max_tokens: 800', '8')}"
    )
    assert changes["~ providers.runbooks.top_k"] == (
        "~ providers.runbooks.top_k: 2 -> 3"
        f"  # {where(base, 'top_k: 2', '2')} -> {where(prod, 'top_k: 3', '3')}"
    )
    assert changes["~ providers.status.enabled"] == (
        "~ providers.status.enabled: false -> true"
        f"  # {where(dev, 'enabled: false', 'f')} -> default"
    )
    assert changes["~ providers.status.request.retries"] == (
        f"~ providers.status.request.retries: 0 -> 1  # default -> {where(prod, 'retries', '1')}"
    )
    # A list is one value: not "- allowed_hosts: null" and "+ allowed_hosts.0 ...".
    assert changes["~ providers.status.request.allowed_hosts"] == (
        '~ providers.status.request.allowed_hosts: null -> ["status.example.com", "127.0.0.1"]'
        f"  # default -> {where(prod, 'allowed_hosts', '[')}"
    )
    # Values from variables as written, never their value.
    assert changes["~ providers.status.request.headers.Authorization"] == (
        '~ providers.status.request.headers.Authorization: "Bearer ${STATUS_TOKEN:-dev-token}"'
        ' -> "Bearer ${STATUS_TOKEN}"'
        f"  # {where(base, 'Authorization', QUOTE)} -> {where(prod, 'Authorization', QUOTE)}"
    )
    assert set(changes) == {
        "~ budget",
        "~ providers.runbooks.max_tokens",
        "~ providers.runbooks.top_k",
        "~ providers.status.enabled",
        "~ providers.status.request.url",
        "~ providers.status.request.headers.Authorization",
        "~ providers.status.request.retries",
        "~ providers.status.request.allowed_hosts",
    }


def test_the_same_environment_twice_has_no_difference(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", str(CONFIGS), "--env", "dev", "--env", "dev"]) == 0
    assert capsys.readouterr().out == "# dev -> dev: 0 differences\n"


@pytest.mark.parametrize("envs", [["dev"], ["dev", "prod", "staging"]])
def test_exactly_two_environments(envs: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    args = ["diff", str(CONFIGS)] + [arg for env in envs for arg in ("--env", env)]
    assert main(args) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "composer diff: give exactly two environments: --env A --env B\n"


def test_no_environment_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", str(CONFIGS)]) == 2
    assert "--env" in capsys.readouterr().err


def test_an_environment_that_does_not_load_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", str(CONFIGS), "--env", "dev", "--env", "prod"]) == 1  # no STATUS_TOKEN
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"{where('prod.yaml', 'Authorization', QUOTE)}: environment variable")

    assert main(["diff", str(CONFIGS), "--env", "dev", "--env", "nope"]) == 1
    assert 'no manifest for environment "nope"' in capsys.readouterr().err


def test_a_provider_on_one_side_is_one_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(
        tmp_path / "envs/base.yaml",
        """
        version: 1
        providers:
          - {name: rules, type: static, text: Be brief.}
        """,
    )
    put(
        tmp_path / "envs/one.yaml",
        """
        extends: base.yaml
        providers:
          - {name: extra, type: static, priority: 5, text: "More."}
        """,
    )
    put(tmp_path / "envs/two.yaml", "extends: base.yaml\nbudget: 10\n")
    assert main(["diff", "envs", "--env", "one", "--env", "two"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "# one -> two: 2 differences",
        "- providers.extra: type static, priority 5  # envs/one.yaml:3:5",
        "~ budget: 2000 -> 10  # default -> envs/two.yaml:2:9",
    ]
    assert main(["diff", "envs", "--env", "two", "--env", "one"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "# two -> one: 2 differences",
        "~ budget: 10 -> 2000  # envs/two.yaml:2:9 -> default",
        "+ providers.extra: type static, priority 5  # envs/one.yaml:3:5",
    ]


def test_one_difference_is_singular(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    put(tmp_path / "envs/a.yaml", "version: 1\nbudget: 5\n")
    put(tmp_path / "envs/b.yaml", "version: 1\nbudget: 6\n")
    assert main(["diff", "envs", "--env", "a", "--env", "b"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "# a -> b: 1 difference"


def test_diff_in_a_subprocess_prints_no_secret(
    tmp_path: Path, run_composer: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    result = run_composer(
        "diff",
        str(CONFIGS),
        "--env",
        "staging",
        "--env",
        "prod",
        cwd=tmp_path,
        env={"STATUS_TOKEN": SECRET, "STATUS_URL": "http://127.0.0.1:48123"},
    )
    assert (result.returncode, result.stderr) == (0, "")
    assert SECRET not in result.stdout
    assert "48123" not in result.stdout
    assert "${STATUS_URL:-https://status.staging.example.com}/search" in result.stdout
