"""ADR-0008 D4: gather before compilation, inject ephemerally, clear the slot after preparation."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest
import yaml

import composer
import composer.turn
from composer import Branch, Instruction, ProviderReport, count_tokens, prepare_turn

if TYPE_CHECKING:
    from conformance.conftest import Raising, Static


class Stop(BaseException):
    """Escapes gather's containment."""


@pytest.fixture
def previous() -> ProviderReport:
    """A report standing for an earlier turn's, to see whether a turn replaces it."""
    return ProviderReport(blocks=["old"], fired=[{"provider_name": "old", "tokens": 1}])


async def test_no_registry_gathers_nothing_and_leaves_report(previous: ProviderReport) -> None:
    """D4: with no registry, no provider pass runs and last_context_report is left unchanged."""
    branch = Branch("SYS")
    branch._last_context_report = previous
    turn = await prepare_turn(branch, Instruction("q", guidance="G"))
    assert turn.report is None
    assert turn.guidance == "SYSG"
    assert branch.last_context_report is previous
    assert branch._context_injection_slot is None
    assert branch._context_providers is None


async def test_empty_registry_gathers_nothing_and_leaves_report(
    previous: ProviderReport,
) -> None:
    """D4: an empty registry is the zero-provider path too: the last report is left alone."""
    branch = Branch("SYS")
    registry = branch.providers
    branch._last_context_report = previous
    turn = await prepare_turn(branch, Instruction("q", guidance="G"))
    assert turn.report is None
    assert turn.guidance == "SYSG"
    assert branch.last_context_report is previous
    assert branch._context_providers is registry


async def test_systemless_branch_calls_no_provider_and_reports_all_skipped(
    static: Callable[..., Static], previous: ProviderReport
) -> None:
    """D4: without a system message no provider is called; report = skipped=registry.names."""
    branch = Branch()
    a, b = static("A"), static("B")
    branch.providers.register(a, name="a")
    branch.providers.register(b, name="b")
    branch.providers.register(a, name="a")
    branch._last_context_report = previous
    turn = await prepare_turn(branch, Instruction("q", guidance="G"))
    assert a.calls == []
    assert b.calls == []
    assert turn.report == ProviderReport(blocks=[], fired=[], skipped=["a", "b", "a"], failed=[])
    assert branch.last_context_report is turn.report
    assert turn.guidance == "G"
    assert branch._context_injection_slot is None


async def test_systemless_turn_without_guidance_has_no_guidance(
    static: Callable[..., Static],
) -> None:
    """D4: a systemless branch gets no fold; with no guidance there is nothing to send."""
    branch = Branch()
    branch.providers.register(static("A"), name="a")
    turn = await prepare_turn(branch, "q")
    assert turn.guidance is None


async def test_instruction_is_built_once_and_passed_to_every_provider(
    static: Callable[..., Static],
) -> None:
    """D4: the helper builds the current Instruction once and passes that object to every provider."""
    branch = Branch("SYS")
    providers = [static("A"), static("B"), static("C")]
    for p in providers:
        branch.providers.register(p)
    turn = await prepare_turn(branch, "what now?")
    assert isinstance(turn.instruction, Instruction)
    assert turn.instruction.text == "what now?"
    for p in providers:
        assert p.calls == [(branch, turn.instruction)]
        assert p.calls[0][1] is turn.instruction
    assert branch.messages == [turn.instruction]


async def test_given_instruction_object_is_the_one_providers_see(
    static: Callable[..., Static],
) -> None:
    """D4: an Instruction passed in is the exact object every provider receives."""
    branch = Branch("SYS")
    a, b = static("A"), static("B")
    branch.providers.register(a)
    branch.providers.register(b)
    ins = Instruction("q")
    turn = await prepare_turn(branch, ins)
    assert turn.instruction is ins
    assert a.calls[0][1] is ins
    assert b.calls[0][1] is ins


async def test_report_is_saved_and_blocks_fill_the_slot_during_preparation(
    static: Callable[..., Static], monkeypatch: pytest.MonkeyPatch
) -> None:
    """D4: the report is saved, report.blocks go in the private slot, and the slot is then cleared."""
    branch = Branch("SYS")
    branch.providers.register(static("A"), name="a")
    branch.providers.register(static("B"), name="b")
    seen: list[Any] = []
    render = composer.turn.render_guidance

    def spy(guidance: Any) -> str:
        seen.append(branch._context_injection_slot)
        return render(guidance)

    monkeypatch.setattr(composer.turn, "render_guidance", spy)
    turn = await prepare_turn(branch, "q")
    assert turn.report == ProviderReport(
        blocks=["A", "B"],
        fired=[
            {"provider_name": "a", "tokens": count_tokens("A")},
            {"provider_name": "b", "tokens": count_tokens("B")},
        ],
    )
    assert branch.last_context_report is turn.report
    assert len(seen) == 1
    assert seen[0] is turn.report.blocks
    assert branch._context_injection_slot is None


@pytest.mark.parametrize(
    ("guidance", "expected"),
    [
        pytest.param(None, "SYSA\nB\nC", id="no-guidance"),
        pytest.param("G", "SYSA\nB\nCG", id="string"),
        pytest.param("\nG\n", "SYSA\nB\nC\nG\n", id="string-kept-verbatim"),
        pytest.param({"k": "v", "n": [1, 2]}, "SYSA\nB\nCk: v\nn:\n- 1\n- 2", id="mapping-yaml"),
        pytest.param(["x", "y"], "SYSA\nB\nC- x\n- y", id="list-yaml"),
        pytest.param({"k": "v", "empty": None, "blank": " "}, "SYSA\nB\nCk: v", id="yaml-pruned"),
        pytest.param({"text": "l1\nl2"}, "SYSA\nB\nCtext: |-\n  l1\n  l2", id="yaml-block"),
    ],
)
async def test_fold_is_system_plus_newline_joined_blocks_plus_guidance(
    static: Callable[..., Static], guidance: Any, expected: str
) -> None:
    """D4: rendering is system + "\\n".join(blocks) + guidance; non-string guidance as YAML."""
    branch = Branch("SYS")
    for text in ("A", "B\n", "C"):
        branch.providers.register(static(text.strip()))
    turn = await prepare_turn(branch, Instruction("q", guidance=guidance))
    assert turn.guidance == expected


async def test_fold_adds_no_separator_around_blocks(static: Callable[..., Static]) -> None:
    """D4: no delimiter between system and the first block, nor between the last block and guidance."""
    branch = Branch("You are terse.")
    branch.providers.register(static("Fact one."))
    branch.providers.register(static("Fact two."))
    turn = await prepare_turn(branch, Instruction("q", guidance="Answer briefly."))
    assert turn.guidance == "You are terse.Fact one.\nFact two.Answer briefly."


async def test_fold_with_no_retained_block_is_system_plus_guidance(
    static: Callable[..., Static],
) -> None:
    """D4: when every result is empty or skipped the fold is just system + guidance."""
    branch = Branch("SYS")
    branch.providers.register(static(None))
    branch.providers.register(static("too long"), max_tokens=-1, name="long")
    turn = await prepare_turn(branch, Instruction("q", guidance="G"))
    assert turn.guidance == "SYSG"
    assert turn.report == ProviderReport(skipped=["long"])


async def test_fold_uses_registration_order_not_priority(static: Callable[..., Static]) -> None:
    """D4/D3: retained blocks are rendered in registration order."""
    branch = Branch("S:")
    branch.providers.register(static("low"), priority=-5)
    branch.providers.register(static("high"), priority=50)
    turn = await prepare_turn(branch, "q")
    assert turn.guidance == "S:low\nhigh"


@pytest.mark.parametrize("guidance", [{}, [], 0, False, ""], ids=repr)
async def test_falsy_guidance_renders_as_nothing(
    static: Callable[..., Static], guidance: Any
) -> None:
    """D4: guidance is ``c.guidance or ""`` before YAML, so falsy guidance adds no text."""
    branch = Branch("SYS")
    branch.providers.register(static("A"))
    turn = await prepare_turn(branch, Instruction("q", guidance=guidance))
    assert turn.guidance == "SYSA"


async def test_slot_is_cleared_when_preparation_fails(
    static: Callable[..., Static], previous: ProviderReport
) -> None:
    """D4: the slot is cleared in a finally even when preparation raises (unrepresentable guidance)."""
    branch = Branch("SYS")
    provider = static("A")
    branch.providers.register(provider, name="a")
    branch._last_context_report = previous
    with pytest.raises(yaml.YAMLError):
        await prepare_turn(branch, Instruction("q", guidance={"bad": object()}))
    assert branch._context_injection_slot is None
    assert len(provider.calls) == 1
    assert branch.last_context_report is not previous
    assert branch.last_context_report == ProviderReport(
        blocks=["A"], fired=[{"provider_name": "a", "tokens": count_tokens("A")}]
    )
    assert branch.messages == []


async def test_gather_failure_prevents_preparation_and_assigns_nothing(
    static: Callable[..., Static], raising: Callable[..., Raising], previous: ProviderReport
) -> None:
    """D4: an error escaping gather stops the turn before the slot or report is assigned."""
    branch = Branch("SYS")
    branch.providers.register(static("A"))
    branch.providers.register(raising(Stop()))
    branch._last_context_report = previous
    with pytest.raises(Stop):
        await prepare_turn(branch, "q")
    assert branch._context_injection_slot is None
    assert branch.last_context_report is previous
    assert branch.messages == []


async def test_injected_text_is_never_stored_in_messages(static: Callable[..., Static]) -> None:
    """D4: the instruction is recorded without the injected blocks; only the fold carries them."""
    branch = Branch("SYS")
    branch.providers.register(static("SECRET-BLOCK"))
    ins = Instruction("question", guidance="G", context=["ctx"])
    turn = await prepare_turn(branch, ins)
    assert "SECRET-BLOCK" in (turn.guidance or "")
    assert branch.messages == [ins]
    assert (ins.text, ins.guidance, ins.context) == ("question", "G", ["ctx"])
    assert all("SECRET-BLOCK" not in repr(vars(m)) for m in branch.messages)
    assert branch.system == "SYS"


async def test_each_turn_gathers_afresh(static: Callable[..., Static]) -> None:
    """D4: every systemful turn runs a new provider pass and saves a new report."""
    branch = Branch("SYS")
    provider = static("A")
    branch.providers.register(provider)
    first = await prepare_turn(branch, "one")
    second = await prepare_turn(branch, "two")
    assert [call[1].text for call in provider.calls] == ["one", "two"]
    assert first.report is not second.report
    assert branch.last_context_report is second.report
    assert [m.text for m in branch.messages] == ["one", "two"]
