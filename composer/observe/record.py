"""One turn as an audit line: the model written by the writer thread and read by ``composer audit``.

A ``TurnSnapshot`` is what the turn's own path keeps (references only, no work); the writer
thread turns it into an ``AuditLine`` (hashes, counts, masking) and one line of JSON. The same
model reads the line back, so a line that does not match it is reported, never guessed at.
Text (the instruction, the system text, the blocks) is in a line only with ``keep_text``;
otherwise each is named by its SHA-256. Every string passes through the manifest's ``redact``
before it is written: a value that came from a ``${VAR}`` never reaches the file.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from composer.outcomes import Outcome
from composer.registry import ProviderReport
from composer.templating.views import instruction_view
from composer.turn import render_guidance

__all__ = [
    "AuditBlock",
    "AuditBranch",
    "AuditFired",
    "AuditLine",
    "AuditManifest",
    "AuditProvider",
    "AuditText",
    "ProviderInfo",
    "TurnSnapshot",
    "read_lines",
    "sha256",
]


class _Line(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AuditText(_Line):
    """A text of the turn: always its SHA-256 and length, the text itself only with keep_text."""

    sha256: str
    chars: int
    text: str | None = None


class AuditBlock(_Line):
    """An admitted block: its SHA-256 (of the exact text counted), tokens, text with keep_text."""

    sha256: str
    tokens: int
    text: str | None = None


class AuditProvider(_Line):
    """One registered provider's outcome record (``composer.outcomes.ProviderOutcome``)."""

    name: str
    type: str | None = None
    priority: int | None = None
    max_tokens: int | None = None
    has_when: bool = False
    outcome: Outcome
    tokens: int | None = None
    duration_ms: float | None = None
    error_type: str | None = None
    error: str | None = None
    block: AuditBlock | None = None


class AuditBranch(_Line):
    id: str
    name: str | None = None


class AuditManifest(_Line):
    """Which manifest served the turn; ``sha256`` names its effective content (secrets masked),
    so two turns on the same revision show the same value."""

    path: str | None = None
    env: str | None = None
    sha256: str | None = None


class AuditFired(_Line):
    provider_name: str
    tokens: int


class AuditLine(_Line):
    """One turn of the audit log (version 1)."""

    version: Literal[1] = 1
    time: str
    turn_id: str | None
    branch: AuditBranch
    manifest: AuditManifest
    instruction: AuditText | None = None
    system: AuditText | None = None
    guidance: str | None = None
    budget: int | None
    tokens_used: int
    providers: list[AuditProvider]
    fired: list[AuditFired]
    skipped: list[str]
    failed: list[str]

    def provider(self, name: str) -> AuditProvider | None:
        return next((p for p in self.providers if p.name == name), None)


@dataclass(frozen=True)
class ProviderInfo:
    """What the manifest says of one registered provider (what a report row shows besides the
    outcome)."""

    type: str
    priority: int
    max_tokens: int | None
    has_when: bool


@dataclass(frozen=True, slots=True)
class TurnSnapshot:
    """What the turn's path hands to the writer: references, taken in a few hundred ns.

    ``report`` is treated as immutable once returned (the registry builds new lists per turn).
    """

    time: float
    report: ProviderReport
    branch_id: Any
    branch_name: Any
    system: Any
    instruction: Any
    manifest: AuditManifest
    providers: Sequence[ProviderInfo | None]
    keep_text: bool
    redact: Callable[[str], str] | None

    def line(self) -> AuditLine:
        """The audit line of this turn: hashes, counts, texts only when kept, secrets masked."""
        report = self.report
        mask = self.redact or _same
        keep = self.keep_text
        view = instruction_view(self.instruction)
        system = self.system if isinstance(self.system, str) else None
        blocks = iter(report.blocks)
        providers = []
        for index, record in enumerate(report.outcomes):
            info = self.providers[index] if index < len(self.providers) else None
            block = None
            if record.outcome in ("fired", "cached"):
                text = next(blocks, "")
                block = AuditBlock(
                    sha256=sha256(text),
                    tokens=record.tokens or 0,
                    text=mask(text) if keep else None,
                )
            providers.append(
                AuditProvider(
                    name=mask(record.name),
                    type=info.type if info else None,
                    priority=info.priority if info else None,
                    max_tokens=info.max_tokens if info else None,
                    has_when=info.has_when if info else False,
                    outcome=record.outcome,
                    tokens=record.tokens,
                    duration_ms=None
                    if record.duration_ms is None
                    else round(record.duration_ms, 3),
                    error_type=record.error_type,
                    error=None if record.error is None else mask(record.error),
                    block=block,
                )
            )
        guidance = render_guidance(view["guidance"]) if keep else None
        return AuditLine(
            time=_dt.datetime.fromtimestamp(self.time, _dt.UTC).isoformat(timespec="microseconds"),
            turn_id=report.turn_id,
            branch=AuditBranch(
                id=mask(str(self.branch_id)),
                name=None if self.branch_name is None else mask(str(self.branch_name)),
            ),
            manifest=self.manifest,
            instruction=_text(view["text"], keep, mask),
            system=None if system is None else _text(system, keep, mask),
            guidance=mask(guidance) if guidance else None,
            budget=report.budget,
            tokens_used=report.tokens_used,
            providers=providers,
            fired=[
                AuditFired(provider_name=mask(str(row["provider_name"])), tokens=int(row["tokens"]))
                for row in report.fired
            ],
            skipped=[mask(name) for name in report.skipped],
            failed=[mask(name) for name in report.failed],
        )


def _same(text: str) -> str:
    return text


def _text(text: str, keep: bool, mask: Callable[[str], str]) -> AuditText:
    return AuditText(sha256=sha256(text), chars=len(text), text=mask(text) if keep else None)


def sha256(text: str) -> str:
    """Hex SHA-256 of ``text`` as UTF-8 (lone surrogates kept, as a model API would refuse them)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def read_lines(path: Path) -> Iterator[tuple[int, AuditLine | str]]:
    """``(line number, AuditLine)`` for each line of an audit file, or ``(number, problem)``
    for a line that is not one (a torn last line after a crash, another program's text)."""
    with path.open("r", encoding="utf-8", errors="replace") as lines:
        for number, raw in enumerate(lines, 1):
            if not raw.strip():
                continue
            try:
                yield number, AuditLine.model_validate_json(raw)
            except ValidationError as e:
                yield number, f"not an audit line ({e.error_count()} problems)"
