"""Without a MANIFEST argument every command reads COMPOSER_MANIFEST and COMPOSER_ENV."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

from repofiles import CONFIGS

Run = Callable[..., CompletedProcess[str]]


def test_validate_reads_manifest_and_env_from_the_environment(
    run_composer: Run, tmp_path: Path
) -> None:
    env = {"COMPOSER_MANIFEST": str(CONFIGS), "COMPOSER_ENV": "dev"}
    result = run_composer("validate", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"{CONFIGS / 'dev.yaml'}: valid;")


def test_env_option_overrides_composer_env(run_composer: Run, tmp_path: Path) -> None:
    env = {"COMPOSER_MANIFEST": str(CONFIGS), "COMPOSER_ENV": "prod"}
    result = run_composer("explain", "--env", "dev", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"# effective manifest: {CONFIGS / 'dev.yaml'}")


def test_no_manifest_anywhere_is_a_clear_error(run_composer: Run, tmp_path: Path) -> None:
    result = run_composer("validate", cwd=tmp_path)
    assert result.returncode == 1
    assert "no manifest given: pass a path or set COMPOSER_MANIFEST" in result.stderr


def test_help_names_the_environment_variables(run_composer: Run, tmp_path: Path) -> None:
    result = run_composer("--help", cwd=tmp_path)
    assert result.returncode == 0
    for name in ("COMPOSER_MANIFEST", "COMPOSER_ENV", "COMPOSER_SECRETS_DIR", "NO_COLOR"):
        assert name in result.stdout
    assert "composer preview configs --env dev --instruction" in result.stdout
