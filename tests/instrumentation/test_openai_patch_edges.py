"""What the openai wrapper sends and where it says the call went, over real HTTP.

Each case checks the body the server received and that spark-otel logged nothing: an injection
that failed inside the wrapper would leave the call untouched (the eval-safety promise) and a
warning behind, which is how its bugs hide.
"""

from __future__ import annotations

import logging
from typing import Any

import openai
import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.support.engine_server import MODEL, ServerLog
from tests.support.finished_spans import one_span, request_spans

import spark_otel
from spark_otel import _semconv as sc
from spark_otel.instrumentation import _openai_patch

MESSAGES = [{"role": "user", "content": "stream me please"}]


@pytest.fixture
def usage_on(tracer_provider: TracerProvider, meter_provider: MeterProvider) -> None:
    spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider, include_usage=True)


def _own_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("spark_otel") and r.levelno >= logging.WARNING
    ]


def test_include_usage_is_added_beside_an_extra_body_without_stream_options(
    base_url: str,
    usage_on: None,
    span_exporter: InMemorySpanExporter,
    server_log: ServerLog,
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    chunks = list(
        client.chat.completions.create(
            model=MODEL,
            messages=MESSAGES,
            max_tokens=3,
            stream=True,
            extra_body={"delay_s": 0},  # type: ignore[arg-type]
        )
    )
    assert server_log.bodies[-1]["stream_options"] == {"include_usage": True}
    assert server_log.bodies[-1]["delay_s"] == 0
    assert chunks[-1].usage.completion_tokens == 3  # type: ignore[union-attr]
    assert one_span(span_exporter).attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 3  # type: ignore[index]
    assert _own_warnings(caplog) == []


def test_include_usage_replaces_an_omitted_stream_options(
    base_url: str,
    usage_on: None,
    span_exporter: InMemorySpanExporter,
    server_log: ServerLog,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``stream_options=openai.NOT_GIVEN`` (what a wrapper passing its own defaults sends) is
    neither ``None`` nor a mapping: it is replaced, not searched."""
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    list(
        client.chat.completions.create(
            model=MODEL,
            messages=MESSAGES,
            max_tokens=2,
            stream=True,
            stream_options=openai.NOT_GIVEN,  # type: ignore[arg-type]
        )
    )
    assert server_log.bodies[-1]["stream_options"] == {"include_usage": True}
    assert one_span(span_exporter).attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] == 3  # type: ignore[index]
    assert _own_warnings(caplog) == []


@pytest.mark.parametrize("api", ["chat", "text"])
def test_a_raw_response_stream_gets_include_usage_and_its_tokens_counted(
    api: str,
    base_url: str,
    usage_on: None,
    span_exporter: InMemorySpanExporter,
    server_log: ServerLog,
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    if api == "chat":
        raw: Any = client.chat.completions.with_raw_response.create(
            model=MODEL,
            messages=MESSAGES,
            max_tokens=4,
            stream=True,  # type: ignore[arg-type]
        )
    else:
        raw = client.completions.with_raw_response.create(
            model=MODEL, prompt="a b", max_tokens=4, stream=True
        )
    chunks = list(raw.parse())
    assert server_log.bodies[-1]["stream_options"] == {"include_usage": True}
    assert chunks[-1].usage.completion_tokens == 4
    a = one_span(span_exporter).attributes or {}
    assert a[sc.REQUEST_LAYER] == "httpx"
    assert a[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 4
    assert _own_warnings(caplog) == []


async def test_an_async_raw_response_stream_gets_include_usage(
    base_url: str, usage_on: None, span_exporter: InMemorySpanExporter, server_log: ServerLog
) -> None:
    client = openai.AsyncOpenAI(base_url=base_url, api_key="sk")
    raw = await client.chat.completions.with_raw_response.create(
        model=MODEL,
        messages=MESSAGES,
        max_tokens=2,
        stream=True,  # type: ignore[arg-type]
    )
    chunks = [c async for c in raw.parse()]
    assert server_log.bodies[-1]["stream_options"] == {"include_usage": True}
    assert chunks[-1].usage.completion_tokens == 2  # type: ignore[union-attr]
    assert one_span(span_exporter).attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 2  # type: ignore[index]


def test_a_raw_response_call_is_sent_as_given_unless_it_streams_with_usage_on(
    base_url: str,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    server_log: ServerLog,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Not streamed, or ``include_usage`` off: the body is the caller's, untouched."""
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider, include_usage=True)
    client.chat.completions.with_raw_response.create(model=MODEL, messages=MESSAGES, max_tokens=2)  # type: ignore[arg-type]
    assert "stream_options" not in server_log.bodies[-1]
    spark_otel.uninstrument()
    spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider, include_usage=False)
    list(
        client.chat.completions.with_raw_response.create(
            model=MODEL,
            messages=MESSAGES,
            max_tokens=2,
            stream=True,  # type: ignore[arg-type]
        ).parse()
    )
    assert "stream_options" not in server_log.bodies[-1]
    assert _own_warnings(caplog) == []


# -- where the span says the call went: host and port of the client's base URL --------------------


def test_server_address_follows_the_client_and_a_reassigned_base_url(
    base_url: str, free_port: int, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    """The second call reads the cached parse; a new ``base_url`` object is parsed afresh."""
    client = openai.OpenAI(base_url=base_url, api_key="sk", max_retries=0)
    port = int(base_url.rsplit(":", 1)[1].split("/", 1)[0])
    for _ in range(2):
        client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=1)  # type: ignore[arg-type]
    client.base_url = f"http://localhost:{free_port}/v1"  # type: ignore[assignment]
    with pytest.raises(openai.APIConnectionError):
        client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=1)  # type: ignore[arg-type]
    servers = [
        ((s.attributes or {})[sc.SERVER_ADDRESS], (s.attributes or {})[sc.SERVER_PORT])
        for s in sorted(request_spans(span_exporter), key=lambda s: s.start_time or 0)
    ]
    assert servers == [("127.0.0.1", port), ("127.0.0.1", port), ("localhost", free_port)]


@pytest.mark.parametrize(("scheme", "port"), [("http", 80), ("https", 443)])
def test_a_base_url_without_a_port_reports_the_schemes_default(
    scheme: str, port: int, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    client = openai.OpenAI(base_url=f"{scheme}://127.0.0.1/v1", api_key="sk", max_retries=0)
    with pytest.raises(openai.APIError):  # nothing listens there (or something that is no engine)
        client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=1)  # type: ignore[arg-type]
    a = one_span(span_exporter).attributes or {}
    assert (a[sc.SERVER_ADDRESS], a[sc.SERVER_PORT]) == ("127.0.0.1", port)


# -- what the wrapper hands the SDK: the caller's arguments, and the request's span as current -----


def test_traceparent_alone_leaves_stream_options_as_the_caller_sent_them(
    base_url: str, tracer_provider: TracerProvider, meter_provider: MeterProvider, server_log: ServerLog
) -> None:
    """``inject_traceparent`` copies the kwargs; ``include_usage`` off (or a call that does not
    stream) must still reach the server without ``stream_options``."""
    spark_otel.instrument(
        tracer_provider=tracer_provider, meter_provider=meter_provider, inject_traceparent=True
    )
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    list(client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=2, stream=True))  # type: ignore[arg-type]
    assert "stream_options" not in server_log.bodies[-1]
    assert server_log.headers[-1]["traceparent"].startswith("00-")
    spark_otel.uninstrument()
    spark_otel.instrument(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        inject_traceparent=True,
        include_usage=True,
    )
    client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=2)  # type: ignore[arg-type]
    assert "stream_options" not in server_log.bodies[-1]


def test_the_request_span_is_current_during_the_call_and_only_then(
    base_url: str, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    seen: list[Any] = []
    http = openai.DefaultHttpxClient(
        event_hooks={"request": [lambda request: seen.append(trace.get_current_span().get_span_context())]}
    )
    client = openai.OpenAI(base_url=base_url, api_key="sk", http_client=http)
    client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=1)  # type: ignore[arg-type]
    assert seen == [one_span(span_exporter).get_span_context()]
    assert trace.get_current_span() is trace.INVALID_SPAN


def _positional(create: Any) -> str:
    with pytest.raises(TypeError) as info:
        create("positional", model=MODEL, messages=MESSAGES, max_tokens=1)
    return str(info.value)


@pytest.mark.parametrize("path", ["span", "raw response", "start failed", "uninstrumented"])
def test_positional_arguments_reach_the_sdk_as_given(
    path: str,
    base_url: str,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The SDK's ``create`` takes keywords only: a positional argument fails there, as bare."""
    bare = openai.OpenAI(base_url=base_url, api_key="sk").chat.completions
    expected = _positional(bare.with_raw_response.create if path == "raw response" else bare.create)
    spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    completions = openai.OpenAI(base_url=base_url, api_key="sk").chat.completions
    create = completions.with_raw_response.create if path == "raw response" else completions.create
    if path == "start failed":
        monkeypatch.setattr(_openai_patch, "_server", lambda instance: 1 / 0)
    if path == "uninstrumented":  # a `create` bound while instrumented passes through after
        spark_otel.uninstrument()
    assert _positional(create) == expected


@pytest.mark.parametrize("path", ["span", "raw response", "start failed", "uninstrumented"])
async def test_positional_arguments_reach_the_async_sdk_as_given(
    path: str,
    base_url: str,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def positional(create: Any) -> str:
        with pytest.raises(TypeError) as info:
            await create("positional", model=MODEL, messages=MESSAGES, max_tokens=1)
        return str(info.value)

    bare = openai.AsyncOpenAI(base_url=base_url, api_key="sk").chat.completions
    expected = await positional(bare.with_raw_response.create if path == "raw response" else bare.create)
    spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    completions = openai.AsyncOpenAI(base_url=base_url, api_key="sk").chat.completions
    create = completions.with_raw_response.create if path == "raw response" else completions.create
    if path == "start failed":
        monkeypatch.setattr(_openai_patch, "_server", lambda instance: 1 / 0)
    if path == "uninstrumented":
        spark_otel.uninstrument()
    assert await positional(create) == expected
    if path != "raw response":
        result = await create(model=MODEL, messages=MESSAGES, max_tokens=2)
        assert result.choices[0].message.content == "w0 w1 "


async def test_the_request_span_is_current_during_an_async_call_and_only_then(
    base_url: str, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    seen: list[Any] = []

    async def hook(request: Any) -> None:
        seen.append(trace.get_current_span().get_span_context())

    http = openai.DefaultAsyncHttpxClient(event_hooks={"request": [hook]})
    client = openai.AsyncOpenAI(base_url=base_url, api_key="sk", http_client=http)
    await client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=1)  # type: ignore[arg-type]
    assert seen == [one_span(span_exporter).get_span_context()]
    assert trace.get_current_span() is trace.INVALID_SPAN


def test_beside_an_outer_contrib_wrapper_a_stream_still_gets_include_usage_and_its_tokens_counted(
    base_url: str,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
    server_log: ServerLog,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The contrib instrumentation wraps outside (instrumented last): its span is the call's, and
    spark-otel's wrapper still adds ``include_usage``, which the raw layer below cannot, and reads
    the chunks as chat chunks (with content capture on, a text completion's field would fail)."""
    from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor

    spark_otel.instrument(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        include_usage=True,
        capture_content=True,
    )
    contrib = OpenAIInstrumentor()
    contrib.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    try:
        client = openai.OpenAI(base_url=base_url, api_key="sk")
        with spark_otel.cell(
            "golden", "B#3", tracer_provider=tracer_provider, meter_provider=meter_provider
        ) as state:
            chunks = list(
                client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=5, stream=True)
            )  # type: ignore[arg-type]
    finally:
        contrib.uninstrument()
    assert server_log.bodies[-1]["stream_options"] == {"include_usage": True}
    assert chunks[-1].usage.completion_tokens == 5  # type: ignore[union-attr]
    assert (state.requests, state.prompt_tokens, state.completion_tokens) == (1, 3, 5)
    (span,) = request_spans(span_exporter)
    assert span.instrumentation_scope.name == "opentelemetry.instrumentation.genai.openai"  # type: ignore[union-attr]
    assert (span.attributes or {})[sc.CELL_UID] == state.uid
    assert _own_warnings(caplog) == []
