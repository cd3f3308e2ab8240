"""The curated facade: composer.__all__ is exactly the public API of design.md, sorted; and
every module's ``__all__`` is exactly the public names it defines or re-exports."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path
from typing import NamedTuple

import composer

# Update this literal set when a public name is added on purpose (design.md "Public API").
EXPECTED = {
    "Branch",
    "ComposerError",
    "ContextProvider",
    "ContextProviderRegistry",
    "Instruction",
    "Manifest",
    "ManifestError",
    "ManifestWatcher",
    "PreparedTurn",
    "ProviderError",
    "ProviderReport",
    "TemplateError",
    "attach",
    "build_registry",
    "count_tokens",
    "load_manifest",
    "prepare_turn",
}


def test_all_is_exactly_the_expected_names() -> None:
    assert set(composer.__all__) == EXPECTED


def test_all_is_sorted_without_duplicates() -> None:
    assert composer.__all__ == sorted(composer.__all__)
    assert len(composer.__all__) == len(set(composer.__all__))


def test_every_exported_name_exists() -> None:
    missing = [name for name in composer.__all__ if not hasattr(composer, name)]
    assert missing == []


def test_exported_names_live_in_composer() -> None:
    """Every export is composer's own object, not a re-export of a third-party one."""
    for name in composer.__all__:
        module = getattr(getattr(composer, name), "__module__", "")
        assert module.startswith("composer."), (name, module)


ROOT = Path(__file__).parents[1]


class ModuleNames(NamedTuple):
    """What a module's top level says of its names, read with ``ast``."""

    listed: list[str] | None  # its ``__all__``; None when it has none
    defined: set[str]  # bound by def, class or assignment
    imported: set[str]  # bound by an import that runs (not one under TYPE_CHECKING)
    unexported: set[str]  # defined, but by convention never an export (see below)
    lazy: set[str]  # imported under TYPE_CHECKING by a module whose ``__getattr__`` serves them


def _bound(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Tuple | ast.List):
        return [name for item in target.elts for name in _bound(item)]
    return []


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _never_exported(value: ast.expr | None) -> bool:
    """A module's logger (``logging.getLogger``) and its type variables (``TypeVar``,
    ``ParamSpec``) are names of the module's own, whatever their spelling."""
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name in {"getLogger", "TypeVar", "ParamSpec", "TypeVarTuple"}


def module_names(path: Path) -> ModuleNames:
    names = ModuleNames(None, set(), set(), set(), set())
    listed: list[str] | None = None
    checking: set[str] = set()

    def visit(body: list[ast.stmt], imported: set[str]) -> None:
        nonlocal listed
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.defined.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                bound = [name for target in targets for name in _bound(target)]
                if node.value is None:
                    continue  # a bare annotation binds nothing
                if bound == ["__all__"]:
                    listed = list(ast.literal_eval(node.value))
                    continue
                names.defined.update(bound)
                if _never_exported(node.value):
                    names.unexported.update(bound)
            elif isinstance(node, ast.Import | ast.ImportFrom):
                for alias in node.names:
                    imported.add((alias.asname or alias.name).split(".")[0])
            elif isinstance(node, ast.If):
                visit(node.body, checking if _is_type_checking(node.test) else imported)
                visit(node.orelse, imported)
            elif isinstance(node, ast.Try):
                for block in [node.body, *(h.body for h in node.handlers)]:
                    visit(block, imported)
                visit(node.orelse, imported)
                visit(node.finalbody, imported)

    visit(ast.parse(path.read_text(encoding="utf-8")).body, names.imported)
    if "__getattr__" in names.defined:
        names.lazy.update(checking)
    return names._replace(listed=listed)


def all_drift(path: Path) -> list[str]:
    """How ``__all__`` differs from the public names the module binds: a public name it
    defines (an import of that name is a fallback, as ``fcntl = None`` is) that ``__all__``
    leaves out, or a listed name the module neither defines nor imports at run time (nor
    serves from its ``__getattr__``, as the ``composer`` package does, PEP 562)."""
    names = module_names(path)
    public = {
        name
        for name in names.defined - names.imported - names.unexported
        if not name.startswith("_")
    }
    if names.listed is None:
        return [f"no __all__, and it defines {sorted(public)}"] if public else []
    problems = []
    if len(set(names.listed)) != len(names.listed):
        problems.append("__all__ lists a name twice")
    if missing := sorted(public - set(names.listed)):
        problems.append(f"public but not in __all__: {missing}")
    if unbound := sorted(set(names.listed) - names.defined - names.imported - names.lazy):
        problems.append(f"in __all__ but not bound here: {unbound}")
    return problems


def test_every_modules_all_is_exactly_its_public_names() -> None:
    """``__all__`` cannot drift from what a module offers: every name it defines without a
    leading underscore is listed (or renamed private), and every listed name is defined or
    imported for re-export, in every module of composer and the built-in types."""
    drift = {
        str(path.relative_to(ROOT)): problems
        for package in ("composer", "builtin_providers")
        for path in sorted((ROOT / package).rglob("*.py"))
        if (problems := all_drift(path))
    }
    assert drift == {}


def test_the_drift_check_sees_what_it_must(tmp_path: Path) -> None:
    """The reader behind the test above: a definition left out, a listed name bound only
    for type checkers, a name listed twice; a logger, a TypeVar, a private name, an
    import fallback and a re-export are fine."""
    module = tmp_path / "m.py"
    module.write_text(
        textwrap.dedent(
            """
            import logging
            from typing import TYPE_CHECKING, TypeVar
            from os import sep as sep
            if TYPE_CHECKING:
                from pathlib import Path
            try:
                import fcntl
            except ImportError:
                fcntl = None
            logger = logging.getLogger(__name__)
            T = TypeVar("T")
            A, B = 1, 2
            _hidden = 3
            __all__ = ["A", "Path", "sep", "sep"]
            """
        ),
        encoding="utf-8",
    )
    assert all_drift(module) == [
        "__all__ lists a name twice",
        "public but not in __all__: ['B']",
        "in __all__ but not bound here: ['Path']",
    ]
