"""``runtime.report.history``: each branch keeps its own last N reports, oldest first."""

from __future__ import annotations

from pathlib import Path

import composer
from composer.observe import report_history

from .conftest import turns, write


async def test_each_branch_keeps_its_last_n_reports(tmp_path: Path) -> None:
    manifest = composer.load_manifest(
        write(
            tmp_path / "m.yaml",
            """\
            version: 1
            runtime: {report: {history: 3}}
            providers: [{name: echo, type: static, text: "{{ instruction.text }}"}]
            """,
        )
    )
    first = composer.Branch("sys\n", name="first")
    second = composer.Branch("sys\n", name="second")
    composer.attach(first, manifest)
    composer.attach(second, manifest)
    for i in range(5):
        await composer.prepare_turn(first, f"one {i}")
    await composer.prepare_turn(second, "two")
    assert [r.blocks for r in report_history(first)] == [["one 2"], ["one 3"], ["one 4"]]
    assert report_history(first)[-1] is first.last_context_report
    assert [r.blocks for r in report_history(second)] == [["two"]]
    await manifest.aclose()


async def test_without_history_nothing_is_kept(tmp_path: Path) -> None:
    manifest = composer.load_manifest(
        write(tmp_path / "m.yaml", "version: 1\nproviders: [{name: a, type: static, text: hi}]\n")
    )
    reports = await turns(manifest, 3)
    branch = composer.Branch("sys\n")
    registry = composer.attach(branch, manifest)
    await composer.prepare_turn(branch, "x")
    assert registry.history == []
    assert report_history(branch) == []
    assert report_history(composer.Branch()) == []  # no registry at all
    assert registry.observer is None  # nothing on the turn's path but the ADR's gather
    assert len(reports) == 3
