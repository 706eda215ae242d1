"""Fields of an OpenAI-compatible stream chunk that several readers need: its error, its usage.

A chunk is an SDK object or a decoded JSON event; both are read here the same way.
"""

from __future__ import annotations

from typing import Any

from .. import _semconv as sc

__all__ = ["error_event_type", "error_of", "usage_of"]


def error_of(body: Any) -> Any:
    """The error an in-stream event reports, None for any other event. vLLM sends
    ``{"error": {...}}``; older releases send the error response itself (``object: error``)."""
    if not isinstance(body, dict):
        return None
    error = body.get("error")
    if error is None and body.get("object") == "error":
        error = body
    return error


def error_event_type(body: Any) -> str:
    """``error.type`` of an in-stream error event: its numeric code, else its type name."""
    error = error_of(body)
    if isinstance(error, dict):
        code = error.get("code")
        if isinstance(code, int):
            return str(code)
        kind = error.get("type")
        if isinstance(kind, str) and kind:
            return kind
    return sc.ERROR_TYPE_OTHER


def usage_of(usage: Any) -> tuple[int | None, int] | None:
    """(prompt tokens or None, completion tokens) of a chunk's ``usage``; None without a count."""
    if usage is None:
        return None
    if isinstance(usage, dict):
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    else:
        prompt, completion = getattr(usage, "prompt_tokens", None), getattr(usage, "completion_tokens", None)
    if not isinstance(completion, int) or isinstance(completion, bool):
        return None
    return (prompt if isinstance(prompt, int) and not isinstance(prompt, bool) else None), completion
