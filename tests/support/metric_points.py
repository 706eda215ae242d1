"""OpenTelemetry metric points read back: from one collection or an in-memory reader, and a push
exporter that keeps every export."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    InMemoryMetricReader,
    MetricExporter,
    MetricExportResult,
    MetricsData,
)
from opentelemetry.sdk.metrics.view import Aggregation


def points_in(data: MetricsData | None, name: str) -> list[Any]:
    """Every data point of metric ``name`` in one collection."""
    if data is None:
        return []
    return [
        point
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
        if metric.name == name
        for point in metric.data.data_points
    ]


def metric_points(reader: InMemoryMetricReader, name: str) -> list[Any]:
    """Every data point of metric ``name`` the reader holds now."""
    return points_in(reader.get_metrics_data(), name)


class CapturingExporter(MetricExporter):
    """A push exporter that keeps every export: the readers spark-otel builds take an exporter,
    not a pull reader."""

    def __init__(
        self,
        preferred_temporality: dict[type, AggregationTemporality] | None = None,
        preferred_aggregation: dict[type, Aggregation] | None = None,
    ) -> None:
        super().__init__(
            preferred_temporality=preferred_temporality, preferred_aggregation=preferred_aggregation
        )
        self.exports: list[MetricsData] = []

    @property
    def last(self) -> MetricsData | None:
        return self.exports[-1] if self.exports else None

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        self.exports.append(metrics_data)
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        pass
