"""Fixtures for running composer manifests on real lionagi branches, with no internet.

- ``offline_tiktoken`` (session, autouse): lionagi counts tokens with
  ``tiktoken.get_encoding("o200k_base")``, which downloads its rank file; tiktoken first looks
  in ``TIKTOKEN_CACHE_DIR`` under the SHA-1 of the download URL, so the vendored file is put
  there and lionagi counts exactly what composer counts, offline. Set before any test here
  runs, i.e. before lionagi's tiktoken loads the encoding (it is read on first use).
- ``chat_server``: a fake OpenAI-compatible ``/v1/chat/completions`` endpoint on 127.0.0.1.
- ``chat_model``: a lionagi ``iModel`` pointed at it (lionagi's SSRF guard refuses loopback
  unless the model is created with ``allow_local_network=True``); closed after the test.
- ``make_branch``: lionagi Branches on that model, their logs kept in ``tmp_path``.
- ``types``: the provider types the tests attach with (``static`` and the recording ``probe``).

Nothing here imports lionagi at module level: each test module starts with
``pytest.importorskip("lionagi", ...)``, so without the extra its tests skip with that reason.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from builtin_providers.static import provider_type as static_type
from composer.catalog import ProviderTypes

from .support import MODEL, PROBE, SYSTEM, ChatServer, serve_chat, write_tiktoken_cache


@pytest.fixture(scope="session", autouse=True)
def offline_tiktoken(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """TIKTOKEN_CACHE_DIR holding the vendored o200k_base, for this directory's tests."""
    cache = tmp_path_factory.mktemp("tiktoken-cache")
    write_tiktoken_cache(cache)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TIKTOKEN_CACHE_DIR", str(cache))
        yield cache


@pytest.fixture
def chat_server() -> Iterator[ChatServer]:
    """A chat-completions endpoint on 127.0.0.1 that records requests; closed after the test."""
    with serve_chat() as server:
        yield server


@pytest.fixture
async def chat_model(chat_server: ChatServer) -> AsyncIterator[Any]:
    """A lionagi iModel (provider openai) that can reach only ``chat_server``."""
    from lionagi import iModel

    model = iModel(
        provider="openai",
        base_url=chat_server.base_url,
        api_key="dummy",
        model=MODEL,
        allow_local_network=True,
    )
    try:
        yield model
    finally:
        await model.close()


@pytest.fixture
def make_branch(chat_model: Any, tmp_path: Path) -> Callable[..., Any]:
    """``make_branch(system=SYSTEM, **kw)``: a lionagi Branch on ``chat_model``.

    Logs stay in ``tmp_path`` and are not saved at exit (lionagi's default writes
    ``./data/logs`` from an atexit hook).
    """
    from lionagi import Branch

    def make(system: str | None = SYSTEM, **kwargs: Any) -> Any:
        kwargs.setdefault("chat_model", chat_model)
        kwargs.setdefault(
            "log_config", {"persist_dir": str(tmp_path / "logs"), "auto_save_on_exit": False}
        )
        return Branch(system=system, **kwargs)

    return make


@pytest.fixture
def types() -> ProviderTypes:
    """The built-in ``static`` type plus the recording ``probe`` type."""
    return ProviderTypes([static_type, PROBE])
