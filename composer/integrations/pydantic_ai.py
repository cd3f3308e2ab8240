"""composer in a Pydantic AI agent: dynamic instructions, and writeback from tool results.

    agent = Agent(model, instructions="You are on call.", capabilities=[ComposerCapability(manifest)])
    first = await agent.run(text)
    later = await agent.run(text, message_history=first.all_messages())

A capability: before each attempt at a model request it composes the run's turn
(``Composer.compose``, once per run) and gives the model the composed instructions in place of
the agent's (which it folds in, as ADR-0008 D4 folds the system text), and with
``stable_prefix`` placement the turn's context block before the newest user prompt. It works in
``prepare_model_request`` and not through ``instructions=`` or ``@agent.instructions``: Pydantic
AI records those in every ``ModelRequest`` of the message history, while what that hook changes
reaches the model only, so nothing composer injects is stored in ``all_messages()``. Each tool's
result, as the tool returned it, goes to the providers' writeback.

What maps to what: the run's ``conversation_id`` (kept on the message history from run to run)
is the branch id (a run without one is a branch of its own), the agent's ``name`` the branch
name, the run's ``metadata`` the branch metadata; one run is one turn.

Each run gets its own copy of the capability (``for_run``), which keeps the run's composition:
its tool results are written back under that composition's identity (``Composer.writeback``),
never under that of another run composing on the same conversation id meanwhile.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

try:
    from pydantic_ai import RunContext
    from pydantic_ai.capabilities import AbstractCapability, ValidatedToolArgs
    from pydantic_ai.messages import (
        InstructionPart,
        ModelMessage,
        ModelRequest,
        ToolCallPart,
        UserPromptPart,
    )
    from pydantic_ai.models import ModelRequestContext
    from pydantic_ai.tools import ToolDefinition
except ImportError as e:  # pragma: no cover - the test runs it with Pydantic AI hidden
    raise ImportError(
        "composer.integrations.pydantic_ai needs Pydantic AI: "
        "pip install 'context-composer[pydantic-ai]'"
    ) from e

from composer.integrations.session import Composed, Composer, Placement
from composer.manifest import Manifest
from composer.registry import ProviderReport

__all__ = ["ComposerCapability"]


@dataclass
class ComposerCapability(AbstractCapability[Any]):
    """One manifest's context in every model request of an agent's runs.

    Give it a loaded manifest (``placement`` overrides its ``runtime.placement``) or a
    ``Composer`` to share; close it (``aclose``) to close the conversations' providers.
    """

    manifest: Manifest | Composer
    placement: Placement | None = None
    composer: Composer = field(init=False, repr=False)
    _run: Composed | None = field(init=False, repr=False, default=None)
    """This run's composition (on the run's own copy)."""

    def __post_init__(self) -> None:
        if isinstance(self.manifest, Composer):
            self.composer = self.manifest
        else:
            self.composer = Composer(self.manifest, placement=self.placement)

    async def for_run(self, ctx: RunContext[Any]) -> ComposerCapability:
        """A copy for one run, sharing the Composer, keeping that run's composition."""
        run = copy.copy(self)
        run._run = None
        return run

    async def prepare_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        parameters = request_context.model_request_parameters
        system = InstructionPart.join(parameters.instruction_parts or []) or ""
        composed = await self._composed(ctx, system + "\n" if system else "")
        parts = [InstructionPart(composed.instructions, dynamic=composed.context is None)]
        return replace(
            request_context,
            messages=_placed(request_context.messages, composed),
            model_request_parameters=replace(
                parameters, instruction_parts=parts if composed.instructions else []
            ),
        )

    async def after_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: ValidatedToolArgs,
        result: Any,
    ) -> Any:
        """The tool's result goes to the providers' writeback, under the identity of the run
        that called it (a failed tool never gets here)."""
        await self.composer.writeback(await self._composed(ctx, ""), [result])
        return result

    async def _composed(self, ctx: RunContext[Any], system: str) -> Composed:
        """The run's composition: composed at its first model request, then kept. (A tool hook
        before any model request, as a worker that re-derives the run would meet, composes it
        for the run's own conversation, name and metadata.)"""
        if self._run is None:
            self._run = await self.composer.compose(
                _conversation(ctx) or self.composer.new_conversation(),
                _text(ctx.prompt),
                system=system,
                name=ctx.agent.name if ctx.agent is not None else None,
                metadata=ctx.metadata,
                turn=ctx.run_id,
            )
        return self._run

    def last_report(self, conversation_id: str) -> ProviderReport | None:
        """The report of the conversation's latest turn: what was injected, skipped, failed, why."""
        return self.composer.last_report(conversation_id)

    async def aclose(self) -> None:
        """Close every conversation's providers (the manifest stays open)."""
        await self.composer.aclose()


def _conversation(ctx: RunContext[Any]) -> str | None:
    return ctx.conversation_id or ctx.run_id


def _text(prompt: str | Sequence[Any] | None) -> str:
    if prompt is None or isinstance(prompt, str):
        return prompt or ""
    return "\n".join(item for item in prompt if isinstance(item, str))


def _placed(messages: list[ModelMessage], composed: Composed) -> list[ModelMessage]:
    """The request's messages with the turn's context block (``stable_prefix``) before the
    newest user prompt: new message and part objects, the history's stay as they are."""
    context = composed.context
    if context is None:
        return messages
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if not isinstance(message, ModelRequest):
            continue
        for number in range(len(message.parts) - 1, -1, -1):
            part = message.parts[number]
            if isinstance(part, UserPromptPart):
                if isinstance(part.content, str):
                    content: str | list[Any] = composed.user_text(part.content)
                else:
                    content = [context, *part.content]
                parts = [*message.parts]
                parts[number] = replace(part, content=content)
                return [*messages[:index], replace(message, parts=parts), *messages[index + 1 :]]
    last = messages[-1]  # no user prompt (a run resumed without one): ends in a ModelRequest
    assert isinstance(last, ModelRequest)
    return [*messages[:-1], replace(last, parts=[*last.parts, UserPromptPart(context)])]
