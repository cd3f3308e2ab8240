"""The manifest reference in Markdown, generated from the pydantic models themselves.

The README's reference section is this function's output (a test compares them), so the
documented fields, types and defaults cannot drift from the code.
"""

from __future__ import annotations

import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from composer.catalog import ProviderTypes
from composer.manifest import Manifest, ProviderConfig

__all__ = ["END", "START", "markdown_reference", "with_reference"]

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
    lines = ["### Manifest", "", *_table(Manifest, "", {"providers"})]
    lines += ["", "### Every provider", "", *_table(ProviderConfig, "", {"type"})]
    for ptype in provider_types:
        doc = " ".join((ptype.config.__doc__ or ptype.summary).split())
        lines += ["", f"### `type: {ptype.name}`", "", doc, ""]
        lines += _table(ptype.config, "", common | {"type"})
    return "\n".join(lines) + "\n"


START, END = "<!-- reference:start -->", "<!-- reference:end -->"


def with_reference(readme: str, reference: str) -> str:
    """``readme`` with the text between the reference markers replaced by ``reference``."""
    head, _, rest = readme.partition(START)
    _, _, tail = rest.partition(END)
    return f"{head}{START}\n{reference}{END}{tail}"


if __name__ == "__main__":  # python -m composer.cli.reference README.md: refresh the README section
    import sys

    target = Path(sys.argv[1] if len(sys.argv) > 1 else "README.md")
    target.write_text(with_reference(target.read_text(), markdown_reference()))
