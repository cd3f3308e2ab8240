"""``Composer``, the seam every framework integration shares: one branch per conversation,
``prepare_turn`` exactly, placement, and writebacks counted per turn."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

import composer
from builtin_providers.stores import SqliteMemoryStore
from composer.integrations import Composer
from composer.principal import Principal, current_principal

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
        turn = await composing.compose("t", "disk", system="S\n")
        first = await composing.writeback(turn, ["disk 91% full"])
        retry = await composing.writeback(turn, ["disk 91% full"])
        later = await composing.compose("t", "disk", system="S\n")
        again = await composing.writeback(later, ["disk 91% full"])
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


async def test_a_named_turn_is_reused_only_for_the_caller_it_was_composed_for(
    tmp_path: Path,
) -> None:
    """Another caller naming the same turn (other metadata, another principal) gets its own
    composition, never the first caller's blocks or identity."""
    loaded = manifest(tmp_path)
    async with Composer(loaded) as composing:
        first = await composing.compose("t", "disk", metadata={"team": "a"}, turn="run-1")
        other = await composing.compose("t", "disk", metadata={"team": "b"}, turn="run-1")
        token = current_principal.set(Principal("mallory"))
        try:
            stranger = await composing.compose("t", "disk", metadata={"team": "a"}, turn="run-1")
        finally:
            current_principal.reset(token)
        again = await composing.compose("t", "disk", metadata={"team": "a"}, turn="run-1")
    await loaded.aclose()
    assert again is first
    assert other is not first
    assert other.run.metadata == {"team": "b"}
    assert stranger is not first
    assert stranger.run.principal == Principal("mallory")


async def test_a_writeback_is_stored_under_its_runs_identity_not_the_latest_turns(
    tmp_path: Path,
) -> None:
    path = tmp_path / "teams.yaml"
    path.write_text(
        "version: 1\nproviders:\n  - {name: notes, type: memory, source: {sqlite: n.sqlite},"
        " namespace: '{{ branch.metadata.team }}', writeback: true}\n"
    )
    loaded = composer.load_manifest(path)
    async with Composer(loaded) as composing:
        run_a = await composing.compose("shared", "x", metadata={"team": "a"})
        await composing.compose("shared", "y", metadata={"team": "b"})  # composed last
        [result] = await composing.writeback(run_a, ["tool result of run a"])
        with pytest.raises(TypeError, match="the Composed of the run"):
            await composing.writeback("shared", ["x"])  # type: ignore[arg-type]
    store = SqliteMemoryStore(tmp_path / "n.sqlite")
    try:
        assert [i.content for i in await store.export("a")] == ["tool result of run a"]
        assert await store.export("b") == []
    finally:
        await store.aclose()
        await loaded.aclose()
    assert result.stored == 1


async def test_each_principal_has_its_own_conversations(tmp_path: Path) -> None:
    loaded = manifest(tmp_path)
    async with Composer(loaded) as composing:
        token = current_principal.set(Principal("team-a"))
        try:
            mine = await composing.compose("c-1", "disk", system="S\n")
        finally:
            current_principal.reset(token)
        assert composing.last_report("c-1") is None  # no principal: another conversation
        token = current_principal.set(Principal("team-a"))
        try:
            assert composing.last_report("c-1") is mine.report
        finally:
            current_principal.reset(token)
    await loaded.aclose()


async def test_an_8_mb_tool_result_is_stored_cut_and_later_turns_keep_their_memory(
    tmp_path: Path,
) -> None:
    """Through an integration's writeback: the huge result is stored cut (counted in the
    result), the turn goes on, and a later turn's memory block still renders."""
    huge = "".join(f"db1 disk row {n:09d} is fine\n" for n in range(8 * 1024 * 1024 // 32))
    loaded = manifest(tmp_path)
    async with Composer(loaded) as composing:
        turn = await composing.compose("t", "db1", system="S\n")
        [result] = await composing.writeback(turn, [huge])
        later = await composing.compose("t", "db1", system="S\n")
    await loaded.aclose()
    assert (result.name, result.stored, result.error, result.cut) == ("notes", 1, None, 1)
    assert later.report is not None
    assert [(o.name, o.outcome) for o in later.report.outcomes] == [
        ("rules", "fired"),
        ("notes", "fired"),
    ]
    assert f"the whole result had {len(huge):,}]" in later.instructions
