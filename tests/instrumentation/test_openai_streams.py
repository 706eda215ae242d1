"""Streamed openai calls: the proxy behaves like the SDK's stream and finalizes exactly once."""

from __future__ import annotations

import asyncio
import gc
import json
import threading
import time
from typing import Any

import httpx
import httpx2
import openai
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from tests.support.engine_server import MODEL, ServerLog
from tests.support.finished_spans import one_span, request_spans
from tests.support.metric_points import metric_points
from tests.support.sse_bodies import sse_chunk, sse_transport

import spark_otel
from spark_otel import _semconv as sc

MESSAGES = [{"role": "user", "content": "stream me"}]
USAGE = {"include_usage": True}


def _stream(client: openai.OpenAI, n: int = 5, **kw: Any) -> Any:
    return client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=n, stream=True, **kw)  # type: ignore[call-overload]


def _dump(chunks: list[Any]) -> list[dict[str, Any]]:
    return [c.model_dump() for c in chunks]


def test_sync_chat_stream_chunks_identical_and_span_complete(
    base_url: str,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    bare = list(_stream(client, stream_options=USAGE))
    spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    stream = _stream(client, stream_options=USAGE)
    assert isinstance(stream, openai.Stream)  # the proxy passes isinstance checks
    assert stream.response.status_code == 200
    # A stream's duration is recorded when it ends, not when create() returns.
    assert metric_points(metric_reader, sc.GEN_AI_CLIENT_OPERATION_DURATION) == []
    assert request_spans(span_exporter) == []
    traced = list(stream)
    assert _dump(traced) == _dump(bare)
    assert [type(c) for c in traced] == [type(c) for c in bare]

    span = one_span(span_exporter)
    a = span.attributes or {}
    assert a[sc.GEN_AI_REQUEST_STREAM] is True
    assert a[sc.GEN_AI_USAGE_INPUT_TOKENS] == 2
    assert a[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 5
    assert list(a[sc.GEN_AI_RESPONSE_FINISH_REASONS]) == ["length"]  # type: ignore[arg-type]
    assert a[sc.GEN_AI_RESPONSE_ID] == "chatcmpl-test"
    assert a[sc.REQUEST_CHUNKS] == len(bare)
    assert float(a[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK]) > 0  # type: ignore[arg-type]
    assert sc.ERROR_TYPE not in a

    (ttfc,) = metric_points(metric_reader, sc.GEN_AI_CLIENT_TIME_TO_FIRST_CHUNK)
    assert ttfc.count == 1
    (tpoc,) = metric_points(metric_reader, sc.GEN_AI_CLIENT_TIME_PER_OUTPUT_CHUNK)
    assert tpoc.count == len(bare) - 1
    assert tuple(tpoc.explicit_bounds) == sc.DURATION_BUCKETS_S
    (duration,) = metric_points(metric_reader, sc.GEN_AI_CLIENT_OPERATION_DURATION)
    assert duration.count == 1
    outputs = [p for p in metric_points(metric_reader, sc.GEN_AI_CLIENT_TOKEN_USAGE)]
    assert sorted(p.sum for p in outputs) == [2, 5]


def test_text_completion_stream_sync(
    base_url: str, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    chunks = list(client.completions.create(model=MODEL, prompt="a b c", max_tokens=3, stream=True))
    assert "".join(c.choices[0].text for c in chunks) == "w0 w1 w2 "
    span = one_span(span_exporter)
    assert span.attributes[sc.GEN_AI_OPERATION_NAME] == "text_completion"  # type: ignore[index]
    assert list(span.attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS]) == ["length"]  # type: ignore[index]
    # No usage chunk was asked for: tokens are never estimated.
    assert sc.GEN_AI_USAGE_OUTPUT_TOKENS not in (span.attributes or {})


def test_stream_without_usage_records_no_token_metric(
    base_url: str, instrumented: None, metric_reader: InMemoryMetricReader
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    list(_stream(client))
    assert metric_points(metric_reader, sc.GEN_AI_CLIENT_TOKEN_USAGE) == []
    assert len(metric_points(metric_reader, sc.GEN_AI_CLIENT_OPERATION_DURATION)) == 1


def test_include_usage_is_injected_with_setdefault_and_per_call_opt_out(
    base_url: str,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
    server_log: ServerLog,
) -> None:
    spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider, include_usage=True)
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    chunks = list(_stream(client, n=3))
    assert server_log.bodies[-1]["stream_options"] == {"include_usage": True}
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert request_spans(span_exporter)[-1].attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 3  # type: ignore[index]

    list(_stream(client, n=3, stream_options={"include_usage": False}))
    assert server_log.bodies[-1]["stream_options"] == {"include_usage": False}
    assert sc.GEN_AI_USAGE_OUTPUT_TOKENS not in (request_spans(span_exporter)[-1].attributes or {})

    client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=2)  # type: ignore[arg-type]
    assert "stream_options" not in server_log.bodies[-1]  # only streams are touched


def test_include_usage_from_environment(
    base_url: str,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    server_log: ServerLog,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SPARK_OTEL_INCLUDE_USAGE", "1")
    spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    list(_stream(openai.OpenAI(base_url=base_url, api_key="sk"), n=2, stream_options={"other": 1}))
    assert server_log.bodies[-1]["stream_options"] == {"other": 1, "include_usage": True}


def test_break_then_garbage_collection_finalizes_abandoned_stream(
    base_url: str,
    instrumented: None,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    stream = _stream(client, n=50)
    for i, _chunk in enumerate(stream):
        if i == 2:
            break
    assert request_spans(span_exporter) == []
    del stream
    gc.collect()
    span = one_span(span_exporter)
    a = span.attributes or {}
    assert a[sc.ERROR_TYPE] == sc.ERROR_TYPE_STREAM_ABANDONED
    assert span.status.status_code is StatusCode.ERROR
    assert a[sc.REQUEST_CHUNKS] == 3
    assert list(a[sc.GEN_AI_RESPONSE_FINISH_REASONS]) == ["error"]  # type: ignore[arg-type]
    (duration,) = metric_points(metric_reader, sc.GEN_AI_CLIENT_OPERATION_DURATION)
    assert duration.attributes[sc.ERROR_TYPE] == sc.ERROR_TYPE_STREAM_ABANDONED


def test_close_mid_stream_records_stream_closed_once(
    base_url: str,
    instrumented: None,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    stream = _stream(client, n=50)
    next(stream)
    next(stream)
    stream.close()
    stream.close()
    del stream
    gc.collect()
    span = one_span(span_exporter)
    assert span.attributes[sc.ERROR_TYPE] == sc.ERROR_TYPE_STREAM_CLOSED  # type: ignore[index]
    assert span.attributes[sc.REQUEST_CHUNKS] == 2  # type: ignore[index]
    assert metric_points(metric_reader, sc.GEN_AI_CLIENT_OPERATION_DURATION)[0].count == 1


def test_close_and_exit_after_exhaustion_do_not_finalize_again(
    base_url: str,
    instrumented: None,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    with _stream(client, n=3) as stream:
        chunks = list(stream)
        stream.close()
    del stream
    gc.collect()
    assert len(chunks) == 4  # role chunk + 3 words
    span = one_span(span_exporter)
    assert sc.ERROR_TYPE not in (span.attributes or {})
    assert metric_points(metric_reader, sc.GEN_AI_CLIENT_OPERATION_DURATION)[0].count == 1


def test_with_block_break_finalizes_on_exit(
    base_url: str, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    with _stream(client, n=50) as stream:
        for _chunk in stream:
            break
        assert request_spans(span_exporter) == []
    span = one_span(span_exporter)
    assert span.attributes[sc.ERROR_TYPE] == sc.ERROR_TYPE_STREAM_CLOSED  # type: ignore[index]


def test_user_exception_inside_with_block_wins_and_is_recorded(
    base_url: str, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="sk")

    def consume() -> None:
        with _stream(client, n=50) as stream:
            next(stream)
            raise LookupError("mine")

    with pytest.raises(LookupError, match="mine"):
        consume()
    assert one_span(span_exporter).attributes[sc.ERROR_TYPE] == "LookupError"  # type: ignore[index]


def test_in_stream_error_event_propagates_and_keeps_partial_counts(
    base_url: str, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    seen: list[Any] = []
    with pytest.raises(openai.APIError, match="engine died"):
        seen.extend(_stream(client, n=10, extra_body={"fail_after": 3}))
    span = one_span(span_exporter)
    assert span.attributes[sc.ERROR_TYPE] == "APIError"  # type: ignore[index]
    assert span.attributes[sc.REQUEST_CHUNKS] == len(seen) == 4  # type: ignore[index]


def test_keyboard_interrupt_mid_stream_is_recorded_and_reraised(
    instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    client = openai.OpenAI(
        base_url="http://127.0.0.1:9/v1",
        api_key="sk",
        # KeyboardInterrupt mid-body: no real peer can do this on demand.
        http_client=httpx2.Client(transport=sse_transport([sse_chunk("a")], fail=KeyboardInterrupt())),
    )
    stream = _stream(client)
    assert next(stream).choices[0].delta.content == "a"
    with pytest.raises(KeyboardInterrupt):
        next(stream)
    span = one_span(span_exporter)
    assert span.attributes[sc.ERROR_TYPE] == "KeyboardInterrupt"  # type: ignore[index]
    assert span.attributes[sc.REQUEST_CHUNKS] == 1  # type: ignore[index]


async def test_async_chat_stream_identical_and_complete(
    base_url: str,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
) -> None:
    client = openai.AsyncOpenAI(base_url=base_url, api_key="sk")
    bare = [
        c
        async for c in await client.chat.completions.create(
            model=MODEL,
            messages=MESSAGES,
            max_tokens=4,
            stream=True,
            stream_options=USAGE,  # type: ignore[arg-type]
        )
    ]
    spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    stream = await client.chat.completions.create(
        model=MODEL,
        messages=MESSAGES,
        max_tokens=4,
        stream=True,
        stream_options=USAGE,  # type: ignore[arg-type]
    )
    assert isinstance(stream, openai.AsyncStream)
    traced = [c async for c in stream]
    assert _dump(traced) == _dump(bare)
    a = one_span(span_exporter).attributes or {}
    assert a[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 4
    assert list(a[sc.GEN_AI_RESPONSE_FINISH_REASONS]) == ["length"]  # type: ignore[arg-type]


async def test_async_text_completion_stream_and_aclose(
    base_url: str, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    client = openai.AsyncOpenAI(base_url=base_url, api_key="sk")
    stream = await client.completions.create(model=MODEL, prompt="x", max_tokens=40, stream=True)
    first = await stream.__anext__()
    assert first.choices[0].text == "w0 "
    await stream.aclose()
    span = one_span(span_exporter)
    assert span.attributes[sc.GEN_AI_OPERATION_NAME] == "text_completion"  # type: ignore[index]
    assert span.attributes[sc.ERROR_TYPE] == sc.ERROR_TYPE_STREAM_CLOSED  # type: ignore[index]


async def test_async_with_block_break_finalizes_on_aexit(
    base_url: str, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    client = openai.AsyncOpenAI(base_url=base_url, api_key="sk")
    async with await client.chat.completions.create(
        model=MODEL,
        messages=MESSAGES,
        max_tokens=40,
        stream=True,  # type: ignore[arg-type]
    ) as stream:
        async for _chunk in stream:
            break
    assert one_span(span_exporter).attributes[sc.ERROR_TYPE] == sc.ERROR_TYPE_STREAM_CLOSED  # type: ignore[index]


async def test_cancelled_task_records_cancelled_and_reraises(
    base_url: str,
    instrumented: None,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
) -> None:
    client = openai.AsyncOpenAI(base_url=base_url, api_key="sk")
    got_one = asyncio.Event()

    async def consume() -> None:
        stream = await client.chat.completions.create(
            model=MODEL,
            messages=MESSAGES,  # type: ignore[arg-type]
            max_tokens=1000,
            stream=True,
            extra_body={"delay_s": 0.05},
        )
        async for _chunk in stream:
            got_one.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(got_one.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    span = one_span(span_exporter)
    assert span.attributes[sc.ERROR_TYPE] == sc.ERROR_TYPE_CANCELLED  # type: ignore[index]
    assert int(span.attributes[sc.REQUEST_CHUNKS]) >= 1  # type: ignore[index, arg-type]
    (duration,) = metric_points(metric_reader, sc.GEN_AI_CLIENT_OPERATION_DURATION)
    assert duration.attributes[sc.ERROR_TYPE] == sc.ERROR_TYPE_CANCELLED


def test_content_capture_joins_streamed_deltas_once_at_the_end(
    base_url: str,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
) -> None:
    spark_otel.instrument(
        tracer_provider=tracer_provider, meter_provider=meter_provider, capture_content=True
    )
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    list(_stream(client, n=3))
    body = {"model": MODEL, "prompt": "raw prompt", "max_tokens": 2, "stream": True}
    with httpx.Client() as raw, raw.stream("POST", f"{base_url}/completions", json=body) as r:
        r.read()
    chat, text = request_spans(span_exporter)
    chat_out = json.loads(str(chat.attributes[sc.GEN_AI_OUTPUT_MESSAGES]))  # type: ignore[index]
    assert chat_out == [
        {"role": "assistant", "parts": [{"type": "text", "content": "w0 w1 w2 "}], "finish_reason": "length"}
    ]
    text_in = json.loads(str(text.attributes[sc.GEN_AI_INPUT_MESSAGES]))  # type: ignore[index]
    assert text_in[0]["parts"][0]["content"] == "raw prompt"
    text_out = json.loads(str(text.attributes[sc.GEN_AI_OUTPUT_MESSAGES]))  # type: ignore[index]
    assert text_out[0]["parts"][0]["content"] == "w0 w1 "


def test_close_from_a_watchdog_thread_while_iterating_finalizes_once(
    base_url: str,
    instrumented: None,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    stream = _stream(client, n=1000, extra_body={"delay_s": 0.02})
    first = threading.Event()
    outcome: list[BaseException | None] = []

    def consume() -> None:
        try:
            for _chunk in stream:
                first.set()
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=consume)
    worker.start()
    assert first.wait(10)
    stream.close()  # what the deadline helper does at the ceiling
    worker.join(10)
    assert not worker.is_alive()
    span = one_span(span_exporter)
    assert span.attributes[sc.ERROR_TYPE]  # type: ignore[index]
    assert int(span.attributes[sc.REQUEST_CHUNKS]) >= 1  # type: ignore[index, arg-type]
    (duration,) = metric_points(metric_reader, sc.GEN_AI_CLIENT_OPERATION_DURATION)
    assert duration.count == 1


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_an_instrumented_stream_arrives_chunk_by_chunk_not_all_at_the_end(
    is_async: bool, base_url: str, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    """The SDK's own ``send`` keeps its ``stream=True``: were the body read first, every chunk
    would arrive at once, after the last token (10 tokens 0.1 s apart)."""
    kwargs: dict[str, Any] = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "x"}],
        "max_tokens": 10,
        "stream": True,
        "extra_body": {"delay_s": 0.1},
    }
    started = time.monotonic()
    arrivals: list[float] = []
    if is_async:
        async with openai.AsyncOpenAI(base_url=base_url, api_key="sk") as aclient:
            async for chunk in await aclient.chat.completions.create(**kwargs):
                if chunk.choices and chunk.choices[0].delta.content:
                    arrivals.append(time.monotonic() - started)
    else:
        with openai.OpenAI(base_url=base_url, api_key="sk") as client:
            for chunk in client.chat.completions.create(**kwargs):
                if chunk.choices and chunk.choices[0].delta.content:
                    arrivals.append(time.monotonic() - started)
    assert len(arrivals) == 10
    assert arrivals[0] < arrivals[-1] / 2
    assert len(request_spans(span_exporter)) == 1
