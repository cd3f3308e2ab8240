"""JSON Schemas for editors (``composer schema``): the manifest with every installed provider
type, its relaxed form for overlays, and the ``composer test`` file.

Each has a stable ``$id`` (a URN: nothing to fetch), so an editor setting can map file
patterns to one written copy (``composer schema --write DIR``) instead of each team folder
keeping its own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from composer.catalog import ProviderTypes
from composer.manifest import manifest_model

__all__ = [
    "MANIFEST_ID",
    "OVERLAY_ID",
    "QUESTIONS_ID",
    "SCHEMA_DIALECT",
    "SCHEMA_FILES",
    "TESTS_ID",
    "manifest_schema",
    "questions_schema",
    "schema_texts",
    "tests_schema",
    "write_schemas",
]

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
MANIFEST_ID = "urn:context-composer:schema:manifest:1"
OVERLAY_ID = "urn:context-composer:schema:manifest-overlay:1"
TESTS_ID = "urn:context-composer:schema:tests:1"
QUESTIONS_ID = "urn:context-composer:schema:questions:1"

SCHEMA_FILES = {
    "manifest.schema.json": "a complete manifest",
    "manifest.overlay.schema.json": "a manifest that extends another (nothing required)",
    "tests.schema.json": "a composer test file",
    "questions.schema.json": "a composer eval file of labelled questions",
}
"""What ``--write`` writes, by file name."""


def manifest_schema(types: ProviderTypes | None = None, *, overlay: bool = False) -> dict[str, Any]:
    """JSON Schema of a manifest, each installed type a member of a union on ``type``.

    ``overlay`` relaxes it for files that ``extends`` another: nothing is required there, since
    an entry may update a base provider by name alone.
    """
    types = types if types is not None else ProviderTypes.installed()
    model = manifest_model(ptype.config for ptype in types)
    if overlay:
        relaxed: dict[str, Any] = _relaxed(
            _schema_of(model, OVERLAY_ID, "composer manifest (overlay)")
        )
        return relaxed
    return _schema_of(model, MANIFEST_ID, "composer manifest")


def tests_schema() -> dict[str, Any]:
    """JSON Schema of a ``composer test`` file."""
    from composer.inspect.expectations import TestFile  # the runner's models, imported when asked

    return _schema_of(TestFile, TESTS_ID, "composer tests")


def questions_schema() -> dict[str, Any]:
    """JSON Schema of a ``composer eval`` file of labelled questions."""
    from composer.inspect.questions import QuestionFile  # imported when asked

    return _schema_of(QuestionFile, QUESTIONS_ID, "composer questions")


def _schema_of(model: type[BaseModel], schema_id: str, title: str) -> dict[str, Any]:
    """``model``'s JSON Schema under the dialect and ``schema_id``, titled ``title``."""
    schema: dict[str, Any] = {
        "$schema": SCHEMA_DIALECT,
        "$id": schema_id,
        **model.model_json_schema(),
    }
    schema["title"] = title
    return schema


def schema_texts(types: ProviderTypes | None = None) -> dict[str, str]:
    """Every schema of ``SCHEMA_FILES`` as the JSON text written, by file name."""
    schemas = {
        "manifest.schema.json": manifest_schema(types),
        "manifest.overlay.schema.json": manifest_schema(types, overlay=True),
        "tests.schema.json": tests_schema(),
        "questions.schema.json": questions_schema(),
    }
    return {name: json.dumps(schema, indent=2) + "\n" for name, schema in schemas.items()}


def write_schemas(folder: Path, types: ProviderTypes | None = None) -> list[Path]:
    """Write every schema of ``SCHEMA_FILES`` into ``folder`` (made if missing); the paths."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in schema_texts(types).items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


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
