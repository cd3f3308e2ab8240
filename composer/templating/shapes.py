"""The shape of what a template sees, and a load-time check of the attributes it reads.

A template's variables are plain data (``template_context``): mappings with known keys,
lists of them, strings, numbers. ``{{ instruction.txt }}`` or ``{{ hit.pth }}`` compiles, and
fails only when a turn renders it (``StrictUndefined``); knowing the shapes, the loader can
say so at the line and column of the template. ``check_shapes`` walks a parsed template,
following loops (``{% for hit in hits %}`` gives ``hit`` the item shape of ``hits``), and
raises ``TemplateError`` for the first attribute or key that cannot exist, with the
closest name that does. Anything it cannot follow (a filter's result, a ``{% set %}`` name,
a name given no shape) is taken to be anything: the check only says what is certain, and
``is defined`` or ``|default`` guard the attribute they test, as they do when rendering.
"""

from __future__ import annotations

import datetime as _dt
import difflib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from jinja2 import nodes

from composer.errors import TemplateError

__all__ = ["ANY", "TemplateShape", "check_shapes"]

_LOOP_NAMES = frozenset({"loop", "caller", "varargs", "kwargs"})
# Filters whose result is the list they were given (or part of it), or one of its items.
_SAME_LIST = frozenset(
    {"list", "sort", "reverse", "unique", "select", "reject", "selectattr", "rejectattr"}
)
_ONE_ITEM = frozenset({"first", "last", "random"})
_GUARDS = frozenset({"defined", "undefined"})
_DEFAULT_FILTERS = frozenset({"default", "d"})


@dataclass(frozen=True, eq=False)
class TemplateShape:
    """What a template variable holds: anything, a mapping of known keys (``record``), a
    mapping of any keys, a list of one shape, or a value of given Python types.

    Compared and hashed by identity: compiled templates are cached by their arguments, shapes
    among them, and a structural hash would walk every shape on every lookup.
    """

    kind: str  # "any", "record", "mapping", "list", "value"
    fields: tuple[tuple[str, TemplateShape], ...] = ()
    item: TemplateShape | None = None
    types: tuple[type, ...] = ()

    @classmethod
    def record(cls, **fields: TemplateShape) -> TemplateShape:
        """A mapping with exactly these keys (a ``dict`` in the template context)."""
        return cls("record", fields=tuple(fields.items()))

    @classmethod
    def list_of(cls, item: TemplateShape) -> TemplateShape:
        return cls("list", item=item)

    @classmethod
    def mapping(cls) -> TemplateShape:
        """A mapping whose keys are not known (metadata): any key may be read."""
        return cls("mapping")

    @classmethod
    def anything(cls) -> TemplateShape:
        """A value nothing is known about (``ANY``)."""
        return cls("any")

    @classmethod
    def of(cls, *types: type | None) -> TemplateShape:
        """A value of one of ``types`` (``None`` for null): its attributes are theirs."""
        return cls("value", types=tuple(type(None) if t is None else t for t in types))

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.fields]

    def attribute(self, name: str) -> TemplateShape | None:
        """The shape of ``value.name`` (or ``value["name"]``), None when it cannot exist."""
        if self.kind in ("any", "mapping"):
            return ANY
        if self.kind == "record":
            found = dict(self.fields).get(name)
            if found is not None:
                return found
            return ANY if hasattr(dict, name) and not name.startswith("_") else None
        if self.kind == "list":
            return ANY if hasattr(list, name) else None
        return ANY if any(hasattr(t, name) for t in self.types) else None

    def index(self, key: object) -> TemplateShape | None:
        """The shape of ``value[key]`` for a constant key, None when it cannot exist."""
        if isinstance(key, str):
            return self.attribute(key)
        if self.kind == "list" and isinstance(key, int) and self.item is not None:
            return self.item
        if self.kind == "record" and not isinstance(key, str):
            return None
        return ANY

    def choices(self) -> list[str]:
        """Names that do exist, for a did-you-mean."""
        if self.kind == "record":
            return self.names
        kinds = [list] if self.kind == "list" else list(self.types)
        return sorted({n for t in kinds for n in dir(t) if not n.startswith("_")})

    def describe(self) -> str:
        if self.kind == "record":
            return "has " + ", ".join(self.names) if self.fields else "has no keys"
        if self.kind == "list":
            return "is a list"
        names = [_TYPE_WORDS.get(t, t.__name__) for t in self.types]
        return "is " + " or ".join(names)


ANY = TemplateShape("any")
"""A value nothing is known about: every attribute may exist."""

_TYPE_WORDS: dict[type, str] = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "true or false",
    type(None): "null",
    _dt.datetime: "a datetime",
}


def check_shapes(ast: nodes.Template, shapes: Mapping[str, TemplateShape]) -> None:
    """Raise ``TemplateError`` (with the template line) for the first attribute or key of a
    variable in ``shapes`` that cannot exist."""
    set_anywhere = {
        target.name
        for node in ast.find_all((nodes.Assign, nodes.AssignBlock, nodes.With))
        for target in _targets(node)
    } | {
        arg.name
        for node in ast.find_all((nodes.Macro, nodes.CallBlock))
        if isinstance(node, nodes.Macro | nodes.CallBlock)
        for arg in node.args
    }
    scope = {name: shape for name, shape in shapes.items() if name not in set_anywhere}
    _Checker().statement(ast, scope)


def _targets(node: nodes.Node) -> Iterator[nodes.Name]:
    targets = node.targets if isinstance(node, nodes.With) else [getattr(node, "target", None)]
    for target in targets:
        if isinstance(target, nodes.Name):
            yield target
        elif isinstance(target, nodes.Tuple):
            yield from (item for item in target.items if isinstance(item, nodes.Name))


class _Checker:
    """Walks statements with the shapes in scope; infers expressions' shapes as it goes."""

    def statement(self, node: nodes.Node, scope: dict[str, TemplateShape]) -> None:
        if isinstance(node, nodes.For):
            items = self.expression(node.iter, scope) if isinstance(node.iter, nodes.Expr) else ANY
            inner = dict(scope)
            item = items.item if items.kind == "list" and items.item is not None else ANY
            for name in _names(node.target):
                inner[name] = item if isinstance(node.target, nodes.Name) else ANY
            for name in _LOOP_NAMES:
                inner[name] = ANY
            if isinstance(node.test, nodes.Expr):
                self.expression(node.test, inner)
            for child in node.body:
                self.statement(child, inner)
            for child in node.else_:
                self.statement(child, scope)
            return
        if isinstance(node, nodes.Macro | nodes.CallBlock):
            inner = {**scope, **dict.fromkeys(_LOOP_NAMES, ANY)}
            for arg in node.args:
                inner[arg.name] = ANY
            if isinstance(node, nodes.CallBlock):
                self.expression(node.call, scope)
            for default in node.defaults:
                self.expression(default, scope)
            for child in node.body:
                self.statement(child, inner)
            return
        for child in node.iter_child_nodes():
            if isinstance(child, nodes.Expr):
                self.expression(child, scope)
            else:
                self.statement(child, scope)

    def expression(
        self, node: nodes.Expr, scope: Mapping[str, TemplateShape], *, check: bool = True
    ) -> TemplateShape:
        """The shape of ``node``; with ``check``, an attribute that cannot exist raises."""
        if isinstance(node, nodes.Name):
            return scope.get(node.name, ANY)
        if isinstance(node, nodes.Const):
            return TemplateShape.of(type(node.value))
        if isinstance(node, nodes.Getattr):
            return self.step(node, node.node, node.attr, scope, check=check)
        if isinstance(node, nodes.Getitem):
            if isinstance(node.arg, nodes.Const):
                return self.step(node, node.node, node.arg.value, scope, check=check)
            base = self.expression(node.node, scope, check=check)
            self.expression(node.arg, scope, check=check)
            return base if isinstance(node.arg, nodes.Slice) and base.kind == "list" else ANY
        if isinstance(node, nodes.Test) and node.name in _GUARDS:
            self.guarded(node.node, scope, check=check)
            self.rest(node, node.node, scope, check=check)
            return ANY
        if isinstance(node, nodes.Filter):
            if node.node is None:
                self.rest(node, None, scope, check=check)
                return ANY
            if node.name in _DEFAULT_FILTERS:
                self.guarded(node.node, scope, check=check)
                self.rest(node, node.node, scope, check=check)
                return ANY
            base = self.expression(node.node, scope, check=check)
            self.rest(node, node.node, scope, check=check)
            if base.kind == "list" and node.name in _SAME_LIST:
                return base
            if base.kind == "list" and node.name in _ONE_ITEM and base.item is not None:
                return base.item
            return ANY
        self.rest(node, None, scope, check=check)
        return ANY

    def rest(
        self,
        node: nodes.Node,
        skip: nodes.Node | None,
        scope: Mapping[str, TemplateShape],
        *,
        check: bool,
    ) -> None:
        """Check every sub-expression of ``node`` but ``skip``."""
        for child in node.iter_child_nodes():
            if child is skip:
                continue
            if isinstance(child, nodes.Expr):
                self.expression(child, scope, check=check)
            else:
                for grandchild in child.iter_child_nodes():
                    if isinstance(grandchild, nodes.Expr):
                        self.expression(grandchild, scope, check=check)

    def guarded(self, node: nodes.Expr, scope: Mapping[str, TemplateShape], *, check: bool) -> None:
        """``x.y is defined``, ``x.y | default(...)``: ``y`` may be missing; ``x`` may not."""
        if isinstance(node, nodes.Getattr | nodes.Getitem):
            self.expression(node.node, scope, check=check)
            if isinstance(node, nodes.Getitem):
                self.expression(node.arg, scope, check=check)
        else:
            self.expression(node, scope, check=check)

    def step(
        self,
        node: nodes.Expr,
        base_node: nodes.Expr,
        key: object,
        scope: Mapping[str, TemplateShape],
        *,
        check: bool,
    ) -> TemplateShape:
        base = self.expression(base_node, scope, check=check)
        found = base.index(key)
        if found is not None:
            return found
        if check:
            name = _shown(base_node)
            hint = ""
            if isinstance(key, str):
                close = difflib.get_close_matches(key, base.choices(), n=1, cutoff=0.6)
                hint = f' (did you mean "{close[0]}"?)' if close else ""
            what = f'attribute "{key}"' if isinstance(key, str) else f"item [{key!r}]"
            raise TemplateError(
                f"{name} has no {what}{hint}; {name} {base.describe()}",
                lineno=node.lineno,
            )
        return ANY


def _names(target: nodes.Node) -> list[str]:
    if isinstance(target, nodes.Name):
        return [target.name]
    if isinstance(target, nodes.Tuple):
        return [name for item in target.items for name in _names(item)]
    return []


def _shown(node: nodes.Node) -> str:
    """``node`` as the template wrote it, for a name and attribute chain; else "the value"."""
    if isinstance(node, nodes.Name):
        return node.name
    if isinstance(node, nodes.Getattr):
        return f"{_shown(node.node)}.{node.attr}"
    if isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const):
        return f"{_shown(node.node)}[{node.arg.value!r}]"
    return "the value"
