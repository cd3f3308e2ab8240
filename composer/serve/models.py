"""The HTTP API's bodies, as pydantic models: validated on the way in, documented in OpenAPI.

Requests forbid unknown keys, so a misspelt field is a 422 rather than silently ignored.
Responses carry the ADR's four report lists unchanged and, beside them, the fields this
project adds (turn id, budget, tokens used, one typed outcome per provider).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from composer.outcomes import FATES, Outcome
from composer.registry import ProviderReport

__all__ = [
    "BRANCH_ID_PATTERN",
    "MAX_ACTION_RESPONSES",
    "MAX_DEPTH",
    "MAX_NODES",
    "OUTCOMES",
    "AuditSinkStatus",
    "Bounded",
    "BranchIn",
    "CandidateOut",
    "ErrorBody",
    "ErrorDetail",
    "ExplanationOut",
    "Fired",
    "Health",
    "InstructionIn",
    "ManifestOut",
    "OutcomeOut",
    "Readiness",
    "ReloadError",
    "ReloadStatus",
    "ReportOut",
    "StateOut",
    "TurnRequest",
    "TurnResponse",
    "WritebackBranch",
    "WritebackRequest",
    "WritebackResponse",
    "WritebackResultOut",
]

MAX_NODES = 10_000
"""Values (strings, numbers, items, keys) in one request's data: guidance, context, metadata,
or one writeback's action responses."""
MAX_DEPTH = 32
"""Nesting of that data."""
MAX_ACTION_RESPONSES = 1000
"""Action responses in one writeback (more: ``413``)."""

BRANCH_ID_PATTERN = r"^[A-Za-z0-9._~:@-]{1,128}$"
"""Branch ids are path segments (``/v1/branches/{id}/writeback``): unreserved URL characters."""

OUTCOMES: tuple[str, ...] = tuple(name for name in get_args(Outcome) if name != "disabled")
"""The outcomes a served turn can report: a disabled provider is never registered, so its
report holds none (``composer preview`` lists it)."""


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _bounded(value: Any) -> Any:
    """``value`` if it holds at most ``MAX_NODES`` values nested at most ``MAX_DEPTH`` deep:
    work on a request (rendering its guidance as YAML, keying its writeback) stays small."""
    count = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        count += 1
        if count > MAX_NODES:
            raise ValueError(f"more than {MAX_NODES} values")
        if isinstance(item, dict | list):
            if depth > MAX_DEPTH:
                raise ValueError(f"nested more than {MAX_DEPTH} deep")
            children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return value


Bounded = Annotated[Any, AfterValidator(_bounded)]


class BranchIn(_Body):
    """The conversation branch the turn belongs to; its registry is kept by ``id``."""

    id: str = Field(pattern=BRANCH_ID_PATTERN, description="The branch's id (kept per id).")
    name: str | None = Field(None, description="What templates see as `branch.name`.")
    metadata: Annotated[dict[str, Any], AfterValidator(_bounded)] = Field(
        default_factory=dict, description="What templates see as `branch.metadata`."
    )


class InstructionIn(_Body):
    """The user's turn."""

    text: str = Field(description="The instruction text (templates: `instruction.text`).")
    guidance: Bounded = Field(
        None,
        description="Guidance folded after the injected blocks: text, or data rendered as YAML "
        f"(at most {MAX_NODES} values, {MAX_DEPTH} deep).",
    )
    context: Bounded = Field(
        None,
        description="What templates see as `instruction.context` (bounded like guidance).",
    )


class TurnRequest(_Body):
    """One turn: the branch, its system text and the instruction."""

    branch: BranchIn
    system: str | None = Field(
        None,
        description="The branch's system text for this turn. Without it no provider is called "
        "and every one is reported skipped (ADR-0008 D4).",
    )
    instruction: InstructionIn
    explain: bool = Field(
        False,
        strict=True,
        description="Explain the turn: each ranking provider's candidates (near misses "
        "included) with score, tokens and fate, in the response's `explanations`. A second, "
        "deeper search per ranking provider: about twice the gather's cost.",
    )


class Fired(_Body):
    provider_name: str
    tokens: int


class OutcomeOut(_Body):
    """What became of one registered provider this turn."""

    name: str
    outcome: Literal[OUTCOMES]  # type: ignore[valid-type]
    tokens: int | None = None
    duration_ms: float | None = None
    error_type: str | None = None
    error: str | None = Field(None, description="First line of a failure, secrets masked.")


class ReportOut(_Body):
    """The turn's ProviderReport: ADR-0008's four lists, then this project's fields."""

    blocks: list[str]
    fired: list[Fired]
    skipped: list[str]
    failed: list[str]
    turn_id: str | None
    budget: int | None
    tokens_used: int
    outcomes: list[OutcomeOut]

    @classmethod
    def of(cls, report: ProviderReport) -> ReportOut:
        return cls(
            blocks=list(report.blocks),
            fired=[Fired(**row) for row in report.fired],
            skipped=list(report.skipped),
            failed=list(report.failed),
            turn_id=report.turn_id,
            budget=report.budget,
            tokens_used=report.tokens_used,
            outcomes=[OutcomeOut(**record._asdict()) for record in report.outcomes],
        )


class CandidateOut(_Body):
    """One item a ranking provider considered (``composer.outcomes.Candidate``)."""

    id: str = Field(description="`path#Title > Section` for a passage, the item id for memory.")
    score: float | None = None
    tokens: int | None = None
    fate: Literal[FATES]  # type: ignore[valid-type]
    duplicate_of: str | None = None
    duplicate_of_id: str | None = None


class ExplanationOut(_Body):
    """Why one registered provider's block is in the turn, or not."""

    provider: str
    outcome: Literal[OUTCOMES]  # type: ignore[valid-type]
    tokens: int | None = None
    needed: int | None = None
    left: int | None = None
    cap: int | None = None
    taken_by: list[str] = Field(default_factory=list)
    refitted: bool = False
    candidates: list[CandidateOut] | None = None
    candidates_left_off: int = 0


class TurnResponse(_Body):
    """What the model is sent for this turn, and the report of how it was composed."""

    branch_id: str
    guidance: str | None = Field(
        description="system + injected blocks + guidance (ADR-0008 D4); null when the request "
        "had neither system text nor guidance."
    )
    report: ReportOut | None = Field(
        description="null when the manifest has no enabled provider (no provider pass ran)."
    )
    context: str | None = Field(
        None,
        description="With `runtime.placement: stable_prefix`: the turn's changing blocks as one "
        "delimited block, to send after the history and before the user's text (`guidance` "
        "then folds only the stable blocks); null otherwise.",
    )
    explanations: list[ExplanationOut] | None = Field(
        None,
        description="With `explain` (or a manifest that explains, deduplicates or fills): one "
        "per registered provider, its candidates and why each left out was; null otherwise.",
    )


class WritebackBranch(_Body):
    """The branch a writeback belongs to, as its turn stated it (its id is in the path)."""

    name: str | None = Field(None, description="What templates see as `branch.name`.")
    metadata: Annotated[dict[str, Any], AfterValidator(_bounded)] = Field(
        default_factory=dict, description="What templates see as `branch.metadata`."
    )


class WritebackRequest(_Body):
    """Action responses (tool results) to hand to the providers' writeback hooks (ADR D7)."""

    action_responses: Annotated[list[Any], AfterValidator(_bounded)] = Field(
        description=f"At most {MAX_ACTION_RESPONSES} (more: 413), holding at most {MAX_NODES} "
        f"values nested at most {MAX_DEPTH} deep."
    )
    branch: WritebackBranch | None = Field(
        None,
        description="The branch's name and metadata, bound like a turn's. Without it the "
        "branch is as this principal's last turn left it; a branch the server does not know "
        "(never seen, or dropped) then gets 409.",
    )


class WritebackResultOut(_Body):
    """What one provider's writeback hook did."""

    name: str
    stored: int | None = Field(description="Items newly stored (null: the hook does not say).")
    error: str | None = Field(description="First line of its failure, secrets masked.")
    cut: int = Field(
        0, description="Of the items stored, how many were cut to the provider's size cap."
    )


class WritebackResponse(_Body):
    """200: every hook succeeded; 207: some failed; 503: all failed (nothing was kept)."""

    branch_id: str
    providers: list[WritebackResultOut] = Field(
        description="One entry per provider with a writeback hook, in manifest order."
    )
    stored: int = Field(description="Items newly stored, over all providers.")


class ManifestOut(_Body):
    """The effective manifest (after extends and overlays), every secret as `***`."""

    path: str | None
    env: str | None
    manifest: dict[str, Any]


class Health(_Body):
    status: Literal["ok"] = "ok"


class StateOut(_Body):
    """Where the server keeps its branches' turn counts and last context."""

    kind: Literal["process", "postgres", "redis"]
    where: str = Field(description="The store, its password masked.")
    shared: bool = Field(description="Whether every replica sees it (`--state`).")
    error: str | None = Field(None, description="Why the store did not answer, if it did not.")


class AuditSinkStatus(_Body):
    """The audit sink as a probe sees it: never where it writes (no path, no DSN)."""

    kind: Literal["file", "postgres", "stdout"]
    writing: bool | None = Field(
        description=(
            "Whether its last batch was written (false: the file or the database failed); "
            "null before the first batch."
        )
    )
    lost: int = Field(
        description="Lines lost so far: dropped (queue full) or failed (the sink refused them)."
    )


class ReloadError(_Body):
    """Why the last edit of the manifest was not served: where, and what."""

    message: str = Field(description="The first error, `path:line:column: message`, masked.")
    path: str | None = Field(None, description="The file it is in (null: not a manifest error).")
    line: int | None = None
    column: int | None = None
    time: float = Field(description="When the edit was refused (Unix time).")


class ReloadStatus(_Body):
    """The served manifest as it follows its files (`--watch`, SIGHUP)."""

    watching: Literal["events", "poll", "manual"] | None = Field(
        description=(
            "How edits are noticed: file events, polling, or only on SIGHUP (`manual`); null "
            "before the manifest is loaded."
        )
    )
    generation: int = Field(description="1 for the manifest loaded first, +1 each reload.")
    sha256: str | None = Field(
        description="The serving manifest's revision, as the audit line's `manifest.sha256`."
    )
    reloads: int = Field(description="New manifests served after the first.")
    failures: int = Field(description="Edits refused (the last good manifest kept serving).")
    last_good_load: float | None = Field(
        description="When the serving manifest was loaded (Unix time)."
    )
    error: ReloadError | None = Field(
        None,
        description=(
            "The last edit that did not load, until one does; the server stays ready on the "
            "last good manifest."
        ),
    )


class Readiness(_Body):
    status: Literal["ready", "starting", "stopping"] = Field(
        description="`stopping`: SIGTERM came, the server drains (`--drain-delay`)."
    )
    warm_up_failures: dict[str, str] = Field(
        default_factory=dict,
        description="Providers whose warm-up failed (they fail again, contained, in their turns).",
    )
    state: StateOut | None = Field(
        None, description="The branch state store: not ready while a shared one does not answer."
    )
    audit: AuditSinkStatus | None = Field(
        None,
        description=(
            "The manifest's `runtime.audit` sink, when it has one; a failing sink loses lines "
            "(counted) and never makes the server unready: turns go on."
        ),
    )
    reload: ReloadStatus | None = Field(
        None, description="With a manifest that follows its files: its revision and last error."
    )


class ErrorDetail(_Body):
    type: str = Field(description="A stable word: invalid_body, unauthorized, too_large, ...")
    message: str
    details: list[dict[str, Any]] | None = Field(
        None, description="For invalid_body: each problem's location, message and type."
    )


class ErrorBody(_Body):
    """Every error answer: a JSON body, never a traceback."""

    error: ErrorDetail
