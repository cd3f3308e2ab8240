"""What the console's pages show, as plain data for the templates (no HTML here).

A turn is shown from its audit line exactly as ``composer audit show`` prints it: the rows come
from ``preview_of`` and ``row_cells``, the changes between two turns from ``describe_changes``.
What is new here is only the arrangement: the budget as segments of a bar, each block under
the name of the provider that wrote it, and per-provider counts over a window of turns.
"""

from __future__ import annotations

import datetime as _dt
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from composer.inspect.candidates import candidate_rows, summary
from composer.inspect.turns import OUTCOME_MARKS, describe_changes, first_words, preview_of
from composer.inspect.words import OUTCOME_TEXT, row_cells

if TYPE_CHECKING:
    from composer.inspect.preview import Preview
    from composer.observe.record import AuditLine, AuditProvider

__all__ = [
    "GROUPS",
    "PALETTE",
    "SAMPLES_KEPT",
    "WINDOWS",
    "Block",
    "Compared",
    "ListRow",
    "Mark",
    "ProviderStats",
    "Segment",
    "Side",
    "TurnView",
    "compare",
    "list_row",
    "provider_stats",
    "since",
    "turn_view",
    "turn_view_of_preview",
]

WINDOWS: dict[str, _dt.timedelta | None] = {
    "15m": _dt.timedelta(minutes=15),
    "1h": _dt.timedelta(hours=1),
    "6h": _dt.timedelta(hours=6),
    "24h": _dt.timedelta(days=1),
    "7d": _dt.timedelta(days=7),
    "all": None,
}
"""The time windows a page may ask for (a closed set: a window is never parsed from text)."""

SAMPLES_KEPT = 10_000
"""Durations kept per provider for the percentiles: the newest, whatever the window holds."""

PALETTE = 8
"""Colours a budget bar cycles through (``seg0`` .. ``seg7`` in the stylesheet)."""


def since(window: str, now: _dt.datetime | None = None) -> _dt.datetime | None:
    """The earliest time in ``window`` (UTC), or None for all turns."""
    span = WINDOWS.get(window)
    if span is None:
        return None
    return (now or _dt.datetime.now(_dt.UTC)) - span


@dataclass(frozen=True)
class Mark:
    """One provider's outcome in a turn's strip."""

    name: str
    outcome: str
    mark: str
    text: str


def _marks(line: AuditLine) -> list[Mark]:
    return [
        Mark(p.name, p.outcome, OUTCOME_MARKS.get(p.outcome, "?"), OUTCOME_TEXT[p.outcome])
        for p in line.providers
    ]


@dataclass(frozen=True)
class ListRow:
    """One turn on the turns page."""

    turn_id: str
    time: str
    branch: str
    principal: str
    said: str
    tokens: int
    budget: int | None
    marks: list[Mark]
    answered: bool = True


def list_row(line: AuditLine, words: int = 8) -> ListRow:
    """The turn as ``composer audit list`` shows it, split into cells."""
    branch = line.branch.id + (f" ({line.branch.name})" if line.branch.name else "")
    return ListRow(
        line.turn_id or "",
        line.time[:19].replace("T", " "),
        branch,
        line.branch.principal or "-",
        first_words(line, words),
        line.tokens_used,
        line.budget,
        _marks(line),
        line.answered,
    )


@dataclass(frozen=True)
class Segment:
    """One provider's share of the budget bar, in thousandths of the bar."""

    name: str
    tokens: int
    x: int
    width: int
    colour: int


@dataclass(frozen=True)
class Block:
    """A block the model saw, under its provider's name: its text where the log kept it,
    else its digest."""

    provider: str
    tokens: int
    text: str | None
    sha256: str | None
    colour: int


@dataclass
class TurnView:
    """One turn as the turn page shows it."""

    instruction: str
    system: str | None
    headers: list[str]
    rows: list[tuple[str, list[str]]]  # (outcome, cells)
    budget: int
    used: int
    segments: list[Segment]
    blocks: list[Block]
    guidance: str | None
    kept: bool
    explained: list[tuple[str, list[list[str]]]] = field(default_factory=list)
    """Per explained provider: its summary line and its candidates' cells, near misses first
    (``composer.inspect.candidates``)."""
    free: int = field(init=False)

    def __post_init__(self) -> None:
        self.free = max(0, 1000 - sum(s.width for s in self.segments))


def _view(preview: Preview, blocks: list[Block], kept: bool) -> TurnView:
    from composer.inspect.words import HEADERS

    scale = max(preview.budget, preview.used, 1)
    segments: list[Segment] = []
    x = 0
    for block in blocks:
        width = min(1000 - x, round(1000 * block.tokens / scale))
        segments.append(Segment(block.provider, block.tokens, x, width, block.colour))
        x += width
    return TurnView(
        instruction=preview.instruction,
        system=preview.system,
        headers=list(HEADERS),
        rows=[(row.outcome, row_cells(row)) for row in preview.rows],
        budget=preview.budget,
        used=preview.used,
        segments=segments,
        blocks=blocks,
        guidance=preview.guidance if kept else None,
        kept=kept,
        explained=[(summary(e), candidate_rows(e)) for e in preview.explanations],
    )


def turn_view(line: AuditLine) -> TurnView:
    """The turn of ``line``: ``preview_of``'s table, and its blocks by provider."""
    blocks = [
        Block(p.name, p.block.tokens, p.block.text, p.block.sha256, i % PALETTE)
        for i, p in enumerate(line.providers)
        if p.block is not None
    ]
    system = line.system
    kept = system is not None and system.text is not None
    return _view(preview_of(line), blocks, kept and all(b.text is not None for b in blocks))


def turn_view_of_preview(preview: Preview) -> TurnView:
    """A turn the console previewed: the same view, every text at hand."""
    report = preview.report
    order = {row.name: i for i, row in enumerate(preview.rows)}
    blocks = [
        Block(
            str(fired["provider_name"]),
            int(fired["tokens"]),
            text,
            None,
            order.get(str(fired["provider_name"]), 0) % PALETTE,
        )
        for fired, text in zip(report.fired, report.blocks, strict=False)
    ]
    return _view(preview, blocks, True)


@dataclass(frozen=True)
class Side:
    """One provider in one of two compared turns."""

    outcome: str
    tokens: int | None
    text: str | None
    sha256: str | None


@dataclass(frozen=True)
class Compared:
    """Two turns side by side: ``describe_changes``' lines, and per provider both sides."""

    changes: list[str]
    providers: list[tuple[str, Side | None, Side | None, bool]]  # name, first, second, changed

    @property
    def count(self) -> int:
        """Differences, as ``audit diff`` counts them (a block's changed lines are not)."""
        return sum(1 for change in self.changes if not change.startswith(" "))


def _side(provider: AuditProvider | None) -> Side | None:
    if provider is None:
        return None
    block = provider.block
    return Side(
        provider.outcome,
        provider.tokens,
        block.text if block is not None else None,
        block.sha256 if block is not None else None,
    )


def compare(first: AuditLine, second: AuditLine) -> Compared:
    """What ``composer audit diff`` lists, with each provider's two sides for the columns."""
    names = [p.name for p in first.providers]
    names += [p.name for p in second.providers if p.name not in names]
    providers = []
    for name in names:
        a, b = _side(first.provider(name)), _side(second.provider(name))
        providers.append((name, a, b, a != b))
    return Compared(describe_changes(first, second), providers)


@dataclass
class ProviderStats:
    """One provider over a window of turns."""

    name: str
    counts: dict[str, int] = field(default_factory=dict)
    tokens: int = 0
    durations: deque[float] = field(default_factory=lambda: deque(maxlen=SAMPLES_KEPT))

    @property
    def turns(self) -> int:
        return sum(self.counts.get(group, 0) for group in GROUPS)

    def percentile(self, fraction: float) -> float | None:
        """The duration (ms) under which ``fraction`` of the kept samples fall (nearest rank)."""
        if not self.durations:
            return None
        ordered = sorted(self.durations)
        return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


GROUPS: dict[str, tuple[str, ...]] = {
    "fired": ("fired", "cached"),
    "empty": ("empty",),
    "guarded": ("guarded",),
    "skipped": ("over_max_tokens", "over_budget", "not_called", "disabled"),
    "failed": ("failed",),
    "timeout": ("timeout",),
}
"""The providers page's columns: each outcome counts in one of them (cached also counts as a
cache hit). ``guarded`` (its ``when`` was false) is apart from ``empty`` (called, gave
nothing): one is the manifest's choice, the other the provider's answer."""

_UNTIMED = frozenset({"guarded", "not_called", "disabled"})
"""Outcomes of a provider that was not called: their durations (a guard's check) are no
call's, and stay out of the percentiles."""


def provider_stats(lines: Iterable[AuditLine]) -> tuple[list[ProviderStats], int]:
    """Each provider's counts, tokens and durations over ``lines``, and how many turns."""
    group_of = {outcome: group for group, members in GROUPS.items() for outcome in members}
    stats: dict[str, ProviderStats] = {}
    turns = 0
    for line in lines:
        turns += 1
        for provider in line.providers:
            entry = stats.get(provider.name)
            if entry is None:
                if len(stats) >= 1000:  # a log of another program's providers: bounded anyway
                    continue
                entry = stats[provider.name] = ProviderStats(provider.name)
            group = group_of.get(provider.outcome, "skipped")
            entry.counts[group] = entry.counts.get(group, 0) + 1
            if provider.outcome == "cached":
                entry.counts["cache hits"] = entry.counts.get("cache hits", 0) + 1
            if provider.outcome in ("fired", "cached"):
                entry.tokens += provider.tokens or 0
            if provider.duration_ms is not None and provider.outcome not in _UNTIMED:
                entry.durations.append(provider.duration_ms)
    return list(stats.values()), turns
