"""``composer diff`` of one environment across two folders or two git revisions: what a pull
request changes in the effective manifest, with the file:line:col on each side."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from repofiles import CONFIGS, location, put

from composer.cli import main


def git(repo: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        check=True,
        env={
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@example.com",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@example.com",
            "GIT_CONFIG_GLOBAL": "/dev/null",
            "GIT_CONFIG_NOSYSTEM": "1",
            "HOME": str(repo),
            "PATH": "/usr/bin:/bin:/usr/local/bin",
        },
    )
    return result.stdout


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repository holding a copy of configs/ in two commits: prod's runbooks cap raised
    from 800 to 900 in the second; a third, uncommitted change in the working tree."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    root = tmp_path / "repo"
    shutil.copytree(CONFIGS, root / "configs", ignore=shutil.ignore_patterns("*.sqlite*"))
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "configs")
    git(root, "commit", "-q", "-m", "first")
    prod = root / "configs" / "prod.yaml"
    prod.write_text(prod.read_text().replace("max_tokens: 800", "max_tokens: 900"))
    git(root, "commit", "-q", "-am", "raise the runbooks cap")
    monkeypatch.chdir(root)
    return root


def line_of(path: Path, needle: str, value: str) -> str:
    """``line:col`` of ``value`` on the first line of ``path`` holding ``needle``."""
    return location(path, needle, value).removeprefix(f"{path}:")


def test_two_revisions_list_the_changed_cap_with_both_origins(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["diff", "configs", "--rev", "HEAD~1..HEAD", "--env", "prod", "--no-interpolate"]
    assert main([*args, "--exit-code"]) == 1
    out, err = capsys.readouterr()
    assert err == ""
    where = line_of(repo / "configs" / "prod.yaml", "max_tokens:", "9")
    assert out.splitlines() == [
        "# HEAD~1 -> HEAD (env prod): 1 difference",
        "~ providers.runbooks.max_tokens: 800 -> 900"
        f"  # HEAD~1:configs/prod.yaml:{where} -> HEAD:configs/prod.yaml:{where}",
    ]
    assert main(args) == 0  # without --exit-code a difference is no failure
    capsys.readouterr()


def test_a_revision_against_the_working_tree(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = repo / "configs" / "base.yaml"
    base.write_text(base.read_text().replace("budget: 1200", "budget: 1300"))
    assert main(["diff", "configs", "--rev", "HEAD", "--env", "dev", "--exit-code"]) == 1
    out = capsys.readouterr().out.splitlines()
    where = line_of(base, "budget:", "1")
    assert out == [
        "# HEAD -> working tree (env dev): 1 difference",
        f"~ budget: 1200 -> 1300  # HEAD:configs/base.yaml:{where} -> configs/base.yaml:{where}",
    ]
    assert main(["diff", "configs", "--rev", "HEAD~1..", "--env", "dev", "--exit-code"]) == 0
    assert capsys.readouterr().out == "# HEAD~1 -> HEAD (env dev): 0 differences\n"


def test_two_folders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    put(
        tmp_path / "old/prod.yaml", "version: 1\nproviders:\n  - {name: a, type: static, text: x}\n"
    )
    put(
        tmp_path / "new/prod.yaml",
        """
        version: 1
        providers:
          - {name: b, type: static, text: y}
          - {name: a, type: static, text: x, max_tokens: 5}
        """,
    )
    assert main(["diff", "old", "new", "--env", "prod", "--exit-code"]) == 1
    assert capsys.readouterr().out.splitlines() == [
        "# old -> new (env prod): 2 differences",
        "~ providers.a.max_tokens: null -> 5  # default -> new/prod.yaml:4:50",
        "+ providers.b: type static, priority 0  # new/prod.yaml:3:5",
    ]


def test_a_move_is_a_change_of_order(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Blocks render in declaration order, so swapping two providers changes the text."""
    put(
        tmp_path / "a.yaml",
        "version: 1\nproviders:\n  - {name: x, type: static, text: x}\n  - {name: y, type: static, text: y}\n",
    )
    put(
        tmp_path / "b.yaml",
        "version: 1\nproviders:\n  - {name: y, type: static, text: y}\n  - {name: x, type: static, text: x}\n",
    )
    assert main(["diff", "a.yaml", "b.yaml", "--exit-code"]) == 1
    assert capsys.readouterr().out.splitlines() == [
        "# a.yaml -> b.yaml: 1 difference",
        "~ providers (order): x, y -> y, x",
    ]


def test_a_side_that_does_not_load_is_exit_2_with_exit_code(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prod = repo / "configs" / "prod.yaml"
    prod.write_text(prod.read_text().replace("top_k: 3", "top_kk: 3"))
    args = ["diff", "configs", "--rev", "HEAD", "--env", "prod", "--no-interpolate"]
    assert main([*args, "--exit-code"]) == 2
    err = capsys.readouterr().err
    assert f"configs/prod.yaml:{line_of(prod, 'top_kk', 't')}: " in err
    assert 'unknown key "top_kk"' in err
    assert main(args) == 1


def test_an_unknown_revision_is_an_error(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", "configs", "--rev", "nope..HEAD", "--env", "prod"]) == 1
    assert capsys.readouterr().err.startswith("composer diff: git archive: ")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["a", "b", "--env", "x", "--env", "y"], "compare one environment"),
        (["a", "b", "--rev", "HEAD"], "give NEW or --rev, not both"),
        (["a", "--rev", "..HEAD"], "expected A..B"),
    ],
)
def test_usage_errors(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", *args]) in (1, 2)
    assert message in capsys.readouterr().err


def test_a_revision_reads_the_working_trees_env_and_says_so(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``configs/.env`` is gitignored, so no revision has it: without it prod's
    ``${STATUS_TOKEN}`` would be "not set" at each revision; the working tree's is read for
    both, and the output says so."""
    put(repo / ".gitignore", ".env\n")
    put(repo / "configs" / ".env", "STATUS_TOKEN=tok-from-the-working-tree\n")
    args = ["diff", "configs", "--rev", "HEAD~1..HEAD", "--env", "prod", "--exit-code"]
    assert main(args) == 1
    out, err = capsys.readouterr()
    assert err == ""
    note = (
        "no configs/.env at {rev} (not committed): "
        "its variables are read from the working tree's configs/.env"
    )
    lines = out.splitlines()
    assert lines[:3] == [
        "# HEAD~1 -> HEAD (env prod): 1 difference",
        "# " + note.format(rev="HEAD~1"),
        "# " + note.format(rev="HEAD"),
    ]
    assert lines[3].startswith("~ providers.runbooks.max_tokens: 800 -> 900")
    assert "tok-from-the-working-tree" not in out
    assert main(["diff", "configs", "--rev", "HEAD", "--env", "prod"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "# HEAD -> working tree (env prod): 0 differences",
        "# " + note.format(rev="HEAD"),
    ]
    assert main([*args, "--no-interpolate"]) == 1  # no variable read: nothing to say
    assert not any("configs/.env" in line for line in capsys.readouterr().out.splitlines())


def test_an_env_committed_at_the_revision_is_that_revisions(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """HEAD's committed ``.env`` sets the token; the working tree's no longer does, so only
    the working tree's side misses it."""
    dotenv = put(repo / "configs" / ".env", "STATUS_TOKEN=t\n")
    git(repo, "add", "configs/.env")
    git(repo, "commit", "-q", "-m", "a committed .env")
    dotenv.write_text("OTHER=1\n")
    assert main(["diff", "configs", "--rev", "HEAD", "--env", "prod"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert [line.split(":", 1)[0] for line in err.splitlines()] == ["configs/prod.yaml"]
    assert 'environment variable "STATUS_TOKEN" is not set' in err


def test_a_working_tree_env_that_is_no_file_is_refused_not_waited_on(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A FIFO in the ``.env``'s place would block a plain read until a writer came."""
    os.mkfifo(repo / "configs" / ".env")
    assert main(["diff", "configs", "--rev", "HEAD~1..HEAD", "--env", "prod"]) == 1
    err = capsys.readouterr().err
    assert err.startswith('composer diff: .env file "')
    assert "not a regular file" in err
