"""static: a constant is returned as written; a template renders per turn, in the sandbox."""

from __future__ import annotations

import pytest

from builtin_providers.static import StaticConfig, StaticProvider
from composer.build import manage
from composer.errors import TemplateError
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
