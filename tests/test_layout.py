"""The package layout and the direction of imports, read from the source with ``ast``.

The ADR runtime stands alone; the manifest code does not reach into the runtime or the
command line; the built-in provider types are ordinary clients of ``composer.plugin``; and no
module imports itself through others, counting imports inside functions and under
``TYPE_CHECKING`` (a cycle hidden there is one moved line away from an ``ImportError``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import composer
import composer.errors

ROOT = Path(__file__).parents[1]
RUNTIME = {"composer.registry", "composer.turn", "composer.tokens", "composer.outcomes"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """Every module ``path`` imports, anywhere in it (functions and TYPE_CHECKING included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name.split(".")[0] in ("composer", "builtin_providers")}


MODULES = {
    module_name(path): imports_of(path)
    for package in ("composer", "builtin_providers")
    for path in sorted((ROOT / package).rglob("*.py"))
}


def within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def test_the_top_level_shows_runtime_seams_and_two_subpackages() -> None:
    top = {p.name for p in (ROOT / "composer").iterdir() if not p.name.startswith((".", "_"))}
    assert {"registry.py", "turn.py", "tokens.py", "errors.py", "plugin.py", "build.py"} <= top
    assert {"manifest", "cli", "templating"} <= top
    assert len([name for name in top if name.endswith(".py")]) <= 12


@pytest.mark.parametrize("module", sorted(RUNTIME))
def test_the_runtime_imports_only_the_runtime_and_errors(module: str) -> None:
    allowed = RUNTIME | {"composer.errors", "composer._data"}
    outside = {name for name in MODULES[module] if not any(within(name, a) for a in allowed)} - {
        "composer"
    }
    assert outside == set()


def test_nothing_imports_the_command_line() -> None:
    importers = {
        module
        for module, imports in MODULES.items()
        if not within(module, "composer.cli") and module != "composer.__main__"
        if any(within(name, "composer.cli") for name in imports)
    }
    assert importers == set()


def test_builtin_types_import_only_the_plugin_module() -> None:
    for module, imports in MODULES.items():
        if within(module, "builtin_providers"):
            composer_imports = {n for n in imports if within(n, "composer")}
            assert composer_imports <= {"composer.plugin"} | {
                f"composer.plugin.{x}" for x in composer.plugin.__all__
            }, module


def packages_of(name: str) -> list[str]:
    """The packages whose ``__init__`` runs before module ``name``: ``a``, ``a.b`` of ``a.b.c``."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules importing it runs: each one named (a name imported from a module
    is that module) and the packages above it, but for the importer's own packages (already
    being imported when it runs, unless named themselves)."""
    graph: dict[str, set[str]] = {}
    for module, names in MODULES.items():
        targets: set[str] = set()
        for name in names:
            target = name if name in MODULES else name.rpartition(".")[0]
            if target not in MODULES:
                continue
            targets.add(target)
            targets.update(p for p in packages_of(target) if not within(module, p))
        graph[module] = targets - {module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of ``graph`` with more than one module, sorted."""
    reach: dict[str, set[str]] = {}
    for start in graph:
        seen: set[str] = set()
        todo = list(graph[start])
        while todo:
            node = todo.pop()
            if node not in seen:
                seen.add(node)
                todo.extend(graph.get(node, ()))
        reach[start] = seen
    components = {
        frozenset({m, *(n for n in reach[m] if m in reach[n])}) for m in graph if m in reach[m]
    }
    return sorted(sorted(c) for c in components)


def test_no_module_imports_itself_through_others() -> None:
    assert cycles(import_graph()) == []


def test_the_cycle_finder_sees_guarded_and_function_local_imports() -> None:
    """``composer/__init__`` imports its names only under TYPE_CHECKING, ``build`` its
    observer inside a function: both are edges, and a planted back edge is a cycle."""
    graph = import_graph()
    assert "composer.build" in graph["composer"]
    assert "composer.observe.observer" in graph["composer.build"]
    assert "composer.observe" in graph["composer.build"]  # the package runs first
    graph["composer.observe.record"].add("composer.build")
    assert any({"composer.build", "composer.observe.record"} <= set(c) for c in cycles(graph))


def test_observing_turns_is_below_the_engine() -> None:
    """The engine hands every turn to ``composer.observe``, so nothing there imports the
    engine or what is built on it (hot reload is ``composer.reload``)."""
    above = ("composer.build", "composer.reload", "composer.serve", "composer.cli")
    graph = import_graph()
    for module in graph:
        if within(module, "composer.observe"):
            assert not any(within(n, a) for n in graph[module] for a in above), module


def test_models_know_no_catalog_and_no_plugin_contract() -> None:
    """A data model that knew the catalog would import the plugin contract, which imports the
    models: the catalog is read off a manifest with ``catalog.catalog_of``."""
    models = MODULES["composer.manifest.models"]
    assert not any(within(n, m) for n in models for m in ("composer.catalog", "composer.plugin"))


def test_only_the_models_write_a_manifests_private_attributes() -> None:
    """What the loader knows beyond the fields (file, secrets, origins, types, variables) is
    bound in one call, ``Manifest._bind``: no other module assigns a private attribute of a
    ``Manifest``, which the models could then not keep consistent."""
    private = set(composer.Manifest.__private_attributes__)
    assert {"_path", "_secrets", "_origins", "_types", "_variables"} <= private
    writes = []
    for package in ("composer", "builtin_providers"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path == ROOT / "composer" / "manifest" / "models.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                targets = node.targets if isinstance(node, ast.Assign) else []
                if isinstance(node, ast.AnnAssign | ast.AugAssign):
                    targets = [node.target]
                writes += [
                    f"{path.relative_to(ROOT)}:{target.lineno}: {ast.unparse(target)}"
                    for target in targets
                    if isinstance(target, ast.Attribute)
                    and target.attr in private
                    and not (isinstance(target.value, ast.Name) and target.value.id == "self")
                ]
    assert writes == []


def test_composer_imports_nothing_of_the_builtin_types() -> None:
    importers = {
        module
        for module, imports in MODULES.items()
        if within(module, "composer") and any(within(n, "builtin_providers") for n in imports)
    }
    assert importers == set()


def test_yaml_reading_knows_no_models_and_models_know_no_runtime() -> None:
    assert not any(
        within(n, "composer.manifest.models") for n in MODULES["composer.manifest.yamlnodes"]
    )
    models = MODULES["composer.manifest.models"]
    assert not any(within(n, r) for n in models for r in RUNTIME | {"composer.build"})


def test_the_models_default_budget_is_the_runtimes() -> None:
    from composer.manifest.models import DEFAULT_BUDGET as MODELS_BUDGET
    from composer.registry import DEFAULT_BUDGET as RUNTIME_BUDGET

    assert MODELS_BUDGET == RUNTIME_BUDGET


def test_every_deliberate_error_is_in_the_drawn_tree() -> None:
    """errors.py draws its tree in the docstring; each class there derives from ComposerError."""
    classes = {
        name: obj
        for name, obj in vars(composer.errors).items()
        if isinstance(obj, type)
        and issubclass(obj, Exception)
        and obj.__module__ == "composer.errors"
    }
    assert set(composer.errors.__all__) == set(classes)
    drawing = composer.errors.__doc__ or ""
    for name, cls in classes.items():
        assert issubclass(cls, composer.errors.ComposerError), name
        assert name in drawing, name
    assert issubclass(composer.errors.UnknownProviderType, composer.errors.PluginError)
    assert issubclass(composer.errors.StoreError, composer.errors.ProviderError)


# Control flow inside one module, each caught there and turned into a tree error.
INTERNAL_SIGNALS = {
    "builtin_providers/_confined.py:SkipFile": "a file left out of a corpus walk",
    "builtin_providers/_net.py:UnsafeAddress": "http: becomes ProviderError",
    "builtin_providers/_net.py:BodyTooLarge": "http: becomes ProviderError",
    "builtin_providers/_net.py:UndecodableBody": "http: becomes ProviderError",
    "builtin_providers/http.py:_Retry": "http: one more attempt",
    "composer/templating/limits.py:RenderLimitExceeded": "a Jinja SecurityError: TemplateError",
}


def test_no_other_module_defines_an_error_users_can_meet() -> None:
    """One error tree: a new deliberate error goes into errors.py, not beside its raiser."""
    defined = set()
    for package in ("composer", "builtin_providers"):
        for path in (ROOT / package).rglob("*.py"):
            if path.name == "errors.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ClassDef) and any(
                    isinstance(base, ast.Name) and base.id.endswith(("Error", "Exception"))
                    for base in node.bases
                ):
                    defined.add(f"{path.relative_to(ROOT)}:{node.name}")
    assert defined == set(INTERNAL_SIGNALS)
