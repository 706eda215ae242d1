"""One instrumented stream (openai, async openai or raw httpx2) into fresh providers, read back as
its span's attributes and each metric's points."""

from __future__ import annotations

import json
import math
from typing import Any

import httpx2
import openai
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.support.engine_server import MODEL
from tests.support.finished_spans import one_span
from tests.support.metric_points import CapturingExporter, points_in

import spark_otel
from spark_otel import _semconv as sc
from spark_otel.telemetry import build_providers

MESSAGES = [{"role": "user", "content": "count chunks"}]


USAGE = {"include_usage": True}


# Values that differ run to run (times), not by the switch.
_TIMING_ATTRIBUTES = {sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK}


GEN_AI_METRICS = (
    sc.GEN_AI_CLIENT_OPERATION_DURATION,
    sc.GEN_AI_CLIENT_TOKEN_USAGE,
    sc.GEN_AI_CLIENT_TIME_TO_FIRST_CHUNK,
    sc.GEN_AI_CLIENT_TIME_PER_OUTPUT_CHUNK,
)


class RunTelemetry:
    """Fresh providers for one instrumented run: the user's own SDK providers with an in-memory
    reader, or the providers spark-otel builds (whose reader takes the per-chunk histogram in bulk)."""

    def __init__(self, pipeline: str) -> None:
        self.spans = InMemorySpanExporter()
        processor = SimpleSpanProcessor(self.spans)
        if pipeline == "spark-otel":
            exporter = CapturingExporter()
            self.tracer_provider, self.meter_provider = build_providers([processor], [(exporter, math.inf)])
            self.read = lambda: self.meter_provider.force_flush() and exporter.last
        else:
            reader = InMemoryMetricReader()
            self.tracer_provider = TracerProvider()
            self.tracer_provider.add_span_processor(processor)
            self.meter_provider = MeterProvider(metric_readers=[reader])
            self.read = reader.get_metrics_data

    def snapshot(self) -> dict[str, Any]:
        """Span attributes and, per metric, each point's attributes and count (not timed values)."""
        span = one_span(self.spans)
        attrs = {k: v for k, v in (span.attributes or {}).items() if k not in _TIMING_ATTRIBUTES}
        data = self.read()
        points: dict[str, Any] = {}
        for name in GEN_AI_METRICS:
            found = points_in(data, name)
            points[name] = sorted((json.dumps(dict(p.attributes), sort_keys=True), p.count) for p in found)
        token_sums = sorted(p.sum for p in points_in(data, sc.GEN_AI_CLIENT_TOKEN_USAGE))
        return {"name": span.name, "kind": span.kind, "span": attrs, "points": points, "tokens": token_sums}

    def close(self) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


def _openai_stream(base_url: str) -> int:
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    stream = client.chat.completions.create(  # type: ignore[call-overload]
        model=MODEL,
        messages=MESSAGES,
        max_tokens=6,
        stream=True,
        stream_options=USAGE,
    )
    return sum(1 for _ in stream)


async def _async_openai_stream(base_url: str) -> int:
    client = openai.AsyncOpenAI(base_url=base_url, api_key="sk")
    stream = await client.completions.create(  # type: ignore[call-overload]
        model=MODEL,
        prompt="a b",
        max_tokens=6,
        stream=True,
        stream_options=USAGE,
    )
    return len([chunk async for chunk in stream])


def _raw_stream(base_url: str) -> int:
    body = {"model": MODEL, "messages": MESSAGES, "max_tokens": 6, "stream": True, "stream_options": USAGE}
    with httpx2.Client() as client, client.stream("POST", f"{base_url}/chat/completions", json=body) as r:
        return sum(1 for line in r.iter_lines() if line.startswith("data:") and "[DONE]" not in line)


def instrumented_run(
    base_url: str, path: str, chunk_metrics: bool | None, pipeline: str = "user-sdk"
) -> tuple[dict[str, Any], int]:
    telemetry = RunTelemetry(pipeline)
    spark_otel.instrument(
        tracer_provider=telemetry.tracer_provider,
        meter_provider=telemetry.meter_provider,
        chunk_metrics=chunk_metrics,
    )
    try:
        if path == "async-openai":
            import asyncio

            chunks = asyncio.run(_async_openai_stream(base_url))
        else:
            chunks = (_openai_stream if path == "openai" else _raw_stream)(base_url)
    finally:
        spark_otel.uninstrument()
    try:
        return telemetry.snapshot(), chunks
    finally:
        telemetry.close()
