"""Non-streamed openai calls (chat and text completion, sync and async) over real HTTP."""

from __future__ import annotations

import json

import openai
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from tests.support.engine_server import MODEL, ServerLog
from tests.support.finished_spans import one_span, request_spans
from tests.support.metric_points import metric_points

import spark_otel
from spark_otel import _semconv as sc

MESSAGES = [{"role": "user", "content": "review this diff please"}]


def _chat(client: openai.OpenAI, **kw: object) -> openai.types.chat.ChatCompletion:
    return client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=6, **kw)  # type: ignore[arg-type]


def test_chat_result_is_identical_with_and_without_instrumentation(
    base_url: str, tracer_provider: TracerProvider, meter_provider: MeterProvider
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="sk-test")
    bare = _chat(client)
    spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    traced = _chat(client)
    assert type(traced) is type(bare)
    assert traced.model_dump() == bare.model_dump()


def test_chat_span_carries_semconv_attributes(
    base_url: str, instrumented: None, span_exporter: InMemorySpanExporter, server: object
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="sk-test")
    _chat(client, temperature=0.5, top_p=0.9, seed=7)
    span = one_span(span_exporter)
    a = dict(span.attributes or {})
    assert span.name == f"chat {MODEL}"
    assert span.kind is SpanKind.CLIENT
    assert a[sc.GEN_AI_OPERATION_NAME] == "chat"
    assert a[sc.GEN_AI_PROVIDER_NAME] == "vllm"
    assert a[sc.GEN_AI_REQUEST_MODEL] == MODEL
    assert a[sc.GEN_AI_RESPONSE_MODEL] == MODEL
    assert a[sc.GEN_AI_RESPONSE_ID] == "chatcmpl-test"
    assert a[sc.GEN_AI_REQUEST_MAX_TOKENS] == 6
    assert a[sc.GEN_AI_REQUEST_TEMPERATURE] == 0.5
    assert a[sc.GEN_AI_REQUEST_TOP_P] == 0.9
    assert a[sc.GEN_AI_REQUEST_SEED] == 7
    assert a[sc.GEN_AI_USAGE_INPUT_TOKENS] == 4
    assert a[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 6
    assert list(a[sc.GEN_AI_RESPONSE_FINISH_REASONS]) == ["length"]  # type: ignore[arg-type]
    assert a[sc.SERVER_ADDRESS] == "127.0.0.1"
    assert a[sc.SERVER_PORT] == int(base_url.rsplit(":", 1)[1].split("/", maxsplit=1)[0])
    assert sc.GEN_AI_REQUEST_STREAM not in a
    assert sc.ERROR_TYPE not in a
    assert span.status.status_code is StatusCode.UNSET


def test_max_completion_tokens_is_reported_as_max_tokens(
    base_url: str, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="sk-test")
    client.chat.completions.create(model=MODEL, messages=MESSAGES, max_completion_tokens=3)  # type: ignore[arg-type]
    assert one_span(span_exporter).attributes[sc.GEN_AI_REQUEST_MAX_TOKENS] == 3  # type: ignore[index]


def test_text_completion_sync_records_operation_and_usage(
    base_url: str, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="sk-test")
    result = client.completions.create(model=MODEL, prompt="one two three", max_tokens=4)
    assert result.choices[0].text == "w0 w1 w2 w3 "
    span = one_span(span_exporter)
    assert span.name == f"text_completion {MODEL}"
    assert span.attributes[sc.GEN_AI_OPERATION_NAME] == "text_completion"  # type: ignore[index]
    assert span.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] == 3  # type: ignore[index]
    assert span.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 4  # type: ignore[index]


async def test_async_chat_and_completion_match_bare_results(
    base_url: str,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
) -> None:
    client = openai.AsyncOpenAI(base_url=base_url, api_key="sk-test")
    bare_chat = await client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=5)  # type: ignore[arg-type]
    bare_text = await client.completions.create(model=MODEL, prompt="a b", max_tokens=5)
    spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    chat = await client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=5)  # type: ignore[arg-type]
    text = await client.completions.create(model=MODEL, prompt="a b", max_tokens=5)
    assert chat.model_dump() == bare_chat.model_dump()
    assert text.model_dump() == bare_text.model_dump()
    names = sorted(s.name for s in request_spans(span_exporter))
    assert names == [f"chat {MODEL}", f"text_completion {MODEL}"]
    for span in request_spans(span_exporter):
        assert span.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 5  # type: ignore[index]
        assert span.attributes[sc.REQUEST_LAYER] == "openai"  # type: ignore[index]


def test_metrics_duration_and_token_usage_with_semconv_buckets(
    base_url: str, instrumented: None, metric_reader: InMemoryMetricReader
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="sk-test")
    _chat(client)
    (duration,) = metric_points(metric_reader, sc.GEN_AI_CLIENT_OPERATION_DURATION)
    assert duration.count == 1
    assert tuple(duration.explicit_bounds) == sc.DURATION_BUCKETS_S
    assert duration.attributes[sc.GEN_AI_RESPONSE_MODEL] == MODEL
    assert sc.ERROR_TYPE not in duration.attributes
    tokens = {
        p.attributes[sc.GEN_AI_TOKEN_TYPE]: p
        for p in metric_points(metric_reader, sc.GEN_AI_CLIENT_TOKEN_USAGE)
    }
    assert tokens["input"].sum == 4
    assert tokens["output"].sum == 6
    assert tuple(tokens["output"].explicit_bounds) == sc.TOKEN_BUCKETS
    # Not a stream: no chunk metrics.
    assert metric_points(metric_reader, sc.GEN_AI_CLIENT_TIME_TO_FIRST_CHUNK) == []


def test_api_error_propagates_unchanged_and_records_status_code(
    base_url: str,
    instrumented: None,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="sk-test", max_retries=0)
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="no-such-model", messages=MESSAGES)  # type: ignore[arg-type]
    assert info.value.status_code == 404
    span = one_span(span_exporter)
    assert span.attributes[sc.ERROR_TYPE] == "404"  # type: ignore[index]
    assert span.status.status_code is StatusCode.ERROR
    assert list(span.attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS]) == ["error"]  # type: ignore[index]
    (duration,) = metric_points(metric_reader, sc.GEN_AI_CLIENT_OPERATION_DURATION)
    assert duration.attributes[sc.ERROR_TYPE] == "404"
    assert metric_points(metric_reader, sc.GEN_AI_CLIENT_TOKEN_USAGE) == []


async def test_connection_error_records_exception_name(
    free_port: int, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    client = openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{free_port}/v1", api_key="sk", max_retries=0)
    with pytest.raises(openai.APIConnectionError):
        await client.completions.create(model=MODEL, prompt="x")
    span = one_span(span_exporter)
    assert span.attributes[sc.ERROR_TYPE] == "APIConnectionError"  # type: ignore[index]


def test_retries_are_one_span(
    free_port: int, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{free_port}/v1", api_key="sk", max_retries=1)
    with pytest.raises(openai.APIConnectionError):
        client.completions.create(model=MODEL, prompt="x", timeout=2)
    assert len(request_spans(span_exporter)) == 1


def test_content_and_api_key_are_not_recorded_by_default(
    base_url: str, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="sk-very-secret")
    _chat(client)
    span = one_span(span_exporter)
    a = dict(span.attributes or {})
    assert sc.GEN_AI_INPUT_MESSAGES not in a
    assert sc.GEN_AI_OUTPUT_MESSAGES not in a
    assert "review this diff" not in repr(a)
    assert "sk-very-secret" not in repr(a)
    assert not any("authorization" in k.lower() or "api-key" in k.lower() for k in a)


def test_content_capture_records_messages_when_switched_on(
    base_url: str,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
) -> None:
    spark_otel.instrument(
        tracer_provider=tracer_provider, meter_provider=meter_provider, capture_content=True
    )
    client = openai.OpenAI(base_url=base_url, api_key="sk-very-secret")
    _chat(client)
    a = one_span(span_exporter).attributes or {}
    inputs = json.loads(str(a[sc.GEN_AI_INPUT_MESSAGES]))
    outputs = json.loads(str(a[sc.GEN_AI_OUTPUT_MESSAGES]))
    assert inputs == [{"role": "user", "parts": [{"type": "text", "content": "review this diff please"}]}]
    assert outputs[0]["parts"][0]["content"] == "w0 w1 w2 w3 w4 w5 "
    assert outputs[0]["finish_reason"] == "length"
    assert "sk-very-secret" not in repr(dict(a))


def test_content_capture_follows_the_semconv_environment_variable(
    base_url: str,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    client.completions.create(model=MODEL, prompt="hello world", max_tokens=2)
    a = one_span(span_exporter).attributes or {}
    assert json.loads(str(a[sc.GEN_AI_INPUT_MESSAGES]))[0]["parts"][0]["content"] == "hello world"
    assert json.loads(str(a[sc.GEN_AI_OUTPUT_MESSAGES]))[0]["parts"][0]["content"] == "w0 w1 "


def test_traceparent_is_injected_only_when_asked(
    base_url: str,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
    server_log: ServerLog,
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    _chat(client)
    assert "traceparent" not in server_log.headers[-1]
    spark_otel.uninstrument()
    spark_otel.instrument(
        tracer_provider=tracer_provider, meter_provider=meter_provider, inject_traceparent=True
    )
    _chat(client, extra_headers={"x-user": "kept"})
    sent = server_log.headers[-1]
    span = request_spans(span_exporter)[-1]
    ctx = span.get_span_context()
    assert sent["traceparent"].startswith(f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-")
    assert sent["x-user"] == "kept"


def test_bad_instrument_argument_raises_config_error() -> None:
    from spark_otel import ConfigError

    with pytest.raises(ConfigError, match="capture_content"):
        spark_otel.instrument(capture_content="yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="provider_name"):
        spark_otel.instrument(provider_name="")


def test_provider_name_is_configurable(
    base_url: str,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
) -> None:
    spark_otel.instrument(
        tracer_provider=tracer_provider, meter_provider=meter_provider, provider_name="sglang"
    )
    _chat(openai.OpenAI(base_url=base_url, api_key="sk"))
    assert one_span(span_exporter).attributes[sc.GEN_AI_PROVIDER_NAME] == "sglang"  # type: ignore[index]
