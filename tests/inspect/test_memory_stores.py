"""``composer memory`` finds its stores by kind through the ``composer.stores`` entry points:
composer's own are declared in pyproject.toml like any package's, and a store kind from another
installed distribution is used the same way (a real ``.dist-info`` on ``sys.path``)."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
import tomllib
from collections.abc import Iterator
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest
from repofiles import REPO

from composer.cli import main
from composer.inspect.stores import STORE_GROUP, kind_of

DECLARED = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"][
    "entry-points"
][STORE_GROUP]


@pytest.mark.parametrize(
    ("spec", "kind"),
    [
        ("postgresql://agent@127.0.0.1/team", "postgresql"),
        ("postgres://127.0.0.1/team", "postgres"),
        ("sqlite:team.data", "sqlite"),
        ("jsonl:team.db", "jsonl"),
        ("notes/Team.JSONL", "jsonl"),
        ("team.sqlite3", "sqlite"),
        ("team.db", "sqlite"),
        ("sqlite:", None),
        ("mysql://127.0.0.1/team", None),
        ("memory.txt", None),
    ],
)
def test_a_spec_names_its_kind_by_prefix_scheme_or_suffix(spec: str, kind: str | None) -> None:
    assert kind_of(spec, DECLARED) == kind


@pytest.mark.parametrize(
    ("kind", "spec", "opened"),
    [
        ("jsonl", "jsonl:{tmp}/team.jsonl", "JsonlMemoryStore"),
        ("sqlite", "{tmp}/team.db", "SqliteMemoryStore"),
        ("postgresql", "postgresql://127.0.0.1/team", "PostgresMemoryStore"),
        ("postgres", "postgres://127.0.0.1/team", "PostgresMemoryStore"),
    ],
)
def test_pyproject_declares_an_opener_for_each_built_in_kind(
    kind: str, spec: str, opened: str, tmp_path: Path
) -> None:
    opener = EntryPoint(kind, DECLARED[kind], STORE_GROUP).load()
    store = opener(spec.format(tmp=tmp_path), schema="team_schema")
    try:
        assert type(store).__name__ == opened
        if opened == "PostgresMemoryStore":
            assert store.schema == "team_schema"  # --schema reaches the store
    finally:
        asyncio.run(store.aclose())


def test_no_module_of_composer_imports_the_built_in_stores() -> None:
    sources = [path.read_text(encoding="utf-8") for path in (REPO / "composer").rglob("*.py")]
    assert not any("import builtin_providers" in text for text in sources)
    assert not any("from builtin_providers" in text for text in sources)


RAM_STORE = '''
"""A store kind held in memory, shared by every store of one name (for the test)."""

from types import SimpleNamespace

HELD = {"team": [SimpleNamespace(id="a1", content="restart zone by zone", tags=["x"],
                                 metadata={}, namespace="ops", expires_at=None)]}


class RamStore:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"RamStore({self.name!r})"

    async def add(self, items):
        held = HELD.setdefault(self.name, [])
        new = [item for item in items if item.id not in {i.id for i in held}]
        held.extend(new)
        return len(new)

    async def export(self, namespace=None):
        return [i for i in HELD.get(self.name, []) if namespace in (None, i.namespace)]

    async def counts(self):
        counts = {}
        for item in HELD.get(self.name, []):
            counts[item.namespace] = counts.get(item.namespace, 0) + 1
        return counts

    async def exists(self):
        return self.name in HELD

    async def aclose(self):
        pass


def open_ram(spec, *, schema):
    return RamStore(spec.removeprefix("ram:"))
'''


@pytest.fixture
def ram_kind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A distribution on sys.path whose ``composer.stores`` entry point ``ram`` opens RamStore."""
    site = tmp_path / "site"
    info = site / "composer_test_ram-0.1.dist-info"
    info.mkdir(parents=True)
    (site / "composer_test_ram.py").write_text(textwrap.dedent(RAM_STORE), encoding="utf-8")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: composer-test-ram\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{STORE_GROUP}]\nram = composer_test_ram:open_ram\n")
    monkeypatch.syspath_prepend(str(site))
    yield
    sys.modules.pop("composer_test_ram", None)


def test_a_store_kind_from_another_distribution_is_used_by_name(
    ram_kind: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["memory", "stats", "ram:team"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "RamStore('team'): 1 item in 1 namespace",
        "  ops: 1",
    ]
    assert main(["memory", "export", "ram:team"]) == 0
    out, err = capsys.readouterr()
    assert [json.loads(line) for line in out.splitlines()] == [
        {
            "id": "a1",
            "content": "restart zone by zone",
            "tags": ["x"],
            "metadata": {},
            "namespace": "ops",
        }
    ]
    assert err == "exported 1 item from RamStore('team')\n"

    assert main(["memory", "stats", "ram:nothere"]) == 1  # its own exists() says so
    assert "no memory store at RamStore('nothere'): check the" in capsys.readouterr().err
    assert main(["memory", "import", "ram:team", "ram:copy"]) == 0  # a TARGET is created
    assert main(["memory", "stats", "ram:copy"]) == 0


def test_export_to_stdout_writes_the_lines_a_jsonl_store_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed = tmp_path / "seed.jsonl"
    records: list[dict[str, Any]] = [
        {"id": "m1", "content": "zone by zone", "tags": ["a"], "metadata": {"n": 1}},
        {"id": "m2", "content": {"structured": True}, "tags": [], "metadata": {}},
        {"id": "m3", "content": "later", "tags": [], "metadata": {}, "expires_at": 4102444800.0},
    ]
    seed.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    db = tmp_path / "team.db"
    assert main(["memory", "import", str(seed), str(db), "--into", "ops"]) == 0
    assert main(["memory", "export", str(db), str(tmp_path / "out.jsonl")]) == 0
    assert main(["memory", "export", str(db)]) == 0
    printed = capsys.readouterr().out.splitlines()[-3:]
    written = (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in printed] == [json.loads(line) for line in written]
    exported = [json.loads(line) for line in printed]
    assert all(isinstance(record.pop("created_at"), float) for record in exported)
    assert exported == [{**r, "namespace": "ops"} for r in records]
