"""Console sessions: a browser cannot send a bearer token when it follows a link, so a token
pasted once into the login form becomes a signed cookie.

The cookie is self-contained, so every worker and replica that loads the same principals file
accepts it without a shared table::

    1:<principal>:<issued>:<seen>:<expires>:<nonce>:<mac>

times in whole seconds of the wall clock, a random 16-byte nonce, and the signature of
everything before it, made and checked (in constant time) by ``itsdangerous``'s ``Signer``:
HMAC-SHA256 under the key ``SHA-256(context + the principal's token)``. The cookie names its
principal but holds no token and nothing from which one can be recovered; a cookie of one
principal cannot be made into another's (the key is the other's token); and rotating or
removing a principal's token ends all its sessions everywhere.

Bounds: ``ttl_s`` from login, however busy; ``idle_s`` since the ``seen`` time signed in it,
which a request moves on by re-issuing the cookie at most every ``renew_s``; ``MAX_COOKIE``
characters; anything malformed is simply no session. Logging out remembers the nonce, in
this process only and in a bounded set, until the cookie would expire: another worker or
replica accepts a copied cookie until then (the browser's own copy is deleted).
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from itsdangerous import BadSignature, Signer

from composer.principal import Principal
from composer.serve.principals import Principals

__all__ = ["CONTEXT", "COOKIE", "MAX_COOKIE", "SKEW_S", "Session", "Sessions"]

COOKIE = "composer_console"

MAX_COOKIE = 256
"""The longest cookie value read at all (a real one is about 110 characters)."""

CONTEXT = b"composer console session v1\x00"
"""What the signing key is derived for: a key of this purpose signs nothing else."""

SKEW_S = 60
"""How far in the future a signed time may lie (replicas' clocks differ a little)."""

# One spelling per value, so that an edit is always another text: numbers without leading
# zeros, and a MAC whose last character leaves the unused low bits of its base64 at zero
# (decoding ignores them: "...A" and "...B" would be the same 32 bytes).
_NUMBER = r"(0|[1-9][0-9]{0,11})"
_VALUE = re.compile(
    rf"1:([A-Za-z0-9._-]{{1,64}}):{_NUMBER}:{_NUMBER}:{_NUMBER}:([A-Za-z0-9_-]{{22}})"
    r":[A-Za-z0-9_-]{42}[AEIMQUYcgkosw048]"
)


@dataclass(frozen=True)
class Session:
    """A valid session: its principal, the re-issued cookie when it is due (else None), and
    the seconds left of its lifetime (the re-issued cookie's ``Max-Age``)."""

    principal: Principal
    renewed: str | None
    left_s: int


@dataclass(frozen=True)
class _Fields:
    name: str
    issued: int
    seen: int
    expires: int
    nonce: str


class Sessions:
    """Issues and checks the console's signed session cookies; keeps only the nonces logged
    out in this process."""

    def __init__(
        self,
        *,
        ttl_s: float = 8 * 3600,
        idle_s: float = 3600,
        renew_s: float = 300,
        max_revoked: int = 10_000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.ttl_s = ttl_s
        self.idle_s = idle_s
        self.renew_s = renew_s
        self.max_revoked = max_revoked
        self._clock = clock
        self._revoked: OrderedDict[str, int] = OrderedDict()  # nonce -> its cookie's expiry

    def revoked(self) -> int:
        """How many logged-out nonces this process remembers."""
        return len(self._revoked)

    def open(self, principal: Principal, principals: Principals) -> str:
        """A new session for ``principal`` (one of ``principals``): the cookie's value."""
        now = int(self._clock())
        nonce = secrets.token_urlsafe(16)
        fields = _Fields(principal.name, now, now, now + int(self.ttl_s), nonce)
        value = _sign(fields, principals)
        if value is None:
            raise ValueError(f"no principal {principal.name!r} to open a session for")
        return value

    def check(self, value: str, principals: Principals) -> Session | None:
        """The session ``value`` stands for, or None: malformed, wrongly signed, unknown
        principal, past its lifetime, idle too long, or logged out here."""
        verified = self._verify(value, principals)
        if verified is None:
            return None
        fields, principal = verified
        now = int(self._clock())
        renewed = None
        if now - fields.seen >= self.renew_s:
            renewed = _sign(
                _Fields(fields.name, fields.issued, now, fields.expires, fields.nonce), principals
            )
        return Session(principal, renewed, fields.expires - now)

    def close(self, value: str, principals: Principals) -> None:
        """Log the session out in this process: its nonce is refused until it expires."""
        verified = self._verify(value, principals)
        if verified is None:
            return
        fields = verified[0]
        now = int(self._clock())
        if len(self._revoked) >= self.max_revoked:
            for nonce, expires in list(self._revoked.items()):
                if expires <= now:
                    del self._revoked[nonce]
        while len(self._revoked) >= self.max_revoked:
            self._revoked.popitem(last=False)  # the oldest logout goes first
        self._revoked[fields.nonce] = fields.expires

    def _verify(self, value: object, principals: Principals) -> tuple[_Fields, Principal] | None:
        if not isinstance(value, str) or len(value) > MAX_COOKIE:
            return None
        match = _VALUE.fullmatch(value)
        if match is None:
            return None
        name, issued, seen, expires, nonce = match.groups()
        fields = _Fields(name, int(issued), int(seen), int(expires), nonce)
        found = principals.derived_key(name, CONTEXT)
        if found is None:
            return None
        principal, key = found
        try:
            _signer(key).unsign(value)
        except BadSignature:
            return None
        now = int(self._clock())
        if not (
            fields.issued <= fields.seen <= now + SKEW_S
            and fields.expires - fields.issued <= self.ttl_s
            and now < fields.expires
            and now < fields.seen + self.idle_s
        ):
            return None
        if fields.nonce in self._revoked:
            return None
        return fields, principal


def _signer(key: bytes) -> Signer:
    """``key`` is already the principal's derived key: itsdangerous uses it as it is."""
    return Signer(key, sep=":", key_derivation="none", digest_method=hashlib.sha256)


def _sign(fields: _Fields, principals: Principals) -> str | None:
    found = principals.derived_key(fields.name, CONTEXT)
    if found is None:
        return None
    payload = f"1:{fields.name}:{fields.issued}:{fields.seen}:{fields.expires}:{fields.nonce}"
    return _signer(found[1]).sign(payload).decode("ascii")
