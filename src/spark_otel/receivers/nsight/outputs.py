"""A capture's series as the project's data: store samples, and OTel ``MetricsData`` for OTLP."""

from __future__ import annotations

from typing import Any

from ... import _semconv as sc
from ...model import AttributeValue, MetricSample
from .capture import NsightCapture, NsightSummary, split_metric_name

__all__ = ["SOURCE", "metrics_data", "point_attributes", "samples_for_store", "store_source"]

SOURCE = "nsight"


def point_attributes(capture: NsightCapture, gpu_id: str, metric: str) -> dict[str, AttributeValue]:
    short, unit = split_metric_name(metric)
    attrs: dict[str, AttributeValue] = {
        sc.NSIGHT_METRIC_NAME: short,
        sc.NSIGHT_METRIC_UNIT: unit,
        sc.NSIGHT_METRIC_FULL_NAME: metric,
        sc.NSIGHT_CAPTURE: capture.summary.capture,
        sc.GPU_ID: gpu_id,
    }
    name = capture.gpu_names.get(gpu_id)
    if name:
        attrs[sc.GPU_NAME] = name
    return attrs


def store_source(summary: NsightSummary) -> str:
    """The ``source`` of a capture's stored samples: names the capture, so a re-ingest can find them."""
    return f"{SOURCE}:{summary.uid}"


def samples_for_store(capture: NsightCapture) -> list[MetricSample]:
    """The downsampled series as metric samples at their original times (pure)."""
    source = store_source(capture.summary)
    out: list[MetricSample] = []
    for (gpu_id, metric), points in capture.series.items():
        attrs = point_attributes(capture, gpu_id, metric)
        unit = str(attrs[sc.NSIGHT_METRIC_UNIT])
        out.extend(
            MetricSample(
                name=sc.NSIGHT_METRIC,
                unix_ns=p.unix_ns,
                value=p.value,
                unit=unit,
                attributes=attrs,
                source=source,
            )
            for p in points
        )
    return out


def metrics_data(capture: NsightCapture, resource: Any | None = None) -> Any:
    """The series as OTel ``MetricsData`` with their historical timestamps, for an OTLP exporter.

    The metrics API cannot backdate a measurement, so the SDK's export types are built
    directly: one gauge, one data point per (GPU, metric, bucket), the metric named by attributes.
    """
    from opentelemetry.sdk.metrics.export import (
        Gauge,
        Metric,
        MetricsData,
        NumberDataPoint,
        ResourceMetrics,
        ScopeMetrics,
    )
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    points: list[NumberDataPoint] = []
    for (gpu_id, full_name), series in capture.series.items():
        attrs = point_attributes(capture, gpu_id, full_name)
        points.extend(
            NumberDataPoint(
                attributes=attrs, start_time_unix_nano=p.unix_ns, time_unix_nano=p.unix_ns, value=p.value
            )
            for p in series
        )
    metric = Metric(
        name=sc.NSIGHT_METRIC,
        description="Nsight Systems GPU metric, mean over each downsampling interval",
        unit="",
        data=Gauge(data_points=points),
    )
    scope = InstrumentationScope("spark_otel.receivers.nsight", schema_url=sc.SCHEMA_URL)
    return MetricsData(
        resource_metrics=[
            ResourceMetrics(
                resource=resource or Resource.create({}),
                scope_metrics=[ScopeMetrics(scope=scope, metrics=[metric], schema_url=sc.SCHEMA_URL)],
                schema_url=sc.SCHEMA_URL,
            )
        ]
    )
