"""file_corpus against real files: ranking, chunking, confinement, caps, sharing, refresh."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from builtin_providers._confined import ConfinedReader, GlobSet, SkipFile
from builtin_providers.file_corpus import CorpusIndex, FileCorpusConfig, FileCorpusProvider
from composer.build import ManagedProvider, build_registry, manage
from composer.errors import ProviderError
from composer.manifest import Manifest
from composer.tokens import count_tokens
from composer.turn import Branch, Instruction

RUNBOOK = """# Deploys

Deploys go through the canary stage first, then production.

# Rollback

To roll back, run helm rollback with the previous revision.
"""


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    (root / "runbooks").mkdir(parents=True)
    (root / "runbooks" / "deploy.md").write_text(RUNBOOK)
    (root / "notes.txt").write_text("Lunch is at noon.\n\nThe office dog is called Biscuit.\n")
    return root


def provider(root: Path, **options: object) -> FileCorpusProvider:
    config = FileCorpusConfig(name="docs", root=root, **options)
    return FileCorpusProvider(config, CorpusIndex(config))


async def ask(p: FileCorpusProvider, text: str) -> str | None:
    return await p.provide(Branch("sys"), Instruction(text))


async def test_best_passage_with_path_and_heading(corpus: Path) -> None:
    block = await ask(provider(corpus, top_k=1), "how do I roll back a release?")
    assert block == (
        "[runbooks/deploy.md > Rollback]\n"
        "To roll back, run helm rollback with the previous revision.\n"
    )


async def test_template_sees_path_heading_text_score_and_query(corpus: Path) -> None:
    p = provider(
        corpus,
        top_k=5,
        template="{{ query }}|{% for h in hits %}{{ h.path }};{{ h.heading }};"
        "{{ h.text[:6] }};{{ h.score > 0 }}|{% endfor %}",
    )
    assert await ask(p, "canary") == "canary|runbooks/deploy.md;Deploys;Deploy;True|"


async def test_empty_query_and_no_hit_give_none(corpus: Path) -> None:
    p = provider(corpus)
    assert await ask(p, "   ") is None
    assert await ask(p, "the a of") is None  # only stop words
    assert await ask(p, "kubernetes zebra") is None


async def test_min_score_and_top_k(corpus: Path) -> None:
    assert await ask(provider(corpus, min_score=1000.0), "rollback") is None
    block = await ask(provider(corpus, top_k=2), "the dog runs deploys")
    assert block is not None
    assert block.count("[") == 2


async def test_query_template(corpus: Path) -> None:
    p = provider(corpus, query="{{ branch.metadata.topic }}")
    block = await p.provide(Branch("s", metadata={"topic": "Biscuit"}), Instruction("hi"))
    assert block is not None
    assert "notes.txt" in block


async def test_when_false_does_no_work(corpus: Path) -> None:
    """The engine's guard keeps a corpus provider from even building its index."""
    p = provider(corpus, when="'deploy' in instruction.text")
    guarded = manage(p, p.config)
    assert await guarded.provide(Branch("sys"), Instruction("rollback")) is None
    assert p.index.stats is None  # never built
    assert await guarded.provide(Branch("sys"), Instruction("deploy rollback")) is not None


async def test_include_exclude_and_hidden_files(corpus: Path) -> None:
    (corpus / ".env").write_text("TOKEN=hunter2 rollback")
    (corpus / ".git").mkdir()
    (corpus / ".git" / "notes.md").write_text("rollback hunter2")
    (corpus / "drafts").mkdir()
    (corpus / "drafts" / "old.md").write_text("rollback draft")
    p = provider(corpus, top_k=10, exclude=["**/.*", "**/.*/**", "drafts/**"])
    block = await ask(p, "rollback hunter2 draft")
    assert block is not None
    assert "hunter2" not in block
    assert "draft" not in block
    only_txt = provider(corpus, include=["*.txt"], top_k=10)
    assert await ask(only_txt, "rollback") is None


def test_globs() -> None:
    globs = GlobSet(["**/*.md", "top.txt", "a/?.rst", "[ab]*.log"], ["skip/**", "**/x.md"])
    assert globs.matches("r.md")
    assert globs.matches("a/b/c.md")
    assert globs.matches("top.txt")
    assert not globs.matches("a/top.txt")
    assert globs.matches("a/z.rst")
    assert not globs.matches("a/zz.rst")
    assert globs.matches("b1.log")
    assert not globs.matches("c1.log")
    assert not globs.matches("skip/a.md")
    assert not globs.matches("deep/x.md")
    assert globs.prunes("skip")
    assert not globs.prunes("skipper")


async def test_symlinks_fifo_binary_and_undecodable_are_skipped(
    corpus: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("rollback password is swordfish")
    os.symlink(outside / "secret.md", corpus / "escape.md")
    os.symlink(outside, corpus / "escape_dir")
    os.mkfifo(corpus / "pipe.md")
    (corpus / "image.md").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0rollback")
    (corpus / "latin1.md").write_bytes("rollback caf\xe9".encode("latin-1"))
    p = provider(corpus, top_k=10)
    with caplog.at_level(logging.WARNING):
        block = await ask(p, "rollback swordfish")
    assert block is not None
    assert "swordfish" not in block
    stats = p.index.stats
    assert stats is not None
    assert stats.files == 2
    assert stats.skipped.symlinks == 2
    assert stats.skipped.not_regular == 1
    assert stats.skipped.undecodable == 2
    assert "image.md" in caplog.text
    assert "latin1.md" in caplog.text


def test_confined_reader_refuses_escapes(corpus: Path, tmp_path: Path) -> None:
    (tmp_path / "secret.md").write_text("swordfish")
    os.symlink(tmp_path / "secret.md", corpus / "link.md")
    os.mkfifo(corpus / "pipe.md")
    reader = ConfinedReader(corpus)
    with pytest.raises(SkipFile) as outside:
        reader.read("../secret.md", 1000)
    assert outside.value.reason == "outside_root"
    with pytest.raises(SkipFile) as link:
        reader.read("link.md", 1000)
    assert link.value.reason in ("outside_root", "symlinks")
    with pytest.raises(SkipFile) as fifo:
        reader.read("pipe.md", 1000)  # opened non-blocking, refused by fstat: no hang
    assert fifo.value.reason == "not_regular"
    with pytest.raises(SkipFile) as big:
        reader.read("notes.txt", 10)
    assert big.value.reason == "too_large"
    assert reader.read("notes.txt", 1000).startswith(b"Lunch")


async def test_size_and_count_caps(corpus: Path) -> None:
    for i in range(5):
        (corpus / f"extra{i}.md").write_text(f"extra file {i} rollback")
    (corpus / "huge.md").write_text("rollback " * 1000)
    p = provider(corpus, max_file_bytes=2000, max_files=4, top_k=10)
    await ask(p, "rollback")
    stats = p.index.stats
    assert stats is not None
    assert stats.skipped.over_file_count == 4  # 8 candidates, 4 indexed
    capped = provider(corpus, max_total_bytes=100, top_k=10)
    await ask(capped, "rollback")
    assert capped.index.stats is not None
    assert capped.index.stats.bytes <= 100
    assert capped.index.stats.skipped.over_total_bytes > 0


@pytest.mark.parametrize("chunk_by", ["heading", "paragraph"])
async def test_passages_never_exceed_chunk_tokens(tmp_path: Path, chunk_by: str) -> None:
    long_paragraph = " ".join(f"word{i}" for i in range(3000))
    (tmp_path / "long.md").write_text(
        f"# One\n\n{long_paragraph}\n\nshort tail\n\n# Two\n\n" + "x" * 9000 + "\n"
    )
    p = provider(tmp_path, chunk_by=chunk_by, chunk_tokens=64)
    stats = await p.warm_up()
    assert stats.passages > 10
    snapshot = p.index._snapshot
    assert snapshot is not None
    assert all(count_tokens(x.text) <= 64 for x in snapshot.passages)
    assert {x.heading for x in snapshot.passages} == {"One", "Two"}
    joined = " ".join(x.text for x in snapshot.passages if x.heading == "One")
    assert joined.split() == [*long_paragraph.split(), "short", "tail"]


async def test_paragraph_mode_keeps_paragraphs_apart(corpus: Path) -> None:
    p = provider(corpus, chunk_by="paragraph", top_k=1)
    assert await ask(p, "Biscuit") == "[notes.txt]\nThe office dog is called Biscuit.\n"


async def test_missing_root_fails_the_provider(tmp_path: Path) -> None:
    with pytest.raises(ProviderError, match="corpus root"):
        await ask(provider(tmp_path / "nope"), "rollback")


async def test_refresh_picks_up_changes_in_the_background(corpus: Path) -> None:
    """A turn that finds the files due for a check is served by the index there is; the
    refresh it started shows the change to the turns after it."""
    eager = provider(corpus, refresh_s=0)
    lazy = provider(corpus, refresh_s=3600)
    assert await ask(eager, "zeppelin") is None
    assert await ask(lazy, "zeppelin") is None
    (corpus / "new.md").write_text("# Airships\n\nThe zeppelin lands at dawn.\n")
    await ask(eager, "zeppelin")  # served at once; starts the refresh
    eager.index.join(timeout=30)
    assert await ask(eager, "zeppelin") == "[new.md > Airships]\nThe zeppelin lands at dawn.\n"
    assert await ask(lazy, "zeppelin") is None  # not checked again yet
    lazy.index.join(timeout=30)
    assert await ask(lazy, "zeppelin") is None
    (corpus / "new.md").unlink()
    await ask(eager, "zeppelin")
    eager.index.join(timeout=30)
    assert await ask(eager, "zeppelin") is None


def index_of(managed: ManagedProvider) -> CorpusIndex:
    assert isinstance(managed.provider, FileCorpusProvider)
    return managed.provider.index


async def test_index_is_shared_between_registries_of_one_manifest(corpus: Path) -> None:
    manifest = Manifest(
        version=1,
        providers=[
            FileCorpusConfig(name="a", root=corpus),
            FileCorpusConfig(name="b", root=corpus, top_k=1),
        ],
    )
    first, second = build_registry(manifest), build_registry(manifest)
    indexes = {id(index_of(m)) for m in first.managed + second.managed}
    assert len(indexes) == 1
    other = build_registry(Manifest(version=1, providers=[FileCorpusConfig(name="a", root=corpus)]))
    assert index_of(other.managed[0]) is not index_of(first.managed[0])


async def test_progress_callback(corpus: Path) -> None:
    seen: list[tuple[int, int]] = []
    p = provider(corpus)
    stats = await p.warm_up(lambda done, total: seen.append((done, total)))
    assert seen == [(1, 2), (2, 2)]
    assert stats.files == 2


def test_repr_names_the_root(corpus: Path) -> None:
    assert repr(provider(corpus)) == f"<FileCorpusProvider 'docs' root={str(corpus)!r}>"
