"""The tests' own layout: each folder of ``tests/`` mirrors a package of the code, or is one of
the suites that cut across packages, as the table of ``docs/development.md`` ("Where a test
goes") says; and the markers of ``tests/conftest.py`` are set on paths that exist.

So "which tests cover my change" has a mechanical answer: the folder named after the package,
plus the suites; and a folder moved or added without its row fails here.
"""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).parents[1]
TESTS = ROOT / "tests"
GUIDE = ROOT / "docs" / "development.md"
SUITE = "suite"


def folder_table(text: str) -> dict[str, str]:
    """The rows of the guide's "Where a test goes" table: folder -> what it mirrors (a path of
    the repository, or ``suite``)."""
    section = text.split("### Where a test goes\n", 1)[1].split("\n### ", 1)[0]
    table: dict[str, str] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) != 3 or cells[0] == "folder" or "---" in line:
            continue
        table[cells[0].strip("`")] = cells[1].strip("`")
    return table


def folders(tests: Path) -> list[str]:
    """The test folders under ``tests``, by name."""
    return sorted(
        path.name
        for path in tests.iterdir()
        if path.is_dir() and not path.name.startswith((".", "__"))
    )


def unmirrored(names: list[str], table: dict[str, str], root: Path) -> list[str]:
    """The folders of ``names`` that mirror nothing: in no row, or in a row whose code is not
    in ``root``."""
    return [
        name
        for name in names
        if name not in table or (table[name] != SUITE and not (root / table[name]).exists())
    ]


def packages(root: Path) -> list[str]:
    """Every package of the code a folder must mirror: each public package of ``composer``
    (not ``_data``, its bundled files), ``builtin_providers`` and its ``stores``."""
    found = [
        f"composer/{path.name}/"
        for path in sorted((root / "composer").iterdir())
        if (path / "__init__.py").is_file() and not path.name.startswith("_")
    ]
    return [*found, "builtin_providers/", "builtin_providers/stores/"]


def test_every_test_folder_mirrors_a_package_or_is_a_suite() -> None:
    table = folder_table(GUIDE.read_text(encoding="utf-8"))
    assert unmirrored(folders(TESTS), table, ROOT) == []
    assert sorted(table) == folders(TESTS)  # and no row for a folder that is gone
    code = [mirrored for mirrored in table.values() if mirrored != SUITE]
    assert len(code) == len(set(code))  # one folder per package


def test_every_package_has_its_folder() -> None:
    mirrored = set(folder_table(GUIDE.read_text(encoding="utf-8")).values())
    assert [package for package in packages(ROOT) if package not in mirrored] == []


def test_the_mirror_check_sees_a_folder_of_nothing(tmp_path: Path) -> None:
    (tmp_path / "tests" / "misc").mkdir(parents=True)
    (tmp_path / "tests" / "gone").mkdir()
    (tmp_path / "tests" / "__pycache__").mkdir()
    table = {"gone": "composer/gone/", "cli": "composer/cli/"}
    assert unmirrored(folders(tmp_path / "tests"), table, ROOT) == ["gone", "misc"]
    assert unmirrored(["cli", "conformance"], {**table, "conformance": SUITE}, ROOT) == []


def test_the_table_is_read_from_its_section_only() -> None:
    page = (
        "| folder | mirrors | holds |\n| `early` | `composer/` | x |\n"
        "### Where a test goes\n\n| folder | mirrors | holds |\n| --- | --- | --- |\n"
        "| `cli` | `composer/cli/` | the commands |\n| `runtime` | suite | the engine |\n"
        "### Markers\n| `late` | `composer/` | x |\n"
    )
    assert folder_table(page) == {"cli": "composer/cli/", "runtime": SUITE}


def markers_module() -> ModuleType:
    """``tests/conftest.py``, loaded by path under a name of its own (``conftest`` is also the
    name of several test folders' own)."""
    spec = importlib.util.spec_from_file_location("suite_markers", TESTS / "conftest.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_marked_path_exists_and_every_marker_is_registered() -> None:
    table: dict[str, tuple[str, ...]] = markers_module().MARKED
    paths = [place.partition("::")[0] for place in table]
    assert [path for path in paths if not (TESTS / path).exists()] == []
    assert [path for path in paths if path.endswith("/") != (TESTS / path).is_dir()] == []
    tests = [place.partition("::") for place in table if "::" in place]
    assert [
        f"{path}::{name}"
        for path, _, name in tests
        if not re.search(rf"^(async )?def {name}\(", (TESTS / path).read_text(), re.MULTILINE)
    ] == []
    pytest_options = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    declared = pytest_options["tool"]["pytest"]["ini_options"]["markers"]
    registered = {re.split(r"[(:]", line, maxsplit=1)[0] for line in declared}
    used = {name for names in table.values() for name in names}
    assert used == {"slow", "services", "browser", "integrations"}
    assert used <= registered


def test_a_test_has_the_markers_of_every_path_that_holds_it() -> None:
    module = markers_module()
    assert module.markers_of(TESTS / "console" / "test_console_browser.py") == ["slow", "browser"]
    assert module.markers_of(TESTS / "memory" / "test_restart.py") == ["services", "slow"]
    assert module.markers_of(TESTS / "serve" / "test_state.py") == ["services"]
    assert module.markers_of(TESTS / "serve" / "test_workers.py") == ["slow", "services"]
    # a test named on its own: its file's markers and its own, the file's other tests not
    sigterm = "test_sigterm_closes_every_provider"
    assert module.markers_of(TESTS / "serve" / "test_http_server.py", sigterm) == ["slow"]
    assert module.markers_of(TESTS / "serve" / "test_http_server.py", "test_x") == []
    assert module.markers_of(TESTS / "serve" / "test_http_server.py") == []
    assert module.markers_of(TESTS / "console" / "test_console_sessions.py") == []
    assert module.markers_of(TESTS / "memorial" / "test_x.py") == []  # a folder, not a prefix
