"""A live cell's time budget: the real openai client over real HTTP, a stream, the runner's own
work and a call that is not streamed, each landing in its phase, on the span and as metrics."""

from __future__ import annotations

import time

import openai
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.support.engine_server import MODEL
from tests.support.finished_spans import request_spans
from tests.support.metric_points import metric_points

from spark_otel import _semconv as sc
from spark_otel import cell

NS = 1e9


def test_a_cells_budget_splits_its_elapsed_time_by_phase_and_adds_up(
    base_url: str,
    instrumented: None,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="none")
    messages = [{"role": "user", "content": "count to five"}]
    with cell("budget", "c1", engine="qwen", tracer_provider=tracer_provider, meter_provider=meter_provider):
        stream = client.chat.completions.create(
            model=MODEL,
            messages=messages,
            max_tokens=5,
            stream=True,
            extra_body={"delay_s": 0.05},  # type: ignore[arg-type]
        )
        assert len([c for c in stream if c.choices and c.choices[0].delta.content]) == 5
        time.sleep(0.25)  # the runner's own work
        client.chat.completions.create(model=MODEL, messages=messages, max_tokens=3)  # type: ignore[arg-type]
    streamed, whole = sorted(request_spans(span_exporter), key=lambda s: s.start_time or 0)
    (cell_span,) = [s for s in span_exporter.get_finished_spans() if s.name == "cell budget"]
    a = cell_span.attributes or {}
    first_token, decode = a[sc.CELL_BUDGET_FIRST_TOKEN_S], a[sc.CELL_BUDGET_DECODE_S]
    unsplit, other = a[sc.CELL_BUDGET_UNSPLIT_S], a[sc.CELL_BUDGET_OTHER_S]
    assert first_token + decode + unsplit + other == pytest.approx(a[sc.CELL_ELAPSED_S], abs=1e-9)  # type: ignore[operator]
    # The same stamps as the request span's time to first chunk; the rest of each span in its phase.
    ttfc = (streamed.attributes or {})[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK]
    assert first_token == pytest.approx(ttfc, abs=1e-9)
    assert decode == pytest.approx((streamed.end_time - streamed.start_time) / NS - ttfc, abs=0.005)  # type: ignore[operator]
    assert decode >= 0.2  # type: ignore[operator]  # four gaps of 50 ms between five chunks
    assert unsplit == pytest.approx((whole.end_time - whole.start_time) / NS, abs=0.005)  # type: ignore[operator]
    assert 0.25 <= other < 0.25 + 0.1  # type: ignore[operator]
    by_phase = {
        p.attributes[sc.CELL_PHASE]: p.sum for p in metric_points(metric_reader, sc.CELL_PHASE_DURATION)
    }
    assert by_phase == {"first_token": first_token, "decode": decode, "unsplit": unsplit, "other": other}
