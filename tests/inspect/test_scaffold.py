"""The scaffold ``composer init`` writes validates in every environment, previews offline and
passes its own expected turns, as written; it never overwrites a file, and never writes
outside its folder, whatever links someone planted there, before the check or after it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from netblock import blocked_pythonpath

from composer.errors import ComposerError
from composer.inspect import write_inside
from composer.inspect.scaffold import FILES, scaffold

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
        "questions.schema.json",
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
    evaluated = offline(
        tmp_path, "eval", str(folder / "questions.yaml"), "--min", "overall.recall=1"
    )
    assert evaluated.returncode == 0, evaluated.stdout + evaluated.stderr
    assert "3 questions" in evaluated.stdout
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


def outside_tree(folder: Path) -> dict[str, bytes | str]:
    """Every entry under ``folder``: a file's bytes, a link's target, a folder as ``/``."""
    tree: dict[str, bytes | str] = {}
    for path in sorted(folder.rglob("*")):
        name = path.relative_to(folder).as_posix()
        if path.is_symlink():
            tree[name] = "-> " + os.readlink(path)
        elif path.is_dir():
            tree[name] = "/"
        else:
            tree[name] = path.read_bytes()
    return tree


def planted(tmp_path: Path) -> tuple[Path, Path]:
    """A team folder whose ``prod.yaml`` is a symlink to a file outside it, whose ``dev.yaml``
    is a hard link to another, and whose ``corpus`` is a symlink to a folder outside it."""
    outside = tmp_path / "outside"
    (outside / "corpus").mkdir(parents=True)
    (outside / "prod.yaml").write_bytes(b"the real production manifest\n")
    (outside / "dev.yaml").write_bytes(b"another team's dev manifest\n")
    folder = tmp_path / "team"
    folder.mkdir()
    (folder / "prod.yaml").symlink_to(outside / "prod.yaml")
    os.link(outside / "dev.yaml", folder / "dev.yaml")
    (folder / "corpus").symlink_to(outside / "corpus", target_is_directory=True)
    return folder, outside


@pytest.mark.parametrize("force", [False, True], ids=["plain", "force"])
def test_init_refuses_a_folder_link_before_writing_anything(tmp_path: Path, force: bool) -> None:
    folder, outside = planted(tmp_path)
    before, inside = outside_tree(outside), outside_tree(folder)
    refused = offline(tmp_path, "init", "team", *(["--force"] if force else []))
    assert refused.returncode == 1
    assert refused.stderr == (
        f"composer init: team/corpus is a symbolic link to {outside / 'corpus'}: composer init "
        "writes only inside team and follows no link there (--force or not); remove the link "
        "or choose another folder\n"
    )
    assert refused.stdout == ""
    assert outside_tree(outside) == before  # nothing changed, nothing made outside
    assert outside_tree(folder) == inside  # nor inside: every path is checked first


def test_init_force_replaces_file_links_themselves_never_their_targets(tmp_path: Path) -> None:
    folder, outside = planted(tmp_path)
    (folder / "corpus").unlink()
    (folder / "runbooks").mkdir()
    (folder / "corpus").mkdir()  # a deeper folder link: corpus/runbooks -> outside/corpus
    (folder / "corpus" / "runbooks").symlink_to(outside / "corpus", target_is_directory=True)
    before = outside_tree(outside)
    refused = offline(tmp_path, "init", "team", "--force")
    assert refused.returncode == 1
    assert "team/corpus/runbooks is a symbolic link to" in refused.stderr
    (folder / "corpus" / "runbooks").unlink()
    made = offline(tmp_path, "init", "team", "--force")
    assert made.returncode == 0, made.stderr
    assert outside_tree(outside) == before
    for name in ("prod.yaml", "dev.yaml"):  # now files of the folder's own
        path = folder / name
        assert not path.is_symlink()
        assert path.stat().st_nlink == 1
        assert path.read_text() == FILES[name]
    assert sorted(p.name for p in (folder / "corpus" / "runbooks").iterdir()) == [
        "disk-full.md",
        "restart.md",
    ]
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]


def test_init_without_force_names_a_file_link_as_a_file_that_exists(tmp_path: Path) -> None:
    folder, outside = planted(tmp_path)
    (folder / "corpus").unlink()
    before = outside_tree(outside)
    refused = offline(tmp_path, "init", "team")
    assert refused.returncode == 1
    assert refused.stderr.startswith(
        "composer init: 2 of the files exist already (team/dev.yaml, team/prod.yaml); "
        "use --force to replace them"
    )
    assert outside_tree(outside) == before
    assert sorted(p.name for p in folder.iterdir()) == ["dev.yaml", "prod.yaml"]


def plant_after_the_check(monkeypatch: pytest.MonkeyPatch, plant: Callable[[], object]) -> None:
    """Run ``plant`` right after the scaffold's check, before its first write: the race a
    process that can write in the folder could win."""
    real = write_inside._plan

    def checked_then_planted(*args: Any, **kwargs: Any) -> None:
        real(*args, **kwargs)
        plant()

    monkeypatch.setattr(write_inside, "_plan", checked_then_planted)


@pytest.mark.parametrize("force", [False, True], ids=["plain", "force"])
@pytest.mark.parametrize("where", ["corpus", "corpus/runbooks"])
def test_a_folder_link_planted_after_the_check_is_never_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, force: bool
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    folder = tmp_path / "team"
    folder.mkdir()
    if where == "corpus/runbooks":
        (folder / "corpus").mkdir()
    plant_after_the_check(monkeypatch, lambda: (folder / where).symlink_to(outside))
    with pytest.raises(
        ComposerError,
        match=rf"^cannot write {folder}/corpus/runbooks/disk-full\.md: a folder on the way "
        "became a symbolic link or a file since the check; not followed$",
    ):
        scaffold(folder, force=force)
    assert outside_tree(outside) == {}
    assert (folder / where).is_symlink()


def test_a_file_link_planted_after_the_check_is_left_or_replaced_never_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "tests.yaml").write_bytes(b"keep me\n")
    folder = tmp_path / "team"
    folder.mkdir()
    link = folder / "tests.yaml"
    plant_after_the_check(monkeypatch, lambda: link.symlink_to(outside / "tests.yaml"))
    with pytest.raises(
        ComposerError,
        match=rf"^cannot write {link}: something was put there since the check",
    ):
        scaffold(folder)
    assert link.is_symlink()  # left as it is
    link.unlink()
    scaffold(folder, force=True)  # planted again after the check, then replaced: the link
    assert not link.is_symlink()
    assert link.read_text() == FILES["tests.yaml"].replace("{team}", "the ops team")
    assert outside_tree(outside) == {"tests.yaml": b"keep me\n"}


def test_a_file_made_after_the_check_is_not_overwritten_without_force(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "team"
    folder.mkdir()
    plant_after_the_check(monkeypatch, lambda: (folder / "dev.yaml").write_text("theirs\n"))
    with pytest.raises(ComposerError, match=r"dev\.yaml: something was put there since"):
        scaffold(folder)
    assert (folder / "dev.yaml").read_text() == "theirs\n"


def test_init_writes_an_audit_log_that_records_the_first_turn(tmp_path: Path) -> None:
    """The scaffold's base manifest has ``runtime.audit`` under the folder, so the first turn
    is in it (what ``serve --console`` and ``composer audit list`` read)."""
    assert offline(tmp_path, "init", "team").returncode == 0
    assert offline(tmp_path, "validate", "team", "--all-envs").returncode == 0
    assert not (tmp_path / "team" / "turns.jsonl").exists()
    previewed = offline(tmp_path, "preview", "team", "--env", "dev", "--instruction", "disk full")
    assert previewed.returncode == 0, previewed.stderr
    listed = offline(tmp_path, "audit", "list", "team/turns.jsonl")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[-1] == "# 1 turn"
    assert "turns.jsonl" in (tmp_path / "team" / ".gitignore").read_text().splitlines()
