"""The audit log against hostile inputs: huge instructions, a full disk, a planted path.

Each test runs real turns into a real file (a real FIFO, symlink, tmpfs or file size limit);
the memory test runs the server's own turn (``ContextService.turn``) in fresh processes.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import composer
from composer.observe.audit import AuditLog
from composer.observe.audit.base import QUEUE_BYTES
from composer.observe.record import AuditLine, read_lines

PROVIDERS = """\
providers:
  - {name: rules, type: static, priority: 9, text: "Answer in English.\\n"}
  - {name: deploys, type: static, text: "deploy notes", when: "'deploy' in instruction.text"}
"""
BROKEN = '  - {name: broken, type: static, text: "{{ instruction.context.ticket.id }}"}\n'


def manifest_at(folder: Path, path: Path | str, *, keep: bool = False) -> composer.Manifest:
    """``m.yaml`` in ``folder``, auditing to ``path``, with a provider that fails every turn."""
    audit = f"{{path: {json.dumps(str(path))}, keep_text: {'true' if keep else 'false'}}}"
    text = f"version: 1\nbudget: 40\nruntime: {{audit: {audit}}}\n{PROVIDERS}{BROKEN}"
    (folder / "m.yaml").write_text(text)
    return composer.load_manifest(folder / "m.yaml")


async def run_turns(manifest: composer.Manifest, count: int, text: str = "deploy") -> AuditLog:
    """``count`` turns on one branch (none fails for the audit log); the manifest's log, flushed."""
    branch = composer.Branch("You are on call.\n", name="payments")
    composer.attach(branch, manifest)
    for i in range(count):
        turn = await composer.prepare_turn(branch, f"{text} {i}")
        assert turn.report is not None
        assert turn.report.failed == ["broken"]  # the turn itself is unharmed
    log: AuditLog = manifest.shared["observe"].audit
    assert log.flush(10), "the writer is stuck"
    return log


def parsed(path: Path) -> list[AuditLine]:
    """Every line of ``path`` as an audit line; fails on any line that is not one whole."""
    found = list(read_lines(path))
    bad = [(number, line) for number, line in found if not isinstance(line, AuditLine)]
    assert bad == []
    assert path.read_bytes().endswith(b"\n")
    return [line for _, line in found if isinstance(line, AuditLine)]


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "audit log" in r.getMessage()]


# -- memory: 1,500 turns of 0.9 MB each

SERVER_TURNS = """
import asyncio, json, sys
import composer
from composer.serve.models import TurnRequest
from composer.serve.service import ContextService

def rss(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) * 1024

async def main():
    manifest = composer.load_manifest(sys.argv[1])
    service = ContextService(manifest)
    filler = "x" * 900_000
    for i in range(int(sys.argv[2])):
        request = TurnRequest.model_validate({
            "branch": {"id": f"b{i % 4}", "name": "payments"},
            "system": "You are on call.",
            "instruction": {"text": f"deploy {i} " + filler},  # a new text every turn
        })
        await service.turn(request)
    observer = manifest.shared.get("observe")
    log = observer.audit if observer is not None else None
    counts = None
    if log is not None:
        assert log.flush(60)
        counts = [log.written, log.dropped, log.failed]
    peak, end = rss("VmHWM:"), rss("VmRSS:")
    await manifest.aclose()
    print(json.dumps({"peak": peak, "end": end, "counts": counts}))

asyncio.run(main())
"""

MIB = 1024 * 1024


@dataclass(frozen=True)
class Run:
    peak: int  # bytes of RSS, the highest (VmHWM) and at the end
    end: int
    counts: tuple[int, int, int] | None  # written, dropped, failed


def server_run(folder: Path, runtime: str, turns: int) -> Run:
    """``turns`` turns through the server's ``ContextService`` in a fresh process."""
    folder.mkdir()
    (folder / "m.yaml").write_text(f"version: 1\nbudget: 40\n{runtime}{PROVIDERS}")
    done = subprocess.run(
        [sys.executable, "-c", SERVER_TURNS, str(folder / "m.yaml"), str(turns)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    counts = None if result["counts"] is None else tuple(result["counts"])
    return Run(result["peak"], result["end"], counts)


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs Linux /proc")
def test_huge_instructions_do_not_grow_the_servers_memory(tmp_path: Path) -> None:
    """1,500 turns of 0.9 MB each: with the audit log (hashes, or with keep_text the texts),
    peak and final RSS stay within 150 MiB of the same run without it."""
    turns = 1500
    off = server_run(tmp_path / "off", "", turns)
    audit = server_run(tmp_path / "audit", "runtime: {audit: {path: turns.jsonl}}\n", turns)
    kept = server_run(
        tmp_path / "kept", "runtime: {audit: {path: turns.jsonl, keep_text: true}}\n", turns
    )
    for run in (audit, kept):
        assert run.peak - off.peak <= 150 * MIB, (off, run)
        assert run.end - off.end <= 150 * MIB, (off, run)
    assert audit.counts == (turns, 0, 0)  # every line written: hashes are cheap to queue
    lines = parsed(tmp_path / "audit" / "turns.jsonl")
    assert len(lines) == turns
    assert lines[0].instruction is not None
    assert lines[0].instruction.chars == len("deploy 0 ") + 900_000
    assert lines[0].instruction.text is None
    assert kept.counts is not None
    written, dropped, failed = kept.counts
    assert (written + dropped, failed) == (turns, 0)  # a line that does not fit is dropped


async def test_with_keep_text_a_stalled_writer_holds_the_queues_bytes_not_its_lines(
    tmp_path: Path,
) -> None:
    """The queue allows 10,000 lines, but 1 MB instructions fill its bytes after 64."""
    manifest = manifest_at(tmp_path, "turns.jsonl", keep=True)
    log = await run_turns(manifest, 1)
    release = threading.Event()

    def stuck(kind: str, n: int) -> None:
        if threading.current_thread().name.startswith("composer-audit"):
            release.wait(20)

    log.on_count = stuck
    big = "deploy " + "y" * MIB
    await run_turns_unflushed(manifest, 100, big)
    queued = 100 - log.dropped
    assert log.dropped > 0
    assert queued <= QUEUE_BYTES // MIB + 1  # what the writer holds: one batch of about 1 MiB
    release.set()
    assert log.flush(20)
    await manifest.aclose()
    assert (log.written, log.failed) == (1 + queued, 0)
    lines = parsed(tmp_path / "turns.jsonl.1") + parsed(tmp_path / "turns.jsonl")  # 64 MiB each
    assert len(lines) == log.written
    assert lines[-1].instruction is not None
    assert lines[-1].instruction.text is not None
    assert lines[-1].instruction.text.startswith(big)


async def run_turns_unflushed(manifest: composer.Manifest, count: int, text: str) -> None:
    branch = composer.Branch("You are on call.\n")
    composer.attach(branch, manifest)
    for i in range(count):
        await composer.prepare_turn(branch, f"{text} {i}")
        branch.messages.clear()


# -- a nearly full disk: a short write leaves no torn line


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs, as root; otherwise the test is skipped (mount needs root)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (the file size limit test covers the rest)")
    folder = tmp_path / "disk"
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)  # lazily: a test that failed
        # may leave the writer's descriptor open


async def test_a_full_disk_cuts_a_short_write_back_to_the_last_whole_line(
    tmp_path: Path, tiny_disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Fill the tmpfs but for 12 KiB, write 1 KB lines until it is full, free it, write on:
    every line in the file is whole, none is glued to a torn one, and the counters say what
    reached the file."""
    filler = tiny_disk / "filler"
    filler.write_bytes(b"\0" * (64 - 12) * 1024)
    caplog.set_level(logging.WARNING, logger="composer")
    manifest = manifest_at(tmp_path, tiny_disk / "turns.jsonl", keep=True)
    log = await run_turns(manifest, 30, text="deploy " + "z" * 1000)
    assert log.written > 0
    assert log.failed > 0  # the disk filled up
    assert (tiny_disk / "turns.jsonl").stat().st_size <= 12 * 1024
    assert len(parsed(tiny_disk / "turns.jsonl")) == log.written
    assert any("No space left on device" in message for message in warnings_of(caplog))
    filler.unlink()  # space again: the next lines go on after the last whole one
    await run_turns(manifest, 5, text="deploy " + "z" * 1000)
    await manifest.aclose()
    assert (log.written + log.failed, log.dropped) == (35, 0)
    lines = parsed(tiny_disk / "turns.jsonl")
    assert len(lines) == log.written
    assert [(line.instruction.text or "")[-2:] for line in lines[-5:] if line.instruction] == [
        f" {i}" for i in range(5)
    ]


FILE_SIZE_LIMIT = """
import asyncio, json, resource, sys
import composer

async def main():
    manifest = composer.load_manifest(sys.argv[1])
    branch = composer.Branch("You are on call.\\n")
    composer.attach(branch, manifest)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (10_000, hard))  # writes past 10,000 bytes fail
    for i in range(30):
        await composer.prepare_turn(branch, f"deploy {i} " + "z" * 1000)
    log = manifest.shared["observe"].audit
    assert log.flush(10)
    full = [log.written, log.failed]
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    for i in range(5):
        await composer.prepare_turn(branch, f"again {i}")
    await manifest.aclose()
    print(json.dumps({"full": full, "end": [log.written, log.dropped, log.failed]}))

asyncio.run(main())
"""


def test_a_file_size_limit_cuts_a_short_write_back_to_the_last_whole_line(
    tmp_path: Path,
) -> None:
    """The same without root: past ``RLIMIT_FSIZE`` a write is short, then fails (EFBIG), as
    on a nearly full disk. Python ignores SIGXFSZ, so the writer sees the error."""
    manifest_at(tmp_path, "turns.jsonl", keep=True)
    done = subprocess.run(
        [sys.executable, "-c", FILE_SIZE_LIMIT, str(tmp_path / "m.yaml")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    counts = json.loads(done.stdout.splitlines()[-1])
    written, failed = counts["full"]
    assert written > 0
    assert failed > 0
    assert counts["end"] == [written + 5, 0, failed]
    assert "File too large" in done.stderr
    lines = parsed(tmp_path / "turns.jsonl")
    assert len(lines) == written + 5
    assert (tmp_path / "turns.jsonl").stat().st_size > 10_000  # the limit was lifted
    assert [line.instruction.text for line in lines[-5:] if line.instruction] == [
        f"again {i}" for i in range(5)
    ]


async def test_a_line_torn_by_a_crash_is_ended_before_the_next_line(tmp_path: Path) -> None:
    path = tmp_path / "turns.jsonl"
    path.write_bytes(b'{"version": 1, "time": "2026-')  # a writer killed mid-line
    path.chmod(0o600)
    manifest = manifest_at(tmp_path, path)
    log = await run_turns(manifest, 2)
    await manifest.aclose()
    found = list(read_lines(path))
    assert [type(line) for _, line in found] == [str, AuditLine, AuditLine]
    assert log.written == 2


# -- what is at the path


async def test_a_fifo_at_the_path_is_refused_without_blocking_the_writer(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """No reader: ``open`` would wait for one forever. A reader: still refused, nothing sent."""
    fifo = tmp_path / "turns.jsonl"
    os.mkfifo(fifo)
    caplog.set_level(logging.WARNING, logger="composer")
    manifest = manifest_at(tmp_path, fifo)
    log = await run_turns(manifest, 3)  # flush() returns: the writer is not stuck in open
    assert (log.written, log.failed) == (0, 3)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        await run_turns(manifest, 2)
        try:
            received = os.read(reader, 65536)
        except BlockingIOError:  # a writer holds it open, but wrote nothing
            received = b""
        assert received == b""
    finally:
        os.close(reader)
    await manifest.aclose()
    assert (log.written, log.failed) == (0, 5)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    (message,) = warnings_of(caplog)  # one a minute per kind
    assert "lines lost: not a regular file: refused" in message


@pytest.mark.parametrize("dangling", [False, True], ids=["to a file", "dangling"])
async def test_a_planted_symlink_is_refused_and_its_target_untouched(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, dangling: bool
) -> None:
    target = tmp_path / "elsewhere" / "authorized_keys"
    target.parent.mkdir()
    if not dangling:
        target.write_text("ssh-ed25519 AAAA admin\n")
        target.chmod(0o644)
    os.symlink(target, tmp_path / "turns.jsonl")
    caplog.set_level(logging.WARNING, logger="composer")
    manifest = manifest_at(tmp_path, "turns.jsonl")
    log = await run_turns(manifest, 3)
    await manifest.aclose()
    assert (log.written, log.failed) == (0, 3)
    assert any("a symbolic link: refused" in message for message in warnings_of(caplog))
    assert os.path.islink(tmp_path / "turns.jsonl")
    if dangling:
        assert not target.exists()
    else:
        assert target.read_text() == "ssh-ed25519 AAAA admin\n"
        assert stat.S_IMODE(target.stat().st_mode) == 0o644


async def test_a_readable_existing_file_is_made_0600_and_appended_to(tmp_path: Path) -> None:
    path = tmp_path / "turns.jsonl"
    manifest = manifest_at(tmp_path, path)
    await run_turns(manifest, 1)
    await manifest.aclose()
    path.chmod(0o644)
    manifest = manifest_at(tmp_path, path)
    log = await run_turns(manifest, 2)
    await manifest.aclose()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert log.written == 2
    assert len(parsed(path)) == 3


async def test_another_users_file_is_refused_and_left_as_it_was(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    path = tmp_path / "turns.jsonl"
    path.write_text("theirs\n")
    path.chmod(0o644)
    os.chown(path, 65534, 65534)
    caplog.set_level(logging.WARNING, logger="composer")
    manifest = manifest_at(tmp_path, path)
    log = await run_turns(manifest, 3)
    await manifest.aclose()
    assert (log.written, log.failed) == (0, 3)
    assert any("owned by uid 65534" in message for message in warnings_of(caplog))
    info = path.stat()
    assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (65534, 0o644)
    assert path.read_text() == "theirs\n"
