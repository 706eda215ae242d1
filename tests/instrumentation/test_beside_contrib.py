"""Beside the contrib GenAI instrumentation on the same client, one call gives one request span and
one set of GenAI metrics, in either order of ``instrument()``; spark-otel's cell keeps its tokens."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest
from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.support.engine_server import MODEL
from tests.support.finished_spans import request_spans
from tests.support.metric_points import metric_points

import spark_otel
from spark_otel import _semconv as sc

CONTRIB_SCOPE = "opentelemetry.instrumentation.genai.openai"
MESSAGES = [{"role": "user", "content": "one two three"}]


@pytest.fixture(params=["spark-first", "contrib-first"])
def both(
    request: pytest.FixtureRequest, tracer_provider: TracerProvider, meter_provider: MeterProvider
) -> Iterator[str]:
    """Both instrumentations on the same providers; yields whose wrapper is outermost."""
    contrib = OpenAIInstrumentor()

    def spark() -> None:
        spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)

    def other() -> None:
        contrib.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)

    first, second = (spark, other) if request.param == "spark-first" else (other, spark)
    first()
    second()
    try:
        # The one instrumented last wraps outside the other.
        yield "contrib" if request.param == "spark-first" else "spark-otel"
    finally:
        contrib.uninstrument()
        spark_otel.uninstrument()


def _one_request_span(exporter: InMemorySpanExporter, outermost: str) -> dict[str, object]:
    spans = request_spans(exporter)
    assert len(spans) == 1, [(s.name, s.instrumentation_scope.name) for s in spans]  # type: ignore[union-attr]
    (span,) = spans
    scope = span.instrumentation_scope.name  # type: ignore[union-attr]
    assert scope == (CONTRIB_SCOPE if outermost == "contrib" else sc.SCOPE_NAME)
    return dict(span.attributes or {})


def _duration_points(reader: InMemoryMetricReader) -> list[object]:
    return metric_points(reader, sc.GEN_AI_CLIENT_OPERATION_DURATION)


def test_a_call_in_a_cell_has_one_span_one_metric_set_and_its_tokens_in_the_cell(
    both: str,
    base_url: str,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    with spark_otel.cell(
        "golden", "B#1", engine="qwen", tracer_provider=tracer_provider, meter_provider=meter_provider
    ) as state:
        client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=4)  # type: ignore[arg-type]
    attrs = _one_request_span(span_exporter, both)
    assert attrs[sc.CELL_UID] == state.uid  # the cell's attributes on whichever span was made
    assert attrs[sc.EVAL_NAME] == "golden"
    assert (state.requests, state.prompt_tokens, state.completion_tokens) == (1, 3, 4)
    assert len(_duration_points(metric_reader)) == 1
    [point] = _duration_points(metric_reader)
    assert point.count == 1  # type: ignore[attr-defined]


def test_a_stream_in_a_cell_has_one_span_and_its_tokens_in_the_cell(
    both: str,
    base_url: str,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    with spark_otel.cell(
        "golden", "B#2", tracer_provider=tracer_provider, meter_provider=meter_provider
    ) as state:
        stream = client.chat.completions.create(
            model=MODEL, messages=MESSAGES, max_tokens=5, stream=True, stream_options={"include_usage": True}
        )  # type: ignore[call-overload]
        chunks = sum(1 for _ in stream)
    assert chunks >= 5
    attrs = _one_request_span(span_exporter, both)
    assert attrs[sc.CELL_UID] == state.uid
    assert (state.requests, state.completion_tokens) == (1, 5)
    [point] = _duration_points(metric_reader)
    assert point.count == 1  # type: ignore[attr-defined]


def test_a_raw_response_call_has_one_span(
    both: str, base_url: str, span_exporter: InMemorySpanExporter, metric_reader: InMemoryMetricReader
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=MESSAGES, max_tokens=2)  # type: ignore[arg-type]
    assert raw.parse().usage.completion_tokens == 2  # type: ignore[union-attr]
    spans = request_spans(span_exporter)
    assert len(spans) == 1, [(s.name, s.instrumentation_scope.name) for s in spans]  # type: ignore[union-attr]
    [point] = _duration_points(metric_reader)
    assert point.count == 1  # type: ignore[attr-defined]


def test_text_completions_are_spark_otels_alone_beside_contrib(
    both: str, base_url: str, span_exporter: InMemorySpanExporter
) -> None:
    """contrib does not instrument the legacy completions API: spark-otel's span, either order."""
    openai.OpenAI(base_url=base_url, api_key="sk").completions.create(model=MODEL, prompt="a b", max_tokens=2)
    _one_request_span(span_exporter, "spark-otel")
