"""``composer preview``: run one real turn and show what the model would see, per provider
(``composer.inspect.preview`` runs it, ``composer.cli.tables`` prints it)."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from composer.cli.exit_codes import FAILURE, SUCCESS, USAGE
from composer.cli.options import add_json, add_manifest_arguments, manifest_from

if TYPE_CHECKING:
    from composer.cli.output import Output

__all__ = ["DESCRIPTION", "add_arguments", "run"]

DESCRIPTION = (
    "Load MANIFEST, build its registry and run one real gather for INSTRUCTION, as the "
    "runtime would before a model turn. Prints one row per declared provider (outcome, "
    "tokens, milliseconds), the budget used, and the exact folded text the model would "
    "see: system text + injected blocks + guidance. Provider failures are contained "
    "(exit 0) unless --strict. The http provider makes real requests. With --explain, also "
    "every candidate each ranking provider (file_corpus, memory) considered, with its score, "
    "tokens and fate, near misses first, and for a provider lost to the budget what it "
    "needed, what was left and who took the rest."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_manifest_arguments(parser)
    parser.add_argument("--instruction", required=True, help="the user turn to preview")
    system = parser.add_mutually_exclusive_group()
    system.add_argument(
        "--system",
        help="the branch's system text (default: a stand-in, so that providers are called)",
    )
    system.add_argument(
        "--no-system",
        action="store_true",
        help="preview a branch without system text (ADR-0008: no provider is called)",
    )
    parser.add_argument("--branch-name", help="the branch name templates see as branch.name")
    parser.add_argument(
        "--metadata",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a branch.metadata value templates see (repeatable; VALUE is text)",
    )
    parser.add_argument(
        "--branch",
        metavar="JSON",
        help='the branch as JSON, e.g. \'{"name": "payments", "metadata": {"team": "a"}}\' '
        "(--branch-name and --metadata win over it)",
    )
    parser.add_argument(
        "--explain",
        action="store_true",
        help="list every passage and memory item considered (score, tokens, fate: admitted, "
        "below_min_score, beyond_top_k, cut_to_fit, duplicate, lost_with_block), near misses "
        "first; ranking providers search twice as deep for this turn",
    )
    add_json(parser)
    parser.add_argument("--strict", action="store_true", help="exit 1 when any provider failed")
    parser.add_argument(
        "--watch",
        action="store_true",
        help="preview again on every change of the manifest, the files it extends, .env or "
        "the secrets folder; a broken edit shows its errors instead (Ctrl-C stops)",
    )


def run(args: argparse.Namespace, output: Output) -> int:
    if getattr(args, "watch", False):
        from composer.cli.watch import watch_preview

        return watch_preview(args, output, run)
    from composer.cli.logs import log_records_to
    from composer.cli.progress import progress_factory
    from composer.cli.tables import print_preview
    from composer.cli.terminate import run as run_until_done
    from composer.errors import ComposerError
    from composer.inspect.preview import DEFAULT_SYSTEM, PreviewDocument, run_preview

    branch = _branch_of(args, output)
    if branch is None:
        return USAGE
    manifest = manifest_from(args, output)
    if manifest is None:
        return FAILURE
    system = None if args.no_system else args.system if args.system is not None else DEFAULT_SYSTEM
    shown = str(manifest.path or args.manifest)
    try:
        with log_records_to(output, manifest.redact):
            preview = run_until_done(
                run_preview(
                    manifest,
                    args.instruction,
                    system=system,
                    branch_name=branch[0],
                    branch_metadata=branch[1],
                    progress=progress_factory(output),
                    explain=args.explain,
                )
            )
    except ComposerError as e:
        output.error(manifest.redact(f"composer: {e}"))
        return FAILURE
    preview.default_system = system == DEFAULT_SYSTEM and args.system is None
    if args.json:
        from composer.cli.output import print_document

        document = PreviewDocument.of(preview, manifest=shown, env=args.env, redact=manifest.redact)
        print_document(output, document)
    else:
        print_preview(preview, shown, args.env, output, manifest.redact, explain=args.explain)
    return FAILURE if args.strict and preview.report.failed else SUCCESS


def _branch_of(
    args: argparse.Namespace, output: Output
) -> tuple[str | None, dict[str, object]] | None:
    """The branch's name and metadata from ``--branch``, ``--branch-name`` and ``--metadata``;
    None (after saying why) when one is malformed."""
    name: str | None = None
    metadata: dict[str, object] = {}
    if getattr(args, "branch", None):
        try:
            given = json.loads(args.branch)
        except ValueError as e:
            output.error(f"composer preview: --branch is not JSON: {e}")
            return None
        if not isinstance(given, dict) or not set(given) <= {"name", "metadata"}:
            output.error('composer preview: --branch is an object of "name" and "metadata"')
            return None
        name = given.get("name")
        metadata = given.get("metadata") or {}
        if not (name is None or isinstance(name, str)) or not isinstance(metadata, dict):
            output.error("composer preview: --branch name is text, metadata an object")
            return None
    for pair in getattr(args, "metadata", None) or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            output.error(f"composer preview: --metadata {pair!r} is not KEY=VALUE")
            return None
        metadata[key] = value
    if getattr(args, "branch_name", None) is not None:
        name = args.branch_name
    return name, metadata
