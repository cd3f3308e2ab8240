"""The manifest, command-line and JSON output references in Markdown, generated from the code.

The manifest reference comes from the pydantic models, the command reference from the
``composer`` argument parser, the JSON output reference from the models of the documents
``--json`` prints: the documentation pages hold this module's output between markers (a test
compares them), so the documented fields, types, defaults and options cannot drift from the
code. ``python -m composer.cli.reference [PAGE ...]`` rewrites the blocks.
"""

from __future__ import annotations

import argparse
import re
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from composer.catalog import ProviderTypes
from composer.inspect import documents
from composer.inspect.preview import PreviewDocument
from composer.manifest import Manifest, ProviderConfig

__all__ = [
    "CLI_END",
    "CLI_START",
    "END",
    "JSON_DOCUMENTS",
    "PAGES",
    "START",
    "cli_reference",
    "json_markers",
    "json_reference",
    "markdown_reference",
    "refresh",
    "with_cli_reference",
    "with_json_reference",
    "with_reference",
]

_NAMES = {str: "string", int: "integer", float: "number", bool: "boolean", Path: "path"}


def _type_name(annotation: Any, *, named: bool = False) -> str:
    """How the reference writes a field's type; with ``named``, a model by its name."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0], named=named)
    if origin is typing.Literal:
        return " \\| ".join(repr(a) if isinstance(a, str) else str(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        names = [_type_name(a, named=named) for a in args if a is not type(None)]
        suffix = " or null" if type(None) in args else ""
        return " \\| ".join(names) + suffix
    if origin in (list, tuple, set, frozenset):
        return f"list of {_type_name(args[0], named=named)}" if args else "list"
    if origin is dict:
        return f"mapping of {_type_name(args[1], named=named)}" if len(args) == 2 else "mapping"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if named:
            return f"`{annotation.__name__}`"
        return "mapping (below)" if annotation.model_fields else "mapping"
    if annotation is typing.Any:
        return "any"
    return _NAMES.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _default(field: Any) -> str:
    if field.is_required():
        return "required"
    value = field.default_factory() if field.default_factory is not None else field.default
    if isinstance(value, BaseModel):
        return "see below" if type(value).model_fields else "`{}`"
    if value is None or value is PydanticUndefined:
        return "null"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value!r}`"


def _nested(annotation: Any) -> list[type[BaseModel]]:
    found: list[type[BaseModel]] = []
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    for arg in typing.get_args(annotation):
        found.extend(_nested(arg))
    return found


def _described(field: Any) -> str:
    return " ".join((field.description or "").split()).replace("|", "\\|")


def _table(model: type[BaseModel], prefix: str, skip: set[str]) -> list[str]:
    lines = ["| field | type | default | meaning |", "| --- | --- | --- | --- |"]
    below: list[tuple[str, type[BaseModel]]] = []
    for name, field in model.model_fields.items():
        if name in skip:
            continue
        key = f"{prefix}{field.alias or name}"
        default = _default(field).replace("|", "\\|")
        lines.append(
            f"| `{key}` | {_type_name(field.annotation)} | {default} | {_described(field)} |"
        )
        below.extend((f"{key}.", sub) for sub in _nested(field.annotation) if sub.model_fields)
    for sub_prefix, sub in below:
        lines += ["", *_table(sub, sub_prefix, set())]
    return lines


def markdown_reference(provider_types: ProviderTypes | None = None) -> str:
    """Markdown tables: the manifest's keys, the keys every provider has, then each type's own."""
    provider_types = provider_types if provider_types is not None else ProviderTypes.installed()
    common = set(ProviderConfig.model_fields) - {"type"}
    lines = ["## Manifest", "", *_table(Manifest, "", {"providers"})]
    lines += ["", "## Every provider", "", *_table(ProviderConfig, "", {"type"})]
    for ptype in provider_types:
        doc = " ".join((ptype.config.__doc__ or ptype.summary).split())
        lines += ["", f"## `type: {ptype.name}`", "", doc, ""]
        lines += _table(ptype.config, "", common | {"type"})
    return "\n".join(lines) + "\n"


START, END = "<!-- reference:start -->", "<!-- reference:end -->"
CLI_START, CLI_END = "<!-- cli:start -->", "<!-- cli:end -->"

JSON_DOCUMENTS: dict[str, type[BaseModel]] = {
    "validate": documents.ValidateDocument,
    "preview": PreviewDocument,
    "render": documents.RenderDocument,
    "diff": documents.DiffDocument,
    "test": documents.TestDocument,
    "eval": documents.EvalDocument,
    "audit-list": documents.AuditListDocument,
    "memory-stats": documents.MemoryStatsDocument,
}
"""The document each ``--json`` prints, by the name of its block in the JSON reference
(``audit show`` prints preview's)."""

PAGES = (
    Path("docs/reference/manifest.md"),
    Path("docs/reference/cli.md"),
    Path("docs/reference/json.md"),
)
"""The pages that hold the generated blocks, relative to the repository's root."""


def _between(page: str, start: str, end: str, block: str) -> str:
    head, found, rest = page.partition(start)
    if not found:
        return page
    _, _, tail = rest.partition(end)
    return f"{head}{start}\n{block}{end}{tail}"


def with_reference(page: str, reference: str) -> str:
    """``page`` with the text between the manifest reference markers replaced by ``reference``."""
    return _between(page, START, END, reference)


def with_cli_reference(page: str, reference: str) -> str:
    """``page`` with the text between the command reference markers replaced by ``reference``."""
    return _between(page, CLI_START, CLI_END, reference)


def json_markers(name: str) -> tuple[str, str]:
    """The markers around the table of the document ``name`` (a key of ``JSON_DOCUMENTS``)."""
    return f"<!-- json:{name}:start -->", f"<!-- json:{name}:end -->"


_SHARED_PARTS = (documents.Location, documents.Diagnostic)
"""Parts of several documents, described once (block ``parts``)."""


def json_reference(name: str) -> str:
    """Markdown: the document ``name`` (or ``parts``, the shared parts), then each part it
    holds, one table each, a part named by its model."""
    found: list[type[BaseModel]] = (
        list(_SHARED_PARTS) if name == "parts" else [JSON_DOCUMENTS[name]]
    )
    for model in found:  # grows as it goes: each part's parts
        for field in model.model_fields.values():
            found += [
                sub
                for sub in _nested(field.annotation)
                if sub not in found and sub not in _SHARED_PARTS
            ]
    lines: list[str] = []
    for model in found:
        summary = " ".join((model.__doc__ or "").split())
        lines += [f"`{model.__name__}`" + (f": {summary}" if summary else ""), ""]
        lines += ["| field | type | meaning |", "| --- | --- | --- |"]
        lines += [
            f"| `{field.alias or key}` | {_type_name(field.annotation, named=True)} | "
            f"{_described(field)} |"
            for key, field in model.model_fields.items()
        ]
        lines.append("")
    return "\n".join(lines)


def with_json_reference(page: str) -> str:
    """``page`` with the table of each document it has markers for regenerated."""
    for name in [*JSON_DOCUMENTS, "parts"]:
        page = _between(page, *json_markers(name), json_reference(name))
    return page


# ------------------------------------------------------------------ the command reference


def _markdown(text: str) -> str:
    """Help text as Markdown prose: one line, and outside `code` nothing Markdown would eat
    (``<env>`` is not an HTML tag, ``*`` not emphasis, ``|`` not a table cell)."""
    parts = " ".join(text.split()).split("`")
    for i in range(0, len(parts), 2):  # the even parts are outside backticks
        parts[i] = re.sub(r"([*_|\\[\]])", r"\\\1", parts[i]).replace("<", "&lt;")
    return "`".join(parts)


def _arguments(action: argparse.Action, formatter: argparse.HelpFormatter) -> str:
    """How the argument is written, as ``--help`` writes it: ``--env ENV``, ``MANIFEST``."""
    if not action.option_strings:
        return formatter._format_args(action, formatter._get_default_metavar_for_positional(action))
    if action.nargs == 0:
        return ", ".join(action.option_strings)
    value = formatter._format_args(action, formatter._get_default_metavar_for_optional(action))
    return ", ".join(f"{option} {value}" for option in action.option_strings)


def _help(action: argparse.Action, formatter: argparse.HelpFormatter) -> str:
    """The argument's help with ``%(default)s`` and the like filled in, as ``--help`` shows it."""
    return formatter._expand_help(action) if action.help else ""


def _commands(
    parser: argparse.ArgumentParser,
) -> Iterator[tuple[str, list[str], str, argparse.ArgumentParser]]:
    """Each subcommand of ``parser``: its name, its aliases, its summary and its parser."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            by_parser: dict[int, list[str]] = {}
            for name, sub in action._name_parser_map.items():
                by_parser.setdefault(id(sub), []).append(name)
            for choice in action._choices_actions:
                sub = action._name_parser_map[choice.dest]
                aliases = [n for n in by_parser[id(sub)] if n != choice.dest]
                yield choice.dest, aliases, choice.help or "", sub


def _command_section(
    name: str, aliases: list[str], summary: str, parser: argparse.ArgumentParser, level: int
) -> list[str]:
    title = f"`{name}`" + "".join(f" (also `{a}`)" for a in aliases)
    lines = [f"{'#' * level} {title}", "", _markdown(parser.description or summary), ""]
    formatter = parser._get_formatter()
    rows = [
        f"| `{_arguments(action, formatter)}` | {_markdown(_help(action, formatter))} |"
        for action in parser._actions
        if action.help != argparse.SUPPRESS
        and not isinstance(action, argparse._HelpAction | argparse._SubParsersAction)
    ]
    if rows:
        lines += ["| argument | meaning |", "| --- | --- |", *rows, ""]
    if parser.epilog:
        lines += ["```text", parser.epilog.strip("\n"), "```", ""]
    for sub_name, sub_aliases, sub_summary, sub in _commands(parser):
        lines += _command_section(f"{name} {sub_name}", sub_aliases, sub_summary, sub, level + 1)
    return lines


def cli_reference(parser: argparse.ArgumentParser | None = None) -> str:
    """Markdown: each command of ``composer`` (and each of its subcommands) with what
    ``--help`` says of it and of every argument it takes."""
    from composer.cli.main import build_parser  # here: main imports the commands

    lines: list[str] = []
    for name, aliases, summary, sub in _commands(parser if parser is not None else build_parser()):
        lines += _command_section(f"composer {name}", aliases, summary, sub, 3)
    return "\n".join(lines).rstrip("\n") + "\n"


def refresh(page: Path) -> None:
    """Rewrite the generated blocks ``page`` holds (either or both), leaving the rest."""
    text = page.read_text(encoding="utf-8")
    if START in text:
        text = with_reference(text, markdown_reference())
    if CLI_START in text:
        text = with_cli_reference(text, cli_reference())
    text = with_json_reference(text)
    page.write_text(text, encoding="utf-8")


if __name__ == "__main__":  # python -m composer.cli.reference [PAGE ...]: refresh the pages
    import sys

    for target in [Path(arg) for arg in sys.argv[1:]] or list(PAGES):
        refresh(target)
