"""A previewed turn as a person reads it: one row per provider, the budget, the folded text.

``composer preview`` and ``composer audit show`` print a turn with ``print_preview``, its rows
worded by ``composer.inspect.words`` (as the console words them). Piped,
the table is plain text as narrow as its names (an outcome too long for it, an error, becomes
a numbered note under it); on a terminal it is a rich table coloured by outcome.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from composer.cli.output import Output, printable
from composer.inspect.candidates import CANDIDATE_HEADERS, candidate_rows, summary
from composer.inspect.words import HEADERS, row_cells

if TYPE_CHECKING:
    from composer.inspect.preview import Preview

__all__ = ["print_explanations", "print_preview"]

_OUTCOME_STYLE: dict[str, str] = {
    "fired": "green",
    "cached": "green",
    "failed": "red",
    "timeout": "red",
    "over_max_tokens": "yellow",
    "over_budget": "yellow",
}

_RIGHT = {2, 3, 5, 6}

_OUTCOME_WIDTH = 60
"""Widest outcome cell of the plain table; a longer one (an error) becomes a numbered note,
so that a piped table stays as narrow as its names."""


def print_preview(
    preview: Preview,
    shown: str,
    env: str | None,
    output: Output,
    redact: Callable[[str], str] | None = None,
    *,
    explain: bool = False,
) -> None:
    """Print ``preview`` of manifest ``shown``; every cell and text through ``redact`` first
    (None: the text is already masked, as an audit line's is). ``explain``: each provider's
    candidates after the budget line."""
    mask = redact if redact is not None else _as_is
    rows = [
        [printable(output.relative(mask(cell))) for cell in row_cells(row)] for row in preview.rows
    ]
    output.print(f"manifest: {shown}" + (f" (env {env})" if env else ""))
    output.print(f"instruction: {_quoted(mask(preview.instruction))}")
    if preview.system is None:
        output.print("system: none (--no-system): no provider is called (ADR-0008 D4)")
    elif preview.default_system:
        output.print(
            f"system: a stand-in {_quoted(preview.system)}, so that providers are called "
            "(give --system for the real one)"
        )
    output.print("")
    if output.colour:
        _print_rich_table(rows, [row.outcome for row in preview.rows], output)
    else:
        notes = _note_long_outcomes(rows)
        widths = [max(len(r[i]) for r in [HEADERS, *rows]) for i in range(len(HEADERS))]
        for cells in [HEADERS, *rows]:
            padded = [
                cell.rjust(widths[i]) if i in _RIGHT else cell.ljust(widths[i])
                for i, cell in enumerate(cells)
            ]
            output.print("  ".join(padded).rstrip())
        if notes:
            output.print("")
            for note in notes:
                output.print(note)
    output.print("")
    output.print(f"budget: {preview.used} of {preview.budget} tokens used")
    output.print("")
    if explain or preview.explanations:
        print_explanations(preview.explanations, output, mask)
    output.print("----- model-visible guidance: system + injected blocks + guidance -----")
    output.block(mask(preview.guidance or ""))
    output.print("----- end -----")


def print_explanations(
    explanations: list[dict[str, Any]], output: Output, mask: Callable[[str], str]
) -> None:
    """Each provider's line (``summary``) and its candidates, near misses first."""
    output.print("candidates, near misses first:")
    for explanation in explanations:
        output.print("")
        output.print(printable(mask(summary(explanation))))
        rows = [[printable(mask(cell)) for cell in row] for row in candidate_rows(explanation)]
        if not rows:
            continue
        widths = [max(len(r[i]) for r in [CANDIDATE_HEADERS, *rows]) for i in range(3)]
        for cells in [CANDIDATE_HEADERS, *rows]:
            fate, score, tokens, pid = cells
            line = f"  {fate.ljust(widths[0])}  {score.rjust(widths[1])}  {tokens.rjust(widths[2])}"
            output.print(f"{line}  {pid}")
    output.print("")


def _as_is(text: str) -> str:
    return text


def _note_long_outcomes(rows: list[list[str]]) -> list[str]:
    """Replace each outcome cell wider than ``_OUTCOME_WIDTH`` by ``label [n]``; the notes."""
    notes: list[str] = []
    for cells in rows:
        outcome = cells[4]
        if len(outcome) <= _OUTCOME_WIDTH:
            continue
        label, _, detail = outcome.partition(": ")
        notes.append(f"[{len(notes) + 1}] {cells[0]}: {detail}")
        cells[4] = f"{label} [{len(notes)}]"
    return notes


def _quoted(text: str) -> str:
    """``text`` as a JSON string literal, so newlines and quotes show; masked beforehand."""
    return json.dumps(text, ensure_ascii=False)


def _print_rich_table(rows: list[list[str]], outcomes: list[str], output: Output) -> None:
    from rich.console import Console  # only paid for on a terminal
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, pad_edge=False, header_style="bold")
    for i, header in enumerate(HEADERS):
        table.add_column(header, justify="right" if i in _RIGHT else "left")
    for cells, outcome in zip(rows, outcomes, strict=True):
        # Text, not str: a name or an error such as "[/x]" is not rich markup.
        table.add_row(*(Text(cell) for cell in cells), style=_OUTCOME_STYLE.get(outcome))
    Console(file=output.out, highlight=False, emoji=False).print(table)
