"""What a deadline stream reads from each chunk: the openai SDK's chunk objects and raw SSE events
give the same content, reasoning, finish, usage and model, and a stream stops where it must."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai.types import Completion
from openai.types.chat import ChatCompletionChunk

from spark_otel.deadline.arguments import Plan
from spark_otel.deadline.reading import server_error, take_event, take_events, take_sdk_chunk
from spark_otel.deadline.run import StreamRun
from spark_otel.wire.sse import SseEvent


def _run(*, chat: bool = True) -> StreamRun:
    return StreamRun(Plan("raw", chat, {}, 30.0, None), None)


def _kept(run: StreamRun) -> tuple[Any, ...]:
    return (run.texts, run.reasonings, run.finish_reason, run.usage, run.model, run.streamed)


def _chat_event(delta: dict[str, Any], **extra: Any) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": extra.pop("finish", None)}
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [choice],
        **extra,
    }


USAGE = {"prompt_tokens": 3, "completion_tokens": 7, "total_tokens": 10}


@pytest.mark.parametrize("reasoning_key", ["reasoning_content", "reasoning"])
def test_an_sdk_chunk_and_its_raw_event_read_alike(reasoning_key: str) -> None:
    events = [
        _chat_event({"role": "assistant", reasoning_key: "think"}),
        _chat_event({"content": "answer"}, finish="stop"),
        {**_chat_event({}), "choices": [], "usage": USAGE},
    ]
    sdk, raw = _run(), _run()
    for event in events:
        assert take_sdk_chunk(sdk, ChatCompletionChunk.model_validate(event))
        assert take_event(raw, event)
    assert _kept(sdk) == _kept(raw) == (["answer"], ["think"], "stop", (3, 7), "m", 2)


def test_a_text_completion_reads_its_text_not_a_delta() -> None:
    event = {"id": "c", "object": "text_completion", "created": 0, "model": "m",
             "choices": [{"index": 0, "text": "words", "finish_reason": "length", "logprobs": None}],
             "usage": USAGE}  # fmt: skip
    sdk, raw = _run(chat=False), _run(chat=False)
    take_sdk_chunk(sdk, Completion.model_validate(event))
    take_event(raw, event)
    assert _kept(sdk) == _kept(raw) == (["words"], [], "length", (3, 7), "m", 1)


def test_a_chat_plan_reads_no_text_field_and_a_text_plan_no_delta() -> None:
    chat, text = _run(), _run(chat=False)
    take_event(chat, {"choices": [{"text": "not chat", "delta": {"content": "chat"}}]})
    take_event(text, {"choices": [{"text": "text", "delta": {"content": "not text"}}]})
    assert (chat.texts, text.texts) == (["chat"], ["text"])


def test_odd_choices_are_read_as_nothing() -> None:
    run = _run()
    take_event(run, {"choices": ["not an object"], "model": "m"})
    take_event(run, {"choices": [{"finish_reason": None}]})  # no delta
    take_event(run, {"choices": [{"delta": None}]})
    take_event(run, {"choices": None})
    assert _kept(run) == ([], [], None, None, "m", 0)
    sdk = _run()
    take_sdk_chunk(sdk, object())  # no choices, usage or model at all
    take_sdk_chunk(sdk, ChatCompletionChunk.model_validate({**_chat_event({}), "choices": []}))
    assert _kept(sdk) == ([], [], None, None, "m", 0)


@pytest.mark.parametrize(
    ("event", "message"),
    [
        ({"error": {"message": "out of memory", "code": 500}}, "server error mid-stream: out of memory"),
        ({"error": {"code": 500}}, "server error mid-stream: {'code': 500}"),
        ({"error": {"message": "", "code": 500}}, "server error mid-stream: {'message': '', 'code': 500}"),
        ({"error": "overloaded"}, "server error mid-stream: overloaded"),
        ({"object": "error", "message": "bad"}, "server error mid-stream: bad"),
        ({"choices": []}, None),
    ],
)
def test_a_server_error_mid_stream_is_worded_from_what_it_says(
    event: dict[str, Any], message: str | None
) -> None:
    assert server_error(event) == message


def _events(*datas: bytes | dict[str, Any]) -> list[SseEvent]:
    return [SseEvent(d if isinstance(d, bytes) else json.dumps(d).encode()) for d in datas]


def test_events_are_taken_until_done() -> None:
    run = _run()
    more = take_events(run, _events(_chat_event({"content": "a"}), b"[1, 2]", _chat_event({"content": "b"})))
    assert more
    assert not take_events(run, _events(b" [DONE] ", _chat_event({"content": "never"})))
    assert (run.texts, run.error) == (["a", "b"], None)


def test_a_malformed_event_fails_the_stream_naming_its_start() -> None:
    run = _run()
    data = b"{not json" + b"x" * 100
    assert not take_events(run, _events(data, _chat_event({"content": "never"})))
    assert run.error == f"malformed server-sent event: {data[:80]!r}"
    assert run.texts == []


def test_an_error_event_fails_the_stream_and_stops_it() -> None:
    run = _run()
    assert not take_events(run, _events({"error": {"message": "boom"}}, _chat_event({"content": "never"})))
    assert (run.error, run.texts) == ("server error mid-stream: boom", [])


def test_events_stop_once_the_run_says_stop() -> None:
    run = StreamRun(Plan("raw", True, {}, None, 1), None)
    assert not take_events(run, _events(_chat_event({"content": "a"}), _chat_event({"content": "b"})))
    assert (run.texts, run.cap_hit) == (["a"], True)
    assert take_events(_run(), []) is True
