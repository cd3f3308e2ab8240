"""What only the Agent Framework integration does, beyond the contract (``test_contract.py``):
a streamed run is composed and written back like any run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip(
    "agent_framework_openai",
    reason="the Agent Framework is not installed (pip install 'context-composer[agent-framework]')",
)

from fakechat import serve_chat

from .frameworks import FRAMEWORKS, AgentFrameworkAgent, context_of, load, remember

AGENT_FRAMEWORK = next(f for f in FRAMEWORKS if f.name == "agent_framework")


async def test_a_streamed_run_is_composed_and_written_back_like_any_run(tmp_path: Path) -> None:
    manifest = load(tmp_path)
    await remember(manifest, "NOTE: db7 disk is new")
    with serve_chat() as chat:
        chat.reply_tool_call("disk_usage", {"host": "db7"})
        async with AGENT_FRAMEWORK.agent(chat, manifest, "stable_prefix") as agent:
            assert isinstance(agent, AgentFrameworkAgent)
            session = agent.agent.create_session(session_id="c-7")
            stream = agent.agent.run("Check the db7 disk", session=session, stream=True)
            answer = await stream.get_final_response()
            await agent.ask("And the db7 disk now?", "c-8")
    await manifest.aclose()
    assert answer.text == "fixed answer"
    blocks = [context_of(request, AGENT_FRAMEWORK) for request in chat.requests]  # once each
    assert len(blocks) == 3
    assert "db7: disk 91% full" in blocks[2]
    assert "<context id=" not in json.dumps(session.to_dict(), default=str)
