"""``composer explain``: the effective manifest, each value with the file, line and column that
set it (base or overlay), defaults marked, values from variables shown as written."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from repofiles import CONFIGS, put

from composer import load_manifest
from composer.cli import main

SECRET = "s3cret-Token-7f9a"

Explained = dict[tuple[str | None, str], tuple[str, str]]
LOCATION = re.compile(r"(default|.+\.yaml:\d+:\d+)")


def where(file: str, needle: str, value: str | None = None) -> str:
    """``path:line:col`` of ``value`` on the one line of ``configs/<file>`` holding ``needle``."""
    path = CONFIGS / file
    lines = path.read_text(encoding="utf-8").splitlines()
    found = [i for i, line in enumerate(lines) if needle in line]
    assert len(found) == 1, (file, needle, found)
    line = lines[found[0]]
    column = line.index(value or needle, line.index(needle)) + 1
    return f"{path}:{found[0] + 1}:{column}"


def explained(out: str) -> Explained:
    """{(provider or None, dotted key): (value as shown, location)}; checks every line's shape."""
    lines = out.splitlines()
    assert lines[0].startswith("# effective manifest: ")
    values: Explained = {}
    provider: str | None = None
    for line in lines[1:]:
        body, _, location = line.rpartition("  # ")
        assert LOCATION.fullmatch(location), line
        if line.startswith("provider "):
            provider = body.removeprefix("provider ").strip()
            values[(provider, "")] = ("", location)
            continue
        indented = line.startswith("  ")
        assert indented == (provider is not None), line
        key, _, shown = body.strip().partition(": ")
        values[(provider, key)] = (shown, location)
    return values


@pytest.fixture
def prod(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Explained:
    monkeypatch.setenv("STATUS_TOKEN", SECRET)
    assert main(["explain", str(CONFIGS), "--env", "prod"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert SECRET not in out
    assert out.splitlines()[0] == f"# effective manifest: {CONFIGS / 'prod.yaml'}"
    return explained(out)


def test_each_value_names_the_file_that_set_it(
    prod: Explained,
) -> None:
    assert prod[(None, "version")] == ("1", where("base.yaml", "version: 1", "1"))
    assert prod[(None, "budget")] == ("2000", where("prod.yaml", "budget: 2000", "2000"))
    assert prod[("runbooks", "max_tokens")] == ("800", where("prod.yaml", "max_tokens: 800", "8"))
    assert prod[("runbooks", "top_k")] == ("3", where("prod.yaml", "top_k: 3", "3"))
    assert prod[("runbooks", "priority")] == ("50", where("base.yaml", "priority: 50", "5"))
    assert prod[("team-memory", "query.limit")] == ("3", where("base.yaml", "limit: 3", "3"))
    assert prod[("status", "request.timeout_s")] == ("2.0", where("base.yaml", "timeout_s", "2"))
    assert prod[("status", "request.retries")] == ("1", where("prod.yaml", "retries: 1", "1"))
    assert prod[("status", "request.url")] == (
        '"https://status.example.com/search"',
        where("prod.yaml", "url:", '"'),
    )
    assert prod[("status", "request.allowed_hosts.1")] == (
        '"127.0.0.1"',
        where("prod.yaml", "allowed_hosts", '"127'),
    )
    assert prod[("status", "")] == ("", where("base.yaml", "name: status", "name"))


def test_defaults_are_marked(prod: Explained) -> None:
    assert prod[("house-rules", "enabled")] == ("true", "default")
    assert prod[("house-rules", "max_tokens")] == ("null", "default")
    assert prod[("status", "request.method")] == ('"GET"', "default")
    assert prod[(None, "runtime.gather")] == ('"sequential"', "default")
    assert prod[("runbooks", "chunk_by")] == ('"heading"', "default")


def test_every_provider_and_field_is_listed(
    prod: Explained,
) -> None:
    manifest = load_manifest(CONFIGS, env="prod", environ={"STATUS_TOKEN": SECRET})
    for config in manifest.providers:
        assert (config.name, "") in prod
        for field in type(config).model_fields:
            assert any(
                provider == config.name and (key == field or key.startswith(f"{field}."))
                for provider, key in prod
            ), (config.name, field)


def test_values_from_variables_are_shown_as_written(
    prod: Explained,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert prod[("status", "request.headers.Authorization")] == (
        '"Bearer ${STATUS_TOKEN}"',
        where("prod.yaml", "Authorization", '"Bearer'),
    )
    # With STATUS_URL set, the URL is shown as written too, never as its value.
    monkeypatch.setenv("STATUS_URL", "http://127.0.0.1:48123")
    assert main(["explain", str(CONFIGS), "--env", "prod"]) == 0
    out = capsys.readouterr().out
    assert "48123" not in out
    assert SECRET not in out
    assert explained(out)[("status", "request.url")][0] == (
        '"${STATUS_URL:-https://status.example.com}/search"'
    )


def test_dev_takes_enabled_from_the_overlay(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", str(CONFIGS), "--env", "dev"]) == 0
    values = explained(capsys.readouterr().out)
    assert values[("status", "enabled")] == ("false", where("dev.yaml", "enabled: false", "f"))
    assert values[(None, "budget")] == ("1200", where("base.yaml", "budget: 1200", "1"))
    authorization = where("base.yaml", "Authorization", '"Bearer')
    # A default written in the file is no secret: shown as the value it gave.
    assert values[("status", "request.headers.Authorization")] == (
        '"Bearer dev-token"',
        authorization,
    )
    # A value from the environment is: shown as written.
    monkeypatch.setenv("STATUS_TOKEN", SECRET)
    assert main(["explain", str(CONFIGS), "--env", "dev"]) == 0
    out = capsys.readouterr().out
    assert SECRET not in out
    assert explained(out)[("status", "request.headers.Authorization")] == (
        '"Bearer ${STATUS_TOKEN:-dev-token}"',
        authorization,
    )


def test_a_long_value_does_not_push_every_comment_away(
    prod: Explained, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", str(CONFIGS), "--env", "dev"]) == 0
    lines = capsys.readouterr().out.splitlines()
    version = next(line for line in lines if line.startswith("version: "))
    assert version.index("  # ") < 80
    values = [line for line in lines[1:] if not line.startswith("provider ")]
    columns = {line.index("  # ") for line in values if len(line.split("  # ")[0].rstrip()) < 40}
    assert len(columns) == 1  # every short value's comment lined up


def test_explain_needs_the_variables_prod_requires(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", str(CONFIGS), "--env", "prod"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    token = where("prod.yaml", "Authorization", '"Bearer')
    assert err.splitlines() == [
        f"{token}: environment variable "
        '"STATUS_TOKEN" is not set (use ${STATUS_TOKEN:-default} for a default)'
    ]


def test_a_bad_manifest_exits_1_with_located_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(tmp_path / "m.yaml", "version: 1\nbudget: -1\nproviders: []\n")
    assert main(["explain", "m.yaml"]) == 1
    out, err = capsys.readouterr()
    assert (out, err) == ("", "m.yaml:2:9: budget: must be >= 0\n")


def test_explain_in_a_subprocess_prints_no_secret(
    tmp_path: Path, run_composer: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    result = run_composer(
        "explain", str(CONFIGS), "--env", "staging", cwd=tmp_path, env={"STATUS_TOKEN": SECRET}
    )
    assert (result.returncode, result.stderr) == (0, "")
    assert SECRET not in result.stdout
    assert '"Bearer ${STATUS_TOKEN}"' in result.stdout
    assert "\x1b[" not in result.stdout
