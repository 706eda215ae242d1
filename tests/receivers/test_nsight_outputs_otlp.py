"""`metrics_data`: a capture's series as the OTLP export the CLI sends, every field of it.

The CLI test checks that points arrive at a sink; this pins what they say: the one gauge's name,
description and empty unit, the scope's name and schema URL at each level, each point's
attributes (the GPU named), and start time equal to time, the bucket's start.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk.metrics.export import Gauge
from opentelemetry.sdk.resources import Resource
from tests.support.nsight import SESSION_START_UNIX_NS, build_capture

from spark_otel import _semconv as sc
from spark_otel.receivers.nsight import metrics_data, read_capture

GPU_UUID = "fa2a1d7d-0000-4000-8000-0000000000b1"
SM_ISSUE_INDEX = 2  # "SM Issue [Throughput %]" in GB10_METRICS


def test_the_series_become_one_gauge_with_a_point_per_gpu_metric_and_bucket(tmp_path: Path) -> None:
    path = tmp_path / "three-samples.sqlite"
    _, values = build_capture(path, layout="raw", seconds=0.003, hz=1000)  # 1, 2 and 3 ms: one bucket
    data = metrics_data(read_capture(path, interval_ms=100))

    [resource_metrics] = data.resource_metrics
    assert resource_metrics.schema_url == sc.SCHEMA_URL
    assert resource_metrics.resource.attributes == Resource.create({}).attributes
    [scope_metrics] = resource_metrics.scope_metrics
    assert scope_metrics.schema_url == sc.SCHEMA_URL
    assert (scope_metrics.scope.name, scope_metrics.scope.schema_url) == (
        "spark_otel.receivers.nsight",
        sc.SCHEMA_URL,
    )
    [metric] = scope_metrics.metrics
    assert (metric.name, metric.description, metric.unit) == (
        sc.NSIGHT_METRIC,
        "Nsight Systems GPU metric, mean over each downsampling interval",
        "",
    )
    assert isinstance(metric.data, Gauge)
    points = metric.data.data_points
    assert len(points) == 19
    [issue] = [p for p in points if p.attributes[sc.NSIGHT_METRIC_NAME] == "SM Issue"]
    assert dict(issue.attributes) == {
        sc.NSIGHT_METRIC_NAME: "SM Issue",
        sc.NSIGHT_METRIC_UNIT: "%",
        sc.NSIGHT_METRIC_FULL_NAME: "SM Issue [Throughput %]",
        sc.NSIGHT_CAPTURE: "three-samples.sqlite",
        sc.GPU_ID: GPU_UUID,
        sc.GPU_NAME: "NVIDIA GB10",
    }
    assert issue.start_time_unix_nano == issue.time_unix_nano == SESSION_START_UNIX_NS  # bucket 0's start
    assert issue.value == pytest.approx(values[SM_ISSUE_INDEX].mean())


def test_a_resource_given_is_the_one_sent(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    build_capture(path, layout="plain", seconds=0.003, hz=1000)
    resource = Resource({"service.name": "box-7"})
    [resource_metrics] = metrics_data(read_capture(path), resource).resource_metrics
    assert resource_metrics.resource is resource
