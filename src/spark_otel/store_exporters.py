"""OpenTelemetry exporters that write into the embedded store.

They run on the SDK's batch worker thread, so the eval's hot path only appends a finished span
to a queue. A cell span becomes a `Cell`, a GenAI request span a `Request`, a load-window span
a `LoadWindow`; spark-otel's own instrument metrics become `MetricSample`s.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.metrics.export import (
    Gauge,
    Histogram,
    MetricExporter,
    MetricExportResult,
    MetricsData,
    Sum,
)
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from . import _semconv as sc
from .model import Cell, CellStatus, LoadWindow, MetricSample, Request, attributes_json
from .store import Store

__all__ = ["StoreMetricExporter", "StoreSpanExporter", "cell_from_span", "request_from_span"]

_logger = logging.getLogger(__name__)


def _hex_span_id(span: ReadableSpan) -> str:
    return format(span.context.span_id, "016x") if span.context else ""


def _hex_trace_id(span: ReadableSpan) -> str | None:
    return format(span.context.trace_id, "032x") if span.context else None


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def cell_from_span(span: ReadableSpan) -> Cell:
    a: dict[str, Any] = dict(span.attributes or {})
    status = a.get(sc.CELL_STATUS, CellStatus.OK.value)
    return Cell(
        uid=_hex_span_id(span),
        eval_name=str(a.get(sc.EVAL_NAME, "")),
        cell_id=str(a.get(sc.CELL_ID, "")),
        engine=str(a[sc.ENGINE]) if sc.ENGINE in a else None,
        start_unix_ns=span.start_time or 0,
        end_unix_ns=span.end_time or span.start_time or 0,
        prompt_tokens=_int(a.get(sc.CELL_PROMPT_TOKENS)),
        completion_tokens=_int(a.get(sc.CELL_COMPLETION_TOKENS)),
        status=CellStatus(status),
        deadline_s=float(a[sc.CELL_DEADLINE_S]) if sc.CELL_DEADLINE_S in a else None,
        deadline_hit=bool(a.get(sc.CELL_DEADLINE_HIT, False)),
        workers=_int(a.get(sc.CELL_WORKERS)),
        salvaged_findings=_int(a.get(sc.CELL_SALVAGED_FINDINGS)) or 0,
        degraded=bool(a.get(sc.CELL_DEGRADED, False)),
        source=str(a.get(sc.CELL_SOURCE, "live")),
        trace_id=_hex_trace_id(span),
        attributes=attributes_json({k: v for k, v in a.items() if k not in sc.CELL_ATTRIBUTE_KEYS}),
    )


def request_from_span(span: ReadableSpan) -> Request:
    a: dict[str, Any] = dict(span.attributes or {})
    reasons = a.get(sc.GEN_AI_RESPONSE_FINISH_REASONS) or ()
    ttfc = a.get(sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK)
    return Request(
        uid=_hex_span_id(span),
        trace_id=_hex_trace_id(span),
        cell_uid=str(a[sc.CELL_UID]) if sc.CELL_UID in a else None,
        eval_name=str(a[sc.EVAL_NAME]) if sc.EVAL_NAME in a else None,
        engine=str(a[sc.ENGINE]) if sc.ENGINE in a else None,
        operation=str(a.get(sc.GEN_AI_OPERATION_NAME, "")),
        request_model=str(a[sc.GEN_AI_REQUEST_MODEL]) if sc.GEN_AI_REQUEST_MODEL in a else None,
        response_model=str(a[sc.GEN_AI_RESPONSE_MODEL]) if sc.GEN_AI_RESPONSE_MODEL in a else None,
        server_address=str(a[sc.SERVER_ADDRESS]) if sc.SERVER_ADDRESS in a else None,
        server_port=_int(a.get(sc.SERVER_PORT)),
        start_unix_ns=span.start_time or 0,
        end_unix_ns=span.end_time or span.start_time or 0,
        streaming=bool(a.get(sc.GEN_AI_REQUEST_STREAM, False)),
        time_to_first_chunk_s=float(ttfc) if isinstance(ttfc, int | float) else None,
        input_tokens=_int(a.get(sc.GEN_AI_USAGE_INPUT_TOKENS)),
        output_tokens=_int(a.get(sc.GEN_AI_USAGE_OUTPUT_TOKENS)),
        finish_reasons=[str(r) for r in reasons],
        error_type=str(a[sc.ERROR_TYPE]) if sc.ERROR_TYPE in a else None,
    )


def window_from_span(span: ReadableSpan) -> LoadWindow:
    a: dict[str, Any] = dict(span.attributes or {})
    return LoadWindow(
        uid=_hex_span_id(span),
        name=str(a.get(sc.LOAD_WINDOW_NAME, span.name)),
        kind=str(a.get(sc.LOAD_WINDOW_KIND, "load")),
        engine=str(a[sc.ENGINE]) if sc.ENGINE in a else None,
        start_unix_ns=span.start_time or 0,
        end_unix_ns=span.end_time or span.start_time or 0,
        streams=_int(a.get(sc.LOAD_WINDOW_STREAMS)),
        attributes=attributes_json({k: v for k, v in a.items() if not k.startswith("spark_otel.")}),
    )


class StoreSpanExporter(SpanExporter):
    """Writes cell, request and load-window spans into the store; other spans are ignored."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        cells: list[Cell] = []
        requests: list[Request] = []
        windows: list[LoadWindow] = []
        for span in spans:
            attrs = span.attributes or {}
            try:
                kind = attrs.get(sc.SPAN_KIND_ATTR)
                if kind == sc.SPAN_KIND_CELL:
                    cells.append(cell_from_span(span))
                elif kind == sc.SPAN_KIND_LOAD_WINDOW:
                    windows.append(window_from_span(span))
                elif sc.GEN_AI_OPERATION_NAME in attrs:
                    requests.append(request_from_span(span))
            except Exception:
                _logger.warning("spark_otel: span %r could not be stored", span.name, exc_info=True)
        try:
            if cells:
                self._store.write_cells(cells)
            if requests:
                self._store.write_requests(requests)
            if windows:
                self._store.write_windows(windows)
        except Exception:
            _logger.exception("spark_otel: writing %d spans to %s failed", len(spans), self._store.path)
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        """The store outlives the exporter; its owner closes it."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class StoreMetricExporter(MetricExporter):
    """Writes the points of spark-otel's own instruments (scope ``spark_otel``) as samples.

    Receivers write their samples to the store themselves, with the original timestamps, so
    their scopes are skipped here rather than stored twice.
    """

    def __init__(self, store: Store, scope_name: str = sc.SCOPE_NAME) -> None:
        super().__init__()
        self._store = store
        self._scope_name = scope_name

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        samples: list[MetricSample] = []
        for resource_metrics in metrics_data.resource_metrics:
            for scope_metrics in resource_metrics.scope_metrics:
                if scope_metrics.scope.name != self._scope_name:
                    continue
                for metric in scope_metrics.metrics:
                    samples.extend(_samples_of(metric.name, metric.unit or "", metric.data))
        try:
            if samples:
                self._store.write_samples(samples)
        except Exception:
            _logger.exception(
                "spark_otel: writing %d metric samples to %s failed", len(samples), self._store.path
            )
            return MetricExportResult.FAILURE
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        """The store outlives the exporter; its owner closes it."""


def _samples_of(name: str, unit: str, data: Any) -> list[MetricSample]:
    out: list[MetricSample] = []
    if isinstance(data, Sum | Gauge):
        for point in data.data_points:
            out.append(
                MetricSample(
                    name=name,
                    unix_ns=point.time_unix_nano,
                    value=float(point.value),
                    unit=unit,
                    attributes=attributes_json(dict(point.attributes or {})),
                    source="sdk",
                )
            )
    elif isinstance(data, Histogram):
        for hpoint in data.data_points:
            attrs = attributes_json(dict(hpoint.attributes or {}))
            out.append(
                MetricSample(
                    name=f"{name}.count",
                    unix_ns=hpoint.time_unix_nano,
                    value=float(hpoint.count),
                    unit="1",
                    attributes=attrs,
                    source="sdk",
                )
            )
            out.append(
                MetricSample(
                    name=f"{name}.sum",
                    unix_ns=hpoint.time_unix_nano,
                    value=float(hpoint.sum),
                    unit=unit,
                    attributes=attrs,
                    source="sdk",
                )
            )
    return out
