"""load_manifest -> build_registry / attach -> prepare_turn, on a manifest of static providers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import composer

MANIFEST = """
# yaml-language-server: $schema=manifest.schema.json
version: 1
budget: 60
providers:
  - name: house-rules
    type: static
    priority: 100
    text: "Team {{ branch.name }}: answer in English."
  - name: asked
    type: static
    priority: 50
    text: "You were asked: {{ instruction.text }}"
  - name: signature
    type: static
    text: "Signed ${SIGNER}."
  - name: too-long
    type: static
    priority: 10
    max_tokens: 5
    text: "This fixed text has rather more than five tokens in it, so it is always skipped."
  - name: off
    type: static
    enabled: false
    text: never
"""


async def test_a_manifest_drives_a_turn_end_to_end(write: Callable[..., Path]) -> None:
    write("m.yaml", MANIFEST)
    manifest = composer.load_manifest("m.yaml", environ={"SIGNER": "ops"})
    registry = composer.build_registry(manifest)
    assert registry.names == ["house-rules", "asked", "signature", "too-long"]
    assert registry.budget == 60

    branch = composer.Branch("sys", name="blue")
    branch._context_providers = registry
    turn = await composer.prepare_turn(branch, composer.Instruction("restart the API?"))

    report = turn.report
    assert report is not None
    assert [row["provider_name"] for row in report.fired] == ["house-rules", "asked", "signature"]
    assert all(row["tokens"] > 0 for row in report.fired)
    assert report.skipped == ["too-long"]
    assert report.failed == []
    assert turn.guidance == (
        "sysTeam blue: answer in English.\nYou were asked: restart the API?\nSigned ops."
    )
    assert branch.last_context_report is report
    assert branch._context_injection_slot is None
    assert all("Team blue" not in str(message) for message in branch.messages)


async def test_attach_gives_each_branch_its_own_registry(write: Callable[..., Path]) -> None:
    write("m.yaml", MANIFEST)
    manifest = composer.load_manifest("m.yaml", environ={"SIGNER": "ops"})
    first, second = composer.Branch("a"), composer.Branch("b")
    registry = composer.attach(first, manifest)
    composer.attach(second, manifest)
    assert first._context_providers is registry
    assert second._context_providers is not registry
    assert second._context_providers is not None
    assert second._context_providers.names == registry.names


async def test_a_tight_budget_admits_by_priority_and_renders_in_order(
    write: Callable[..., Path],
) -> None:
    """Tokens: house-rules 7, asked 5, signature 3. Budget 10: priority 100 then 0 fit."""
    write("m.yaml", MANIFEST.replace("budget: 60", "budget: 10"))
    manifest = composer.load_manifest("m.yaml", environ={"SIGNER": "ops"})
    branch = composer.Branch("S:", name="blue")
    composer.attach(branch, manifest)
    turn = await composer.prepare_turn(branch, composer.Instruction("x"))
    assert turn.report is not None
    assert turn.report.fired == [
        {"provider_name": "house-rules", "tokens": 7},
        {"provider_name": "signature", "tokens": 3},
    ]
    assert turn.report.skipped == ["too-long", "asked"]
    assert turn.guidance == "S:Team blue: answer in English.\nSigned ops."
