"""One turn as an audit line: the model written by the writer thread and read by ``composer audit``.

A ``Snapshot`` is what the turn's own path keeps (plain values, next to no work); the writer
thread turns it into one line of JSON (hashes, counts, masking) in ``AuditLine``'s shape. The same
model reads the line back, so a line that does not match it is reported, never guessed at.
A turn that explained itself (``runtime.explain``, dedup or fill) also writes each ranking
provider's candidates: ids, scores, tokens and fates, at most ``MAX_CANDIDATES`` a provider,
their texts only with ``keep_text``.
Text (the instruction, the system text, the blocks) is in a line only with ``keep_text``;
otherwise each is named by its SHA-256, taken on the turn's path so that a queued turn holds
64 characters, not the text (a 1 MB instruction per turn would otherwise hold a megabyte per
queued line). Every string passes through the manifest's ``redact`` before it is written: a
value that came from a ``${VAR}`` never reaches the file.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, ValidationError

from composer.manifest.models import map_strings
from composer.outcomes import Fate, Outcome, ProviderOutcome
from composer.principal import principal_name
from composer.registry import ProviderReport
from composer.templating.views import instruction_view
from composer.turn import render_guidance

__all__ = [
    "MAX_CANDIDATES",
    "MAX_DEPTH",
    "MAX_LINE_BYTES",
    "AuditBlock",
    "AuditBranch",
    "AuditCandidate",
    "AuditExplanation",
    "AuditFired",
    "AuditLine",
    "AuditManifest",
    "AuditProvider",
    "AuditText",
    "LineContext",
    "ProviderInfo",
    "Snapshot",
    "json_line",
    "parse_line",
    "read_lines",
    "sha256",
    "snapshot",
    "weight",
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


class AuditCandidate(_Line):
    """One candidate a ranking provider considered (``composer.outcomes.Candidate``)."""

    id: str
    score: float | None = None
    tokens: int | None = None
    fate: Fate
    duplicate_of: str | None = None
    duplicate_of_id: str | None = None
    text: str | None = None
    """Only with keep_text."""


class AuditExplanation(_Line):
    """Why one provider's block is in the turn or not (``composer.outcomes.Explanation``)."""

    provider: str
    outcome: Outcome
    tokens: int | None = None
    needed: int | None = None
    left: int | None = None
    cap: int | None = None
    taken_by: list[str] = []
    refitted: bool = False
    candidates: list[AuditCandidate] | None = None
    candidates_left_off: int = 0
    """Candidates past ``MAX_CANDIDATES``, not written."""


class AuditBranch(_Line):
    id: str
    name: str | None = None
    principal: str | None = None
    """The principal a server authenticated for the turn (None in process)."""


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
    """One turn of the audit log (version 1). The report's four ADR lists are not written:
    ``blocks`` are the providers' blocks, and ``fired``, ``skipped`` and ``failed`` follow
    from the outcome records exactly, as the registry derived them."""

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
    answered: bool = True
    """False when the providers ran but the client was not answered (a server's state store
    failed after them: the client got ``503`` and retries); written only then, so a line
    without it, older ones included, is a served turn."""
    explanations: list[AuditExplanation] | None = None
    """Written only for a turn that explained itself: one per registered provider."""

    def provider(self, name: str) -> AuditProvider | None:
        return next((p for p in self.providers if p.name == name), None)

    @property
    def fired(self) -> list[AuditFired]:
        """The report's ``fired`` (ADR-0008 D3): the admitted, in registration order."""
        return [
            AuditFired(provider_name=p.name, tokens=p.tokens or 0)
            for p in self.providers
            if p.outcome in ("fired", "cached")
        ]

    @property
    def skipped(self) -> list[str]:
        """The report's ``skipped``, as the registry built it (ADR-0008 D3): over their own
        cap in registration order, then over the budget in admission order (priority, highest
        first, ties in registration order)."""
        capped = [p.name for p in self.providers if p.outcome == "over_max_tokens"]
        over = [p for p in self.providers if p.outcome == "over_budget"]
        over.sort(key=lambda p: -(p.priority or 0))  # stable: ties keep registration order
        return capped + [p.name for p in over]

    @property
    def failed(self) -> list[str]:
        """The report's ``failed``: providers that raised or timed out, in registration order."""
        return [p.name for p in self.providers if p.outcome in ("failed", "timeout")]


@dataclass(frozen=True)
class ProviderInfo:
    """What the manifest says of one registered provider (what a report row shows besides the
    outcome)."""

    type: str
    priority: int
    max_tokens: int | None
    has_when: bool


@dataclass(frozen=True)
class LineContext:
    """What every line of one loaded manifest shares, made once: the manifest's part, each
    registered provider's fixed part (from the manifest) and name as shown (masked)."""

    manifest: dict[str, Any]
    providers: list[dict[str, Any]]
    shown: list[str]
    keep_text: bool
    redact: Callable[[str], str]
    entries: dict[tuple[Any, ...], str] = field(default_factory=dict)
    """A provider entry's JSON up to its duration, by what it depends on (the writer's own)."""

    def entry(self, key: tuple[Any, ...]) -> str:
        """The JSON of one provider's entry, open at ``"duration_ms":`` (remembered)."""
        index, name, outcome, tokens, error_type, error, text = key
        block: dict[str, Any] | None = None
        if text is not None:  # the block's text with keep_text, else its digest
            block = {
                "sha256": sha256(text) if self.keep_text else text,
                "tokens": tokens or 0,
                "text": self.redact(text) if self.keep_text else None,
            }
        entry: dict[str, Any] = {"name": name}
        if index < len(self.providers):
            entry.update(self.providers[index])
        entry.update(
            outcome=outcome, tokens=tokens, error_type=error_type, error=error, block=block
        )
        encoded = _ENCODE(entry)[:-1] + ',"duration_ms":'
        if len(encoded) <= _MEMO_CHARS and (text is None or len(text) <= _MEMO_CHARS):
            if len(self.entries) >= _ENTRIES_KEPT:
                self.entries.clear()
            self.entries[key] = encoded  # short entries only: the memo stays a few MB
        return encoded

    @classmethod
    def of(
        cls,
        manifest: AuditManifest,
        providers: Sequence[ProviderInfo],
        shown: Sequence[str],
        *,
        keep_text: bool,
        redact: Callable[[str], str],
    ) -> LineContext:
        fixed = [
            {
                "type": info.type,
                "priority": info.priority,
                "max_tokens": info.max_tokens,
                "has_when": info.has_when,
            }
            for info in providers
        ]
        return cls(manifest.model_dump(), fixed, list(shown), keep_text, redact)


class Snapshot(NamedTuple):
    """One turn as the writer receives it: plain strings, numbers and tuples of them.

    Without keep_text, ``blocks`` are the blocks' SHA-256 and ``instruction`` is ``(sha256,
    chars)``; ``system`` and ``guidance`` are None. ``outcomes`` are the registry's own
    records (tuples of plain values), the names of providers the manifest does not know
    (registered by hand) included.
    """

    time: float
    turn_id: str | None
    budget: int | None
    tokens_used: int
    outcomes: tuple[ProviderOutcome, ...]
    blocks: tuple[str, ...]
    branch_id: str
    branch_name: Any
    system: str | None
    instruction: str | tuple[str, int]
    guidance: str | None
    context: LineContext
    principal: str | None
    answered: bool = True
    explanations: tuple[dict[str, Any], ...] = ()
    """The turn's explanations as JSON data (bounded, texts only with keep_text), if any."""


MAX_CANDIDATES = 20
"""Candidates written per provider (the best first); the rest are counted, not written."""


def snapshot(
    started: float, report: ProviderReport, branch: Any, instruction: Any, context: LineContext
) -> Snapshot:
    """What the turn's path hands to the writer: plain strings, numbers and tuples of them.

    Nothing else the turn made is kept (the report, its lists, the instruction): a queued
    turn that held them would keep them alive until the writer's next round, and objects that
    live that long are moved to the collector's older generations, whose collections then
    cost the turns far more than the audit line itself. Texts are kept only with keep_text
    (guidance rendered, so that the queue knows its size); otherwise their digests.
    """
    keep = context.keep_text
    text = getattr(instruction, "text", None)
    guidance = None
    if keep or type(text) is not str:
        view = instruction_view(instruction)
        text, guidance = view["text"], render_guidance(view["guidance"]) if keep else None
    system = getattr(branch, "system", None) if keep else None
    return Snapshot(
        started,
        report.turn_id,
        report.budget,
        report.tokens_used,
        tuple(report.outcomes),
        tuple(report.blocks) if keep else _digests(report.blocks),
        str(getattr(branch, "id", "")),
        getattr(branch, "name", None),
        system if isinstance(system, str) else None,
        text if keep else (sha256(text), len(text)),
        guidance or None,
        context,
        principal_name(),
        explanations=tuple(e.to_json(text=keep, limit=MAX_CANDIDATES) for e in report.explanations),
    )


def weight(turn: Snapshot) -> int:
    """About how many bytes a queued snapshot holds: its parts, its error messages, and the
    texts kept with keep_text (without it, digests: mostly the memo's own strings)."""
    outcomes = turn.outcomes
    size = 256 + 128 * len(outcomes) + sum([len(o.error) for o in outcomes if o.error])
    for explained in turn.explanations:
        size += 96 + 160 * len(explained["candidates"] or ())
        size += sum(len(c.get("text") or "") for c in explained["candidates"] or ())
    if turn.context.keep_text:
        size += sum([len(b) for b in turn.blocks])
        size += sum([len(part) for part in (turn.system, turn.instruction, turn.guidance) if part])
    return size


def json_line(turn: Snapshot) -> bytes:
    """The turn's line of JSON (ASCII, newline-terminated), in ``AuditLine``'s shape: hashes,
    counts, texts only when kept (masked); names are the manifest's, masked once; error
    messages were masked by the registry when it recorded them.

    A provider's entry is the same from turn to turn but for its duration (a static block, a
    repeated answer), so its JSON is remembered by what it depends on and only the duration
    is written each time.
    """
    context = turn.context
    keep, mask = context.keep_text, context.redact
    branch_name = turn.branch_name
    head = _ENCODE(
        {
            "version": 1,
            "time": _dt.datetime.fromtimestamp(turn.time, _dt.UTC).isoformat(),
            "turn_id": turn.turn_id,
            "branch": {
                "id": mask(turn.branch_id),
                "name": None if branch_name is None else mask(str(branch_name)),
                "principal": turn.principal,
            },
            "manifest": context.manifest,
            "instruction": _text(turn.instruction, keep, mask),
            "system": None if turn.system is None else _text(turn.system, keep, mask),
            "guidance": None if turn.guidance is None else mask(turn.guidance),  # kept, rendered
            "budget": turn.budget,
            "tokens_used": turn.tokens_used,
            **_UNANSWERED[turn.answered],  # only when False: a served turn's line is as before
        }
    )
    texts = iter(turn.blocks)
    shown = context.shown
    known = len(shown)
    entries = []
    for index, (name, outcome, tokens, ms, error_type, error) in enumerate(turn.outcomes):
        block = next(texts, "") if outcome == "fired" or outcome == "cached" else None
        name = shown[index] if index < known else mask(str.__str__(name))
        key = (index, name, outcome, tokens, error_type, error, block)
        entry = context.entries.get(key)
        if entry is None:
            entry = context.entry(key)
        entries.append(f"{entry}{'null' if ms is None else f'{ms:.3f}'}}}")
    tail = ""
    if turn.explanations:
        tail = ',"explanations":' + _ENCODE([map_strings(e, mask) for e in turn.explanations])
    return f'{head[:-1]},"providers":[{",".join(entries)}]{tail}}}\n'.encode()


def _text(text: Any, keep: bool, mask: Callable[[str], str]) -> dict[str, Any]:
    """A kept text (``str``) or a digest (``(sha256, chars)``) as an ``AuditText``."""
    if not keep and type(text) is tuple:
        return {"sha256": text[0], "chars": text[1], "text": None}
    return {"sha256": sha256(text), "chars": len(text), "text": mask(text) if keep else None}


_ENCODE = json.JSONEncoder(separators=(",", ":")).encode
_UNANSWERED: dict[bool, dict[str, bool]] = {True: {}, False: {"answered": False}}

MAX_LINE_BYTES = 128 * 1024 * 1024
"""The longest line a reader reads (and a writer writes: a longer one is counted failed):
twice what a sink's queue holds in all, so any turn it queued fits unless most of its text
is escaped. A longer line is passed over unread, so a reader's memory is bounded."""

MAX_DEPTH = 64
"""The deepest nesting Python's JSON parser is given (an audit line nests 4 deep)."""

_SKIP_CHUNK = 1024 * 1024
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_NOT_A_BRACKET = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[^\[\]{}"]+')

_MEMO_CHARS = 8192
"""The longest text (and provider entry) remembered: a memo of long texts would keep every
turn's instruction alive (1,500 turns of 0.9 MB took a server from 78 MiB to 1.44 GiB)."""
_DIGESTS: dict[str, str] = {}
_DIGESTS_KEPT = 2048  # at most 16 Mi characters of keys, whatever the turns send
_ENTRIES_KEPT = 1024


def _digests(texts: Sequence[str]) -> tuple[str, ...]:
    """``sha256`` of each text, the memo read inline (a static block is a hit every turn)."""
    get = _DIGESTS.get
    return tuple([(len(t) <= _MEMO_CHARS and get(t)) or sha256(t) for t in texts])


def sha256(text: str) -> str:
    """Hex SHA-256 of ``text`` as UTF-8 (lone surrogates kept, as a model API would refuse them).

    Remembered for recent short texts: a static block is the same string every turn, and a
    dict lookup of a string is far cheaper than hashing it again.
    """
    if len(text) > _MEMO_CHARS:  # not even looked up: a dict lookup hashes the whole string
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    digest = _DIGESTS.get(text)
    if digest is None:
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        if len(_DIGESTS) >= _DIGESTS_KEPT:
            _DIGESTS.clear()
        _DIGESTS[text] = digest
    return digest


def read_lines(
    path: Path, max_bytes: int = MAX_LINE_BYTES
) -> Iterator[tuple[int, AuditLine | str]]:
    """``(line number, AuditLine)`` for each line of an audit file, or ``(number, problem)``
    for a line that is not one (a torn last line after a crash, another program's text, a
    line longer than ``max_bytes``, which is passed over without being held). Bytes that are
    not UTF-8 are read as U+FFFD. Raises ``OSError`` only for the file itself."""
    with path.open("rb") as lines:
        number = 0
        while raw := lines.readline(max_bytes + 1):
            number += 1
            if len(raw) > max_bytes and not raw.endswith(b"\n"):
                while (rest := lines.readline(_SKIP_CHUNK)) and not rest.endswith(b"\n"):
                    pass
                yield number, _longer_than(max_bytes)
                continue
            text = raw.decode("utf-8", "replace")
            if text.strip():
                yield number, parse_line(text)


def parse_line(raw: str | None) -> AuditLine | str:
    """One line read back as an ``AuditLine``, or the problem that makes it none; never raises.

    The one place a line is parsed, and bounded: a line longer than ``MAX_LINE_BYTES`` (None:
    a reader that left it unread for its size), nested deeper than pydantic's parser goes,
    holding a number or string of any size, or raising anything at all while it is parsed or
    validated is "not an audit line", so one line never stops a reader. A lone surrogate (a
    branch name that held one) is written as its ``\\ud800`` escape, which pydantic's JSON
    parser refuses; Python's reads it, so such a line is read that way, when it is nested
    ``MAX_DEPTH`` deep at most (Python's parser recurses).
    """
    if raw is None or len(raw) > MAX_LINE_BYTES:
        return _longer_than(MAX_LINE_BYTES)
    try:
        return AuditLine.model_validate_json(raw)
    except ValidationError as e:
        problems = e.error_count()
        invalid_json = any(error["type"] == "json_invalid" for error in e.errors())
    except Exception:  # any other failure of the parser is this line's, not the reader's
        return _not_a_line(1)
    if not (invalid_json and _SURROGATE_ESCAPE.search(raw) and _depth(raw) <= MAX_DEPTH):
        return _not_a_line(problems)
    try:
        return AuditLine.model_validate(json.loads(raw))
    except Exception:  # ValueError, ValidationError, anything else: the line is not one
        return _not_a_line(problems)


def _depth(raw: str) -> int:
    """How deep ``raw``'s brackets nest outside its strings, counted up to ``MAX_DEPTH + 1``."""
    depth = deepest = 0
    for bracket in _NOT_A_BRACKET.sub("", raw):
        depth += 1 if bracket in "[{" else -1
        if depth > deepest:
            deepest = depth
            if deepest > MAX_DEPTH:
                break
    return deepest


def _longer_than(max_bytes: int) -> str:
    return f"not an audit line (longer than {max_bytes:,} bytes)"


def _not_a_line(problems: int) -> str:
    return f"not an audit line ({problems} {'problem' if problems == 1 else 'problems'})"
