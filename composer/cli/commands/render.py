"""``composer render`` (also ``composer explain``): the effective manifest as YAML that loads
again, each value followed by ``# file:line:col`` of the file that set it."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from composer.cli.exit_codes import FAILURE, SUCCESS
from composer.cli.options import (
    add_json,
    add_manifest_arguments,
    add_no_interpolate,
    manifest_from,
)

if TYPE_CHECKING:
    from composer.cli.output import Output
    from composer.inspect.documents import Diagnostic, RenderDocument
    from composer.manifest import Manifest

__all__ = ["DESCRIPTION", "add_arguments", "run"]

DESCRIPTION = (
    "Print the manifest as it is after extends, overlays and ${VAR}, as YAML that "
    "loads again to the same manifest: the manifest's own key names, every value "
    "followed by `# file:line:col` of the file that set it (or `# default`), values "
    "written with variables as written (${NAME}), never their value, and paths "
    "relative to MANIFEST's folder. With --only-set, only the values the files set (it "
    "still loads to the same manifest: the rest are defaults). `composer explain` is the "
    "same command."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_manifest_arguments(parser)
    add_no_interpolate(parser)
    parser.add_argument(
        "--only-set",
        action="store_true",
        help="only the values the manifest's files set, each with its file:line:col; no default",
    )
    add_json(parser)


def run(args: argparse.Namespace, output: Output) -> int:
    from composer.inspect.render import render_lines

    problems: list[Diagnostic] = []
    manifest = manifest_from(args, output, problems=problems)
    if args.json:
        from composer.cli.output import print_document

        document = _document(args, manifest, problems)
        print_document(output, document, manifest.redact if manifest is not None else None)
    if manifest is None:
        return FAILURE
    if args.json:
        return SUCCESS
    what = "only what the files set" if args.only_set else "effective manifest"
    output.print(f"# {what}: {manifest.path or args.manifest}")
    for line in render_lines(manifest, only_set=args.only_set):
        output.print(line)
    return SUCCESS


def _document(
    args: argparse.Namespace, manifest: Manifest | None, problems: list[Diagnostic]
) -> RenderDocument:
    from composer.inspect.documents import RenderDocument, RenderedValue, located
    from composer.inspect.explain import effective_values
    from composer.inspect.render import provider_name

    if manifest is None:
        return RenderDocument(
            manifest=None, env=args.env, only_set=args.only_set, values=None, errors=problems
        )
    values = []
    for value in effective_values(manifest):
        if value.keys == ("extends",) or (args.only_set and value.origin is None):
            continue  # as in the YAML, which stands for the whole chain
        keys = list(value.keys)
        if keys[:1] == ["providers"] and len(keys) > 1:
            keys[1] = provider_name(manifest, keys[1])  # its value may be a secret
        values.append(
            RenderedValue(
                keys=keys,
                path=value.path,
                value=value.data,
                origin=located(value.origin.location) if value.origin is not None else None,
            )
        )
    return RenderDocument(
        manifest=str(manifest.path or args.manifest),
        env=args.env,
        only_set=args.only_set,
        values=values,
        errors=[],
    )
