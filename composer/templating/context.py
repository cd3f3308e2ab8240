"""The context every template renders with: its names, their shapes, and how it is built.

Templates see plain data only (``views``), built the same way from composer's and lionagi's
objects, so one manifest works on both and no template reaches a live object. The shapes let
the loader refuse ``{{ instruction.txt }}`` at its line and column instead of at a turn.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from composer.templating.shapes import ANY, TemplateShape
from composer.templating.views import branch_view, instruction_view

__all__ = ["CONTEXT_NAMES", "CONTEXT_SHAPES", "template_context"]

# The names every template sees (see template_context).
CONTEXT_NAMES = frozenset({"instruction", "branch", "provider", "now"})

CONTEXT_SHAPES: Mapping[str, TemplateShape] = {
    "instruction": TemplateShape.record(text=TemplateShape.of(str), guidance=ANY, context=ANY),
    "branch": TemplateShape.record(
        id=TemplateShape.of(str),
        name=TemplateShape.of(str, None),
        metadata=TemplateShape("mapping"),
    ),
    "provider": TemplateShape.record(name=TemplateShape.of(str)),
    "now": TemplateShape.of(datetime),
}
"""What each of ``CONTEXT_NAMES`` holds (``template_context``), for the load-time check of
the attributes a template reads (``instruction.txt`` is an error before any turn)."""


def template_context(
    branch: Any, instruction: Any, *, provider: str, extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The variables a template sees, built the same way for composer and lionagi objects.

    ``instruction`` (text, guidance, context), ``branch`` (id, name, metadata), ``provider``
    (name) and ``now`` (UTC); plain data, so templates cannot reach the live objects.
    """
    context: dict[str, Any] = {
        "instruction": instruction_view(instruction),
        "branch": branch_view(branch),
        "provider": {"name": provider},
        "now": datetime.now(UTC),
    }
    if extra:
        context.update(extra)
    return context
