"""``composer preview``: run as a user does, on the bundled configs and on small manifests.

The table, the budget line and the folded text are checked against an independent turn
(``load_manifest`` + ``build_registry`` + ``prepare_turn``), never against the preview's own
numbers; the JSON document against its documented model.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from repofiles import CONFIGS, put

import composer
from composer import Branch, Instruction, build_registry, count_tokens
from composer.cli import main
from composer.inspect.preview import DEFAULT_SYSTEM, PreviewDocument

if TYPE_CHECKING:
    from cli.conftest import StatusServer

HEADERS = ["provider", "type", "priority", "max_tokens", "outcome", "tokens", "ms"]
DEV_INSTRUCTION = "The API returns 502 errors"
OUTAGE_INSTRUCTION = "Is there an outage on the public API?"
SECRET = "s3cret-Token-7f9a"
BEGIN = "----- model-visible guidance: system + injected blocks + guidance -----"
END = "----- end -----"


def reference_turn(
    manifest_path: Path | str, env: str | None, instruction: str, system: str | None
) -> composer.PreparedTurn:
    """The turn the runtime would prepare, computed without the preview code."""

    async def turn() -> composer.PreparedTurn:
        manifest = composer.load_manifest(manifest_path, env=env)
        registry = build_registry(manifest)
        branch = Branch(system)
        branch._context_providers = registry
        try:
            return await composer.prepare_turn(branch, Instruction(instruction))
        finally:
            await registry.aclose()
            await manifest.aclose()  # the shared connection pools

    return asyncio.run(turn())


def parse_table(out: str) -> list[dict[str, str]]:
    """The plain table's rows as {header: cell}; cells are separated by two or more spaces.

    An outcome too long for the table is a numbered note under it (``failed [1]`` and
    ``[1] name: detail``); here it is put back whole, ``failed: detail``.
    """
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split() == HEADERS)
    rows = []
    end = len(lines)
    for i, line in enumerate(lines[start + 1 :], start + 1):
        if not line.strip():
            end = i
            break
        cells = re.split(r"\s{2,}", line.strip())
        assert len(cells) == len(HEADERS), line
        rows.append(dict(zip(HEADERS, cells, strict=True)))
    notes = {}
    for line in lines[end + 1 :]:
        found = re.match(r"\[(\d+)\] (.*)$", line)
        if found is None:
            break
        notes[found.group(1)] = found.group(2)
    for row in rows:
        numbered = re.fullmatch(r"(.*) \[(\d+)\]", row["outcome"])
        if numbered is not None:
            label, number = numbered.groups()
            prefix = f"{row['provider']}: "
            assert notes[number].startswith(prefix), (row, notes)
            row["outcome"] = f"{label}: {notes[number].removeprefix(prefix)}"
    return rows


def folded_text(out: str) -> str:
    """The text between the delimiters of the folded block."""
    start = out.index(BEGIN + "\n") + len(BEGIN) + 1
    end = out.rindex("\n" + END + "\n")
    return out[start:end]


# --------------------------------------------------------------------------- the bundled dev


def test_dev_preview_shows_every_declared_provider_in_order(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["preview", str(CONFIGS), "--env", "dev", "--instruction", DEV_INSTRUCTION]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    reference = reference_turn(CONFIGS, "dev", DEV_INSTRUCTION, DEFAULT_SYSTEM)
    assert reference.report is not None
    tokens = {row["provider_name"]: row["tokens"] for row in reference.report.fired}

    rows = parse_table(out)
    assert [(r["provider"], r["type"], r["priority"], r["max_tokens"]) for r in rows] == [
        ("house-rules", "static", "100", "-"),
        ("runbooks", "file_corpus", "50", "600"),
        ("team-memory", "memory", "40", "300"),
        ("status", "http", "30", "200"),
    ]
    assert [r["outcome"] for r in rows] == ["fired", "fired", "fired", "disabled"]
    assert [r["tokens"] for r in rows] == [
        str(tokens["house-rules"]),
        str(tokens["runbooks"]),
        str(tokens["team-memory"]),
        "-",
    ]
    assert rows[3]["ms"] == "-"  # a disabled provider is not timed: it never ran
    assert all(re.fullmatch(r"\d+\.\d", r["ms"]) for r in rows[:3])

    assert f"budget: {sum(tokens.values())} of 1200 tokens used\n" in out
    assert folded_text(out) == reference.guidance
    assert reference.guidance is not None
    assert reference.guidance.startswith(DEFAULT_SYSTEM + "House rules for the ops team")
    assert "Relevant runbook passages:" in reference.guidance


def test_the_stand_in_system_text_is_said(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["preview", str(CONFIGS), "--env", "dev", "--instruction", "x"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[:3] == [
        f"manifest: {CONFIGS / 'dev.yaml'} (env dev)",
        'instruction: "x"',
        'system: a stand-in "You are a helpful assistant.\\n", so that providers are called '
        "(give --system for the real one)",
    ]

    args = ["preview", str(CONFIGS), "--env", "dev", "--instruction", "x", "--system", "S:"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "stand-in" not in out
    assert folded_text(out).startswith("S:House rules")


def test_branch_name_reaches_templates(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["preview", str(CONFIGS), "--env", "dev", "--instruction", "x", "--branch-name", "SRE"]
    assert main(args) == 0
    assert "House rules for SRE: answer in English" in folded_text(capsys.readouterr().out)


def test_dev_preview_needs_no_network(
    tmp_path: Path,
    run_composer: Callable[..., subprocess.CompletedProcess[str]],
    status_server: StatusServer,
) -> None:
    offline = tmp_path / "offline"
    result = run_composer(
        "preview",
        str(CONFIGS),
        "--env",
        "dev",
        "--instruction",
        DEV_INSTRUCTION,
        cwd=tmp_path,
        offline_dir=offline,
    )
    assert (result.returncode, result.stderr) == (0, "")
    rows = parse_table(result.stdout)
    assert [(r["provider"], r["outcome"]) for r in rows] == [
        ("house-rules", "fired"),
        ("runbooks", "fired"),
        ("team-memory", "fired"),
        ("status", "disabled"),
    ]
    assert "\x1b[" not in result.stdout

    # The block is in force: prod's status provider cannot reach even a local server (which
    # test_prod_json_matches_the_registry_report shows it does reach without the block).
    result = run_composer(
        "preview",
        str(CONFIGS),
        "--env",
        "prod",
        "--instruction",
        OUTAGE_INSTRUCTION,
        cwd=tmp_path,
        offline_dir=offline,
        env={"STATUS_URL": status_server.url, "STATUS_TOKEN": SECRET},
    )
    assert result.returncode == 0
    status = parse_table(result.stdout)[3]
    assert status["provider"] == "status"
    # A URL's origin from a variable is named (which host failed); the query value is not.
    assert status["outcome"].startswith(
        f"failed: ProviderError: http 'status': GET {status_server.url}/search?q=***"
    )
    assert "cannot connect" in status["outcome"]
    assert status_server.requests == []
    assert SECRET not in result.stdout + result.stderr


def test_the_console_script(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("composer")
    if not script.exists():
        pytest.skip("the composer console script is not installed in this environment")
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "STATUS_URL")}
    result = subprocess.run(
        [str(script), "preview", str(CONFIGS), "--env", "dev", "--instruction", "x", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (result.returncode, result.stderr) == (0, "")
    document = PreviewDocument.model_validate_json(result.stdout)
    assert [row.outcome for row in document.providers][-1] == "disabled"


PREVIEW_DEV = ["preview", str(CONFIGS), "--env", "dev"]


def test_a_reader_that_leaves_early_is_no_traceback(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody will read: the first write meets EPIPE
    try:
        result = subprocess.run(
            [sys.executable, "-m", "composer", *PREVIEW_DEV, "--instruction", "x"],
            cwd=tmp_path,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)
    assert result.returncode == 1
    assert result.stderr == ""


# --------------------------------------------------------------------------- prod, --json


@pytest.fixture
def prod_env(monkeypatch: pytest.MonkeyPatch, status_server: StatusServer) -> StatusServer:
    monkeypatch.setenv("STATUS_URL", status_server.url)
    monkeypatch.setenv("STATUS_TOKEN", SECRET)
    return status_server


def test_prod_json_matches_the_registry_report(
    prod_env: StatusServer, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["preview", str(CONFIGS), "--env", "prod", "--instruction", OUTAGE_INSTRUCTION]
    assert main([*args, "--json"]) == 0
    out, err = capsys.readouterr()
    document = PreviewDocument.model_validate_json(out)  # the documented shape, extra="forbid"
    assert json.loads(out)["version"] == 2

    reference = reference_turn(CONFIGS, "prod", OUTAGE_INSTRUCTION, document.system)
    report = reference.report
    assert report is not None
    assert [f.model_dump() for f in document.report.fired] == report.fired
    assert document.report.skipped == report.skipped
    assert document.report.failed == report.failed
    assert document.report.blocks == report.blocks
    assert [f["provider_name"] for f in report.fired] == [
        "house-rules",
        "runbooks",
        "team-memory",
        "status",
    ]
    assert document.guidance == reference.guidance
    assert "- Elevated 502s on the public API (open)" in (document.guidance or "")

    assert document.env == "prod"
    assert document.default_system is True
    assert document.system == DEFAULT_SYSTEM
    assert document.instruction == OUTAGE_INSTRUCTION
    assert document.budget.total == 2000
    assert document.budget.used == sum(f["tokens"] for f in report.fired)
    assert [(row.name, row.outcome) for row in document.providers] == [
        ("house-rules", "fired"),
        ("runbooks", "fired"),
        ("team-memory", "fired"),
        ("status", "fired"),
    ]

    # The status service received the rendered query and the token (twice: preview, reference).
    assert len(prod_env.requests) == 2
    for request in prod_env.requests:
        assert request.path == "/search"
        assert request.query == {"q": [OUTAGE_INSTRUCTION]}
        assert request.headers["Authorization"] == f"Bearer {SECRET}"
    assert SECRET not in out + err

    assert main(args) == 0
    out, err = capsys.readouterr()
    assert SECRET not in out + err
    assert parse_table(out)[3]["outcome"] == "fired"


def test_the_status_provider_only_runs_when_the_instruction_asks(
    prod_env: StatusServer, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["preview", str(CONFIGS), "--env", "prod", "--instruction", DEV_INSTRUCTION, "--json"]
    assert main(args) == 0
    document = PreviewDocument.model_validate_json(capsys.readouterr().out)
    status = document.providers[3]
    assert (status.name, status.outcome) == ("status", "guarded")
    assert prod_env.requests == []
    assert "status" not in document.report.skipped + document.report.failed


def test_no_secret_in_errors_either(
    monkeypatch: pytest.MonkeyPatch, closed_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    # The token is sent nowhere; the failure names the host it could not reach, and masks the
    # query value (the user's text) and the token.
    monkeypatch.setenv("STATUS_URL", f"http://127.0.0.1:{closed_port}")
    monkeypatch.setenv("STATUS_TOKEN", SECRET)
    args = ["preview", str(CONFIGS), "--env", "staging", "--instruction", "outage?"]
    assert main(args) == 0
    out, err = capsys.readouterr()
    status = parse_table(out)[3]
    assert SECRET not in out + err
    # The failure is said once, in a note under the table, masked; no warning line or traceback.
    assert err == ""
    assert status["outcome"].startswith(
        f"failed: ProviderError: http 'status': GET http://127.0.0.1:{closed_port}/search?q=***:"
    )
    assert re.search(r"^status +static|^status +http +30 +200 +failed \[1\]", out, re.M)


def test_json_masks_values_not_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A secret JSON would escape (a quote, a backslash) is still masked; a variable's value
    # that is a number elsewhere in the document does not break the JSON.
    tricky = 'to"ken\\x9'
    monkeypatch.setenv("TRICKY", tricky)
    monkeypatch.setenv("BUDGET", "1000")
    put(
        tmp_path / "m.yaml",
        """
        version: 1
        budget: ${BUDGET}
        providers:
          - name: creds
            type: static
            text: "key=${TRICKY} for {{ instruction.text }}"
        """,
    )
    assert main(["preview", "m.yaml", "--instruction", "deploy 1000 pods", "--json"]) == 0
    out, err = capsys.readouterr()
    document = PreviewDocument.model_validate_json(out)
    assert document.budget.total == 1000
    assert document.report.blocks == ["key=*** for deploy *** pods"]
    assert document.guidance == DEFAULT_SYSTEM + "key=*** for deploy *** pods"
    assert tricky not in out
    assert json.dumps(tricky)[1:-1] not in out
    assert err == ""


# --------------------------------------------------------------------------- every outcome

OUTCOMES = """
version: 1
budget: {budget}
providers:
  - name: huge
    type: static
    priority: 50
    max_tokens: 5
    text: "{huge}"
  - name: first
    type: static
    priority: 40
    text: "{first}"
  - name: crowded
    type: static
    priority: 30
    text: "{crowded}"
  - name: broken
    type: static
    priority: 20
    text: "{{{{ instruction.context.foo }}}}"
  - name: blank
    type: static
    text: "{{{{ '' }}}}"
  - name: quiet
    type: static
    when: "'status' in instruction.text"
    text: never shown
  - name: off
    type: static
    enabled: false
    text: never built
"""

HUGE = "alpha beta gamma delta epsilon zeta eta theta iota kappa"
FIRST = "Deploys are frozen on Fridays after noon."
CROWDED = "Page the on-call lead before any failover."


@pytest.fixture
def outcomes(tmp_path: Path) -> Path:
    budget = count_tokens(FIRST) + count_tokens(CROWDED) - 1  # room for the first only
    text = OUTCOMES.format(budget=budget, huge=HUGE, first=FIRST, crowded=CROWDED)
    return put(tmp_path / "outcomes.yaml", text)


def test_every_outcome_is_labelled(outcomes: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert count_tokens(HUGE) > 5
    assert main(["preview", str(outcomes), "--instruction", "deploy now"]) == 0
    out, err = capsys.readouterr()
    rows = {row["provider"]: row for row in parse_table(out)}
    assert list(rows) == ["huge", "first", "crowded", "broken", "blank", "quiet", "off"]
    assert {name: row["outcome"] for name, row in rows.items()} == {
        "huge": "skipped: over its max_tokens",
        "first": "fired",
        "crowded": "skipped: over the budget",
        "broken": f'failed: TemplateError: provider "broken": text ({outcomes}:20:11): '
        "template failed: UndefinedError: 'None' has no attribute 'foo'",
        "blank": "empty: returned nothing",
        "quiet": "empty: its `when` is false",
        "off": "disabled",
    }
    assert {name: row["tokens"] for name, row in rows.items()} == {
        "huge": str(count_tokens(HUGE)),
        "first": str(count_tokens(FIRST)),
        "crowded": str(count_tokens(CROWDED)),
        "broken": "-",
        "blank": "-",
        "quiet": "-",
        "off": "-",
    }
    budget = count_tokens(FIRST) + count_tokens(CROWDED) - 1
    assert f"budget: {count_tokens(FIRST)} of {budget} tokens used" in out
    assert folded_text(out) == DEFAULT_SYSTEM + FIRST
    assert err == ""  # the row says it failed: no second report of the same failure


def test_every_outcome_in_json_and_the_report_lists(
    outcomes: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["preview", str(outcomes), "--instruction", "deploy now", "--json"]) == 0
    document = PreviewDocument.model_validate_json(capsys.readouterr().out)
    assert [(row.name, row.outcome) for row in document.providers] == [
        ("huge", "over_max_tokens"),
        ("first", "fired"),
        ("crowded", "over_budget"),
        ("broken", "failed"),
        ("blank", "empty"),
        ("quiet", "guarded"),
        ("off", "disabled"),
    ]
    # ADR-0008 D5: the registry's lists; empty results and disabled providers are in none.
    assert document.report.skipped == ["huge", "crowded"]
    assert document.report.failed == ["broken"]
    assert [f.provider_name for f in document.report.fired] == ["first"]
    assert document.providers[3].error == (
        f'TemplateError: provider "broken": text ({outcomes}:20:11): '
        "template failed: UndefinedError: 'None' has no attribute 'foo'"
    )
    assert all(row.error is None for row in document.providers if row.name != "broken")


def test_a_when_that_is_true_runs_the_provider(
    outcomes: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["preview", str(outcomes), "--instruction", "status?", "--json"]) == 0
    document = PreviewDocument.model_validate_json(capsys.readouterr().out)
    quiet = document.providers[5]
    assert (quiet.name, quiet.outcome) == ("quiet", "fired")
    # Greedy admission goes on after "crowded" did not fit (ADR-0008 D3).
    assert [f.provider_name for f in document.report.fired] == ["first", "quiet"]
    assert document.report.skipped == ["huge", "crowded"]


def test_no_system_calls_no_provider(outcomes: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["preview", str(outcomes), "--instruction", "x", "--no-system"]) == 0
    out, err = capsys.readouterr()
    assert "system: none (--no-system): no provider is called (ADR-0008 D4)" in out
    outcomes_shown = [row["outcome"] for row in parse_table(out)]
    assert outcomes_shown == ["not called: branch has no system text"] * 6 + ["disabled"]
    assert "budget: 0 of " in out
    assert folded_text(out) == ""
    assert err == ""  # "broken" was never called, so it did not fail

    assert main(["preview", str(outcomes), "--instruction", "x", "--no-system", "--json"]) == 0
    document = PreviewDocument.model_validate_json(capsys.readouterr().out)
    assert document.system is None
    assert document.default_system is False
    assert document.report.skipped == ["huge", "first", "crowded", "broken", "blank", "quiet"]
    assert document.guidance is None


def test_system_and_no_system_exclude_each_other(
    outcomes: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["preview", str(outcomes), "--instruction", "x", "--system", "A", "--no-system"]
    assert main(args) == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_http_to_a_closed_port_fails_with_the_first_line(
    tmp_path: Path, closed_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    put(
        tmp_path / "m.yaml",
        f"""
        version: 1
        providers:
          - name: status
            type: http
            request: {{url: "http://127.0.0.1:{closed_port}/search"}}
            response: {{template: "{{{{ json }}}}"}}
        """,
    )
    assert main(["preview", "m.yaml", "--instruction", "x", "--json"]) == 0
    row = PreviewDocument.model_validate_json(capsys.readouterr().out).providers[0]
    assert row.outcome == "failed"
    assert row.error is not None
    assert row.error.startswith(
        f"ProviderError: http 'status': GET http://127.0.0.1:{closed_port}/search: cannot connect"
    )


def test_a_corpus_that_cannot_be_indexed_is_a_contained_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The preview builds indexes up front (for the progress line); a failure there must not
    # stop the preview: at run time the provider fails alone (ADR-0008 D2).
    put(
        tmp_path / "m.yaml",
        """
        version: 1
        providers:
          - name: docs
            type: file_corpus
            root: missing
            query: "{{ instruction.text }}"
          - name: rules
            type: static
            text: Be brief.
        """,
    )
    assert main(["preview", "m.yaml", "--instruction", "x", "--json"]) == 0
    document = PreviewDocument.model_validate_json(capsys.readouterr().out)
    assert [(row.name, row.outcome) for row in document.providers] == [
        ("docs", "failed"),
        ("rules", "fired"),
    ]
    assert document.report.failed == ["docs"]


# --------------------------------------------------------------------------- exit codes


def test_strict_exits_1_only_when_a_provider_failed(outcomes: Path, tmp_path: Path) -> None:
    assert main(["preview", str(outcomes), "--instruction", "x"]) == 0
    assert main(["preview", str(outcomes), "--instruction", "x", "--strict"]) == 1
    assert main(["preview", str(outcomes), "--instruction", "x", "--strict", "--json"]) == 1
    # Skipped, empty and disabled providers are no failure.
    fine = outcomes.read_text().replace("instruction.context.foo", "instruction.text")
    put(tmp_path / "fine.yaml", fine)
    assert main(["preview", "fine.yaml", "--instruction", "x", "--strict"]) == 0


def test_strict_on_the_bundled_dev_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["preview", str(CONFIGS), "--env", "dev", "--instruction", DEV_INSTRUCTION, "--strict"]
    assert main(args) == 0


BROKEN = """
version: 1
budget: -1
providers:
  - name: rules
    type: static
    txt: hi
"""


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_a_bad_manifest_exits_1_with_located_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], json_flag: list[str]
) -> None:
    put(tmp_path / "m.yaml", BROKEN)
    assert main(["preview", "m.yaml", "--instruction", "x", *json_flag]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        "m.yaml:2:9: budget: must be >= 0",
        'm.yaml:4:5: provider "rules": missing key "text"',
        'm.yaml:6:5: provider "rules": unknown key "txt" (did you mean "text"?)',
    ]


def test_a_bad_manifest_in_a_subprocess(
    tmp_path: Path, run_composer: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    put(tmp_path / "m.yaml", BROKEN)
    result = run_composer("preview", "m.yaml", "--instruction", "x", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.splitlines()[0] == "m.yaml:2:9: budget: must be >= 0"


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["preview", str(CONFIGS), "--env", "dev"]) == 2  # no --instruction
    assert "--instruction" in capsys.readouterr().err


# --------------------------------------------------------------------------- plain or colour


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def preview_on(
    stream: io.StringIO, monkeypatch: pytest.MonkeyPatch, manifest: str, *args: str
) -> str:
    monkeypatch.setattr(sys, "stdout", stream)
    assert main(["preview", manifest, "--instruction", "x", *args]) == 0
    monkeypatch.undo()
    return stream.getvalue()


def strip_ansi(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def without_ms(out: str) -> str:
    """``out`` with the table's milliseconds (the one column that changes per run, and its
    width with it) blanked."""
    return re.sub(r" +(\d+\.\d|ms|-)$", " ms", out, flags=re.MULTILINE)


def test_plain_output_when_not_a_terminal_or_with_no_color(
    outcomes: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TERM", "xterm-256color")
    plain = preview_on(io.StringIO(), monkeypatch, str(outcomes))
    assert "\x1b[" not in plain
    assert "\x1b[" not in capsys.readouterr().err

    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setenv("NO_COLOR", "1")
    no_color = preview_on(Terminal(), monkeypatch, str(outcomes))
    assert "\x1b[" not in no_color
    assert "\x1b[" not in capsys.readouterr().err
    assert without_ms(no_color) == without_ms(plain)

    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.delenv("NO_COLOR", raising=False)
    coloured = preview_on(Terminal(), monkeypatch, str(outcomes))
    assert "\x1b[" in coloured
    words = set(re.findall(r"[a-z]+", strip_ansi(coloured)))
    assert {"huge", "first", "crowded", "broken", "blank", "quiet", "off"} <= words


def test_names_and_errors_are_not_rich_markup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    put(
        tmp_path / "m.yaml",
        """
        version: 1
        providers:
          - name: "[/x] odd"
            type: static
            text: "{{ [1][5] }}"
          - name: "[bold]plain"
            type: static
            text: hello
        """,
    )
    monkeypatch.setenv("TERM", "xterm-256color")
    shown = preview_on(Terminal(), monkeypatch, "m.yaml")
    text = strip_ansi(shown)
    assert "[/x] odd" in text
    assert "[bold]plain" in text


def test_metadata_and_branch_give_the_branch_templates_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A namespace-per-team manifest can be previewed as a team."""
    path = tmp_path / "m.yaml"
    path.write_text(
        "version: 1\nproviders:\n"
        "  - {name: t, type: static, text: 'Team {{ branch.metadata.team }} of {{ branch.name }}'}\n"
    )
    args = ["preview", str(path), "--instruction", "x"]
    assert main([*args, "--metadata", "team=a", "--branch", '{"name": "pay"}']) == 0
    assert "Team a of pay" in capsys.readouterr().out
    branch = '{"name": "pay", "metadata": {"team": "b"}}'
    assert main([*args, "--branch", branch, "--branch-name", "ops"]) == 0
    assert "Team b of ops" in capsys.readouterr().out
    assert main([*args, "--metadata", "team"]) == 2
    assert "is not KEY=VALUE" in capsys.readouterr().err
    assert main([*args, "--branch", "[1]"]) == 2
    assert '"name" and "metadata"' in capsys.readouterr().err
