"""The documentation says what the code does: its references, its examples and its quick start.

The pages are README.md and docs/ (the mkdocs site). The two generated references must equal
what the code generates; every Python example runs; every YAML example loads (or, for a test
file, passes); every ``composer`` command shown parses, and shown output is what the command
prints; every test and benchmark a page names exists; and the site builds with ``--strict``
when mkdocs is installed.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import inspect
import os
import re
import shlex
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from docpages import DOCS, README, REPO, Block, blocks, copy_configs, matches_shown, pages

import composer
from builtin_providers.static import provider_type as static_type
from composer.catalog import ProviderTypes
from composer.cli import main
from composer.cli.main import build_parser
from composer.cli.reference import (
    CLI_END,
    CLI_START,
    END,
    START,
    cli_reference,
    markdown_reference,
    with_cli_reference,
    with_reference,
)
from composer.plugin import ProviderType
from composer.serve.principals import load_principals

MANIFEST_PAGE = DOCS / "reference" / "manifest.md"
CLI_PAGE = DOCS / "reference" / "cli.md"
LIBRARY = DOCS / "guides" / "library.md"
PLUGINS = DOCS / "plugins.md"
HOT_RELOAD = DOCS / "guides" / "hot-reload.md"
INTEGRATIONS = DOCS / "guides" / "integrations.md"
QUICK_START = DOCS / "getting-started.md"
SERVING = DOCS / "guides" / "serving.md"

# Every Python block of the pages, and the test that runs it: a new block needs a new test.
PYTHON_RUN_BY = {
    (README, 0): "test_the_library_examples_run",
    (LIBRARY, 0): "test_the_library_examples_run",
    (LIBRARY, 1): "test_the_preview_example_runs",
    (SERVING, 0): "tests/serve/test_library.py",
    (SERVING, 1): "tests/serve/test_library.py",
    (PLUGINS, 0): "test_the_plugin_example_is_a_working_provider_type",
    (HOT_RELOAD, 0): "test_the_hot_reload_example_runs",
    (INTEGRATIONS, 0): "tests/lionagi_support/test_docs_lionagi.py",
    (INTEGRATIONS, 1): "tests/lionagi_support/test_docs_lionagi.py",
}

# Values for the ${VAR}s of YAML examples that have no default (loading never connects).
PLACEHOLDERS = {
    "MEMORY_DSN": "postgresql://memory@127.0.0.1/agents",
    "REDIS_URL": "redis://127.0.0.1:6379/0",
}


def text_of(page: Path) -> str:
    return page.read_text(encoding="utf-8")


def all_blocks(language: str) -> list[Block]:
    return [block for page in pages() for block in blocks(page, language)]


def run_python(block: Block, namespace: dict[str, Any]) -> Any:
    """Run a Python block as written; a block with top-level ``await`` returns a coroutine."""
    code = compile(
        block.text, block.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True
    )
    return eval(code, namespace)


@pytest.fixture
def in_configs_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory holding a fresh copy of configs/, as a checkout has it."""
    copy_configs(tmp_path)
    monkeypatch.chdir(tmp_path)
    for name in ("STATUS_URL", "STATUS_TOKEN", "COMPOSER_ENV", "COMPOSER_MANIFEST", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


# ------------------------------------------------------------------ the generated references


def test_manifest_reference_matches_the_models() -> None:
    """The manifest reference is exactly what the models generate (regenerate, don't edit)."""
    page = text_of(MANIFEST_PAGE)
    assert START in page
    assert END in page
    assert with_reference(page, markdown_reference()) == page, (
        "docs/reference/manifest.md is stale: run `python -m composer.cli.reference`"
    )
    generated = page[page.index(START) : page.index(END)]
    for name in ("static", "file_corpus", "memory", "http", "mcp"):
        assert f"## `type: {name}`" in generated


def test_reference_lists_every_field_of_every_builtin_type() -> None:
    """No field is left out: each model field (by its alias) has a row."""
    reference = markdown_reference()
    for ptype in ProviderTypes.installed():
        for name, field in ptype.config.model_fields.items():
            if name != "type":
                assert f"| `{field.alias or name}` |" in reference, (ptype.name, name)


def test_command_reference_matches_the_parser() -> None:
    """Each command's section is exactly what its parser says (regenerate, don't edit)."""
    page = text_of(CLI_PAGE)
    assert CLI_START in page
    assert CLI_END in page
    assert with_cli_reference(page, cli_reference()) == page, (
        "docs/reference/cli.md is stale: run `python -m composer.cli.reference`"
    )
    for command in ("validate", "preview", "render", "diff", "test", "schema", "serve"):
        assert f"### `composer {command}`" in page


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The parsers of ``parser``'s subcommands by name (aliases included), if it has any."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action._name_parser_map)
    return {}


def _synopsis() -> list[tuple[list[str], str]]:
    """Each command of the page's synopsis: its words (``memory import``) and its text."""
    block = next(b for b in blocks(CLI_PAGE, "text") if b.text.startswith("composer "))
    commands: list[tuple[list[str], str]] = []
    for line in block.text.splitlines():
        if named := re.match(r"composer ([a-z]+)(?: ([a-z]+))?", line):
            commands.append(([w for w in named.groups() if w], line))
        elif line.startswith(" ") and commands and line.lstrip().startswith("["):
            words, text = commands[-1]
            commands[-1] = (words, text + line)
    return commands


def test_the_synopsis_names_every_command_and_only_options_it_has() -> None:
    """The hand-written synopsis: the same commands as ``composer --help``, each option real."""
    top = _subcommands(build_parser())
    documented = {words[0] for words, _ in _synopsis()}
    assert documented == set(top), "add or remove a synopsis line in docs/reference/cli.md"
    for words, line in _synopsis():
        parser = top[words[0]]
        subs = _subcommands(parser)
        if subs:
            documented_subs = {w[1] for w, _ in _synopsis() if w[0] == words[0]}
            assert documented_subs == set(subs), f"composer {words[0]}: {set(subs)}"
            parser = subs[words[1]]
        known = {option for action in parser._actions for option in action.option_strings}
        for option in re.findall(r"(?<![\w-])--[a-z][\w-]*", line):
            assert option in known, f"{line.strip()}: {option} is no option of the command"
    result = subprocess.run(
        [sys.executable, "-m", "composer", "--help"], capture_output=True, text=True, check=True
    )
    for command in documented:
        assert re.search(rf"\b{command}\b", result.stdout), command


# ------------------------------------------------------------------ the quick start


def test_quick_start_is_two_make_targets_that_exist() -> None:
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"^demo:", makefile, flags=re.M)
    assert re.search(r"^test:", makefile, flags=re.M)
    assert "composer preview configs --env dev" in makefile
    for page in (README, QUICK_START):
        commands = "".join(b.text for b in blocks(page, "sh"))
        assert "make demo" in commands, page
        assert "make test" in commands, page


def test_make_demo_on_a_fresh_checkout_installs_composer_alone(tmp_path: Path) -> None:
    """The demo is one offline preview: it installs the core and no extra (the frameworks
    cost a minute and more), while ``make test`` installs every extra."""

    def planned(target: str) -> list[str]:
        venv = tmp_path / target
        result = subprocess.run(
            ["make", "-n", "-C", str(REPO), target, f"VENV={venv}"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        return [line for line in result.stdout.splitlines() if " install " in line]

    demo = planned("demo")
    assert demo
    assert all("[" not in line for line in demo), demo
    assert any(line.endswith("install --quiet -e .") for line in demo), demo
    assert any("[" in line and "langchain" in line for line in planned("test"))


@pytest.mark.parametrize("page", [README, QUICK_START], ids=["README", "getting-started"])
def test_the_quick_start_shows_what_make_demo_prints(
    page: Path, in_configs_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The output shown is the demo's on a fresh checkout (a first run: no memory.sqlite)."""
    makefile = (REPO / "Makefile").read_text()
    argv = shlex.split(re.findall(r"/composer (preview configs [^\n]+)", makefile)[0])
    assert main(argv) == 0
    printed = capsys.readouterr().out
    shown = next(b for b in blocks(page, "text") if b.text.startswith("manifest: configs/dev"))
    assert matches_shown(shown.text, printed), f"{shown.where} differs from:\n{printed}"


# ------------------------------------------------------------------ Python examples


def test_every_python_example_is_run_by_a_test() -> None:
    found = {(b.page, i) for page in pages() for i, b in enumerate(blocks(page, "python"))}
    assert found == set(PYTHON_RUN_BY), (
        "a Python block without a test (or a test without its block): "
        f"{sorted((str(p.relative_to(REPO)), i) for p, i in found ^ set(PYTHON_RUN_BY))}"
    )


@pytest.mark.parametrize("page", [README, LIBRARY], ids=["README", "library"])
def test_the_library_examples_run(
    page: Path, in_configs_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The library example runs as written, from a checkout's root."""
    assert run_python(blocks(page, "python")[0], {"__name__": "__main__"}) is None
    out = capsys.readouterr().out
    assert out.startswith("You are the on-call assistant.\nHouse rules for payments")
    assert "'provider_name': 'house-rules'" in out


def test_the_preview_example_runs(
    in_configs_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The library's preview, as written: a row per declared provider, then the folded text."""
    assert run_python(blocks(LIBRARY, "python")[1], {"__name__": "__main__"}) is None
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("house-rules fired ")
    assert "status disabled None " in out
    used = next(line for line in out if line.endswith("tokens; the model would see:"))
    assert used.endswith("of 1200 tokens; the model would see:")
    assert out[out.index(used) + 1] == "You are a helpful assistant."
    assert out[out.index(used) + 2].startswith("House rules for payments: ")


async def test_the_plugin_example_is_a_working_provider_type(tmp_path: Path) -> None:
    """The "Writing a provider type" example loads through the same path as built-ins."""
    namespace: dict[str, Any] = {"__name__": "docs_plugin"}
    assert run_python(blocks(PLUGINS, "python")[0], namespace) is None
    tickets = namespace["provider_type"]
    assert isinstance(tickets, ProviderType)
    manifest_file = tmp_path / "m.yaml"
    manifest_file.write_text(
        textwrap.dedent(
            """\
            version: 1
            providers:
              - name: queue
                type: tickets
                queue: "ops-{{ branch.name }}"
            """
        )
    )
    types = ProviderTypes([tickets, static_type])
    manifest = composer.load_manifest(manifest_file, types=types)
    branch = composer.Branch("sys\n", name="payments")
    composer.attach(branch, manifest, types=types)
    turn = await composer.prepare_turn(branch, "hello")
    assert turn.guidance == "sys\nNo open tickets in ops-payments."


async def test_the_hot_reload_example_runs(
    in_configs_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The watcher example, top-level ``await`` and all, on the bundled prod environment."""
    monkeypatch.setenv("STATUS_TOKEN", "placeholder-for-tests")
    namespace: dict[str, Any] = {"__name__": "__main__"}
    coroutine = run_python(blocks(HOT_RELOAD, "python")[0], namespace)
    assert inspect.iscoroutine(coroutine)
    await coroutine
    watcher, turn = namespace["watcher"], namespace["turn"]
    assert watcher.error is None
    assert watcher.failures == 0
    assert turn.guidance.startswith("You are the on-call assistant.\nHouse rules for payments")


# ------------------------------------------------------------------ YAML examples


def _agrees(excerpt: Any, real: Any) -> bool:
    """Whether ``excerpt`` is part of ``real``: mappings by key, lists of named entries by
    name, anything else equal."""
    if isinstance(excerpt, dict):
        return isinstance(real, dict) and all(
            key in real and _agrees(value, real[key]) for key, value in excerpt.items()
        )
    if isinstance(excerpt, list) and all(isinstance(e, dict) and "name" in e for e in excerpt):
        named = {entry.get("name"): entry for entry in real} if isinstance(real, list) else {}
        return all(e["name"] in named and _agrees(e, named[e["name"]]) for e in excerpt)
    return bool(excerpt == real)


def _written_into(base: dict[str, Any], fragment: dict[str, Any]) -> dict[str, Any]:
    """``fragment`` written into ``base``: its keys replace the base's, and each provider's keys
    replace those of the base provider of the same name (a new name is appended)."""
    result = dict(base)
    for key, value in fragment.items():
        if key != "providers":
            result[key] = value
            continue
        providers = [dict(entry) for entry in base["providers"]]
        for entry in value:
            same = next((p for p in providers if p["name"] == entry["name"]), None)
            if same is None:
                providers.append(entry)
            else:
                same.update(entry)
        result["providers"] = providers
    return result


def _set_placeholders(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in re.findall(r"\$\{(\w+)\}", text):
        monkeypatch.setenv(name, PLACEHOLDERS.get(name, "placeholder-for-docs"))


YAML_BLOCKS = all_blocks("yaml")


@pytest.mark.parametrize("block", YAML_BLOCKS, ids=[b.where for b in YAML_BLOCKS])
def test_every_yaml_example_loads(
    block: Block,
    in_configs_copy: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each YAML block is what it says: an excerpt of a bundled file (configs/, deploy/), a
    principals file, a test file that passes, a question file that runs, a CI workflow whose
    commands parse, Prometheus jobs scraping /metrics, or a manifest (or a fragment of one,
    written into the bundled base.yaml) that loads."""
    configs = in_configs_copy / "configs"
    first = block.text.splitlines()[0]
    data = yaml.safe_load(block.text)
    assert isinstance(data, dict), block.where
    _set_placeholders(block.text, monkeypatch)
    if named := re.fullmatch(r"# configs/([\w.-]+)", first):
        real = yaml.safe_load((configs / named.group(1)).read_text())
        assert _agrees(data, real), f"{block.where} is not what configs/{named.group(1)} holds"
    elif named := re.fullmatch(r"# (deploy/[\w./-]+\.yaml)", first):
        real = yaml.safe_load((REPO / named.group(1)).read_text())
        assert _agrees(data, real), f"{block.where} is not what {named.group(1)} holds"
    elif first.startswith("# principals.yaml"):
        path = in_configs_copy / "principals.yaml"
        path.write_text(block.text)
        for entry in data["principals"]:
            if "token_file" in entry:
                (in_configs_copy / entry["token_file"]).parent.mkdir(parents=True, exist_ok=True)
                (in_configs_copy / entry["token_file"]).write_text("a-token-for-the-docs\n")
        principals = load_principals(path)
        assert [p.name for p in principals.principals] == [e["name"] for e in data["principals"]]
    elif "tests" in data:
        path = configs / "docs-tests.yaml"
        path.write_text(block.text)
        assert main(["test", str(path)]) == 0, capsys.readouterr().out
    elif "questions" in data:
        path = configs / "docs-questions.yaml"
        path.write_text(block.text)
        assert main(["eval", str(path)]) == 0, capsys.readouterr()
    elif "jobs" in data:
        steps = [step for job in data["jobs"].values() for step in job["steps"]]
        commands = [s["run"] for s in steps if str(s.get("run", "")).startswith("composer ")]
        assert commands
        for command in commands:
            _parses(block, command)
    elif "scrape_configs" in data:  # Prometheus jobs: each scrapes composer serve's /metrics
        for job in data["scrape_configs"]:
            assert job.get("metrics_path", "/metrics") == "/metrics", block.where
            assert job["static_configs"][0]["targets"], block.where
    elif "apiVersion" in data:  # a Kubernetes List: each container's composer command parses
        containers = [
            container
            for item in data["items"]
            if item["kind"] == "Deployment"
            for container in item["spec"]["template"]["spec"]["containers"]
        ]
        commands = [shlex.join(c["command"] + c.get("args", [])) for c in containers]
        assert commands, block.where
        for command in commands:
            _parses(block, command)
    else:
        base = yaml.safe_load((configs / "base.yaml").read_text())
        manifest = data if "version" in data else _written_into(base, data)
        path = configs / "docs-example.yaml"
        path.write_text(yaml.safe_dump(manifest, sort_keys=False))
        loaded = composer.load_manifest(path)
        names = [p.name for p in loaded.providers]
        assert {entry["name"] for entry in data.get("providers", [])} <= set(names)


# ------------------------------------------------------------------ commands and their output


def _parses(block: Block, command: str) -> None:
    words = shlex.split(command, comments=True)
    for i, word in enumerate(words):  # the shell's part: `> FILE`, `| jq`, `&& ...`
        if word in {">", ">>", "<", "|", "&&", "||", ";", "&"}:
            words = words[:i]
            break
    while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):  # VAR=value composer ...
        words.pop(0)
    assert words[0] == "composer", command
    try:
        build_parser().parse_args(words[1:])
    except SystemExit as e:
        pytest.fail(f"{block.where}: `{command.strip()}` does not parse (exit {e.code})")


def _shell_commands(block: Block) -> list[str]:
    lines = block.text.replace("\\\n", " ").splitlines()
    return [line for line in lines if re.match(r"\s*(?:[A-Z_]+=\S*\s+)*composer\s", line)]


SHELL_BLOCKS = [b for b in all_blocks("sh") if _shell_commands(b)]


@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=[b.where for b in SHELL_BLOCKS])
def test_every_composer_command_shown_parses(
    block: Block, capsys: pytest.CaptureFixture[str]
) -> None:
    for command in _shell_commands(block):
        _parses(block, command)
    assert "error:" not in capsys.readouterr().err


def test_the_mcp_client_configuration_starts_a_command_that_parses() -> None:
    import json

    for block in all_blocks("json"):
        if "mcpServers" in block.text:
            for server in json.loads(block.text)["mcpServers"].values():
                assert server["command"].endswith("/composer")
                build_parser().parse_args(server["args"])


SHOWN_RUNS = [b for b in all_blocks("text") if b.text.startswith("$ composer ")]


@pytest.mark.parametrize("block", SHOWN_RUNS, ids=[b.where for b in SHOWN_RUNS])
def test_shown_output_is_what_the_command_prints(
    block: Block, in_configs_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    command, _, shown = block.text.partition("\n")
    assert main(shlex.split(command)[2:]) == 0
    printed = capsys.readouterr().out
    assert matches_shown(shown, printed), f"{block.where} differs from:\n{printed}"


def test_shown_output_comparison_tells_a_difference() -> None:
    """The comparison the output tests rely on: ``...`` lines, ``...`` endings, the ms cell."""
    actual = "a\nb 12 3.4\nlong line here\nc\nd\n"
    assert matches_shown("a\nb 12 0.1\nlong ...\n...\nd\n", actual)
    assert not matches_shown("a\nb 13 3.4\n...\n", actual)
    assert not matches_shown("a\n...\nc\n", actual)
    assert not matches_shown("a\nb 12 3.4\nshort ...\n...\n", actual)


# ------------------------------------------------------------------ what the pages name


def test_every_test_and_benchmark_a_page_names_exists() -> None:
    """Guarantees and figures point at the tests and benchmarks holding them; none may vanish."""
    text = "\n".join(text_of(page) for page in pages())
    files = {p.relative_to(REPO).as_posix() for p in REPO.glob("tests/**/*.py")}
    files |= {p.relative_to(REPO).as_posix() for p in REPO.glob("benchmarks/*.py")}
    for path in set(re.findall(r"\b((?:tests|benchmarks)/[\w/]+\.py)\b", text)):
        assert path in files, path
    names = {Path(path).name for path in files}
    for name in set(re.findall(r"\b((?:test|bench)_\w+\.py)\b", text)):
        assert name in names, name
    sources = "\n".join((REPO / path).read_text() for path in files if path.startswith("tests/"))
    for function in set(re.findall(r"`(test_\w+)`", text)) - {n[:-3] for n in names}:
        assert f"def {function}(" in sources, function
    security = text_of(DOCS / "design" / "security.md")
    assert len(set(re.findall(r"`(?:tests/[\w/]+/)?(test_\w+\.py)`", security))) >= 10


def test_every_page_is_in_the_nav_and_every_link_resolves() -> None:
    """Without mkdocs too: the nav lists exactly the pages, and relative links name files."""
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())

    def entries(nav: Any) -> Iterator[str]:
        for item in nav:
            for value in item.values():
                yield from entries(value) if isinstance(value, list) else [value]

    listed = set(entries(config["nav"]))
    assert listed == {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    for page in pages():
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[\w-]+)?\)", text_of(page)):
            if not re.match(r"\w+://", target):
                assert (page.parent / target).exists(), f"{page.relative_to(REPO)}: {target}"


def test_the_readme_is_the_door() -> None:
    """The README stays short and leads into the site; the manual lives in docs/."""
    readme = text_of(README)
    assert len(readme.splitlines()) < 200
    linked = set(re.findall(r"\]\(docs/([^)#]+)", readme))
    for page in ("index.md", "getting-started.md", "reference/manifest.md", "reference/cli.md"):
        assert page in linked, page


@pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None,
    reason="mkdocs is not installed (the dev extra brings mkdocs-material and mkdocstrings)",
)
def test_the_site_builds_with_strict(tmp_path: Path) -> None:
    """`mkdocs build --strict`: every page in the nav, every link, anchor and API name found."""
    environ = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=environ,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "reference" / "api" / "index.html").read_text().count("doc-heading") > 20
