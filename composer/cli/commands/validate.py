"""``composer validate``: load a manifest (or every environment of a folder) and say what is
wrong with it, each error located as ``file:line:col``; with ``--no-interpolate``, which
variables each environment needs."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from composer.cli.exit_codes import FAILURE, SUCCESS, USAGE
from composer.cli.options import add_manifest_arguments, add_no_interpolate, manifest_from

if TYPE_CHECKING:
    from composer.cli.output import Output
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
        help="validate every environment of the MANIFEST folder, one report each",
    )
    add_no_interpolate(parser)


def run(args: argparse.Namespace, output: Output) -> int:
    if not args.all_envs:
        return SUCCESS if _validate_one(args, output, args.env) else FAILURE
    from composer.manifest.loader import environments

    if args.env is not None:
        output.error("composer validate: give --env or --all-envs, not both")
        return USAGE
    if args.manifest is None or not os.path.isdir(args.manifest):
        output.error("composer validate: --all-envs needs MANIFEST to be a folder")
        return USAGE
    names = environments(args.manifest)
    invalid = [env for env in names if not _validate_one(args, output, env)]
    verdict = f"{len(names) - len(invalid)} valid"
    if invalid:
        verdict += f", {len(invalid)} invalid ({', '.join(invalid)})"
    noun = "environment" if len(names) == 1 else "environments"
    output.print(f"{args.manifest}: {len(names)} {noun}: {verdict}")
    return FAILURE if invalid or not names else SUCCESS


def _validate_one(args: argparse.Namespace, output: Output, env: str | None) -> bool:
    """Validate one environment, print what was found; whether it is valid."""
    from composer.cli.checks import manifest_findings

    manifest = manifest_from(args, output, env)
    if manifest is None:
        return False
    shown = str(manifest.path or args.manifest)
    valid = True
    for finding in manifest_findings(manifest, variables_read=not args.no_interpolate):
        line = manifest.redact(finding.render(shown))
        if finding.error:
            output.error(line)
            valid = False
        else:
            output.warning(line)
    if not valid:
        return False
    enabled = sum(1 for config in manifest.providers if config.enabled)
    how = "valid without variables" if args.no_interpolate else "valid"
    output.print(
        manifest.redact(
            f"{shown}: {how}; {len(manifest.providers)} providers ({enabled} enabled), "
            f"budget {manifest.budget}"
        )
    )
    if args.no_interpolate:
        output.print(f"{shown}: {_variables_needed(manifest)}")
    return True


def _variables_needed(manifest: Manifest) -> str:
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
    text = "needs " + (", ".join(f"{n} ({where})" for n, where in needed.items()) or "no variable")
    if optional:
        text += f"; reads if set: {', '.join(optional)}"
    return text
