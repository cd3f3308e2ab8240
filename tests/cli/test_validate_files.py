"""``composer validate`` checks the files a manifest names on this machine: a corpus root that
is missing or not a folder, a memory file that is missing (unless writeback creates it), an
empty corpus (a warning); each at the line of the field, through the types' ``check`` hook."""

from __future__ import annotations

from pathlib import Path

import pytest
from repofiles import put

from composer.cli import main
from composer.hooks import Check, Problem
from composer.manifest.loader import load_manifest

MANIFEST = """
version: 1
providers:
  - {name: missing, type: file_corpus, root: nowhere}
  - {name: file, type: file_corpus, root: file.txt}
  - {name: empty, type: file_corpus, root: empty}
  - {name: hidden-only, type: file_corpus, root: notes}
  - {name: good, type: file_corpus, root: docs}
  - {name: jsonl, type: memory, source: {jsonl: gone.jsonl}}
  - {name: jsonl-writeback, type: memory, source: {jsonl: new.jsonl}, writeback: true}
  - {name: sqlite, type: memory, source: {sqlite: no/dir/m.sqlite, seed: nope.jsonl}}
  - {name: off, type: file_corpus, root: nowhere, enabled: false}
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "empty").mkdir()
    put(tmp_path / "file.txt", "x\n")
    put(tmp_path / "notes" / ".hidden.md", "# hidden\n")
    put(tmp_path / "docs" / "deep" / "a.md", "# A\n\ntext\n")
    put(tmp_path / "m.yaml", MANIFEST)
    return tmp_path


def test_each_missing_file_is_reported_at_its_field(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", str(folder / "m.yaml")]) == 1
    out, err = capsys.readouterr()
    assert out == ""  # not valid: no summary line
    m = folder / "m.yaml"
    assert err.splitlines() == [
        f'{m}:3:46: provider "missing": root: no such folder: {folder / "nowhere"}',
        f'{m}:4:43: provider "file": root: not a folder: {folder / "file.txt"}',
        f'{m}:5:44: warning: provider "empty": root: empty corpus: no file under '
        f"{folder / 'empty'} matches **/*.md, **/*.txt",
        f'{m}:6:50: warning: provider "hidden-only": root: empty corpus: no file under '
        f"{folder / 'notes'} matches **/*.md, **/*.txt",
        f'{m}:8:49: provider "jsonl": source.jsonl: no such file: {folder / "gone.jsonl"}',
        f'{m}:9:59: warning: provider "jsonl-writeback": source.jsonl: no such file yet '
        f"(writeback creates it): {folder / 'new.jsonl'}",
        f'{m}:10:51: provider "sqlite": source.sqlite: no such folder for the database: '
        f"{folder / 'no' / 'dir'}",
        f'{m}:10:74: provider "sqlite": source.seed: no such file: {folder / "nope.jsonl"}',
    ]


def test_warnings_alone_keep_the_manifest_valid(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(
        folder / "ok.yaml",
        "version: 1\nproviders:\n  - {name: e, type: file_corpus, root: empty}\n",
    )
    assert main(["validate", str(folder / "ok.yaml")]) == 0
    out, err = capsys.readouterr()
    assert 'warning: provider "e": root: empty corpus' in err
    assert out.startswith(f"{folder / 'ok.yaml'}: valid; 1 provider (1 enabled)")


def test_without_variables_a_path_from_an_unset_variable_is_not_judged(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(
        folder / "v.yaml",
        """
        version: 1
        providers:
          - {name: a, type: file_corpus, root: "${CORPUS}"}
          - {name: b, type: file_corpus, root: "${CORPUS:-nowhere}"}
        """,
    )
    assert main(["validate", str(folder / "v.yaml"), "--no-interpolate"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f'{folder / "v.yaml"}:4:40: provider "b": root: no such folder: {folder / "nowhere"}'
    ]


def test_the_hook_is_the_types_own(folder: Path) -> None:
    """The engine knows no type: a config that declares ``check`` is asked, others are not."""
    manifest = load_manifest(folder / "m.yaml", environ={})
    checked = {config.name for config in manifest.providers if isinstance(config, Check)}
    assert checked == {c.name for c in manifest.providers}  # file_corpus and memory declare it
    good = next(c for c in manifest.providers if c.name == "good")
    assert isinstance(good, Check)
    assert good.check() == []
    missing = next(c for c in manifest.providers if c.name == "missing")
    assert isinstance(missing, Check)
    assert missing.check() == [Problem(("root",), f"no such folder: {folder / 'nowhere'}")]


def test_a_corpus_its_caps_would_truncate_is_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """validate says before the first turn what the index would leave out, and why."""
    for i in range(5):
        put(tmp_path / "corpus" / f"f{i}.md", f"# T{i}\n\ntext {i}\n")
    put(
        tmp_path / "m.yaml",
        "version: 1\nproviders:\n  - {name: docs, type: file_corpus, root: corpus, max_files: 2}\n",
    )
    assert main(["validate", str(tmp_path / "m.yaml")]) == 0
    _, err = capsys.readouterr()
    assert "m.yaml:3:" in err
    assert "warning:" in err
    assert "3 files not indexed (3 over max_files)" in err
