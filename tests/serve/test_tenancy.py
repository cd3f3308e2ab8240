"""Teams sharing one server never see each other: the service with two principals, over a
real shared SQLite store.

Team b may send any branch id (team a's included), any metadata (``team: a`` included) and any
writeback: it never reads team a's items or cached blocks, and never writes into team a's
namespace. Writebacks say what was stored; a retry of one turn's writeback stores nothing
twice, the same result in a later turn is stored again, and a branch the server dropped is
not written into a default namespace.
"""

from __future__ import annotations

import asyncio
import json
import textwrap
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from composer import load_manifest
from composer.errors import RequestRefused, ServeError
from composer.principal import Principal
from composer.serve.models import (
    BranchIn,
    InstructionIn,
    TurnRequest,
    WritebackBranch,
    WritebackRequest,
)
from composer.serve.principals import LOCAL_PRINCIPAL
from composer.serve.service import ContextService

T = TypeVar("T")

TEAM_A = Principal("team-a", MappingProxyType({"team": "a"}))
TEAM_B = Principal("team-b", MappingProxyType({"team": "b"}))
SECRET = "payroll password rotated to SECRET-A-7781"

MANIFEST = """\
version: 1
providers:
  - name: notes
    type: memory
    source: {sqlite: notes.sqlite, shared: true}
    namespace: "{{ branch.metadata.team }}"
    query: {text: "{{ instruction.text }}", limit: 20}
    match: substring
    writeback: true
  - name: greeting
    type: static
    text: "Team notes for {{ branch.metadata.team }}"
    cache: {ttl_s: 600}
"""


def write_manifest(folder: Path, text: str = MANIFEST) -> Path:
    path = folder / "m.yaml"
    path.write_text(textwrap.dedent(text))
    return path


class Served:
    """A ContextService for team a and team b, driven on one event loop."""

    def __init__(self, folder: Path, **options: Any) -> None:
        self.loop = asyncio.new_event_loop()
        manifest = load_manifest(write_manifest(folder))
        self.service = ContextService(manifest, principals=(TEAM_A, TEAM_B), **options)

    def run(self, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
        return self.loop.run_until_complete(make())

    def turn(self, who: Principal, branch: str, text: str, **metadata: Any) -> dict[str, Any]:
        request = TurnRequest(
            branch=BranchIn(id=branch, metadata=metadata),
            system="S\n",
            instruction=InstructionIn(text=text),
        )
        return self.run(lambda: self.service.turn(request, who))

    def writeback(
        self, who: Principal, branch: str, results: list[Any], metadata: dict[str, Any] | None
    ) -> tuple[int, dict[str, Any]]:
        stated = None if metadata is None else WritebackBranch(metadata=metadata)
        request = WritebackRequest(action_responses=results, branch=stated)
        return self.run(lambda: self.service.writeback(branch, request, who))

    def close(self) -> None:
        self.run(self.service.aclose)
        self.loop.close()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    server = Served(tmp_path)
    yield server
    server.close()


BRANCHES = st.sampled_from(["inc-1", "a-private", "mcp", "b-own"])
METADATA = st.dictionaries(
    st.sampled_from(["team", "user", "tenant"]),
    st.sampled_from(["a", "b", "", "A", "a ", 0, None]),
    max_size=3,
)
B_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("turn"), BRANCHES, METADATA, st.sampled_from(["password", "SECRET"])),
        st.tuples(
            st.just("writeback"),
            BRANCHES,
            st.one_of(st.none(), METADATA),
            st.sampled_from(["password", "SECRET"]),
        ),
    ),
    min_size=1,
    max_size=6,
)


def test_team_b_never_reads_or_writes_team_as_items_or_blocks(tmp_path: Path) -> None:
    """Whatever branch ids, metadata and writebacks team b sends (a property)."""
    served = Served(tmp_path)
    try:
        status, _ = served.writeback(TEAM_A, "a-private", [SECRET], {})
        assert status == 200
        first = served.turn(TEAM_A, "a-private", "password")
        assert SECRET in first["guidance"]
        assert "Team notes for a" in first["guidance"]

        @settings(
            max_examples=60,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
            database=None,
        )
        @given(B_OPS)
        def team_b_acts(ops: list[tuple[Any, ...]]) -> None:
            refusals: list[int] = []
            for kind, branch, metadata, word in ops:
                try:
                    if kind == "turn":
                        answer = served.turn(TEAM_B, branch, word, **metadata)
                        assert SECRET not in answer["guidance"]
                        assert "Team notes for a" not in answer["guidance"]
                        assert "SECRET-A" not in str(answer["report"])
                    else:
                        served.writeback(TEAM_B, branch, [f"INJECT {word} to mallory"], metadata)
                except RequestRefused as e:
                    refusals.append(e.status)
            assert set(refusals) <= {403, 409}
            seen = served.turn(TEAM_A, "a-private", "")
            assert "INJECT" not in seen["guidance"]
            assert SECRET in seen["guidance"]

        team_b_acts()
    finally:
        served.close()


def test_a_bound_key_stated_otherwise_is_refused_and_repeated_is_fine(served: Served) -> None:
    with pytest.raises(RequestRefused) as refused:
        served.turn(TEAM_B, "inc-1", "x", team="a")
    assert refused.value.status == 403
    assert "'team'" in str(refused.value)
    assert "Team notes for b" in served.turn(TEAM_B, "inc-1", "x", team="b")["guidance"]
    with pytest.raises(RequestRefused):
        served.writeback(TEAM_B, "inc-1", ["x"], {"team": "a"})


def test_the_same_branch_id_is_two_branches_for_two_principals(served: Served) -> None:
    served.turn(TEAM_A, "inc-1", "first")
    assert served.service.last_guidance("inc-1", TEAM_B) is None
    served.turn(TEAM_B, "inc-1", "second")
    a_text = served.service.last_guidance("inc-1", TEAM_A)
    b_text = served.service.last_guidance("inc-1", TEAM_B)
    assert a_text is not None
    assert b_text is not None
    assert "Team notes for a" in a_text
    assert "Team notes for b" in b_text


def test_a_retried_writeback_stores_once_and_a_later_turns_is_stored_again(
    served: Served,
) -> None:
    served.turn(TEAM_A, "inc-2", "q")
    assert served.writeback(TEAM_A, "inc-2", ["disk 91% full"], None) == (
        200,
        {
            "branch_id": "inc-2",
            "providers": [{"name": "notes", "stored": 1, "error": None, "cut": 0}],
            "stored": 1,
        },
    )
    again = served.writeback(TEAM_A, "inc-2", ["disk 91% full"], None)
    assert again[0] == 200
    assert again[1]["stored"] == 0  # a retry of the same turn's writeback
    served.turn(TEAM_A, "inc-2", "q")
    later = served.writeback(TEAM_A, "inc-2", ["disk 91% full"], None)
    assert later[1]["stored"] == 1  # the same text in a later turn is a new result


def test_after_eviction_a_writeback_needs_its_branch_and_keeps_its_turn(tmp_path: Path) -> None:
    served = Served(tmp_path, max_branches=1)
    try:
        served.turn(TEAM_A, "old", "q")
        assert served.writeback(TEAM_A, "old", ["r1"], None)[1]["stored"] == 1
        served.turn(TEAM_A, "new", "q")  # "old" is dropped: one branch is kept
        assert "team-a/old" not in served.service.branches
        with pytest.raises(RequestRefused) as refused:
            served.writeback(TEAM_A, "old", ["r2"], None)
        assert refused.value.status == 409
        status, body = served.writeback(TEAM_A, "old", ["r1", "r2"], {})
        assert status == 200
        assert body["stored"] == 1  # r1 was this turn's already: the count outlived the branch
        seen = served.turn(TEAM_A, "new", "r")
        assert "r1" in seen["guidance"]
        assert "r2" in seen["guidance"]  # in team a's namespace, not the default one
    finally:
        served.close()


def test_a_writeback_that_stored_nothing_is_not_a_success(tmp_path: Path) -> None:
    """One provider fails: 207 with its masked error; every provider fails: 503."""
    text = """\
    version: 1
    providers:
      - name: kept
        type: memory
        source: {sqlite: ok.sqlite}
        writeback: true
      - name: broken
        type: memory
        source: {sqlite: broken.sqlite}
        namespace: "{{ branch.metadata.team.upper() }}"
        writeback: true
    """
    loop = asyncio.new_event_loop()
    service = ContextService(load_manifest(write_manifest(tmp_path, text)))
    try:
        some = WritebackRequest(action_responses=["x"], branch=WritebackBranch(metadata={}))
        status, body = loop.run_until_complete(service.writeback("b", some, LOCAL_PRINCIPAL))
        assert status == 207
        kept, broken = body["providers"]
        assert kept == {"name": "kept", "stored": 1, "error": None, "cut": 0}
        assert broken["stored"] is None
        assert "team" in broken["error"]
    finally:
        loop.run_until_complete(service.aclose())
    only = (
        textwrap.dedent(text).split("  - name: kept")[0]
        + "  - name: broken"
        + (textwrap.dedent(text).split("  - name: broken")[1])
    )
    service = ContextService(load_manifest(write_manifest(tmp_path, only)))
    try:
        status, body = loop.run_until_complete(service.writeback("b", some, LOCAL_PRINCIPAL))
        assert status == 503
        assert body["stored"] == 0
    finally:
        loop.run_until_complete(service.aclose())
        loop.close()


@pytest.mark.parametrize(
    ("namespace", "principals", "named"),
    [
        ("{{ branch.metadata.team }}", (LOCAL_PRINCIPAL,), "'team'"),
        ("{{ branch.metadata.team }}", (TEAM_A, Principal("ops")), "not bound for: ops"),
        ("{{ branch.name }}", (TEAM_A, TEAM_B), "branch.name"),
        ("{{ instruction.text[:3] }}", (TEAM_A, TEAM_B), "instruction.text"),
        ("{{ branch.metadata['te' ~ 'am'] }}", (TEAM_A, TEAM_B), "branch.metadata,"),
    ],
)
def test_a_shared_store_split_by_what_clients_state_is_refused(
    tmp_path: Path, namespace: str, principals: tuple[Principal, ...], named: str
) -> None:
    quoted = "'" + namespace.replace("'", "''") + "'"
    text = MANIFEST.replace('namespace: "{{ branch.metadata.team }}"', f"namespace: {quoted}")
    manifest = load_manifest(write_manifest(tmp_path, text))
    with pytest.raises(ServeError) as refused:
        ContextService(manifest, principals=principals)
    message = str(refused.value)
    assert "'notes'" in message
    assert named in message
    assert "--principals" in message


def test_a_split_every_principal_binds_is_served(tmp_path: Path) -> None:
    manifest = load_manifest(write_manifest(tmp_path))
    ContextService(manifest, principals=(TEAM_A, TEAM_B))  # no error
    unshared = load_manifest(write_manifest(tmp_path, MANIFEST.replace(", shared: true", "")))
    ContextService(unshared)  # one tenant, who trusts its own clients: as before


def test_the_audit_line_names_the_principal(tmp_path: Path) -> None:
    text = MANIFEST.replace("version: 1\n", "version: 1\nruntime: {audit: {path: turns.jsonl}}\n")
    loop = asyncio.new_event_loop()
    service = ContextService(load_manifest(write_manifest(tmp_path, text)), principals=(TEAM_A,))
    request = TurnRequest(
        branch=BranchIn(id="inc-9"), system="S\n", instruction=InstructionIn(text="q")
    )
    try:
        loop.run_until_complete(service.turn(request, TEAM_A))
    finally:
        loop.run_until_complete(service.aclose())
        loop.close()
    (line,) = [json.loads(raw) for raw in (tmp_path / "turns.jsonl").read_text().splitlines()]
    assert line["branch"] == {"id": "inc-9", "name": None, "principal": "team-a"}
