"""JSON answers: every body the server writes, errors included, is JSON, never a traceback."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from starlette.responses import JSONResponse

from composer.serve.models import ErrorBody, ErrorDetail

__all__ = ["JsonResponse", "error_response"]


class JsonResponse(JSONResponse):
    """JSON with every non-ASCII character escaped: text a provider returned may hold lone
    surrogates, which UTF-8 cannot encode but a ``\\u`` escape can carry."""

    def render(self, content: Any) -> bytes:
        return json.dumps(
            content, ensure_ascii=True, allow_nan=False, separators=(",", ":")
        ).encode("ascii")


def error_response(
    status: int,
    kind: str,
    message: str,
    *,
    details: list[dict[str, Any]] | None = None,
    headers: Mapping[str, str] | None = None,
) -> JsonResponse:
    """``{"error": {"type": kind, "message": message, "details": ...}}`` with ``status``."""
    body = ErrorBody(error=ErrorDetail(type=kind, message=message, details=details))
    return JsonResponse(body.model_dump(mode="json"), status_code=status, headers=headers)
