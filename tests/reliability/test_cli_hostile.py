"""The command line under a hostile terminal: it never prints a traceback.

Each case runs ``composer`` in a subprocess with the hostile setting: stdout closed or full,
an output encoding that cannot show the text (ascii, latin-1, the C locale without UTF-8
mode), bytes that are not UTF-8 in an argument or a corpus file name, and Ctrl-C during a
preview whose provider is still waiting.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from interruptible import composer_command
from localserver import serving

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "configs"
UNICODE = "The API — returns 502 ☃ after the déploiement"


def composer(
    *args: str | bytes,
    env: dict[str, str] | None = None,
    stdout: Any = subprocess.PIPE,
    shell_suffix: str = "",
) -> subprocess.CompletedProcess[bytes]:
    environ = {**os.environ, "NO_COLOR": "1", **(env or {})}
    command: list[str | bytes] = [sys.executable, "-m", "composer", *args]
    if shell_suffix:  # a redirection only a shell can make (`>&-`)
        quoted = " ".join(f"'{a}'" for a in command if isinstance(a, str))
        return subprocess.run(
            f"exec {quoted} {shell_suffix}",
            shell=True,
            env=environ,
            stderr=subprocess.PIPE,
            timeout=120,
            check=False,
        )
    return subprocess.run(
        command, env=environ, stdout=stdout, stderr=subprocess.PIPE, timeout=120, check=False
    )


def no_traceback(result: subprocess.CompletedProcess[bytes]) -> str:
    err = result.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err, err
    assert "Exception ignored" not in err, err
    return err


def preview(*extra: str | bytes) -> tuple[str | bytes, ...]:
    return ("preview", str(CONFIGS), "--env", "dev", *extra)


def test_a_closed_stdout_is_one_line_and_exit_1() -> None:
    result = composer(*preview("--instruction", "deploy"), shell_suffix=">&-")
    err = no_traceback(result)
    assert result.returncode == 1
    assert err.strip().splitlines() == ["composer: standard output is closed"]


def test_a_full_stdout_is_one_line_and_exit_1() -> None:
    with open("/dev/full", "wb") as full:
        result = composer(*preview("--instruction", "deploy"), stdout=full)
    err = no_traceback(result)
    assert result.returncode == 1
    assert err.strip().splitlines() == [
        "composer: cannot write the output: No space left on device"
    ]


@pytest.mark.parametrize(
    "env",
    [
        {"PYTHONIOENCODING": "ascii"},
        {"PYTHONIOENCODING": "latin-1"},
        {"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONIOENCODING": ""},
    ],
    ids=["ascii", "latin-1", "C-locale"],
)
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_any_output_encoding_works(env: dict[str, str], as_json: bool) -> None:
    result = composer(*preview("--instruction", UNICODE, *(["--json"] if as_json else [])), env=env)
    no_traceback(result)
    assert result.returncode == 0
    out = result.stdout.decode("latin-1")
    if as_json:
        # in the C locale the arguments themselves arrive as bytes (lone surrogates)
        instruction = json.loads(out)["instruction"]
        assert instruction.encode("utf-8", "surrogateescape").decode("utf-8") == UNICODE
    else:
        assert "\\u2014" in out or "\\udce2\\udc80\\udc94" in out  # escaped, not dropped


def test_bytes_that_are_not_utf8_in_an_argument_are_escaped() -> None:
    result = composer(*preview("--instruction", b"deploy caf\xff"))
    no_traceback(result)
    assert result.returncode == 0
    assert b"caf\\udcff" in result.stdout
    result = composer(*preview("--instruction", b"deploy caf\xff", "--json"))
    no_traceback(result)
    assert json.loads(result.stdout)["instruction"] == "deploy caf\udcff"


def test_a_corpus_file_name_that_is_not_utf8_keeps_json_valid(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / os.fsdecode(b"zeppelin-\xff.md")).write_text("# Airships\n\nThe zeppelin lands.\n")
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        "version: 1\nproviders:\n  - {name: docs, type: file_corpus, root: corpus}\n"
    )
    result = composer("preview", str(manifest), "--instruction", "zeppelin", "--json")
    no_traceback(result)
    assert result.returncode == 0
    document = json.loads(result.stdout)
    assert "zeppelin-\udcff.md" in document["guidance"]
    result = composer("preview", str(manifest), "--instruction", "zeppelin")
    no_traceback(result)
    assert b"zeppelin-\\udcff.md" in result.stdout


class Waiting(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        time.sleep(30)  # the preview is interrupted long before


@pytest.fixture
def waiting_server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Waiting)
    httpd.daemon_threads = True
    with serving(httpd):
        yield f"http://127.0.0.1:{httpd.server_address[1]}"


def test_ctrl_c_during_a_preview_exits_130_without_a_traceback(
    tmp_path: Path, waiting_server: str
) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        "version: 1\nproviders:\n  - name: slow\n    type: http\n"
        f"    request: {{url: '{waiting_server}/x', timeout_s: 60}}\n"
    )
    process = subprocess.Popen(
        composer_command("preview", str(manifest), "--instruction", "x"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "NO_COLOR": "1"},
    )
    time.sleep(2)  # started and waiting on the server
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130
    text = err.decode()
    assert "Traceback" not in text
    assert text.strip().splitlines()[-1] == "composer: interrupted"
