"""Nsight Systems SQLite exports: GPU metric series at their original times, and a per-capture summary.

The article's Nsight captures showed SM Issue at 3.1% while the busy gauge read 99.9%; this
package reads the same numbers from ``nsys export --type sqlite`` files, without running
``nsys`` and without root. Three storage layouts are recognised by their columns
(``PRAGMA table_info``), never by version numbers:

    generic   GENERIC_EVENTS rows whose ``data`` is JSON keyed by metric name (up to 2023.3)
    plain     GPU_METRICS(timestamp, typeId, metricId, value)                 (2023.4 - 2024)
    raw       GPU_METRICS(rawTimestamp, timestamp, typeId, metricId, value)   (2025 onwards)

Names come from TARGET_INFO_GPU_METRICS joined on both ``typeId`` and ``metricId`` (metric
ids repeat across GPUs); absolute time is TARGET_INFO_SESSION_START_TIME.utcEpochNs plus the
session-relative ``timestamp``; the GPU is ``typeId & 0xFF`` looked up in TARGET_INFO_GPU by
``pwGpuId``, then ``id``. A 10 s capture at 10 kHz holds about 1.9 million rows, so all the
work is one SQL scan that groups by (metric, time bucket, value): the per-bucket means are the
downsampled series, and the per-value counts give exact means and percentiles (GPU metric
values are small integers, so the groups stay few). No per-row Python object is made.

    capture   the result models (`NsightCapture`, `NsightSummary`, ...) and metric-name helpers
    problems  how a row left out is described: one line per table, the bad value quoted
    tables    opening an export and its metadata tables: layout, session start, GPUs, metric names
    rows      the grouped SQL scan of the samples per layout, and which rows fit
    reader    `read_capture`: one export scanned and folded into a capture
    outputs   a capture as store samples and as OTel ``MetricsData`` for OTLP
"""

from __future__ import annotations

from .capture import (
    MetricSummary,
    NsightCapture,
    NsightLayout,
    NsightSummary,
    SeriesPoint,
    canonical_metric,
    percentile_from_counts,
    split_metric_name,
)
from .outputs import SOURCE, metrics_data, point_attributes, samples_for_store, store_source
from .reader import DEFAULT_INTERVAL_MS, MAX_INTERVAL_MS, capture_uid, check_interval_ms, read_capture

__all__ = [
    "DEFAULT_INTERVAL_MS",
    "MAX_INTERVAL_MS",
    "SOURCE",
    "MetricSummary",
    "NsightCapture",
    "NsightLayout",
    "NsightSummary",
    "SeriesPoint",
    "canonical_metric",
    "capture_uid",
    "check_interval_ms",
    "metrics_data",
    "percentile_from_counts",
    "point_attributes",
    "read_capture",
    "samples_for_store",
    "split_metric_name",
    "store_source",
]
