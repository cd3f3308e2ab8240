"""Read a branch and an instruction the same way whether they are composer's or LionAGI's.

Templates and providers see plain data built here, never the live objects, so one manifest
works on ``composer.Branch`` and on a ``lionagi`` Branch alike. Nothing here imports lionagi:
its objects are recognised by shape (an Instruction's ``content`` carries ``instruction``,
``guidance`` and ``prompt_context``; a Branch keeps its store in the private ``_memory``).
"""

from __future__ import annotations

import datetime as _dt
import uuid
from collections.abc import Mapping
from typing import Any

__all__ = ["branch_memory", "branch_view", "instruction_view", "turn_key"]

_MISSING: Any = object()

# Values a template may see as they are: immutable and free of live references.
_SCALARS = (str, int, float, bool, type(None), uuid.UUID, _dt.datetime, _dt.date, _dt.time)


def _plain(value: Any) -> Any:
    """A copy of ``value`` made of plain dicts, lists and scalars; anything else becomes _MISSING.

    LionAGI wraps content in change-tracking list/dict subclasses and keeps live objects (the
    Branch a clone came from, its Progression) in metadata; templates get neither.
    """
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            plain = _plain(item)
            if plain is not _MISSING and isinstance(key, str):
                out[key] = plain
        return out
    if isinstance(value, (list, tuple)):
        return [p for p in map(_plain, value) if p is not _MISSING]
    return _MISSING


def _lionagi_content(instruction: Any) -> Any:
    """The InstructionContent of a lionagi Instruction (or the content itself), else None."""
    content = getattr(instruction, "content", None)
    if content is not None and hasattr(content, "prompt_context"):
        return content
    if hasattr(instruction, "prompt_context") and hasattr(instruction, "instruction"):
        return instruction
    return None


def instruction_view(instruction: Any) -> dict[str, Any]:
    """``text``, ``guidance`` and ``context`` of a composer or lionagi Instruction, as plain data.

    lionagi stores the context as a list (``context=x`` becomes ``[x]``); it is shown the way
    the caller passed it to composer: None when empty, the item when there is one, else the
    list. So ``{{ instruction.context.ticket }}`` reads the same on both kinds of branch.
    """
    if isinstance(instruction, str):
        return {"text": instruction, "guidance": None, "context": None}
    content = _lionagi_content(instruction)
    if content is None:
        text = getattr(instruction, "text", None)
        guidance = getattr(instruction, "guidance", None)
        context = getattr(instruction, "context", None)
    else:
        text = getattr(content, "instruction", None) or getattr(content, "plain_content", None)
        guidance = getattr(content, "guidance", None)
        items = list(getattr(content, "prompt_context", None) or [])
        context = None if not items else items[0] if len(items) == 1 else items
    return {
        "text": "" if text is None else str(text),
        "guidance": _plain_or_none(guidance),
        "context": _plain_or_none(context),
    }


def _plain_or_none(value: Any) -> Any:
    plain = _plain(value)
    return None if plain is _MISSING else plain


def branch_view(branch: Any) -> dict[str, Any]:
    """``id``, ``name`` and ``metadata`` of a composer or lionagi Branch, as plain data.

    The id is a string for both (lionagi's is a UUID); metadata values that are not plain
    data are left out.
    """
    metadata = getattr(branch, "metadata", None)
    plain = _plain(metadata) if isinstance(metadata, Mapping) else {}
    return {
        "id": str(getattr(branch, "id", "")),
        "name": getattr(branch, "name", None),
        "metadata": plain if isinstance(plain, dict) else {},
    }


def branch_memory(branch: Any, *, create: bool = False) -> Any:
    """The branch's memory store, or None when it has none.

    A ``composer.Branch`` has the store it was given. A lionagi Branch creates an empty
    ``InMemoryStore`` on first access of ``branch.memory``; reading (``create=False``) does not
    force that, since an uncreated store holds nothing (ADR D6: providers need not instantiate
    memory), while a writeback passes ``create=True`` to store into the branch's own store.
    """
    private = getattr(branch, "_memory", _MISSING)
    if private is not _MISSING and private is None and not create:
        return None
    return getattr(branch, "memory", None)


def turn_key(branch: Any) -> str:
    """What tells one turn of ``branch`` from the next, for idempotent writebacks.

    A served branch keeps no messages, so its server sets its ``turn_key``
    (``composer.Branch.turn_key``: its principal, the server's run and a turn counter kept
    beside the branch); any other branch is told apart by how many messages it holds (a
    lionagi Branch, which has no ``turn_key``, or ``composer.Branch`` after ``prepare_turn``
    recorded its instruction).
    """
    key = getattr(branch, "turn_key", None)
    if isinstance(key, str):
        return key
    messages = getattr(branch, "messages", None)
    try:
        return str(len(messages))  # type: ignore[arg-type]
    except TypeError:
        return ""
