"""``composer eval``: how good the context a manifest produces is, on the team's own questions.

Each labelled question (``composer.inspect.questions``) is one real turn on the manifest's
registry, explained (``composer.outcomes``) deep enough that each ranking provider reports at
least ``k`` ranked candidates with their fates. The measures of ``composer.inspect.metrics``
are taken per provider and question, then averaged: per provider over the questions that
label it, and overall over every (question, provider) pair. Nothing is scored by a model:
the same manifest and questions give the same figures on every machine.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from composer.build import build_registry
from composer.catalog import ProviderTypes, catalog_of
from composer.errors import ComposerError, ManifestError, SettingsError
from composer.inspect.expectations import recorded_response, with_recorded
from composer.inspect.metrics import MEASURES, Judged, Measures, measure
from composer.inspect.questions import Question, Questions
from composer.manifest import Manifest
from composer.manifest.loader import load_manifest
from composer.outcomes import explain_turns
from composer.registry import ProviderReport
from composer.turn import Branch, Instruction, prepare_turn

__all__ = [
    "DEFAULT_K",
    "Floor",
    "Problem",
    "Scores",
    "evaluate",
    "floors_failed",
    "judged",
    "junit_xml",
    "parse_floor",
]

DEFAULT_K = 10


@dataclass(frozen=True)
class Problem:
    """Why a question could not be measured, located in the question file."""

    where: str
    message: str


@dataclass
class Scores:
    """One manifest's figures on a question file."""

    label: str
    k: int
    providers: dict[str, Measures] = field(default_factory=dict)
    overall: Measures = field(default_factory=lambda: Measures(0, 0, 0, 0, 0))
    questions: int = 0
    tokens: float = 0.0
    """Mean tokens admitted per question (every provider's block, as the budget counts)."""
    problems: list[Problem] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        """``{"providers": {NAME: {measure: value}}, "overall": {...}}``."""
        return {
            "providers": {name: m.as_dict() for name, m in self.providers.items()},
            "overall": self.overall.as_dict(),
        }


@dataclass(frozen=True)
class Floor:
    """``--min provider.measure=value`` (``overall.measure`` for the overall mean)."""

    provider: str
    measure: str
    value: float

    def __str__(self) -> str:
        return f"{self.provider}.{self.measure} >= {self.value:g}"


def parse_floor(spec: str) -> Floor:
    """``runbooks.recall=0.8`` -> ``Floor``; ``SettingsError`` saying what is wrong."""
    target, equals, value = spec.partition("=")
    provider, dot, name = target.rpartition(".")
    if not equals or not dot or not provider:
        raise SettingsError(f'--min "{spec}": expected PROVIDER.MEASURE=VALUE (or overall.MEASURE)')
    if name not in MEASURES:
        raise SettingsError(f'--min "{spec}": no measure "{name}" (one of {", ".join(MEASURES)})')
    try:
        floor = float(value)
    except ValueError:
        raise SettingsError(f'--min "{spec}": "{value}" is not a number') from None
    if not 0 <= floor <= 1:
        raise SettingsError(f'--min "{spec}": measures run from 0 to 1')
    return Floor(provider, name, floor)


def floors_failed(scores: Scores, floors: Iterable[Floor]) -> list[str]:
    """A sentence per floor not met (a provider the file does not label is not met)."""
    failed = []
    for floor in floors:
        measures = scores.overall if floor.provider == "overall" else None
        if measures is None:
            measures = scores.providers.get(floor.provider)
        if measures is None:
            failed.append(f"{floor}: no question labels a provider named {floor.provider!r}")
            continue
        actual = getattr(measures, floor.measure)
        if actual < floor.value:
            failed.append(f"{floor}: got {actual:.4f}")
    return failed


def judged(report: ProviderReport) -> dict[str, list[Judged]]:
    """By provider name, its ranked candidates of the turn, best first, and whether each
    reached the model-visible text."""
    return {
        explanation.provider: [
            Judged(c.id, c.tokens or 0, c.fate == "admitted") for c in explanation.candidates
        ]
        for explanation in report.explanations
        if explanation.candidates is not None
    }


async def evaluate(
    questions: Questions,
    *,
    manifest: str | os.PathLike[str] | None = None,
    env: str | None = None,
    k: int = DEFAULT_K,
    label: str = "",
    from_environment: bool = False,
    types: ProviderTypes | None = None,
    loaded: Callable[[Manifest], None] | None = None,
) -> Scores:
    """Ask every question of ``manifest`` (default: the file's) and measure its context.

    ``env`` replaces every question's and the file's environment (for a side by side
    comparison). A question that cannot run (its manifest does not load, a provider it labels
    is not declared, its turn fails) is a ``Problem`` and left out of the means.
    """
    path = Path(manifest) if manifest is not None else questions.manifest_path
    if not label:
        shown = (
            os.fspath(manifest)
            if manifest is not None
            else os.path.normpath(
                os.path.join(os.path.dirname(questions.display), questions.model.manifest)
            )
        )
        label = shown + (
            f" (env {env or questions.model.env})" if env or questions.model.env else ""
        )
    scores = Scores(label, k)
    per_provider: dict[str, list[Measures]] = {}
    overall: list[Measures] = []
    spent: list[int] = []
    manifests: dict[str | None, Manifest] = {}
    broken: dict[str | None, int] = {}  # env -> its load problem's index in scores.problems
    try:
        for index, question in enumerate(questions.model.questions):
            at = ("questions", index)
            wanted = env if env is not None else (question.env or questions.model.env)
            if wanted in broken:
                continue  # said once, at its first question
            try:
                if wanted not in manifests:
                    manifests[wanted] = _load(path, wanted, questions, from_environment)
                    if loaded is not None:
                        loaded(manifests[wanted])
            except (ManifestError, SettingsError) as e:
                shown = f"environment {wanted}" if wanted else "the manifest"
                message = f"{shown} does not load, its questions are left out: {_message(e)}"
                broken[wanted] = len(scores.problems)
                scores.problems.append(Problem(questions.where(*at), message))
                continue
            current = manifests[wanted]
            declared = {config.name for config in current.providers}
            missing = [name for name in question.relevant if name not in declared]
            for name in missing:
                where = questions.where(*at, "relevant", name, key=True)
                scores.problems.append(Problem(where, f'no provider "{name}" in {current.path}'))
            if missing:
                continue
            try:
                report = await _ask(current, question, k, types)
            except ComposerError as e:
                message = current.redact(f"the turn failed: {e}")
                scores.problems.append(Problem(questions.where(*at), message))
                continue
            candidates = judged(report)
            scores.questions += 1
            spent.append(sum(int(row["tokens"]) for row in report.fired))
            for name in question.relevant:
                result = measure(candidates.get(name, []), question.gains(name), k)
                per_provider.setdefault(name, []).append(result)
                overall.append(result)
    finally:
        for opened in manifests.values():
            await opened.aclose()
    scores.providers = {name: Measures.mean(many) for name, many in per_provider.items()}
    scores.overall = Measures.mean(overall)
    scores.tokens = sum(spent) / len(spent) if spent else 0.0
    return scores


def _load(path: Path, env: str | None, questions: Questions, from_environment: bool) -> Manifest:
    given = questions.model.variables
    if from_environment:
        return load_manifest(path, env=env, environ={**os.environ, **given})
    return load_manifest(path, env=env, variables=given)


def _message(error: ManifestError | SettingsError) -> str:
    if isinstance(error, ManifestError):
        return "; ".join(f"{e.location}: {e.message}" for e in error.errors)
    return str(error)


async def _ask(
    manifest: Manifest, question: Question, k: int, types: ProviderTypes | None
) -> ProviderReport:
    """One explained turn of ``question``, candidates at least ``k`` deep; a provider given a
    recorded response answers with it."""
    if question.responses:
        installed = types or catalog_of(manifest) or ProviderTypes.installed()
        recorded = {name: recorded_response(value) for name, value in question.responses.items()}
        types = with_recorded(installed, recorded)
    registry = build_registry(manifest, types=types)
    branch = Branch(question.system, name=question.branch.name, metadata=question.branch.metadata)
    branch._context_providers = registry
    try:
        with explain_turns(depth=k):
            turn = await prepare_turn(branch, Instruction(question.instruction))
    finally:
        await registry.aclose()
    return turn.report or ProviderReport()


def junit_xml(display: str, scores: Scores, floors: Iterable[Floor]) -> bytes:
    """One ``testcase`` per provider and one for the overall mean, each measure a property;
    a floor not met is the case's ``failure``, a question that could not run an ``error``."""
    floors = list(floors)
    names = [*scores.providers, "overall"]
    cases: list[tuple[str, Mapping[str, float], list[str]]] = []
    for name in names:
        of = scores.overall if name == "overall" else scores.providers[name]
        own = [f for f in floors if f.provider == name]
        cases.append((name, of.as_dict(), floors_failed(scores, own)))
    unknown = [f for f in floors if f.provider not in names]
    failures = sum(1 for *_, failed in cases if failed) + len(unknown)
    counts = {
        "tests": str(len(cases) + len(unknown)),
        "failures": str(failures),
        "errors": str(1 if scores.problems else 0),
    }
    root = ElementTree.Element("testsuites", {"name": "composer eval", **counts})
    suite = ElementTree.SubElement(root, "testsuite", {"name": display, **counts})
    for name, figures, failed in cases:
        case = ElementTree.SubElement(suite, "testcase", {"name": name, "classname": display})
        properties = ElementTree.SubElement(case, "properties")
        for key, value in figures.items():
            ElementTree.SubElement(properties, "property", {"name": key, "value": f"{value:g}"})
        if failed:
            element = ElementTree.SubElement(case, "failure", {"message": failed[0]})
            element.text = "\n".join(failed)
    for floor in unknown:
        case = ElementTree.SubElement(suite, "testcase", {"name": floor.provider})
        message = floors_failed(scores, [floor])[0]
        ElementTree.SubElement(case, "failure", {"message": message}).text = message
    if scores.problems:
        case = ElementTree.SubElement(suite, "testcase", {"name": "questions"})
        text = "\n".join(f"{p.where}: {p.message}" for p in scores.problems)
        ElementTree.SubElement(case, "error", {"message": scores.problems[0].message}).text = text
    ElementTree.indent(root)
    data: bytes = ElementTree.tostring(root, encoding="utf-8", xml_declaration=True)
    return data
