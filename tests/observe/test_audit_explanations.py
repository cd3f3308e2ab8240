"""An explained turn's audit line: each ranking provider's candidates (ids, scores, tokens,
fates), bounded in count, their texts only with keep_text; other lines are as they were."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import composer
from composer.cli import main
from composer.observe.record import MAX_CANDIDATES, AuditLine, read_lines

from .conftest import turns, write


def manifest_at(folder: Path, *, explain: bool, keep: bool = False) -> composer.Manifest:
    corpus = folder / "corpus"
    for n in range(30):
        write(
            corpus / f"deploy-{n:02}.md",
            f"# Deploy note {n}\n\nDeploy step {n}: roll out zone {n}.\n",
        )
    runtime = {"audit": {"path": "turns.jsonl", "keep_text": keep}, "explain": explain}
    manifest = {
        "version": 1,
        "budget": 4000,
        "runtime": runtime,
        "providers": [
            {
                "name": "notes",
                "type": "file_corpus",
                "root": "corpus",
                "query": "{{ instruction.text }}",
                "top_k": 15,
            }
        ],
    }
    return composer.load_manifest(write(folder / "m.yaml", json.dumps(manifest)))


def lines_of(path: Path) -> list[AuditLine]:
    found = [line for _, line in read_lines(path)]
    assert all(isinstance(line, AuditLine) for line in found), found
    return [line for line in found if isinstance(line, AuditLine)]


async def test_an_explained_turn_writes_its_candidates_bounded_without_text(
    tmp_path: Path,
) -> None:
    manifest = manifest_at(tmp_path, explain=True)
    reports = await turns(manifest, 1, text="deploy roll out zone")
    await manifest.aclose()
    (line,) = lines_of(tmp_path / "turns.jsonl")
    assert line.explanations is not None
    (explained,) = line.explanations
    assert explained.provider == "notes"
    assert explained.outcome == "fired"
    assert explained.candidates is not None
    # 30 considered (top_k 15, twice as deep while explaining): the best 20 written
    assert len(explained.candidates) == MAX_CANDIDATES
    assert explained.candidates_left_off == 10
    fates = [c.fate for c in explained.candidates]
    assert fates.count("admitted") == 15
    assert fates[15:] == ["beyond_top_k"] * 5
    assert all(c.text is None for c in explained.candidates)
    assert all(c.id.startswith("deploy-") and "#Deploy note" in c.id for c in explained.candidates)
    report = reports[0].explanations[0]
    assert report.candidates is not None
    assert [c.id for c in explained.candidates] == [c.id for c in report.candidates[:20]]
    assert [c.tokens for c in explained.candidates] == [c.tokens for c in report.candidates[:20]]


async def test_keep_text_writes_the_candidates_texts(tmp_path: Path) -> None:
    manifest = manifest_at(tmp_path, explain=True, keep=True)
    await turns(manifest, 1, text="deploy roll out zone")
    await manifest.aclose()
    (line,) = lines_of(tmp_path / "turns.jsonl")
    assert line.explanations is not None
    candidates = line.explanations[0].candidates
    assert candidates is not None
    assert all(c.text and c.text.startswith("Deploy step") for c in candidates)


async def test_a_turn_that_does_not_explain_writes_the_line_as_before(tmp_path: Path) -> None:
    manifest = manifest_at(tmp_path, explain=False)
    await turns(manifest, 1, text="deploy roll out zone")
    await manifest.aclose()
    raw = (tmp_path / "turns.jsonl").read_text()
    assert '"explanations"' not in raw
    (line,) = lines_of(tmp_path / "turns.jsonl")
    assert line.explanations is None


async def test_audit_show_and_diff_read_the_candidates_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = manifest_at(tmp_path, explain=True)
    first, second = await turns(manifest, 2, text="deploy roll out zone 3")
    await manifest.aclose()
    log = str(tmp_path / "turns.jsonl")
    assert main(["audit", "show", log, str(first.turn_id)]) == 0
    shown = capsys.readouterr().out
    assert "candidates, near misses first:" in shown
    assert "notes: fired" in shown
    assert "(10 more candidates not shown)" in shown  # the line holds 20 of 30
    assert main(["audit", "diff", log, str(first.turn_id), str(second.turn_id)]) == 0
    changes = capsys.readouterr().out
    assert "entered the text" not in changes  # "deploy ... 3 0" and "... 3 1": same passages
