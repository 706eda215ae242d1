"""What a request's span says about how it ended, and how a fault in spark-otel's own bookkeeping
is reported: once, under the name of the step that failed, with the exception itself."""

from __future__ import annotations

import logging
import time

import httpx2
import openai
import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.support.engine_server import MODEL
from tests.support.finished_spans import one_span
from tests.support.metric_points import metric_points
from tests.support.sse_bodies import sse_chunk, sse_transport

from spark_otel import _semconv as sc
from spark_otel.instrumentation._stream import StreamState

MESSAGES = [{"role": "user", "content": "one two three"}]


def _reports(caplog: pytest.LogCaptureFixture, step: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage().startswith(f"spark_otel: {step} failed")]


@pytest.mark.usefixtures("instrumented")
def test_an_http_status_error_raised_inside_send_is_typed_by_its_status(
    base_url: str, span_exporter: InMemorySpanExporter
) -> None:
    """A response hook's ``raise_for_status()`` raises inside ``send``: an error with a response
    but no ``status_code`` of its own (openai's errors carry both)."""
    with (
        httpx2.Client(event_hooks={"response": [lambda r: r.raise_for_status()]}) as client,
        pytest.raises(httpx2.HTTPStatusError),
    ):
        client.post(f"{base_url}/chat/completions", json={"model": "no-such-model", "messages": MESSAGES})
    a = one_span(span_exporter).attributes or {}
    assert a[sc.ERROR_TYPE] == "404"


@pytest.mark.usefixtures("instrumented")
def test_a_raw_responses_id_and_model_are_on_its_span(
    base_url: str, span_exporter: InMemorySpanExporter
) -> None:
    with httpx2.Client() as client:
        body = client.post(
            f"{base_url}/chat/completions", json={"model": MODEL, "messages": MESSAGES, "max_tokens": 2}
        ).json()
    a = one_span(span_exporter).attributes or {}
    assert (a[sc.GEN_AI_RESPONSE_ID], a[sc.GEN_AI_RESPONSE_MODEL]) == (body["id"], body["model"])
    assert (a[sc.GEN_AI_RESPONSE_ID], a[sc.GEN_AI_RESPONSE_MODEL]) == ("chatcmpl-test", MODEL)


@pytest.mark.usefixtures("instrumented")
async def test_an_async_stream_closed_early_says_so(
    base_url: str, span_exporter: InMemorySpanExporter
) -> None:
    client = openai.AsyncOpenAI(base_url=base_url, api_key="sk")
    stream = await client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=6, stream=True)  # type: ignore[call-overload]
    await stream.__anext__()
    await stream.close()
    a = one_span(span_exporter).attributes or {}
    assert a[sc.ERROR_TYPE] == sc.ERROR_TYPE_STREAM_CLOSED
    await client.close()


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.usefixtures("instrumented")
async def test_a_fault_in_stream_bookkeeping_is_reported_by_name_and_the_chunks_pass(
    is_async: bool, base_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Injected: no real chunk makes the bookkeeping fail."""
    fault = RuntimeError("injected")

    def broken(self: StreamState, chunk: object) -> None:
        raise fault

    monkeypatch.setattr(StreamState, "on_chunk", broken)
    kwargs = {"model": MODEL, "messages": MESSAGES, "max_tokens": 3, "stream": True}
    with caplog.at_level(logging.DEBUG, logger="spark_otel"):
        if is_async:
            client = openai.AsyncOpenAI(base_url=base_url, api_key="sk")
            texts = [c.choices[0].delta.content async for c in await client.chat.completions.create(**kwargs)]  # type: ignore[call-overload]
            await client.close()
        else:
            stream = openai.OpenAI(base_url=base_url, api_key="sk").chat.completions.create(**kwargs)  # type: ignore[call-overload]
            texts = [c.choices[0].delta.content for c in stream]
    assert texts == ["", "w0 ", "w1 ", "w2 "]  # the role chunk, then the words, as the server sent them
    reports = _reports(caplog, "stream chunk bookkeeping")
    assert len(reports) == 4
    assert all(r.exc_info is not None and r.exc_info[1] is fault for r in reports)


@pytest.mark.usefixtures("instrumented")
def test_a_last_event_without_its_blank_line_still_counts_with_its_usage(
    span_exporter: InMemorySpanExporter,
) -> None:
    usage = b'data: {"id":"r1","model":"m","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2}}'
    blocks = [sse_chunk("a"), sse_chunk("b", "stop"), usage]  # the body ends inside the usage event
    with (
        httpx2.Client(transport=sse_transport(blocks)) as client,
        client.stream("POST", "http://e:1/v1/chat/completions", json={"model": "m", "stream": True}) as r,
    ):
        r.read()
    a = one_span(span_exporter).attributes or {}
    assert (a[sc.REQUEST_CHUNKS], a[sc.GEN_AI_USAGE_INPUT_TOKENS], a[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) == (
        3,
        7,
        2,
    )
    assert list(a[sc.GEN_AI_RESPONSE_FINISH_REASONS]) == ["stop"]  # type: ignore[arg-type]
    assert sc.ERROR_TYPE not in a


@pytest.mark.usefixtures("instrumented")
def test_a_raw_streams_chunk_intervals_fit_in_its_duration_and_no_content_is_kept(
    span_exporter: InMemorySpanExporter, metric_reader: InMemoryMetricReader
) -> None:
    class Slow(httpx2.SyncByteStream):
        def __iter__(self):  # type: ignore[no-untyped-def]
            for text in ("a", "b", "c"):
                time.sleep(0.01)
                yield sse_chunk(text)

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=Slow())

    with (
        httpx2.Client(transport=httpx2.MockTransport(handler)) as client,
        client.stream("POST", "http://e:1/v1/chat/completions", json={"model": "m", "stream": True}) as r,
    ):
        r.read()
    span = one_span(span_exporter)
    assert sc.GEN_AI_OUTPUT_MESSAGES not in (span.attributes or {})  # capture is off
    (per_chunk,) = metric_points(metric_reader, sc.GEN_AI_CLIENT_TIME_PER_OUTPUT_CHUNK)
    (duration,) = metric_points(metric_reader, sc.GEN_AI_CLIENT_OPERATION_DURATION)
    assert per_chunk.count == 2
    assert 0.01 <= per_chunk.sum <= duration.sum


def test_a_fault_while_recording_or_ending_a_request_is_reported_by_name(
    base_url: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    span_exporter: InMemorySpanExporter,
) -> None:
    """Injected: the recording step raising (no real response makes it); a user's span
    processor that raises at the span's end is real, and is the user's own code."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

    import spark_otel
    from spark_otel.instrumentation._request import RequestTelemetry

    record_fault, end_fault = RuntimeError("record"), RuntimeError("end")

    class Raises(SpanProcessor):
        def on_end(self, span: object) -> None:
            raise end_fault

    def broken(self: RequestTelemetry, **kwargs: object) -> None:
        raise record_fault

    provider = TracerProvider()
    provider.add_span_processor(Raises())
    spark_otel.instrument(tracer_provider=provider, meter_provider=MeterProvider())
    monkeypatch.setattr(RequestTelemetry, "_record", broken)
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    with caplog.at_level(logging.DEBUG, logger="spark_otel"):
        out = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=2)
    spark_otel.uninstrument()
    assert out.usage.completion_tokens == 2  # type: ignore[union-attr]
    for step, fault in (("request finalize", record_fault), ("request span end", end_fault)):
        (report,) = _reports(caplog, step)
        assert report.exc_info is not None
        assert report.exc_info[1] is fault


@pytest.mark.usefixtures("instrumented")
def test_malformed_marked_events_are_skipped_and_the_rest_of_the_summary_holds(
    span_exporter: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    """A malformed engine (what the test server never sends): a finish event whose ``choices``
    is null, and a last event cut off inside its usage object."""
    blocks = [
        sse_chunk("a"),
        sse_chunk("b", "stop"),
        b'data: {"id":"r1","choices":null,"finish_reason":"length"}\n\n',
        b'data: {"id":"r1","choices":[],"usage": {"prompt_tokens":7,',
    ]
    with (
        caplog.at_level(logging.DEBUG, logger="spark_otel"),
        httpx2.Client(transport=sse_transport(blocks)) as client,
        client.stream("POST", "http://e:1/v1/chat/completions", json={"model": "m", "stream": True}) as r,
    ):
        r.read()
    a = one_span(span_exporter).attributes or {}
    assert (a[sc.REQUEST_CHUNKS], a[sc.GEN_AI_RESPONSE_ID]) == (4, "r1")
    assert list(a[sc.GEN_AI_RESPONSE_FINISH_REASONS]) == ["stop"]  # type: ignore[arg-type]
    assert sc.GEN_AI_USAGE_INPUT_TOKENS not in a
    assert _reports(caplog, "httpx response finalize") == []
