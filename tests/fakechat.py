"""A recording OpenAI-compatible chat-completions server on 127.0.0.1, for the agent frameworks.

Every request is kept (path, headers, body). Replies come from a queue, then a fixed text:
plain assistant text, or native ``tool_calls`` (what LangChain, the Agent Framework, Pydantic
AI and the OpenAI Agents SDK act on). ``stream: true`` is answered as server-sent events, in
the chunk shape the OpenAI API streams (with a final usage chunk when asked). Run it in a
test with ``serve_chat()``; ``python tests/fakechat.py`` serves it until interrupted, printing
its base URL (for trying the examples by hand).
"""

from __future__ import annotations

import json
import re
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))  # run as a script: localserver beside it

from localserver import serving

__all__ = [
    "FakeChat",
    "Request",
    "context_blocks",
    "prefix_breaks",
    "serve_chat",
    "split_context",
    "without_context",
]

MODEL = "gpt-4.1-mini"


@dataclass
class Request:
    """One request the server received."""

    path: str
    body: dict[str, Any]

    @property
    def messages(self) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = self.body.get("messages", [])
        return messages

    def text(self) -> str:
        """Every message's text content, joined: what the model was shown."""
        parts: list[str] = []
        for message in self.messages:
            content = message.get("content")
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):
                parts += [p.get("text", "") for p in content if isinstance(p, dict)]
        return "\n".join(parts)


@dataclass
class FakeChat:
    """What the server received, and the replies still queued."""

    base_url: str = ""
    requests: list[Request] = field(default_factory=list)
    replies: list[dict[str, Any]] = field(default_factory=list)
    default_text: str = "fixed answer"

    def reply(self, text: str) -> None:
        """Queue an assistant text for the next request."""
        self.replies.append({"role": "assistant", "content": text})

    def reply_tool_call(self, name: str, arguments: dict[str, Any]) -> None:
        """Queue one native tool call for the next request."""
        call = {
            "id": f"call_{len(self.replies)}_{name}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
        self.replies.append({"role": "assistant", "content": None, "tool_calls": [call]})

    def next_message(self) -> dict[str, Any]:
        if self.replies:
            return self.replies.pop(0)
        return {"role": "assistant", "content": self.default_text}


def _completion(message: dict[str, Any], number: int) -> dict[str, Any]:
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return {
        "id": f"chatcmpl-{number}",
        "object": "chat.completion",
        "created": 0,
        "model": MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def _chunks(message: dict[str, Any], number: int, usage: bool) -> Iterator[dict[str, Any]]:
    base = {"id": f"chatcmpl-{number}", "object": "chat.completion.chunk", "created": 0}
    base["model"] = MODEL
    delta: dict[str, Any] = {"role": "assistant"}
    if message.get("content"):
        delta["content"] = message["content"]
    if message.get("tool_calls"):
        delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(message["tool_calls"])]
    yield {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    yield {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
    if usage:
        totals = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        yield {**base, "choices": [], "usage": totals}


def _handler(state: FakeChat, lock: threading.Lock) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.loads(raw or b"{}")
            with lock:
                state.requests.append(Request(self.path, body))
                number = len(state.requests)
                message = state.next_message()
            if body.get("stream"):
                usage = bool((body.get("stream_options") or {}).get("include_usage"))
                events = b"".join(
                    b"data: " + json.dumps(chunk).encode() + b"\n\n"
                    for chunk in _chunks(message, number, usage)
                )
                events += b"data: [DONE]\n\n"
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(events)))
                self.end_headers()
                self.wfile.write(events)
                return
            answer = json.dumps(_completion(message, number)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: tests read ``FakeChat.requests``."""

    return Handler


@contextmanager
def serve_chat() -> Iterator[FakeChat]:
    """A FakeChat on 127.0.0.1 (any free port) until the block ends; ``base_url`` ends in /v1."""
    state = FakeChat()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state, threading.Lock()))
    httpd.daemon_threads = True
    state.base_url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    with serving(httpd):
        yield state


def split_context(text: str) -> tuple[str, str] | None:
    """A text that starts with the turn's composed context block (``stable_prefix``): the
    block's inside with its nonce taken out (what stays the same when a turn is composed
    again), and the text after the block; None when it does not start with one."""
    from composer.turn import CONTEXT_BLOCK

    found = CONTEXT_BLOCK.match(text)
    if found is None:
        return None
    return found[2].replace(found[1], ""), text[found.end() :].removeprefix("\n")


def context_blocks(text: str) -> list[tuple[str, str]]:
    """The labelled blocks of the context block ``text`` starts with: (provider, text)."""
    from composer.turn import CONTEXT_BLOCK

    found = CONTEXT_BLOCK.match(text)
    assert found is not None, "no context block"
    label = rf'<block source="([^"]*)" id="{found[1]}">\n(.*?)\n</block id="{found[1]}">'
    return re.findall(label, found[2], re.DOTALL)


def without_context(message: dict[str, Any]) -> dict[str, Any] | None:
    """A user message with the turn's composed context block (``stable_prefix``) taken out:
    None when the message was only that block, its text after the block when the block was
    prepended to it, the message itself otherwise."""
    content = message.get("content")
    if message.get("role") != "user" or not isinstance(content, str):
        return message
    parts = split_context(content)
    if parts is None:
        return message
    return {**message, "content": parts[1]} if parts[1] else None


def prefix_breaks(requests: list[Request]) -> list[str]:
    """Where a request does not begin with the whole previous request, context block aside.

    For each request after the first: the previous request's messages, each with its context
    block taken out (``without_context``), must be the first messages of this one, each the
    same JSON text as sent (keys in the order sent). So the system text, the history and the
    previous user message are byte-identical, and only the newest turn's part is new.
    """
    breaks: list[str] = []
    for number in range(1, len(requests)):
        kept = [without_context(m) for m in requests[number - 1].messages]
        before = [json.dumps(m) for m in kept if m is not None]
        sent = [json.dumps(m) for m in requests[number].messages]
        if sent[: len(before)] != before:
            breaks.append(f"request {number + 1} does not begin with request {number}")
    return breaks


if __name__ == "__main__":
    with serve_chat() as chat:
        print(chat.base_url, flush=True)
        threading.Event().wait()
