"""``composer validate`` in CI: no secret needed (--no-interpolate), every environment of a
folder at once (--all-envs), and no silently ignored second --env."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from repofiles import CONFIGS, put

from composer.cli import main
from composer.manifest.loader import load_manifest

SECRET = "s3cret-Token-7f9a"
QUOTE = '"'


def test_the_bundled_folder_validates_with_no_variable_set(
    tmp_path: Path, run_composer: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    """The README's CI command, on a machine without STATUS_TOKEN, in a real process."""
    result = run_composer("validate", str(CONFIGS), "--all-envs", "--no-interpolate", cwd=tmp_path)
    assert (result.returncode, result.stderr) == (0, "")
    lines = result.stdout.splitlines()
    prod = CONFIGS / "prod.yaml"
    text = prod.read_text().splitlines()
    row = next(i for i, line in enumerate(text) if "STATUS_TOKEN" in line)
    where = f"{prod}:{row + 1}:{text[row].index(QUOTE + 'Bearer') + 1}"  # the value's start
    assert f"{prod}: valid without variables; 4 providers (4 enabled), budget 2000" in lines
    assert f"{prod}: needs STATUS_TOKEN ({where}); reads if set: STATUS_URL" in lines
    assert (
        f"{CONFIGS / 'dev.yaml'}: needs no variable; reads if set: STATUS_URL, STATUS_TOKEN"
        in lines
    )
    assert lines[-1] == f"{CONFIGS}: 4 environments: 4 valid"


def test_without_no_interpolate_the_missing_secret_is_an_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["validate", str(CONFIGS), "--all-envs"]) == 1
    out, err = capsys.readouterr()
    assert 'environment variable "STATUS_TOKEN" is not set' in err
    assert out.splitlines()[-1] == f"{CONFIGS}: 4 environments: 2 valid, 2 invalid (prod, staging)"


def test_no_interpolate_reads_no_variable_even_when_set(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The result does not depend on the machine: a set variable is not read either."""
    monkeypatch.setenv("STATUS_TOKEN", SECRET)
    monkeypatch.setenv("STATUS_URL", "not a url")  # would be an error if it were read
    assert main(["validate", str(CONFIGS), "--env", "prod", "--no-interpolate"]) == 0
    out, err = capsys.readouterr()
    assert SECRET not in out + err
    assert "needs STATUS_TOKEN" in out


def test_malformed_references_are_still_errors_without_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(
        tmp_path / "m.yaml",
        """
        version: 1
        providers:
          - {name: a, type: static, text: "${NOT CLOSED"}
          - {name: b, type: static, text: "${bad-name}"}
          - {name: c, type: static, text: "${FINE}"}
        """,
    )
    assert main(["validate", str(tmp_path / "m.yaml"), "--no-interpolate"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f'{tmp_path / "m.yaml"}:3:35: unclosed "${{" (write "$${{" for a literal "${{")',
        f'{tmp_path / "m.yaml"}:4:35: bad variable reference "${{bad-name}}"; '
        "a name is letters, digits and _",
    ]


def test_a_value_that_needs_an_unset_variable_is_not_judged(tmp_path: Path) -> None:
    """``budget: ${BUDGET}`` cannot be checked without its value: no follow-on error."""
    put(tmp_path / "m.yaml", "version: 1\nbudget: ${BUDGET}\nproviders: []\n")
    manifest = load_manifest(tmp_path / "m.yaml", interpolate=False, environ={"BUDGET": "x"})
    assert [(use.name, use.required) for use in manifest.variables] == [("BUDGET", True)]


def test_a_disabled_provider_and_a_default_need_nothing(tmp_path: Path) -> None:
    put(
        tmp_path / "m.yaml",
        """
        version: 1
        providers:
          - {name: off, type: static, enabled: false, text: "${OFF}"}
          - {name: on, type: static, text: "${ON:-x} ${ON}"}
        """,
    )
    manifest = load_manifest(tmp_path / "m.yaml", interpolate=False)
    assert [(use.name, use.has_default, use.required) for use in manifest.variables] == [
        ("OFF", False, False),
        ("ON", True, False),
        ("ON", False, True),
    ]
    assert manifest.variables[0].location == f"{tmp_path / 'm.yaml'}:3:53"


def test_variables_replaces_every_source(tmp_path: Path) -> None:
    put(tmp_path / "m.yaml", 'version: 1\nproviders:\n  - {name: a, type: static, text: "${X}"}\n')
    put(tmp_path / ".env", "X=from-dotenv\n")
    manifest = load_manifest(tmp_path / "m.yaml", variables={"X": "given"}, environ={"X": "env"})
    assert manifest.providers[0].model_dump()["text"] == "***"  # a secret: it came from ${X}
    assert str(vars(manifest.providers[0])["text"]) == "given"


@pytest.mark.parametrize("command", ["validate", "render", "preview", "explain"])
def test_a_second_env_is_a_usage_error(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``--env dev --env prod`` used to validate prod alone, silently."""
    args = [command, str(CONFIGS), "--env", "dev", "--env", "prod"]
    if command == "preview":
        args += ["--instruction", "x"]
    assert main(args) == 2
    assert "--env given twice" in capsys.readouterr().err


def test_all_envs_needs_a_folder_and_no_env(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(CONFIGS / "dev.yaml"), "--all-envs"]) == 2
    assert "--all-envs needs MANIFEST to be a folder" in capsys.readouterr().err
    assert main(["validate", str(CONFIGS), "--all-envs", "--env", "dev"]) == 2
    assert "give --env or --all-envs, not both" in capsys.readouterr().err


def test_all_envs_reports_each_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(tmp_path / "envs/a.yaml", "version: 1\n")
    put(tmp_path / "envs/b.yaml", "version: 1\nbudget: -1\n")
    put(tmp_path / "envs/tests.yaml", "manifest: .\ntests: []\n")  # a test file: not an env
    assert main(["validate", str(tmp_path / "envs"), "--all-envs"]) == 1
    out, err = capsys.readouterr()
    assert err == f"{tmp_path / 'envs' / 'b.yaml'}:2:9: budget: must be >= 0 (in b)\n"
    assert out.splitlines() == [
        f"{tmp_path / 'envs' / 'a.yaml'}: valid; 0 providers (0 enabled), budget 2000",
        f"{tmp_path / 'envs'}: 2 environments: 1 valid, 1 invalid (b)",
    ]


def test_a_missing_environment_names_the_folder_not_a_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["validate", str(CONFIGS), "--env", "prodd"]) == 1
    assert capsys.readouterr().err == (
        f'composer: no manifest for environment "prodd" in "{CONFIGS}" '
        "(found: base, dev, prod, staging)\n"
    )


def test_an_unset_url_origin_stands_for_a_placeholder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A URL or a number that needs an unset variable: the rest of the entry is still
    checked, and rendered as written."""
    put(
        tmp_path / "m.yaml",
        """
        version: 1
        budget: ${BUDGET}
        providers:
          - name: status
            type: http
            max_tokens: ${CAP}
            request: {url: "${STATUS_URL}/search", timeout_s: 2, retriez: 1}
        """,
    )
    assert main(["validate", str(tmp_path / "m.yaml"), "--no-interpolate"]) == 1
    assert capsys.readouterr().err == (
        f'{tmp_path / "m.yaml"}:7:58: provider "status": unknown key "retriez" in request '
        '(did you mean "retries"?)\n'
    )
    put(tmp_path / "m.yaml", (tmp_path / "m.yaml").read_text().replace(", retriez: 1", ""))
    assert main(["render", str(tmp_path / "m.yaml"), "--no-interpolate"]) == 0
    out = capsys.readouterr().out
    assert "budget: ${BUDGET}  # " in out
    assert "    max_tokens: ${CAP}  # " in out
    assert "      url: ${STATUS_URL}/search  # " in out
    assert "placeholder" not in out


def test_all_envs_says_an_error_of_a_shared_base_once_with_the_environments_it_is_in(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mistake in the base every environment extends is one line naming them, not one
    unnamed line per environment; a warning too."""
    put(
        tmp_path / "envs/base.yaml",
        "version: 1\nbudget: -1\nproviders:\n  - {name: a, type: static, text: A, max_tokens: 0}\n",
    )
    put(tmp_path / "envs/dev.yaml", "extends: base.yaml\n")
    put(tmp_path / "envs/prod.yaml", "extends: base.yaml\nbudget: 10\n")
    assert main(["validate", str(tmp_path / "envs"), "--all-envs"]) == 1
    out, err = capsys.readouterr()
    base = tmp_path / "envs" / "base.yaml"
    assert err.splitlines() == [
        f"{base}:2:9: budget: must be >= 0 (in base, dev)",
        f'{base}:4:50: warning: provider "a": max_tokens: 0 means no cap (ADR-0008 D3); '
        "remove it or set a positive cap (in prod)",
    ]
    assert (
        out.splitlines()[-1]
        == f"{tmp_path / 'envs'}: 3 environments: 1 valid, 2 invalid (base, dev)"
    )
