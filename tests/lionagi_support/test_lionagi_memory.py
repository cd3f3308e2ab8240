"""``type: memory`` with ``source: branch`` on a real lionagi Branch.

It searches lionagi's ``InMemoryStore`` with lionagi's own ``MemoryQuery``, and its writeback,
which lionagi's ``operate()`` calls after tool calls (ADR D7), stores the action responses
there as lionagi ``MemoryItem``s, which the next turn recalls.
"""

# No ``from __future__ import annotations``: lionagi builds tool schemas from runtime
# annotations and fails on string ones.
from typing import Any

import pytest

from .support import LIONAGI_MISSING, SYSTEM, sent_guidance

pytest.importorskip("lionagi", reason=LIONAGI_MISSING)

from lionagi.protocols.memory import InMemoryStore, MemoryItem, MemoryQuery

import composer
from builtin_providers.memory import MemoryConfig
from builtin_providers.memory import provider_type as memory_type
from builtin_providers.static import provider_type as static_type
from composer.catalog import ProviderTypes
from composer.manifest import Manifest, ProviderConfig

TYPES = ProviderTypes([static_type, memory_type])
QUESTION = "Why did refund R-7 fail?"
GUIDANCE = "Answer in two sentences.\nName your source."


def manifest(*providers: ProviderConfig) -> Manifest:
    return Manifest(version=1, providers=list(providers))


def memory(name: str, **fields: Any) -> MemoryConfig:
    return MemoryConfig.model_validate({"name": name, "type": "memory", **fields})


def lookup_refund(refund_id: str) -> str:
    """Look a refund up in the ledger."""
    return f"{refund_id}: declined by the issuer"


async def test_source_branch_searches_lionagis_store(make_branch: Any, chat_server: Any) -> None:
    store = InMemoryStore()
    await store.store(MemoryItem(content="Refunds over 500 EUR need approval.", tags=["policy"]))
    await store.store(MemoryItem(content="Refunds are paid in 5 days.", tags=["policy"]))
    await store.store(MemoryItem(content="Lunch is at noon.", tags=["office"]))
    policies = memory(
        "policies",
        query={"text": "refund", "tags": ["policy"], "limit": 5},
        header="Policies:",
        template="{{ index }}. {{ item.content }}",
    )
    queries: list[Any] = []
    search = store.search

    async def recording_search(query: Any) -> Any:
        queries.append(query)
        return await search(query)

    store.search = recording_search  # type: ignore[method-assign]
    branch = make_branch(memory=store)
    composer.attach(branch, manifest(policies), types=TYPES)

    await branch.communicate(QUESTION, guidance=GUIDANCE)

    assert queries == [MemoryQuery(text="refund", tags=["policy"], limit=5)]
    assert type(queries[0]) is MemoryQuery  # lionagi's own query model

    block = "Policies:\n1. Refunds over 500 EUR need approval.\n2. Refunds are paid in 5 days."
    assert branch.last_context_report.fired == [
        {"provider_name": "policies", "tokens": composer.count_tokens(block)}
    ]
    guidance, _ = sent_guidance(chat_server.requests[0].messages[0]["content"])
    assert guidance == SYSTEM + block + GUIDANCE


async def test_no_hits_leave_no_row(make_branch: Any, chat_server: Any) -> None:
    """D2: the provider returns None on an empty store; the report has no row for it."""
    branch = make_branch(memory=InMemoryStore())
    composer.attach(branch, manifest(memory("recall", query={"tags": ["none"]})), types=TYPES)

    await branch.communicate(QUESTION, guidance=GUIDANCE)

    report = branch.last_context_report
    assert report.blocks == report.fired == report.skipped == report.failed == []


async def test_operate_writes_action_responses_back_to_branch_memory(
    make_branch: Any, chat_server: Any
) -> None:
    """D7: operate() -> gather_writeback -> the memory provider stores into branch.memory."""
    recall = memory(
        "recall",
        query={"tags": ["action_response"]},
        template="{{ item.content.function }} -> {{ item.content.output }}",
        writeback={"tags": ["action_response", "ledger"], "metadata": {"team": "payments"}},
    )
    branch = make_branch(tools=[lookup_refund])
    composer.attach(branch, manifest(recall), types=TYPES)
    chat_server.reply_tool_call("lookup_refund", {"refund_id": "R-7"})

    result = await branch.operate(instruction=QUESTION, guidance=GUIDANCE, actions=True)

    [response] = result.action_responses
    assert response.output == "R-7: declined by the issuer"
    assert branch.last_context_report.fired == []  # the store was empty before the tool ran
    assert sent_guidance(chat_server.requests[0].messages[0]["content"])[0] == SYSTEM + GUIDANCE
    [item] = await branch.memory.search(MemoryQuery(tags=["ledger"]))
    assert isinstance(item, MemoryItem)
    assert isinstance(branch.memory, InMemoryStore)
    assert item.content == {
        "function": "lookup_refund",
        "arguments": {"refund_id": "R-7"},
        "output": "R-7: declined by the issuer",
    }
    assert item.tags == ["action_response", "ledger"]
    assert item.metadata == {
        "source": "writeback",
        "provider": "recall",
        "branch_id": str(branch.id),
        "team": "payments",
    }

    # The next turn recalls what the tool returned, without it being a message.
    await branch.communicate("And refund R-8?", guidance=GUIDANCE)

    block = "lookup_refund -> R-7: declined by the issuer"
    assert branch.last_context_report.blocks == [block]
    historical = chat_server.requests[-1].messages[0]["content"]
    assert sent_guidance(historical)[0] == SYSTEM + block + GUIDANCE  # the first instruction's
    stored = [text for msg in branch.messages for text in (msg.rendered, repr(msg.content))]
    assert all(block not in text for text in stored)


async def test_writeback_is_off_by_default(make_branch: Any, chat_server: Any) -> None:
    branch = make_branch(tools=[lookup_refund], memory=InMemoryStore())
    composer.attach(branch, manifest(memory("recall")), types=TYPES)
    chat_server.reply_tool_call("lookup_refund", {"refund_id": "R-7"})

    await branch.operate(instruction=QUESTION, actions=True)

    assert await branch.memory.search(MemoryQuery()) == []
