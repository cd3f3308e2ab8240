"""The HTTP API's OpenAPI 3.1 document, built from the same pydantic models that validate it.

Served at ``GET /openapi.json`` and committed as ``docs/openapi.json`` (a test keeps the two
equal: regenerate with ``python -m composer.serve.openapi > docs/openapi.json``).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from composer._version import __version__
from composer.serve.models import (
    BRANCH_ID_PATTERN,
    ErrorBody,
    Health,
    ManifestOut,
    Readiness,
    TurnRequest,
    TurnResponse,
    WritebackRequest,
    WritebackResponse,
)

__all__ = ["openapi_document"]

_REF = "#/components/schemas/{model}"
_ERRORS = {
    "401": "No valid bearer token (only when the server has one).",
    "403": "A metadata key bound to the caller stated otherwise, or a foreign Origin.",
    "409": "A writeback for a branch the server does not know, without `branch`.",
    "415": "The body is not application/json.",
    "421": "A Host that is not this machine's loopback name, on a loopback listener.",
    "413": "The body is larger than the server's limit.",
    "422": "The body is not JSON, or not this shape.",
    "429": "Too many requests from this client; see Retry-After.",
    "503": "The state store (branch state, rate limits) did not answer: nothing was done; retry.",
}


def openapi_document() -> dict[str, Any]:
    """The whole document, as JSON data (stable: the same bytes for the same code)."""
    models: list[tuple[type[BaseModel], JsonSchemaMode]] = [
        (TurnRequest, "validation"),
        (WritebackRequest, "validation"),
        (TurnResponse, "serialization"),
        (WritebackResponse, "serialization"),
        (ManifestOut, "serialization"),
        (Health, "serialization"),
        (Readiness, "serialization"),
        (ErrorBody, "serialization"),
    ]
    refs, schemas = models_json_schema(models, ref_template=_REF)

    def ref(model: type[BaseModel], mode: JsonSchemaMode = "serialization") -> dict[str, Any]:
        return refs[(model, mode)]

    def json_body(schema: dict[str, Any], description: str) -> dict[str, Any]:
        return {"description": description, "content": {"application/json": {"schema": schema}}}

    def errors(*codes: str) -> dict[str, Any]:
        return {code: json_body(ref(ErrorBody), _ERRORS[code]) for code in codes}

    secured: list[dict[str, list[str]]] = [{"bearer": []}]
    paths: dict[str, Any] = {
        "/v1/turns": {
            "post": {
                "operationId": "turn",
                "summary": "Run one turn on a branch: the folded guidance and the report.",
                "security": secured,
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": ref(TurnRequest, "validation")}},
                },
                "responses": {
                    "200": json_body(ref(TurnResponse), "The turn."),
                    **errors("401", "403", "413", "415", "421", "422", "429", "503"),
                },
            }
        },
        "/v1/branches/{branch_id}/writeback": {
            "post": {
                "operationId": "writeback",
                "summary": "Hand action responses to the branch's writeback hooks (ADR-0008 D7).",
                "security": secured,
                "parameters": [
                    {
                        "name": "branch_id",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string", "pattern": BRANCH_ID_PATTERN},
                    }
                ],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": ref(WritebackRequest, "validation")}
                    },
                },
                "responses": {
                    "200": json_body(ref(WritebackResponse), "Every writeback hook succeeded."),
                    "207": json_body(ref(WritebackResponse), "Some hooks failed (see each)."),
                    "503": json_body(ref(WritebackResponse), "Every hook failed: nothing kept."),
                    **errors("401", "403", "409", "413", "415", "421", "422", "429"),
                },
            }
        },
        "/v1/manifest": {
            "get": {
                "operationId": "manifest",
                "summary": "The effective manifest, secrets masked.",
                "security": secured,
                "responses": {
                    "200": json_body(ref(ManifestOut), "The manifest."),
                    **errors("401", "403", "421", "429", "503"),
                },
            }
        },
        "/healthz": {
            "get": {
                "operationId": "health",
                "summary": "Liveness: the process answers.",
                "security": [],
                "responses": {"200": json_body(ref(Health), "Alive.")},
            }
        },
        "/readyz": {
            "get": {
                "operationId": "readiness",
                "summary": "Readiness: 200 once the providers' warm-up (indexes) is done.",
                "security": [],
                "responses": {
                    "200": json_body(ref(Readiness), "Ready."),
                    "503": json_body(ref(Readiness), "Still warming up."),
                },
            }
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "composer context server",
            "version": __version__,
            "description": "Composed pre-turn context for any agent (ADR-0008 runtime).",
        },
        "paths": paths,
        "components": {
            "schemas": schemas.get("$defs", {}),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


if __name__ == "__main__":
    print(json.dumps(openapi_document(), indent=2, sort_keys=False))
