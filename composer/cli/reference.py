"""The manifest and command-line references in Markdown, generated from the code itself.

The manifest reference comes from the pydantic models, the command reference from the
``composer`` argument parser: the documentation pages hold this module's output between
markers (a test compares them), so the documented fields, types, defaults and options cannot
drift from the code. ``python -m composer.cli.reference [PAGE ...]`` rewrites the blocks.
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
from composer.manifest import Manifest, ProviderConfig

__all__ = [
    "CLI_END",
    "CLI_START",
    "END",
    "PAGES",
    "START",
    "cli_reference",
    "markdown_reference",
    "refresh",
    "with_cli_reference",
    "with_reference",
]

_NAMES = {str: "string", int: "integer", float: "number", bool: "boolean", Path: "path"}


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is typing.Literal:
        return " \\| ".join(repr(a) if isinstance(a, str) else str(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        names = [_type_name(a) for a in args if a is not type(None)]
        suffix = " or null" if type(None) in args else ""
        return " \\| ".join(names) + suffix
    if origin in (list, tuple, set, frozenset):
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        return f"mapping of {_type_name(args[1])}" if len(args) == 2 else "mapping"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
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


def _table(model: type[BaseModel], prefix: str, skip: set[str]) -> list[str]:
    lines = ["| field | type | default | meaning |", "| --- | --- | --- | --- |"]
    below: list[tuple[str, type[BaseModel]]] = []
    for name, field in model.model_fields.items():
        if name in skip:
            continue
        description = " ".join((field.description or "").split()).replace("|", "\\|")
        key = f"{prefix}{field.alias or name}"
        default = _default(field).replace("|", "\\|")
        lines.append(f"| `{key}` | {_type_name(field.annotation)} | {default} | {description} |")
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

PAGES = (Path("docs/reference/manifest.md"), Path("docs/reference/cli.md"))
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
    page.write_text(text, encoding="utf-8")


if __name__ == "__main__":  # python -m composer.cli.reference [PAGE ...]: refresh the pages
    import sys

    for target in [Path(arg) for arg in sys.argv[1:]] or list(PAGES):
        refresh(target)
