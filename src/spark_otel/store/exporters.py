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

from .. import _semconv as sc
from .._files import disk_full
from .._guard import warn_once
from ..model import Cell, LoadWindow, MetricSample, Request, ServerTiming, attributes_json
from ..records.span_codec import (
    cell_from_span,
    is_server_timing,
    request_from_span,
    server_timing_from_span,
    window_from_span,
)
from .embedded import Store

__all__ = ["StoreMetricExporter", "StoreSpanExporter"]

_logger = logging.getLogger(__name__)


def _write_failed(exc: Exception, what: str, store: Store) -> None:
    """A full disk is one warning naming the store (once per process: the next export finds it
    full too), never a traceback in the user's process; anything else is a bug, logged with it."""
    if disk_full(exc):
        warn_once(
            f"store full {store.path}",
            f"{store.path}: disk full: {what} (and any after them while it stays full) were not stored; "
            "everything stored before is kept",
        )
        return
    _logger.error("spark_otel: writing %s to %s failed", what, store.path, exc_info=exc)


class StoreSpanExporter(SpanExporter):
    """Writes cell, request and load-window spans into the store, and an engine's server spans
    (vLLM's ``llm_request``) as the split of the request they answered; other spans are ignored."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._shut = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._shut:
            return SpanExportResult.FAILURE
        cells: list[Cell] = []
        requests: list[Request] = []
        windows: list[LoadWindow] = []
        timings: list[ServerTiming] = []
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
                elif is_server_timing(span):
                    timings.append(server_timing_from_span(span))
            except Exception:
                _logger.warning("spark_otel: span %r could not be stored", span.name, exc_info=True)
        try:
            if cells:
                self._store.write_cells(cells)
            if requests:
                self._store.write_requests(requests)
            if windows:
                self._store.write_windows(windows)
            if timings:
                self._store.write_server_timings(timings)
        except Exception as exc:
            _write_failed(exc, f"{len(spans)} spans", self._store)
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        """The store outlives the exporter; its owner closes it. Nothing is written after this, as
        the exporter contract asks: after a fork the SDK's periodic reader ticks once more in the
        child even when it was shut down, into a store the parent had closed."""
        self._shut = True

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
        self._shut = False

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        if self._shut:
            return MetricExportResult.FAILURE
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
        except Exception as exc:
            _write_failed(exc, f"{len(samples)} metric samples", self._store)
            return MetricExportResult.FAILURE
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        """The store outlives the exporter; its owner closes it. Nothing is written after this, as
        the exporter contract asks: after a fork the SDK's periodic reader ticks once more in the
        child even when it was shut down, into a store the parent had closed."""
        self._shut = True


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
