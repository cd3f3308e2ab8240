"""Every reader of an audit log passes over a line of any shape and reads the good turns
around it: ``read_turns`` (``composer audit list|show|diff``) and the console's
``TurnSource``, over a file and over the PostgreSQL table's ``line`` column.

The good lines are real turns' lines (one on a branch whose name holds a lone surrogate, read
through Python's own JSON parser); the others are whatever hypothesis makes of bytes, text,
JSON nested 50,000 deep, numbers of 100,000 digits, megabyte strings and good lines torn or
given a deep extra key. None may raise, each is counted as not an audit line, and every good
turn is read.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memory.services import postgres_schema
from memory.stores_fixtures import postgres_dsn

import composer
from composer._postgres import with_schema
from composer.console import TurnSource
from composer.observe.audit import AuditLog
from composer.observe.audit.reader import MAX_LIMIT, read_turns
from composer.observe.audit.table import connect, create_table
from composer.observe.record import MAX_DEPTH, MAX_LINE_BYTES, AuditLine, parse_line, read_lines

__all__ = ["postgres_dsn"]  # the server's fixture

MANIFEST = """\
version: 1
budget: 50
runtime: {audit: {path: turns.jsonl, keep_text: true}}
providers:
  - {name: rules, type: static, text: "Be brief."}
  - {name: quiet, type: static, text: "x", when: "'never' in instruction.text"}
"""


async def _good_lines(folder: Path) -> list[bytes]:
    (folder / "m.yaml").write_text(MANIFEST)
    manifest = composer.load_manifest(folder / "m.yaml")
    for name, text in (("payments", "first"), ("odd\ud800name", "second"), ("ops", "third")):
        branch = composer.Branch("S\n", name=name)
        composer.attach(branch, manifest)
        await composer.prepare_turn(branch, text)
    await manifest.aclose()
    return (folder / "turns.jsonl").read_bytes().splitlines()


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    """Three real turns' lines, the second with a ``\\ud800`` escape in its branch name."""
    lines = asyncio.run(_good_lines(tmp_path_factory.mktemp("good")))
    assert len(lines) == 3
    assert b"\\ud800" in lines[1]
    return lines


def _deep(n: int) -> bytes:
    return b"[" * n + b"]" * n


def _with_deep_key(line: bytes, n: int) -> bytes:
    return b'{"x":' + _deep(n) + b"," + line[1:]


def _bad_lines(good_line: bytes) -> st.SearchStrategy[bytes]:
    """Lines that are not audit lines, of every shape a reader has to survive."""
    depth = st.integers(MAX_DEPTH + 1, 50_000)
    return st.one_of(
        st.binary(max_size=200),
        st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")),
        depth.map(_deep),
        depth.map(lambda n: b'{"a":' * n + b"1" + b"}" * n),
        st.integers(4_000, 100_000).map(lambda n: b'{"version":1,"tokens_used":' + b"9" * n + b"}"),
        st.integers(0, 1_000_000).map(lambda n: b'{"time":"' + b"x" * n + b'"}'),
        st.integers(1, len(good_line) - 1).map(lambda k: good_line[:k]),  # torn
        depth.map(lambda n: _with_deep_key(good_line, n)),
    ).map(lambda line: line.replace(b"\n", b" "))


@st.composite
def logs(draw: st.DrawFn, good: list[bytes]) -> tuple[list[bytes], int]:
    """The good lines in order with bad ones between them; how many bad ones are not blank."""
    lines: list[bytes] = []
    counted = 0
    for line in good:
        for bad in draw(st.lists(_bad_lines(draw(st.sampled_from(good))), max_size=3)):
            lines.append(bad)
            counted += bool(bad.decode("utf-8", "replace").strip())
        lines.append(line)
    return lines, counted


def _turn_ids(good: list[bytes]) -> list[str | None]:
    return [AuditLine.model_validate(json.loads(line)).turn_id for line in good]


EXAMPLES = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)


@EXAMPLES
@given(data=st.data())
def test_a_file_reader_reads_every_good_turn_and_counts_the_rest(
    good: list[bytes], tmp_path: Path, data: st.DataObject
) -> None:
    lines, counted = data.draw(logs(good))
    path = tmp_path / "turns.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    newest_first = _turn_ids(good)[::-1]
    page = read_turns(path, limit=MAX_LIMIT)
    assert [line.turn_id for line in page.lines] == newest_first
    assert (page.total, page.unreadable) == (len(good), counted)
    listing = TurnSource(path).newest(None, limit=50)
    assert [line.turn_id for line in listing.lines] == newest_first
    assert listing.unreadable == counted
    assert [line.branch.name for line in TurnSource(path).lines()][1] == "odd\ud800name"


@pytest.fixture
def table(postgres_dsn: str) -> Iterator[tuple[str, str]]:
    """An audit table made as a writer makes it, in a schema of its own."""
    with postgres_schema(postgres_dsn) as schema:
        with connect(postgres_dsn, 10) as conn:
            create_table(conn, schema)
        yield postgres_dsn, schema


@EXAMPLES
@given(data=st.data())
def test_a_table_reader_reads_every_good_turn_and_counts_the_rest(
    good: list[bytes], table: tuple[str, str], data: st.DataObject
) -> None:
    """The ``line`` column holds any text PostgreSQL holds (no NUL): each row is read alone."""
    dsn, schema = table
    lines, _ = data.draw(logs(good))
    texts = [line.decode("utf-8", "replace").replace("\0", "") for line in lines]
    counted = sum(1 for text in texts if text.encode() not in good)
    start = _dt.datetime(2026, 1, 1, tzinfo=_dt.UTC)
    with connect(dsn, 10) as conn:
        conn.execute(with_schema("TRUNCATE {s}.audit_turns", schema))
        for n, text in enumerate(texts):
            conn.execute(
                with_schema(
                    "INSERT INTO {s}.audit_turns (time, branch_id, tokens_used, bytes, line)"
                    " VALUES (%s, 'b', 0, %s, %s)",
                    schema,
                ),
                (start + _dt.timedelta(seconds=n), len(text), text),
            )
    newest_first = _turn_ids(good)[::-1]
    page = read_turns(dsn, schema=schema, limit=MAX_LIMIT)
    assert [line.turn_id for line in page.lines] == newest_first
    assert page.unreadable == counted
    source = TurnSource(dsn, schema)
    scanned = source.newest(lambda line: True, limit=50)  # the console's own scan
    assert [line.turn_id for line in scanned.lines] == newest_first
    assert scanned.unreadable == counted
    assert source.newest(None, limit=50).unreadable == counted


def test_a_line_longer_than_the_bound_is_passed_over_unread(
    good: list[bytes], tmp_path: Path
) -> None:
    path = tmp_path / "turns.jsonl"
    path.write_bytes(good[0] + b"\n" + b"[" * 5_000 + b"\n" + good[2] + b"\n")
    found = list(read_lines(path, max_bytes=max(len(good[0]), len(good[2]))))
    assert [number for number, _ in found] == [1, 2, 3]
    assert isinstance(found[0][1], AuditLine)
    assert isinstance(found[2][1], AuditLine)
    assert (
        found[1][1] == f"not an audit line (longer than {max(len(good[0]), len(good[2])):,} bytes)"
    )
    assert parse_line(None) == f"not an audit line (longer than {MAX_LINE_BYTES:,} bytes)"


async def test_a_writer_never_writes_a_line_no_reader_would_read(tmp_path: Path) -> None:
    """A line past ``MAX_LINE_BYTES`` is counted failed, not written: nothing a reader skips
    for its size was ever a written turn."""
    huge = b"x" * MAX_LINE_BYTES + b"\n"
    log = AuditLog(
        tmp_path / "turns.jsonl",
        max_bytes=2 * MAX_LINE_BYTES,
        backups=1,
        queue_size=10,
        encode=lambda turn: huge if turn == "huge" else b'{"small":1}\n',
        weigh=lambda turn: 1,
    )
    log.put("huge")
    log.put("small")
    assert log.flush(30)
    log.close()
    assert (log.written, log.failed) == (1, 1)
    assert (tmp_path / "turns.jsonl").read_bytes() == b'{"small":1}\n'
