"""composer.templating.views reads lionagi Instructions and Branches as it reads composer's."""

from __future__ import annotations

from typing import Any

import pytest

from .support import LIONAGI_MISSING

pytest.importorskip("lionagi", reason=LIONAGI_MISSING)

from lionagi import Branch
from lionagi.protocols.memory import InMemoryStore, MemoryItem, MemoryQuery

import composer
from composer.templating.views import branch_memory, branch_view, instruction_view

LOGS = {"auto_save_on_exit": False}


def lionagi_instruction(branch: Branch, **kwargs: Any) -> object:
    """An Instruction built the way lionagi's chat builds the one it hands to providers."""
    return branch.msgs.create_instruction(**kwargs)


def test_instruction_view_reads_a_lionagi_instruction_like_composers() -> None:
    branch = Branch(system="s", log_config=LOGS)
    ins = lionagi_instruction(
        branch, instruction="refund failed", guidance="be brief\ncite", context={"ticket": "T-1"}
    )
    mine = composer.Instruction(
        "refund failed", guidance="be brief\ncite", context={"ticket": "T-1"}
    )
    assert (
        instruction_view(ins)
        == instruction_view(mine)
        == {
            "text": "refund failed",
            "guidance": "be brief\ncite",
            "context": {"ticket": "T-1"},
        }
    )


@pytest.mark.parametrize(
    ("context", "seen"),
    [
        (None, None),
        ({"a": 1}, {"a": 1}),
        ([1, 2], [1, 2]),
        ("text", "text"),
    ],
)
def test_lionagi_context_is_shown_as_the_caller_passed_it(context: object, seen: object) -> None:
    """lionagi stores ``context=x`` as ``[x]``; templates see ``x`` as on composer."""
    ins = lionagi_instruction(Branch(log_config=LOGS), instruction="q", context=context)
    view = instruction_view(ins)
    assert view["context"] == seen
    assert type(view["context"]) is type(seen)  # plain list/dict, not lionagi's tracked types


def test_instruction_view_of_non_string_guidance_is_plain_data() -> None:
    ins = lionagi_instruction(Branch(log_config=LOGS), instruction="q", guidance={"k": [1, 2]})
    view = instruction_view(ins)
    assert view["guidance"] == {"k": [1, 2]}
    assert type(view["guidance"]) is dict


def test_branch_view_reads_a_lionagi_branch() -> None:
    branch = Branch(name="payments", log_config=LOGS)
    branch.metadata["team"] = "payments"
    branch.metadata["live"] = object()  # not plain data: a template never sees it
    view = branch_view(branch)
    assert view == {"id": str(branch.id), "name": "payments", "metadata": {"team": "payments"}}
    assert branch_view(composer.Branch(name="payments", metadata={"team": "payments"}))[
        "metadata"
    ] == {"team": "payments"}


def test_branch_view_leaves_out_lionagis_live_metadata() -> None:
    """lionagi keeps the source Branch and a Progression in a clone's metadata."""
    branch = Branch(name="p", log_config=LOGS)
    branch.metadata["current_progression"] = branch.msgs.progression
    clone = branch.clone()
    assert {"clone_from", "current_progression"} <= clone.metadata.keys()
    assert branch_view(clone)["metadata"] == {}


def test_branch_memory_does_not_create_lionagis_store_for_reading() -> None:
    """ADR D6: a branch with providers need not instantiate branch.memory."""
    branch = Branch(log_config=LOGS)
    assert branch_memory(branch) is None
    assert branch._memory is None
    store = branch_memory(branch, create=True)
    assert isinstance(store, InMemoryStore)
    assert branch_memory(branch) is store is branch.memory


def test_branch_memory_returns_a_given_store_for_both_kinds() -> None:
    store = InMemoryStore()
    assert branch_memory(Branch(memory=store, log_config=LOGS)) is store
    assert branch_memory(composer.Branch(memory=store)) is store
    assert branch_memory(composer.Branch()) is None
    assert branch_memory(composer.Branch(), create=True) is None  # composer never invents one


async def test_branch_memory_is_lionagis_searchable_store() -> None:
    branch = Branch(log_config=LOGS)
    store = branch_memory(branch, create=True)
    await store.store(MemoryItem(content="refunds need a ticket", tags=["policy"]))
    found = await branch_memory(branch).search(MemoryQuery(text="ticket"))
    assert [item.content for item in found] == ["refunds need a ticket"]
