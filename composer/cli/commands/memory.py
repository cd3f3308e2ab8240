"""``composer memory import|export|stats``: move memory items between stores, with counts checked.

A store is named by a short spec (``composer.inspect.stores``): a path ending in ``.jsonl``,
``.sqlite``, ``.sqlite3`` or ``.db``, ``jsonl:PATH``, ``sqlite:PATH``, or a ``postgresql://``
URL (keep its password out of the command line: libpq reads ``PGPASSWORD`` and
``~/.pgpass``), each kind opened through its ``composer.stores`` entry point. Items keep
their ids, so importing the same items twice adds nothing, and their ``written_back`` flag and
``created_at``, so imported agent results are still the first a cap evicts; after an import
every item read must be found in the target, else exit 1. Only an import's TARGET (and an
export's OUTPUT file) is ever created: a store read that is not there (a mistyped path or
``--schema``) is an error, checked before anything is opened for writing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from composer.cli.exit_codes import FAILURE, SUCCESS, USAGE
from composer.cli.options import add_json
from composer.inspect.words import counted

if TYPE_CHECKING:
    from composer.cli.output import Output
    from composer.inspect.stores import Store

__all__ = ["DESCRIPTION", "add_arguments", "run"]

_STORE_HELP = "a .jsonl, .sqlite or .db path, jsonl:PATH, sqlite:PATH, or a postgresql:// URL"

DESCRIPTION = (
    "Move memory items between stores, ids kept, and count them. A STORE is "
    f"{_STORE_HELP}. Exit 1 when a store fails or a count does not add up."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(metavar="ACTION", required=True)
    schema = argparse.ArgumentParser(add_help=False)
    schema.add_argument(
        "--schema", default="composer", help="the PostgreSQL schema (default: composer)"
    )

    importing = actions.add_parser(
        "import",
        parents=[schema],
        help="copy the items of SOURCE into TARGET",
        description=(
            "Copy the live items of SOURCE into TARGET (created if need be), with their ids, "
            "tags, metadata, times and written-back flag. Items whose id TARGET already holds "
            "(in the same namespace) are left as they are. SOURCE must exist, and be read "
            "whole (a broken line fails the import, naming it, before anything is written). "
            "Then every item read is looked for in TARGET: exit 1 if any is missing."
        ),
    )
    importing.add_argument("source", metavar="SOURCE", help=_STORE_HELP)
    importing.add_argument("target", metavar="TARGET", help=_STORE_HELP)
    importing.add_argument(
        "--namespace", help="only the items of this namespace (default: every namespace)"
    )
    importing.add_argument("--into", help="store them in this namespace instead of their own")
    importing.set_defaults(action=_import)

    exporting = actions.add_parser(
        "export",
        parents=[schema],
        help="write the items of STORE as JSONL",
        description=(
            "Write the live items of STORE, one JSON object per line (id, content, tags, "
            "metadata, namespace, expires_at, written_back, created_at), to OUTPUT (a .jsonl "
            "file, appended to, ids already there skipped) or to standard output. The count "
            "goes to standard error. STORE must exist (it is never created)."
        ),
    )
    exporting.add_argument("store", metavar="STORE", help=_STORE_HELP)
    exporting.add_argument("output", metavar="OUTPUT", nargs="?", default="-")
    exporting.add_argument("--namespace", help="only this namespace (default: every namespace)")
    exporting.set_defaults(action=_export)

    stats = actions.add_parser(
        "stats",
        parents=[schema],
        help="count the live items of STORE per namespace",
        description="Count the live (unexpired) items of STORE, per namespace. STORE must "
        "exist (it is never created).",
    )
    stats.add_argument("store", metavar="STORE", help=_STORE_HELP)
    add_json(stats)
    stats.set_defaults(action=_stats)


def run(args: argparse.Namespace, output: Output) -> int:
    from composer.errors import ComposerError

    action: Callable[[argparse.Namespace, Output, list[Store]], Awaitable[int]] = args.action
    opened: list[Store] = []

    async def act() -> int:
        try:
            return await action(args, output, opened)
        finally:
            for store in opened:
                await store.aclose()

    from composer.cli.logs import log_records_to
    from composer.manifest import redact
    from composer.manifest.dsn import dsn_secrets

    specs = [getattr(args, name, None) for name in ("store", "source", "target")]
    mask = [secret for spec in specs if spec for secret in dsn_secrets(spec)]
    try:
        import asyncio  # here: --help and --version do not pay for it

        # a driver's retries (psycopg_pool logs each refused connection): one masked line;
        # a store's own warnings (a broken line) are this command's errors, said once
        ours = ("composer", "builtin_providers")
        with log_records_to(output, lambda text: redact(text, mask), ignore=ours):
            return asyncio.run(act())
    except ValueError as e:
        output.error(f"composer memory: {e}")
        _print_failure(args, output, str(e))
        return USAGE
    except ComposerError as e:
        output.error(f"composer memory: {e}")
        _print_failure(args, output, str(e))
        return FAILURE


def _print_failure(args: argparse.Namespace, output: Output, error: str) -> None:
    """With ``stats --json``, the document of a store that could not be read."""
    if getattr(args, "json", False):
        from composer.cli.output import print_document
        from composer.inspect.documents import MemoryStatsDocument, diagnostic

        document = MemoryStatsDocument(
            store=None, items=None, namespaces=None, errors=[diagnostic(None, error)]
        )
        print_document(output, document)


def _open(spec: str, args: argparse.Namespace, opened: list[Store]) -> Store:
    from composer.inspect.stores import open_store

    store = open_store(spec, schema=args.schema)
    opened.append(store)
    return store


async def _existing(spec: str, args: argparse.Namespace, opened: list[Store]) -> Store:
    """The store ``spec`` names, which must be there already: reading one that is not would
    create it (an empty file, a schema), and report 0 items of a mistyped name."""
    from composer.errors import PluginError, StoreError

    store = _open(spec, args, opened)
    exists = getattr(store, "exists", None)
    if exists is None:
        raise PluginError(
            f"memory store {_shown(store)} has no exists(), which composer memory needs to "
            "read it without creating it: upgrade the package that provides its kind"
        )
    if await exists():
        return store
    if getattr(store, "path", None) is None:
        fix = f"check the database in the URL and --schema (here {args.schema!r})"
    else:
        fix = "check the path"
    raise StoreError(
        f"no memory store at {_shown(store)}: {fix}; nothing was created "
        "(only `composer memory import` creates a store, its TARGET)"
    )


def _shown(store: Store) -> str:
    """A store as messages name it: its path, or its own repr (a database's host and name,
    never a password)."""
    path = getattr(store, "path", None)
    return repr(store) if path is None else str(path)


def _record(item: Any) -> dict[str, Any]:
    """The JSON object of one exported item: the fields of a JSONL store's line (a test
    holds the two equal), ``namespace``, ``expires_at``, ``written_back`` and ``created_at``
    only when set."""
    record: dict[str, Any] = {
        "id": str(item.id),
        "content": item.content,
        "tags": list(item.tags or []),
        "metadata": dict(item.metadata or {}),
    }
    if item.namespace:
        record["namespace"] = str(item.namespace)
    if item.expires_at is not None:
        record["expires_at"] = float(item.expires_at)
    if getattr(item, "written_back", False) is True:
        record["written_back"] = True
    created = getattr(item, "created_at", None)
    if isinstance(created, int | float) and not isinstance(created, bool):
        record["created_at"] = float(created)
    return record


async def _missing(items: list[Any], target: Store) -> int:
    """How many of ``items`` the target does not hold (by namespace and id)."""
    held = {(item.namespace, item.id) for item in await target.export()}
    return sum(1 for item in items if (item.namespace, item.id) not in held)


def _namespaces(counts: dict[str, int]) -> str:
    return ", ".join(f"{name or '(default)'}: {n}" for name, n in sorted(counts.items()))


async def _read_items(
    spec: str, args: argparse.Namespace, opened: list[Store], done: str
) -> tuple[Store, list[Any]]:
    """The existing store at ``spec`` and its items in ``--namespace``; a store that fails
    to read says that nothing was ``done``."""
    from composer.errors import StoreError

    store = await _existing(spec, args, opened)
    try:
        return store, await store.export(args.namespace)
    except StoreError as e:
        raise StoreError(f"{e}; nothing was {done}") from e


async def _import(args: argparse.Namespace, output: Output, opened: list[Store]) -> int:
    source, items = await _read_items(args.source, args, opened, "imported")
    target = _open(args.target, args, opened)
    if args.into is not None:
        items = [dataclasses.replace(item, namespace=args.into) for item in items]
    before = sum((await target.counts()).values())
    added = await target.add(items)
    missing = await _missing(items, target)
    after = await target.counts()
    output.print(
        f"read {counted(len(items), 'item')} from {_shown(source)}; added {added}, "
        f"{len(items) - added} already there"
    )
    output.print(f"{_shown(target)}: {counted(sum(after.values()), 'item')} ({_namespaces(after)})")
    if missing:
        output.error(f"composer memory: {missing} of the items read are not in the target")
        return FAILURE
    if sum(after.values()) < before + added:
        output.error(
            f"composer memory: the target holds {sum(after.values())} items, fewer than the "
            f"{before} before plus the {added} added (expired or deleted meanwhile?)"
        )
        return FAILURE
    return SUCCESS


async def _export(args: argparse.Namespace, output: Output, opened: list[Store]) -> int:
    store, items = await _read_items(args.store, args, opened, "exported")
    if args.output == "-":
        for item in items:
            output.json(json.dumps(_record(item), ensure_ascii=False, default=str))
        output.warning(f"exported {counted(len(items), 'item')} from {_shown(store)}")
        return SUCCESS
    target = _open(f"jsonl:{args.output}", args, opened)
    added = await target.add(items)
    output.print(
        f"exported {counted(len(items), 'item')} from {_shown(store)} to {args.output}: added {added}, "
        f"{len(items) - added} already there"
    )
    missing = await _missing(items, target)
    if missing:
        output.error(f"composer memory: {missing} of the items exported are not in the file")
        return FAILURE
    return SUCCESS


_SHOWN_SKIPPED = 10
"""Skipped lines ``stats`` names one by one; past them, one line counts the rest."""


async def _stats(args: argparse.Namespace, output: Output, opened: list[Store]) -> int:
    import asyncio

    store = await _existing(args.store, args, opened)
    counts = await store.counts()
    broken_lines = getattr(store, "broken_lines", None)  # a JSONL file's lines a read skips
    skipped: list[tuple[int, str]] = (
        await asyncio.to_thread(broken_lines) if broken_lines is not None else []
    )
    if args.json:
        from composer.cli.output import print_document
        from composer.inspect.documents import MemoryStatsDocument, SkippedLine

        document = MemoryStatsDocument(
            store=_shown(store),
            items=sum(counts.values()),
            namespaces={name or "": n for name, n in sorted(counts.items())},
            errors=[],
            skipped=[SkippedLine(line=number, problem=why) for number, why in skipped],
        )
        print_document(output, document)
        return SUCCESS
    output.print(
        f"{_shown(store)}: {counted(sum(counts.values()), 'item')} in "
        f"{counted(len(counts), 'namespace')}"
    )
    for name, n in sorted(counts.items()):
        output.print(f"  {name or '(default)'}: {n}")
    for number, why in skipped[:_SHOWN_SKIPPED]:
        output.warning(f"{_shown(store)}:{number}: {why}; skipped, not counted")
    if len(skipped) > _SHOWN_SKIPPED:
        more = len(skipped) - _SHOWN_SKIPPED
        output.warning(f"{_shown(store)}: {counted(more, 'more line')} skipped, not counted")
    return SUCCESS
