"""The package layout and the direction of imports, read from the source with ``ast``.

The layers that ``docs/development.md`` draws (front-ends, operations, engine, providers) are
read from its table, so the page and the code cannot drift apart; within them, the ADR runtime
stands alone, nothing imports the command line, the console is a front-end of its own, the
manifest code does not reach into the runtime, the built-in provider types are ordinary
clients of ``composer.plugin``; and no module imports itself through others, counting imports
inside functions and under ``TYPE_CHECKING`` (a cycle hidden there is one moved line away from
an ``ImportError``).
"""

from __future__ import annotations

import ast
import re
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


LAYERS_DOC = ROOT / "docs" / "development.md"


def layer_table() -> dict[str, tuple[list[str], list[str]]]:
    """The table of ``docs/development.md``'s "Layers": each layer's packages and what it may
    import (layer names, or a module in backticks), read as the page shows them."""
    section = LAYERS_DOC.read_text(encoding="utf-8").split("### Layers\n", 1)[1]
    section = section.split("\n### ", 1)[0]
    table: dict[str, tuple[list[str], list[str]]] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) != 4 or cells[0] == "layer" or "---" in line:
            continue
        table[cells[0]] = (re.findall(r"`([^`]+)`", cells[1]), cells[2].split(", "))
    return table


def layer_of(module: str, table: dict[str, tuple[list[str], list[str]]]) -> str | None:
    """The layer whose most specific package holds ``module``."""
    held = [(len(p), layer) for layer, (ps, _) in table.items() for p in ps if within(module, p)]
    return max(held)[1] if held else None


def test_the_layer_table_of_the_development_guide_places_every_package() -> None:
    """A new package is placed in the drawing before it lands: every top-level module and
    package of ``composer`` is named in one row, and nothing is named that does not exist."""
    table = layer_table()
    assert list(table) == ["front-ends", "operations", "engine", "providers"]
    named = [package for packages, _ in table.values() for package in packages]
    top = {"composer", "builtin_providers"} | {
        "composer." + path.name.removesuffix(".py")
        for path in (ROOT / "composer").iterdir()
        if (path.suffix == ".py" and path.name != "__init__.py") or (path / "__init__.py").is_file()
    }
    assert sorted(named) == sorted(top)


def allowed_by(layer: str, name: str, table: dict[str, tuple[list[str], list[str]]]) -> bool:
    """Whether a module of ``layer`` may import ``name``: a module of its own layer, of a
    layer its row names, or a module its row names in backticks."""
    words = table[layer][1]
    modules = [word.strip("`") for word in words if word.startswith("`")]
    return layer_of(name, table) in [layer, *words] or any(within(name, m) for m in modules)


def test_each_layer_imports_only_what_the_development_guide_allows() -> None:
    table = layer_table()
    outside: dict[str, list[str]] = {}
    for module, imports in MODULES.items():
        layer = layer_of(module, table)
        assert layer is not None, module
        wrong = sorted(name for name in imports if not allowed_by(layer, name, table))
        if wrong:
            outside[module] = wrong
    assert outside == {}


def test_the_layer_rules_see_a_wrong_import() -> None:
    """The engine importing an operation, an operation a front-end, a provider type the
    engine: each is refused by the table."""
    table = layer_table()
    assert layer_of("composer.inspect.preview", table) == "operations"
    assert layer_of("composer.cli.commands.preview", table) == "front-ends"
    assert layer_of("composer.build", table) == "engine"
    assert layer_of("builtin_providers.stores.jsonl", table) == "providers"
    assert not allowed_by("engine", "composer.inspect.preview", table)
    assert not allowed_by("operations", "composer.cli.output", table)
    assert not allowed_by("operations", "composer.console.views", table)
    assert not allowed_by("providers", "composer.build", table)
    assert allowed_by("providers", "composer.plugin.ProviderConfig", table)
    assert allowed_by("front-ends", "composer.inspect.preview", table)


def test_nothing_imports_the_command_line() -> None:
    importers = {
        module
        for module, imports in MODULES.items()
        if not within(module, "composer.cli") and module != "composer.__main__"
        if any(within(name, "composer.cli") for name in imports)
    }
    assert importers == set()


def test_the_operations_import_no_front_end() -> None:
    """``composer.inspect`` is what the command line and the web console share: it prints
    nothing and serves nothing, so it imports neither them nor the server."""
    front_ends = ("composer.cli", "composer.console", "composer.serve")
    importers = {
        module: sorted(name for name in imports if any(within(name, f) for f in front_ends))
        for module, imports in MODULES.items()
        if within(module, "composer.inspect")
    }
    assert {module: names for module, names in importers.items() if names} == {}
    assert "composer.inspect.preview" in importers  # the rule looked at the package


SERVER_ROOT = "composer.serve.app"
"""The one module of ``composer.serve`` that may import the console: the server's composition
root (``run``, ``create_app``), which mounts the console's routes beside the API when asked.
The rest of the server stays below the console, which uses its authentication, limits and
principals; so ``composer.serve``'s ``__init__`` reaches the root by name when ``run`` or
``create_app`` is called, never by an import (the package would then import itself through
the console)."""


def test_only_the_command_line_and_the_server_root_import_the_console() -> None:
    importers = {
        module
        for module, imports in MODULES.items()
        if not within(module, "composer.console")
        if any(within(name, "composer.console") for name in imports)
    }
    assert {m for m in importers if not within(m, "composer.cli") and m != SERVER_ROOT} == set()
    assert {"composer.cli.commands.console", SERVER_ROOT} <= importers  # it saw the real ones


def test_the_console_reaches_no_terminal_code() -> None:
    """The web console is a front-end beside the command line: nothing it imports, directly
    or through any other module, is ``composer.cli``."""
    graph = import_graph()
    for module in graph:
        if within(module, "composer.console"):
            assert not any(within(n, "composer.cli") for n in reached(graph, module)), module


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


def reached(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module that importing ``start`` runs, directly or through others."""
    seen: set[str] = set()
    todo = list(graph[start])
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(graph.get(node, ()))
    return seen


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of ``graph`` with more than one module, sorted."""
    reach = {start: reached(graph, start) for start in graph}
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
    above = (
        "composer.build",
        "composer.reload",
        "composer.serve",
        "composer.cli",
        "composer.console",
        "composer.inspect",
    )
    graph = import_graph()
    for module in graph:
        if within(module, "composer.observe"):
            assert not any(within(n, a) for n in graph[module] for a in above), module


def test_every_package_is_in_the_distribution() -> None:
    """``[tool.setuptools] packages`` lists the packages by name: one left out installs as
    a wheel without it, while the editable checkout the tests run in still finds it."""
    import tomllib

    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {
        module_name(path.parent / "__init__.py")
        for package in ("composer", "builtin_providers")
        for path in (ROOT / package).rglob("__init__.py")
    }
    assert found - listed == set()


def test_the_integrations_import_no_server() -> None:
    """An agent framework's integration keeps branches as a server does, through the engine's
    ``composer.branches``: installing one needs nothing of ``composer serve``."""
    importers = {
        module
        for module, imports in MODULES.items()
        if within(module, "composer.integrations")
        if any(within(n, "composer.serve") for n in imports)
    }
    assert importers == set()


def source_files() -> list[Path]:
    return [
        p for package in ("composer", "builtin_providers") for p in (ROOT / package).rglob("*.py")
    ]


def test_one_module_opens_postgres_pools_and_names_the_extra() -> None:
    """Every PostgreSQL back-end (memory store, server state, audit table) goes through
    ``composer._postgres``: no other module makes a pool or words the install hint."""
    makers = set()
    for path in source_files():
        text = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Call):
                called = node.func
                name = called.attr if isinstance(called, ast.Attribute) else called
                if getattr(name, "id", name) == "AsyncConnectionPool":
                    makers.add(path.name)
        if "context-composer[postgres]" in text:
            makers.add(path.name)
    assert makers == {"_postgres.py"}


def test_async_with_that_only_closes_comes_from_one_base() -> None:
    """``async with x:`` giving ``x`` and calling ``x.aclose()`` is ``composer._closing``'s;
    a class writing that pair again is a copy to drop."""

    def only(body: list[ast.stmt], source: str) -> bool:
        """Whether ``body``, its docstring aside, is the one statement ``source``."""
        if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]
        return [ast.unparse(statement) for statement in body] == [source]

    copies = []
    for path in source_files():
        if path.name == "_closing.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                methods = {m.name: m for m in node.body if isinstance(m, ast.AsyncFunctionDef)}
                enter, leave = methods.get("__aenter__"), methods.get("__aexit__")
                if (
                    enter
                    and leave
                    and only(enter.body, "return self")
                    and only(leave.body, "await self.aclose()")
                ):
                    copies.append(f"{path.name}:{node.name}")
    assert copies == []


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
