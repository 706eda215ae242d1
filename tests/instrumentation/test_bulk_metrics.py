"""The per-call histograms a provider spark-otel builds takes in bulk are the SDK's own points:
the same attribute sets, counts and token sums as on the user's SDK providers, and the same
figures as the request's span."""

from __future__ import annotations

import pytest
from tests.support.chunk_runs import GEN_AI_METRICS, RunTelemetry, instrumented_run
from tests.support.finished_spans import one_span
from tests.support.metric_points import points_in

import spark_otel
from spark_otel import _semconv as sc


@pytest.mark.parametrize("path", ["openai", "async-openai", "raw-httpx2"])
def test_bulk_and_sdk_pipelines_give_the_same_points(base_url: str, path: str) -> None:
    bulk, chunks = instrumented_run(base_url, path, chunk_metrics=None, pipeline="spark-otel")
    sdk, chunks_sdk = instrumented_run(base_url, path, chunk_metrics=None, pipeline="user-sdk")
    assert chunks == chunks_sdk
    assert bulk == sdk  # span attributes, every metric's points (attributes, counts), token sums
    assert all(bulk["points"][name] for name in GEN_AI_METRICS)


def test_a_request_s_figures_are_the_same_on_its_span_and_in_its_metrics(base_url: str) -> None:
    import openai

    telemetry = RunTelemetry("spark-otel")
    spark_otel.instrument(tracer_provider=telemetry.tracer_provider, meter_provider=telemetry.meter_provider)
    try:
        client = openai.OpenAI(base_url=base_url, api_key="sk")
        stream = client.chat.completions.create(  # type: ignore[call-overload]
            model="test-model-7b",
            messages=[{"role": "user", "content": "a b c"}],
            max_tokens=5,
            stream=True,
            stream_options={"include_usage": True},
        )
        list(stream)
    finally:
        spark_otel.uninstrument()
    data = telemetry.read()
    span = one_span(telemetry.spans)
    attrs = span.attributes or {}
    [ttfc] = points_in(data, sc.GEN_AI_CLIENT_TIME_TO_FIRST_CHUNK)
    assert ttfc.sum == attrs[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK]  # seconds, both
    tokens = {
        p.attributes[sc.GEN_AI_TOKEN_TYPE]: p.sum for p in points_in(data, sc.GEN_AI_CLIENT_TOKEN_USAGE)
    }
    assert tokens == {
        "input": attrs[sc.GEN_AI_USAGE_INPUT_TOKENS],
        "output": attrs[sc.GEN_AI_USAGE_OUTPUT_TOKENS],
    }
    [duration] = points_in(data, sc.GEN_AI_CLIENT_OPERATION_DURATION)
    span_s = (span.end_time - span.start_time) / 1e9  # type: ignore[operator]
    assert duration.sum == pytest.approx(span_s, abs=2e-3)  # one clock, read twice per edge
    # Each point's exemplar is the request's own span.
    ids = (span.context.span_id, span.context.trace_id)  # type: ignore[union-attr]
    assert [(e.span_id, e.trace_id) for e in duration.exemplars] == [ids]
    telemetry.close()
