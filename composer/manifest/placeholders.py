"""Checking a manifest without the values of its variables (``load_manifest(interpolate=False)``).

In CI no secret is available, yet the manifest should still be checked. A value that needs an
unset variable cannot be judged, but a model still needs something of the right shape there:
the variable stands for a placeholder, tried in turn as validation says what the field
expects (a URL origin, a number, a boolean; a plain string needs none). The errors of such a
value, and the checks over the mappings and lists holding it, say nothing of the manifest as
it will run, so they are not reported; a value no placeholder satisfies is reported as one
that cannot be checked without its variables.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import ValidationError

from composer.errors import ManifestError
from composer.manifest.validation_errors import locate
from composer.manifest.yamlnodes import Node

__all__ = ["ATTEMPTS", "STAND_INS", "Placeholders", "unjudged"]

STAND_INS = ("https://placeholder.invalid", "0", "false")
"""What an unset variable stands for, in turn: a URL origin, a number, a boolean."""

ATTEMPTS = len(STAND_INS) + 1
"""Validations of one value at most: as written, then with each placeholder."""


class Placeholders:
    """The placeholders chosen so far in one load, and the containers they make uncertain.

    Scalars and containers are known by ``id()``: the located tree they belong to lives for
    the whole load.
    """

    def __init__(self) -> None:
        self._chosen: dict[int, int] = {}  # id(scalar) -> index into STAND_INS
        self.uncertain: set[int] = set()  # id() of the mappings and lists holding one

    def stand_in(self, scalar: int) -> str | None:
        """The placeholder for the unset variables of scalar ``id`` (None: kept as written)."""
        chosen = self._chosen.get(scalar)
        return None if chosen is None else STAND_INS[chosen]

    def hold(self, containers: Iterable[int]) -> None:
        """The containers ``id`` hold a value that cannot be judged."""
        self.uncertain.update(containers)

    def choose(self, error: ValidationError, tree: Node, unresolved: set[int]) -> bool:
        """Give each unset value (``unresolved``) that failed the next placeholder; whether
        any changed, so that validating again may say more."""
        changed = False
        for item in error.errors(include_url=False, include_input=False):
            node = locate(tree, item["loc"], key_of_last=False)[2]
            if node is None or id(node) not in unresolved:
                continue
            index = self._chosen.get(id(node), -1) + 1
            if index < len(STAND_INS):
                self._chosen[id(node)] = index
                changed = True
        return changed


def unjudged(tree: Node, label: str) -> ManifestError:
    """The error for a value that no placeholder lets validate."""
    return tree.mark.error(
        f"{label + ': ' if label else ''}cannot be checked without the values of its "
        "variables; give them defaults (${NAME:-value}) or validate with them set"
    )
