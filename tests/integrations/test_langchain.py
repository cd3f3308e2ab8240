"""What only the LangChain integration does, beyond the contract (``test_contract.py``): a run
without a ``thread_id`` is a branch of its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain", reason="LangChain is not installed (the langchain extra)")
pytest.importorskip("langchain_openai", reason="langchain-openai is not installed")

from fakechat import MODEL, serve_chat
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from composer.integrations.langchain import ComposerMiddleware

from .frameworks import NAME, SYSTEM, TEAM, disk_usage, load, system_of


async def test_a_run_without_a_thread_id_is_a_branch_of_its_own(tmp_path: Path) -> None:
    """No ``thread_id``: each run composes on a branch no other run shares (no ``default``),
    and its state keeps no trace of composer (the run token is private)."""
    manifest = load(tmp_path)
    middleware = ComposerMiddleware(manifest)
    with serve_chat() as chat:
        model = ChatOpenAI(
            model=MODEL, base_url=chat.base_url, api_key="any", use_responses_api=False
        )  # no checkpointer: nothing needs a thread
        agent = create_agent(
            model, [tool(disk_usage)], system_prompt=SYSTEM, middleware=[middleware], name=NAME
        )
        config: Any = {"metadata": {"team": TEAM}}
        states = [
            await agent.ainvoke({"messages": [HumanMessage("How do I roll back?")]}, config)
            for _ in range(2)
        ]
    await middleware.aclose()
    await manifest.aclose()
    first, second = (system_of(request) for request in chat.requests)
    assert f"RULES-r7 for {NAME} of {TEAM} in conversation-" in first
    assert "in default." not in first + second
    assert first != second  # two branch ids
    assert [sorted(state) for state in states] == [["messages"], ["messages"]]
