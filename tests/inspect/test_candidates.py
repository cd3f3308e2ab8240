"""A turn's explanation worded for a person: the summary line of each provider, its candidate
rows (near misses first) and which candidates entered or left between two turns."""

from __future__ import annotations

from pathlib import Path

import composer
from composer.inspect.candidates import candidate_changes, candidate_rows, summary
from composer.inspect.preview import run_preview
from composer.outcomes import Candidate, Explanation


def as_json(explanation: Explanation) -> dict[str, object]:
    return explanation.to_json()


def test_a_provider_lost_to_the_budget_says_who_took_the_rest() -> None:
    lost = Explanation("runbooks", "over_budget", 340, needed=340, left=300)
    lost.taken_by = ["house-rules", "status"]
    assert summary(as_json(lost)) == (
        "runbooks: skipped: over the budget; needed 340 tokens, 300 left, "
        "taken by house-rules, status"
    )
    refitted = Explanation("runbooks", "fired", 290, needed=340, left=300, refitted=True)
    assert summary(as_json(refitted)) == (
        "runbooks: fired, 290 tokens, refitted to the budget: needed 340, 300 left"
    )
    capped = Explanation("runbooks", "over_max_tokens", 700, needed=700, cap=600)
    assert summary(as_json(capped)) == (
        "runbooks: skipped: over its max_tokens; needed 700 tokens, its max_tokens is 600"
    )


def test_near_misses_come_first_and_a_duplicate_names_the_kept_copy() -> None:
    explanation = Explanation(
        "team-memory",
        "fired",
        40,
        candidates=[
            Candidate("m1", 3.0, "admitted", tokens=20),
            Candidate("m2", 2.5, "duplicate", tokens=18, duplicate_of="runbooks"),
            Candidate("m3", 1.0, "beyond_top_k", tokens=12),
            Candidate("m4", None, "admitted", tokens=None),
        ],
    )
    assert candidate_rows(as_json(explanation)) == [
        ["duplicate of runbooks", "2.500", "18", "m2"],
        ["beyond_top_k", "1.000", "12", "m3"],
        ["admitted", "3.000", "20", "m1"],
        ["admitted", "-", "-", "m4"],
    ]


async def test_changes_between_two_turns_name_what_entered_and_left(tmp_path: Path) -> None:
    """Two real turns over one corpus, asking about different runbooks."""
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "disk.md").write_text("# Disk\n\n## Full\n\nA full disk stops writes.\n")
    (root / "dns.md").write_text("# DNS\n\n## Lookup\n\nA failed lookup of a name.\n")
    path = tmp_path / "m.yaml"
    path.write_text(
        "version: 1\nproviders:\n  - {name: docs, type: file_corpus, root: corpus, top_k: 1}\n"
    )
    disk = await run_preview(composer.load_manifest(path), "disk full", explain=True)
    dns = await run_preview(composer.load_manifest(path), "dns lookup", explain=True)
    changes = candidate_changes(disk.explanations, dns.explanations)
    assert changes == {"docs": (["dns.md#DNS > Lookup"], ["disk.md#Disk > Full"])}
    assert candidate_changes(dns.explanations, dns.explanations) == {}
