"""An OpenAI Agents SDK agent whose turns composer composes from the bundled configs/.

    python examples/openai_agents.py --base-url http://127.0.0.1:8000/v1 --model gpt-4.1-mini \
        --turns 3 [--placement adr|stable_prefix]

One conversation (a ``SQLiteSession``) of N turns, each asking something else, so the runbook
and memory blocks change from turn to turn; prints the last answer. The model is reached
through ``OpenAIChatCompletionsModel`` on an ``AsyncOpenAI`` client at ``--base-url`` (the key
is ``OPENAI_API_KEY``, or any string for a local server); tracing is off, so nothing goes
anywhere else. ``configs/`` runs offline (dev).
"""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path

from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    RunConfig,
    Runner,
    SQLiteSession,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

import composer
from composer.integrations.openai_agents import ComposerInputFilter

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
    set_tracing_disabled(True)  # the SDK would export traces to OpenAI
    manifest = composer.load_manifest(args.configs, env="dev")
    openai = AsyncOpenAI(base_url=args.base_url, api_key=os.environ.get("OPENAI_API_KEY", "-"))
    model = OpenAIChatCompletionsModel(model=args.model, openai_client=openai)
    agent = Agent(name="platform", instructions=SYSTEM, model=model)
    session = SQLiteSession("platform-1")
    composing = ComposerInputFilter(manifest, session, placement=args.placement)
    config = RunConfig(call_model_input_filter=composing, tracing_disabled=True)
    async with openai, composing:
        for number in range(args.turns):
            question = QUESTIONS[number % len(QUESTIONS)]
            result = await Runner.run(agent, question, session=session, run_config=config)
    session.close()
    await manifest.aclose()
    print(result.final_output)


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
