"""``composer render`` (also ``composer explain``): the effective manifest as YAML that loads
again, each value followed by ``# file:line:col`` of the file that set it."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from composer.cli.exit_codes import FAILURE, SUCCESS
from composer.cli.options import add_manifest_arguments, add_no_interpolate, manifest_from

if TYPE_CHECKING:
    from composer.cli.output import Output

__all__ = ["DESCRIPTION", "add_arguments", "run"]

DESCRIPTION = (
    "Print the manifest as it is after extends, overlays and ${VAR}, as YAML that "
    "loads again to the same manifest: the manifest's own key names, every value "
    "followed by `# file:line:col` of the file that set it (or `# default`), values "
    "written with variables as written (${NAME}), never their value, and paths "
    "relative to MANIFEST's folder. `composer explain` is the same command."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_manifest_arguments(parser)
    add_no_interpolate(parser)


def run(args: argparse.Namespace, output: Output) -> int:
    from composer.cli.render import render_lines

    manifest = manifest_from(args, output)
    if manifest is None:
        return FAILURE
    output.print(f"# effective manifest: {manifest.path or args.manifest}")
    for line in render_lines(manifest):
        output.print(line)
    return SUCCESS
