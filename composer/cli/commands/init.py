"""``composer init [DIR]``: a team's first manifests, ready to validate, preview and test
(``composer.inspect.scaffold`` holds what is written)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from composer.cli.exit_codes import FAILURE, SUCCESS

if TYPE_CHECKING:
    from composer.cli.output import Output

__all__ = ["DESCRIPTION", "add_arguments", "run"]

DESCRIPTION = (
    "Write base, dev and prod manifests (with an audit log, turns.jsonl, that composer serve "
    "--console shows), a small runbook corpus, a memory seed, a tests.yaml of expected turns, "
    "a questions.yaml of labelled questions (composer eval) and the editor schemas into DIR (made if missing). As written, they validate in every "
    "environment, preview offline and pass composer test and composer eval. No file is overwritten unless "
    "--force, and nothing outside DIR is written: a folder in DIR that is a symbolic link is "
    "refused before anything is written (--force or not), and --force replaces a link where "
    "a file goes, never what it points to."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", nargs="?", default=".", metavar="DIR", help="where (default: .)")
    parser.add_argument(
        "--team",
        default="the ops team",
        help="the team the house rules name",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace files that exist (a symbolic link itself, never what it points to)",
    )


def run(args: argparse.Namespace, output: Output) -> int:
    from pathlib import Path

    from composer.catalog import ProviderTypes
    from composer.errors import ComposerError
    from composer.inspect.scaffold import scaffold
    from composer.inspect.schema import schema_texts

    folder = Path(args.dir)
    try:
        schemas = schema_texts(ProviderTypes.installed())
        written = scaffold(folder, team=args.team, force=args.force, also=schemas)
    except ComposerError as e:
        output.error(f"composer init: {e}")
        return FAILURE
    for path in written:
        output.print(f"wrote {path}")
    output.print(
        f"next: composer validate {folder} --all-envs && composer preview {folder} --env dev "
        f'--instruction "the disk is almost full" && composer test {folder / "tests.yaml"}'
        f" && composer eval {folder / 'questions.yaml'}"
    )
    return SUCCESS
