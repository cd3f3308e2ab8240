"""The package layout and the direction of imports, read from the source with ``ast``.

The ADR runtime stands alone; the manifest code does not reach into the runtime or the
command line; the built-in provider types are ordinary clients of ``composer.plugin``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

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
