"""The plugin contract: what a third-party type gets is exactly what a built-in type gets.

The engine, not the provider class, applies what every provider shares (``enabled``, ``when``)
and finds the optional hooks, so a bare object with ``provide`` behaves like ``static``.
"""

from __future__ import annotations

import ast
import importlib
import textwrap
import warnings
from pathlib import Path
from typing import Any, Literal

import pytest

import builtin_providers
import composer
import composer.plugin
from builtin_providers.static import provider_type as static_type
from composer.build import ManagedProvider, build_registry
from composer.catalog import ProviderTypes, catalog_of
from composer.errors import PluginError, UnknownProviderType
from composer.plugin import BuildContext, ProviderConfig, ProviderType
from composer.turn import Branch, Instruction, prepare_turn

EXPECTED_PLUGIN_API = {
    "BuildContext",
    "CONTEXT_NAMES",
    "CacheKey",
    "Candidate",
    "Check",
    "Constant",
    "Closeable",
    "CompiledTemplate",
    "ContextProvider",
    "DisplayQuery",
    "Fate",
    "ManifestPath",
    "Partitioned",
    "PostgresPools",
    "Problem",
    "Progress",
    "Provider",
    "ProviderConfig",
    "ProviderError",
    "ProviderFactory",
    "ProviderType",
    "Ranking",
    "Refit",
    "Render",
    "RenderLimits",
    "Secrets",
    "StoreError",
    "StrictModel",
    "Template",
    "TemplateError",
    "TemplateShape",
    "UrlTemplate",
    "WarmUp",
    "Writeback",
    "WritebackCount",
    "branch_view",
    "compile_template",
    "count_tokens",
    "describe_dsn",
    "dsn_secrets",
    "explaining",
    "ranking_wanted",
    "redact",
    "report_ranking",
    "search_depth",
    "template_check",
    "template_context",
    "turn_key",
}


DEPRECATED = {
    "BranchLike": "composer.registry",
    "InstructionLike": "composer.registry",
    "CompiledExpression": "composer.templating",
    "compile_expression": "composer.templating",
    "template_field": "composer.templating",
    "branch_memory": "composer.templating.views",
    "Expression": "composer.templating",
}
"""Names the contract no longer holds: importable for one release, with a warning."""


def test_plugin_module_exports_exactly_the_contract() -> None:
    """Plugin authors depend on this list; a name added or dropped must be a decision."""
    assert set(composer.plugin.__all__) == EXPECTED_PLUGIN_API
    assert [n for n in composer.plugin.__all__ if not hasattr(composer.plugin, n)] == []


@pytest.mark.parametrize("name", sorted(DEPRECATED))
def test_a_name_dropped_from_the_contract_still_imports_with_a_warning(name: str) -> None:
    """A third-party type that imported one keeps working for a release, and is told where
    the name lives."""
    home = importlib.import_module(DEPRECATED[name])
    with pytest.warns(DeprecationWarning, match=f"composer.plugin.{name} is deprecated"):
        value = getattr(composer.plugin, name)
    assert value is getattr(home, name)
    with pytest.warns(DeprecationWarning, match=DEPRECATED[name]):
        exec(f"from composer.plugin import {name}", {})


def test_an_unknown_plugin_name_is_an_attribute_error_without_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError, match="no attribute 'nothing'"):
            _ = composer.plugin.nothing  # type: ignore[attr-defined]


def test_no_builtin_type_redefines_a_name_of_the_contract() -> None:
    """One ``Progress``, one ``Problem``: a built-in module that defines a name the contract
    exports (instead of importing it) makes two meanings of it."""
    root = Path(builtin_providers.__file__).parent
    defined = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            names: list[str] = []
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names = [node.target.id]
            defined.update(dict.fromkeys(names, path.name))
    assert {n: f for n, f in defined.items() if n in composer.plugin.__all__} == {}


class BareConfig(ProviderConfig):
    type: Literal["bare"] = "bare"
    text: str


class BareProvider:
    """No base class, no guard of its own: only ``provide``, counting its calls."""

    def __init__(self, config: BareConfig, calls: list[str]) -> None:
        self.text = config.text
        self.calls = calls

    async def provide(self, branch: Any, instruction: Any) -> str | None:
        self.calls.append(self.text)
        return self.text


CALLS: list[str] = []
bare_type = ProviderType("bare", BareConfig, lambda config, ctx: BareProvider(config, CALLS))


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


@pytest.fixture
def side_by_side(tmp_path: Path) -> composer.Manifest:
    """A plugin and a static provider with the same guard, and each also disabled."""
    CALLS.clear()
    manifest = write(
        tmp_path / "m.yaml",
        """
        version: 1
        providers:
          - {name: plugin, type: bare, text: P, when: "'go' in instruction.text"}
          - {name: builtin, type: static, text: S, when: "'go' in instruction.text"}
          - {name: plugin-off, type: bare, text: X, enabled: false}
          - {name: builtin-off, type: static, text: Y, enabled: false}
        """,
    )
    return composer.load_manifest(manifest, types=ProviderTypes([bare_type, static_type]))


async def turn(manifest: composer.Manifest, text: str) -> composer.ProviderReport:
    branch = Branch("sys\n")
    composer.attach(branch, manifest)
    prepared = await prepare_turn(branch, Instruction(text))
    assert prepared.report is not None
    return prepared.report


async def test_a_false_when_silences_a_bare_plugin_exactly_as_static(
    side_by_side: composer.Manifest,
) -> None:
    report = await turn(side_by_side, "stop")
    assert report.fired == []
    assert (report.skipped, report.failed, report.blocks) == ([], [], [])
    assert CALLS == []  # the plugin was not even called


async def test_a_true_when_fires_both(side_by_side: composer.Manifest) -> None:
    report = await turn(side_by_side, "go")
    assert [row["provider_name"] for row in report.fired] == ["plugin", "builtin"]
    assert report.blocks == ["P", "S"]
    assert CALLS == ["P"]


async def test_disabled_plugin_and_builtin_are_never_built(
    side_by_side: composer.Manifest,
) -> None:
    registry = build_registry(side_by_side)
    assert registry.names == ["plugin", "builtin"]
    assert CALLS == []


async def test_a_failing_guard_fails_the_plugin_like_static(tmp_path: Path) -> None:
    """A guard that raises is the provider's failure (ADR D2), whichever type it guards."""
    CALLS.clear()
    manifest = composer.load_manifest(
        write(
            tmp_path / "m.yaml",
            """
            version: 1
            providers:
              - {name: plugin, type: bare, text: P, when: "1 // 0"}
              - {name: builtin, type: static, text: S, when: "1 // 0"}
            """,
        ),
        types=ProviderTypes([bare_type, static_type]),
    )
    report = await turn(manifest, "go")
    assert report.failed == ["plugin", "builtin"]
    assert CALLS == []


async def test_types_that_validated_a_manifest_build_it(tmp_path: Path) -> None:
    """A manifest loaded with ``types=`` attaches without naming them again."""
    types = ProviderTypes([bare_type])
    manifest = composer.load_manifest(
        write(tmp_path / "m.yaml", "version: 1\nproviders: [{name: p, type: bare, text: T}]\n"),
        types=types,
    )
    assert catalog_of(manifest) is types
    assert catalog_of(composer.Manifest(version=1)) is None  # not loaded: the installed types
    assert "bare" not in ProviderTypes.installed()
    branch = Branch("sys\n")
    composer.attach(branch, manifest)
    assert (await prepare_turn(branch, "x")).guidance == "sys\nT"


def test_attach_never_scans_entry_points(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manifest = composer.load_manifest(
        write(tmp_path / "m.yaml", "version: 1\nproviders: [{name: s, type: static, text: T}]\n")
    )

    def scan(**_: Any) -> Any:
        raise AssertionError("entry points scanned")

    monkeypatch.setattr("composer.catalog.entry_points", scan)
    for _ in range(3):
        composer.attach(Branch("s"), manifest)


class HookedProvider:
    """Declares every optional hook; records what the engine called."""

    def __init__(self, seen: list[str]) -> None:
        self.seen = seen

    async def provide(self, branch: Any, instruction: Any) -> str | None:
        return "h"

    async def writeback(self, branch: Any, action_responses: list[Any]) -> None:
        self.seen.append(f"writeback {action_responses}")

    async def warm_up(self, progress: Any = None) -> str:
        if progress is not None:
            progress(1, 1)
        self.seen.append("warm_up")
        return "warm"

    async def aclose(self) -> None:
        self.seen.append("aclose")


class HookedConfig(ProviderConfig):
    type: Literal["hooked"] = "hooked"


def hooked_manifest(seen: list[str]) -> tuple[composer.Manifest, ProviderTypes]:
    hooked = ProviderType("hooked", HookedConfig, lambda config, ctx: HookedProvider(seen))
    bare = ProviderType("bare", BareConfig, lambda config, ctx: BareProvider(config, []))
    configs = [HookedConfig(name="h"), BareConfig(name="b", text="b")]
    manifest = composer.Manifest(version=1, providers=configs)
    return manifest, ProviderTypes([hooked, bare])


async def test_declared_hooks_are_called_and_absent_ones_are_not_invented() -> None:
    seen: list[str] = []
    manifest, types = hooked_manifest(seen)
    registry = build_registry(manifest, types=types)
    hooked, bare = registry.managed
    assert hasattr(hooked, "writeback")
    assert not hasattr(bare, "writeback")  # ADR D7: a provider without the hook is skipped

    progress_seen: list[tuple[str, int, int]] = []
    failures = await registry.warm_up(
        lambda name: lambda done, total: progress_seen.append((name, done, total))
    )
    assert failures == {}
    assert progress_seen == [("h", 1, 1)]
    await registry.gather_writeback(Branch("s"), ["r1"])
    await registry.aclose()
    assert seen == ["warm_up", "writeback ['r1']", "aclose"]


async def test_aclose_tries_every_provider_before_raising() -> None:
    closed: list[str] = []

    class Closing:
        def __init__(self, name: str, fail: bool) -> None:
            self.name, self.fail = name, fail

        async def provide(self, branch: Any, instruction: Any) -> str | None:
            return None

        async def aclose(self) -> None:
            closed.append(self.name)
            if self.fail:
                raise OSError(self.name)

    providers = [
        ManagedProvider(Closing("a", True), BareConfig(name="a", text="")),
        ManagedProvider(Closing("b", False), BareConfig(name="b", text="")),
    ]
    registry = composer.build.ManifestRegistry(100, providers)
    with pytest.raises(OSError, match="a"):
        await registry.aclose()
    assert closed == ["a", "b"]


async def test_manifest_aclose_closes_shared_state_once() -> None:
    closed: list[str] = []

    class Pool:
        async def aclose(self) -> None:
            closed.append("pool")

    manifest = composer.Manifest(version=1)
    context = BuildContext(manifest)
    first = context.shared("pool", Pool)
    assert context.shared("pool", Pool) is first
    await manifest.aclose()
    assert closed == ["pool"]
    assert context.shared("pool", Pool) is not first  # made again after closing


def test_unknown_type_is_a_plugin_error_listing_known_types() -> None:
    types = ProviderTypes([static_type])
    with pytest.raises(UnknownProviderType, match="known types: static") as caught:
        types.get("nope")
    assert isinstance(caught.value, PluginError)
    assert isinstance(caught.value, KeyError)


def test_a_catalog_refuses_what_is_not_a_provider_type() -> None:
    with pytest.raises(PluginError, match="not a ProviderType"):
        ProviderTypes([object()])  # type: ignore[list-item]
    with pytest.raises(PluginError, match="registered twice"):
        ProviderTypes([static_type, ProviderType("static", BareConfig, bare_type.factory)])


class SyncClose:
    """A provider whose ``aclose`` is a plain function: awaiting it would raise TypeError."""

    async def provide(self, branch: Any, instruction: Any) -> str | None:
        return "s"

    def aclose(self) -> None:
        pass


class SyncWarmUp:
    async def provide(self, branch: Any, instruction: Any) -> str | None:
        return "s"

    def warm_up(self, progress: Any = None) -> None:
        pass


class SyncWriteback:
    async def provide(self, branch: Any, instruction: Any) -> str | None:
        return "s"

    def writeback(self, branch: Any, action_responses: list[Any]) -> None:
        pass


class OddConfig(ProviderConfig):
    type: Literal["odd"] = "odd"


@pytest.mark.parametrize(
    ("cls", "method"),
    [(SyncClose, "aclose"), (SyncWarmUp, "warm_up"), (SyncWriteback, "writeback")],
)
def test_a_provider_with_a_synchronous_hook_is_refused_at_load_naming_its_class(
    tmp_path: Path, cls: type, method: str
) -> None:
    """Refused when the engine wraps it, at the entry's line, before any turn or shutdown."""
    odd = ProviderType("odd", OddConfig, lambda config, ctx: cls())
    manifest = composer.load_manifest(
        write(
            tmp_path / "m.yaml",
            """
            version: 1
            providers:
              - {name: fine, type: static, text: T}
              - {name: odd-one, type: odd}
            """,
        ),
        types=ProviderTypes([odd, static_type]),
    )
    with pytest.raises(PluginError) as caught:
        composer.attach(Branch("s"), manifest)
    message = str(caught.value)
    assert f"{__name__}.{cls.__qualname__}.{method} must be a coroutine function" in message
    assert message.startswith(f"{tmp_path / 'm.yaml'}:4:")  # the entry of odd-one
    assert "provider 'odd-one' (type odd)" in message


class Provides:
    async def provide(self, branch: Any, instruction: Any) -> str | None:
        return "s"


class WritebackTooFew(Provides):
    async def writeback(self, branch: Any) -> None:
        pass


class WritebackTooMany(Provides):
    async def writeback(self, branch: Any, action_responses: list[Any], store: Any) -> None:
        pass


class WritebackByKeyword(Provides):
    async def writeback(self, branch: Any, *, action_responses: list[Any]) -> None:
        pass


class WarmUpWithoutProgress(Provides):
    async def warm_up(self) -> None:
        pass


class AcloseWithTimeout(Provides):
    async def aclose(self, timeout: float) -> None:
        pass


class CacheKeyOfBranch(Provides):
    def cache_key(self, branch: Any) -> str:
        return ""


class DisplayQueryOfNothing(Provides):
    @staticmethod
    def display_query() -> str:
        return ""


class ConstantOfBranch(Provides):
    def constant_text(self, branch: Any) -> str | None:
        return None


@pytest.mark.parametrize(
    ("cls", "call", "why"),
    [
        (WritebackTooFew, "writeback(branch, action_responses)", "too many positional"),
        (WritebackTooMany, "writeback(branch, action_responses)", "missing a required argument"),
        (WritebackByKeyword, "writeback(branch, action_responses)", "too many positional"),
        (WarmUpWithoutProgress, "warm_up(progress)", "too many positional"),
        (AcloseWithTimeout, "aclose()", "missing a required argument: 'timeout'"),
        (CacheKeyOfBranch, "cache_key(branch, instruction)", "too many positional"),
        (DisplayQueryOfNothing, "display_query(branch, instruction)", "too many positional"),
        (ConstantOfBranch, "constant_text()", "missing a required argument: 'branch'"),
    ],
)
def test_a_provider_hook_that_cannot_take_the_engines_call_is_refused_naming_class_and_hook(
    tmp_path: Path, cls: type, call: str, why: str
) -> None:
    """Refused when the engine wraps it, at the entry's line, rather than with a TypeError
    at the first turn, writeback or shutdown; the message shows both signatures."""
    odd = ProviderType("odd", OddConfig, lambda config, ctx: cls())
    path = write(tmp_path / "m.yaml", "version: 1\nproviders:\n  - {name: odd-one, type: odd}\n")
    manifest = composer.load_manifest(path, types=ProviderTypes([odd]))
    with pytest.raises(PluginError) as caught:
        composer.attach(Branch("s"), manifest)
    message = str(caught.value)
    assert message.startswith(f"{path}:3:")
    method = call.split("(")[0]
    assert f"provider 'odd-one' (type odd): {__name__}.{cls.__qualname__}.{method}(" in message
    assert f"cannot take the engine's call {call}: {why}" in message


class LooseHooks(Provides):
    """Every hook, each in a shape the engine's call still fits."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    async def writeback(self, b: Any, responses: list[Any], limit: int = 10) -> None:
        self.seen.append(("writeback", responses, limit))

    async def warm_up(self, progress: Any) -> None:  # no default: the engine always passes it
        self.seen.append(("warm_up", progress))

    async def aclose(self, *args: Any, timeout: float = 1.0) -> None:
        self.seen.append(("aclose", args, timeout))

    def cache_key(self, branch: Any, instruction: Any, **extra: Any) -> str:
        return "k"

    @classmethod
    def display_query(cls, *args: Any) -> str:
        return "q"

    @staticmethod
    def constant_text() -> str | None:
        return None


async def test_hooks_with_extra_optional_parameters_or_star_args_are_accepted_and_called() -> None:
    provider = LooseHooks()
    manifest = composer.Manifest(version=1, providers=[OddConfig(name="l")])
    types = ProviderTypes([ProviderType("odd", OddConfig, lambda config, ctx: provider)])
    registry = build_registry(manifest, types=types)
    (managed,) = registry.managed
    assert {hook.__name__ for hook in managed.hooks} == {
        "Writeback",
        "WarmUp",
        "Closeable",
        "CacheKey",
        "DisplayQuery",
        "Constant",
    }
    await registry.warm_up()
    await registry.gather_writeback(Branch("s"), ["r"])
    await registry.aclose()
    assert provider.seen == [("warm_up", None), ("writeback", ["r"], 10), ("aclose", (), 1.0)]


class SecretsOfField(OddConfig):
    def secrets(self, field: str) -> list[str]:
        return []


class PartitionOfTenant(OddConfig):
    def partition(self, tenant: str) -> str | None:
        return None


class CheckStrictly(OddConfig):
    def check(self, strict: bool = False) -> list[Any]:  # an optional extra: accepted
        return []


@pytest.mark.parametrize(
    ("config", "call"), [(SecretsOfField, "secrets()"), (PartitionOfTenant, "partition()")]
)
def test_a_config_hook_that_cannot_take_the_engines_call_refuses_the_type(
    config: type[ProviderConfig], call: str
) -> None:
    """A catalog refuses the type when it is added; an installed one fails, located, in each
    manifest that names it (``test_installed_plugin``)."""
    method = call.split("(")[0]
    with pytest.raises(PluginError) as caught:
        ProviderTypes([ProviderType("odd", config, lambda config, ctx: Provides())])
    message = str(caught.value)
    assert message.startswith(f"{__name__}.{config.__qualname__}.{method}(self, ")
    assert f"cannot take the engine's call {call}: missing a required argument" in message
    ProviderTypes([ProviderType("odd", CheckStrictly, lambda config, ctx: Provides())])


def test_shared_state_whose_aclose_needs_an_argument_is_refused_naming_its_class() -> None:
    context = BuildContext(composer.Manifest(version=1))

    class Pool:
        async def aclose(self, now: bool) -> None:
            pass

    with pytest.raises(PluginError, match=r"\.Pool\.aclose\(self, now\) cannot take the engine"):
        context.shared("pool", Pool)
    assert context.manifest.shared == {}


async def test_a_watcher_refuses_to_start_on_a_provider_with_a_synchronous_aclose(
    tmp_path: Path,
) -> None:
    odd = ProviderType("odd", OddConfig, lambda config, ctx: SyncClose())
    path = write(tmp_path / "m.yaml", "version: 1\nproviders: [{name: o, type: odd}]\n")
    watcher = composer.ManifestWatcher(path, types=ProviderTypes([odd]), watch="poll")
    with pytest.raises(PluginError, match=r"SyncClose\.aclose must be a coroutine function"):
        await watcher.start()
    await watcher.aclose()


def test_shared_state_with_a_synchronous_aclose_is_refused_naming_its_class() -> None:
    """``Manifest.aclose`` awaits what ``shared`` keeps: a plain ``aclose`` is refused when it
    is made, not at shutdown."""
    context = BuildContext(composer.Manifest(version=1))

    class Pool:
        def aclose(self) -> None:
            pass

    with pytest.raises(PluginError, match=r"\.Pool\.aclose must be a coroutine function"):
        context.shared("pool", Pool)
    assert context.manifest.shared == {}


async def test_shared_state_keeps_the_type_its_maker_gave() -> None:
    context = BuildContext(composer.Manifest(version=1))
    first: list[int] = context.shared("numbers", lambda: [1])
    first.append(2)
    assert context.shared("numbers", list) == [1, 2]


async def test_async_with_a_registry_closes_its_providers_and_not_the_manifest() -> None:
    seen: list[str] = []
    manifest, types = hooked_manifest(seen)
    closed: list[str] = []

    class Pool:
        async def aclose(self) -> None:
            closed.append("pool")

    BuildContext(manifest).shared("pool", Pool)
    async with build_registry(manifest, types=types) as registry:
        assert registry.names == ["h", "b"]
    assert seen == ["aclose"]
    assert closed == []  # the manifest's shared state is the manifest's to close
    async with manifest:
        pass
    assert closed == ["pool"]


async def test_async_with_a_loaded_manifest_closes_its_shared_state(tmp_path: Path) -> None:
    closed: list[str] = []

    class Pool:
        async def aclose(self) -> None:
            closed.append("pool")

    path = write(tmp_path / "m.yaml", "version: 1\nproviders: [{name: s, type: static, text: T}]\n")
    loaded: list[composer.Manifest] = []

    async def use_then_fail() -> None:
        async with composer.load_manifest(path) as manifest:
            loaded.append(manifest)
            BuildContext(manifest).shared("pool", Pool)
            branch = Branch("s")
            composer.attach(branch, manifest)
            assert (await prepare_turn(branch, "x")).guidance == "sT"
            raise RuntimeError("inside")  # closed on the way out of an error too

    with pytest.raises(RuntimeError, match="inside"):
        await use_then_fail()
    assert closed == ["pool"]
    assert loaded[0].shared == {}
