"""A Pydantic AI agent whose every model request gets the bundled manifest's context.

    python examples/pydantic_ai.py --base-url http://127.0.0.1:8000/v1 --model gpt-4.1-mini \\
        --turns 3 [--placement stable_prefix]

An ``Agent`` with ``ComposerCapability`` over ``configs/`` (dev) and OpenAIChatModel (chat
completions) at ``--base-url`` (OPENAI_API_KEY if the endpoint wants one): N user turns in one
conversation, each about something else, so the runbook and memory blocks change every turn.
Prints the last answer. Needs ``pip install 'context-composer[pydantic-ai]'``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

if Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)  # this file's folder: its name, pydantic_ai.py, would hide the package

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

import composer
from composer.integrations.pydantic_ai import ComposerCapability

SYSTEM = "You are the on-call assistant for the platform team. Answer briefly."
QUESTIONS = [
    "The API returns 502 errors after the deploy, what do I do?",
    "How do I roll back a bad deploy with deployctl?",
    "The database failover drill is due, what are the steps?",
    "A certificate for an internal host expires tomorrow, how do I renew it?",
    "What is the policy for paging at night?",
]


async def main(args: argparse.Namespace) -> None:
    manifest = composer.load_manifest(args.configs, env="dev")
    capability = ComposerCapability(manifest, placement=args.placement)
    provider = OpenAIProvider(
        base_url=args.base_url, api_key=os.environ.get("OPENAI_API_KEY", "unused")
    )
    agent = Agent(
        OpenAIChatModel(args.model, provider=provider),
        instructions=SYSTEM,
        capabilities=[capability],
        name="platform",  # the branch name ({{ branch.name }} in the house rules)
    )
    history: list[ModelMessage] = []  # the conversation: composer's blocks are never in it
    try:
        async with agent:  # closes the model's HTTP client at the end
            for number in range(args.turns):
                question = QUESTIONS[number % len(QUESTIONS)]
                result = await agent.run(question, message_history=history)
                history = result.all_messages()  # its conversation_id is the branch id
    finally:
        await capability.aclose()
        await manifest.aclose()
    print(result.output)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True, help="an OpenAI-compatible endpoint (/v1)")
    parser.add_argument("--model", required=True)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--placement", choices=["adr", "stable_prefix"], default=None)
    parser.add_argument("--configs", type=Path, default=Path(__file__).parents[1] / "configs")
    asyncio.run(main(parser.parse_args()))
