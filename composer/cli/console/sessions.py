"""Console sessions: a browser cannot send a bearer token when it follows a link, so a token
pasted once into the login form becomes an opaque cookie.

The cookie holds a random id and nothing else; the server keeps, by the id's SHA-256, which
principal it stands for and until when. Sessions are bounded in number (the oldest go first)
and in time (``ttl_s`` from login, and ``idle_s`` without a request); logging out forgets one.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from composer.principal import Principal

__all__ = ["COOKIE", "Sessions"]

COOKIE = "composer_console"


@dataclass
class _Session:
    principal: Principal
    expires: float
    idle_until: float


class Sessions:
    """The open console sessions of one server, in memory (a restart logs everyone out)."""

    def __init__(
        self,
        *,
        max_sessions: int = 1000,
        ttl_s: float = 8 * 3600,
        idle_s: float = 3600,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_sessions = max_sessions
        self.ttl_s = ttl_s
        self.idle_s = idle_s
        self._clock = clock
        self._open: OrderedDict[str, _Session] = OrderedDict()

    def __len__(self) -> int:
        return len(self._open)

    def open(self, principal: Principal) -> str:
        """A new session for ``principal``: the cookie's value."""
        now = self._clock()
        value = secrets.token_urlsafe(32)
        while len(self._open) >= self.max_sessions:
            self._open.popitem(last=False)
        self._open[_key(value)] = _Session(principal, now + self.ttl_s, now + self.idle_s)
        return value

    def principal(self, value: str) -> Principal | None:
        """The principal of the session ``value`` names, or None (unknown, expired, idle)."""
        key = _key(value)
        session = self._open.get(key)
        if session is None:
            return None
        now = self._clock()
        if now >= session.expires or now >= session.idle_until:
            del self._open[key]
            return None
        session.idle_until = min(session.expires, now + self.idle_s)
        self._open.move_to_end(key)
        return session.principal

    def close(self, value: str) -> None:
        self._open.pop(_key(value), None)


def _key(value: str) -> str:
    """Sessions are kept by the digest of their id: a memory dump names no live cookie."""
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
