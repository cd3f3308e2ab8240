"""Log records and library warnings while a command runs: one masked line per cause, joined
into one line, counted when repeated; a real psycopg_pool retrying a refused connection."""

from __future__ import annotations

import io
import logging
import socket
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from composer.cli.logs import MAX_CAUSES, OneLineHandler, log_records_to
from composer.cli.main import main
from composer.cli.output import Output
from composer.manifest import redact

SECRET = "s3cret-pw"


def masked(text: str) -> str:
    return redact(text, [SECRET])


def test_a_repeated_multi_line_record_is_one_masked_line_with_its_count() -> None:
    err = io.StringIO()
    with log_records_to(Output(io.StringIO(), err), masked):
        log = logging.getLogger("psycopg.pool")
        for _ in range(6):
            log.warning("error connecting as %s: refused\n\tIs the server running?", SECRET)
        logging.getLogger("httpx").warning("other cause")
        assert err.getvalue() == ""  # a command's lines come at its end
    assert err.getvalue().splitlines() == [
        "composer: warning: error connecting as ***: refused; Is the server running? (6 times)",
        "composer: warning: other cause",
    ]


def test_a_library_s_warnings_warn_is_one_masked_line_without_its_source() -> None:
    err = io.StringIO()
    with log_records_to(Output(io.StringIO(), err), masked), warnings.catch_warnings():
        warnings.simplefilter("always")
        for _ in range(3):
            warnings.warn(f"pool for {SECRET} opened\nin the constructor", RuntimeWarning, 1)
    assert err.getvalue().splitlines() == [
        "composer: warning: RuntimeWarning: pool for *** opened; in the constructor (3 times)"
    ]
    assert warnings.showwarning.__module__ == "warnings"  # put back


def test_a_server_prints_a_cause_at_once_and_counts_its_repeats() -> None:
    err = io.StringIO()
    with log_records_to(Output(io.StringIO(), err), masked, live=True):
        log = logging.getLogger("mcp.server")
        log.warning("peer %s went away", SECRET)
        log.warning("peer %s went away", SECRET)
        assert err.getvalue() == "composer: warning: peer *** went away\n"
        log.warning("peer %s went away", SECRET)
    assert err.getvalue().splitlines() == [
        "composer: warning: peer *** went away",
        "composer: warning: peer *** went away (again 2 times)",
    ]
    later = io.StringIO()
    handler = OneLineHandler(Output(io.StringIO(), later), masked, live=True)
    handler.repeats_every_s = 0  # as if a minute went by between the records
    for _ in range(3):
        handler.handle(record("again"))
    handler.close()
    assert later.getvalue().splitlines() == [
        "composer: warning: again",
        "composer: warning: again (again once)",
        "composer: warning: again (again once)",
    ]


def record(message: str) -> logging.LogRecord:
    return logging.LogRecord("lib", logging.WARNING, __file__, 1, message, None, None)


def test_distinct_causes_are_counted_up_to_a_bound_then_printed_as_they_come() -> None:
    """A library that logs a new message each time cannot grow the table without bound."""
    err = io.StringIO()
    handler = OneLineHandler(Output(io.StringIO(), err), masked)
    for n in range(MAX_CAUSES + 10):
        handler.handle(record(f"cause {n}"))
    assert len(handler._causes) == MAX_CAUSES
    assert len(err.getvalue().splitlines()) == 10  # past the bound: at once
    handler.close()
    assert len(err.getvalue().splitlines()) == MAX_CAUSES + 10


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A port on 127.0.0.1 bound but not listening: a connection to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def test_psycopg_pool_retrying_a_refused_connection_is_one_masked_line(
    tmp_path: Path, refused_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("psycopg_pool", reason="the postgres extra is not installed")
    manifest = tmp_path / "m.yaml"
    dsn = f"postgresql://bob:{SECRET}@127.0.0.1:{refused_port}/test"
    manifest.write_text(
        "version: 1\n"
        f'providers: [{{name: mem, type: memory, source: {{postgres: {{dsn: "{dsn}", connect_timeout_s: 2}}}}}}]\n'
    )
    assert main(["preview", str(manifest), "--instruction", "hello"]) == 0
    out, err = capsys.readouterr()
    assert "failed" in out
    pool = [line for line in err.splitlines() if "error connecting" in line]
    assert len(pool) == 1, err
    assert "\\n" not in err
    assert "\\t" not in err
    assert SECRET not in out + err
