"""What a cached provider result depends on, so that a cache never serves it where it differs.

A provider's answer depends on three things: which provider it is (its effective
configuration, in the manifest it was loaded from), what its request was this turn (its own
``cache_key``, such as the rendered query), and what its templates read of the turn's context
beyond that request (a ``response.template`` that filters by ``branch.metadata.team``, a block
template that greets ``branch.metadata.user``). ``KeyScope`` holds the first as a digest and
the paths of the third, found once per provider per loaded manifest; the engine adds the
request and the values at those paths on each turn (``composer.build``).

The digest covers the configuration as loaded, values from variables included (a prod and a
staging replica of one manifest file differ only there), and the manifest's path, which names
the environment's file when a folder holds one per environment. It is a SHA-256: it never
shows a secret, and two manifests, environments or versions of one provider never share it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from pydantic import BaseModel

from composer.templating import CONTEXT_NAMES, template_reads

__all__ = ["KeyScope", "key_scope", "read_values"]

_KEYED_NAMES = CONTEXT_NAMES - {"now"}
"""The context names a cache key follows; ``now`` changes every turn, and how long a cached
answer may stand is what the provider's ``cache.ttl_s`` says."""

_MISSING = "\x00missing"


@dataclass(frozen=True)
class KeyScope:
    """One provider's cache scope: the digest of what it is, the context paths it reads."""

    digest: str
    reads: tuple[tuple[str | int, ...], ...]


def key_scope(config: BaseModel, manifest_path: PurePath | None) -> KeyScope:
    """The scope of the provider configured by ``config`` in the manifest at ``manifest_path``."""
    strings: list[str] = []
    raw = _raw(config, strings)
    reads: set[tuple[str | int, ...]] = set()
    for text in strings:
        reads |= template_reads(text, _KEYED_NAMES)
    document = json.dumps(
        [str(manifest_path) if manifest_path is not None else None, raw],
        sort_keys=True,
        ensure_ascii=False,
        default=str,
    )
    digest = hashlib.sha256(document.encode("utf-8", "surrogatepass")).hexdigest()
    return KeyScope(digest, tuple(sorted(reads, key=repr)))


def read_values(context: Mapping[str, Any], reads: Sequence[tuple[str | int, ...]]) -> list[Any]:
    """The value at each path of ``reads`` in a turn's template context, in order.

    A path that goes past a scalar (``instruction.text.lower``: a method of the text) stops
    at the scalar; a key that is not there is a marker no value can equal.
    """
    values: list[Any] = []
    for path in reads:
        value: Any = context
        for part in path:
            if isinstance(value, Mapping):
                value = value.get(part, _MISSING) if isinstance(part, str) else _MISSING
            elif isinstance(value, list):
                in_range = isinstance(part, int) and -len(value) <= part < len(value)
                value = value[part] if in_range else _MISSING  # type: ignore[index]
            else:
                break
            if value is _MISSING:
                break
        values.append(value)
    return values


def _raw(value: Any, strings: list[str]) -> Any:
    """``value`` as plain JSON data, every string as written (a ``Secret`` as its value, not
    ``***``), collecting the strings (templates among them) in ``strings``."""
    if isinstance(value, BaseModel):
        fields = type(value).model_fields
        return {
            "__model__": type(value).__qualname__,
            **{name: _raw(getattr(value, name), strings) for name in fields},
        }
    if isinstance(value, str):
        text = str.__str__(value)
        strings.append(text)
        return text
    if isinstance(value, Mapping):
        return {str(key): _raw(item, strings) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = [_raw(item, strings) for item in value]
        return sorted(items, key=repr) if isinstance(value, set | frozenset) else items
    if isinstance(value, PurePath):
        return str(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    return f"<{type(value).__qualname__}>"
