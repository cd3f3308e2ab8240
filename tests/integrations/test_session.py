"""``Composer``, the seam every framework integration shares: one branch per conversation,
``prepare_turn`` exactly, placement, and writebacks counted per turn."""

from __future__ import annotations

import textwrap
from pathlib import Path

import composer
from composer.integrations import Composer

MANIFEST = """\
version: 1
providers:
  - {name: rules, type: static, text: "Be brief."}
  - name: notes
    type: memory
    source: {sqlite: notes.sqlite}
    query: {text: "{{ instruction.text }}"}
    match: substring
    writeback: true
"""


def manifest(tmp_path: Path) -> composer.Manifest:
    path = tmp_path / "m.yaml"
    path.write_text(textwrap.dedent(MANIFEST))
    return composer.load_manifest(path)


async def test_a_conversation_is_a_branch_composed_as_prepare_turn_composes(
    tmp_path: Path,
) -> None:
    loaded = manifest(tmp_path)
    async with Composer(loaded) as composing:
        turn = await composing.compose("thread-1", "disk", system="S\n")
        branch = composer.Branch("S\n")
        composer.attach(branch, loaded)
        local = await composer.prepare_turn(branch, "disk")
    await loaded.aclose()
    assert turn.instructions == local.guidance == "S\nBe brief."
    assert turn.context is None
    assert turn.report == local.report


async def test_writebacks_store_once_per_turn_and_again_in_a_later_turn(tmp_path: Path) -> None:
    loaded = manifest(tmp_path)
    async with Composer(loaded, placement="stable_prefix") as composing:
        await composing.compose("t", "disk", system="S\n")
        first = await composing.writeback("t", ["disk 91% full"])
        retry = await composing.writeback("t", ["disk 91% full"])
        later = await composing.compose("t", "disk", system="S\n")
        again = await composing.writeback("t", ["disk 91% full"])
        other = await composing.compose("u", "disk", system="S\n")
    await loaded.aclose()
    assert [(r.name, r.stored, r.error) for r in first] == [("notes", 1, None)]
    assert retry[0].stored == 0
    assert again[0].stored == 1
    assert later.context is not None  # stable_prefix: memory goes with the turn
    assert "disk 91% full" in later.user_text("disk")
    assert later.instructions == "S\nBe brief."
    assert other.context is not None
    assert "disk 91% full" in other.context  # one store, read by every conversation


async def test_a_named_turn_is_composed_once_and_its_report_kept(tmp_path: Path) -> None:
    """A framework calling the model twice in one user turn (a tool call, then the answer)
    names the turn: the second compose gives the first composition, providers not run again."""
    loaded = manifest(tmp_path)
    async with Composer(loaded) as composing:
        assert composing.last_report("t") is None
        first = await composing.compose("t", "disk", system="S\n", turn="run-1")
        again = await composing.compose("t", "disk", system="S\n", turn="run-1")
        kept = composing.last_report("t")
        later = await composing.compose("t", "disk", system="S\n", turn="run-2")
    await loaded.aclose()
    assert again is first
    assert kept is first.report
    assert first.report is not None
    assert later.report is not None
    assert later.report.turn_id != first.report.turn_id
