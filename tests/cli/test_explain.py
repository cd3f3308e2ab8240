"""``composer render`` and ``composer explain``: the effective manifest as YAML that loads
again, each value with the file, line and column that set it (base or overlay), defaults
marked, values from variables shown as written."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from repofiles import CONFIGS, put

from composer import load_manifest
from composer.cli import main

SECRET = "s3cret-Token-7f9a"


def where(file: str, needle: str, value: str | None = None) -> str:
    """``path:line:col`` of ``value`` on the one line of ``configs/<file>`` holding ``needle``."""
    path = CONFIGS / file
    lines = path.read_text(encoding="utf-8").splitlines()
    found = [i for i, line in enumerate(lines) if needle in line]
    assert len(found) == 1, (file, needle, found)
    line = lines[found[0]]
    column = line.index(value or needle, line.index(needle)) + 1
    return f"{path}:{found[0] + 1}:{column}"


def section(out: str, provider: str | None) -> list[str]:
    """The lines of one provider's entry (None: the lines before ``providers:``)."""
    lines = out.splitlines()
    if provider is None:
        return lines[: next(i for i, line in enumerate(lines) if line.startswith("providers:"))]
    start = next(i for i, line in enumerate(lines) if line.startswith(f"  - name: {provider}  #"))
    end = next(
        (i for i, line in enumerate(lines[start + 1 :], start + 1) if line.startswith("  # ")),
        len(lines),
    )
    return lines[start:end]


@pytest.fixture
def prod(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> str:
    monkeypatch.setenv("STATUS_TOKEN", SECRET)
    assert main(["render", str(CONFIGS), "--env", "prod"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert SECRET not in out
    assert out.splitlines()[0] == f"# effective manifest: {CONFIGS / 'prod.yaml'}"
    return out


def test_each_value_names_the_file_that_set_it(prod: str) -> None:
    top = section(prod, None)
    assert f"version: 1  # {where('base.yaml', 'version: 1', '1')}" in top
    assert f"budget: 2000  # {where('prod.yaml', 'budget: 2000', '2000')}" in top
    runbooks = section(prod, "runbooks")
    assert f"    max_tokens: 800  # {where('prod.yaml', 'max_tokens: 800', '8')}" in runbooks
    assert f"    top_k: 3  # {where('prod.yaml', 'top_k: 3', '3')}" in runbooks
    assert f"    priority: 50  # {where('base.yaml', 'priority: 50', '5')}" in runbooks
    memory = section(prod, "team-memory")
    assert f"      limit: 3  # {where('base.yaml', 'limit: 3', '3')}" in memory
    status = section(prod, "status")
    assert f"      timeout_s: 2.0  # {where('base.yaml', 'timeout_s', '2')}" in status
    assert f"      retries: 1  # {where('prod.yaml', 'retries: 1', '1')}" in status
    assert (
        f"      url: ${{STATUS_URL:-https://status.example.com}}/search  "
        f"# {where('prod.yaml', 'url:', QUOTE)}"
    ) in status
    # A list is YAML, item by item, not flattened keys such as allowed_hosts.1.
    hosts = where("prod.yaml", "allowed_hosts", '"127')
    assert f"        - 127.0.0.1  # {hosts}" in status
    assert not any("allowed_hosts.1" in line for line in status)
    assert f"  # provider status  # {where('base.yaml', 'name: status', 'name')}" in prod


QUOTE = '"'


def test_defaults_are_marked(prod: str) -> None:
    assert "    enabled: true  # default" in section(prod, "house-rules")
    assert "    max_tokens: null  # default" in section(prod, "house-rules")
    assert "      method: GET  # default" in section(prod, "status")
    assert "  gather: sequential  # default" in section(prod, None)
    assert "    chunk_by: heading  # default" in section(prod, "runbooks")


def test_only_set_prints_what_the_files_set_each_with_its_origin(
    prod: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No default: every line a value (or what holds one) a file set, with that file's line."""
    assert main(["render", str(CONFIGS), "--env", "prod", "--only-set"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == f"# only what the files set: {CONFIGS / 'prod.yaml'}"
    assert SECRET not in out
    assert not any(line.endswith("# default") for line in lines)
    assert [line for line in lines if "# default" not in line] == lines
    assert len(lines) < len(prod.splitlines()) / 2  # prod sets about half of what render shows
    runbooks = section(out, "runbooks")
    assert f"    max_tokens: 800  # {where('prod.yaml', 'max_tokens: 800', '8')}" in runbooks
    assert f"    priority: 50  # {where('base.yaml', 'priority: 50', '5')}" in runbooks
    assert not any(line.strip().startswith("chunk_by:") for line in runbooks)  # a default
    assert not any(line.startswith("runtime:") for line in lines)  # no file sets it
    token = where("prod.yaml", "Authorization", QUOTE)
    assert f"        Authorization: Bearer ${{STATUS_TOKEN}}  # {token}" in section(out, "status")


def test_only_set_keeps_a_mapping_written_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mapping written empty is set, though nothing in it is: it stays, as ``{}``."""
    put(tmp_path / "m.yaml", "version: 1\nruntime: {}\nproviders: []\n")
    assert main(["render", str(tmp_path / "m.yaml"), "--only-set"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1:] == [
        f"version: 1  # {tmp_path / 'm.yaml'}:1:10",
        f"runtime: {{}}  # {tmp_path / 'm.yaml'}:2:10",
        "providers: []",
    ]


def test_keys_are_the_manifests_own(prod: str) -> None:
    """``json`` as a manifest spells it, not the model's ``json_body``; nothing flattened."""
    status = section(prod, "status")
    assert "      json: null  # default" in status
    assert not any("json_body" in line for line in status)
    assert not any(line.split("#")[0].strip().startswith("include.") for line in prod.splitlines())


def test_every_provider_and_field_is_listed(prod: str) -> None:
    manifest = load_manifest(CONFIGS, env="prod", environ={"STATUS_TOKEN": SECRET})
    for config in manifest.providers:
        lines = section(prod, config.name)
        for name, field in type(config).model_fields.items():
            key = field.alias or name
            assert any(line.split(":")[0].strip(" -") == key for line in lines), (config.name, key)


@pytest.mark.parametrize("only_set", [False, True], ids=["all", "only-set"])
@pytest.mark.parametrize("env", ["dev", "staging", "prod"])
def test_the_rendered_manifest_loads_back_to_the_same_manifest(
    env: str,
    only_set: bool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Written in place of the environment's file, the output is the same manifest; with
    ``--only-set`` too, the defaults it leaves out being the defaults."""
    monkeypatch.setenv("STATUS_TOKEN", SECRET)
    folder = tmp_path / "configs"
    shutil.copytree(CONFIGS, folder, ignore=shutil.ignore_patterns("*.sqlite*"))
    assert main(["render", str(folder), "--env", env, *(["--only-set"] if only_set else [])]) == 0
    rendered = put(folder / "rendered.yaml", capsys.readouterr().out)
    original = load_manifest(folder, env=env)
    again = load_manifest(rendered)
    assert again.model_dump(exclude={"extends"}) == original.model_dump(exclude={"extends"})
    assert again.extends is None


def test_values_from_variables_are_shown_as_written(
    prod: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    token = where("prod.yaml", "Authorization", '"Bearer')
    assert f"        Authorization: Bearer ${{STATUS_TOKEN}}  # {token}" in section(prod, "status")
    # With STATUS_URL set, the URL is shown as written too, never as its value.
    monkeypatch.setenv("STATUS_URL", "http://127.0.0.1:48123")
    assert main(["render", str(CONFIGS), "--env", "prod"]) == 0
    out = capsys.readouterr().out
    assert "48123" not in out
    assert SECRET not in out
    assert "      url: ${STATUS_URL:-https://status.example.com}/search  # " in out


def test_a_literal_dollar_brace_is_written_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(
        tmp_path / "m.yaml",
        """
        version: 1
        providers:
          - {name: a, type: static, text: "costs $${PRICE} and ${UNSET:-five}"}
        """,
    )
    assert main(["render", str(tmp_path / "m.yaml")]) == 0
    out = capsys.readouterr().out
    assert "    text: costs $${PRICE} and ${UNSET:-five}  # " in out
    rendered = put(tmp_path / "again.yaml", out)
    assert load_manifest(rendered).providers[0].model_dump()["text"] == "costs ${PRICE} and five"


def test_explain_is_render(prod: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", str(CONFIGS), "--env", "prod"]) == 0
    assert capsys.readouterr().out == prod


def test_dev_takes_enabled_from_the_overlay(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["render", str(CONFIGS), "--env", "dev"]) == 0
    out = capsys.readouterr().out
    status = section(out, "status")
    assert f"    enabled: false  # {where('dev.yaml', 'enabled: false', 'f')}" in status
    assert f"budget: 1200  # {where('base.yaml', 'budget: 1200', '1')}" in out
    authorization = where("base.yaml", "Authorization", '"Bearer')
    # A default written in the file is shown as written too: loading it again reads the same.
    line = f"        Authorization: Bearer ${{STATUS_TOKEN:-dev-token}}  # {authorization}"
    assert line in status
    monkeypatch.setenv("STATUS_TOKEN", SECRET)
    assert main(["render", str(CONFIGS), "--env", "dev"]) == 0
    out = capsys.readouterr().out
    assert SECRET not in out
    assert line in section(out, "status")


def test_render_needs_the_variables_prod_requires_unless_told_not_to(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["render", str(CONFIGS), "--env", "prod"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    token = where("prod.yaml", "Authorization", '"Bearer')
    assert err.splitlines() == [
        f"{token}: environment variable "
        '"STATUS_TOKEN" is not set (use ${STATUS_TOKEN:-default} for a default)'
    ]
    assert main(["render", str(CONFIGS), "--env", "prod", "--no-interpolate"]) == 0
    out = capsys.readouterr().out
    assert "        Authorization: Bearer ${STATUS_TOKEN}  # " in out


def test_a_bad_manifest_exits_1_with_located_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(tmp_path / "m.yaml", "version: 1\nbudget: -1\nproviders: []\n")
    assert main(["explain", "m.yaml"]) == 1
    out, err = capsys.readouterr()
    assert (out, err) == ("", "m.yaml:2:9: budget: must be >= 0\n")


def test_render_in_a_subprocess_prints_no_secret(
    tmp_path: Path, run_composer: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    result = run_composer(
        "render", str(CONFIGS), "--env", "staging", cwd=tmp_path, env={"STATUS_TOKEN": SECRET}
    )
    assert (result.returncode, result.stderr) == (0, "")
    assert SECRET not in result.stdout
    assert "Authorization: Bearer ${STATUS_TOKEN}  # " in result.stdout
    assert "\x1b[" not in result.stdout
