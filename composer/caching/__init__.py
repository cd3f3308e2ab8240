"""Provider result caches: what a cached result is keyed by, and where it is kept.

``store``: the ``ContextCache`` interface the engine uses and the in-process LRU; ``redis``:
the same interface in Redis, shared by processes and machines; ``keys``: what a cached
result depends on (``KeyScope``), so that no cache serves it where it would differ.
"""

from __future__ import annotations

from composer.caching.keys import KeyScope, key_scope, read_values
from composer.caching.redis import RedisCache
from composer.caching.store import MISS, ContextCache, InProcessCache

__all__ = [
    "MISS",
    "ContextCache",
    "InProcessCache",
    "KeyScope",
    "RedisCache",
    "key_scope",
    "read_values",
]
