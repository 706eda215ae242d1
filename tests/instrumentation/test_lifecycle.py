"""instrument()/uninstrument() idempotence, pass-through after uninstrument, and never raising."""

from __future__ import annotations

import logging

import httpx2
import openai
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.support.engine_server import MODEL
from tests.support.finished_spans import request_spans

import spark_otel
from spark_otel import _guard
from spark_otel.instrumentation import InstrumentationConfig, SparkOtelInstrumentor, _sse_scanner, _stream
from spark_otel.instrumentation._request import RequestTelemetry
from spark_otel.store import Store
from spark_otel.telemetry import current_telemetry

MESSAGES = [{"role": "user", "content": "hi"}]


def test_instrument_twice_warns_and_does_not_double_wrap(
    base_url: str,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
    caplog: pytest.LogCaptureFixture,
) -> None:
    spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    with caplog.at_level(logging.WARNING):
        spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    assert caplog.messages == ["spark_otel.instrument() called twice; the first call's settings stay"]
    openai.OpenAI(base_url=base_url, api_key="sk").completions.create(model=MODEL, prompt="x", max_tokens=1)
    assert len(request_spans(span_exporter)) == 1


def test_instrument_again_with_nothing_new_is_quiet(
    tmp_path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A runner that calls `instrument()` in every worker asks for nothing new: no warning."""
    monkeypatch.setenv("SPARK_OTEL_STORE", str(tmp_path / "store.sqlite"))
    spark_otel.instrument()
    try:
        with caplog.at_level(logging.WARNING):
            spark_otel.instrument()
            assert caplog.messages == []
            spark_otel.instrument(capture_content=True)
        assert caplog.messages == ["spark_otel.instrument() called twice; the first call's settings stay"]
        assert SparkOtelInstrumentor().config == InstrumentationConfig()
    finally:
        spark_otel.uninstrument()
        spark_otel.shutdown()


def test_uninstrument_restores_originals_and_leaves_zero_spans(
    base_url: str,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from openai.resources.chat.completions.completions import Completions

    original = Completions.__dict__["create"]
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    # Bound wrappers the SDK caches outlive unwrapping: they must become pass-throughs.
    cached_raw = client.chat.completions.with_raw_response
    cached_create = client.chat.completions.create
    spark_otel.uninstrument()
    assert Completions.__dict__["create"] is original
    assert httpx2.Client.__dict__["send"].__name__ == "send"
    assert not hasattr(httpx2.Client.__dict__["send"], "__wrapped__")

    client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=1)  # type: ignore[arg-type]
    cached_create(model=MODEL, messages=MESSAGES, max_tokens=1)
    cached_raw.create(model=MODEL, messages=MESSAGES, max_tokens=1).parse()
    list(client.completions.create(model=MODEL, prompt="x", max_tokens=2, stream=True))
    with httpx2.Client() as raw:
        raw.post(f"{base_url}/completions", json={"model": MODEL, "prompt": "x", "max_tokens": 1})
    assert request_spans(span_exporter) == []
    with caplog.at_level(logging.WARNING):
        spark_otel.uninstrument()
    assert caplog.messages == ["spark_otel.uninstrument() called while not instrumented"]


def test_reinstrument_after_uninstrument_traces_again(
    base_url: str,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    spark_otel.uninstrument()
    spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    client.completions.create(model=MODEL, prompt="x", max_tokens=1)
    assert len(request_spans(span_exporter)) == 1
    assert SparkOtelInstrumentor().is_instrumented


def test_one_line_instrument_writes_requests_to_the_embedded_store(
    base_url: str, tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.setenv("SPARK_OTEL_STORE", str(tmp_path / "store.sqlite"))  # type: ignore[operator]
    try:
        spark_otel.instrument()
        telemetry = current_telemetry()
        assert telemetry is not None
        assert telemetry.store is not None
        openai.OpenAI(base_url=base_url, api_key="sk").completions.create(
            model=MODEL, prompt="a b", max_tokens=3
        )
        telemetry.force_flush()
        with Store(tmp_path / "store.sqlite") as store:  # type: ignore[operator]
            (request,) = store.requests()
        assert request.operation == "text_completion"
        assert request.output_tokens == 3
        assert request.input_tokens == 2
    finally:
        spark_otel.uninstrument()
        spark_otel.shutdown()


# -- a failure inside the instrumentation never reaches the user's call -------------------------------


def _boom(*args: object, **kwargs: object) -> None:
    raise RuntimeError("instrumentation bug")


@pytest.mark.parametrize("stream", [False, True])
def test_failing_request_start_leaves_the_call_untouched(
    base_url: str, instrumented: None, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    monkeypatch.setattr(RequestTelemetry, "__init__", _boom)
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    result = client.completions.create(model=MODEL, prompt="x", max_tokens=2, stream=stream)
    text = "".join(c.choices[0].text for c in result) if stream else result.choices[0].text  # type: ignore[union-attr]
    assert text == "w0 w1 "


def test_failing_finalize_still_ends_the_span_and_returns_the_result(
    base_url: str, instrumented: None, monkeypatch: pytest.MonkeyPatch, span_exporter: InMemorySpanExporter
) -> None:
    monkeypatch.setattr(RequestTelemetry, "_record", _boom)
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    result = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=2)  # type: ignore[arg-type]
    assert result.choices[0].message.content == "w0 w1 "
    assert len(request_spans(span_exporter)) == 1  # ended even though recording failed


def test_failing_chunk_hook_passes_every_chunk_through(
    base_url: str, instrumented: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(_stream.StreamState, "on_chunk", _boom)
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    with caplog.at_level(logging.WARNING):
        chunks = list(client.completions.create(model=MODEL, prompt="x", max_tokens=4, stream=True))
    assert "".join(c.choices[0].text for c in chunks) == "w0 w1 w2 w3 "
    assert caplog.text.count("stream chunk bookkeeping failed") == 1  # logged once, not per chunk


def test_failing_sse_scanner_passes_raw_bytes_through(
    base_url: str, instrumented: None, monkeypatch: pytest.MonkeyPatch, span_exporter: InMemorySpanExporter
) -> None:
    monkeypatch.setattr(_sse_scanner.SseScanner, "feed", _boom)
    body = {"model": MODEL, "prompt": "x", "max_tokens": 3, "stream": True}
    with httpx2.Client() as client, client.stream("POST", f"{base_url}/completions", json=body) as r:
        lines = [line for line in r.iter_lines() if line]
    assert len(lines) == 4
    assert lines[-1] == "data: [DONE]"
    assert len(request_spans(span_exporter)) == 1


def test_failing_stream_wrap_returns_the_sdk_stream(
    base_url: str, instrumented: None, monkeypatch: pytest.MonkeyPatch, span_exporter: InMemorySpanExporter
) -> None:
    monkeypatch.setattr(_stream.StreamState, "__init__", _boom)
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    stream = client.completions.create(model=MODEL, prompt="x", max_tokens=2, stream=True)
    assert type(stream) is openai.Stream
    assert len(list(stream)) == 2
    assert len(request_spans(span_exporter)) == 1


def test_guard_and_hot_path_reports_share_one_warning_per_kind(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="spark_otel"):
        _guard.report_failure("shared kind", RuntimeError("first"))
        with _guard.guard("shared kind"):
            raise RuntimeError("second")
        with _guard.guard("other kind"):
            raise RuntimeError("third")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "spark_otel: shared kind failed; the call goes on untouched",
        "spark_otel: other kind failed; the call goes on untouched",
    ]
    debug = [r for r in caplog.records if r.levelno == logging.DEBUG]
    assert [str(r.exc_info[1]) for r in debug if r.exc_info] == ["second"]
