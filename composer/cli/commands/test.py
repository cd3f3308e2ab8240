"""``composer test``: run the expected turns of a test file and say which do not hold
(``composer.inspect.expectations`` reads and runs them)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

from composer.cli.exit_codes import FAILURE, SUCCESS
from composer.cli.options import add_json

if TYPE_CHECKING:
    from composer.cli.output import Output
    from composer.errors import ManifestError
    from composer.inspect.documents import Diagnostic
    from composer.inspect.expectations import CaseResult, Failure, Tests

__all__ = ["DESCRIPTION", "add_arguments", "run"]

DESCRIPTION = (
    "Run each turn of TESTS (a YAML file kept next to the manifests: environment, "
    "instruction, optional system text and branch) against its manifest and check "
    "what it expects: per provider an outcome, fired, skipped, failed or a bound on "
    "tokens; strings or patterns in the folded text; the budget used. A provider given "
    "a recorded response in the file answers with it instead of doing its work. "
    "${VAR} comes from the file's variables: (then each test's) only, so a test means the "
    "same on every machine, unless --from-environment. Exit 0 when every expectation "
    "holds, 1 when one does not or a turn cannot run."
)

_TEXT_LINES = 20
"""Lines of the folded text shown under a failed text expectation."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("tests", metavar="TESTS", help="the test file (e.g. configs/tests.yaml)")
    parser.add_argument("--junit", metavar="FILE", help="also write the results as JUnit XML")
    parser.add_argument(
        "--from-environment",
        action="store_true",
        help="also read ${VAR} from the environment, COMPOSER_ENV_FILE and "
        "COMPOSER_SECRETS_DIR, as other commands do (the test file's variables: first)",
    )
    add_json(parser)


def run(args: argparse.Namespace, output: Output) -> int:
    from composer.cli.logs import log_records_to
    from composer.cli.terminate import run as run_until_done
    from composer.errors import ManifestError
    from composer.inspect.expectations import junit_xml, load_tests, run_tests
    from composer.manifest import redact

    output.name_files_as(args.tests)
    json_out, output = output, output.muted() if args.json else output  # results: as JSON
    try:
        tests = load_tests(args.tests)
    except ManifestError as e:
        for error in e.errors:
            output.error(f"{error.location}: {error.message}")
        if args.json:
            _print_document(args, json_out, None, None, e.errors)
        return FAILURE
    _warn(output, tests.warnings)
    count = len(tests.model.tests)
    output.print(f"{args.tests}: {count} test{'s' if count != 1 else ''}")
    given = list(tests.model.variables.values())
    with log_records_to(output, lambda text: redact(text, given)):
        results = run_until_done(run_tests(tests, from_environment=args.from_environment))
    for result in results:
        env = f" (env {result.env})" if result.env else ""
        output.print(f"{'ok  ' if result.passed else 'FAIL'}  {result.name}{env}")
        _warn(output, result.warnings)
        for failure in result.errors + result.failures:
            output.print(output.relative(f"      {failure.where}: {failure.message}"))
        if any(f.message.startswith("text:") for f in result.failures) and result.text:
            output.print("      the folded text was:")
            for line in result.text.splitlines()[:_TEXT_LINES]:
                output.print(f"      | {line}")
            if len(result.text.splitlines()) > _TEXT_LINES:
                output.print("      | ...")
    passed = sum(1 for result in results if result.passed)
    summary = f"{passed} passed"
    if passed < len(results):
        summary += f", {len(results) - passed} failed"
    output.print(summary)
    if args.junit:
        with open(args.junit, "wb") as handle:
            handle.write(junit_xml(args.tests, results, output.relative))
    if args.json:
        _print_document(args, json_out, tests, results, [])
    return SUCCESS if passed == len(results) else FAILURE


def _warn(output: Output, warnings: list[Failure]) -> None:
    """Located warnings on stderr, as ``validate`` prints them."""
    for warning in warnings:
        output.warning(f"{warning.where}: warning: {warning.message}")


def _print_document(
    args: argparse.Namespace,
    output: Output,
    tests: Tests | None,
    results: list[CaseResult] | None,
    errors: Sequence[ManifestError],
) -> None:
    """The run as ``composer.inspect.documents.TestDocument``."""
    from composer.cli.output import print_document
    from composer.inspect.documents import TestDocument, TestResult, diagnostic

    def said(failures: Sequence[Failure]) -> list[Diagnostic]:
        return [diagnostic(output.relative(f.where), output.relative(f.message)) for f in failures]

    cases = None
    if results is not None:
        cases = [
            TestResult(
                name=result.name,
                env=result.env,
                passed=result.passed,
                failures=said(result.failures),
                errors=said(result.errors),
                warnings=said(result.warnings),
                text=result.text,
            )
            for result in results
        ]
    passed = None if cases is None else sum(1 for case in cases if case.passed)
    document = TestDocument(
        tests=args.tests,
        passed=passed,
        failed=None if cases is None else len(cases) - (passed or 0),
        results=cases,
        errors=[
            diagnostic(output.relative(e.location), output.relative(e.message)) for e in errors
        ],
        warnings=said(tests.warnings) if tests is not None else [],
    )
    print_document(output, document)
