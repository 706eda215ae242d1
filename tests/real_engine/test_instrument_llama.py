"""`instrument()` on the real openai client against llama.cpp's server: completions and chat,
streamed and not, sync and async. The span's tokens are the server's own usage, the answer the
caller gets is untouched, and the API key appears nowhere in the telemetry.

Unlike vLLM (and the simulated engine), llama.cpp's completions stream puts ``usage`` on the
chunk that finishes the choice, whether or not ``stream_options.include_usage`` asked for it; its
chat stream sends it as OpenAI does (a last chunk with no choices, only when asked). Its error
body is ``{"error": {"code": 400, "message", "type"}}``, without ``param``."""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from tests.support.finished_spans import one_span
from tests.support.llama_server import LlamaServer

from spark_otel import _semconv as sc

KEY = "sk-llama-contract-secret"
TOKENS = 24
PINNED = {"ignore_eos": True}
MESSAGES = [{"role": "user", "content": "say something"}]


def _no_key_anywhere(span: ReadableSpan, metric_reader: InMemoryMetricReader) -> None:
    attributes = dict(span.attributes or {})
    assert KEY not in repr(attributes)
    assert not any("authorization" in k.lower() or "api-key" in k.lower() for k in attributes)
    assert KEY not in repr([e.attributes for e in span.events])
    assert KEY not in repr(metric_reader.get_metrics_data())


def _tokens(span: ReadableSpan) -> tuple[Any, Any]:
    a = span.attributes or {}
    return a[sc.GEN_AI_USAGE_INPUT_TOKENS], a[sc.GEN_AI_USAGE_OUTPUT_TOKENS]


def _create(client: Any, kind: str, stream: bool, include_usage: bool = True) -> Any:
    common: dict[str, Any] = {"model": "tiny-llama", "max_tokens": TOKENS, "extra_body": PINNED}
    if stream:
        common["stream"] = True
        if include_usage:
            common["stream_options"] = {"include_usage": True}
    if kind == "chat":
        return client.chat.completions.create(messages=MESSAGES, **common)
    return client.completions.create(prompt="Once upon a time", **common)


@pytest.mark.parametrize("kind", ["completions", "chat"])
def test_a_plain_call_records_the_servers_usage(
    llama: LlamaServer,
    instrumented: None,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    kind: str,
) -> None:
    client = openai.OpenAI(base_url=llama.url + "/v1", api_key=KEY, max_retries=0)
    response = _create(client, kind, stream=False)
    assert response.usage.completion_tokens == TOKENS
    span = one_span(span_exporter)
    assert _tokens(span) == (response.usage.prompt_tokens, TOKENS)
    assert (span.attributes or {})[sc.GEN_AI_RESPONSE_MODEL] == response.model
    assert list((span.attributes or {})[sc.GEN_AI_RESPONSE_FINISH_REASONS]) == ["length"]  # type: ignore[arg-type]
    _no_key_anywhere(span, metric_reader)


@pytest.mark.parametrize("include_usage", [True, False])
@pytest.mark.parametrize("kind", ["completions", "chat"])
def test_a_stream_records_the_usage_chunks_tokens(
    llama: LlamaServer,
    instrumented: None,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    kind: str,
    include_usage: bool,
) -> None:
    client = openai.OpenAI(base_url=llama.url + "/v1", api_key=KEY, max_retries=0)
    chunks = list(_create(client, kind, stream=True, include_usage=include_usage))
    with_usage = [c for c in chunks if c.usage is not None]
    span = one_span(span_exporter)
    a = span.attributes or {}
    assert a[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] > 0  # type: ignore[operator]
    _no_key_anywhere(span, metric_reader)
    if kind == "chat" and not include_usage:
        assert with_usage == []  # as OpenAI's: no usage unless asked, so none on the span
        assert sc.GEN_AI_USAGE_OUTPUT_TOKENS not in a
        return
    (last,) = with_usage
    assert last is chunks[-1]
    if kind == "chat":
        assert last.choices == []  # OpenAI's usage chunk
    else:
        assert last.choices[0].finish_reason == "length"  # llama.cpp's: usage on the finishing chunk
    assert last.usage is not None
    assert last.usage.completion_tokens == TOKENS
    assert _tokens(span) == (last.usage.prompt_tokens, TOKENS)


@pytest.mark.parametrize("stream", [False, True])
def test_the_async_client_records_the_servers_usage(
    llama: LlamaServer,
    instrumented: None,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    stream: bool,
) -> None:
    async def call() -> Any:
        async with openai.AsyncOpenAI(base_url=llama.url + "/v1", api_key=KEY, max_retries=0) as client:
            result = await _create(client, "chat", stream=stream)
            if not stream:
                return result.usage
            usages = [c.usage async for c in result if c.usage is not None]
            assert len(usages) == 1
            return usages[0]

    usage = asyncio.run(call())
    assert usage.completion_tokens == TOKENS
    span = one_span(span_exporter)
    assert _tokens(span) == (usage.prompt_tokens, TOKENS)
    _no_key_anywhere(span, metric_reader)


def test_a_rejected_request_reaches_the_caller_unchanged_and_marks_the_span(
    llama: LlamaServer,
    instrumented: None,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
) -> None:
    client = openai.OpenAI(base_url=llama.url + "/v1", api_key=KEY, max_retries=0)
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="tiny-llama", messages="not a list")  # type: ignore[arg-type]
    assert info.value.status_code == 400
    assert info.value.body == {
        "code": 400,
        "message": "Expected 'messages' to be an array",
        "type": "invalid_request_error",
    }
    span = one_span(span_exporter)
    assert (span.attributes or {})[sc.ERROR_TYPE] == "400"
    assert span.status.status_code is StatusCode.ERROR
    assert list((span.attributes or {})[sc.GEN_AI_RESPONSE_FINISH_REASONS]) == ["error"]  # type: ignore[arg-type]
    _no_key_anywhere(span, metric_reader)
