"""``composer preview --explain``: every corpus and memory candidate of the bundled configs with
its score, tokens and fate, near misses first; a provider lost to the budget says what it
needed, what was left and who took the rest. Checked against the JSON document and against a
turn run without the preview code.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from repofiles import CONFIGS, put

import composer
from composer.cli import main
from composer.inspect.preview import DEFAULT_SYSTEM, PreviewDocument

INSTRUCTION = "The API returns 502 errors after the deploy, what do I do?"
BEGIN = "----- model-visible guidance: system + injected blocks + guidance -----"


def preview(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["preview", *args, "--instruction", INSTRUCTION]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    return out


def document(capsys: pytest.CaptureFixture[str], *args: str) -> PreviewDocument:
    return PreviewDocument.model_validate_json(preview(capsys, *args, "--json"))


def candidate_lines(out: str, provider: str) -> list[list[str]]:
    """The rows under ``provider``'s summary line: fate, score, tokens, id."""
    lines = out.split(BEGIN)[0].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{provider}: "))
    rows = []
    for line in lines[start + 2 :]:  # past the summary and the headers
        if not line.strip():
            break
        rows.append(re.split(r"\s{2,}", line.strip(), maxsplit=3))
    return rows


def test_every_candidate_is_listed_with_score_tokens_and_fate(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = preview(capsys, str(CONFIGS), "--env", "dev", "--explain")
    explained = document(capsys, str(CONFIGS), "--env", "dev", "--explain").explanations
    assert [e.provider for e in explained] == ["house-rules", "runbooks", "team-memory"]
    for explanation in explained[1:]:
        candidates = explanation.candidates or []
        fates = {c.fate for c in candidates}
        assert "admitted" in fates
        assert "beyond_top_k" in fates  # the near misses past top_k / limit
        near = [c for c in candidates if c.fate != "admitted"]
        admitted = [c for c in candidates if c.fate == "admitted"]
        assert candidate_lines(out, explanation.provider) == [
            [c.fate, f"{c.score:.3f}", str(c.tokens), c.id] for c in [*near, *admitted]
        ]
    assert "runbooks/api-outage.md#API outage > Symptoms" in [
        c.id for c in explained[1].candidates or []
    ]


def test_explain_changes_nothing_the_model_sees(capsys: pytest.CaptureFixture[str]) -> None:
    plain = document(capsys, str(CONFIGS), "--env", "dev")
    explained = document(capsys, str(CONFIGS), "--env", "dev", "--explain")
    assert plain.explanations == []
    assert explained.guidance == plain.guidance
    assert explained.report == plain.report


def squeezed(tmp_path: Path, budget: int) -> Path:
    folder = tmp_path / "configs"
    shutil.copytree(CONFIGS, folder, ignore=shutil.ignore_patterns("*.sqlite*"))
    put(folder / "tight.yaml", f"extends: base.yaml\nbudget: {budget}\n")
    return folder / "tight.yaml"


def reference_fired(manifest: Path) -> dict[str, int]:
    async def turn() -> dict[str, int]:
        loaded = composer.load_manifest(manifest)
        async with loaded:
            branch = composer.Branch(DEFAULT_SYSTEM)
            composer.attach(branch, loaded)
            prepared = await composer.prepare_turn(branch, INSTRUCTION)
        assert prepared.report is not None
        return {row["provider_name"]: row["tokens"] for row in prepared.report.fired}

    return asyncio.run(turn())


def test_a_provider_lost_to_the_budget_says_what_it_needed_and_who_took_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The base manifest (status is guarded off: no outage in the instruction) with a budget
    one token short of the three blocks."""
    roomy = reference_fired(squeezed(tmp_path / "roomy", 100_000))
    budget = roomy["house-rules"] + roomy["runbooks"] + roomy["team-memory"] - 1
    manifest = squeezed(tmp_path / "tight", budget)
    out = preview(capsys, str(manifest), "--explain")
    left = budget - roomy["house-rules"] - roomy["runbooks"]
    assert (
        f"team-memory: skipped: over the budget; needed {roomy['team-memory']} tokens, "
        f"{left} left, taken by house-rules, runbooks\n" in out
    )
    assert {row[0] for row in candidate_lines(out, "team-memory")} == {
        "beyond_top_k",
        "lost_with_block",
    }
    (memory,) = [
        e
        for e in document(capsys, str(manifest), "--explain").explanations
        if e.provider == "team-memory"
    ]
    assert (memory.outcome, memory.needed, memory.left, memory.taken_by) == (
        "over_budget",
        roomy["team-memory"],
        left,
        ["house-rules", "runbooks"],
    )


def test_the_json_explanation_has_the_documented_keys(capsys: pytest.CaptureFixture[str]) -> None:
    data: dict[str, Any] = json.loads(
        preview(capsys, str(CONFIGS), "--env", "dev", "--explain", "--json")
    )
    runbooks = data["explanations"][1]
    assert list(runbooks) == [
        "provider",
        "outcome",
        "tokens",
        "needed",
        "left",
        "cap",
        "taken_by",
        "refitted",
        "candidates",
        "candidates_left_off",
    ]
    assert list(runbooks["candidates"][0]) == [
        "id",
        "score",
        "tokens",
        "fate",
        "duplicate_of",
        "duplicate_of_id",
    ]
