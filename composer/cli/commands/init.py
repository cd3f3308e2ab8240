"""``composer init [DIR]``: a team's first manifests, ready to validate, preview and test
(``composer.cli.scaffold`` holds what is written)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from composer.cli.exit_codes import FAILURE, SUCCESS

if TYPE_CHECKING:
    from composer.cli.output import Output

__all__ = ["DESCRIPTION", "add_arguments", "run"]

DESCRIPTION = (
    "Write base, dev and prod manifests, a small runbook corpus, a memory seed, a tests.yaml "
    "of expected turns and the editor schemas into DIR (made if missing). As written, they "
    "validate in every environment, preview offline and pass composer test. No file is "
    "overwritten unless --force."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", nargs="?", default=".", metavar="DIR", help="where (default: .)")
    parser.add_argument(
        "--team",
        default="the ops team",
        help="the team the house rules name",
    )
    parser.add_argument("--force", action="store_true", help="replace files that exist")


def run(args: argparse.Namespace, output: Output) -> int:
    from pathlib import Path

    from composer.catalog import ProviderTypes
    from composer.cli.scaffold import scaffold
    from composer.cli.schema import write_schemas
    from composer.errors import ComposerError

    folder = Path(args.dir)
    try:
        written = scaffold(folder, team=args.team, force=args.force)
        written += write_schemas(folder, ProviderTypes.installed())
    except ComposerError as e:
        output.error(f"composer init: {e}")
        return FAILURE
    for path in written:
        output.print(f"wrote {path}")
    output.print(
        f"next: composer validate {folder} --all-envs && composer preview {folder} --env dev "
        f'--instruction "the disk is almost full" && composer test {folder / "tests.yaml"}'
    )
    return SUCCESS
