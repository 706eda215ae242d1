"""Figures that must agree, asserted equal: each quantity a request records both on its span and
as a metric point (duration, time to first chunk, tokens) is the same number in the same unit."""

from __future__ import annotations

import openai
import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.support.engine_server import MODEL
from tests.support.finished_spans import request_spans
from tests.support.metric_points import metric_points

from spark_otel import _semconv as sc

MESSAGES = [{"role": "user", "content": "count"}]


@pytest.mark.parametrize("streaming", [False, True], ids=["whole", "stream"])
def test_a_requests_span_and_its_metric_points_hold_the_same_figures(
    base_url: str,
    instrumented: None,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    streaming: bool,
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="none")
    if streaming:
        stream = client.chat.completions.create(
            model=MODEL, messages=MESSAGES, max_tokens=4, stream=True,  # type: ignore[arg-type]
            stream_options={"include_usage": True}, extra_body={"delay_s": 0.02},
        )  # fmt: skip
        list(stream)
    else:
        client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=4)  # type: ignore[arg-type]
    (span,) = request_spans(span_exporter)
    a = span.attributes or {}
    (duration,) = metric_points(metric_reader, sc.GEN_AI_CLIENT_OPERATION_DURATION)
    assert duration.count == 1
    assert duration.sum == (span.end_time - span.start_time) / 1e9  # type: ignore[operator]
    tokens = {
        p.attributes[sc.GEN_AI_TOKEN_TYPE]: p.sum
        for p in metric_points(metric_reader, sc.GEN_AI_CLIENT_TOKEN_USAGE)
    }
    assert tokens == {
        sc.TOKEN_TYPE_INPUT: a[sc.GEN_AI_USAGE_INPUT_TOKENS],
        sc.TOKEN_TYPE_OUTPUT: a[sc.GEN_AI_USAGE_OUTPUT_TOKENS],
    }
    first_chunk = metric_points(metric_reader, sc.GEN_AI_CLIENT_TIME_TO_FIRST_CHUNK)
    if streaming:
        (point,) = first_chunk
        assert point.sum == a[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK]
        assert 0 < point.sum < duration.sum
    else:
        assert first_chunk == []
        assert sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK not in a
