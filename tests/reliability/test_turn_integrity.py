"""Hostile text and broken plugins cannot break a turn's budget or take the turn down.

Special-token strings (``<|endoftext|>``) in a block used to make the tokenizer raise, the
count become 0 and any amount of text pass a cap and the budget. A provider built from a
manifest that returns something other than ``str | None`` used to crash the whole turn.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any, Literal

import pytest

import composer
from builtin_providers.file_corpus import provider_type as corpus_type
from builtin_providers.static import provider_type as static_type
from composer.catalog import ProviderTypes
from composer.plugin import ProviderConfig, ProviderType

BOMB = "<|endoftext|>" * 6000  # 78,000 characters


def load(tmp_path: Path, body: str, *extra: ProviderType[Any]) -> composer.Manifest:
    path = tmp_path / "m.yaml"
    path.write_text(textwrap.dedent(body).lstrip(), encoding="utf-8")
    return composer.load_manifest(path, types=ProviderTypes([static_type, corpus_type, *extra]))


async def turn(manifest: composer.Manifest, text: str) -> composer.PreparedTurn:
    branch = composer.Branch("sys\n")
    composer.attach(branch, manifest)
    return await composer.prepare_turn(branch, composer.Instruction(text))


async def test_special_token_text_from_the_user_obeys_the_cap(tmp_path: Path) -> None:
    manifest = load(
        tmp_path,
        """
        version: 1
        providers:
          - {name: echo, type: static, text: "{{ instruction.text }}", max_tokens: 200}
        """,
    )
    prepared = await turn(manifest, BOMB)
    assert prepared.report is not None
    assert prepared.report.skipped == ["echo"]
    assert prepared.guidance == "sys\n"


async def test_special_token_text_obeys_the_budget(tmp_path: Path) -> None:
    manifest = load(
        tmp_path,
        """
        version: 1
        budget: 50
        providers:
          - {name: echo, type: static, text: "{{ instruction.text }}"}
          - {name: small, type: static, text: "fits"}
        """,
    )
    prepared = await turn(manifest, BOMB)
    assert prepared.report is not None
    assert prepared.report.skipped == ["echo"]
    assert prepared.report.fired == [{"provider_name": "small", "tokens": 1}]


async def test_special_token_text_in_a_corpus_file_is_counted_by_its_size(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.md").write_text("# Deploy\n\ndeploy " + "<|endoftext|> " * 500, encoding="utf-8")
    manifest = load(
        tmp_path,
        """
        version: 1
        providers:
          - {name: docs, type: file_corpus, root: corpus, max_tokens: 100, chunk_tokens: 8192,
             fit: false}
        """,
    )
    prepared = await turn(manifest, "deploy")
    assert prepared.report is not None
    assert prepared.report.skipped == ["docs"]
    assert prepared.report.fired == []


class ReturnsConfig(ProviderConfig):
    type: Literal["returns"] = "returns"
    kind: str


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("__str__ exploded")

    __repr__ = __str__


class LyingStr(str):
    def __str__(self) -> str:
        raise RuntimeError("__str__ exploded")

    def __format__(self, spec: str) -> str:
        raise RuntimeError("__format__ exploded")


RESULTS: dict[str, Any] = {
    "int": 42,
    "float": 3.5,
    "bytes": b"raw bytes",
    "list": ["a", "b"],
    "dict": {"k": "v"},
    "unprintable": Unprintable(),
    "zero": 0,
    "empty-list": [],
}


class Returns:
    def __init__(self, config: ReturnsConfig) -> None:
        self.kind = config.kind

    async def provide(self, branch: Any, instruction: Any) -> Any:
        return LyingStr("subclass text") if self.kind == "str-subclass" else RESULTS[self.kind]


returns_type = ProviderType("returns", ReturnsConfig, lambda config, ctx: Returns(config))


@pytest.mark.parametrize("kind", sorted(RESULTS))
async def test_a_plugin_returning_a_non_string_fails_alone(tmp_path: Path, kind: str) -> None:
    manifest = load(
        tmp_path,
        f"""
        version: 1
        providers:
          - {{name: before, type: static, text: A}}
          - {{name: broken, type: returns, kind: {kind}}}
          - {{name: after, type: static, text: B}}
        """,
        returns_type,
    )
    prepared = await turn(manifest, "hi")
    assert prepared.report is not None
    assert prepared.report.failed == ["broken"]
    assert prepared.report.blocks == ["A", "B"]
    assert prepared.guidance == "sys\nA\nB"


async def test_a_str_subclass_is_used_as_plain_text(tmp_path: Path) -> None:
    manifest = load(
        tmp_path,
        """
        version: 1
        providers:
          - {name: odd, type: returns, kind: str-subclass}
        """,
        returns_type,
    )
    prepared = await turn(manifest, "hi")
    assert prepared.report is not None
    assert prepared.report.blocks == ["subclass text"]
    assert type(prepared.report.blocks[0]) is str
    assert f"{prepared.guidance}" == "sys\nsubclass text"


async def test_the_failure_names_the_type_and_never_the_value(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    manifest = load(
        tmp_path,
        """
        version: 1
        providers:
          - {name: broken, type: returns, kind: dict}
        """,
        returns_type,
    )
    await turn(manifest, "hi")
    assert "provider 'broken' returned dict, not str or None" in caplog.text
    assert "'k'" not in caplog.text


class SpacesConfig(ProviderConfig):
    type: Literal["spaces"] = "spaces"


class Spaces:
    async def provide(self, branch: Any, instruction: Any) -> str:
        return " " * 1_000_000


spaces_type = ProviderType("spaces", SpacesConfig, lambda config, ctx: Spaces())


async def test_a_megabyte_of_spaces_is_counted_above_its_cap(tmp_path: Path) -> None:
    """The tokenizer gives up on such a run; it is counted in pieces, never as 0 tokens."""
    manifest = load(
        tmp_path,
        """
        version: 1
        providers:
          - {name: blank, type: spaces, max_tokens: 500}
          - {name: small, type: static, text: "fits"}
        """,
        spaces_type,
    )
    prepared = await turn(manifest, "hi")
    assert prepared.report is not None
    assert prepared.report.skipped == ["blank"]
    blank = prepared.report.outcomes[0]
    assert blank.outcome == "over_max_tokens"
    assert blank.tokens is not None
    assert blank.tokens > 500
