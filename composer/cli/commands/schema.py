"""``composer schema``: the JSON Schemas editors complete manifests and test files with
(``composer.inspect.schema`` builds them)."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from composer.cli.exit_codes import FAILURE, SUCCESS

if TYPE_CHECKING:
    from composer.cli.output import Output

__all__ = ["DESCRIPTION", "add_arguments", "run"]

DESCRIPTION = (
    "Print the JSON Schema of a manifest with every installed provider type (each "
    "schema has a stable $id). Point editors at it with a "
    "'# yaml-language-server: $schema=...' first line, or write every schema once "
    "with --write DIR and map file patterns to them in the editor's settings."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--overlay",
        action="store_true",
        help="the relaxed schema for files that use extends (no key is required)",
    )
    which.add_argument("--tests", action="store_true", help="the schema of a composer test file")
    which.add_argument(
        "--questions",
        action="store_true",
        help="the schema of a composer eval file of labelled questions",
    )
    which.add_argument(
        "--write",
        metavar="DIR",
        help="write manifest.schema.json, manifest.overlay.schema.json, tests.schema.json "
        "and questions.schema.json",
    )


def run(args: argparse.Namespace, output: Output) -> int:
    from pathlib import Path

    from composer.catalog import ProviderTypes
    from composer.errors import ComposerError
    from composer.inspect.schema import (
        SCHEMA_FILES,
        manifest_schema,
        questions_schema,
        tests_schema,
        write_schemas,
    )

    if args.tests or args.questions:
        schema = tests_schema() if args.tests else questions_schema()
        output.json(json.dumps(schema, indent=2))
        return SUCCESS
    types = ProviderTypes.installed()
    for error in types.load_all():  # a broken plugin is reported, the others still documented
        output.error(f"composer: warning: {error}; its type is left out of the schema")
    try:
        if args.write is not None:
            for path in write_schemas(Path(args.write), types):
                output.print(f"wrote {path}: {SCHEMA_FILES[path.name]}")
            return SUCCESS
        schema = manifest_schema(types, overlay=args.overlay)
    except ComposerError as e:
        output.error(f"composer: {e}")
        return FAILURE
    except OSError as e:
        output.error(f"composer schema: cannot write {args.write}: {e.strerror or e}")
        return FAILURE
    output.json(json.dumps(schema, indent=2))
    return SUCCESS
