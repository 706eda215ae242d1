"""A chunk's error and usage, read the same from decoded JSON and from SDK objects: every shape an
engine sends, and the look-alikes that must not count."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from spark_otel import _semconv as sc
from spark_otel.wire.chunks import error_event_type, error_of, usage_of

VLLM_ERROR = {"error": {"message": "out of KV cache", "type": "InternalServerError", "code": 500}}
# Older vLLM releases stream the error response itself.
OLD_VLLM_ERROR = {"object": "error", "message": "out of KV cache", "type": "BadRequestError", "code": 400}


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (VLLM_ERROR, VLLM_ERROR["error"]),
        (OLD_VLLM_ERROR, OLD_VLLM_ERROR),
        ({"error": "plain text"}, "plain text"),
        # An error field wins over the object marker: the marker names the body, not the error.
        ({"error": {"code": 1}, "object": "error"}, {"code": 1}),
        ({"object": "chat.completion.chunk", "choices": []}, None),
        ({"object": "Error"}, None),  # the marker is exact
        ({"message": "no marker"}, None),
        ([{"error": "in a list"}], None),
        ("error", None),
        (None, None),
    ],
)
def test_error_of_finds_the_error_in_both_of_vllms_shapes_and_nothing_else(body: Any, expected: Any) -> None:
    assert error_of(body) == expected


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (VLLM_ERROR, "500"),  # the numeric code wins over the type name
        (OLD_VLLM_ERROR, "400"),
        ({"error": {"type": "RateLimitError"}}, "RateLimitError"),
        ({"error": {"code": "500", "type": "InternalServerError"}}, "InternalServerError"),  # not an int
        ({"error": {"type": ""}}, sc.ERROR_TYPE_OTHER),
        ({"error": {"type": 7}}, sc.ERROR_TYPE_OTHER),
        ({"error": "plain text"}, sc.ERROR_TYPE_OTHER),
        ({"choices": []}, sc.ERROR_TYPE_OTHER),
    ],
)
def test_error_event_type_is_the_code_else_the_type_else_other(body: Any, expected: str) -> None:
    assert error_event_type(body) == expected


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        ({"prompt_tokens": 12, "completion_tokens": 34, "total_tokens": 46}, (12, 34)),
        (SimpleNamespace(prompt_tokens=12, completion_tokens=34), (12, 34)),
        ({"completion_tokens": 34}, (None, 34)),
        (SimpleNamespace(completion_tokens=34), (None, 34)),
        ({"prompt_tokens": True, "completion_tokens": 0}, (None, 0)),  # a bool is not a count
        ({"prompt_tokens": 1.5, "completion_tokens": 3}, (None, 3)),
        ({"prompt_tokens": 12}, None),  # no completion count: no usage
        ({"prompt_tokens": 12, "completion_tokens": False}, None),
        ({"prompt_tokens": 12, "completion_tokens": "34"}, None),
        (SimpleNamespace(prompt_tokens=12), None),
        (None, None),
    ],
)
def test_usage_of_reads_dicts_and_sdk_objects_alike_and_only_integer_counts(
    usage: Any, expected: tuple[int | None, int] | None
) -> None:
    assert usage_of(usage) == expected
