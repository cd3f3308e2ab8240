"""The ``composer`` command: ``validate`` and ``schema`` (more subcommands plug in the same way).

Each subcommand is a pair of functions: ``add_<name>(subparsers)`` declares its arguments and
sets ``run=<function>``, and the run function takes the parsed arguments and an ``Output`` and
returns the exit code. ``main(argv)`` returns that code instead of exiting, so tests call it.
Diagnostics go to stderr as ``file:line:col: message`` (compilers' format, so editors and CI
annotate them); colour only on a terminal and never with ``NO_COLOR`` set.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from composer import __version__
from composer.errors import ComposerError, ManifestError
from composer.loader import load_manifest
from composer.manifest import Manifest, Origin, manifest_model
from composer.plugins import ProviderTypes
from composer.templating import compile_template
from composer.tokens import count_tokens

__all__ = [
    "COMMANDS",
    "Finding",
    "Output",
    "add_schema",
    "add_validate",
    "build_parser",
    "main",
    "manifest_schema",
    "manifest_warnings",
    "run_schema",
    "run_validate",
]

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


class Output:
    """Where a command writes: results to ``out``, diagnostics to ``err``; rich colour on a TTY."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.out = out if out is not None else sys.stdout
        self.err = err if err is not None else sys.stderr
        self._colour = _wants_colour(self.err)

    def print(self, text: str) -> None:
        print(text, file=self.out)

    def error(self, text: str) -> None:
        self._diagnostic(text, "red")

    def warning(self, text: str) -> None:
        self._diagnostic(text, "yellow")

    def _diagnostic(self, text: str, style: str) -> None:
        if self._colour:
            try:
                from rich.console import Console  # only paid for on a terminal
                from rich.text import Text
            except ImportError:
                pass
            else:
                console = Console(file=self.err, highlight=False, soft_wrap=True, emoji=False)
                console.print(Text(text, style=style))
                return
        print(text, file=self.err)


def _wants_colour(stream: TextIO) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


# --------------------------------------------------------------------------- validate


@dataclass(frozen=True)
class Finding:
    """A legal but suspicious value: where it is and why it is suspicious."""

    origin: Origin | None
    message: str

    def render(self, fallback: str) -> str:
        where = self.origin.location if self.origin is not None else f"{fallback}:1:1"
        return f"{where}: warning: {self.message}"


def manifest_warnings(manifest: Manifest) -> list[Finding]:
    """What ``validate`` warns about: values the ADR accepts that rarely mean what was meant.

    ``max_tokens: 0`` is no cap at all (ADR-0008 D3 tests truthiness); a cap above the budget
    never binds; a provider whose fixed text alone is over its cap or the budget is always
    skipped. Disabled providers are not checked.
    """
    findings: list[Finding] = []
    budget = manifest.budget
    if budget == 0:
        findings.append(
            Finding(manifest.origin("budget"), "budget: 0 admits no block with any text")
        )
    for config in manifest.providers:
        if not config.enabled:
            continue
        label = f'provider "{config.name}"'
        where = manifest.origin("providers", config.name, "max_tokens")
        cap = config.max_tokens
        if cap == 0:
            findings.append(
                Finding(
                    where,
                    f"{label}: max_tokens: 0 means no cap (ADR-0008 D3); "
                    "remove it or set a positive cap",
                )
            )
        elif cap is not None and cap > budget:
            findings.append(
                Finding(
                    where,
                    f"{label}: max_tokens {cap} is above the budget {budget}, so it never applies",
                )
            )
        least = _fixed_tokens(config)
        if least is not None and (least > budget or (cap and least > cap)):
            limit = f"its max_tokens {cap}" if cap and least > cap else f"the budget {budget}"
            findings.append(
                Finding(
                    manifest.origin("providers", config.name, "text")
                    or manifest.origin("providers", config.name),
                    f"{label}: its fixed text is {least} tokens, over {limit}; "
                    "it can never be admitted",
                )
            )
    return findings


def _fixed_tokens(config: Any) -> int | None:
    """Tokens of a provider's text when that text is constant (no template syntax), else None."""
    text = getattr(config, "text", None)
    if not isinstance(text, str) or not text:
        return None
    try:
        if not compile_template(text).is_constant:
            return None
    except ComposerError:
        return None
    return count_tokens(text)


def add_validate(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "validate",
        help="check a manifest; every error located as file:line:col",
        description=(
            "Load MANIFEST (a file, or a folder of per-environment files with --env), apply "
            "extends and ${VAR}, validate every provider. Exit 0 when valid (warnings "
            "included), 1 when not."
        ),
    )
    parser.add_argument("manifest", metavar="MANIFEST", help="a manifest file or a folder")
    parser.add_argument("--env", help="environment: picks <MANIFEST>/<ENV>.yaml from a folder")
    parser.set_defaults(run=run_validate)


def run_validate(args: argparse.Namespace, output: Output) -> int:
    try:
        manifest = load_manifest(args.manifest, env=args.env)
    except ManifestError as e:
        for error in e.errors:
            output.error(f"{error.location}: {error.message}")
        return 1
    shown = str(manifest.path or args.manifest)
    for finding in manifest_warnings(manifest):
        output.warning(manifest.redact(finding.render(shown)))
    enabled = sum(1 for config in manifest.providers if config.enabled)
    output.print(
        manifest.redact(
            f"{shown}: valid; {len(manifest.providers)} providers ({enabled} enabled), "
            f"budget {manifest.budget}"
        )
    )
    return 0


# --------------------------------------------------------------------------- schema


def manifest_schema(types: ProviderTypes | None = None, *, overlay: bool = False) -> dict[str, Any]:
    """JSON Schema of a manifest, each installed type a member of a union on ``type``.

    ``overlay`` relaxes it for files that ``extends`` another: nothing is required there, since
    an entry may update a base provider by name alone.
    """
    types = types if types is not None else ProviderTypes.installed()
    model = manifest_model(ptype.config for ptype in types)
    schema: dict[str, Any] = {"$schema": SCHEMA_DIALECT, **model.model_json_schema()}
    schema["title"] = "composer manifest (overlay)" if overlay else "composer manifest"
    if overlay:
        schema = _relaxed(schema)
    return schema


def _relaxed(node: Any) -> Any:
    if isinstance(node, dict):
        return {
            ("anyOf" if key == "oneOf" else key): _relaxed(value)
            for key, value in node.items()
            if key not in ("required", "discriminator")
        }
    if isinstance(node, list):
        return [_relaxed(item) for item in node]
    return node


def add_schema(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "schema",
        help="print the JSON Schema of a manifest (for editor completion)",
        description=(
            "Print the JSON Schema of a manifest with every installed provider type. Point "
            "editors at it with a '# yaml-language-server: $schema=...' first line."
        ),
    )
    parser.add_argument(
        "--overlay",
        action="store_true",
        help="the relaxed schema for files that use extends (no key is required)",
    )
    parser.set_defaults(run=run_schema)


def run_schema(args: argparse.Namespace, output: Output) -> int:
    try:
        schema = manifest_schema(overlay=args.overlay)
    except ComposerError as e:
        output.error(f"composer: {e}")
        return 1
    output.print(json.dumps(schema, indent=2))
    return 0


# --------------------------------------------------------------------------- main

COMMANDS: list[Callable[[Any], None]] = [add_validate, add_schema]
"""The subcommands, in ``--help`` order; a new one appends its ``add_<name>`` here."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="composer",
        description="Declare in YAML where an LLM agent's pre-turn context comes from.",
    )
    parser.add_argument("--version", action="version", version=f"composer {__version__}")
    subparsers = parser.add_subparsers(metavar="COMMAND", required=True)
    for add in COMMANDS:
        add(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (argparse's 2 for usage errors)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version and usage errors
        return e.code if isinstance(e.code, int) else 0 if e.code is None else 2
    run: Callable[[argparse.Namespace, Output], int] = args.run
    return run(args, Output())
