"""A turn's explanation as a person reads it, the same in every front-end.

``composer preview --explain`` prints, per provider, one summary line (``summary``: its
outcome and tokens; for a provider lost to the budget what it needed, what was left and who
took the rest) and its candidates as cells under ``CANDIDATE_HEADERS`` (``candidate_rows``),
near misses first; the console's turn page shows the same, and its compare view says which
candidates entered or left the model-visible text between two turns (``candidate_changes``).
Each takes an explanation in its JSON shape (``composer.outcomes.Explanation.to_json``, as
``preview --json`` and an audit line carry it), so a live turn and a logged one read alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from composer.inspect.words import OUTCOME_TEXT

__all__ = ["CANDIDATE_HEADERS", "Changes", "candidate_changes", "candidate_rows", "summary"]

CANDIDATE_HEADERS = ["fate", "score", "tokens", "id"]
"""The columns of one provider's candidates (``candidate_rows``)."""


def summary(explanation: Mapping[str, Any]) -> str:
    """``runbooks: skipped: over the budget; needed 340 tokens, 300 left, taken by
    house-rules, team-memory``: one provider's line."""
    outcome = explanation["outcome"]
    line = f"{explanation['provider']}: {OUTCOME_TEXT.get(outcome, outcome)}"
    tokens, needed, left = explanation["tokens"], explanation["needed"], explanation["left"]
    if explanation["refitted"]:
        line += f", {tokens} tokens, refitted to the budget: needed {needed}, {left} left"
    elif outcome == "over_budget":
        taken = ", ".join(explanation["taken_by"]) or "nobody"
        line += f"; needed {needed} tokens, {left} left, taken by {taken}"
    elif outcome == "over_max_tokens":
        line += f"; needed {needed} tokens, its max_tokens is {explanation['cap']}"
    elif tokens is not None and outcome in ("fired", "cached"):
        line += f", {tokens} tokens"
    left_off = explanation.get("candidates_left_off") or 0
    return f"{line} ({left_off} more candidates not shown)" if left_off else line


def candidate_rows(explanation: Mapping[str, Any]) -> list[list[str]]:
    """The provider's candidates as cells under ``CANDIDATE_HEADERS``: the near misses
    first (what did not reach the model, in rank order), then those admitted."""
    candidates: Sequence[Mapping[str, Any]] = explanation["candidates"] or []
    missed = [c for c in candidates if c["fate"] != "admitted"]
    admitted = [c for c in candidates if c["fate"] == "admitted"]
    return [_cells(c) for c in [*missed, *admitted]]


def _cells(candidate: Mapping[str, Any]) -> list[str]:
    fate = candidate["fate"]
    if fate == "duplicate" and candidate["duplicate_of"]:
        fate = f"duplicate of {candidate['duplicate_of']}"
    score, tokens = candidate["score"], candidate["tokens"]
    return [
        fate,
        "-" if score is None else f"{score:.3f}",
        "-" if tokens is None else str(tokens),
        candidate["id"],
    ]


class Changes(NamedTuple):
    """The candidates of one provider that entered or left the model-visible text."""

    entered: list[str]
    left: list[str]


def candidate_changes(
    before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]]
) -> dict[str, Changes]:
    """Per provider (in ``after``'s order, then those only ``before`` has), the ids admitted
    in ``after`` but not in ``before`` and the other way round; providers with no change are
    left out."""

    def admitted(explanations: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
        return {
            e["provider"]: [c["id"] for c in e["candidates"] or [] if c["fate"] == "admitted"]
            for e in explanations
        }

    old, new = admitted(before), admitted(after)
    changes: dict[str, Changes] = {}
    for provider in [*new, *(p for p in old if p not in new)]:
        was, now = old.get(provider, []), new.get(provider, [])
        entered = [i for i in now if i not in was]
        gone = [i for i in was if i not in now]
        if entered or gone:
            changes[provider] = Changes(entered, gone)
    return changes
