"""Read a branch and an instruction the same way whether they are composer's or LionAGI's.

Templates and providers see plain data built here, never the live objects, so one manifest
works on ``composer.Branch`` and on a ``lionagi`` Branch alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["branch_view", "instruction_view"]


def instruction_view(instruction: Any) -> dict[str, Any]:
    """text, guidance and context of a composer or lionagi Instruction."""
    content = getattr(instruction, "content", None)
    text = getattr(instruction, "text", None)
    if text is None and content is not None:  # a lionagi Instruction
        text = getattr(content, "instruction", None)
    source = content if content is not None and not hasattr(instruction, "text") else instruction
    return {
        "text": "" if text is None else str(text),
        "guidance": getattr(source, "guidance", None),
        "context": getattr(source, "context", None) or getattr(source, "prompt_context", None),
    }


def branch_view(branch: Any) -> dict[str, Any]:
    """id, name and metadata of a composer or lionagi Branch."""
    metadata = getattr(branch, "metadata", None)
    return {
        "id": str(getattr(branch, "id", "")),
        "name": getattr(branch, "name", None),
        "metadata": dict(metadata) if isinstance(metadata, Mapping) else {},
    }
