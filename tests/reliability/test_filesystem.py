"""file_corpus against a hostile folder: hard links, folders swapped mid-walk, bad globs."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError
from repofiles import put

from builtin_providers._confined import ConfinedReader, Glob, GlobSet, SkipFile, WalkStats
from builtin_providers.file_corpus import CorpusIndex, FileCorpusConfig
from composer.cli import main
from composer.errors import ManifestError
from composer.manifest.loader import load_manifest

SECRET = "swordfish"
NAMES = [f"note{i}.md" for i in range(10)]  # in root/sub and, the same names, in outside/


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder next to the corpus root holding a file the corpus must never serve."""
    folder = tmp_path / "outside"
    folder.mkdir()
    for name in NAMES:
        (folder / name).write_text(f"# Secret\n\nThe rollback password is {SECRET}.\n")
    return folder


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "corpus"
    (folder / "sub").mkdir(parents=True)
    for name in NAMES:
        (folder / "sub" / name).write_text("# Rollback\n\nRoll back with helm rollback.\n")
    (folder / "top.md").write_text("# Deploys\n\nDeploys go through the canary stage.\n")
    return folder


def index(root: Path, **options: object) -> CorpusIndex:
    return CorpusIndex(FileCorpusConfig(name="docs", root=root, **options))


def indexed_text(corpus: CorpusIndex) -> str:
    snapshot = corpus._snapshot
    assert snapshot is not None
    return "\n".join(passage.text for passage in snapshot.passages)


# -- hard links


def test_a_hard_link_to_an_outside_file_is_skipped_and_counted(root: Path, outside: Path) -> None:
    os.link(outside / "note0.md", root / "linked.md")
    corpus = index(root)
    stats = corpus.refresh()
    assert SECRET not in indexed_text(corpus)
    assert stats.files == 1 + len(NAMES)
    assert stats.skipped.hard_links == 1
    assert stats.skipped.examples["hard_links"] == "linked.md"
    assert corpus.search(SECRET, 5) == []


def test_hard_links_are_served_when_the_manifest_opts_in(root: Path, outside: Path) -> None:
    os.link(outside / "note0.md", root / "linked.md")
    corpus = index(root, allow_hard_links=True)
    stats = corpus.refresh()
    assert SECRET in indexed_text(corpus)
    assert stats.skipped.hard_links == 0


def test_a_hard_link_made_after_the_walk_is_refused_at_read(root: Path, outside: Path) -> None:
    """The read checks the link count again: a file linked after the walk is still refused."""
    reader = ConfinedReader(root)
    assert reader.read("sub/note0.md", 1000).startswith(b"# Rollback")
    (root / "sub" / "note0.md").unlink()
    os.link(outside / "note0.md", root / "sub" / "note0.md")
    with pytest.raises(SkipFile) as skipped:
        reader.read("sub/note0.md", 1000)
    assert skipped.value.reason == "hard_links"
    assert (
        ConfinedReader(root, allow_hard_links=True)
        .read("sub/note0.md", 1000)
        .endswith(f"{SECRET}.\n".encode())
    )


# -- folders swapped for symlinks


def test_reading_through_a_symlinked_folder_is_refused(root: Path, outside: Path) -> None:
    reader = ConfinedReader(root)
    (root / "sub").rename(root.parent / "parked")
    os.symlink(outside, root / "sub")
    with pytest.raises(SkipFile) as skipped:
        reader.read("sub/note0.md", 1000)
    assert skipped.value.reason == "symlinks"
    stats = WalkStats()
    assert [path for path, _ in reader.walk(GlobSet(["**/*.md"], []), stats)] == ["top.md"]
    assert stats.symlinks == 1


@pytest.fixture
def swapping(root: Path, outside: Path) -> Iterator[threading.Event]:
    """A thread that swaps ``root/sub`` for a symlink to ``outside`` and back, until stopped.

    Yields an event that is set once the thread has swapped at least a few times.
    """
    stop, swapped = threading.Event(), threading.Event()
    failures: list[OSError] = []
    sub, parked, link = root / "sub", root.parent / "parked", root / "sub.link"

    def swap() -> None:
        count = 0
        try:
            while not stop.is_set():
                sub.rename(parked)  # the real folder leaves the root ...
                os.symlink(outside, link)
                link.replace(sub)  # ... and a symlink to the outside folder takes its name
                time.sleep(0.0002)  # hold each state a moment, so that the walk meets both
                sub.unlink()
                parked.rename(sub)
                time.sleep(0.0002)
                count += 1
                if count == 20:
                    swapped.set()
        except OSError as e:
            failures.append(e)

    thread = threading.Thread(target=swap, daemon=True)
    thread.start()
    try:
        yield swapped
    finally:
        stop.set()
        thread.join(timeout=10)
    assert not failures


def test_a_folder_swapped_for_a_symlink_during_rebuilds_never_lets_outside_in(
    root: Path, swapping: threading.Event
) -> None:
    """Many forced rebuilds race a folder<->symlink swap; no snapshot ever holds outside text."""
    corpus = index(root)
    reader = ConfinedReader(root)
    assert swapping.wait(timeout=10)
    deadline = time.monotonic() + 4
    rebuilds = 0
    while rebuilds < 200 and time.monotonic() < deadline:
        corpus.refresh(force=True)
        assert SECRET not in indexed_text(corpus), f"outside text indexed on rebuild {rebuilds}"
        with contextlib.suppress(SkipFile):  # refused (a link, or gone mid-swap) is fine too
            assert SECRET.encode() not in reader.read("sub/note0.md", 1000)
        rebuilds += 1
    assert rebuilds >= 20


# -- globs


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("[z-a].md", "bad range z-a"),
        ("docs/[9-0]*.txt", "bad range 9-0"),
        ("**.md", "'\\*\\*' must be a whole path segment"),
        ("docs/**notes/*.md", "'\\*\\*' must be a whole path segment"),
        ("", "empty path segment"),
        ("/abs/*.md", "empty path segment"),
        ("docs//*.md", "empty path segment"),
        ("drafts/", "empty path segment"),
    ],
)
def test_a_bad_glob_is_a_validation_error(pattern: str, message: str) -> None:
    for field in ("include", "exclude"):
        with pytest.raises(ValidationError, match=message):
            FileCorpusConfig(name="docs", root=Path("."), **{field: [pattern]})


def test_a_bad_glob_in_a_manifest_is_a_located_error(tmp_path: Path) -> None:
    (tmp_path / "corpus").mkdir()
    manifest = put(
        tmp_path / "m.yaml",
        """
        version: 1
        providers:
          - name: docs
            type: file_corpus
            root: corpus
            include: ['**/*.md', '[z-a].md']
        """,
    )
    with pytest.raises(ManifestError, match="bad range z-a") as caught:
        load_manifest(manifest, environ={})
    assert caught.value.line == 6


def test_preview_with_a_bad_glob_fails_cleanly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "corpus").mkdir()
    manifest = put(
        tmp_path / "m.yaml",
        """
        version: 1
        providers:
          - {name: docs, type: file_corpus, root: corpus, include: ['[z-a].md']}
        """,
    )
    assert main(["preview", str(manifest), "--instruction", "rollback"]) != 0
    _, err = capsys.readouterr()
    assert "bad range z-a" in err
    assert "Traceback" not in err


def test_globs_keep_their_meaning() -> None:
    globs = GlobSet(
        ["**/*.md", "a/**/b/*.txt", "x/**", "[!.]*.rst", "[]]*.log"],
        ["**/.*", "**/.*/**", "a/**/skip/**"],
    )
    for path in ("r.md", "a/b/c.md", "a/b/k.txt", "a/q/r/b/k.txt", "x/y", "x/y/z", "u.rst"):
        assert globs.matches(path), path
    for path in ("x", "a/k.txt", "a/b/c/k.txt", ".env", "d/.git/x.md", ".u.rst", "a/skip/n.md"):
        assert not globs.matches(path), path
    assert globs.matches("]1.log")
    assert globs.prunes(".git")
    assert globs.prunes("a/b/skip")
    assert not globs.prunes("a")
    assert Glob("**/x").matches("x")
    assert Glob("**/**/x").matches("a/x")
    assert Glob("**").matches("a/b")
    assert Glob("a*b").matches("a\nb")  # names may hold any character but '/'
    assert not Glob("a?b").matches("a/b")
    assert not Glob("a[!x]b").matches("a/b")


MANY_STARS = "**/" * 12 + "x.md"
DEEP = "/".join(["d"] * 26) + "/y.md"


def test_many_double_stars_keep_their_meaning_on_a_deep_path() -> None:
    assert Glob("/".join(["**/d"] * 12) + "/**/*.md").matches(DEEP)
    assert Glob(MANY_STARS).matches(DEEP.replace("y.md", "x.md"))
    assert not Glob("**/*a*a*b/*.md").matches("a" * 250 + "/y.md")


def test_matching_and_indexing_never_backtrack_for_ages(tmp_path: Path) -> None:
    """Twelve ``**/`` against 26 folders, ten stars in a segment: as regexes these backtrack
    for hours; run in a child process that is killed if it runs away."""
    deep = tmp_path / "corpus" / DEEP
    deep.parent.mkdir(parents=True)
    deep.write_text("deep rollback notes")
    (deep.parent / "x.md").write_text("the deep x file")
    script = f"""
import sys
from builtin_providers._confined import Glob
from builtin_providers.file_corpus import CorpusIndex, FileCorpusConfig
assert not Glob({MANY_STARS!r}).matches({DEEP!r})
assert not Glob("**/*a*a*a*a*a*a*a*a*a*a*b/**/*.md").matches("a" * 250 + "/" + {DEEP!r})
config = FileCorpusConfig(name="d", root=sys.argv[1], include=[{MANY_STARS!r}])
print(CorpusIndex(config).refresh().files)
"""
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "corpus")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.strip() == "1"
