"""What a caller may hand the turn path beside the ADR's own attributes, declared on the
classes that carry it: guidance it rendered already, and the key of a branch's turn."""

from __future__ import annotations

import typing

from composer.plugin import turn_key
from composer.turn import Branch, Instruction, prepare_turn


async def test_guidance_a_caller_rendered_is_folded_as_given() -> None:
    """A server renders data guidance off its event loop and hands the text over."""
    branch = Branch("sys\n")
    given = Instruction("q", guidance={"a": 1}, rendered_guidance="rendered elsewhere")
    assert (await prepare_turn(branch, given)).guidance == "sys\nrendered elsewhere"
    assert (await prepare_turn(branch, Instruction("q", guidance={"a": 1}))).guidance == (
        "sys\na: 1"
    )


def test_both_are_declared_typed_attributes_with_defaults() -> None:
    assert typing.get_type_hints(Instruction.__init__)["rendered_guidance"] == str | None
    assert Instruction("q").rendered_guidance is None
    assert typing.get_type_hints(Branch)["turn_key"] == str | None
    assert Branch().turn_key is None


async def test_a_branch_is_keyed_by_its_messages_unless_its_keeper_sets_its_turn_key() -> None:
    branch = Branch("sys\n")
    assert turn_key(branch) == "0"
    await prepare_turn(branch, "q")
    assert turn_key(branch) == "1"
    branch.turn_key = "alice:run-1:7"  # a server keeps no messages: it counts the turns
    assert turn_key(branch) == "alice:run-1:7"
