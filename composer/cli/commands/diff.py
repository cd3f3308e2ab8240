"""``composer diff``: what differs between two effective manifests, value by value: two
environments of a folder, one environment of two folders or files, or of two git revisions."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from composer.cli.exit_codes import FAILURE, SUCCESS, TROUBLE, USAGE
from composer.cli.options import MANIFEST_HELP, add_json, add_no_interpolate, manifest_from

if TYPE_CHECKING:
    from composer.cli.output import Output
    from composer.inspect.documents import Diagnostic, DiffSide
    from composer.inspect.explain import Change, Value
    from composer.manifest import Manifest

__all__ = ["DESCRIPTION", "add_arguments", "run"]

DESCRIPTION = (
    "Compare two effective manifests and list every value that differs: `~` changed, "
    "`+` only in the second, `-` only in the first, each with the file:line:col that "
    "set it on either side; a provider only on one side is one line, a change of "
    "provider order another. Three forms: MANIFEST --env A --env B (two environments "
    "of one folder); OLD NEW [--env ENV] (one environment of two folders or files); "
    "MANIFEST --rev A..B [--env ENV] (one environment at two git revisions; --rev A "
    "compares A with the working tree; a revision without a .env beside the manifests "
    "reads the working tree's, and the output says so). Exit 0, or with --exit-code 1 "
    "when they differ; "
    "a side that does not load exits 1 (2 with --exit-code)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("manifest", metavar="MANIFEST", nargs="?", help=MANIFEST_HELP)
    parser.add_argument("other", metavar="NEW", nargs="?", help="the second folder or file")
    parser.add_argument(
        "--env", action="append", help="one environment, or two to compare: --env A --env B"
    )
    parser.add_argument("--rev", help="git revisions: A..B, A.. (A against HEAD), or A")
    parser.add_argument(
        "--exit-code", action="store_true", help="exit 1 when there are differences"
    )
    add_no_interpolate(parser)
    add_json(parser)


def run(args: argparse.Namespace, output: Output) -> int:
    from composer.errors import SettingsError
    from composer.inspect.revisions import checkout, split_range

    envs: list[str] = args.env or []
    if args.other is None and args.rev is None:
        if len(envs) != 2:
            output.error("composer diff: give exactly two environments: --env A --env B")
            return USAGE
        problems: list[Diagnostic] = []
        first, second = (manifest_from(args, output, env, problems=problems) for env in envs)
        return _print_diff(args, output, f"{envs[0]} -> {envs[1]}", first, second, problems)
    if len(envs) > 1:
        output.error("composer diff: two folders or revisions compare one environment: --env ENV")
        return USAGE
    if args.other is not None and args.rev is not None:
        output.error("composer diff: give NEW or --rev, not both")
        return USAGE
    if args.manifest is None:
        output.error("composer diff: give MANIFEST")
        return USAGE
    env = envs[0] if envs else None
    suffix = f" (env {env})" if env else ""
    title = (args.rev or f"{args.manifest} -> {args.other}") + suffix
    problems = []
    try:
        old, new = split_range(args.rev) if args.rev is not None else (None, None)
        dotenv = not args.no_interpolate and _dotenv_beside_manifest()
        with (
            checkout(args.manifest, old, dotenv=dotenv) as before,
            checkout(args.other or args.manifest, new, dotenv=dotenv) as after,
        ):
            if args.rev:
                title = f"{old} -> {new or 'working tree'}{suffix}"
            first, second = (
                manifest_from(
                    args, output, env, path=side.path, shown=side.shown, problems=problems
                )
                for side in (before, after)
            )
            shown = (before.shown, after.shown)
            notes = [side.note for side in (before, after) if side.note is not None]
            return _print_diff(args, output, title, first, second, problems, shown, notes)
    except SettingsError as e:
        from composer.inspect.documents import diagnostic

        output.error(f"composer diff: {e}")
        problems.append(diagnostic(None, output.relative(str(e))))
        if args.json:
            _print_document(output, title, None, problems, (), ())
        return TROUBLE if args.exit_code else FAILURE


def _print_diff(
    args: argparse.Namespace,
    output: Output,
    title: str,
    first: Manifest | None,
    second: Manifest | None,
    problems: list[Diagnostic],
    shown: Sequence[Callable[[str], str]] = (),
    notes: Sequence[str] = (),
) -> int:
    """Print the differences, after the title and ``notes`` (or their JSON document); the
    exit code (``--exit-code``: 1 when any, 2 when a side failed)."""
    from composer.inspect.explain import diff_manifests

    if first is None or second is None:
        if args.json:
            _print_document(output, title, None, problems, shown, notes)
        return TROUBLE if args.exit_code else FAILURE
    changes = diff_manifests(first, second)
    if args.json:
        _print_document(output, title, changes, problems, shown, notes, first.redact, second.redact)
        return FAILURE if args.exit_code and changes else SUCCESS
    noun = "difference" if len(changes) == 1 else "differences"
    output.print(f"# {title}: {len(changes)} {noun}")
    for note in notes:
        output.print(f"# {note}")
    for change in changes:
        line = change.describe()
        for relabel in shown:  # a revision's export shown as REV:folder/
            line = relabel(line)
        output.print(line)
    return FAILURE if args.exit_code and changes else SUCCESS


def _print_document(
    output: Output,
    title: str,
    changes: list[Change] | None,
    problems: list[Diagnostic],
    shown: Sequence[Callable[[str], str]],
    notes: Sequence[str],
    *redactions: Callable[[str], str],
) -> None:
    """The diff as ``composer.inspect.documents.DiffDocument``; a side's values masked as that
    side's manifest masks them."""
    from composer.cli.output import print_document
    from composer.inspect.documents import DiffDocument, Difference

    def relabel(text: str) -> str:
        for change in shown:  # a revision's export shown as REV:folder/
            text = change(text)
        return text

    differences = None
    if changes is not None:
        before_redact, after_redact = redactions
        differences = [
            Difference(
                change=change.kind,
                path=change.path,
                before=_side(change.before, before_redact, relabel),
                after=_side(change.after, after_redact, relabel),
            )
            for change in changes
        ]
    document = DiffDocument(
        title=title, notes=list(notes), differences=differences, errors=problems
    )
    print_document(output, document)


def _side(
    value: Value | None, redact: Callable[[str], str], relabel: Callable[[str], str]
) -> DiffSide | None:
    from composer.inspect.documents import DiffSide, located
    from composer.manifest import map_strings

    if value is None:
        return None
    origin = located(relabel(value.origin.location)) if value.origin is not None else None
    return DiffSide(value=map_strings(value.data, redact), origin=origin)


def _dotenv_beside_manifest() -> bool:
    """Whether ``${VAR}`` is read from the ``.env`` beside the manifest (the loader's default)
    rather than from a file ``COMPOSER_ENV_FILE`` names, the same for both sides."""
    from composer.errors import SettingsError
    from composer.manifest.settings import load_settings

    try:
        return "env_file" not in load_settings().model_fields_set
    except (ValueError, OSError, SettingsError):  # each side's load says what is wrong
        return True
