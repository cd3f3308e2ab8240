"""static: a constant is returned as written; a template renders per turn, in the sandbox."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest

from builtin_providers.static import StaticConfig, StaticProvider
from composer.build import EnginePlan, ManagedProvider, manage
from composer.errors import TemplateError
from composer.manifest.loader import load_manifest
from composer.turn import Branch, Instruction


async def test_constant_text_is_not_a_template() -> None:
    provider = StaticProvider(StaticConfig(name="rules", text="Use {braces} and 100% English."))
    assert await provider.provide(Branch("s"), Instruction("{{7*7}}")) == (
        "Use {braces} and 100% English."
    )


async def test_template_renders_each_turn() -> None:
    provider = StaticProvider(
        StaticConfig(name="r", text="{{ branch.name }}: {{ instruction.text }}")
    )
    assert await provider.provide(Branch("s", name="a"), Instruction("{{7*7}}")) == "a: {{7*7}}"
    assert await provider.provide(Branch("s", name="b"), Instruction("x")) == "b: x"


async def test_when_and_failures() -> None:
    config = StaticConfig(name="r", text="hi", when="instruction.text == 'go'")
    guarded = manage(StaticProvider(config), config)
    assert await guarded.provide(Branch("s"), Instruction("stop")) is None
    assert await guarded.provide(Branch("s"), Instruction("go")) == "hi"
    empty = StaticProvider(StaticConfig(name="r", text="{{ '' }}"))
    assert await empty.provide(Branch("s"), Instruction("x")) is None
    escaping = StaticProvider(StaticConfig(name="r", text="{{ cycler.__init__.__globals__ }}"))
    with pytest.raises(TemplateError):
        await escaping.provide(Branch("s"), Instruction("x"))
    assert repr(escaping) == "<StaticProvider 'r'>"


async def test_a_located_constant_is_the_same_plain_text_every_turn(tmp_path: Path) -> None:
    """A manifest's text is a located str subclass; the engine hands the registry one plain
    str for it, the same object every turn, so that counting it is a lookup, not a copy."""
    path = tmp_path / "m.yaml"
    path.write_text("version: 1\nproviders:\n  - {name: rules, type: static, text: Be brief.}\n")
    manifest = load_manifest(path)
    config = cast(StaticConfig, manifest.providers[0])
    assert type(config.text) is not str  # located: the case this is about
    managed = manage(StaticProvider(config), config)
    first = await managed.provide(Branch("s"), Instruction("a"))
    second = await managed.provide(Branch("s"), Instruction("b"))
    assert type(first) is str
    assert first == "Be brief."
    assert second is first


async def test_a_secret_constant_stays_masked_in_the_provider(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("version: 1\nproviders:\n  - {name: rules, type: static, text: '${TOKEN}'}\n")
    manifest = load_manifest(path, variables={"TOKEN": "s3cret-value"})
    config = manifest.providers[0]
    managed = manage(StaticProvider(cast(StaticConfig, config)), config)
    assert await managed.provide(Branch("s"), Instruction("a")) == "s3cret-value"
    held = {slot: getattr(managed, slot) for slot in ManagedProvider.__slots__}
    plan = {slot: getattr(managed.plan, slot) for slot in EnginePlan.__slots__}
    assert "s3cret-value" not in repr(held) + repr(plan)
