"""`instrument()` on the real openai client against llama.cpp's server: completions and chat,
streamed and not, sync and async. The span's tokens are the server's own usage, the answer the
caller gets is untouched, and the API key appears nowhere in the telemetry."""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
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


def _create(client: Any, kind: str, stream: bool) -> Any:
    common: dict[str, Any] = {"model": "tiny-llama", "max_tokens": TOKENS, "extra_body": PINNED}
    if stream:
        common |= {"stream": True, "stream_options": {"include_usage": True}}
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


@pytest.mark.parametrize("kind", ["completions", "chat"])
def test_a_stream_records_the_usage_chunks_tokens(
    llama: LlamaServer,
    instrumented: None,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    kind: str,
) -> None:
    client = openai.OpenAI(base_url=llama.url + "/v1", api_key=KEY, max_retries=0)
    chunks = list(_create(client, kind, stream=True))
    (usage,) = [c.usage for c in chunks if c.usage is not None]
    assert usage.completion_tokens == TOKENS
    span = one_span(span_exporter)
    assert _tokens(span) == (usage.prompt_tokens, TOKENS)
    a = span.attributes or {}
    assert a[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] > 0  # type: ignore[operator]
    _no_key_anywhere(span, metric_reader)


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
