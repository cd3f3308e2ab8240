"""What one render may spend (``RenderLimits``) and what it has spent so far (``Budget``).

A render runs under ``run_bounded``, which puts a fresh ``Budget`` in a ContextVar: the
sandbox's hooks, the size measure and the cost estimators all charge the render in progress
without it being passed through Jinja. Outside a render (a template compiled, a value checked
by hand) nothing is charged and the default limits apply. Every refusal is a
``RenderLimitExceeded``, a Jinja ``SecurityError`` that ``CompiledTemplate.render`` turns into
a ``TemplateError``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

from jinja2.exceptions import SecurityError

__all__ = [
    "DEFAULT_LIMITS",
    "Budget",
    "RenderLimitExceeded",
    "RenderLimits",
    "charge",
    "current_budget",
    "current_limits",
    "refuse_bits",
    "refuse_over",
    "run_bounded",
    "tick",
]

_T = TypeVar("_T")

# Operations between two reads of the clock.
_OPS_PER_CLOCK = 128


@dataclass(frozen=True)
class RenderLimits:
    """Bounds on one render; exceeding any of them is a TemplateError.

    ``output_chars``: the rendered text. ``value_chars``: any one value a template builds
    (a string, or a container measured as its elements plus their printed lengths).
    ``produced_chars``: everything emitted during the render, captured blocks included.
    ``ops``: calls, attribute lookups, filters, loop iterations, and the work of filters and
    methods that walk their input. ``seconds``: wall clock. ``int_bits``: the size of any
    integer a template makes. ``call_depth``: macro, ``caller()`` and recursive-loop calls
    nested in one another, stopped well before Python's recursion limit.
    """

    output_chars: int = 100_000
    value_chars: int = 4_000_000
    produced_chars: int = 8_000_000
    ops: int = 1_000_000
    seconds: float = 1.0
    int_bits: int = 65_536
    call_depth: int = 64


DEFAULT_LIMITS = RenderLimits()


class RenderLimitExceeded(SecurityError):
    """A template hit one of its RenderLimits."""


class Budget:
    """What one render has spent; lives in a ContextVar for the duration of the render."""

    __slots__ = ("check_at", "deadline", "depth", "limits", "ops", "produced")

    def __init__(self, limits: RenderLimits) -> None:
        self.limits = limits
        self.deadline = time.monotonic() + limits.seconds
        self.ops = 0
        self.check_at = min(_OPS_PER_CLOCK, limits.ops + 1)
        self.produced = 0
        self.depth = 0

    def tick(self) -> None:
        self.ops += 1
        if self.ops >= self.check_at:
            self._checkpoint()

    def spend(self, ops: int, what: str) -> None:
        """Charge the work of one call before it runs; a large charge reads the clock next op."""
        if self.ops + ops > self.limits.ops:
            raise RenderLimitExceeded(f"template {what} would exceed {self.limits.ops} operations")
        self.ops += ops
        if ops >= _OPS_PER_CLOCK:
            self.check_at = self.ops + 1
        if self.ops >= self.check_at:
            self._checkpoint()

    def _checkpoint(self) -> None:
        if self.ops > self.limits.ops:
            raise RenderLimitExceeded(f"template exceeded {self.limits.ops} operations")
        self.check_at = min(self.ops + _OPS_PER_CLOCK, self.limits.ops + 1)
        self.check_deadline()

    def check_deadline(self) -> None:
        if time.monotonic() > self.deadline:
            raise RenderLimitExceeded(f"template exceeded {self.limits.seconds}s")

    def enter_call(self) -> None:
        self.depth += 1
        if self.depth > self.limits.call_depth:
            raise RenderLimitExceeded(f"template exceeded {self.limits.call_depth} nested calls")


current_budget: ContextVar[Budget | None] = ContextVar("composer_template_budget", default=None)


def current_limits() -> RenderLimits:
    budget = current_budget.get()
    return budget.limits if budget is not None else DEFAULT_LIMITS


def tick() -> None:
    budget = current_budget.get()
    if budget is not None:
        budget.tick()


def charge(ops: int, what: str) -> None:
    """Charge ``ops`` operations of work that one filter or method call is about to do."""
    budget = current_budget.get()
    if budget is not None and ops > 0:
        budget.spend(ops, what)


def refuse_over(estimate: int, what: str) -> None:
    cap = current_limits().value_chars
    if estimate > cap:
        raise RenderLimitExceeded(f"template {what} would exceed {cap} characters")


def refuse_bits(bits: int, what: str) -> None:
    cap = current_limits().int_bits
    if bits > cap:
        raise RenderLimitExceeded(f"template {what} would exceed {cap} bits")


def run_bounded(limits: RenderLimits | None, run: Callable[[], _T]) -> _T:
    """Call ``run`` under a fresh budget of ``limits`` (default ``DEFAULT_LIMITS``)."""
    token = current_budget.set(Budget(limits or DEFAULT_LIMITS))
    try:
        return run()
    finally:
        current_budget.reset(token)
