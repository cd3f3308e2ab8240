"""A command names files as it was given its own: relative to the working directory when the
manifest was named relatively (never one absolute path among relative ones), absolute when
it was named absolutely."""

from __future__ import annotations

from pathlib import Path

import pytest

from composer.cli.main import main
from composer.cli.output import relative_paths

MANIFEST = """\
version: 1
providers:
  - {name: missing, type: file_corpus, root: nowhere}
  - {name: jsonl, type: memory, source: {jsonl: gone.jsonl}}
"""


@pytest.fixture
def manifest(tmp_path: Path) -> Path:
    """``v/m.yaml`` under the working directory (the test's ``tmp_path``)."""
    (tmp_path / "v").mkdir()
    path = tmp_path / "v" / "m.yaml"
    path.write_text(MANIFEST)
    assert Path.cwd() == tmp_path
    return path


def test_validate_given_a_relative_path_names_every_file_relatively(
    manifest: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", "v/m.yaml"]) == 1
    err = capsys.readouterr().err
    assert str(tmp_path) not in err
    assert err.splitlines() == [
        'v/m.yaml:3:46: provider "missing": root: no such folder: v/nowhere',
        'v/m.yaml:4:49: provider "jsonl": source.jsonl: no such file: v/gone.jsonl',
    ]


def test_validate_given_an_absolute_path_names_every_file_absolutely(
    manifest: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", str(manifest)]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == f'{manifest}:3:46: provider "missing": root: no such folder: ' + str(
        manifest.parent / "nowhere"
    )


def test_a_preview_s_failures_name_files_as_the_manifest_was_named(
    manifest: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["preview", "v/m.yaml", "--instruction", "x"]) == 0
    out = capsys.readouterr().out
    assert "corpus root v/nowhere: " in out
    assert str(tmp_path) not in out


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("no such folder: /w/d/v/x", "no such folder: v/x"),
        ('"/w/d/q.yaml"', '"q.yaml"'),
        ("under /w/d matches", "under . matches"),
        ("/w/dx/a and /x/w/d/a", "/w/dx/a and /x/w/d/a"),  # not under it; not a path's tail
        ("/w/d/ alone", "/w/d/ alone"),
    ],
)
def test_only_paths_under_the_directory_are_made_relative(text: str, expected: str) -> None:
    assert relative_paths(text, "/w/d") == expected
