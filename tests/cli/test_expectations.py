"""``composer test``: expected turns checked against real turns, every failure located with
the provider, the expectation and what happened instead; JUnit XML for CI."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest
from repofiles import CONFIGS, location, put

from composer import count_tokens
from composer.cli import main

QUOTE = '"'


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A copy of the bundled configs, to write test files beside."""
    target = tmp_path / "configs"
    shutil.copytree(CONFIGS, target, ignore=shutil.ignore_patterns("*.sqlite*"))
    return target


def test_a_broken_expectation_names_provider_expectation_and_actual_value(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tests = put(
        folder / "tests.yaml",
        """
        manifest: .
        tests:
          - name: the runbooks block is small
            env: dev
            instruction: "The API returns 502 errors after the deploy, what do I do?"
            expect:
              providers:
                runbooks: {fired: true, tokens: "<= 10"}
                status: {outcome: fired}
              budget: {used: "< 5"}
        """,
    )
    assert main(["test", str(tests)]) == 1
    out, err = capsys.readouterr()
    assert err == ""
    lines = out.splitlines()
    assert lines[0] == f"{tests}: 1 test"
    assert lines[1] == "FAIL  the runbooks block is small (env dev)"
    assert lines[2].startswith(f"      {location(tests, 'runbooks:', QUOTE + '<=')}: ")
    assert 'provider "runbooks": expected tokens <= 10, got ' in lines[2]
    tokens = int(lines[2].split("got ")[1].split()[0])
    assert tokens > 10
    assert lines[3] == (
        f"      {location(tests, 'status:', 'fired')}: "
        'provider "status": expected outcome fired, got disabled'
    )
    assert lines[4].startswith(
        f"      {location(tests, 'used:', QUOTE + '<')}: budget: expected used < 5, got "
    )
    assert lines[-1] == "0 passed, 1 failed"


def test_a_text_expectation_shows_the_folded_text(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tests = put(
        folder / "tests.yaml",
        """
        tests:
          - name: text
            env: dev
            instruction: "How do I renew the certificate?"
            system: "On call.\\n"
            expect:
              text:
                contains: [On call., nowhere to be found]
                not_contains: House rules
                matches: ["^On call\\\\.$", "(?m)^unmatched$"]
        """,
    )
    assert main(["test", str(tests)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert (
        out[2]
        == f"      {location(tests, 'contains:', 'nowhere')}: text: expected to contain 'nowhere to be found'"
    )
    assert (
        out[3]
        == f"      {location(tests, 'not_contains', 'House')}: text: expected not to contain 'House rules', found on line 2"
    )
    assert out[4].endswith(": text: expected to match /^On call\\.$/")
    assert out[5].endswith(": text: expected to match /(?m)^unmatched$/")
    assert out[6] == "      the folded text was:"
    assert out[7] == "      | On call."
    assert out[8].startswith("      | House rules for the ops team")


def test_recorded_responses_stand_in_for_the_provider(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The recorded text goes through what the manifest does around it: when, caps, budget."""
    long = "word " * 400
    tests = put(
        folder / "tests.yaml",
        f"""
        variables: {{STATUS_TOKEN: for-tests}}
        tests:
          - name: a recorded answer over the cap is skipped
            env: prod
            instruction: "the API returns 502 errors: is there an outage?"
            responses: {{status: "{long}"}}
            expect:
              providers: {{status: {{outcome: over_max_tokens, skipped: true, tokens: "> 200"}}}}
          - name: a recorded error fails the provider alone
            env: prod
            instruction: "the API returns 502 errors: is there an outage?"
            responses: {{status: {{error: unreachable}}}}
            expect:
              providers:
                status: {{failed: true, outcome: failed}}
                runbooks: {{fired: true}}
          - name: the when guard still applies
            env: prod
            instruction: "how do I roll back?"
            responses: {{status: never}}
            expect:
              providers: {{status: {{outcome: guarded}}}}
        """,
    )
    assert main(["test", str(tests), "--junit", str(folder / "results.xml")]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[-1] == "3 passed"
    assert err == ""
    assert count_tokens(long) > 200
    suite = ElementTree.parse(folder / "results.xml").getroot()
    assert suite.tag == "testsuites"
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "0", "0")


def test_old_outcome_spellings_still_pass_each_with_a_located_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Version 1 of preview --json said skipped_max_tokens, skipped_budget, and empty for a
    provider whose `when` was false; a test file written then passes for one more release."""
    put(
        tmp_path / "m.yaml",
        """
        version: 1
        budget: 5
        providers:
          - {name: huge, type: static, max_tokens: 3, text: "alpha beta gamma delta epsilon"}
          - {name: crowded, type: static, text: "alpha beta gamma delta epsilon zeta eta"}
          - {name: quiet, type: static, when: "false", text: never shown}
        """,
    )
    tests = put(
        tmp_path / "tests.yaml",
        """
        manifest: m.yaml
        tests:
          - name: every old spelling
            instruction: x
            expect:
              providers:
                huge: {outcome: skipped_max_tokens}
                crowded: {outcome: skipped_budget, skipped: true}
                quiet: {outcome: empty}
        """,
    )
    assert main(["test", str(tests)]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[-1] == "1 passed"
    deprecated = "is deprecated and will be refused in the next release: write"
    assert err.splitlines() == [
        f"{location(tests, 'huge:', 'skipped')}: warning: "
        f"outcome skipped_max_tokens {deprecated} over_max_tokens",
        f"{location(tests, 'crowded:', 'skipped')}: warning: "
        f"outcome skipped_budget {deprecated} over_budget",
        f"{location(tests, 'quiet:', 'empty')}: warning: "
        f'provider "quiet": its `when` was false; outcome empty {deprecated} guarded',
    ]


def test_guarded_and_empty_are_told_apart(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tests = put(
        folder / "tests.yaml",
        """
        variables: {STATUS_TOKEN: for-tests}
        tests:
          - name: a provider that answered nothing was not guarded
            env: prod
            instruction: "the API returns 502 errors: is there an outage?"
            responses: {status: ""}
            expect:
              providers: {status: {outcome: guarded}}
        """,
    )
    assert main(["test", str(tests)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[2] == (
        f"      {location(tests, 'status: {outcome', 'guarded')}: "
        'provider "status": expected outcome guarded, got empty'
    )


def test_junit_xml_names_each_failure(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tests = put(
        folder / "tests.yaml",
        """
        tests:
          - name: passes
            env: dev
            instruction: x
            expect: {providers: {status: {outcome: disabled}}}
          - name: fails
            env: dev
            instruction: x
            expect: {providers: {status: {fired: true}}}
          - name: cannot run
            env: nope
            instruction: x
        """,
    )
    report = folder / "out.xml"
    assert main(["test", str(tests), "--junit", str(report)]) == 1
    capsys.readouterr()
    root = ElementTree.parse(report).getroot()
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("3", "1", "1")
    cases = {case.get("name"): case for case in root.iter("testcase")}
    assert list(cases) == ["passes", "fails", "cannot run"]
    assert list(cases["passes"]) == []
    failure = cases["fails"].find("failure")
    assert failure is not None
    assert failure.get("message") == 'provider "status": expected fired, got disabled'
    error = cases["cannot run"].find("error")
    assert error is not None
    assert 'no manifest for environment "nope"' in (error.get("message") or "")


def test_variables_come_from_the_file_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TEAM", "from-the-shell")
    put(
        tmp_path / "m.yaml",
        'version: 1\nproviders:\n  - {name: r, type: static, text: "${TEAM}"}\n',
    )
    tests = put(
        tmp_path / "t.yaml",
        """
        manifest: m.yaml
        variables: {TEAM: from-the-file}
        tests:
          - name: file
            instruction: x
            expect: {text: {contains: "***"}}
          - name: a test's own
            instruction: x
            variables: {TEAM: its-own}
            expect: {providers: {r: {fired: true}}, text: {not_contains: from-the-shell}}
        """,
    )
    assert main(["test", str(tests)]) == 0, capsys.readouterr().out


def test_an_exported_variable_is_said_to_be_unread_and_the_flag_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without the flag the message names where composer test takes variables from and the
    flag that reads the environment; with it, the environment fills what the file leaves."""
    monkeypatch.chdir(tmp_path)
    shell = "from the shell " * 10  # values are masked in the text: told apart by tokens
    monkeypatch.setenv("TEAM", shell)
    monkeypatch.delenv("OWNER", raising=False)
    put(
        tmp_path / "ops" / "m.yaml",
        'version: 1\nproviders:\n  - {name: r, type: static, text: "${TEAM} ${OWNER:-sre}"}\n',
    )
    put(
        tmp_path / "ops" / "t.yaml",
        f"""
        manifest: m.yaml
        tests:
          - name: the shell's value
            instruction: x
            expect: {{providers: {{r: {{tokens: "== {count_tokens(shell + " sre")}"}}}}}}
          - name: the test's own first
            instruction: x
            variables: {{TEAM: its-own}}
            expect: {{providers: {{r: {{tokens: "== {count_tokens("its-own sre")}"}}}}}}
        """,
    )
    assert main(["test", "ops/t.yaml"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == [
        "ops/t.yaml: 2 tests",
        "FAIL  the shell's value",
        '      ops/m.yaml:3:35: variable "TEAM" is not set: composer test reads ${VAR} only '
        "from the test file's variables: (and each test's own), not the environment; set it "
        "there, or pass --from-environment to read the environment too",
    ]
    assert main(["test", "ops/t.yaml", "--from-environment"]) == 0
    assert capsys.readouterr().out.endswith("\n2 passed\n")
    monkeypatch.delenv("TEAM")
    assert main(["test", "ops/t.yaml", "--from-environment"]) == 1
    assert capsys.readouterr().out.splitlines()[2] == (
        '      ops/m.yaml:3:35: variable "TEAM" is not set: not in the test file\'s variables:, '
        "the environment, COMPOSER_ENV_FILE nor COMPOSER_SECRETS_DIR (use ${TEAM:-default} "
        "for a default)"
    )


def test_failures_name_files_as_the_test_file_was_named(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Given relatively, every path printed is relative, as every other command prints it."""
    monkeypatch.chdir(folder.parent)
    put(
        folder / "typo.yaml",
        """
        tests:
          - name: typo
            env: dev
            instruction: x
            expect: {providers: {runbook: {fired: true}}}
        """,
    )
    assert main(["test", "configs/typo.yaml", "--junit", "report.xml"]) == 1
    out = capsys.readouterr().out
    assert str(folder) not in out
    report = (folder.parent / "report.xml").read_text(encoding="utf-8")
    assert str(folder) not in report
    assert 'configs/typo.yaml:5:26: no provider "runbook" in configs/dev.yaml' in report
    assert out.splitlines()[2] == (
        '      configs/typo.yaml:5:26: no provider "runbook" in configs/dev.yaml'
    )


def test_an_unknown_provider_is_a_located_error(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tests = put(
        folder / "tests.yaml",
        """
        tests:
          - name: typo
            env: dev
            instruction: x
            responses: {statsu: hi}
            expect: {providers: {runbook: {fired: true}}}
        """,
    )
    assert main(["test", str(tests)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert (
        out[2]
        == f'      {location(tests, "statsu", "statsu")}: no provider "statsu" in {folder / "dev.yaml"}'
    )
    assert (
        out[3]
        == f'      {location(tests, "runbook:", "runbook")}: no provider "runbook" in {folder / "dev.yaml"}'
    )


def test_mistakes_in_the_test_file_are_located(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tests = put(
        tmp_path / "t.yaml",
        """
        tests:
          - name: a
            instruction: x
            expect:
              providers:
                p: {tokenz: 3, tokens: "about 3", outcome: fird}
              text: {matches: "("}
        """,
    )
    assert main(["test", str(tests)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        f'{tests}:6:13: unknown key "tokenz" in tests[0].expect.providers.p '
        '(did you mean "tokens"?)',
        f"{tests}:6:32: tests[0].expect.providers.p.tokens: must be a number or a comparison "
        'such as "<= 600"',
        f"{tests}:6:52: tests[0].expect.providers.p.outcome: must be "
        "'fired', 'cached', 'empty', 'guarded', 'over_max_tokens', 'over_budget', 'failed', "
        "'timeout', 'not_called' or 'disabled'",
        f"{tests}:7:23: tests[0].expect.text.matches: not a regular expression: "
        "missing ), unterminated subpattern at position 0",
    ]
