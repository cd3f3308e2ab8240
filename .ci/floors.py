"""The floors: every direct dependency pinned to the lowest version pyproject.toml declares.

``make floors`` installs composer into .venv-floors with these pins as pip constraints and runs
the suite there, so that every declared lower bound is a tested one. The pins are read from
pyproject.toml on each run (with the standard library only, before any venv exists), so they
never drift from the declarations. The core dependencies and every extra are floored; the dev
extra's tools are not (they do not ship to users: whatever version runs the suite will do).

    python .ci/floors.py constraints   # one ``name==floor`` a line, for ``pip install -c``
    python .ci/floors.py extras        # the extras to install: dev and every floored one
    python .ci/floors.py check         # in the floors venv: each installed version is its floor
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

__all__ = ["TOOLS", "UNFLOORED", "FloorError", "Floors", "floors", "main", "release"]

TOOLS = "dev"
"""The extra of development tools, installed in the floors venv but not pinned."""

UNFLOORED = frozenset({"langchain", "pydantic-ai", "agent-framework", "openai-agents"})
"""The agent-framework extras: new, their floors are the releases their integrations were built
against, and the frameworks' own requirements do not yet resolve beside every other floor;
left out of the floors venv (their tests skip there) until their floors are worked out."""

_REQUIREMENT = re.compile(
    r"\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(?P<specs>[^;]*)(?:;.*)?"
)
_LOWER = re.compile(r"(?:>=|==|~=)\s*(?P<version>[0-9][0-9.]*)\s*$")


class FloorError(Exception):
    """A requirement of pyproject.toml that gives no floor to test."""


def release(version: str) -> tuple[int, ...]:
    """``"2.3"`` -> ``(2, 3)``: trailing zeros dropped, so that 2.3 and 2.3.0 compare equal."""
    parts = [int(part) for part in version.split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def _normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


class Floors:
    """The floor of each direct dependency (by normalised name), and the extras it spans."""

    def __init__(self, pins: dict[str, tuple[str, str]], extras: list[str]) -> None:
        self.pins = pins  # normalised name -> (name as written, floor)
        self.extras = extras

    def constraints(self) -> list[str]:
        return [f"{name}=={floor}" for name, floor in sorted(self.pins.values())]


def floors(pyproject: Path) -> Floors:
    """Every requirement of ``[project]`` dependencies and optional dependencies except the
    tools, each with its lower bound (``>=``, ``==`` or ``~=``; the highest where a
    dependency is named in several places). A requirement without one is a ``FloorError``."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    optional: dict[str, list[str]] = project.get("optional-dependencies", {})
    groups = {"": project.get("dependencies", [])}
    groups |= {
        extra: reqs for extra, reqs in optional.items() if extra != TOOLS and extra not in UNFLOORED
    }
    pins: dict[str, tuple[str, str]] = {}
    for group, requirements in groups.items():
        for requirement in requirements:
            match = _REQUIREMENT.fullmatch(requirement)
            if match is None:
                raise FloorError(f"cannot read requirement {requirement!r}")
            name = match["name"]
            lower = [_LOWER.search(spec) for spec in match["specs"].split(",")]
            found = [m["version"] for m in lower if m is not None]
            if not found:
                where = f"extra {group!r}" if group else "dependencies"
                raise FloorError(f"{requirement!r} ({where}) declares no lower bound (>=)")
            floor = max(found, key=release)
            key = _normalised(name)
            if key not in pins or release(floor) > release(pins[key][1]):
                pins[key] = (name, floor)
    extras = [TOOLS, *sorted(set(groups) - {""})] if TOOLS in optional else sorted(groups)
    return Floors(pins, [extra for extra in extras if extra])


def check(found: Floors) -> list[str]:
    """The dependencies whose installed version is not their floor (none: all is well)."""
    wrong = []
    for name, floor in sorted(found.pins.values()):
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            wrong.append(f"{name}: not installed (floor {floor})")
            continue
        if release(re.sub(r"[^0-9.].*", "", installed)) != release(floor):
            wrong.append(f"{name}: {installed} installed, floor {floor}")
    return wrong


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["constraints", "extras", "check"])
    parser.add_argument(
        "--pyproject", type=Path, default=Path(__file__).resolve().parents[1] / "pyproject.toml"
    )
    args = parser.parse_args(argv)
    try:
        found = floors(args.pyproject)
    except FloorError as e:
        print(f"floors: {e}", file=sys.stderr)
        return 1
    if args.what == "constraints":
        print("\n".join(found.constraints()))
    elif args.what == "extras":
        print(",".join(found.extras))
    else:
        wrong = check(found)
        for line in wrong:
            print(f"floors: {line}", file=sys.stderr)
        if not wrong:
            print(f"floors: {len(found.pins)} direct dependencies at their floors")
        return 1 if wrong else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
