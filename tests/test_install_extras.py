"""Every extra the documentation names installs with the pip a fresh ``python -m venv`` ships.

pip before 24 does not normalise an extra's name: asked for ``[pydantic_ai]`` when the metadata
says ``pydantic-ai`` (setuptools writes extras normalised), it exits 0 with a warning and
installs nothing of the extra. CI upgrades pip before installing, so only a venv that keeps
its shipped pip sees it. Here composer is built as a wheel and installed, with every extra the
docs spell, into a new venv whose pip is left as shipped; the packages the extras need are
offered from this test run's own environment (a ``.pth`` line), so nothing is downloaded and
pip resolves each extra against the real metadata. Then each extra's integration is imported
in that venv, which sees composer from the wheel.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import venv
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from repofiles import REPO

DOCUMENTED = re.compile(r"context-composer\[([a-z0-9_,.-]+)\]", re.IGNORECASE)
"""How the docs, the README, the examples and the install hints in the code spell extras."""

PROBES = {
    "dev": "pytest",
    "lionagi": "lionagi",
    "postgres": "psycopg_pool",
    "redis": "redis.asyncio",
    "mcp": "mcp",
    "serve": "composer.serve.http",
    "otel": "opentelemetry.trace",
    "metrics": "prometheus_client",
    "watch": "watchfiles",
    "langchain": "composer.integrations.langchain",
    "pydantic-ai": "composer.integrations.pydantic_ai",
    "agent-framework": "composer.integrations.agent_framework",
    "openai-agents": "composer.integrations.openai_agents",
}
"""What each extra makes importable: its integration, else the library it brings."""


def declared_extras() -> dict[str, list[str]]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras: dict[str, list[str]] = project["optional-dependencies"]
    return extras


def documented_extras() -> dict[str, set[str]]:
    """Each extra name as written in the repository's prose and code, with where."""
    places = [REPO / "README.md", REPO / "Makefile"]
    for folder in ("docs", "examples", "composer", "builtin_providers"):
        places += sorted(p for p in (REPO / folder).rglob("*") if p.suffix in {".md", ".py"})
    found: dict[str, set[str]] = {}
    for path in places:
        for match in DOCUMENTED.finditer(path.read_text(encoding="utf-8")):
            for name in match.group(1).split(","):
                if name != "EXTRA":  # the ci guide's placeholder
                    found.setdefault(name, set()).add(str(path.relative_to(REPO)))
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    listed = re.search(r"^EXTRAS := (.+)$", makefile, re.MULTILINE)
    assert listed is not None
    for name in listed.group(1).split(","):
        found.setdefault(name, set()).add("Makefile")
    return found


def test_every_documented_extra_is_declared_as_spelled() -> None:
    declared = declared_extras()
    misspelled = {
        name: sorted(where) for name, where in documented_extras().items() if name not in declared
    }
    assert misspelled == {}
    assert set(PROBES) == set(declared)


def test_extras_are_declared_in_their_canonical_hyphenated_spelling() -> None:
    """The spelling pip normalises to, so that every pip finds them as they are written."""
    assert [name for name in declared_extras() if re.search(r"[_.A-Z]", name)] == []


def installable_here(extra: str) -> bool:
    """Whether this environment holds what ``extra`` requires (the floors venv leaves some
    extras out)."""
    for text in declared_extras()[extra]:
        requirement = Requirement(text)
        try:
            version = metadata.version(requirement.name)
        except metadata.PackageNotFoundError:
            return False
        if not requirement.specifier.contains(version, prereleases=True):
            return False
    return True


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """composer as a wheel, built from a copy of the sources (the checkout is not written)."""
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    for name in ("composer", "builtin_providers"):
        shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-index",
         "--no-build-isolation", "--wheel-dir", str(out), str(source)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    (path,) = out.glob("context_composer-*.whl")
    return path


def test_the_wheel_holds_every_module_and_data_file_of_the_sources(wheel: Path) -> None:
    """Every package is listed in pyproject.toml by hand: one left out (a new subpackage, the
    console's templates and stylesheet) would be missing from an installed composer only."""
    tracked = subprocess.run(
        ["git", "ls-files", "composer", "builtin_providers"],
        capture_output=True, text=True, check=True, cwd=REPO,
    ).stdout.split()  # fmt: skip
    assert "composer/console/templates/base.html" in tracked
    with zipfile.ZipFile(wheel) as archive:
        assert set(tracked) - set(archive.namelist()) == set()


@pytest.fixture(scope="module")
def shipped_pip_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new venv with the pip ``ensurepip`` ships, and this run's packages offered to it."""
    root = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=True).create(root)
    python = root / "bin" / "python"
    paths = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    # Python 3.11's ensurepip adds setuptools 65, which would hide the dev extra's newer one.
    subprocess.run(
        [str(python), "-m", "pip", "uninstall", "--quiet", "--yes", "setuptools"],
        capture_output=True, check=True,
    )  # fmt: skip
    ours = sysconfig.get_path("purelib")
    Path(paths.stdout.strip(), "this-test-run.pth").write_text(ours + "\n", encoding="utf-8")
    return python


def test_each_documented_extra_installs_with_the_pip_a_new_venv_ships(
    wheel: Path, shipped_pip_venv: Path
) -> None:
    python = shipped_pip_venv
    shipped = subprocess.run(
        [str(python), "-m", "pip", "--version"], capture_output=True, text=True, check=True
    ).stdout
    bundled = re.search(r"pip-([0-9.]+)-py3", " ".join(os.listdir(_ensurepip_bundle())))
    assert bundled is not None
    assert shipped.startswith(f"pip {bundled.group(1)} "), shipped  # not upgraded

    extras = sorted(name for name in documented_extras() if installable_here(name))
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "--no-index", "--disable-pip-version-check",
         f"{wheel}[{','.join(extras)}]"],
        capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "PIP_CONFIG_FILE": os.devnull},
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    assert "does not provide the extra" not in installed.stdout + installed.stderr

    probes = [PROBES[name] for name in extras]
    imported = subprocess.run(
        [str(python), "-c",
         "import importlib, sys, composer\n"
         "assert composer.__file__.startswith(sys.prefix), composer.__file__\n"
         f"for name in {probes!r}: importlib.import_module(name)\n"],
        capture_output=True, text=True, timeout=300, check=False, cwd=python.parent,
    )  # fmt: skip
    assert imported.returncode == 0, imported.stderr


def _ensurepip_bundle() -> Path:
    """The folder of wheels ``ensurepip`` installs from: what a new venv's pip is."""
    import ensurepip

    return Path(ensurepip.__file__).parent / "_bundled"
