"""A LangChain agent whose every model call gets the bundled manifest's context.

    python examples/langchain.py --base-url http://127.0.0.1:8000/v1 --model gpt-4.1-mini \\
        --turns 3 [--placement stable_prefix]

``create_agent`` with ``ComposerMiddleware`` over ``configs/`` (dev) and ChatOpenAI (chat
completions) at ``--base-url`` (OPENAI_API_KEY if the endpoint wants one): N user turns in one
thread, each about something else, so the runbook and memory blocks change every turn.
Prints the last answer. Needs ``pip install 'context-composer[langchain]'``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any

if Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)  # this file's folder: its name, langchain.py, would hide the package

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

import composer
from composer.integrations.langchain import ComposerMiddleware

SYSTEM = "You are the on-call assistant for the platform team. Answer briefly.\n"
QUESTIONS = [
    "The API returns 502 errors after the deploy, what do I do?",
    "How do I roll back a bad deploy with deployctl?",
    "The database failover drill is due, what are the steps?",
    "A certificate for an internal host expires tomorrow, how do I renew it?",
    "What is the policy for paging at night?",
]


async def main(args: argparse.Namespace) -> None:
    manifest = composer.load_manifest(args.configs, env="dev")
    middleware = ComposerMiddleware(manifest, placement=args.placement)
    model = ChatOpenAI(
        model=args.model,
        base_url=args.base_url,
        api_key=os.environ.get("OPENAI_API_KEY", "unused"),
        use_responses_api=False,
    )
    agent = create_agent(
        model,
        system_prompt=SYSTEM,
        middleware=[middleware],
        checkpointer=InMemorySaver(),  # the thread's history: composer's blocks are never in it
        name="platform",  # the branch name ({{ branch.name }} in the house rules)
    )
    config: Any = {"configurable": {"thread_id": "example"}}  # the branch id
    try:
        for number in range(args.turns):
            question = QUESTIONS[number % len(QUESTIONS)]
            state = await agent.ainvoke({"messages": [HumanMessage(question)]}, config)
    finally:
        await middleware.aclose()
        await manifest.aclose()
    print(state["messages"][-1].text)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True, help="an OpenAI-compatible endpoint (/v1)")
    parser.add_argument("--model", required=True)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--placement", choices=["adr", "stable_prefix"], default=None)
    parser.add_argument("--configs", type=Path, default=Path(__file__).parents[1] / "configs")
    asyncio.run(main(parser.parse_args()))
