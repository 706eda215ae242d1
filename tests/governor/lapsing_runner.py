"""A governed runner for the stopped-runner test: one cell on engine "q" held for a while under
a short lease, then its span's attributes and its lease-lapse metric points as one JSON line."""

from __future__ import annotations

import json
import sys
import time

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import spark_otel
from spark_otel import _semconv as sc
from spark_otel.governor import govern
from spark_otel.governor import state as governor_state


def main() -> None:
    rules, state, name, hold_s, lease_s = (
        sys.argv[1],
        sys.argv[2],
        sys.argv[3],
        float(sys.argv[4]),
        float(sys.argv[5]),
    )
    governor_state.LEASE_S = lease_s  # a short lease, so the test stops the runner past it quickly
    governor_state._RENEW_S = lease_s / 4
    govern(rules, state=state)
    spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
    tp, mp = TracerProvider(), MeterProvider(metric_readers=[reader])
    tp.add_span_processor(SimpleSpanProcessor(spans))
    with spark_otel.cell(name, f"{name}-0", engine="q", tracer_provider=tp, meter_provider=mp):
        print(json.dumps({"event": "admitted", "t": time.time()}), flush=True)
        time.sleep(hold_s)
        end = time.time()
    [span] = spans.get_finished_spans()
    lapses = [
        {"value": point.value, "attributes": dict(point.attributes or {})}
        for rm in reader.get_metrics_data().resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
        if metric.name == sc.GOVERNOR_LEASE_LAPSES
        for point in metric.data.data_points
    ]
    print(
        json.dumps({"event": "done", "end": end, "span": dict(span.attributes or {}), "lapses": lapses}),
        flush=True,
    )


if __name__ == "__main__":
    main()
