"""A merged manifest tree as the plain values the models validate, each knowing its origin.

Strings become ``SourceStr`` (``Secret`` when a variable's value went in), so a template or a
message can say where it was written; every value's ``Origin`` is kept by key path for the
``Manifest``; ``${VAR}`` is substituted as each string is built (``interpolation``) and what
that finds is recorded here: the variables used, the values that are secrets, the problems
(located), and which scalars could not be resolved, for the validation errors to explain.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from composer.errors import ManifestError
from composer.manifest.interpolation import substitute
from composer.manifest.placeholders import Placeholders
from composer.manifest.source import KeyPath, Origin, Secret, SourceStr, VariableUse
from composer.manifest.yamlnodes import Node, Scalar, Seq, core_value, scalar_at

__all__ = ["Values"]


class Values:
    """What one load builds from its trees, and what it learned while building them.

    ``lookup`` gives a variable's value; without one (no value is read) an unset variable is
    not an error but a value that cannot be judged, standing for a placeholder
    (``placeholders``). ``errors`` is where located problems go. Scalars and containers are
    known by ``id()``: the trees live for the whole load.
    """

    def __init__(
        self, lookup: Callable[[str], str | None] | None, errors: list[ManifestError]
    ) -> None:
        self.lookup = lookup
        self.placeholders = Placeholders() if lookup is None else None
        self.errors = errors
        self.secrets: set[str] = set()
        self.origins: dict[KeyPath, Origin] = {}
        self.uses: list[VariableUse] = []
        self.variables_of: dict[int, tuple[str, ...]] = {}  # id(scalar) -> names, if secret
        self.unresolved: set[int] = set()  # id(scalar) with an unset or broken variable
        self.labels: dict[KeyPath, str] = {}  # ("providers", key) -> label in messages
        self.quoted_numbers_seen = False  # a quoted scalar reads as a number or bool
        self._lenient = False  # inside a disabled provider, an unset variable is no error
        self._ancestors: list[int] = []  # id() of the containers around the value built

    def text(self, node: Scalar, *, record: bool = True) -> tuple[str, tuple[str, ...], bool]:
        """A string scalar's text with its variables substituted, the variables used, and
        whether a secret went in. ``record=False`` only peeks (a provider's name, to address
        its origins): problems and secrets are recorded once, when the value itself is built.
        """
        raw: str = node.value
        if "$" not in raw:  # most strings: nothing to substitute
            return raw, (), False
        placeholders = self.placeholders
        done = substitute(
            raw,
            self.lookup,
            stand_in=None if placeholders is None else placeholders.stand_in(id(node)),
            lenient=self._lenient,
        )
        if record:
            mark = node.mark
            where = f"{mark.display}:{mark.line}:{mark.column}"
            required = not self._lenient
            self.uses.extend(
                VariableUse(
                    ref.name, where, ref.default is not None, ref.default is None and required
                )
                for ref in done.references
            )
            if done.problems or done.unknown:
                self.unresolved.add(id(node))
            self.errors.extend(mark.error(problem) for problem in done.problems)
            self.secrets.update(value for value in done.secrets if value)
        return done.text, done.used, bool(done.secrets)

    def value(self, node: Node, keys: KeyPath) -> Any:
        """Plain Python values for validation; strings as SourceStr; origins recorded."""
        mark = node.mark
        if isinstance(node, Scalar):
            if node.is_str:
                text, used, secret = self.text(node)
                if not used and _typed(node.text):
                    self.quoted_numbers_seen = True
                if self.placeholders is not None and id(node) in self.unresolved:
                    self.placeholders.hold(self._ancestors)
                self.origins[keys] = Origin(mark.display, mark.line, mark.column, node.text, used)
                if secret:
                    self.variables_of[id(node)] = used
                kind = Secret if secret else SourceStr
                if keys[0] == "providers" and len(keys) > 1:
                    label = self.labels.get(keys[:2], "")
                    return kind(text, *mark[1:], mark.display, label, keys[2:])
                return kind(text, *mark[1:], mark.display, "", keys)
            self.origins[keys] = Origin(mark.display, mark.line, mark.column, node.text)
            return node.value
        self.origins[keys] = Origin(mark.display, mark.line, mark.column)
        self._ancestors.append(id(node))
        try:
            if isinstance(node, Seq):
                return [self.value(item, (*keys, i)) for i, item in enumerate(node.items)]
            return {key: self.value(child, (*keys, key)) for key, (_, child) in node.items.items()}
        finally:
            self._ancestors.pop()

    def entry(self, entry: Node, keys: KeyPath) -> Any:
        """A provider entry's value; inside a disabled one an unset variable is no error."""
        enabled = scalar_at(entry, "enabled")
        self._lenient = enabled is not None and enabled.value is False
        try:
            return self.value(entry, keys)
        finally:
            self._lenient = False


def _typed(text: str) -> bool:
    """Whether ``text``, written plain, would read as a number, a boolean or null."""
    try:
        return not isinstance(core_value(text), str)
    except ValueError:  # more digits than int() takes: a number too
        return True
