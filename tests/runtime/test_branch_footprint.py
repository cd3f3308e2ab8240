"""What an attached branch holds of its own: its registry and providers, nothing a manifest
can share. The engine's wrapping of each entry, the compiled templates with their locations
and a constant text are made once per loaded manifest and shared by every branch (identity,
not copies); a branch that keeps no report history holds no history structure."""

from __future__ import annotations

from pathlib import Path

import composer
from composer.build import ManagedProvider, ManifestRegistry
from composer.manifest.source import SourceStr
from composer.templating import compile_template

RULES = "House rules: answer in English, put the exact command first. " * 200

MANIFEST = f"""\
version: 1
budget: 10000
providers:
  - name: rules
    type: static
    stable: true
    text: "{RULES}"
  - name: hello
    type: static
    when: "'deploy' in instruction.text"
    text: "Hello {{{{ branch.name }}}}"
  - name: labelled
    type: static
    wrap: "<{{{{ provider.name }}}} {{{{ nonce }}}}>{{{{ text }}}}</{{{{ provider.name }}}}>"
    text: "{{{{ instruction.text }}}}"
"""


def _manifest(tmp_path: Path, runtime: str = "") -> composer.Manifest:
    path = tmp_path / "m.yaml"
    path.write_text(MANIFEST + runtime)
    return composer.load_manifest(path)


def _attached(manifest: composer.Manifest, count: int) -> list[ManifestRegistry]:
    return [composer.attach(composer.Branch("s\n", name=f"b{i}"), manifest) for i in range(count)]


def test_branches_share_the_manifest_s_wrapping_not_copies(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path)
    registries = _attached(manifest, 50)
    first = registries[0]
    for registry in registries[1:]:
        assert registry is not first
        for mine, theirs in zip(registry.managed, first.managed, strict=True):
            assert mine is not theirs  # each branch its own provider and wrapper
            assert mine.provider is not theirs.provider
            assert mine.plan is theirs.plan  # ... around one shared plan of the entry
            assert mine.config is theirs.config  # the manifest's own config, not a copy
        assert registry.stable_names is first.stable_names
        assert registry.wrapped_names is first.wrapped_names
    configs = [c for c in manifest.providers if c.enabled]
    assert [m.config for m in first.managed] == configs
    assert all(m.config is c for m, c in zip(first.managed, configs, strict=True))


async def test_a_constant_text_is_one_string_on_every_branch(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path)
    branches = [composer.Branch("s\n") for _ in range(20)]
    for branch in branches:
        composer.attach(branch, manifest)
    blocks = []
    for branch in branches:
        turn = await composer.prepare_turn(branch, "status")
        assert turn.report is not None
        blocks.append(turn.report.blocks[0])
    assert blocks[0] == RULES
    assert type(blocks[0]) is str  # a plain str, not the manifest's located value ...
    assert all(block is blocks[0] for block in blocks)  # ... made once for all branches
    rules = getattr(manifest.providers[0], "text", None)
    assert isinstance(rules, SourceStr)
    assert blocks[0] is not rules


def test_the_located_templates_and_their_locations_are_shared(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path)
    first, second = _attached(manifest, 2)
    text = getattr(next(c for c in manifest.providers if c.name == "hello"), "text", None)
    assert isinstance(text, SourceStr)
    # what each branch's static provider compiles: one located template for the place
    assert compile_template(text) is compile_template(text)
    assert compile_template(text).where is text.where
    when_first, when_second = first.managed[1].plan.when, second.managed[1].plan.when
    assert when_first is not None
    assert when_first is when_second
    assert when_first.where == f'provider "hello": when ({tmp_path / "m.yaml"}:10:11)'


async def test_a_branch_that_keeps_no_history_has_none(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path, "runtime: {metrics: false, report: {history: 0}}\n")
    branch = composer.Branch("s\n")
    registry = composer.attach(branch, manifest)
    for text in ("deploy", "status", "deploy again"):
        await composer.prepare_turn(branch, text)
    assert registry._history is None
    assert registry.history == []


async def test_history_is_made_on_the_first_report_it_keeps(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path, "runtime: {report: {history: 2}}\n")
    branch = composer.Branch("s\n")
    registry = composer.attach(branch, manifest)
    assert registry._history is None  # attached, no turn yet: nothing to keep
    reports = []
    for text in ("one", "two", "three"):
        turn = await composer.prepare_turn(branch, text)
        reports.append(turn.report)
    assert registry._history is not None
    assert registry.history == reports[1:]
    await manifest.aclose()


def test_a_wrapper_holds_only_its_provider_and_what_it_says_of_itself(tmp_path: Path) -> None:
    managed = _attached(_manifest(tmp_path), 1)[0].managed
    for wrapper in managed:
        assert not hasattr(wrapper, "__dict__")  # no per-branch copy of the options
    assert set(ManagedProvider.__slots__) == {"_constant_text", "hooks", "plan", "provider"}
