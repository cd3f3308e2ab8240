"""A Microsoft Agent Framework agent whose turns composer composes from the bundled configs/.

    python examples/agent_framework.py --base-url http://127.0.0.1:8000/v1 --model gpt-4.1-mini \
        --turns 3 [--placement adr|stable_prefix]

One conversation (an ``AgentSession``) of N turns, each asking something else, so the runbook
and memory blocks change from turn to turn; prints the last answer. The model is reached
through the Agent Framework's OpenAI chat-completions client at ``--base-url`` (the key is
``OPENAI_API_KEY``, or any string for a local server). ``configs/`` runs offline (dev).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

# This file has the framework's name: import the framework, not this file.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent.resolve()]

from agent_framework import Agent  # noqa: E402
from agent_framework.openai import OpenAIChatCompletionClient  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402

import composer  # noqa: E402
from composer.integrations.agent_framework import ComposerContextProvider  # noqa: E402

CONFIGS = Path(__file__).parents[1] / "configs"
SYSTEM = "You are the on-call assistant for the platform team. Answer briefly."
QUESTIONS = [
    "The API returns 502 errors after the deploy, what do I do?",
    "How do I roll back a bad deploy with deployctl?",
    "The database failover drill is due, what are the steps?",
    "A certificate for an internal host expires tomorrow, how do I renew it?",
    "Who is on call this week and how do I page them?",
]


async def main(args: argparse.Namespace) -> None:
    manifest = composer.load_manifest(args.configs, env="dev")
    openai = AsyncOpenAI(base_url=args.base_url, api_key=os.environ.get("OPENAI_API_KEY", "-"))
    client = OpenAIChatCompletionClient(model=args.model, async_client=openai)
    context = ComposerContextProvider(manifest, placement=args.placement)
    agent = Agent(client=client, name="platform", instructions=SYSTEM, context_providers=[context])
    async with openai, context, agent:
        session = agent.create_session()
        for number in range(args.turns):
            answer = await agent.run(QUESTIONS[number % len(QUESTIONS)], session=session)
    await manifest.aclose()
    print(answer.text)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--placement", choices=["adr", "stable_prefix"], default="adr")
    parser.add_argument(
        "--configs", type=Path, default=CONFIGS, help="default: the bundled configs/"
    )
    asyncio.run(main(parser.parse_args()))
