"""One real turn, explained per declared provider: ``composer preview``, the console's preview
form, ``composer test`` and a library's ``run_preview`` all run it here.

The ADR's four report lists cannot say *why* a provider was skipped (over its own
``max_tokens`` or over the total budget) nor how long it took; the registry's outcome records
can. This module runs the ordinary ``prepare_turn`` on the manifest's own registry and reads
each row from those records (plus ``disabled`` for the providers the engine never built).
With ``explain`` the turn explains itself (``composer.outcomes.explain_turns``): each ranking
provider's candidates with their fates, in ``Preview.explanations``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field

from composer.build import build_registry
from composer.catalog import ProviderTypes
from composer.hooks import Progress
from composer.inspect.described import DescribedModel
from composer.manifest import Manifest, map_strings
from composer.outcomes import Fate, Outcome, ProviderOutcome, explain_turns
from composer.registry import ProviderReport
from composer.turn import Branch, Instruction, prepare_turn

__all__ = [
    "DEFAULT_SYSTEM",
    "DocumentBudget",
    "DocumentCandidate",
    "DocumentExplanation",
    "DocumentFired",
    "DocumentReport",
    "DocumentRow",
    "Preview",
    "PreviewDocument",
    "ProviderRow",
    "fill_row",
    "first_line",
    "run_preview",
]

DEFAULT_SYSTEM = "You are a helpful assistant.\n"
"""System text used when none is given, so that providers are called (ADR D4: a systemless
branch calls none)."""


@dataclass
class ProviderRow:
    """What happened to one declared provider this turn."""

    name: str
    type: str
    priority: int
    max_tokens: int | None
    outcome: Outcome
    tokens: int | None = None
    ms: float | None = None
    error: str | None = None


@dataclass
class Preview:
    """A previewed turn: one row per declared provider, the budget, the folded text."""

    instruction: str
    system: str | None
    default_system: bool
    budget: int
    rows: list[ProviderRow]
    report: ProviderReport
    guidance: str | None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def used(self) -> int:
        """Tokens of the retained blocks."""
        return sum(int(row["tokens"]) for row in self.report.fired)

    @property
    def explanations(self) -> list[dict[str, Any]]:
        """Each registered provider's explanation in its JSON shape (empty unless the turn
        explained itself or the manifest deduplicates or fills)."""
        return [e.to_json() for e in self.report.explanations]


def first_line(error: BaseException) -> str:
    """``Type: first line of the message``: how a failure is named in a row or a log line."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


async def run_preview(
    manifest: Manifest,
    instruction: str,
    *,
    system: str | None = DEFAULT_SYSTEM,
    branch_name: str | None = None,
    branch_metadata: Mapping[str, Any] | None = None,
    types: ProviderTypes | None = None,
    progress: Callable[[str], Progress | None] | None = None,
    close_manifest: bool = True,
    explain: bool = False,
) -> Preview:
    """Build the manifest's registry, run one turn through ``prepare_turn``, explain each row.

    ``system=None`` previews a systemless branch (every provider reported skipped, none
    called). Error texts are passed through ``manifest.redact`` so no secret is shown.
    ``branch_metadata`` is what templates see as ``branch.metadata``. ``close_manifest``
    False leaves the manifest's shared state open, for a server that keeps serving it.
    ``explain`` lists every candidate each ranking provider considered (``explanations``).
    """
    registry = build_registry(manifest, types=types)
    branch = Branch(system, name=branch_name, metadata=dict(branch_metadata or {}))
    branch._context_providers = registry
    try:
        if progress is not None and system is not None:
            await registry.warm_up(progress)
        with explain_turns(explain):
            turn = await prepare_turn(branch, Instruction(instruction))
    finally:
        await registry.aclose()
        if close_manifest:
            await manifest.aclose()  # one-shot: the shared pools and indexes go too
    report = turn.report or ProviderReport()
    outcomes = iter(report.outcomes)

    rows: list[ProviderRow] = []
    for config in manifest.providers:
        row = ProviderRow(config.name, config.type, config.priority, config.max_tokens, "disabled")
        rows.append(row)
        if not config.enabled:
            continue
        record = next(outcomes)  # one per registered provider, in registration order
        fill_row(row, record, redact=manifest.redact)
    return Preview(
        instruction=instruction,
        system=system,
        default_system=system == DEFAULT_SYSTEM,
        budget=registry.budget,
        rows=rows,
        report=report,
        guidance=turn.guidance,
    )


def fill_row(
    row: ProviderRow, record: ProviderOutcome, *, redact: Callable[[str], str] | None = None
) -> None:
    """Set ``row`` from the registry's outcome record of its provider (``composer audit show``
    fills rows from audit lines the same way)."""
    row.outcome = record.outcome
    row.tokens, row.ms = record.tokens, record.duration_ms
    if record.error_type is not None:
        error = f"{record.error_type}: {record.error}" if record.error else record.error_type
        row.error = redact(error) if redact is not None else error


class _Document(DescribedModel):
    pass


class DocumentRow(_Document):
    """One declared provider (``providers[i]`` of the JSON document)."""

    name: str
    """Its ``name``."""
    type: str
    """Its ``type``."""
    priority: int
    """Its ``priority``."""
    max_tokens: int | None
    """Its ``max_tokens``; null: no cap of its own."""
    outcome: Outcome
    """As the registry, the HTTP API and the audit log name it; ``disabled`` for a provider
    with ``enabled: false`` (never registered)."""
    tokens: int | None
    """Its block's tokens (fired and skipped rows)."""
    ms: float | None
    """How long its call took; null when it was not called."""
    error: str | None
    """``Type: first line`` of a failure, secrets masked."""


class DocumentBudget(_Document):
    """The budget and what the turn used of it."""

    total: int
    """The manifest's budget."""
    used: int
    """Tokens of the blocks admitted."""


class DocumentFired(_Document):
    """An admitted provider (the report's ``fired``)."""

    provider_name: str
    """Its name."""
    tokens: int
    """Its block's tokens."""


class DocumentCandidate(_Document):
    """One item a ranking provider considered."""

    id: str
    """Stable between turns: ``path#Title > Section`` for a passage (``hit.path`` and
    ``hit.heading``), the item id for a memory item, ``paragraph N`` for a paragraph dedup
    removed from a provider that does not rank."""
    score: float | None
    """The provider's own score (null: it does not score)."""
    tokens: int | None
    """What the item adds to its block alone (null unless the turn explained itself)."""
    fate: Fate
    """``admitted``, ``below_min_score``, ``beyond_top_k`` (past ``top_k`` or a memory
    query's ``limit``), ``cut_to_fit`` (left out to fit the provider's cap, or the budget
    when refitted), ``duplicate`` or ``lost_with_block`` (its block was over_max_tokens or
    over_budget)."""
    duplicate_of: str | None
    """For a duplicate: the provider whose copy was kept."""
    duplicate_of_id: str | None
    """For a duplicate: the id of the copy kept (null for a plain block's paragraph)."""


class DocumentExplanation(_Document):
    """Why one registered provider's block is in the turn, or not."""

    provider: str
    """Its name."""
    outcome: Outcome
    """Its outcome, as in ``providers``."""
    tokens: int | None
    """Its block's tokens."""
    needed: int | None
    """Over the budget, over its cap, or refitted: the tokens its whole block needed."""
    left: int | None
    """Over the budget or refitted: what the budget had left when its turn came."""
    cap: int | None
    """Over its cap: its ``max_tokens``."""
    taken_by: list[str]
    """Over the budget: the providers admitted before it (by priority), which took the rest."""
    refitted: bool
    """Fitted to what the budget had left (``runtime.admission: fill``)."""
    candidates: list[DocumentCandidate] | None
    """What it considered, best first; null for a provider that does not rank, or whose
    ranking is unknown this turn (failed, served from its cache)."""
    candidates_left_off: int
    """Candidates not listed (an audit line lists a bounded number)."""


class DocumentReport(_Document):
    """The registry's own ProviderReport lists, unchanged (ADR-0008 D5)."""

    blocks: list[str]
    """The admitted blocks' texts, in declaration order."""
    fired: list[DocumentFired]
    """The admitted providers, with their tokens."""
    skipped: list[str]
    """Providers left out: empty, guarded, over their cap or the budget, not called."""
    failed: list[str]
    """Providers that raised or timed out."""


class PreviewDocument(_Document):
    """The stable shape of ``composer preview --json`` (version 2).

    Version 2 names outcomes as the registry, the HTTP API and the audit log do
    (``over_max_tokens``, ``over_budget``, ``guarded``); version 1 said ``skipped_max_tokens``,
    ``skipped_budget``, and ``empty`` with ``when: false``, and had a ``when`` field.
    """

    version: Literal[2] = 2
    """This shape's version."""
    manifest: str
    """The manifest file (``audit show``: as the audit line names it)."""
    env: str | None
    """``--env`` as given (``audit show``: the environment the line names)."""
    instruction: str
    """The user turn."""
    system: str | None
    """The branch's system text; null with ``--no-system``."""
    default_system: bool
    """The system text is preview's stand-in (no ``--system`` was given)."""
    budget: DocumentBudget
    """Tokens: the budget and what was used."""
    providers: list[DocumentRow]
    """Each declared provider, in declaration order."""
    report: DocumentReport
    """The registry's report of the turn."""
    guidance: str | None
    """The folded text the model would see: system text, blocks, guidance."""
    explanations: list[DocumentExplanation] = Field(default=[])
    """One per registered provider with ``--explain`` (or when the manifest sets
    ``runtime.dedup``, ``runtime.admission: fill`` or ``runtime.explain``); else empty."""

    @classmethod
    def of(
        cls,
        preview: Preview,
        *,
        manifest: str,
        env: str | None,
        redact: Callable[[str], str] | None = None,
    ) -> PreviewDocument:
        """The document of ``preview``; ``redact`` is applied to every string in it.

        Masking values rather than the serialized text keeps the JSON valid (a variable's value
        may be a number that also occurs in the document) and catches a secret that JSON
        escaping would have changed (a quote, a backslash, a newline).
        """
        document = cls._of(preview, manifest=manifest, env=env)
        if redact is None:
            return document
        return cls.model_validate(map_strings(document.model_dump(mode="json"), redact))

    @classmethod
    def _of(cls, preview: Preview, *, manifest: str, env: str | None) -> PreviewDocument:
        report = preview.report
        return cls(
            manifest=manifest,
            env=env,
            instruction=preview.instruction,
            system=preview.system,
            default_system=preview.default_system,
            budget=DocumentBudget(total=preview.budget, used=preview.used),
            providers=[DocumentRow(**vars(row)) for row in preview.rows],
            report=DocumentReport(
                blocks=list(report.blocks),
                fired=[DocumentFired(**row) for row in report.fired],
                skipped=list(report.skipped),
                failed=list(report.failed),
            ),
            guidance=preview.guidance,
            explanations=[DocumentExplanation.model_validate(e) for e in preview.explanations],
        )
