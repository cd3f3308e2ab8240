"""What pyproject.toml declares: the version read from one place, a tested floor for every
direct dependency (``.ci/floors.py``, which ``make floors`` runs), a reason for every upper
bound."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from repofiles import REPO

import composer
from composer import _version

PYPROJECT = REPO / "pyproject.toml"
FLOORS = REPO / ".ci" / "floors.py"


def floors(*args: str, pyproject: Path = PYPROJECT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(FLOORS), *args, "--pyproject", str(pyproject)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def project(text: str, tmp_path: Path) -> Path:
    path = tmp_path / "pyproject.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_version_is_written_in_one_place_and_the_build_reads_it() -> None:
    declared = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
    assert "version" not in declared["project"]
    assert declared["project"]["dynamic"] == ["version"]
    attr = declared["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == "composer._version.__version__"
    assert composer.__version__ is _version.__version__
    assert metadata.version("context-composer") == composer.__version__  # what the build wrote


UNFLOORED = {"langchain", "pydantic-ai", "agent-framework", "openai-agents"}
"""The agent-framework extras, left out of the floors venv (``.ci/floors.py`` says why)."""


def test_every_direct_dependency_and_extra_is_pinned_to_its_floor() -> None:
    declared = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    result = floors("constraints")
    assert result.returncode == 0, result.stderr
    pins = dict(line.split("==") for line in result.stdout.splitlines())
    runtime = declared["dependencies"] + [
        requirement
        for extra, requirements in declared["optional-dependencies"].items()
        if extra != "dev" and extra not in UNFLOORED
        for requirement in requirements
    ]
    names = {re.match(r"[A-Za-z0-9._-]+", requirement)[0] for requirement in runtime}  # type: ignore[index]
    assert set(pins) == names
    assert pins["pydantic-settings"] == "2.9"
    assert pins["mcp"] == "2.3"  # named by two extras, pinned once
    extras = floors("extras").stdout.strip().split(",")
    assert extras == [
        "dev",
        *sorted(set(declared["optional-dependencies"]) - {"dev"} - UNFLOORED),
    ]


def test_the_highest_floor_of_a_dependency_named_twice_is_its_pin(tmp_path: Path) -> None:
    path = project(
        '[project]\nname = "p"\ndependencies = ["a>=1.2", "b==2"]\n'
        "[project.optional-dependencies]\nx = [\"A[y]>=1.10,<2; python_version >= '3'\"]\n"
        'dev = ["tool"]\n',
        tmp_path,
    )
    result = floors("constraints", pyproject=path)
    assert result.stdout.splitlines() == ["A==1.10", "b==2"]
    assert floors("extras", pyproject=path).stdout.strip() == "dev,x"


def test_a_runtime_requirement_without_a_floor_is_refused(tmp_path: Path) -> None:
    path = project('[project]\nname = "p"\ndependencies = ["a<2"]\n', tmp_path)
    result = floors("constraints", pyproject=path)
    assert result.returncode == 1
    assert result.stderr == "floors: 'a<2' (dependencies) declares no lower bound (>=)\n"


def test_check_names_each_installed_version_that_is_not_its_floor(tmp_path: Path) -> None:
    installed = metadata.version("pytest")
    at_floor = project(f'[project]\nname = "p"\ndependencies = ["pytest>={installed}"]\n', tmp_path)
    result = floors("check", pyproject=at_floor)
    assert (result.returncode, result.stdout) == (
        0,
        "floors: 1 direct dependencies at their floors\n",
    )

    above = project(
        '[project]\nname = "p"\ndependencies = ["pytest>=1.0", "surely-not-installed>=1"]\n',
        tmp_path,
    )
    result = floors("check", pyproject=above)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"floors: pytest: {installed} installed, floor 1.0",
        "floors: surely-not-installed: not installed (floor 1)",
    ]


def test_every_upper_bound_says_why_beside_it() -> None:
    """An upper bound is a promise to move it; its comment (on the line or just above) says
    which code needs it, or what the bound protects."""
    lines = PYPROJECT.read_text(encoding="utf-8").splitlines()
    bare = [
        line.strip()
        for number, line in enumerate(lines)
        if re.search(r'"[A-Za-z0-9][^"#]*<[^"]*"', line)
        if "#" not in line and not lines[number - 1].strip().startswith("#")
    ]
    assert bare == []
