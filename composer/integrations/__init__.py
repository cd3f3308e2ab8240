"""composer inside the major agent frameworks: one loaded manifest, that framework's own seam.

Each framework has a module of its own, behind an extra of the same name, imported only when
used (``composer.integrations.langchain``, ``agent_framework``, ``pydantic_ai``,
``openai_agents``). They share ``Composer`` (``composer.integrations.session``): a
conversation (the framework's session or thread id) is one composer branch with its own
registry, so the budget, priority, containment, timeouts, outcomes, audit and placement are
exactly those of ``prepare_turn``; nothing composer injects is stored in the framework's
history, and a tool result is written back under the identity of the run that produced it
(``Composed.run``).
"""

from __future__ import annotations

from composer.integrations.session import Composed, Composer, Run

__all__ = ["Composed", "Composer", "Run"]
