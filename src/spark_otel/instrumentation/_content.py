"""Prompts and completions in the semconv message shape, recorded only with content capture on;
and reading a field from an SDK model and a decoded JSON body alike."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .. import _semconv as sc

__all__ = ["get_field", "is_mapping", "output_content_messages", "request_content_messages"]

_mapping_types: dict[type, bool] = {dict: True}


def is_mapping(obj: Any) -> bool:
    """A decoded JSON body rather than an SDK model."""
    cls = type(obj)
    found = _mapping_types.get(cls)
    if found is None:  # an ABC check is slow; a type's answer never changes
        found = _mapping_types[cls] = isinstance(obj, Mapping)
    return found


def get_field(obj: Any, key: str) -> Any:
    """Read ``key`` from an SDK model or a decoded JSON dict alike."""
    if is_mapping(obj):
        return obj.get(key)
    return getattr(obj, key, None)


def _text_parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    if isinstance(content, Sequence):
        parts: list[dict[str, Any]] = []
        for part in content:
            if get_field(part, "type") == "text":
                parts.append({"type": "text", "content": get_field(part, "text")})
            else:
                parts.append({"type": str(get_field(part, "type") or "unknown")})
        return parts
    return []


def request_content_messages(operation: str, params: Mapping[str, Any]) -> str | None:
    """``gen_ai.input.messages`` JSON (semconv message shape) from the request parameters."""
    if operation == sc.OPERATION_CHAT:
        messages = params.get("messages")
        if not isinstance(messages, Sequence):
            return None
        shaped = [
            {"role": get_field(m, "role"), "parts": _text_parts(get_field(m, "content"))} for m in messages
        ]
    else:
        prompt = params.get("prompt")
        if prompt is None:
            return None
        shaped = [{"role": "user", "parts": _text_parts(prompt if isinstance(prompt, str) else str(prompt))}]
    return json.dumps(shaped, default=str)


def output_content_messages(texts: Mapping[int, list[str]], reasons: Mapping[int, str] | None) -> str:
    """``gen_ai.output.messages`` JSON (semconv message shape) from the texts of each choice."""
    reasons = reasons or {}
    shaped = [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "".join(texts[index])}],
            "finish_reason": reasons.get(index, sc.FINISH_REASON_ERROR),
        }
        for index in sorted(texts)
    ]
    return json.dumps(shaped)
