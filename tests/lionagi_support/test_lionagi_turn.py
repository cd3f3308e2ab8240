"""A manifest attached to a real lionagi Branch drives lionagi's own turn path.

Each test talks to a fake chat-completions endpoint on 127.0.0.1 (``chat_server``) through a
real lionagi ``iModel`` and reads back the exact request body. ADR-0008 D4 rendering is
``system + "\\n".join(blocks) + guidance`` with no other separator; lionagi puts that string
in the guidance of the first instruction it sends, as a YAML block scalar when it has several
lines. ``sent_guidance`` undoes only that indentation, so the comparison stays byte for byte.
"""

# No ``from __future__ import annotations``: lionagi builds tool schemas from runtime
# annotations and fails on string ones.
import logging
from typing import Any

import pytest

from .support import LIONAGI_MISSING, MODEL, SYSTEM, ProbeConfig, probe_calls, sent_guidance

pytest.importorskip("lionagi", reason=LIONAGI_MISSING)

from lionagi.testing import ScriptedEndpoint, scripted_imodel

import composer
from builtin_providers.static import StaticConfig
from composer.build import attach
from composer.manifest import Manifest, ProviderConfig

GUIDANCE = "Answer in two sentences.\nName the runbook you used."
QUESTION = "Why did refund R-7 fail?"


def manifest(*providers: ProviderConfig, budget: int = 2000) -> Manifest:
    return Manifest(version=1, budget=budget, providers=list(providers))


def static(name: str, text: str, **kwargs: Any) -> StaticConfig:
    return StaticConfig(name=name, text=text, **kwargs)


def probe(name: str, text: str | None = None, **kwargs: Any) -> ProbeConfig:
    return ProbeConfig(name=name, text=text, **kwargs)


def fired(*pairs: tuple[str, str]) -> list[dict[str, Any]]:
    """The report rows ADR D3 prescribes for retained (name, text) results."""
    return [{"provider_name": name, "tokens": composer.count_tokens(text)} for name, text in pairs]


def stored_text(branch: Any) -> list[str]:
    """Every durable message as lionagi renders and holds it."""
    return [text for msg in branch.messages for text in (msg.rendered, repr(msg.content))]


HOUSE = "Answer in English.\nNever repeat a card number."
RUNBOOK = "Runbook «refunds»: check the ledger first 🧾"
STATUS = "Status: all systems nominal."


async def test_communicate_sends_system_then_blocks_then_guidance(
    make_branch: Any, chat_server: Any, types: Any
) -> None:
    m = manifest(static("house", HOUSE), static("runbook", RUNBOOK), probe("status", STATUS))
    branch = make_branch()
    registry = attach(branch, m, types=types)
    assert branch._context_providers is registry
    assert branch.providers is registry  # lionagi's lazy property returns the attached one

    answer = await branch.communicate(QUESTION, guidance=GUIDANCE)

    assert answer == "fixed answer"
    [request] = chat_server.requests
    assert request.path == "/v1/chat/completions"
    [message] = request.messages
    assert request.json == {"model": MODEL, "messages": [message]}
    assert message["role"] == "user"
    guidance, rest = sent_guidance(message["content"])
    assert guidance == SYSTEM + HOUSE + "\n" + RUNBOOK + "\n" + STATUS + GUIDANCE
    assert rest == f"Instruction: {QUESTION}"


async def test_report_names_fired_providers_with_token_counts(
    make_branch: Any, chat_server: Any, types: Any
) -> None:
    branch = make_branch()
    attach(branch, manifest(static("house", HOUSE), probe("status", STATUS)), types=types)
    assert branch.last_context_report is None  # D1: a new branch has no report

    await branch.communicate(QUESTION, guidance=GUIDANCE)

    report = branch.last_context_report
    assert isinstance(report, composer.ProviderReport)
    assert report.blocks == [HOUSE, STATUS]
    assert report.fired == fired(("house", HOUSE), ("status", STATUS))
    assert report.skipped == []
    assert report.failed == []


async def test_injected_text_never_reaches_branch_messages(
    make_branch: Any, chat_server: Any, types: Any
) -> None:
    branch = make_branch()
    attach(branch, manifest(static("house", HOUSE), static("runbook", RUNBOOK)), types=types)

    await branch.communicate(QUESTION, guidance=GUIDANCE)

    assert [type(msg).__name__ for msg in branch.messages] == [
        "System",
        "Instruction",
        "AssistantResponse",
    ]
    assert branch.messages[0].rendered == SYSTEM
    for text in stored_text(branch):
        assert HOUSE not in text
        assert RUNBOOK not in text
    assert RUNBOOK in sent_guidance(chat_server.requests[0].messages[0]["content"])[0]


async def test_priority_admits_and_registration_order_renders(
    make_branch: Any, chat_server: Any, types: Any
) -> None:
    """D3 in a real call: higher priority is admitted first, blocks keep declaration order."""
    low, high, big = "LOW block.", "HIGH block.", "ledger " * 40
    m = manifest(
        static("low", low, priority=0),
        static("high", high, priority=10),
        static("big", big, priority=5),
        static("capped", "one two three four", max_tokens=2),
        budget=composer.count_tokens(low) + composer.count_tokens(high),  # equality fits
    )
    branch = make_branch()
    attach(branch, m, types=types)

    await branch.communicate(QUESTION, guidance=GUIDANCE)

    report = branch.last_context_report
    assert report.blocks == [low, high]
    assert report.fired == fired(("low", low), ("high", high))
    assert report.skipped == ["capped", "big"]  # per-provider cap first, then the budget
    guidance, _ = sent_guidance(chat_server.requests[0].messages[0]["content"])
    assert guidance == SYSTEM + low + "\n" + high + GUIDANCE


async def test_templates_read_the_lionagi_instruction_and_branch(
    make_branch: Any, chat_server: Any, types: Any
) -> None:
    """The built-in static type renders lionagi objects through composer.templating.views."""
    text = (
        "Team {{ branch.name }} ({{ branch.metadata.tier }}), ticket {{ instruction.context.ticket }}: "
        "{{ instruction.text }}"
    )
    branch = make_branch(name="payments")
    branch.metadata["tier"] = "gold"
    attach(branch, manifest(static("about", text)), types=types)

    await branch.communicate(QUESTION, guidance=GUIDANCE, context={"ticket": "T-42"})

    block = f"Team payments (gold), ticket T-42: {QUESTION}"
    assert branch.last_context_report.blocks == [block]
    guidance, rest = sent_guidance(chat_server.requests[0].messages[0]["content"])
    assert guidance == SYSTEM + block + GUIDANCE
    assert rest == f"Instruction: {QUESTION}\nContext:\n- ticket: T-42"


async def test_with_history_the_fold_goes_to_the_first_instruction(
    make_branch: Any, chat_server: Any, types: Any
) -> None:
    """D4: with retained history the fold is the guidance of the first historical instruction."""
    branch = make_branch()
    attach(branch, manifest(static("asked", "Asked: {{ instruction.text }}")), types=types)
    first_guidance = "First turn.\nBe brief."

    await branch.communicate("first question", guidance=first_guidance)
    await branch.communicate("second question", guidance=GUIDANCE)

    first, second = chat_server.requests
    guidance, rest = sent_guidance(first.messages[0]["content"])
    assert guidance == SYSTEM + "Asked: first question" + first_guidance
    assert rest == "Instruction: first question"
    historical, answer, current = second.messages
    guidance, rest = sent_guidance(historical["content"])
    assert guidance == SYSTEM + "Asked: second question" + first_guidance  # this turn's block
    assert rest == "Instruction: first question"
    assert answer == {"role": "assistant", "content": "fixed answer"}
    assert (
        current["content"]
        == "Guidance: |-\n  Answer in two sentences.\n  Name the runbook you used.\nInstruction: second question"
    )
    assert all("Asked:" not in text for text in stored_text(branch))


async def test_chat_gathers_and_records_nothing(
    make_branch: Any, chat_server: Any, types: Any
) -> None:
    branch = make_branch()
    attach(branch, manifest(static("house", HOUSE)), types=types)

    assert await branch.chat(QUESTION, guidance=GUIDANCE) == "fixed answer"

    guidance, _ = sent_guidance(chat_server.requests[0].messages[0]["content"])
    assert guidance == SYSTEM + HOUSE + GUIDANCE
    assert [msg.rendered for msg in branch.messages] == [SYSTEM]  # direct chat records nothing
    assert branch.last_context_report.fired == fired(("house", HOUSE))


async def test_systemless_branch_calls_no_provider(
    make_branch: Any, chat_server: Any, types: Any
) -> None:
    """D4/P7: no system message, no provider call; every name reported skipped."""
    m = manifest(probe("status", STATUS), probe("search", "results"), static("house", HOUSE))
    branch = make_branch(system=None)
    attach(branch, m, types=types)

    assert await branch.communicate(QUESTION, guidance=GUIDANCE) == "fixed answer"

    assert probe_calls(m) == []
    report = branch.last_context_report  # built by lionagi's turn path: lionagi's own class
    assert report.skipped == ["status", "search", "house"]
    assert report.blocks == report.fired == report.failed == []
    guidance, rest = sent_guidance(chat_server.requests[0].messages[0]["content"])
    assert guidance == GUIDANCE
    assert rest == f"Instruction: {QUESTION}"


async def test_failing_providers_leave_the_call_and_the_others_intact(
    make_branch: Any, chat_server: Any, types: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """D2: a raising provider and a template that fails at render are contained."""
    m = manifest(
        static("house", HOUSE),
        probe("boom", fail=True),
        static("bad-template", "{{ instruction.context.missing }}"),
        static("runbook", RUNBOOK),
    )
    branch = make_branch()
    attach(branch, m, types=types)

    with caplog.at_level(logging.WARNING, logger="composer.registry"):
        assert await branch.communicate(QUESTION, guidance=GUIDANCE) == "fixed answer"

    report = branch.last_context_report
    assert report.failed == ["boom", "bad-template"]
    assert report.fired == fired(("house", HOUSE), ("runbook", RUNBOOK))
    assert report.skipped == []
    guidance, _ = sent_guidance(chat_server.requests[0].messages[0]["content"])
    assert guidance == SYSTEM + HOUSE + "\n" + RUNBOOK + GUIDANCE
    warned = [r for r in caplog.records if r.name == "composer.registry"]
    assert [r.args for r in warned] == [("boom",), ("bad-template",)]
    assert all(r.exc_info for r in warned)


async def test_an_empty_manifest_gathers_nothing_and_keeps_the_last_report(
    make_branch: Any, chat_server: Any, types: Any
) -> None:
    """D4: no (or an empty) registry leaves ``last_context_report`` as it was."""
    branch = make_branch()
    attach(branch, manifest(static("house", HOUSE)), types=types)
    await branch.communicate(QUESTION, guidance=GUIDANCE)
    previous = branch.last_context_report

    registry = attach(branch, manifest(static("off", "never", enabled=False)), types=types)
    assert not registry
    await branch.communicate("again", guidance=GUIDANCE)

    assert branch.last_context_report is previous
    historical = chat_server.requests[1].messages[0]["content"]
    assert sent_guidance(historical)[0] == SYSTEM + GUIDANCE


async def test_operate_with_a_tool_call_runs_writeback_once(
    make_branch: Any, chat_server: Any, types: Any
) -> None:
    """D7: operate() hands the action responses to each provider's writeback, in order."""

    def lookup_refund(refund_id: str) -> str:
        """Look a refund up in the ledger."""
        return f"{refund_id}: declined by issuer"

    m = manifest(probe("first", "Recall: none."), static("house", HOUSE), probe("second"))
    branch = make_branch(tools=[lookup_refund])
    attach(branch, m, types=types)
    chat_server.reply_tool_call("lookup_refund", {"refund_id": "R-7"})

    result = await branch.operate(instruction=QUESTION, guidance=GUIDANCE, actions=True)

    [response] = result.action_responses
    assert response.output == "R-7: declined by issuer"
    calls = probe_calls(m)
    assert [(c.provider, c.kind) for c in calls] == [
        ("first", "provide"),
        ("second", "provide"),
        ("first", "writeback"),
        ("second", "writeback"),
    ]
    assert calls[0].payload is calls[1].payload  # D4: one Instruction, built once
    assert calls[0].payload.content.instruction == QUESTION
    assert calls[0].branch is calls[2].branch is branch
    assert calls[2].payload == [response]
    guidance, _ = sent_guidance(chat_server.requests[0].messages[0]["content"])
    assert guidance == SYSTEM + "Recall: none.\n" + HOUSE + GUIDANCE


async def test_turns_without_action_responses_run_no_writeback(
    make_branch: Any, chat_server: Any, types: Any
) -> None:
    """D7: direct chat, communicate and an operate without tool calls never call writeback."""
    m = manifest(probe("memo", "Recall: none."))
    branch = make_branch()
    attach(branch, m, types=types)

    await branch.chat(QUESTION)
    await branch.communicate(QUESTION)
    await branch.operate(instruction=QUESTION)

    assert {c.kind for c in probe_calls(m)} == {"provide"}
    assert len(probe_calls(m)) == 3


async def test_run_gathers_into_the_streamed_request(types: Any, tmp_path: Any) -> None:
    """lionagi's run() streams from CLI endpoints only; its scripted test endpoint stands in."""
    from lionagi import Branch

    model = scripted_imodel([{"type": "text", "content": "streamed answer"}])
    branch = Branch(
        system=SYSTEM,
        chat_model=model,
        log_config={"persist_dir": str(tmp_path), "auto_save_on_exit": False},
    )
    attach(branch, manifest(static("house", HOUSE), static("runbook", RUNBOOK)), types=types)
    try:
        kinds = [type(msg).__name__ async for msg in branch.run(QUESTION, guidance=GUIDANCE)]
    finally:
        await model.close()

    assert kinds == ["Instruction", "AssistantResponse"]
    assert isinstance(model.endpoint, ScriptedEndpoint)
    [call] = model.endpoint.calls
    [message] = call.payload["messages"]
    guidance, rest = sent_guidance(message["content"])
    assert guidance == SYSTEM + HOUSE + "\n" + RUNBOOK + GUIDANCE
    assert rest == f"Instruction: {QUESTION}"
    assert branch.last_context_report.fired == fired(("house", HOUSE), ("runbook", RUNBOOK))
    for text in stored_text(branch):
        assert HOUSE not in text
        assert RUNBOOK not in text


@pytest.mark.parametrize(
    "text",
    [
        "two\nlines",
        "ends with a newline\n",
        "ends with two\n\n",
        "an\n\nempty line inside",
        "unicode «é» 日本 🧾\nsecond",
    ],
)
def test_sent_guidance_undoes_exactly_lionagis_block_scalar(text: str) -> None:
    """The helper the byte-for-byte checks rely on inverts lionagi's own rendering."""
    from lionagi.libs.schema.minimal_yaml import minimal_yaml

    rendered = minimal_yaml({"Guidance": text, "Instruction": "q"}).strip()
    assert sent_guidance(rendered) == (text, "Instruction: q")


README_MANIFEST = """\
version: 1
providers:
  - name: house-rules
    type: static
    priority: 100
    text: "Team {{ branch.name }}: answer in English."
  - name: asked
    type: static
    text: "Question on file: {{ instruction.text }}"
"""


async def test_readme_snippet(
    chat_server: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's "Using a manifest with lionagi" code, as written there, except that the
    iModel is pointed at the fake endpoint (base_url, api_key, allow_local_network)."""
    import atexit

    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "prod.yaml").write_text(README_MANIFEST)
    monkeypatch.chdir(tmp_path)
    local = {"base_url": chat_server.base_url, "api_key": "dummy", "allow_local_network": True}

    # --- README snippet ---
    from lionagi import Branch, iModel

    import composer

    manifest = composer.load_manifest("configs/prod.yaml")
    model = iModel(provider="openai", model="gpt-4.1-mini", **local)
    branch = Branch(
        system="You are the payments on-call assistant.\n", name="payments", chat_model=model
    )
    composer.attach(branch, manifest)  # this branch's own registry, built from the manifest

    answer = await branch.communicate("Why did refund R-7 fail?")
    report = branch.last_context_report  # what was injected, skipped or failed this turn
    # --- end of snippet ---

    assert branch._log_manager is not None
    atexit.unregister(branch._log_manager.save_at_exit)  # lionagi would write ./data/logs
    await model.close()
    assert answer == "fixed answer"
    assert report.fired == [
        {
            "provider_name": "house-rules",
            "tokens": composer.count_tokens("Team payments: answer in English."),
        },
        {
            "provider_name": "asked",
            "tokens": composer.count_tokens("Question on file: Why did refund R-7 fail?"),
        },
    ]
    content = chat_server.requests[0].messages[0]["content"]
    assert content == (
        "Guidance: |-\n"
        "  You are the payments on-call assistant.\n"
        "  Team payments: answer in English.\n"
        "  Question on file: Why did refund R-7 fail?\n"
        "Instruction: Why did refund R-7 fail?"
    )


async def test_a_notice_stands_in_for_a_failed_provider_and_fills_lionagis_degraded_list(
    make_branch: Any, chat_server: Any, types: Any
) -> None:
    """lionagi 0.36's report has a ``degraded`` list; composer fills it from notices."""
    notice = "The status service did not answer; do not assume there are no incidents."
    broken = static(
        "status", "{{ instruction.context.ticket.title }}", on_failure={"notice": notice}
    )
    branch = make_branch()
    attach(branch, manifest(static("house", HOUSE), broken), types=types)

    await branch.communicate(QUESTION, guidance=GUIDANCE)

    report = branch.last_context_report
    assert report.blocks == [HOUSE, notice]
    assert [row["provider_name"] for row in report.degraded] == ["status"]
    assert [o.outcome for o in report.outcomes] == ["fired", "failed"]
    guidance, _ = sent_guidance(chat_server.requests[0].messages[0]["content"])
    assert notice in guidance
