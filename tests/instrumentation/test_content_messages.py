"""`gen_ai.input.messages` / `gen_ai.output.messages` in the semconv message shape, exactly: text
parts as text, other parts by their type only (an image's bytes are never recorded), SDK models and
decoded JSON alike, and what cannot be shaped left out rather than guessed."""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from types import MappingProxyType

from spark_otel import _semconv as sc
from spark_otel.instrumentation._content import (
    get_field,
    is_mapping,
    output_content_messages,
    request_content_messages,
)


@dataclass
class Part:
    """A content part as the openai SDK's models give it: attributes, not keys."""

    type: str | None
    text: str | None = None


@dataclass
class Message:
    role: str
    content: object


def test_chat_messages_keep_each_role_and_text_part() -> None:
    params = {
        "messages": [
            {"role": "system", "content": "be brief"},
            Message("user", [Part("text", "look"), Part("image_url"), {"type": "text", "text": "here"}]),
            {
                "role": "assistant",
                "content": [{"type": None}, {"type": "input_audio", "input_audio": "AAAA"}],
            },
            {"role": "tool", "content": None},
        ]
    }
    assert json.loads(request_content_messages(sc.OPERATION_CHAT, params) or "") == [
        {"role": "system", "parts": [{"type": "text", "content": "be brief"}]},
        {
            "role": "user",
            "parts": [
                {"type": "text", "content": "look"},
                {"type": "image_url"},
                {"type": "text", "content": "here"},
            ],
        },
        {"role": "assistant", "parts": [{"type": "unknown"}, {"type": "input_audio"}]},
        {"role": "tool", "parts": []},
    ]


def test_chat_without_a_message_list_records_nothing() -> None:
    assert request_content_messages(sc.OPERATION_CHAT, {}) is None
    assert request_content_messages(sc.OPERATION_CHAT, {"messages": 3}) is None


def test_a_completion_prompt_is_one_user_message() -> None:
    op = sc.OPERATION_TEXT_COMPLETION
    assert json.loads(request_content_messages(op, {"prompt": "once upon"}) or "") == [
        {"role": "user", "parts": [{"type": "text", "content": "once upon"}]}
    ]
    # A prompt of token ids or several prompts is recorded as its text, not split into parts.
    assert json.loads(request_content_messages(op, {"prompt": [1, 2]}) or "") == [
        {"role": "user", "parts": [{"type": "text", "content": "[1, 2]"}]}
    ]
    assert request_content_messages(op, {}) is None


def test_a_value_json_cannot_write_is_written_as_its_text() -> None:
    params = {"messages": [{"role": "user", "content": [{"type": "text", "text": Decimal("1.5")}]}]}
    assert json.loads(request_content_messages(sc.OPERATION_CHAT, params) or "") == [
        {"role": "user", "parts": [{"type": "text", "content": "1.5"}]}
    ]


def test_output_messages_join_each_choice_in_index_order_with_its_finish_reason() -> None:
    got = output_content_messages({1: ["b", "c"], 0: ["a"]}, {0: "stop"})
    assert json.loads(got) == [
        {"role": "assistant", "parts": [{"type": "text", "content": "a"}], "finish_reason": "stop"},
        # a choice the stream never finished (cut off, failed) says so: its reason is "error"
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "bc"}],
            "finish_reason": sc.FINISH_REASON_ERROR,
        },
    ]
    assert json.loads(output_content_messages({0: ["x"]}, None))[0]["finish_reason"] == sc.FINISH_REASON_ERROR


def test_fields_read_alike_from_a_model_and_a_dict() -> None:
    assert (get_field({"type": "text"}, "type"), get_field(Part("text"), "type")) == ("text", "text")
    assert (get_field({}, "type"), get_field(object(), "type")) == (None, None)
    assert (is_mapping({}), is_mapping(Part("text")), is_mapping(Part("text"))) == (True, False, False)


def test_any_mapping_reads_as_a_decoded_body_the_first_time_its_type_is_seen() -> None:
    class Body(dict):  # type: ignore[type-arg]
        """A JSON body decoded into a dict subclass (``object_hook``), a type not seen before."""

    assert get_field(MappingProxyType({"type": "text"}), "type") == "text"
    assert (is_mapping(Body()), is_mapping(Body())) == (True, True)
