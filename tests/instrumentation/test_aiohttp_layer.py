"""Raw ``aiohttp`` calls to /v1/*: one span per call with the engine's own tokens, however the body
is read, beside contrib's aiohttp-client instrumentation in either order and under the openai SDK
on an aiohttp transport, and nothing left patched after."""

from __future__ import annotations

import gc
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import aiohttp
import httpx2
import openai
import pytest
from opentelemetry.instrumentation.aiohttp_client import AioHttpClientInstrumentor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.support.aiohttp_transport import AiohttpTransport
from tests.support.engine_server import MODEL, ServerLog
from tests.support.finished_spans import one_span, request_spans
from tests.support.served import served_count, served_since

import spark_otel
from spark_otel import _semconv as sc

ENGINE = "qwen"
MESSAGES = [{"role": "user", "content": "Name three prime numbers."}]
SECRET = "sk-aiohttp-secret"
USAGE_ON = {"stream": True, "stream_options": {"include_usage": True}}


def pinned(tokens: int) -> dict[str, Any]:
    """Exactly ``tokens`` tokens from the simulated engine (vLLM's ``min_tokens`` and ``ignore_eos``)."""
    return {"max_tokens": tokens, "min_tokens": tokens, "ignore_eos": True}


def _tokens(span: Any) -> tuple[int, int]:
    a = span.attributes or {}
    return a[sc.GEN_AI_USAGE_INPUT_TOKENS], a[sc.GEN_AI_USAGE_OUTPUT_TOKENS]


async def _lines(response: aiohttp.ClientResponse) -> bytes:
    return b"".join([line async for line in response.content])


async def _any(response: aiohttp.ClientResponse) -> bytes:
    return b"".join([block async for block in response.content.iter_any()])


async def _chunked(response: aiohttp.ClientResponse) -> bytes:
    return b"".join([block async for block in response.content.iter_chunked(5)])


async def _chunks(response: aiohttp.ClientResponse) -> bytes:
    return b"".join([block async for block, _ in response.content.iter_chunks()])


async def _read(response: aiohttp.ClientResponse) -> bytes:
    return await response.read()


READERS: dict[str, Callable[[aiohttp.ClientResponse], Awaitable[bytes]]] = {
    "lines": _lines,
    "iter_any": _any,
    "iter_chunked": _chunked,
    "iter_chunks": _chunks,
    "read": _read,
}


async def test_posts_carry_the_tokens_the_engine_served_and_no_secret(
    live_box: Any,
    instrumented: None,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
) -> None:
    url = live_box.url(ENGINE) + "/v1"
    before = served_count(live_box, ENGINE)
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {SECRET}"}) as session:
        async with session.post(
            f"{url}/chat/completions", json={"model": ENGINE, "messages": MESSAGES, **pinned(7)}
        ) as chat:
            answer = await chat.json()
        async with session.post(
            f"{url}/completions",
            data=b'{"model": "qwen", "prompt": "Once", "max_tokens": 5, "min_tokens": 5}',
        ) as text:
            await text.text()
    assert answer["usage"]["completion_tokens"] == 7
    spans = request_spans(span_exporter)
    assert [_tokens(s) for s in spans] == served_since(live_box, ENGINE, before)
    assert [s.name for s in spans] == ["chat qwen", "text_completion qwen"]
    assert {(s.attributes or {})[sc.REQUEST_LAYER] for s in spans} == {"aiohttp"}
    assert [(s.attributes or {})[sc.GEN_AI_REQUEST_MAX_TOKENS] for s in spans] == [7, 5]
    assert all(sc.ERROR_TYPE not in (s.attributes or {}) for s in spans)
    assert SECRET not in repr([dict(s.attributes or {}) for s in spans])
    assert SECRET not in repr(metric_reader.get_metrics_data())


@pytest.mark.parametrize("reader", READERS)
async def test_a_stream_read_any_way_is_passed_on_whole_with_its_tokens_and_chunks(
    reader: str, live_box: Any, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    url = live_box.url(ENGINE) + "/v1/chat/completions"
    before = served_count(live_box, ENGINE)
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, json={"model": ENGINE, "messages": MESSAGES, **pinned(6), **USAGE_ON}) as response,
    ):
        body = await READERS[reader](response)
    assert body.endswith(b"data: [DONE]\n\n")
    assert body.count(b"data: ") == 1 + 6 + 1 + 1  # the role, the tokens, the usage, [DONE]
    span = one_span(span_exporter)
    assert [_tokens(span)] == served_since(live_box, ENGINE, before)
    a = span.attributes or {}
    assert (a[sc.GEN_AI_REQUEST_STREAM], a[sc.REQUEST_CHUNKS]) == (True, 1 + 6 + 1)
    assert sc.ERROR_TYPE not in a
    assert a[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] > 0


async def test_a_stream_is_passed_on_byte_for_byte(
    base_url: str,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
) -> None:
    body = {"model": MODEL, "messages": MESSAGES, "max_tokens": 4, **USAGE_ON}

    async def read() -> list[bytes]:
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"{base_url}/chat/completions", json=body) as r,
        ):
            return [line async for line in r.content]

    bare = await read()
    spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    assert await read() == bare
    assert one_span(span_exporter).attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 4  # type: ignore[index]


async def test_released_early_a_failed_status_and_no_engine_are_error_types(
    base_url: str, free_port: int, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    async with aiohttp.ClientSession() as session:
        long = {"model": MODEL, "messages": MESSAGES, "max_tokens": 50, "stream": True}
        async with session.post(f"{base_url}/chat/completions", json=long) as r:
            await r.content.readline()
        async with session.post(f"{base_url}/completions", json={"model": "nope", "prompt": "x"}) as missing:
            assert missing.status == 404
        with pytest.raises(aiohttp.ClientResponseError):
            await session.post(
                f"{base_url}/completions", json={"model": "nope", "prompt": "x"}, raise_for_status=True
            )
        with pytest.raises(aiohttp.ClientConnectorError):
            await session.post(f"http://127.0.0.1:{free_port}/v1/completions", json={"model": MODEL})
        async with session.get(f"{base_url}/models") as models:  # not a generation call: no span
            await models.read()
    errors = [(s.attributes or {})[sc.ERROR_TYPE] for s in request_spans(span_exporter)]
    assert errors == [sc.ERROR_TYPE_STREAM_CLOSED, "404", "404", "ClientConnectorError"]


async def test_a_response_dropped_unread_is_abandoned(
    base_url: str, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    async with aiohttp.ClientSession() as session:
        response = await session.post(
            f"{base_url}/completions", json={"model": MODEL, "prompt": "x", "max_tokens": 3}
        )
        assert request_spans(span_exporter) == []
        # Until its body's end arrives, aiohttp's own reader holds the response (its end-of-body
        # callback); after that nothing does.
        await response.content.wait_eof()
        assert request_spans(span_exporter) == []
        del response
        gc.collect()
    assert one_span(span_exporter).attributes[sc.ERROR_TYPE] == sc.ERROR_TYPE_STREAM_ABANDONED  # type: ignore[index]


async def test_base_url_traceparent_and_the_callers_headers_untouched(
    base_url: str,
    server_log: ServerLog,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
) -> None:
    spark_otel.instrument(
        tracer_provider=tracer_provider, meter_provider=meter_provider, inject_traceparent=True
    )
    headers = {"X-Caller": "kept"}
    async with (
        aiohttp.ClientSession(base_url=base_url.removesuffix("v1")) as session,
        session.post(
            "v1/completions", json={"model": MODEL, "prompt": "x", "max_tokens": 2}, headers=headers
        ) as r,
    ):
        await r.json()
    span = one_span(span_exporter)
    assert span.attributes[sc.GEN_AI_OPERATION_NAME] == sc.OPERATION_TEXT_COMPLETION  # type: ignore[index]
    sent = server_log.headers[-1]
    assert sent["traceparent"].split("-")[2] == format(span.context.span_id, "016x")  # type: ignore[union-attr]
    assert sent["x-caller"] == "kept"
    assert headers == {"X-Caller": "kept"}


async def test_requests_in_a_cell_add_up_in_the_cell(
    base_url: str, tracer_provider: TracerProvider, meter_provider: MeterProvider, instrumented: None
) -> None:
    with spark_otel.cell(
        "lm-eval-like", "doc-0", tracer_provider=tracer_provider, meter_provider=meter_provider
    ) as state:
        async with aiohttp.ClientSession() as session:
            for body in (
                {"model": MODEL, "prompt": "a b c", "max_tokens": 3},
                {"model": MODEL, "prompt": "d e", "max_tokens": 4, **USAGE_ON},
            ):
                async with session.post(f"{base_url}/completions", json=body) as r:
                    await r.read()
    assert (state.requests, state.prompt_tokens, state.completion_tokens) == (2, 5, 7)


async def test_the_openai_sdk_over_aiohttp_has_one_span_per_call(
    base_url: str, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    """openai's ``DefaultAioHttpClient`` sends through aiohttp: its calls keep one span each."""
    transport = AiohttpTransport()
    client = openai.AsyncOpenAI(
        base_url=base_url, api_key="sk", http_client=httpx2.AsyncClient(transport=transport)
    )
    await client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=3)  # type: ignore[arg-type]
    stream = await client.completions.create(
        model=MODEL, prompt="p q", max_tokens=2, stream=True, stream_options={"include_usage": True}
    )
    assert len([chunk async for chunk in stream]) == 3
    raw = await client.completions.with_raw_response.create(model=MODEL, prompt="p", max_tokens=4)
    assert raw.parse().usage.completion_tokens == 4  # type: ignore[union-attr]
    await client.close()
    await transport.aclose()
    spans = request_spans(span_exporter)
    assert [((s.attributes or {})[sc.REQUEST_LAYER], _tokens(s)[1]) for s in spans] == [
        ("openai", 3),
        ("openai", 2),
        ("httpx", 4),
    ]


# -- beside contrib's aiohttp-client instrumentation ---------------------------------------------------


@pytest.fixture(params=["spark-first", "contrib-first"])
def beside_contrib(
    request: pytest.FixtureRequest, tracer_provider: TracerProvider, meter_provider: MeterProvider
) -> Iterator[None]:
    contrib = AioHttpClientInstrumentor()

    def spark() -> None:
        spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)

    def other() -> None:
        contrib.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)

    first, second = (spark, other) if request.param == "spark-first" else (other, spark)
    first()
    second()
    try:
        yield
    finally:
        contrib.uninstrument()
        spark_otel.uninstrument()


async def test_beside_contrib_each_call_has_one_genai_span_and_contribs_http_span(
    beside_contrib: None, live_box: Any, span_exporter: InMemorySpanExporter
) -> None:
    url = live_box.url(ENGINE) + "/v1/completions"
    before = served_count(live_box, ENGINE)
    async with aiohttp.ClientSession() as session:
        for body in (
            {"model": ENGINE, "prompt": "One", **pinned(3)},
            {"model": ENGINE, "prompt": "Two", **pinned(4), **USAGE_ON},
        ):
            async with session.post(url, json=body) as r:
                await r.read()
    genai = request_spans(span_exporter)
    http = [s for s in span_exporter.get_finished_spans() if s not in genai]
    assert [s.instrumentation_scope.name for s in genai] == [sc.SCOPE_NAME] * 2  # type: ignore[union-attr]
    assert [_tokens(s) for s in genai] == served_since(live_box, ENGINE, before)
    assert [s.name for s in http] == ["POST"] * 2


@pytest.mark.parametrize("order", ["spark-first", "contrib-first"])
@pytest.mark.parametrize("undo", ["last-first", "first-first"])
async def test_uninstrument_in_any_order_restores_both_patched_functions(
    order: str,
    undo: str,
    base_url: str,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
) -> None:
    originals = (aiohttp.ClientSession.__init__, aiohttp.ClientSession._request)
    contrib = AioHttpClientInstrumentor()
    steps = {
        "spark": (
            lambda: spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider),
            spark_otel.uninstrument,
        ),
        "contrib": (
            lambda: contrib.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider),
            contrib.uninstrument,
        ),
    }
    names = ["spark", "contrib"] if order == "spark-first" else ["contrib", "spark"]
    for name in names:
        steps[name][0]()
    for name in reversed(names) if undo == "last-first" else names:
        steps[name][1]()
    assert (aiohttp.ClientSession.__init__, aiohttp.ClientSession._request) == originals
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{base_url}/completions", json={"model": MODEL, "prompt": "x", "max_tokens": 2}) as r,
    ):
        await r.read()
    assert span_exporter.get_finished_spans() == ()
