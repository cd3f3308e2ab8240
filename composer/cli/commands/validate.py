"""``composer validate``: load a manifest (or every environment of a folder) and say what is
wrong with it, each error located as ``file:line:col``; with ``--no-interpolate``, which
variables each environment needs."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from composer.cli.exit_codes import FAILURE, SUCCESS, USAGE
from composer.cli.options import (
    add_json,
    add_manifest_arguments,
    add_no_interpolate,
    load_diagnosed,
)
from composer.inspect.words import counted

if TYPE_CHECKING:
    from composer.cli.output import Output
    from composer.inspect.documents import Diagnostic, ValidateDiagnostic, Variables
    from composer.manifest import Manifest

__all__ = ["DESCRIPTION", "add_arguments", "run"]

DESCRIPTION = (
    "Load MANIFEST (a file, or a folder of per-environment files with --env or "
    "--all-envs), apply extends and ${VAR}, validate every provider, its templates and "
    "the files it names, and what the run needs on this machine (the audit file's folder, "
    "each line of a memory seed, the extras a source, provider or runtime option imports, "
    "an MCP server's command), starting or connecting to nothing. Exit 0 when valid "
    "(warnings included), 1 when not. With "
    "--no-interpolate no variable is read (CI needs no secret) and the variables each "
    "environment needs are listed."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_manifest_arguments(parser)
    parser.add_argument(
        "--all-envs",
        action="store_true",
        help="validate every environment of the MANIFEST folder; each error once, with the "
        "environments it is in",
    )
    add_no_interpolate(parser)
    add_json(parser)


@dataclass
class _Checked:
    """What validating one environment found."""

    env: str | None
    manifest: Manifest | None
    problems: list[tuple[bool, Diagnostic]]  # (an error, not a warning; what), in file order
    summary: list[str] = field(default_factory=list)  # the lines printed when it is valid

    @property
    def valid(self) -> bool:
        return self.manifest is not None and not any(error for error, _ in self.problems)


def run(args: argparse.Namespace, output: Output) -> int:
    if not args.all_envs:
        checked = [_check(args, output, args.env)]
    else:
        from composer.manifest.loader import environments

        if args.env is not None:
            output.error("composer validate: give --env or --all-envs, not both")
            return USAGE
        if args.manifest is None or not os.path.isdir(args.manifest):
            output.error("composer validate: --all-envs needs MANIFEST to be a folder")
            return USAGE
        checked = [_check(args, output, env) for env in environments(args.manifest)]
    problems = _once(checked)
    for error, problem in problems:
        if error:
            output.error(_said(problem, args.all_envs))
        else:
            output.warning(_said(problem, args.all_envs, "warning: "))
    invalid = [check.env or "" for check in checked if not check.valid]
    if args.json:
        _print_document(args, output, checked, problems)
    else:
        for check in checked:
            for line in check.summary:
                output.print(line)
        if args.all_envs:
            verdict = f"{len(checked) - len(invalid)} valid"
            if invalid:
                verdict += f", {len(invalid)} invalid ({', '.join(invalid)})"
            output.print(f"{args.manifest}: {counted(len(checked), 'environment')}: {verdict}")
    return FAILURE if invalid or not checked else SUCCESS


def _check(args: argparse.Namespace, output: Output, env: str | None) -> _Checked:
    """Validate one environment; what it found, nothing printed yet."""
    from composer.inspect.checks import manifest_findings
    from composer.inspect.documents import diagnostic

    manifest, errors = load_diagnosed(args, output, env)
    checked = _Checked(env if env is not None else args.env, manifest, [])
    checked.problems += [(True, error) for error in errors]
    if manifest is None:
        return checked
    shown = str(manifest.path or args.manifest)
    for finding in manifest_findings(manifest, variables_read=not args.no_interpolate):
        where = finding.origin.location if finding.origin is not None else f"{shown}:1:1"
        found = diagnostic(
            output.relative(where), output.relative(manifest.redact(finding.message))
        )
        checked.problems.append((finding.error, found))
    if not checked.valid:
        return checked
    enabled = sum(1 for config in manifest.providers if config.enabled)
    how = "valid without variables" if args.no_interpolate else "valid"
    checked.summary.append(
        manifest.redact(
            f"{shown}: {how}; {counted(len(manifest.providers), 'provider')} ({enabled} enabled), "
            f"budget {manifest.budget}"
        )
    )
    if args.no_interpolate:
        checked.summary.append(f"{shown}: {_variables_needed(manifest)}")
    return checked


def _once(checked: list[_Checked]) -> list[tuple[bool, ValidateDiagnostic]]:
    """The errors and warnings of every environment, each once with the environments it is
    in, in the order found."""
    from composer.inspect.documents import ValidateDiagnostic

    found: dict[tuple[bool, str | None, str], ValidateDiagnostic] = {}
    for check in checked:
        for error, problem in check.problems:
            once = found.setdefault(
                (error, problem.location, problem.message),
                ValidateDiagnostic(**problem.model_dump(), environments=[]),
            )
            if check.env is not None and check.env not in once.environments:
                once.environments.append(check.env)
    return [(error, problem) for (error, _, _), problem in found.items()]


def _said(problem: ValidateDiagnostic, all_envs: bool, kind: str = "") -> str:
    """The line of an error or a warning; with --all-envs, ending with its environments."""
    location = problem.location
    text = f"{location}: {kind}{problem.message}" if location else f"composer: {problem.message}"
    if all_envs:
        text += f" (in {', '.join(problem.environments)})"
    return text


def _print_document(
    args: argparse.Namespace,
    output: Output,
    checked: list[_Checked],
    problems: list[tuple[bool, ValidateDiagnostic]],
) -> None:
    from composer.cli.output import print_document
    from composer.inspect.documents import EnvironmentCheck, ValidateDocument

    environments: list[EnvironmentCheck] = []
    for check in checked:
        manifest = check.manifest if check.valid else None
        environments.append(
            EnvironmentCheck(
                env=check.env,
                path=output.relative(str(check.manifest.path))
                if check.manifest is not None and check.manifest.path is not None
                else None,
                valid=check.valid,
                providers=None if manifest is None else len(manifest.providers),
                enabled=None
                if manifest is None
                else sum(1 for config in manifest.providers if config.enabled),
                budget=None if manifest is None else manifest.budget,
                variables=_variables(output, manifest)
                if manifest is not None and args.no_interpolate
                else None,
            )
        )
    document = ValidateDocument(
        manifest=str(args.manifest),
        valid=bool(checked) and all(check.valid for check in checked),
        environments=environments,
        errors=[problem for error, problem in problems if error],
        warnings=[problem for error, problem in problems if not error],
    )
    print_document(output, document)


def _variables(output: Output, manifest: Manifest) -> Variables:
    from composer.inspect.documents import Variable, Variables, located

    needed, optional = _needs(manifest)
    return Variables(
        needed=[
            Variable(name=name, location=located(output.relative(where)))
            for name, where in needed.items()
        ],
        optional=optional,
    )


def _needs(manifest: Manifest) -> tuple[dict[str, str], list[str]]:
    """Which variables an environment must have, with where each is first read, and which it
    may have (a default applies, or only a disabled provider reads it)."""
    needed: dict[str, str] = {}
    optional: list[str] = []
    for use in manifest.variables:
        if use.required:
            needed.setdefault(use.name, use.location)
    for use in manifest.variables:
        if use.name not in needed and use.name not in optional:
            optional.append(use.name)
    return needed, optional


def _variables_needed(manifest: Manifest) -> str:
    """``_needs`` as ``validate --no-interpolate`` says it."""
    needed, optional = _needs(manifest)
    text = "needs " + (", ".join(f"{n} ({where})" for n, where in needed.items()) or "no variable")
    if optional:
        text += f"; reads if set: {', '.join(optional)}"
    return text
