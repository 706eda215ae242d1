"""Raw httpx2 / httpx calls to /v1/*, the openai raw-response paths, and one span per call."""

from __future__ import annotations

import gc
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import httpx2
import openai
import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from tests.support.engine_server import MODEL, ServerLog
from tests.support.finished_spans import one_span, request_spans
from tests.support.metric_points import metric_points
from tests.support.sse_bodies import sse_chunk, sse_transport

from spark_otel import _semconv as sc

CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "raw call here"}], "max_tokens": 4}
TEXT = {"model": MODEL, "prompt": "raw call", "max_tokens": 3}
STREAM = {"stream": True, "stream_options": {"include_usage": True}}
LIBS = [httpx2, httpx]


@pytest.mark.parametrize("lib", LIBS, ids=lambda m: m.__name__)
def test_sync_non_streaming_chat_and_completion(
    lib: Any, base_url: str, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    with lib.Client() as client:
        chat = client.post(
            f"{base_url}/chat/completions", json=CHAT, headers={"Authorization": "Bearer sk-x"}
        )
        text = client.post(f"{base_url}/completions", json=TEXT)
        client.get(f"{base_url}/models")  # not a generation call: no span
    assert chat.json()["usage"]["completion_tokens"] == 4
    assert text.json()["choices"][0]["text"] == "w0 w1 w2 "
    spans = {s.name: s for s in request_spans(span_exporter)}
    assert set(spans) == {f"chat {MODEL}", f"text_completion {MODEL}"}
    a = spans[f"chat {MODEL}"].attributes or {}
    assert a[sc.REQUEST_LAYER] == "httpx"
    assert a[sc.GEN_AI_USAGE_INPUT_TOKENS] == 3
    assert a[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 4
    assert a[sc.GEN_AI_REQUEST_MAX_TOKENS] == 4
    assert a[sc.SERVER_ADDRESS] == "127.0.0.1"
    assert list(a[sc.GEN_AI_RESPONSE_FINISH_REASONS]) == ["length"]  # type: ignore[arg-type]
    assert "sk-x" not in repr(dict(a))
    assert spans[f"text_completion {MODEL}"].attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 3  # type: ignore[index]


@pytest.mark.parametrize("lib", LIBS, ids=lambda m: m.__name__)
def test_sync_sse_stream_lines_identical_and_usage_parsed(
    lib: Any,
    base_url: str,
    tracer_provider: Any,
    meter_provider: Any,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
) -> None:
    import spark_otel

    body = {**CHAT, **STREAM}
    with lib.Client() as client, client.stream("POST", f"{base_url}/chat/completions", json=body) as r:
        bare = list(r.iter_lines())
    spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    with lib.Client() as client, client.stream("POST", f"{base_url}/chat/completions", json=body) as r:
        traced = list(r.iter_lines())
    assert traced == bare
    span = one_span(span_exporter)
    a = span.attributes or {}
    assert a[sc.GEN_AI_REQUEST_STREAM] is True
    assert a[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 4
    assert a[sc.GEN_AI_USAGE_INPUT_TOKENS] == 3
    assert a[sc.GEN_AI_RESPONSE_ID] == "chatcmpl-test"
    assert list(a[sc.GEN_AI_RESPONSE_FINISH_REASONS]) == ["length"]  # type: ignore[arg-type]
    assert a[sc.REQUEST_CHUNKS] == 6  # role + 4 words + usage
    assert sc.ERROR_TYPE not in a
    (tpoc,) = metric_points(metric_reader, sc.GEN_AI_CLIENT_TIME_PER_OUTPUT_CHUNK)
    assert tpoc.count == 5


@pytest.mark.parametrize("lib", LIBS, ids=lambda m: m.__name__)
async def test_async_non_streaming_and_streaming(
    lib: Any, base_url: str, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    async with lib.AsyncClient() as client:
        resp = await client.post(f"{base_url}/completions", json=TEXT)
        assert resp.json()["usage"]["completion_tokens"] == 3
        async with client.stream("POST", f"{base_url}/completions", json={**TEXT, **STREAM}) as r:
            raw = b"".join([part async for part in r.aiter_bytes()])
    assert raw.endswith(b"data: [DONE]\n\n")
    spans = request_spans(span_exporter)
    assert len(spans) == 2
    streamed = next(s for s in spans if (s.attributes or {}).get(sc.GEN_AI_REQUEST_STREAM))
    assert streamed.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 3  # type: ignore[index]
    assert streamed.attributes[sc.GEN_AI_OPERATION_NAME] == "text_completion"  # type: ignore[index]


@pytest.mark.parametrize("lib", LIBS, ids=lambda m: m.__name__)
def test_raw_stream_closed_early_records_stream_closed(
    lib: Any, base_url: str, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    with (
        lib.Client() as client,
        client.stream(
            "POST", f"{base_url}/chat/completions", json={**CHAT, "max_tokens": 200, "stream": True}
        ) as r,
    ):
        for _line in r.iter_lines():
            break
    span = one_span(span_exporter)
    assert span.attributes[sc.ERROR_TYPE] == sc.ERROR_TYPE_STREAM_CLOSED  # type: ignore[index]
    assert span.status.status_code is StatusCode.ERROR


async def test_async_raw_stream_break_records_stream_closed(
    base_url: str, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    async with (
        httpx2.AsyncClient() as client,
        client.stream(
            "POST", f"{base_url}/chat/completions", json={**CHAT, "max_tokens": 200, "stream": True}
        ) as r,
    ):
        async for _line in r.aiter_lines():
            break
    assert one_span(span_exporter).attributes[sc.ERROR_TYPE] == sc.ERROR_TYPE_STREAM_CLOSED  # type: ignore[index]


def test_raw_unread_response_dropped_is_abandoned(
    base_url: str, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    client = httpx2.Client()
    request = client.build_request("POST", f"{base_url}/completions", json={**TEXT, "stream": True})
    response = client.send(request, stream=True)
    assert request_spans(span_exporter) == []
    assert response.status_code == 200
    del response  # dropped unread, never closed
    gc.collect()
    assert one_span(span_exporter).attributes[sc.ERROR_TYPE] == sc.ERROR_TYPE_STREAM_ABANDONED  # type: ignore[index]
    client.close()


def test_raw_http_error_status_is_error_type(
    base_url: str, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    with httpx2.Client() as client:
        resp = client.post(f"{base_url}/chat/completions", json={**CHAT, "model": "nope"})
    assert resp.status_code == 404
    assert one_span(span_exporter).attributes[sc.ERROR_TYPE] == "404"  # type: ignore[index]


def test_openai_call_makes_one_span_not_two(
    base_url: str, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    client.chat.completions.create(model=MODEL, messages=CHAT["messages"], max_tokens=2)  # type: ignore[arg-type]
    list(client.completions.create(model=MODEL, prompt="x", max_tokens=2, stream=True))
    spans = request_spans(span_exporter)
    assert len(spans) == 2
    assert {s.attributes[sc.REQUEST_LAYER] for s in spans} == {"openai"}  # type: ignore[index]


# -- openai's with_raw_response / with_streaming_response: same create, the raw layer's span --------


def test_with_raw_response_non_streaming_and_streaming(
    base_url: str, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL,
        messages=CHAT["messages"],
        max_tokens=3,  # type: ignore[arg-type]
    )
    assert raw.headers["content-type"].startswith("application/json")
    assert raw.parse().usage.completion_tokens == 3  # type: ignore[union-attr]
    raw_stream = client.completions.with_raw_response.create(
        model=MODEL, prompt="p q", max_tokens=2, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(raw_stream.parse())
    assert chunks[-1].usage.completion_tokens == 2  # type: ignore[union-attr]
    spans = request_spans(span_exporter)
    assert len(spans) == 2
    by_op = {s.attributes[sc.GEN_AI_OPERATION_NAME]: s.attributes for s in spans}  # type: ignore[index]
    assert by_op["chat"][sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 3  # type: ignore[index]
    assert by_op["text_completion"][sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 2  # type: ignore[index]
    assert by_op["text_completion"][sc.GEN_AI_REQUEST_STREAM] is True  # type: ignore[index]


def test_with_streaming_response_sync(
    base_url: str, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    with client.chat.completions.with_streaming_response.create(
        model=MODEL,
        messages=CHAT["messages"],
        max_tokens=5,
        stream=True,  # type: ignore[arg-type]
    ) as resp:
        lines = [line for line in resp.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    with client.completions.with_streaming_response.create(model=MODEL, prompt="x", max_tokens=2) as resp:
        body = json.loads(resp.read())
    assert body["usage"]["completion_tokens"] == 2
    spans = request_spans(span_exporter)
    assert len(spans) == 2
    by_op = {s.attributes[sc.GEN_AI_OPERATION_NAME]: s.attributes for s in spans}  # type: ignore[index]
    assert list(by_op["chat"][sc.GEN_AI_RESPONSE_FINISH_REASONS]) == ["length"]  # type: ignore[index, arg-type]
    assert by_op["text_completion"][sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 2  # type: ignore[index]


async def test_async_with_raw_and_streaming_response(
    base_url: str, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    client = openai.AsyncOpenAI(base_url=base_url, api_key="sk")
    raw = await client.completions.with_raw_response.create(model=MODEL, prompt="x", max_tokens=2)
    assert raw.parse().choices[0].text == "w0 w1 "
    async with client.chat.completions.with_streaming_response.create(
        model=MODEL,
        messages=CHAT["messages"],  # type: ignore[arg-type]
        max_tokens=3,
        stream=True,
        stream_options={"include_usage": True},
    ) as resp:
        stream = await resp.parse()
        chunks = [c async for c in stream]
    assert chunks[-1].usage.completion_tokens == 3  # type: ignore[union-attr]
    spans = request_spans(span_exporter)
    assert len(spans) == 2
    assert sorted(s.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] for s in spans) == [2, 3]  # type: ignore[index, type-var]


def test_raw_layer_injects_traceparent_when_asked(
    base_url: str,
    tracer_provider: Any,
    meter_provider: Any,
    span_exporter: InMemorySpanExporter,
    server_log: ServerLog,
) -> None:
    import spark_otel

    spark_otel.instrument(
        tracer_provider=tracer_provider, meter_provider=meter_provider, inject_traceparent=True
    )
    with httpx.Client() as client:
        client.post(f"{base_url}/completions", json=TEXT)
    ctx = one_span(span_exporter).get_span_context()
    assert server_log.headers[-1]["traceparent"].startswith(f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-")


# -- what a real peer cannot produce on demand: MockTransport ----------------------------------------


def test_truncated_sse_without_finish_or_usage_keeps_partial_counts(
    instrumented: None, span_exporter: InMemorySpanExporter, metric_reader: InMemoryMetricReader
) -> None:
    # Events split across blocks mid-line, and the body ends without [DONE], finish or usage.
    raw = sse_chunk("a") + sse_chunk("b") + sse_chunk("c")
    blocks = [raw[:10], raw[10:77], raw[77:]]
    with (
        httpx2.Client(transport=sse_transport(blocks)) as client,
        client.stream(
            "POST", "http://engine.local:8000/v1/chat/completions", json={"model": "m", "stream": True}
        ) as r,
    ):
        assert b"".join(r.iter_bytes()) == raw
    span = one_span(span_exporter)
    a = span.attributes or {}
    assert a[sc.REQUEST_CHUNKS] == 3
    assert a[sc.SERVER_ADDRESS] == "engine.local"
    assert a[sc.SERVER_PORT] == 8000
    assert list(a[sc.GEN_AI_RESPONSE_FINISH_REASONS]) == ["error"]  # type: ignore[arg-type]
    assert sc.GEN_AI_USAGE_OUTPUT_TOKENS not in a
    assert metric_points(metric_reader, sc.GEN_AI_CLIENT_TOKEN_USAGE) == []


def test_mid_stream_transport_error_is_recorded_and_reraised(
    instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    transport = sse_transport([sse_chunk("a"), sse_chunk("b")], fail=httpx2.ReadError("peer reset"))
    with (
        httpx2.Client(transport=transport) as client,
        client.stream("POST", "http://e:1/v1/chat/completions", json={"model": "m", "stream": True}) as r,
        pytest.raises(httpx2.ReadError),
    ):
        for _ in r.iter_lines():
            pass
    a = one_span(span_exporter).attributes or {}
    assert a[sc.ERROR_TYPE] == "ReadError"
    assert a[sc.REQUEST_CHUNKS] == 2


async def test_async_mock_stream_with_usage_in_final_chunk(
    instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    usage = (
        b'data: {"id":"r1","model":"m","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2}}\n\n'
    )

    class Body(httpx2.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            for block in (sse_chunk("a"), sse_chunk("b", "stop"), usage, b"data: [DONE]\n\n"):
                yield block

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=Body())

    async with (
        httpx2.AsyncClient(transport=httpx2.MockTransport(handler)) as client,
        client.stream("POST", "http://e:1/v1/chat/completions", json={"model": "m", "stream": True}) as r,
    ):
        await r.aread()
    a = one_span(span_exporter).attributes or {}
    assert a[sc.GEN_AI_USAGE_INPUT_TOKENS] == 7
    assert a[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 2
    assert list(a[sc.GEN_AI_RESPONSE_FINISH_REASONS]) == ["stop"]  # type: ignore[arg-type]
    assert sc.ERROR_TYPE not in a


@pytest.mark.parametrize("old_error", [False, True], ids=["error-object", "object-error"])
@pytest.mark.parametrize("lib", LIBS, ids=lambda m: m.__name__)
def test_raw_in_stream_error_event_of_either_vllm_shape_is_the_error_type(
    lib: Any, old_error: bool, base_url: str, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    body = {**TEXT, "max_tokens": 6, "stream": True, "fail_after": 2, "old_error": old_error}
    with lib.Client() as client, client.stream("POST", f"{base_url}/completions", json=body) as r:
        lines = [line for line in r.iter_lines() if line]
    assert ('"object":"error"' in lines[-1]) is old_error  # the server really sent that shape
    span = one_span(span_exporter)
    assert span.attributes[sc.ERROR_TYPE] == "500"  # type: ignore[index]
    assert span.attributes[sc.REQUEST_CHUNKS] == 2  # the error event is not a chunk  # type: ignore[index]
    assert span.status.status_code is StatusCode.ERROR


def _parent_of(traceparent: str) -> str:
    """The ``traceparent`` without its flags: version, trace id and parent span id."""
    return traceparent.rsplit("-", 1)[0]


def _traceparent_of(span: Any) -> str:
    ctx = span.get_span_context()
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}"


@pytest.mark.parametrize("lib", LIBS, ids=lambda m: m.__name__)
def test_traceparent_is_not_left_on_a_reused_request(
    lib: Any,
    base_url: str,
    tracer_provider: Any,
    meter_provider: Any,
    span_exporter: InMemorySpanExporter,
    server_log: ServerLog,
) -> None:
    import spark_otel

    spark_otel.instrument(
        tracer_provider=tracer_provider, meter_provider=meter_provider, inject_traceparent=True
    )
    with lib.Client() as client:
        request = client.build_request("POST", f"{base_url}/completions", json=TEXT)
        client.send(request)
        assert "traceparent" not in request.headers
        client.send(request)  # sent again: its own span is the parent, not the first one's
        mine = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        own = client.build_request(
            "POST", f"{base_url}/completions", json=TEXT, headers={"traceparent": mine}
        )
        client.send(own)
        assert own.headers["traceparent"] == mine  # the caller's own header is theirs to keep
    first, second, _ = request_spans(span_exporter)
    sent = [h["traceparent"] for h in server_log.headers[-3:]]
    assert [_parent_of(sent[0]), _parent_of(sent[1])] == [_traceparent_of(first), _traceparent_of(second)]
    assert sent[0] != sent[1]
    assert sent[2] == mine


@pytest.mark.parametrize("lib", LIBS, ids=lambda m: m.__name__)
async def test_async_stream_traceparent_is_taken_off_once_sent(
    lib: Any,
    base_url: str,
    tracer_provider: Any,
    meter_provider: Any,
    span_exporter: InMemorySpanExporter,
    server_log: ServerLog,
) -> None:
    import spark_otel

    spark_otel.instrument(
        tracer_provider=tracer_provider, meter_provider=meter_provider, inject_traceparent=True
    )
    async with lib.AsyncClient() as client:
        request = client.build_request("POST", f"{base_url}/completions", json={**TEXT, **STREAM})
        response = await client.send(request, stream=True)
        assert "traceparent" not in request.headers
        await response.aread()
        await response.aclose()
    assert _parent_of(server_log.headers[-1]["traceparent"]) == _traceparent_of(one_span(span_exporter))


@pytest.mark.parametrize("lib", LIBS, ids=lambda m: m.__name__)
def test_sse_body_read_in_one_go_keeps_counts_but_claims_no_chunk_timing(
    lib: Any,
    base_url: str,
    instrumented: None,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
) -> None:
    """``post(..., json={"stream": True})`` without stream mode: the whole SSE body is read inside
    ``send``, so every event arrives at once and no gap between them was observed."""
    with lib.Client() as client:
        resp = client.post(f"{base_url}/chat/completions", json={**CHAT, **STREAM})
    events = [line for line in resp.text.splitlines() if line.startswith("data: {")]
    a = one_span(span_exporter).attributes or {}
    assert a[sc.REQUEST_CHUNKS] == len(events) > 2
    assert a[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == CHAT["max_tokens"]
    assert sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK not in a
    assert metric_points(metric_reader, sc.GEN_AI_CLIENT_TIME_PER_OUTPUT_CHUNK) == []
    assert metric_points(metric_reader, sc.GEN_AI_CLIENT_TIME_TO_FIRST_CHUNK) == []
    assert [p.count for p in metric_points(metric_reader, sc.GEN_AI_CLIENT_OPERATION_DURATION)] == [1]
