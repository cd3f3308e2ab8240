"""composer in the OpenAI Agents SDK: a model input filter for one conversation.

``Runner.run(agent, text, session=session, run_config=RunConfig(call_model_input_filter=
ComposerInputFilter(manifest, session)))``. The SDK calls the filter right before each model
call with the instructions and input items it is about to send, and sends what it returns;
the session stores the run's own input and output, never what the filter adds. A turn is the
input up to its newest user message (the model calls after a tool call only add to it; a
retry of the same input is the same turn), composed once, with that message's text
(``session.session_id`` is the conversation, the agent's name the branch name):

* the composed instructions follow the agent's own (after a newline) on each model call;
* with ``stable_prefix`` placement the turn's context block goes in as a user message of its
  own right before the newest user message, so the instructions and the history stay
  byte-identical from one turn to the next;
* each tool output (``function_call_output``) goes once to ``Composer.writeback`` as
  ``{"function", "arguments", "output"}`` (the shape of a lionagi action response): at the
  model call that answers it, or, when a run ends on a tool (``tool_use_behavior``), at the
  next turn's first model call; always under the identity of the turn whose run called the
  tool (this filter's composition), whatever another filter sharing the ``Composer`` composed
  on the same conversation id meanwhile.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

try:
    from agents import Session
    from agents.items import TResponseInputItem
    from agents.run_config import CallModelData, ModelInputData
except ImportError as error:  # the extra is required
    raise ImportError(
        "composer.integrations.openai_agents needs the OpenAI Agents SDK: "
        "pip install 'context-composer[openai-agents]'"
    ) from error

from composer._closing import AsyncCloseable
from composer.integrations.session import Composed, Composer, Placement
from composer.manifest import Manifest
from composer.registry import ProviderReport

__all__ = ["ComposerInputFilter"]


class ComposerInputFilter(AsyncCloseable):
    """``call_model_input_filter`` composing the turns of one conversation.

    ``conversation`` is an SDK ``Session`` (its ``session_id``) or an id. ``name`` and
    ``metadata`` are what templates see as ``branch.name`` (default: the agent's name) and
    ``branch.metadata``. Give it a ``Composer`` to share one between conversations; built from
    a manifest it owns its own: close it (``async with``, or ``aclose``).
    """

    def __init__(
        self,
        manifest: Manifest | Composer,
        conversation: Session | str,
        *,
        placement: Placement | None = None,
        name: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        self.composer, self._owned = Composer.serving(manifest, placement)
        self.conversation = (
            conversation if isinstance(conversation, str) else conversation.session_id
        )
        self.name = name
        self.metadata = dict(metadata or {})
        self._turn: str | None = None  # a digest of the input up to the newest user message
        self._text = ""  # that message's text
        self._composed: Composed | None = None
        self._written: set[str] = set()  # call ids of the turn's outputs written back

    @property
    def report(self) -> ProviderReport | None:
        """The report of the conversation's last composed turn."""
        return self._composed.report if self._composed is not None else None

    async def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        items = list(data.model_data.input)
        at = _newest_user(items)
        end = len(items) if at is None else at
        turn = _digest(items[: end + 1])
        if self._composed is None or turn != self._turn:
            await self._leftovers(items[:end])
            self._written = set()
            self._text = "" if at is None else _text(items[at])
            self._composed = await self.composer.compose(
                self.conversation,
                self._text,
                name=self.name if self.name is not None else data.agent.name,
                metadata=self.metadata,
            )
            self._turn = turn
        await self._write_back(items[end + 1 :])
        composed = self._composed
        instructions = data.model_data.instructions
        if composed.instructions:
            instructions = "\n".join(filter(None, [instructions, composed.instructions]))
        if composed.context is not None:
            block: TResponseInputItem = {"role": "user", "content": composed.context}
            items.insert(end, block)
        return ModelInputData(input=items, instructions=instructions)

    async def _leftovers(self, history: Sequence[TResponseInputItem]) -> None:
        """The last turn's outputs no model call answered (its run ended on a tool): they
        follow the previous user message, when that is the last turn's."""
        before = _newest_user(history)
        if (
            before is not None
            and self._composed is not None
            and _text(history[before]) == self._text
        ):
            await self._write_back(history[before + 1 :])

    async def _write_back(self, items: Sequence[TResponseInputItem]) -> None:
        """The outputs among ``items`` not written back yet, with the calls they answer."""
        views: list[Mapping[str, Any]] = [i for i in items if isinstance(i, Mapping)]
        calls = {i.get("call_id"): i for i in views if i.get("type") == "function_call"}
        results: list[dict[str, Any]] = []
        for item in views:
            call_id = item.get("call_id")
            if item.get("type") != "function_call_output" or call_id in self._written:
                continue
            self._written.add(str(call_id))
            call = calls.get(call_id, {})
            results.append(
                {
                    "function": call.get("name"),
                    "arguments": _arguments(call.get("arguments")),
                    "output": item.get("output"),
                }
            )
        if results and self._composed is not None:
            await self.composer.writeback(self._composed, results)

    async def aclose(self) -> None:
        """Close the Composer this filter made (one it was given stays open)."""
        if self._owned:
            await self.composer.aclose()


def _digest(items: Sequence[TResponseInputItem]) -> str:
    """What identifies a turn: the input up to its newest user message (a run's later model
    calls add only after it; a retry of the same input is the same turn)."""
    text = json.dumps(items, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _newest_user(items: Sequence[TResponseInputItem]) -> int | None:
    for at in range(len(items) - 1, -1, -1):
        item = items[at]
        if isinstance(item, Mapping) and item.get("role") == "user":
            return at
    return None


def _text(item: TResponseInputItem) -> str:
    """A user message's text: its string content, or its text parts joined."""
    content = item.get("content") if isinstance(item, Mapping) else None
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "\n".join(p["text"] for p in parts if isinstance(p, Mapping) and "text" in p)


def _arguments(raw: Any) -> Any:
    """A call's arguments as data (the SDK keeps them as a JSON string)."""
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw
