"""The lionagi example of docs/guides/integrations.md runs as written, offline.

Its model is pointed at a local chat endpoint the way the page's second block says (a model on
this machine: ``base_url`` and ``allow_local_network=True``), which is the only change; the
tokenizer cache starts empty, so lionagi counts offline only thanks to the example's own
``prime_tiktoken_cache`` step.
"""

from __future__ import annotations

import ast
import atexit
import inspect
from pathlib import Path
from typing import Any

import pytest
from docpages import DOCS, blocks, copy_configs

from .support import LIONAGI_MISSING, ChatServer

pytest.importorskip("lionagi", reason=LIONAGI_MISSING)

PAGE = DOCS / "guides" / "integrations.md"


def example_with_local_model(base_url: str) -> str:
    """The first block, its ``model = iModel(...)`` line replaced by the second block."""
    example, local = (block.text for block in blocks(PAGE, "python"))
    line = next(line for line in example.splitlines() if line.startswith("model = iModel("))
    return example.replace(line, local.replace("http://127.0.0.1:8000/v1", base_url).strip())


async def test_the_lionagi_example_runs_offline_on_a_local_model(
    chat_server: ChatServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy_configs(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("STATUS_TOKEN", "placeholder-for-tests")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "tiktoken"))
    code = compile(
        example_with_local_model(chat_server.base_url),
        str(PAGE),
        "exec",
        flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
        dont_inherit=True,
    )
    namespace: dict[str, Any] = {"__name__": "__main__"}
    coroutine = eval(code, namespace)
    assert inspect.iscoroutine(coroutine)
    await coroutine

    branch, model = namespace["branch"], namespace["model"]
    atexit.unregister(branch._log_manager.save_at_exit)  # lionagi would write ./data/logs
    await model.close()
    assert any((tmp_path / "tiktoken").iterdir())  # the example primed the empty cache
    assert namespace["answer"] == "fixed answer"
    report = namespace["report"]
    assert [row["provider_name"] for row in report.fired][:2] == ["house-rules", "runbooks"]
    assert report.failed == []
    sent = chat_server.requests[0].messages[0]["content"]
    assert "House rules for payments" in sent
