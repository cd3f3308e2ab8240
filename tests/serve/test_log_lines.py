"""One log record as one JSON line (``composer.serve.logs``): its fields, masked, bounded,
ASCII whatever the record holds; which records ``json_logs`` writes while it is on; and the
command's own lines in that format (a refused start)."""

from __future__ import annotations

import io
import json
import logging
import sys
import warnings
from collections.abc import Iterator

import pytest

from composer.cli.exit_codes import USAGE
from composer.cli.main import main
from composer.principal import Principal, current_principal
from composer.serve.logs import MAX_LINE_BYTES, event_line, json_logs, record_line
from serve.conftest import CONFIGS


def record(
    message: str, *args: object, level: int = logging.INFO, **extra: object
) -> logging.LogRecord:
    made = logging.LogRecord("composer.serve.access", level, __file__, 1, message, args, None)
    made.__dict__.update(extra)
    return made


def test_a_record_is_one_line_with_the_audit_line_s_field_names() -> None:
    line = json.loads(
        record_line(
            record(
                "%s %d",
                "POST /v1/turns",
                200,
                route="/v1/turns",
                status=200,
                principal="alice",
                turn_id="t1",
                duration_ms=1.5,
                unknown="not a field",
            )
        )
    )
    assert line == {
        "time": line["time"],
        "level": "info",
        "logger": "composer.serve.access",
        "message": "POST /v1/turns 200",
        "route": "/v1/turns",
        "status": 200,
        "principal": "alice",
        "turn_id": "t1",
        "duration_ms": 1.5,
    }
    assert line["time"].endswith("+00:00")


def test_every_string_is_masked_and_an_exception_is_its_first_line() -> None:
    try:
        raise ValueError("token s3cr3t-value refused\n  Traceback-like detail")
    except ValueError:
        failed = record("calling with s3cr3t-value", level=logging.ERROR, path="/x/s3cr3t-value")
        failed.exc_info = sys.exc_info()
    line = json.loads(record_line(failed, lambda text: text.replace("s3cr3t-value", "***")))
    assert "s3cr3t-value" not in json.dumps(line)
    assert line["message"] == "calling with ***"
    assert line["path"] == "/x/***"
    assert (line["error_type"], line["error"]) == ("ValueError", "token *** refused")


def test_a_record_logged_during_a_principal_s_turn_names_the_principal() -> None:
    token = current_principal.set(Principal("ops"))
    try:
        line = json.loads(record_line(record("a provider was slow", level=logging.WARNING)))
    finally:
        current_principal.reset(token)
    assert line["principal"] == "ops"


@pytest.mark.parametrize(
    "text",
    ["\U0001f600" * 5000, "\x00\n\r\x1b" * 3000, '"},{"level":"error"' * 500, "a" * 100_000],
)
def test_any_text_is_one_ascii_line_within_the_bound(text: str) -> None:
    line = record_line(record(text, path=text, user_agent=text, status=404))
    assert "\n" not in line
    assert line.isascii()
    assert len(line) + 1 <= MAX_LINE_BYTES
    parsed = json.loads(line)
    assert parsed["truncated"] is True
    assert parsed["status"] == 404
    assert parsed["level"] == "info"


@pytest.fixture
def written() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    with json_logs(lambda text: text.replace("hidden", "***"), stream):
        yield stream


def test_json_logs_writes_the_server_s_records_and_warnings_only(written: io.StringIO) -> None:
    logging.getLogger("uvicorn.error").info("Started server process [1]")
    logging.getLogger("composer.serve").info("listening on hidden")
    logging.getLogger("some.library").info("chatter nobody asked for")
    logging.getLogger("some.library").warning("a library's warning")
    logging.getLogger("composer.registry").warning("a provider failed: its report says so")
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn("deprecated\nover two lines", DeprecationWarning, stacklevel=1)
    lines = [json.loads(line) for line in written.getvalue().splitlines()]
    assert [(line["logger"], line["level"]) for line in lines] == [
        ("uvicorn.error", "info"),
        ("composer.serve", "info"),
        ("some.library", "warning"),
        ("py.warnings", "warning"),
    ]
    assert lines[1]["message"] == "listening on ***"
    assert "DeprecationWarning: deprecated\nover two lines" in lines[3]["message"]


def test_json_logs_leaves_logging_as_it_found_it() -> None:
    root = logging.getLogger()
    handlers = list(root.handlers)
    before = logging.getLogger("uvicorn.error").level
    with json_logs(stream=io.StringIO()), json_logs(stream=io.StringIO()):  # nested: one
        assert len(root.handlers) == len(handlers) + 1
    assert root.handlers == handlers
    assert logging.getLogger("uvicorn.error").level == before


def test_the_command_s_own_lines_are_json_lines_too(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["serve", str(CONFIGS), "--env", "dev", "--log-format", "json", "--workers", "2"]
    assert main(argv) == USAGE
    (line,) = [json.loads(text) for text in capsys.readouterr().err.splitlines()]
    assert line["level"] == "error"
    assert line["message"].startswith("--workers above 1 needs --state")
    said = json.loads(event_line("listening on http://127.0.0.1:1", url="http://127.0.0.1:1"))
    assert (said["logger"], said["url"]) == ("composer.serve", "http://127.0.0.1:1")
