"""Offline facts the README states, each checked in a fresh interpreter.

- lionagi alone needs the network to count tokens: ``TokenCalculator.tokenize`` downloads
  o200k_base on first use and, with no network, raises (the download sits outside its
  try), so lionagi's registry records every provider as failed. composer counts offline.
- Given the vendored file through ``TIKTOKEN_CACHE_DIR``, lionagi counts offline too.
- Importing composer, building a registry from a manifest and running a turn never imports
  lionagi (it is an optional extra).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .support import LIONAGI_MISSING

pytest.importorskip("lionagi", reason=LIONAGI_MISSING)

import composer
from composer.lionagi_support import O200K_BASE_URL, prime_tiktoken_cache
from composer.tokens import O200K_BASE_SHA256

# Runs in the child: every DNS lookup and socket connect is refused and recorded.
NO_NETWORK = """
import json, socket, sys
attempts = []
def _refuse_lookup(host, *args, **kwargs):
    attempts.append(str(host))
    raise socket.gaierror(socket.EAI_NONAME, "network disabled by the test")
def _refuse_connect(self, address):
    attempts.append(str(address))
    raise OSError("network disabled by the test")
socket.getaddrinfo = _refuse_lookup
socket.socket.connect = _refuse_connect
socket.socket.connect_ex = _refuse_connect
"""

COUNT = """
import asyncio
import composer
from lionagi.protocols.context_providers import ContextProviderRegistry
from lionagi.service.token_calculator import TokenCalculator

class Runbook:
    name = "runbook"
    async def provide(self, branch, instruction):
        return "Check the ledger first."

try:
    lionagi_count = {"tokens": TokenCalculator.tokenize("hello world")}
except Exception as e:
    lionagi_count = {"raised": f"{type(e).__module__}.{type(e).__qualname__}"}
reports = {}
for kind, cls in [("lionagi", ContextProviderRegistry), ("composer", composer.ContextProviderRegistry)]:
    registry = cls()
    registry.register(Runbook())
    report = asyncio.run(registry.gather(None, None))
    reports[kind] = {"fired": report.fired, "failed": report.failed}
print(json.dumps({
    "lionagi": lionagi_count,
    "composer": composer.count_tokens("hello world"),
    "reports": reports,
    "attempts": attempts,
}))
"""


def run_child(code: str, cache_dir: Path, *args: str) -> Any:
    """Run ``code`` in a fresh interpreter and decode the JSON it prints last."""
    env = {k: v for k, v in os.environ.items() if k not in {"DATA_GYM_CACHE_DIR"}}
    env["TIKTOKEN_CACHE_DIR"] = str(cache_dir)
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_lionagi_alone_needs_the_network_to_count_tokens(tmp_path: Path) -> None:
    empty = tmp_path / "empty-cache"
    empty.mkdir()

    result = run_child(NO_NETWORK + COUNT, empty)

    assert result["lionagi"] == {"raised": "requests.exceptions.ConnectionError"}
    assert "openaipublic.blob.core.windows.net" in result["attempts"]
    assert result["reports"]["lionagi"] == {"fired": [], "failed": ["runbook"]}
    tokens = composer.count_tokens("Check the ledger first.")
    assert result["reports"]["composer"] == {
        "fired": [{"provider_name": "runbook", "tokens": tokens}],
        "failed": [],
    }
    assert result["composer"] == composer.count_tokens("hello world")
    assert list(empty.iterdir()) == []  # nothing was downloaded


def test_prime_tiktoken_cache_writes_tiktokens_cache_entry(tmp_path: Path) -> None:
    path = prime_tiktoken_cache(tmp_path / "new" / "dir")
    assert path.name == hashlib.sha1(O200K_BASE_URL.encode()).hexdigest()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == O200K_BASE_SHA256
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_lionagi_counts_offline_from_the_vendored_file(tmp_path: Path) -> None:
    prime_tiktoken_cache(tmp_path / "cache")

    result = run_child(NO_NETWORK + COUNT, tmp_path / "cache")

    assert result["attempts"] == []
    assert result["lionagi"] == {"tokens": composer.count_tokens("hello world")}
    assert result["reports"]["lionagi"] == result["reports"]["composer"]


MANIFEST = """\
version: 1
providers:
  - name: house
    type: static
    text: "Team {{ branch.name }}."
"""

IMPORT_HYGIENE = """
import asyncio, importlib, json, pkgutil, sys
import composer, builtin_providers
for package in (composer, builtin_providers):
    for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        try:
            importlib.import_module(module.name)
        except ImportError as e:  # an integration whose framework (an extra) is absent
            if not module.name.startswith("composer.integrations.") or "context-composer[" not in str(e):
                raise

manifest = composer.load_manifest(sys.argv[1], environ={})
composer.build_registry(manifest)
branch = composer.Branch("System. ", name="payments")
composer.attach(branch, manifest)
turn = asyncio.run(composer.prepare_turn(branch, composer.Instruction("hi", guidance="Be brief.")))
assert turn.guidance == "System. Team payments.Be brief.", turn.guidance

loaded = sorted(name for name in sys.modules if name == "lionagi" or name.startswith("lionagi."))
print(json.dumps(loaded))
"""


def test_composer_never_imports_lionagi(tmp_path: Path) -> None:
    """Every composer and builtin_providers module, a YAML manifest, a registry and a turn."""
    path = tmp_path / "manifest.yaml"
    path.write_text(MANIFEST)
    assert run_child(IMPORT_HYGIENE, tmp_path, str(path)) == []
