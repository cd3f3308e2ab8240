"""``runtime.placement: stable_prefix``: stable blocks stay in the system fold, the others go
with the turn, so the folded system text is byte-identical from turn to turn; the budget,
priority and report are those of the ADR's placement."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import composer
from composer.turn import CONTEXT_BLOCK

MANIFEST = """\
version: 1
budget: 200
{runtime}
providers:
  - name: rules
    type: static
    priority: 9
    text: "House rules: be brief.\\n"
  - name: team
    type: static
    text: "Team {{{{ branch.name }}}}.\\n"
    stable: true
  - name: echo
    type: static
    priority: 5
    text: "You asked about {{{{ instruction.text }}}}."
  - name: big
    type: static
    priority: -1
    text: "{big}"
"""


def manifest(tmp_path: Path, placement: str | None) -> composer.Manifest:
    runtime = f"runtime: {{placement: {placement}}}" if placement else ""
    path = tmp_path / f"m-{placement}.yaml"
    path.write_text(textwrap.dedent(MANIFEST.format(runtime=runtime, big="word " * 300)))
    return composer.load_manifest(path)


def labelled(context: str | None) -> list[tuple[str, str]]:
    """The turn's context block, whole, as its labelled blocks: (provider, text)."""
    assert context is not None
    found = CONTEXT_BLOCK.fullmatch(context)
    assert found is not None
    nonce = found[1]
    label = rf'<block source="([^"]*)" id="{nonce}">\n(.*?)\n</block id="{nonce}">'
    blocks: list[tuple[str, str]] = re.findall(label, found[2], re.DOTALL)
    assert (
        "\n".join(
            f'<block source="{n}" id="{nonce}">\n{t}\n</block id="{nonce}">' for n, t in blocks
        )
        == found[2]
    )
    return blocks


async def turns(loaded: composer.Manifest, *texts: str) -> list[composer.PreparedTurn]:
    branch = composer.Branch("You are on call.\n", name="payments")
    composer.attach(branch, loaded)
    return [await composer.prepare_turn(branch, text) for text in texts]


async def test_stable_blocks_stay_in_the_fold_and_the_others_go_with_the_turn(
    tmp_path: Path,
) -> None:
    first, second = await turns(manifest(tmp_path, "stable_prefix"), "disks", "certificates")
    assert (
        first.guidance
        == second.guidance
        == ("You are on call.\nHouse rules: be brief.\n\nTeam payments.\n")
    )
    assert labelled(first.context) == [("echo", "You asked about disks.")]
    assert labelled(second.context) == [("echo", "You asked about certificates.")]


async def test_the_report_and_budget_are_the_adr_placements(tmp_path: Path) -> None:
    """Placement changes where blocks go, never which are admitted: the same four lists."""
    (adr,) = await turns(manifest(tmp_path, None), "disks")
    (stable,) = await turns(manifest(tmp_path, "stable_prefix"), "disks")
    assert adr.context is None
    assert adr.report is not None
    assert stable.report is not None
    assert adr.report == stable.report  # blocks, fired, skipped, failed
    assert adr.report.skipped == ["big"]  # over the budget in both
    assert adr.report.tokens_used == stable.report.tokens_used
    assert adr.guidance == "You are on call.\n" + "\n".join(adr.report.blocks)


async def test_with_only_stable_blocks_there_is_no_context_block(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(
        "version: 1\nruntime: {placement: stable_prefix}\n"
        "providers: [{name: rules, type: static, text: 'Be brief.'}]\n"
    )
    (turn,) = await turns(composer.load_manifest(path), "x")
    assert turn.context is None
    assert turn.guidance == "You are on call.\nBe brief."
