"""``composer test``: expected turns a team keeps next to its manifests, checked in CI.

A test file holds turns (environment, instruction, optional system text and branch) and what
each must produce: per provider an outcome, fired or not, skipped or not, a bound on its
tokens; on the folded text, strings it must or must not contain and patterns it must match;
a bound on the budget used. Each turn is a real one: the manifest is loaded and its registry
gathered exactly as ``composer preview`` does, except that a provider given a recorded
response in the file answers with it instead of doing its work (the network stays out of CI,
and what the manifest does around it, ``when``, ``wrap``, caps and the budget, still
applies). Variables come from the file only (its ``variables:``, then each test's), so a test
means the same on every machine; ``from_environment`` (``--from-environment``) also reads
them where every other command does (the environment, ``COMPOSER_ENV_FILE``,
``COMPOSER_SECRETS_DIR``), the file's still first. An unset variable's message says which.

Like a manifest, a test file is read as located YAML: a mistake in it, and every expectation
that fails, is reported as ``file:line:col``. Outcomes are named as the registry, the audit
log and ``preview --json`` name them; the names of version 1 of ``preview --json``
(``skipped_max_tokens``, ``skipped_budget``, and ``empty`` for a provider whose ``when`` was
false) are accepted until the next release, each with a located warning naming the new one.
"""

from __future__ import annotations

import operator
import os
import re
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, get_args

from pydantic import (
    BeforeValidator,
    Field,
    PlainValidator,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from composer.catalog import ProviderTypes, catalog_of
from composer.errors import ComposerError, ManifestError, ProviderError, SettingsError
from composer.inspect.preview import DEFAULT_SYSTEM, Preview, run_preview
from composer.inspect.words import counted
from composer.manifest import Manifest, StrictModel
from composer.manifest.loader import load_manifest
from composer.manifest.validation_errors import locate, validate_file
from composer.manifest.yamlnodes import Node
from composer.outcomes import Outcome
from composer.plugin import BuildContext, ProviderConfig, ProviderType

__all__ = [
    "OLD_SPELLINGS",
    "Bound",
    "BoundField",
    "BranchSpec",
    "BudgetExpectation",
    "CaseResult",
    "Expectations",
    "ExpectedOutcome",
    "Failure",
    "ProviderExpectation",
    "Recorded",
    "Strings",
    "TestCase",
    "TestFile",
    "Tests",
    "TextExpectation",
    "junit_xml",
    "load_tests",
    "recorded_response",
    "run_tests",
    "with_recorded",
]

_FIRED: frozenset[Outcome] = frozenset({"fired", "cached"})
_SKIPPED: frozenset[Outcome] = frozenset({"over_max_tokens", "over_budget"})
_FAILED: frozenset[Outcome] = frozenset({"failed", "timeout"})

OLD_SPELLINGS: dict[str, Outcome] = {
    "skipped_max_tokens": "over_max_tokens",
    "skipped_budget": "over_budget",
}
"""Outcomes as version 1 of ``preview --json`` spelled them: accepted, with a warning, until
the next release."""


def _new_spelling(value: Any) -> Any:
    return OLD_SPELLINGS.get(value, value) if isinstance(value, str) else value


ExpectedOutcome = Annotated[
    Outcome,
    BeforeValidator(_new_spelling),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "enum": list(get_args(Outcome))},
                {
                    "type": "string",
                    "enum": list(OLD_SPELLINGS),
                    "deprecated": True,
                    "description": "Old spellings of over_max_tokens and over_budget.",
                },
            ]
        }
    ),
]
"""An outcome (``composer.outcomes.Outcome``), or its old spelling (``OLD_SPELLINGS``)."""

_OPERATORS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    "<": operator.lt,
    ">=": operator.ge,
    ">": operator.gt,
    "==": operator.eq,
}
_BOUND = re.compile(r"\s*(<=|>=|==|<|>)?\s*(\d+)\s*")


@dataclass(frozen=True)
class Bound:
    """A comparison written ``"<= 600"`` (or a bare number, meaning ``== 600``)."""

    op: str
    value: int

    def holds(self, actual: int) -> bool:
        return _OPERATORS[self.op](actual, self.value)

    def __str__(self) -> str:
        return f"{self.op} {self.value}"


def _bound(value: Any) -> Bound:
    if isinstance(value, bool):
        raise ValueError('must be a number or a comparison such as "<= 600"')
    if isinstance(value, int):
        return Bound("==", int(value))
    found = _BOUND.fullmatch(value) if isinstance(value, str) else None
    if found is None:
        raise ValueError('must be a number or a comparison such as "<= 600"')
    return Bound(found.group(1) or "==", int(found.group(2)))


BoundField = Annotated[
    Bound,
    PlainValidator(_bound),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "integer", "minimum": 0},
                {"type": "string", "pattern": r"^\s*(<=|>=|==|<|>)?\s*\d+\s*$"},
            ],
            "description": 'A number, or a comparison such as "<= 600".',
        }
    ),
]


def _as_list(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


Strings = Annotated[
    list[str],
    BeforeValidator(_as_list),
    WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}),
]
"""One string or a list of them."""


class ProviderExpectation(StrictModel):
    """What one provider must have done this turn."""

    outcome: ExpectedOutcome | None = Field(
        None,
        description="Exactly this outcome, named as preview --json and the audit log name it.",
    )
    fired: bool | None = Field(None, description="Admitted (fired, or fired from its cache).")
    skipped: bool | None = Field(
        None, description="Skipped over its max_tokens or over the budget."
    )
    failed: bool | None = Field(None, description="Raised or timed out.")
    tokens: BoundField | None = Field(None, description='Its token count, e.g. "<= 600".')


class TextExpectation(StrictModel):
    """What the folded text (system + blocks + guidance) must hold."""

    contains: Strings = Field(default_factory=list, description="Strings it must contain.")
    not_contains: Strings = Field(default_factory=list, description="Strings it must not contain.")
    matches: Strings = Field(
        default_factory=list, description="Python regular expressions it must match (search)."
    )

    @field_validator("matches")
    @classmethod
    def _patterns(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as e:
                raise ValueError(f"not a regular expression: {e}") from None
        return patterns


class BudgetExpectation(StrictModel):
    used: BoundField | None = Field(None, description='Tokens admitted in all, e.g. "<= 1200".')


class Expectations(StrictModel):
    providers: dict[str, ProviderExpectation] = Field(default_factory=dict)
    text: TextExpectation | None = None
    budget: BudgetExpectation | None = None


class Recorded(StrictModel):
    """A recorded response: the text the provider returns, or the error it raises."""

    text: str | None = None
    error: str | None = None

    @model_validator(mode="after")
    def _one(self) -> Recorded:
        if (self.text is None) == (self.error is None):
            raise ValueError("give text or error")
        return self


class BranchSpec(StrictModel):
    name: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class TestCase(StrictModel):
    """One expected turn."""

    __test__ = False  # not a pytest class, whatever its name

    name: str = Field(min_length=1, description="What the turn shows; the report's name.")
    env: str | None = Field(None, description="The environment: <manifest folder>/<env>.yaml.")
    instruction: str = Field(description="The user turn.")
    system: str | None = Field(
        DEFAULT_SYSTEM,
        description="The branch's system text (default: a stand-in; null: none, ADR-0008 D4).",
    )
    branch: BranchSpec = Field(
        default_factory=BranchSpec, description="`name` and `metadata` templates see."
    )
    variables: dict[str, str] = Field(
        default_factory=dict, description="Values for ${VAR}, over the file's."
    )
    responses: dict[str, str | Recorded] = Field(
        default_factory=dict,
        description="By provider name: the text it returns instead of doing its work, or "
        "{error: message} to make it fail.",
    )
    expect: Expectations = Field(default_factory=Expectations, description="What must hold.")


class TestFile(StrictModel):
    """A file of expected turns, and the manifest they are checked against."""

    __test__ = False

    manifest: str = Field(".", description="The manifest file or folder, relative to this file.")
    variables: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "Values for ${VAR} in every test; no other source is read unless "
            "`composer test --from-environment` (then these come first)."
        ),
    )
    tests: list[TestCase] = Field(min_length=1, description="The expected turns.")


@dataclass(frozen=True)
class Failure:
    """One expectation that did not hold, a reason the turn could not run, or a warning."""

    where: str
    message: str


@dataclass(frozen=True)
class Tests:
    """A test file as read: the located tree (to place each failure), the validated model, and
    a warning for each outcome spelled the old way."""

    display: str
    folder: Path
    tree: Node
    model: TestFile
    warnings: list[Failure] = field(default_factory=list)

    def where(self, *keys: str | int, key: bool = False) -> str:
        """``file:line:col`` of the value at ``keys`` (with ``key``, of its key)."""
        mark = locate(self.tree, keys, key_of_last=key)[0]
        return f"{mark.display}:{mark.line}:{mark.column}"


def load_tests(path: str) -> Tests:
    """The test file at ``path``; every mistake in it is a located ``ManifestError``."""
    tree, data, model = validate_file(path, TestFile)
    tests = Tests(path, Path(path).absolute().parent, tree, model)
    tests.warnings.extend(_old_spellings(tests, data))
    return tests


def _old_spellings(tests: Tests, data: Any) -> list[Failure]:
    """A warning at each ``outcome`` written with an old spelling (the file is valid)."""
    warnings = []
    for index, case in enumerate(data["tests"]):
        providers = (case.get("expect") or {}).get("providers") or {}
        for name, wanted in providers.items():
            spelled = (wanted or {}).get("outcome")
            if isinstance(spelled, str) and spelled in OLD_SPELLINGS:
                where = tests.where("tests", index, "expect", "providers", name, "outcome")
                warnings.append(Failure(where, _deprecated(spelled, OLD_SPELLINGS[spelled])))
    return warnings


def _deprecated(old: str, new: str) -> str:
    return f"outcome {old} is deprecated and will be refused in the next release: write {new}"


@dataclass
class CaseResult:
    name: str
    env: str | None
    failures: list[Failure] = field(default_factory=list)
    errors: list[Failure] = field(default_factory=list)  # the turn could not be run
    warnings: list[Failure] = field(default_factory=list)  # held, but spelled the old way
    seconds: float = 0.0
    text: str | None = None

    @property
    def passed(self) -> bool:
        return not self.failures and not self.errors


class _RecordedProvider:
    """A provider answering with its recorded response instead of doing its work."""

    def __init__(self, name: str, response: Recorded) -> None:
        self.name = name
        self._response = response

    async def provide(self, branch: Any, instruction: Any) -> str | None:
        if self._response.error is not None:
            raise ProviderError(self._response.error)
        return self._response.text or None


def with_recorded(types: ProviderTypes, responses: Mapping[str, Recorded]) -> ProviderTypes:
    """``types`` whose factories build a recorded provider for each name in ``responses``."""

    def factory(ptype: ProviderType[Any]) -> Callable[[ProviderConfig, BuildContext], Any]:
        def make(config: ProviderConfig, context: BuildContext) -> Any:
            recorded = responses.get(config.name)
            if recorded is not None:
                return _RecordedProvider(config.name, recorded)
            return ptype.factory(config, context)

        return make

    return ProviderTypes(
        ProviderType(ptype.name, ptype.config, factory(ptype), ptype.summary) for ptype in types
    )


def recorded_response(value: str | Recorded) -> Recorded:
    return Recorded(text=value) if isinstance(value, str) else value


_UNSET = re.compile(r'environment variable "(?P<name>[^"]+)" is not set \(use (?P<default>.+)\)')
"""The loader's message for a variable no source has (``composer.manifest.interpolation``)."""


def _unset_explained(message: str, from_environment: bool) -> str:
    """The loader's message for an unset variable, saying where ``composer test`` looked."""
    found = _UNSET.fullmatch(message)
    if found is None:
        return message
    name, default = found["name"], found["default"]
    if from_environment:
        return (
            f'variable "{name}" is not set: not in the test file\'s variables:, the '
            f"environment, COMPOSER_ENV_FILE nor COMPOSER_SECRETS_DIR (use {default})"
        )
    return (
        f'variable "{name}" is not set: composer test reads ${{VAR}} only from the test '
        "file's variables: (and each test's own), not the environment; set it there, or "
        "pass --from-environment to read the environment too"
    )


async def _run_case(tests: Tests, index: int, from_environment: bool) -> CaseResult:
    case = tests.model.tests[index]
    result = CaseResult(case.name, case.env)
    at: tuple[str | int, ...] = ("tests", index)
    path = tests.folder / tests.model.manifest
    given = {**tests.model.variables, **case.variables}
    try:
        if from_environment:  # the settings' sources, the file's variables over them
            manifest = load_manifest(path, env=case.env, environ={**os.environ, **given})
        else:
            manifest = load_manifest(path, env=case.env, variables=given)
    except ManifestError as e:
        result.errors += [
            Failure(error.location, _unset_explained(error.message, from_environment))
            for error in e.errors
        ]
        return result
    except SettingsError as e:
        result.errors.append(Failure(tests.where(*at, "env"), str(e)))
        return result
    names = {config.name for config in manifest.providers}
    for name in [*case.responses, *case.expect.providers]:
        if name not in names:
            key = "responses" if name in case.responses else "expect"
            keys = (*at, key, name) if key == "responses" else (*at, key, "providers", name)
            result.errors.append(
                Failure(tests.where(*keys, key=True), f'no provider "{name}" in {manifest.path}')
            )
    if result.errors:
        return result
    responses = {name: recorded_response(value) for name, value in case.responses.items()}
    types = catalog_of(manifest) or ProviderTypes.installed()
    try:
        preview = await run_preview(
            manifest,
            case.instruction,
            system=case.system,
            branch_name=case.branch.name,
            branch_metadata=case.branch.metadata,
            types=with_recorded(types, responses) if responses else types,
        )
    except ComposerError as e:
        result.errors.append(Failure(tests.where(*at), manifest.redact(f"the turn failed: {e}")))
        return result
    result.text = manifest.redact(preview.guidance or "")
    result.failures = _compare(tests, at, case.expect, preview, manifest, result.warnings)
    return result


def _compare(
    tests: Tests,
    at: tuple[str | int, ...],
    expect: Expectations,
    preview: Preview,
    manifest: Manifest,
    warnings: list[Failure],
) -> list[Failure]:
    """Every expectation of one turn that did not hold, with what happened instead; an
    expectation that held only under its old meaning adds to ``warnings``."""
    failures: list[Failure] = []
    rows = {row.name: row for row in preview.rows}
    for name, wanted in expect.providers.items():
        row = rows[name]
        keys = (*at, "expect", "providers", name)
        actual = row.outcome + (f" ({row.error})" if row.error else "")
        label = f'provider "{name}"'
        checks: list[tuple[str, bool, str, str]] = []
        if wanted.outcome is not None:
            held = row.outcome == wanted.outcome
            if not held and (wanted.outcome, row.outcome) == ("empty", "guarded"):
                held = True  # version 1 said empty, with `when: false`
                message = f"{label}: its `when` was false; " + _deprecated("empty", "guarded")
                warnings.append(Failure(tests.where(*keys, "outcome"), message))
            checks.append(("outcome", held, f"outcome {wanted.outcome}", actual))
        for key, kinds in (("fired", _FIRED), ("skipped", _SKIPPED), ("failed", _FAILED)):
            want: bool | None = getattr(wanted, key)
            if want is not None:
                expected = key if want else f"not {key}"
                checks.append((key, (row.outcome in kinds) == want, expected, actual))
        if wanted.tokens is not None:
            tokens = row.tokens
            ok = tokens is not None and wanted.tokens.holds(tokens)
            shown = counted(tokens, "token") if tokens is not None else f"no tokens ({actual})"
            checks.append(("tokens", ok, f"tokens {wanted.tokens}", shown))
        for key, ok, expected, got in checks:
            if not ok:
                failures.append(
                    Failure(tests.where(*keys, key), f"{label}: expected {expected}, got {got}")
                )
    text = manifest.redact(preview.guidance or "")
    if expect.text is not None:
        keys = (*at, "expect", "text")
        for i, needle in enumerate(expect.text.contains):
            if needle not in text:
                failures.append(
                    Failure(
                        _item(tests, keys, "contains", i), f"text: expected to contain {needle!r}"
                    )
                )
        for i, needle in enumerate(expect.text.not_contains):
            if needle in text:
                line = text[: text.index(needle)].count("\n") + 1
                failures.append(
                    Failure(
                        _item(tests, keys, "not_contains", i),
                        f"text: expected not to contain {needle!r}, found on line {line}",
                    )
                )
        for i, pattern in enumerate(expect.text.matches):
            if re.search(pattern, text) is None:
                failures.append(
                    Failure(
                        _item(tests, keys, "matches", i), f"text: expected to match /{pattern}/"
                    )
                )
    used = expect.budget.used if expect.budget is not None else None
    if used is not None and not used.holds(preview.used):
        failures.append(
            Failure(
                tests.where(*at, "expect", "budget", "used"),
                f"budget: expected used {used}, got {preview.used} of {preview.budget}",
            )
        )
    return failures


def _item(tests: Tests, keys: tuple[str | int, ...], key: str, index: int) -> str:
    """Where item ``index`` of a list written either as a list or as one string is."""
    return tests.where(*keys, key, index)


async def run_tests(tests: Tests, *, from_environment: bool = False) -> list[CaseResult]:
    """Run every test of the file, one after another; each result says what did not hold.

    ``${VAR}`` comes from the file's and each test's ``variables`` only, unless
    ``from_environment``: then also from the environment, ``.env`` and secrets directory.
    """
    results = []
    for index in range(len(tests.model.tests)):
        started = time.perf_counter()
        result = await _run_case(tests, index, from_environment)
        result.seconds = time.perf_counter() - started
        results.append(result)
    return results


def junit_xml(
    display: str, results: list[CaseResult], name_files: Callable[[str], str] = str
) -> bytes:
    """The results as JUnit XML (one ``testsuite`` per file), the report CI systems read;
    ``name_files`` writes the paths in each message (as the command names them)."""
    failures = sum(1 for r in results if r.failures and not r.errors)
    errors = sum(1 for r in results if r.errors)
    seconds = f"{sum(r.seconds for r in results):.3f}"
    counts = {"tests": str(len(results)), "failures": str(failures), "errors": str(errors)}
    root = ElementTree.Element("testsuites", {"name": "composer test", **counts, "time": seconds})
    suite = ElementTree.SubElement(root, "testsuite", {"name": display, **counts, "time": seconds})
    for result in results:
        case = ElementTree.SubElement(
            suite,
            "testcase",
            {
                "name": result.name,
                "classname": f"{display}.{result.env or 'manifest'}",
                "time": f"{result.seconds:.3f}",
            },
        )
        for tag, items in (("error", result.errors), ("failure", result.failures)):
            if items:
                element = ElementTree.SubElement(
                    case, tag, {"message": name_files(items[0].message), "type": "expectation"}
                )
                element.text = name_files("\n".join(f"{f.where}: {f.message}" for f in items))
                break
    ElementTree.indent(root)
    data: bytes = ElementTree.tostring(root, encoding="utf-8", xml_declaration=True)
    return data
