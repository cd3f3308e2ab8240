"""The JSON Schema of a manifest, with every installed provider type (``composer schema``)."""

from __future__ import annotations

from typing import Any

from composer.catalog import ProviderTypes
from composer.manifest import manifest_model

__all__ = ["SCHEMA_DIALECT", "manifest_schema"]

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def manifest_schema(types: ProviderTypes | None = None, *, overlay: bool = False) -> dict[str, Any]:
    """JSON Schema of a manifest, each installed type a member of a union on ``type``.

    ``overlay`` relaxes it for files that ``extends`` another: nothing is required there, since
    an entry may update a base provider by name alone.
    """
    types = types if types is not None else ProviderTypes.installed()
    model = manifest_model(ptype.config for ptype in types)
    schema: dict[str, Any] = {"$schema": SCHEMA_DIALECT, **model.model_json_schema()}
    schema["title"] = "composer manifest (overlay)" if overlay else "composer manifest"
    if overlay:
        schema = _relaxed(schema)
    return schema


def _relaxed(node: Any) -> Any:
    if isinstance(node, dict):
        return {
            ("anyOf" if key == "oneOf" else key): _relaxed(value)
            for key, value in node.items()
            if key not in ("required", "discriminator")
        }
    if isinstance(node, list):
        return [_relaxed(item) for item in node]
    return node
