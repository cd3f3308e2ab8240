"""A minimal branch and the pre-turn path of ADR-0008 D4: gather, slot, fold, clear.

``prepare_turn`` does for a ``composer.Branch`` what LionAGI's chat and run do before calling
the model: gather the registry's providers, keep the blocks in a private per-turn slot, fold
``system + "\\n".join(blocks) + guidance`` into the guidance the model sees, and clear the slot
whatever happens. Nothing retrieved is written to ``branch.messages``.

With ``stable_prefix`` placement the blocks that go with the turn are untrusted text (a tool
result written back to memory, a fetched page) placed before the user's own: they go inside one
envelope whose tags carry a random per-turn nonce, which is removed from every block, and each
block without a ``wrap`` of its own is labelled with its provider's name and the same nonce,
with any text in it that looks like the envelope's or a label's tag escaped. A block can then
neither close the envelope nor pose as another provider's block.
"""

from __future__ import annotations

import html
import re
import secrets
import uuid
from dataclasses import dataclass
from typing import Any

import yaml

from composer.outcomes import ProviderOutcome, Turn
from composer.registry import ContextProviderRegistry, ProviderReport

__all__ = [
    "CONTEXT_BLOCK",
    "Branch",
    "Instruction",
    "PreparedTurn",
    "prepare_turn",
    "render_guidance",
]


class Instruction:
    """One user turn: the text, optional guidance (str or data), optional context.

    ``rendered_guidance`` is ``guidance`` already rendered to text by the caller (a server
    renders data off its event loop: PyYAML's dumper is slow on large data); when it is a
    string the fold uses it as it is, else it renders ``guidance`` itself (``render_guidance``).
    """

    def __init__(
        self,
        text: str,
        *,
        guidance: Any = None,
        context: Any = None,
        rendered_guidance: str | None = None,
    ) -> None:
        self.text = text
        self.guidance = guidance
        self.context = context
        self.rendered_guidance = rendered_guidance

    def __repr__(self) -> str:
        return f"Instruction(text={self.text!r})"


class Branch:
    """A conversation branch that owns, lazily, one provider registry (ADR D1)."""

    turn_key: str | None = None
    """What tells this turn of the branch from the next, for idempotent writebacks
    (``composer.plugin.turn_key``). None: the number of ``messages``, which ``prepare_turn``
    grows by one a turn; whoever keeps a branch without its messages (a server, a framework
    session) sets it before each turn and writeback."""

    def __init__(
        self,
        system: str | None = None,
        *,
        name: str | None = None,
        memory: Any = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        self.system = system
        self.id = str(uuid.uuid4())
        self.name = name
        self.memory = memory
        self.metadata: dict[str, Any] = dict(metadata or {})
        self.messages: list[Instruction] = []
        self._context_providers: ContextProviderRegistry | None = None
        self._context_injection_slot: list[str] | None = None
        self._last_context_report: ProviderReport | None = None

    @property
    def providers(self) -> ContextProviderRegistry:
        """The branch's registry, created with the default budget on first access."""
        if self._context_providers is None:
            self._context_providers = ContextProviderRegistry()
        return self._context_providers

    @property
    def last_context_report(self) -> ProviderReport | None:
        return self._last_context_report

    def __repr__(self) -> str:
        return f"Branch(name={self.name!r}, id={self.id!r})"


@dataclass(frozen=True, slots=True)
class PreparedTurn:
    """What the model is sent for one turn.

    ``guidance`` is the folded system + injected blocks + guidance string when the branch has a
    system text; otherwise the instruction's own guidance (rendered to text) or None.
    ``report`` is this turn's ProviderReport, or None when no provider pass ran.
    ``context`` is None unless the registry places blocks ``stable_prefix``: then ``guidance``
    folds only the stable blocks, and ``context`` holds the others as one delimited block for
    the current turn (after the history, before the user's text).
    """

    instruction: Instruction
    guidance: str | None
    report: ProviderReport | None
    context: str | None = None


CONTEXT_BLOCK = re.compile(r'<context id="([0-9a-f]{16})">\n(.*?)\n</context id="\1">', re.DOTALL)
"""The turn's context block with ``stable_prefix`` placement: ``<context id="NONCE">``, the
blocks, ``</context id="NONCE">``; group 1 is the nonce, group 2 the blocks."""

_LOOKALIKE = re.compile(r"<(?=\s*/?\s*(?:context|block)\b)", re.IGNORECASE)
"""The ``<`` of anything in a block's text that looks like an envelope or label tag."""


def _placed(registry: Any, report: ProviderReport) -> tuple[list[str], str | None]:
    """The blocks the system fold takes, and the turn's context block (None: none).

    With the ADR's placement (every registry but one that says ``stable_prefix``) the fold
    takes every block, exactly as D4 renders them. Otherwise the blocks of the registry's
    ``stable_names`` stay in the fold, in order, and the rest go to the turn, enveloped.
    """
    if getattr(registry, "placement", "adr") != "stable_prefix":
        return report.blocks, None
    stable = registry.stable_names
    wrapped: frozenset[str] = getattr(registry, "wrapped_names", frozenset())
    nonce = secrets.token_hex(8)
    kept: list[str] = []
    turn: list[str] = []
    for block, row in zip(report.blocks, report.fired, strict=True):
        name = row["provider_name"]
        if name in stable:
            kept.append(block)
        else:
            turn.append(_labelled(block, name, nonce, wrapped=name in wrapped))
    if not turn:
        return kept, None
    return kept, f'<context id="{nonce}">\n' + "\n".join(turn) + f'\n</context id="{nonce}">'


def _labelled(block: str, name: str, nonce: str, *, wrapped: bool) -> str:
    """One block in the turn's envelope: the nonce removed from it; unless its own ``wrap``
    labels it, its lookalike tags escaped and a label around it (provider name and nonce)."""
    text = block.replace(nonce, "")
    if wrapped:
        return text
    source = html.escape(name.replace("\n", " "), quote=True)
    escaped = _LOOKALIKE.sub("&lt;", text)
    return f'<block source="{source}" id="{nonce}">\n{escaped}\n</block id="{nonce}">'


class _MinimalDumper(yaml.SafeDumper):
    """Block-style YAML without aliases, multi-line strings as block scalars (LionAGI's minimal_yaml)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_MinimalDumper.add_representer(str, _represent_str)


def _prune(value: Any) -> Any:
    """Drop None, blank strings and empty containers, as minimal_yaml does; keep 0 and False."""
    if isinstance(value, dict):
        pruned = {k: _prune(v) for k, v in value.items()}
        return {k: v for k, v in pruned.items() if not _is_empty(v)}
    if isinstance(value, (list, tuple)):
        items = [_prune(v) for v in value]
        return type(value)(v for v in items if not _is_empty(v))
    return value


def _is_empty(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, (dict, list, tuple, set)):
        return not value
    return False


def render_guidance(guidance: Any) -> str:
    """Guidance as the model sees it: a string as is, anything else as minimal YAML (ADR D4).

    Falsy guidance (None, "", {}, [], 0, False) renders as nothing, as LionAGI's fold reads
    ``c.guidance or ""`` before it turns non-string guidance into YAML.
    """
    if not guidance:
        return ""
    if isinstance(guidance, str):
        return guidance
    text: str = yaml.dump(
        _prune(guidance),
        Dumper=_MinimalDumper,
        default_flow_style=False,
        sort_keys=False,
        allow_unicode=True,
        width=2**31 - 1,
        indent=2,
    )
    return text.strip()


def _fold(branch: Branch, instruction: Instruction) -> str | None:
    """``system + "\\n".join(slot) + guidance`` with no other separator (ADR D4 rendering).

    Guidance a caller rendered already is taken as it is (``Instruction.rendered_guidance``).
    """
    rendered = instruction.rendered_guidance
    guidance = rendered if isinstance(rendered, str) else render_guidance(instruction.guidance)
    if branch.system is None:
        return guidance if instruction.guidance is not None else None
    blocks = branch._context_injection_slot
    injected = "\n".join(blocks) if blocks else ""
    return branch.system + injected + guidance


async def prepare_turn(branch: Branch, instruction: Instruction | str) -> PreparedTurn:
    """Gather the branch's providers and fold their blocks into this turn only (ADR D4).

    - No registry, or an empty one: no provider pass; ``last_context_report`` is left alone.
    - No system text: no provider is called; the report is ``skipped=registry.names``.
    - Otherwise the instruction is built once and handed to every provider; the report is
      saved and its blocks put in the private slot, which is cleared in a ``finally`` even
      when preparation fails. Gather runs before that ``try``, as in LionAGI's chat and run.
    The instruction (without the injected text) is recorded in ``branch.messages``.
    """
    ins = instruction if isinstance(instruction, Instruction) else Instruction(instruction)
    registry = branch._context_providers
    report: ProviderReport | None = None
    context: str | None = None
    if registry:
        if branch.system is None:
            names = registry.names
            outcomes = [ProviderOutcome(name, "not_called") for name in names]
            report = ProviderReport(skipped=names, turn_id=Turn().id, outcomes=outcomes)
            branch._last_context_report = report
        else:
            report = await registry.gather(branch, ins)
            branch._last_context_report = report
            branch._context_injection_slot, context = _placed(registry, report)
    try:
        guidance = _fold(branch, ins)
    finally:
        branch._context_injection_slot = None
    branch.messages.append(ins)
    return PreparedTurn(ins, guidance, report, context)
