"""How the operations word what they report, the same in every front-end.

A count with its noun (``counted``), each provider outcome as a person reads it
(``OUTCOME_TEXT``), and one provider's row of a previewed turn as cells under ``HEADERS``
(``row_cells``): ``composer preview`` and ``composer audit show`` print these rows as a table,
the console shows the same cells on its turn pages. No terminal here: printing is the
front-end's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from composer.inspect.preview import ProviderRow
    from composer.outcomes import Outcome

__all__ = ["HEADERS", "OUTCOME_TEXT", "counted", "row_cells"]

OUTCOME_TEXT: dict[Outcome, str] = {
    "fired": "fired",
    "cached": "fired: from its cache",
    "empty": "empty: returned nothing",
    "guarded": "empty: its `when` is false",
    "over_max_tokens": "skipped: over its max_tokens",
    "over_budget": "skipped: over the budget",
    "failed": "failed",
    "timeout": "failed: timed out",
    "not_called": "not called: branch has no system text",
    "disabled": "disabled",
}
"""Each outcome (``composer.outcomes.Outcome``) as the table words it."""

HEADERS = ["provider", "type", "priority", "max_tokens", "outcome", "tokens", "ms"]
"""The columns of a previewed turn's rows (``row_cells``)."""


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``1 line``, ``2 lines``: a count with its noun in the right number (``plural`` when it
    is not the noun with an ``s``)."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def row_cells(row: ProviderRow) -> list[str]:
    """One row's cells under ``HEADERS``, as the table prints them (the console shows the same)."""
    outcome = OUTCOME_TEXT[row.outcome]
    if row.error:
        outcome = f"{outcome}: {row.error}"
    return [
        row.name,
        row.type,
        str(row.priority),
        "-" if row.max_tokens is None else str(row.max_tokens),
        outcome,
        "-" if row.tokens is None else str(row.tokens),
        "-" if row.ms is None else f"{row.ms:.1f}",
    ]
