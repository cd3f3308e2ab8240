"""Helpers for the lionagi integration tests: a fake chat endpoint, a recording provider type,
the offline tiktoken cache, and reading back what lionagi sent.

No lionagi import here: the test modules import lionagi through ``pytest.importorskip``.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

from localserver import serving

from composer.lionagi_support import prime_tiktoken_cache
from composer.manifest import ProviderConfig
from composer.plugin import BuildContext, ProviderType

MODEL = "gpt-4.1-mini"  # tiktoken maps it to o200k_base, the one encoding composer vendors
SYSTEM = "You are the on-call assistant for the payments team."
LIONAGI_MISSING = "lionagi is not installed (pip install 'context-composer[lionagi]')"


def write_tiktoken_cache(directory: Path) -> Path:
    """Put o200k_base where tiktoken looks before downloading it (composer's helper)."""
    return prime_tiktoken_cache(directory)


# --- the fake chat-completions endpoint -------------------------------------------------


@dataclass
class Recorded:
    """One request the endpoint received: its path and raw body."""

    path: str
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def messages(self) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = self.json["messages"]
        return messages


@dataclass
class ChatServer:
    """What the endpoint received, and the replies still queued (then a fixed completion)."""

    base_url: str = ""
    requests: list[Recorded] = field(default_factory=list)
    replies: list[str] = field(default_factory=list)
    default_reply: str = "fixed answer"

    def reply(self, content: str) -> None:
        """Queue one assistant message text for the next request."""
        self.replies.append(content)

    def reply_tool_call(self, function: str, arguments: dict[str, Any]) -> None:
        """Queue a tool call in the form lionagi's operate() acts on.

        lionagi 0.36 reads tool calls from a JSON ``action_requests`` object in the message
        content; it does not act on native ``tool_calls`` (it retries parsing instead).
        """
        request = {"function": function, "arguments": arguments}
        self.reply(json.dumps({"action_required": True, "action_requests": [request]}))

    def _completion(self) -> bytes:
        content = self.replies.pop(0) if self.replies else self.default_reply
        return json.dumps(
            {
                "id": f"chatcmpl-{len(self.requests)}",
                "object": "chat.completion",
                "created": 0,
                "model": MODEL,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        ).encode()


def _handler(state: ChatServer, lock: threading.Lock) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with lock:
                state.requests.append(Recorded(self.path, body))
                answer = state._completion()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: tests read ``ChatServer.requests`` instead."""

    return Handler


@contextmanager
def serve_chat() -> Iterator[ChatServer]:
    """Serve a ChatServer on 127.0.0.1 (any free port) until the block ends."""
    state = ChatServer()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state, threading.Lock()))
    state.base_url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    with serving(httpd):
        yield state


# --- a provider type that records its calls --------------------------------------------


class ProbeConfig(ProviderConfig):
    """``type: probe``: returns ``text``, or raises when ``fail`` is set; records calls."""

    type: Literal["probe"] = "probe"
    text: str | None = None
    fail: bool = False


@dataclass
class Call:
    provider: str
    kind: Literal["provide", "writeback"]
    branch: Any
    payload: Any


class ProbeProvider:
    """Records each provide/writeback in a list shared by the registries of one manifest."""

    def __init__(self, config: ProbeConfig, calls: list[Call]) -> None:
        self.name = config.name
        self.config = config
        self.calls = calls

    async def provide(self, branch: Any, instruction: Any) -> str | None:
        self.calls.append(Call(self.name, "provide", branch, instruction))
        if self.config.fail:
            raise RuntimeError(f"probe {self.name} failed on purpose")
        return self.config.text

    async def writeback(self, branch: Any, action_responses: list[Any]) -> None:
        self.calls.append(Call(self.name, "writeback", branch, action_responses))


def _probe_factory(config: ProbeConfig, context: BuildContext) -> ProbeProvider:
    return ProbeProvider(config, context.shared("probe-calls", list))


PROBE = ProviderType("probe", ProbeConfig, _probe_factory, "Test provider that records calls.")


def probe_calls(manifest: Any) -> list[Call]:
    """Every call the manifest's probe providers recorded, in order."""
    calls: list[Call] = manifest.shared.setdefault("probe-calls", [])
    return calls


# --- reading back what lionagi sent ----------------------------------------------------

_BLOCK_HEADER = re.compile(r"\AGuidance: \|([-+]?)\n")


def sent_guidance(content: str) -> tuple[str, str]:
    """Split a rendered instruction into (guidance, rest), undoing the YAML block scalar.

    lionagi renders a multi-line guidance as ``Guidance: |-`` followed by lines indented by
    two spaces (empty lines carry no indentation). This removes exactly that indentation and
    applies the chomping indicator; nothing else is normalised. ``rest`` is the text after
    the block.
    """
    header = _BLOCK_HEADER.match(content)
    assert header, f"guidance is not a literal block scalar: {content[:80]!r}"
    lines = content[header.end() :].split("\n")
    end = 0
    while end < len(lines) and (lines[end].startswith("  ") or lines[end] == ""):
        end += 1
    block, rest = lines[:end], lines[end:]
    trailing = 0  # empty lines at the end belong to the chomping indicator, not the text
    while block and block[-1] == "":
        block.pop()
        trailing += 1
    text = "\n".join(line[2:] for line in block)
    chomp = header.group(1)
    if chomp == "":
        text += "\n"
    elif chomp == "+":
        text += "\n" * (trailing + 1)
    return text, "\n".join(rest)
