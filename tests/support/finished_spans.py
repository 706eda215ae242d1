"""Finished spans read back from an in-memory exporter: the GenAI request spans, the one request
span, the one cell span."""

from __future__ import annotations

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from spark_otel import _semconv as sc


def request_spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    """Finished GenAI request spans (cell spans excluded)."""
    return [s for s in exporter.get_finished_spans() if "gen_ai.operation.name" in (s.attributes or {})]


def one_span(exporter: InMemorySpanExporter) -> ReadableSpan:
    found = request_spans(exporter)
    assert len(found) == 1, [s.name for s in found]
    return found[0]


def cell_span(exporter: InMemorySpanExporter) -> ReadableSpan:
    """The one finished cell span."""
    (found,) = [
        s for s in exporter.get_finished_spans() if (s.attributes or {}).get(sc.SPAN_KIND_ATTR) == "cell"
    ]
    return found
