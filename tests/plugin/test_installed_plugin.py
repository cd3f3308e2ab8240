"""A provider type installed as a real distribution: found through its entry point, by name.

Each test writes a small distribution (a module and a ``.dist-info`` with ``entry_points.txt``)
into a temporary folder and puts that folder on ``sys.path``, which is how an installed
package is seen; no mocking of ``importlib.metadata``.
"""

from __future__ import annotations

import re
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import composer
from composer.catalog import ProviderTypes
from composer.cli import main
from composer.errors import ManifestError, PluginError

PLUGIN_GUIDE = (Path(__file__).parents[2] / "docs" / "plugins.md").read_text(encoding="utf-8")


def readme_plugin_code() -> str:
    """The first Python block of the plugin guide, docs/plugins.md ("Writing a provider type")."""
    section = PLUGIN_GUIDE[PLUGIN_GUIDE.index("# Writing a provider type") :]
    code: str = re.findall(r"```python\n(.*?)```", section, flags=re.S)[0]
    return code


def distribution(root: Path, package: str, entry_points: dict[str, str], code: str) -> None:
    (root / f"{package}.py").write_text(code, encoding="utf-8")
    info = root / f"{package}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.1\n")
    lines = "".join(f"{name} = {target}\n" for name, target in entry_points.items())
    (info / "entry_points.txt").write_text(f"[composer.providers]\n{lines}")


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on sys.path standing for site-packages; its modules are forgotten after."""
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    before = set(sys.modules)
    yield folder
    for name in set(sys.modules) - before:
        if name.startswith("composer_test_"):
            del sys.modules[name]


def manifest_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "m.yaml"
    path.write_text("version: 1\nproviders:\n" + textwrap.dedent(body), encoding="utf-8")
    return path


async def test_the_readme_plugin_works_as_an_installed_package(site: Path, tmp_path: Path) -> None:
    distribution(
        site,
        "composer_test_tickets",
        {"tickets": "composer_test_tickets:provider_type"},
        readme_plugin_code(),
    )
    path = manifest_file(
        tmp_path,
        """\
        - {name: queue, type: tickets, queue: "ops-{{ branch.name }}"}
        - {name: quiet, type: tickets, queue: q, when: "false"}
        """,
    )
    manifest = composer.load_manifest(path)
    branch = composer.Branch("sys\n", name="payments")
    composer.attach(branch, manifest)
    turn = await composer.prepare_turn(branch, "hello")
    assert turn.guidance == "sys\nNo open tickets in ops-payments."
    assert turn.report is not None
    assert [row["provider_name"] for row in turn.report.fired] == ["queue"]


def test_the_readme_plugin_uses_only_the_plugin_module() -> None:
    imports = re.findall(r"^(?:from|import) (\S+)", readme_plugin_code(), flags=re.M)
    assert [name for name in imports if name.startswith("composer")] == ["composer.plugin"]


def broken_site(site: Path) -> None:
    """One good plugin and one whose module cannot be imported."""
    distribution(
        site,
        "composer_test_good",
        {
            "good": "composer_test_good:provider_type",
            "broken": "composer_test_missing_module:provider_type",
        },
        readme_plugin_code().replace('"tickets"', '"good"'),
    )


def test_a_broken_plugin_leaves_manifests_that_do_not_use_it_loading(
    site: Path, tmp_path: Path
) -> None:
    broken_site(site)
    path = manifest_file(
        tmp_path, "- {name: a, type: static, text: A}\n- {name: b, type: good, queue: q}\n"
    )
    manifest = composer.load_manifest(path)
    assert [p.type for p in manifest.providers] == ["static", "good"]


def test_a_manifest_using_a_broken_plugin_gets_a_located_error_naming_it(
    site: Path, tmp_path: Path
) -> None:
    broken_site(site)
    path = manifest_file(tmp_path, "  - name: b\n    type: broken\n")
    with pytest.raises(ManifestError) as caught:
        composer.load_manifest(path)
    error = caught.value
    assert (error.line, error.column) == (4, 9)
    assert 'provider "b": provider type "broken": cannot load provider type from entry ' in (
        error.message
    )
    assert "'broken' (composer_test_missing_module:provider_type)" in error.message
    assert "ModuleNotFoundError" in error.message


def test_a_plugin_whose_entry_point_is_not_a_provider_type_is_named(
    site: Path, tmp_path: Path
) -> None:
    distribution(site, "composer_test_odd", {"odd": "composer_test_odd:thing"}, "thing = 42\n")
    path = manifest_file(tmp_path, "  - {name: o, type: odd}\n")
    with pytest.raises(ManifestError, match=r"entry point 'odd' .* is a int, not a"):
        composer.load_manifest(path)


def test_schema_reports_a_broken_plugin_and_documents_the_others(
    site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken_site(site)
    assert main(["schema"]) == 0
    out, err = capsys.readouterr()
    assert '"good"' in out
    assert "broken" not in out
    assert "warning: cannot load provider type from entry point 'broken'" in err


def test_entry_points_are_listed_once_per_sys_path(site: Path) -> None:
    first = ProviderTypes.installed()
    assert ProviderTypes.installed() is first
    distribution(site, "composer_test_late", {"late": "composer_test_late:x"}, "x = 1\n")
    sys.path.append(str(site / "nowhere"))
    try:
        assert "late" in ProviderTypes.installed()
    finally:
        sys.path.remove(str(site / "nowhere"))


HOOKED_PLUGIN = """
from typing import Any, Literal

from composer.plugin import BuildContext, ProviderConfig, ProviderType


class NotesConfig(ProviderConfig):
    type: Literal["notes"] = "notes"
    token: str = ""

    def secrets(self{config_extra}) -> list[str]:
        return [self.token]


class NotesProvider:
    def __init__(self) -> None:
        self.stored: list[Any] = []

    async def provide(self, branch: Any, instruction: Any) -> str | None:
        return "notes"

    async def writeback(self, branch: Any{writeback_extra}) -> int:
        self.stored.extend(action_responses)
        return len(action_responses)


def build(config: NotesConfig, context: BuildContext) -> NotesProvider:
    return NotesProvider()


provider_type = ProviderType("notes", NotesConfig, build)
"""


def notes_plugin(site: Path, package: str, *, config_extra: str, writeback_extra: str) -> None:
    code = HOOKED_PLUGIN.format(config_extra=config_extra, writeback_extra=writeback_extra)
    distribution(site, package, {"notes": f"{package}:provider_type"}, code)


NOTES_MANIFEST = "  - {name: kept, type: static, text: K}\n  - name: n\n    type: notes\n"


async def test_an_installed_plugin_whose_hooks_take_the_engines_calls_is_used(
    site: Path, tmp_path: Path
) -> None:
    """Extra optional parameters are accepted; the engine's calls reach the hooks."""
    notes_plugin(
        site,
        "composer_test_notes",
        config_extra=", *, unused: bool = False",
        writeback_extra=", action_responses: list[Any], limit: int = 5",
    )
    path = manifest_file(tmp_path, NOTES_MANIFEST + "    token: hunter22\n")
    manifest = composer.load_manifest(path)
    assert manifest.redact("token hunter22") == "token ***"  # its secrets() was called
    registry = composer.attach(composer.Branch("sys\n"), manifest)
    results = await registry.writeback_results(composer.Branch("sys\n"), ["r1", "r2"])
    assert [(r.name, r.stored, r.error) for r in results] == [("n", 2, None)]


def test_an_installed_plugin_whose_provider_hook_takes_the_wrong_parameters_is_refused(
    site: Path, tmp_path: Path
) -> None:
    """Refused when the engine wraps it, at the line of the entry that uses the type, naming
    the class and the hook; not at the first writeback."""
    notes_plugin(site, "composer_test_notes_bad", config_extra="", writeback_extra="")
    path = manifest_file(tmp_path, NOTES_MANIFEST)
    manifest = composer.load_manifest(path)
    with pytest.raises(PluginError) as caught:
        composer.attach(composer.Branch("sys\n"), manifest)
    assert str(caught.value) == (
        f"{path}:4:3: provider 'n' (type notes): "
        "composer_test_notes_bad.NotesProvider.writeback(self, branch) cannot take the "
        "engine's call writeback(branch, action_responses): too many positional arguments"
    )


def test_an_installed_plugin_whose_config_hook_takes_the_wrong_parameters_fails_at_load(
    site: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The manifest that names the type fails to load, at the entry's type, naming the class
    and the hook; ``composer validate`` says the same."""
    notes_plugin(
        site,
        "composer_test_notes_config",
        config_extra=", field: str",
        writeback_extra=", action_responses: list[Any]",
    )
    path = manifest_file(tmp_path, NOTES_MANIFEST)
    with pytest.raises(ManifestError) as caught:
        composer.load_manifest(path)
    error = caught.value
    assert (error.path, error.line, error.column) == (str(path), 5, 9)
    assert error.message == (
        'provider "n": provider type "notes": entry point \'notes\' '
        "(composer_test_notes_config:provider_type): "
        "composer_test_notes_config.NotesConfig.secrets(self, field) cannot take the "
        "engine's call secrets(): missing a required argument: 'field'"
    )
    assert main(["validate", str(path)]) != 0
    assert f'{path}:5:9: provider "n": provider type "notes": entry point' in (
        capsys.readouterr().err
    )
