"""Passages of a Markdown file: cut at the headings a CommonMark parser sees, code kept whole."""

from __future__ import annotations

import random

import pytest

from builtin_providers import _chunking
from builtin_providers._chunking import Passage, split_passages


def passages(text: str, chunk_tokens: int = 300) -> list[tuple[str | None, str]]:
    return [(p.heading, p.text) for p in split_passages("a.md", text, "heading", chunk_tokens)]


def test_setext_headings_start_sections() -> None:
    text = "Intro.\n\nDeploys\n=======\n\nCanary first.\n\nRollback\n--------\nHelm rollback.\n"
    assert passages(text) == [
        ("Deploys", "Intro."),  # before any heading: the file's title, its first H1
        ("Deploys", "Canary first."),
        ("Deploys > Rollback", "Helm rollback."),
    ]


def test_atx_headings_lose_their_closing_hashes() -> None:
    assert passages("## Deploys ##\n\nCanary first.\n") == [("a > Deploys", "Canary first.")]


def test_a_passage_carries_the_path_of_headings_from_the_title() -> None:
    """H1 title, then sections: each passage names the title and its enclosing headings; a
    file without an H1 is titled by its name."""
    text = (
        "# PostgreSQL disk almost full\n\n## Symptoms\nAlert fires.\n\n### On replicas\n"
        "WAL piles up.\n\n## Fix\nVacuum.\n"
    )
    assert passages(text) == [
        ("PostgreSQL disk almost full > Symptoms", "Alert fires."),
        ("PostgreSQL disk almost full > Symptoms > On replicas", "WAL piles up."),
        ("PostgreSQL disk almost full > Fix", "Vacuum."),
    ]
    found = split_passages("runbooks/pg-disk.md", "## Fix\nVacuum.\n", "heading", 300)
    assert [p.heading for p in found] == ["pg-disk > Fix"]


def test_a_heading_inside_fenced_code_is_code() -> None:
    text = "# Build\n\n```sh\n# not a heading\n\nmake\n```\n\n~~~\nTitle\n=====\n~~~\n"
    assert passages(text) == [
        ("Build", "```sh\n# not a heading\n\nmake\n```\n\n~~~\nTitle\n=====\n~~~"),
    ]


def test_a_heading_inside_indented_code_is_code() -> None:
    text = "# Shell\n\nRun:\n\n    # comment, not a heading\n    make\n"
    assert passages(text) == [("Shell", "Run:\n\n    # comment, not a heading\n    make")]


def test_a_rule_after_a_blank_line_is_no_heading() -> None:
    assert passages("# Top\n\nOne.\n\n---\n\nTwo.\n") == [("Top", "One.\n\n---\n\nTwo.")]


def test_windows_line_ends_are_read_like_unix_ones() -> None:
    assert passages("Title\r\n=====\r\n\r\nBody.\r\n") == [("Title", "Body.")]


def test_multi_line_setext_title_is_one_line() -> None:
    assert passages("Deploys and\nrollbacks\n=====\n\nBody.\n") == [
        ("Deploys and rollbacks", "Body.")
    ]


def test_paragraph_mode_cuts_at_every_blank_line() -> None:
    found = split_passages("a.md", "Title\n=====\n\nOne.\n\nTwo.\n", "paragraph", 300)
    assert found == [
        Passage("a.md", "Title", "One.", "Title"),
        Passage("a.md", "Title", "Two.", "Title"),
    ]


@pytest.mark.parametrize("chunk_by", ["heading", "paragraph"])
def test_passages_cut_without_counting_are_those_counting_everything_cuts(
    chunk_by: _chunking.ChunkBy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A text whose UTF-8 length is within ``chunk_tokens`` is not tokenized (a token is at
    least one byte); the passages are exactly those of counting every paragraph, line and run,
    including text of many bytes a character and runs that fit only by exact counts."""
    rng = random.Random(11)
    alphabet = ["alpha", "beta", "日本語", "😀", "é", "x" * 30, "  ", "<|endoftext|>", "12 345"]

    def paragraph() -> str:
        lines = [" ".join(rng.choices(alphabet, k=rng.randint(1, 40))) for _ in range(3)]
        return "\n".join(lines[: rng.randint(1, 3)])

    texts = [
        "\n\n".join(
            f"## Part {s}\n\n" + "\n\n".join(paragraph() for _ in range(rng.randint(1, 5)))
            for s in range(rng.randint(1, 4))
        )
        for _ in range(40)
    ]
    bounded = {
        (t, n): split_passages("a.md", t, chunk_by, n) for t in texts for n in (16, 40, 120, 400)
    }
    monkeypatch.setattr(_chunking, "_bound", lambda text: 1 << 30)  # count everything
    for (text, chunk_tokens), found in bounded.items():
        assert found == split_passages("a.md", text, chunk_by, chunk_tokens)


def test_headings_of_plain_text_are_those_the_parser_finds() -> None:
    """Text of paragraphs and ATX headings alone is not parsed: its headings are read line by
    line, and they are exactly those markdown-it-py finds (levels, closing runs, spacing)."""
    rng = random.Random(12)
    lines = [
        "# Title",
        "## Closed ##",
        "### Text#",
        "#hashtag",
        "####### seven",
        "   # indented",
        "# ###",
        "#",
        "##   ",
        "# a \t## ",
        "#\tTabbed",
        "###### six ######x",
        "# a \\#",
        "Just text",
        "",
        "   ",
        "2 servers",
        "é # not",
        "\x0c# formfeed",
        "# x  #  ",
        "#  #",
        "text # trailing ##",
        "  ## two spaces ##  ",
        "# ☃ snow ☃ #",
    ]
    plain = 0
    for _ in range(400):
        source = "\n".join(rng.choices(lines, k=rng.randint(1, 12)))
        if _chunking._NOT_PLAIN.search(source) is not None:
            continue
        plain += 1
        headings, verbatim = _chunking._parsed_blocks(source)
        assert _chunking._plain_headings(source.split("\n")) == headings, source
        assert verbatim == {}
    assert plain == 400  # none of these lines opens another block
    for line in (
        "- item",
        "> quote",
        "1. one",
        "    code",
        "\tcode",
        "```",
        "<div>",
        "[a]: b",
        "===",
    ):
        assert _chunking._NOT_PLAIN.search(f"Text\n{line}\n# Heading") is not None
