"""Small hand-made OTLP/JSON export requests, as the collector's file exporter writes them, for
the OTLP JSON reader's tests."""

from __future__ import annotations

from typing import Any

from spark_otel import _semconv as sc

TRACE_ID = "0123456789abcdef0123456789abcdef"
SPAN_ID = "0123456789abcdef"
START = "1700000000000000000"  # 2023-11-14
END = "1700000001500000000"
DROP = object()
SPAN = "resourceSpans[0].scopeSpans[0].spans[0]"


def span(name: str = "s", attrs: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    """One span as the collector's file exporter writes it: ``attrs`` its attributes (AnyValue
    objects by key); ``fields`` replace its own (DROP removes one)."""
    out: dict[str, Any] = {
        "traceId": TRACE_ID,
        "spanId": SPAN_ID,
        "name": name,
        "startTimeUnixNano": START,
        "endTimeUnixNano": END,
        "attributes": [{"key": k, "value": v} for k, v in (attrs or {}).items()],
    }
    out.update(fields)
    return {k: v for k, v in out.items() if v is not DROP}


def export(*spans: Any) -> dict[str, Any]:
    return {"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]}


# The attributes (AnyValue objects by key) that make a span each kind of record.
CELL = {
    sc.SPAN_KIND_ATTR: {"stringValue": sc.SPAN_KIND_CELL},
    sc.EVAL_NAME: {"stringValue": "golden-review"},
    sc.CELL_ID: {"stringValue": "B#265"},
}
REQUEST = {sc.GEN_AI_OPERATION_NAME: {"stringValue": sc.OPERATION_TEXT_COMPLETION}}
WINDOW = {sc.SPAN_KIND_ATTR: {"stringValue": sc.SPAN_KIND_LOAD_WINDOW}}
SERVER = {sc.VLLM_LATENCY_E2E: {"doubleValue": 2.0}}  # with a parent: the engine's server span
