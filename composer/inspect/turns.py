"""The audit log (``runtime.audit``) read back, for ``composer audit list|show|diff`` and
the console's turn pages.

``preview_of`` rebuilds from one audit line the ``Preview`` that ``composer preview`` would
have printed for that turn (so ``show`` prints it with the same code); ``describe_changes``
lists what changed between two turns, provider by provider. A turn is named by its id or a
unique prefix of it; a log is a file or a PostgreSQL table (a DSN and a schema), read
through ``composer.observe.audit.reader``. Texts are in a line only when the manifest had ``keep_text``; otherwise
their SHA-256 stands in for them, which is enough to tell whether two turns saw the same block.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from composer.inspect.words import counted

if TYPE_CHECKING:  # imported when a turn is shown: --help stays light
    from composer.inspect.preview import Preview
    from composer.observe.record import (
        AuditBranch,
        AuditExplanation,
        AuditLine,
        AuditProvider,
        AuditText,
    )
    from composer.outcomes import Explanation

__all__ = [
    "OUTCOME_MARKS",
    "branch_label",
    "describe_changes",
    "explanation_of",
    "first_words",
    "list_line",
    "newest_turns",
    "preview_of",
]


def newest_turns(
    location: str | Path,
    limit: int,
    *,
    schema: str = "composer",
    branch: str | None = None,
    principal: str | None = None,
) -> tuple[list[AuditLine], int, list[tuple[int, str]]]:
    """The newest ``limit`` turns of a file or a DSN's table (of ``branch`` and ``principal``
    when given), newest first; how many match; the lines that were not audit lines."""
    from composer.observe.audit.reader import read_turns

    page = read_turns(location, schema=schema, limit=limit, branch=branch, principal=principal)
    return page.lines, page.total, page.skipped


OUTCOME_MARKS = {
    "fired": "+",
    "cached": "c",
    "empty": ".",
    "guarded": "w",
    "over_max_tokens": "m",
    "over_budget": "b",
    "failed": "F",
    "timeout": "T",
    "not_called": "-",
    "disabled": "d",
}
"""One character per provider outcome, for the strip in ``composer audit list``."""


def first_words(line: AuditLine, words: int = 8) -> str:
    """The instruction's first ``words`` (when the log kept it), else its digest and size."""
    instruction = line.instruction
    if instruction is None:
        return "-"
    if instruction.text is not None:
        parts = instruction.text.split()
        return " ".join(parts[:words]) + (" ..." if len(parts) > words else "")
    return f"(sha256 {instruction.sha256[:12]}, {counted(instruction.chars, 'char')})"


def list_line(line: AuditLine, words: int = 8) -> str:
    """One turn on one line: time, turn id, branch, principal, the instruction's first words
    (when the log kept it), tokens of budget, a strip of its providers' outcomes, and
    ``unanswered`` when its client was not answered (a server's state store failed after the
    providers ran: the client's retry is the served turn)."""
    said = first_words(line, words)
    if line.instruction is not None and line.instruction.text is not None:
        said = f'"{said}"'
    strip = "".join(OUTCOME_MARKS.get(p.outcome, "?") for p in line.providers)
    budget = "-" if line.budget is None else str(line.budget)
    branch = branch_label(line.branch)
    principal = line.branch.principal or "-"
    unanswered = "" if line.answered else "  unanswered"
    return (
        f"{line.time[:19]}  {line.turn_id or '-'}  {branch}  {principal}  "
        f"{line.tokens_used}/{budget}  [{strip}]{unanswered}  {said}"
    )


def _shown(text: AuditText | None, what: str) -> str:
    if text is None:
        return f"({what} not recorded)"
    if text.text is not None:
        return text.text
    return f"(not kept: sha256 {text.sha256[:16]}, {counted(text.chars, 'character')})"


def preview_of(line: AuditLine) -> Preview:
    """The ``Preview`` that ``composer preview`` would print for the turn of ``line``."""
    from composer.inspect.preview import Preview, ProviderRow, fill_row
    from composer.outcomes import ProviderOutcome
    from composer.registry import ProviderReport

    rows: list[ProviderRow] = []
    outcomes: list[ProviderOutcome] = []
    blocks: list[str] = []
    kept = True
    for provider in line.providers:
        record = ProviderOutcome(
            provider.name,
            provider.outcome,
            provider.tokens,
            provider.duration_ms,
            provider.error_type,
            provider.error,
        )
        outcomes.append(record)
        row = ProviderRow(
            provider.name,
            provider.type or "-",
            provider.priority or 0,
            provider.max_tokens,
            "disabled",
        )
        fill_row(row, record)
        rows.append(row)
        if provider.block is not None:
            kept = kept and provider.block.text is not None
            blocks.append(
                provider.block.text
                if provider.block.text is not None
                else f"[{provider.name}: sha256 {provider.block.sha256}, {counted(provider.block.tokens, 'token')}]"
            )
    report = ProviderReport(
        blocks,
        [{"provider_name": f.provider_name, "tokens": f.tokens} for f in line.fired],
        list(line.skipped),
        list(line.failed),
        line.turn_id,
        line.budget,
        line.tokens_used,
        outcomes,
        explanations=[explanation_of(e) for e in line.explanations or ()],
    )
    system = line.system.text if line.system is not None else None
    if kept and system is not None:
        guidance: str | None = system + "\n".join(blocks) + (line.guidance or "")
    else:
        guidance = "(text not kept: the audit log was written without keep_text)\n" + "\n".join(
            blocks
        )
    return Preview(
        instruction=_shown(line.instruction, "instruction"),
        system=_shown(line.system, "system text"),
        default_system=False,
        budget=line.budget or 0,
        rows=rows,
        report=report,
        guidance=guidance,
    )


def explanation_of(written: AuditExplanation) -> Explanation:
    """An audit line's explanation as the engine's ``Explanation`` (what preview prints)."""
    from composer.outcomes import Candidate, Explanation

    candidates = None
    if written.candidates is not None:
        candidates = [
            Candidate(
                c.id,
                c.score,
                c.fate,
                text=c.text or "",
                tokens=c.tokens,
                duplicate_of=c.duplicate_of,
                duplicate_of_id=c.duplicate_of_id,
            )
            for c in written.candidates
        ]
    return Explanation(
        written.provider,
        written.outcome,
        written.tokens,
        candidates,
        needed=written.needed,
        left=written.left,
        cap=written.cap,
        taken_by=list(written.taken_by),
        refitted=written.refitted,
        left_off=written.candidates_left_off,
    )


def describe_changes(first: AuditLine, second: AuditLine) -> list[str]:
    """What differs between two turns, one line each (``~`` changed, ``+``/``-`` one side),
    each changed block followed by its changed lines (indented)."""
    return list(_changes(first, second))


def _changes(a: AuditLine, b: AuditLine) -> Iterator[str]:
    if a.manifest != b.manifest:
        yield f"~ manifest: {_manifest_label(a)} -> {_manifest_label(b)}"
    if (a.branch.id, a.branch.name) != (b.branch.id, b.branch.name):
        yield f"~ branch: {branch_label(a.branch)} -> {branch_label(b.branch)}"
    if a.branch.principal != b.branch.principal:
        yield f"~ principal: {a.branch.principal or '-'} -> {b.branch.principal or '-'}"
    if a.budget != b.budget:
        yield f"~ budget: {a.budget} -> {b.budget}"
    if a.tokens_used != b.tokens_used:
        yield f"~ tokens used: {a.tokens_used} -> {b.tokens_used}"
    for label, x, y in (
        ("instruction", a.instruction, b.instruction),
        ("system", a.system, b.system),
    ):
        if (x and x.sha256) != (y and y.sha256):
            yield f"~ {label}: {_shown(x, label)!r} -> {_shown(y, label)!r}"
    for first in a.providers:
        if b.provider(first.name) is None:
            yield f"- {first.name}: only in the first turn ({first.outcome})"
    for second in b.providers:
        before = a.provider(second.name)
        if before is None:
            tokens = "" if second.tokens is None else f", {counted(second.tokens, 'token')}"
            yield f"+ {second.name}: only in the second turn ({second.outcome}{tokens})"
        else:
            yield from _provider_changes(before, second)
    yield from _candidate_changes(a, b)


def _candidate_changes(a: AuditLine, b: AuditLine) -> Iterator[str]:
    """Per provider explained in both turns: the candidates that entered the model-visible
    text (``+``) and those that left it (``-``)."""
    from composer.inspect.candidates import candidate_changes

    def shape(line: AuditLine) -> list[dict[str, object]]:
        return [e.model_dump() for e in line.explanations or ()]

    for provider, changes in candidate_changes(shape(a), shape(b)).items():
        for entered in changes.entered:
            yield f"+ {provider}: {entered} entered the text"
        for left in changes.left:
            yield f"- {provider}: {left} left the text"


def _provider_changes(first: AuditProvider, second: AuditProvider) -> Iterator[str]:
    name = second.name
    if first.outcome != second.outcome:
        yield f"~ {name}: outcome {first.outcome} -> {second.outcome}"
    if None not in (first.tokens, second.tokens) and first.tokens != second.tokens:
        yield f"~ {name}: tokens {first.tokens} -> {second.tokens}"
    if (first.error_type, first.error) != (second.error_type, second.error):
        yield f"~ {name}: error {_error_label(first)} -> {_error_label(second)}"
    old, new = first.block, second.block
    if old is None or new is None or old.sha256 == new.sha256:
        return
    yield f"~ {name}: block changed (sha256 {old.sha256[:16]} -> {new.sha256[:16]})"
    if old.text is not None and new.text is not None:
        lines = difflib.unified_diff(old.text.splitlines(), new.text.splitlines(), lineterm="", n=1)
        for text in list(lines)[2:]:  # the ---/+++ header names nothing useful here
            yield f"    {text}"


def branch_label(branch: AuditBranch) -> str:
    """A branch as the audit commands name it: its id, then its name when it has one."""
    return branch.id + (f" ({branch.name})" if branch.name else "")


def _manifest_label(line: AuditLine) -> str:
    manifest = line.manifest
    shown = manifest.path or "(unknown manifest)"
    return shown + (f" ({manifest.sha256})" if manifest.sha256 else "")


def _error_label(provider: AuditProvider) -> str:
    if provider.error_type is None and provider.error is None:
        return "(none)"
    return ": ".join(part for part in (provider.error_type, provider.error) if part)
