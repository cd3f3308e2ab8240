"""``composer audit list|show|diff``: the turns of an audit log one line each, a turn as
``preview`` prints it, or what changed between two turns (``composer.inspect.turns`` reads the
log)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from composer.cli.exit_codes import FAILURE, SUCCESS, USAGE
from composer.cli.options import IntermixedParser, add_json

if TYPE_CHECKING:
    from composer.cli.output import Output
    from composer.observe.record import AuditLine

__all__ = ["DESCRIPTION", "add_arguments", "run"]

DESCRIPTION = (
    "Read an audit log written with the manifest's `runtime.audit` (one JSON line per turn): "
    "a file, or a PostgreSQL table named by its DSN and --schema. A turn ID may be any unique "
    "prefix of a turn id (8 characters tell apart the newest 10,000 turns of a process)."
)

_LOG = "the audit log: a file (turns.jsonl) or a DSN (postgresql://...)"


def _location(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="LOG", help=_LOG)
    parser.add_argument(
        "--schema",
        default="composer",
        metavar="NAME",
        help="the PostgreSQL schema of a DSN's table (default: composer)",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # intermixed: `show LOG --schema S ID` as well as `show LOG ID --schema S`
    actions = parser.add_subparsers(metavar="ACTION", required=True, parser_class=IntermixedParser)
    listing = actions.add_parser(
        "list",
        help="one line per turn, newest first",
        description=(
            "List the turns of LOG, newest first, one line each: time (UTC), turn id, "
            "branch id (and name), principal, tokens used of the budget, one character per "
            "provider's outcome (+ fired, c cached, . empty, w guarded, m over max_tokens, "
            "b over budget, F failed, T timeout, - not called), `unanswered` when the client "
            "got no answer (a server's state store failed after the providers ran; its retry "
            "is the served turn), and the instruction's first words when the log kept text."
        ),
    )
    _location(listing)
    listing.add_argument("--limit", type=int, default=20, metavar="N", help="the newest N turns")
    listing.add_argument("--branch", metavar="ID", help="only the turns of this branch id")
    listing.add_argument("--principal", metavar="NAME", help="only the turns of this principal")
    add_json(listing)
    listing.set_defaults(action=_list)
    show = actions.add_parser(
        "show",
        help="print a turn as `composer preview` would",
        description=(
            "Print one turn of LOG as `composer preview` prints a turn: one row per provider "
            "(outcome, tokens, milliseconds), the budget used, then the text the model saw when "
            "the log kept text (`keep_text: true`), else each block's SHA-256. Without ID, "
            "the newest turn of LOG."
        ),
    )
    _location(show)
    show.add_argument("turn", metavar="ID", nargs="?", help="the turn id, or a unique prefix of it")
    # the spelling before ID was positional, as in `audit diff`: kept for scripts, warned
    show.add_argument("--turn", dest="turn_option", metavar="ID", help=argparse.SUPPRESS)
    add_json(show)  # preview's document
    show.set_defaults(action=_show)
    diff = actions.add_parser(
        "diff",
        help="what changed between two turns",
        description=(
            "List what differs between turns ID1 and ID2 of LOG: the manifest revision, the "
            "budget, the tokens used, the instruction, and per provider its outcome, tokens "
            "and block (`~` changed, `+` only in ID2, `-` only in ID1); with kept text, the "
            "lines of a block that changed. Exit 0, or 1 when a turn is not found."
        ),
    )
    _location(diff)
    diff.add_argument("first", metavar="ID1")
    diff.add_argument("second", metavar="ID2")
    diff.set_defaults(action=_diff)


def run(args: argparse.Namespace, output: Output) -> int:
    action: Callable[[argparse.Namespace, Output], int] = args.action
    return action(args, output)


def _list(args: argparse.Namespace, output: Output) -> int:
    from composer.errors import AuditReadError
    from composer.inspect.turns import list_line, newest_turns
    from composer.observe.audit.reader import MAX_LIMIT

    if not 1 <= args.limit <= MAX_LIMIT:
        output.error(f"composer audit list: --limit must be 1 to {MAX_LIMIT}")
        return USAGE
    try:
        lines, total, skipped = newest_turns(
            _log(args.file),
            args.limit,
            schema=args.schema,
            branch=args.branch,
            principal=args.principal,
        )
    except AuditReadError as e:
        output.error(f"composer audit: {e}")
        if args.json:
            _print_listing(args, output, None, None, [], str(e))
        return FAILURE
    _skipped(args.file, skipped, output)
    if args.json:
        _print_listing(args, output, lines, total, skipped)
        return SUCCESS
    for line in lines:
        output.print(list_line(line))
    shown = f"the newest {len(lines)} of " if len(lines) < total else ""
    output.print(f"# {shown}{total} {'turn' if total == 1 else 'turns'}")
    return SUCCESS


def _print_listing(
    args: argparse.Namespace,
    output: Output,
    lines: list[AuditLine] | None,
    total: int | None,
    skipped: list[tuple[int, str]],
    error: str | None = None,
) -> None:
    """``audit list`` as ``composer.inspect.documents.AuditListDocument``."""
    from composer.cli.output import print_document
    from composer.inspect.documents import (
        AuditListDocument,
        ListedProvider,
        ListedTurn,
        SkippedLine,
        diagnostic,
    )
    from composer.observe.audit.reader import shown

    turns = None
    if lines is not None:
        turns = [
            ListedTurn(
                time=line.time,
                turn_id=line.turn_id,
                branch_id=line.branch.id,
                branch_name=line.branch.name,
                principal=line.branch.principal,
                tokens_used=line.tokens_used,
                budget=line.budget,
                providers=[ListedProvider(name=p.name, outcome=p.outcome) for p in line.providers],
                instruction=line.instruction.text if line.instruction is not None else None,
            )
            for line in lines
        ]
    document = AuditListDocument(
        log=shown(args.file),
        total=total,
        turns=turns,
        skipped=[SkippedLine(line=number, problem=problem) for number, problem in skipped],
        errors=[] if error is None else [diagnostic(None, error)],
    )
    print_document(output, document)


def _show(args: argparse.Namespace, output: Output) -> int:
    from composer.cli.output import print_document
    from composer.cli.tables import print_preview
    from composer.inspect.preview import PreviewDocument
    from composer.inspect.turns import branch_label, preview_of

    turn = args.turn
    if args.turn_option is not None:
        if turn is not None:
            output.error("composer audit show: give the turn once: composer audit show LOG ID")
            return USAGE
        output.warning(
            "composer audit show: --turn is deprecated and will be removed: "
            "give the turn after LOG (composer audit show LOG ID)"
        )
        turn = args.turn_option
    line = _turn(args, turn, output)
    if line is None:
        return FAILURE
    preview = preview_of(line)
    shown = line.manifest.path or "(unknown manifest)"
    if args.json:
        document = PreviewDocument.of(preview, manifest=shown, env=line.manifest.env)
        print_document(output, document)
        return SUCCESS
    unanswered = "" if line.answered else " (unanswered: the client got a 503 and retried)"
    output.print(
        f"turn: {line.turn_id} at {line.time}, branch {branch_label(line.branch)}{unanswered}"
    )
    # The line was masked when it was written: nothing is left to redact (no secret known).
    print_preview(preview, shown, line.manifest.env, output)
    return SUCCESS


def _diff(args: argparse.Namespace, output: Output) -> int:
    from composer.inspect.turns import describe_changes

    first = _turn(args, args.first, output)
    second = _turn(args, args.second, output)
    if first is None or second is None:
        return FAILURE
    changes = describe_changes(first, second)
    count = sum(1 for change in changes if not change.startswith(" "))  # not a block's lines
    noun = "difference" if count == 1 else "differences"
    output.print(f"# turn {first.turn_id} -> turn {second.turn_id}: {count} {noun}")
    for change in changes:
        output.print(change)
    return SUCCESS


def _turn(args: argparse.Namespace, turn: str | None, output: Output) -> AuditLine | None:
    """The turn of the log named by ``turn`` (the newest when None), or None after saying
    why not (the log's location masked)."""
    from composer.errors import AuditReadError
    from composer.observe.audit.reader import find_turn, shown

    try:
        line, skipped = find_turn(_log(args.file), turn, schema=args.schema)
    except AuditReadError as e:
        output.error(f"composer audit: {e}")
        return None
    except LookupError as e:
        output.error(f"composer audit: {shown(args.file)}: {e.args[0]}")
        return None
    _skipped(args.file, skipped, output)
    return line


def _log(location: str) -> str | Path:
    """A DSN as given, anything else a file's path."""
    from composer.observe.audit.reader import is_dsn

    return location if is_dsn(location) else Path(location)


def _skipped(location: str, skipped: list[tuple[int, str]], output: Output) -> None:
    from composer.observe.audit.reader import shown

    for number, problem in skipped:
        output.warning(f"composer audit: {shown(location)}:{number}: {problem}; skipped")
