"""The scaffold ``composer init`` writes validates in every environment, previews offline and
passes its own expected turns, as written; it never overwrites a file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from netblock import blocked_pythonpath

from composer.cli.scaffold import FILES, scaffold
from composer.errors import ComposerError

ROOT = Path(__file__).parents[2]


def offline(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``composer ARGS`` in a child whose sockets all fail."""
    env = {**os.environ, "PYTHONPATH": blocked_pythonpath(tmp_path / "block", str(ROOT))}
    env["NO_COLOR"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "composer", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )


def test_init_writes_what_validates_previews_offline_and_passes_its_tests(tmp_path: Path) -> None:
    folder = tmp_path / "team"
    made = offline(tmp_path, "init", str(folder), "--team", "payments")
    assert made.returncode == 0, made.stderr
    written = [line.removeprefix("wrote ") for line in made.stdout.splitlines()[:-1]]
    names = [Path(p).relative_to(folder).as_posix() for p in written]
    assert names == [
        *FILES,
        "manifest.schema.json",
        "manifest.overlay.schema.json",
        "tests.schema.json",
    ]
    assert made.stdout.splitlines()[-1].startswith("next: composer validate")
    validated = offline(tmp_path, "validate", str(folder), "--all-envs")
    assert validated.returncode == 0, validated.stderr
    previewed = offline(
        tmp_path, "preview", str(folder), "--env", "dev", "--instruction", "the disk is full"
    )
    assert previewed.returncode == 0, previewed.stderr
    tested = offline(tmp_path, "test", str(folder / "tests.yaml"))
    assert tested.returncode == 0, tested.stdout + tested.stderr
    preview = previewed.stdout
    assert "House rules for payments:" in preview
    assert "disk-full.md" in preview
    assert "Docker images were never pruned" in preview


def test_init_into_a_folder_with_those_files_changes_nothing(tmp_path: Path) -> None:
    (tmp_path / "tests.yaml").write_text("mine\n")
    refused = offline(tmp_path, "init", str(tmp_path))
    assert refused.returncode == 1
    assert "exist already" in refused.stderr
    assert "--force" in refused.stderr
    assert (tmp_path / "tests.yaml").read_text() == "mine\n"
    assert not (tmp_path / "base.yaml").exists()


def test_the_scaffold_never_overwrites_a_file(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text("mine\n")
    with pytest.raises(ComposerError, match=r"1 of the files exist already .*--force"):
        scaffold(tmp_path)
    assert (tmp_path / "base.yaml").read_text() == "mine\n"
    assert not (tmp_path / "dev.yaml").exists()  # nothing was written
    scaffold(tmp_path, force=True)
    assert (tmp_path / "base.yaml").read_text().startswith("# yaml-language-server")
