"""Beside the contrib instrumentation (its span outermost), spark-otel still accounts the call in
its cell: a deadline helper's notes, the request's place in the cell's time budget, one finalize
however often the stream is closed, and a fault there reported once, by name."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import openai
import pytest
from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.support.engine_server import MODEL
from tests.support.finished_spans import cell_span, one_span

import spark_otel
from spark_otel import _semconv as sc
from spark_otel.cells import CellState
from spark_otel.instrumentation.request_notes import request_notes

MESSAGES = [{"role": "user", "content": "one two three"}]


@pytest.fixture
def contrib_outside(tracer_provider: TracerProvider, meter_provider: MeterProvider) -> Iterator[None]:
    """spark-otel instrumented first, contrib last: contrib's wrapper (and span) is outermost."""
    contrib = OpenAIInstrumentor()
    spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    contrib.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    try:
        yield
    finally:
        contrib.uninstrument()
        spark_otel.uninstrument()


@pytest.mark.usefixtures("contrib_outside")
def test_notes_budget_and_one_finalize_for_a_stream_whose_span_contrib_made(
    base_url: str,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    with (
        spark_otel.cell(
            "golden", "B#3", tracer_provider=tracer_provider, meter_provider=meter_provider
        ) as state,
        request_notes() as notes,
    ):
        notes.error_type = "deadline"
        notes.attributes["spark_otel.deadline.salvaged_findings"] = 2
        stream = client.chat.completions.create(
            model=MODEL, messages=MESSAGES, max_tokens=3, stream=True, stream_options={"include_usage": True}
        )  # type: ignore[call-overload]
        assert sum(1 for _ in stream) >= 3
        stream.close()  # after exhaustion: finalized already, must not wait or count twice
    request = one_span(span_exporter)
    assert request.instrumentation_scope.name == "opentelemetry.instrumentation.genai.openai"  # type: ignore[union-attr]
    assert request.attributes["spark_otel.deadline.salvaged_findings"] == 2  # type: ignore[index]
    assert (state.requests, state.failed_requests, state.completion_tokens) == (1, 1, 3)
    (stamps,) = state.request_stamps
    assert (stamps.first_ns, stamps.streaming) == (0, False)  # contrib saw the chunks: unsplit
    assert 0 < stamps.end_ns - stamps.start_ns < (request.end_time - request.start_time) + 10**6  # type: ignore[operator]
    a = cell_span(span_exporter).attributes
    assert (a[sc.CELL_BUDGET_FIRST_TOKEN_S], a[sc.CELL_BUDGET_DECODE_S]) == (0.0, 0.0)  # type: ignore[index]
    assert a[sc.CELL_BUDGET_UNSPLIT_S] == pytest.approx((stamps.end_ns - stamps.start_ns) / 1e9)  # type: ignore[index]


@pytest.mark.usefixtures("contrib_outside")
def test_a_fault_in_the_cells_accounting_beside_contrib_is_reported_by_name(
    base_url: str,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Injected: no real input makes the cell's accounting fail."""
    fault = RuntimeError("injected")

    def broken(self: CellState, **kwargs: object) -> None:
        raise fault

    monkeypatch.setattr(CellState, "add_request", broken)
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    with (
        caplog.at_level(logging.DEBUG, logger="spark_otel"),
        spark_otel.cell("golden", "B#4", tracer_provider=tracer_provider, meter_provider=meter_provider),
    ):
        out = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=2)  # type: ignore[arg-type]
    assert out.usage.completion_tokens == 2  # type: ignore[union-attr]
    reports = [r for r in caplog.records if r.getMessage().startswith("spark_otel: request finalize beside")]
    assert [r.getMessage().split(";")[0] for r in reports] == [
        "spark_otel: request finalize beside another instrumentation failed"
    ]
    assert reports[0].exc_info is not None
    assert reports[0].exc_info[1] is fault
