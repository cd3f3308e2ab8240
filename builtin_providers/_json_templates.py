"""JSON data whose string leaves are templates: an http body, an MCP tool's arguments.

Compiled once (so a mistake is found when the manifest loads), rendered per turn into plain
JSON data with each string leaf rendered to a string.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from composer.plugin import CompiledTemplate, compile_template

__all__ = ["compile_json", "render_json"]


def compile_json(value: Any) -> Any:
    """Compile every string leaf of a JSON body template (each is rendered to a string)."""
    if isinstance(value, str):
        return compile_template(value)
    if isinstance(value, list):
        return [compile_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): compile_json(v) for k, v in value.items()}
    return value


def render_json(value: Any, context: Mapping[str, Any]) -> Any:
    """The data of a ``compile_json`` result for this turn's template context."""
    if isinstance(value, CompiledTemplate):
        return value.render(context)
    if isinstance(value, list):
        return [render_json(v, context) for v in value]
    if isinstance(value, dict):
        return {k: render_json(v, context) for k, v in value.items()}
    return value
