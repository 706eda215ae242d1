"""Nsight Systems SQLite exports: GPU metric series at their original times, and a per-capture summary.

The article's Nsight captures showed SM Issue at 3.1% while the busy gauge read 99.9%; this
module reads the same numbers from ``nsys export --type sqlite`` files, without running
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
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
import sqlite3
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from .. import _semconv as sc
from .._clock import NS_PER_S
from .._exceptions import ConfigError, InputError, NoGpuMetricsError
from ..model import AttributeValue, MetricSample

__all__ = [
    "DEFAULT_INTERVAL_MS",
    "MetricSummary",
    "NsightCapture",
    "NsightLayout",
    "NsightSummary",
    "percentile_from_counts",
    "read_capture",
    "samples_for_store",
    "store_source",
]

_logger = logging.getLogger(__name__)
DEFAULT_INTERVAL_MS = 100.0
SOURCE = "nsight"
_NS_PER_MS = 1_000_000
_CHUNK_ROWS = 4096
_KEY_SHIFT = 1 << 40  # (metric id, bucket) packed as metricId * 2**40 + bucket + 2**39
_BUCKET_OFFSET = 1 << 39
_MAX_METRIC_ID = 1 << 22

# Names that changed between Nsight releases, mapped to the current spelling.
_ALIASES = {
    "SM Active": "SMs Active",
    "Compute Warps In Flight": "Compute Warps in Flight",
    "Async Compute In Flight": "Async Compute in Flight",
    "Sync Compute In Flight": "Sync Compute in Flight",
}
_UNITS = {
    "Throughput %": "%",
    "MHz": "MHz",
    "Avg Warps per Cycle": "{warp}",
    "Avg": "{warp}",
    "Requests": "{request}",
    "Workloads": "{workload}",
    "Cycles Active": "{cycle}",
}
# The compute metrics the article's Appendix B reports, listed first in summaries.
_PREFERRED = ("GR Active", "SMs Active", "SM Issue", "Tensor Active", "Compute Warps in Flight")
_NAME_RE = re.compile(r"^(?P<name>.*?)\s*\[(?P<unit>[^\]]*)\]\s*$")


class NsightLayout(StrEnum):
    GENERIC = "generic"
    PLAIN = "plain"
    RAW = "raw"


class MetricSummary(BaseModel):
    """One metric on one GPU over a whole capture (Appendix B's columns, plus spread)."""

    model_config = ConfigDict(frozen=True)

    metric: str
    name: str
    unit: str
    gpu_id: str
    gpu_name: str | None
    samples: int
    mean: float
    p50: float
    p95: float
    min: float
    max: float
    scaled_from_hz: bool = False


class NsightSummary(BaseModel):
    """A capture's identity and its per-metric summary; stored as an ``nsight_summary`` document."""

    model_config = ConfigDict(frozen=True)

    capture: str
    path: str
    uid: str
    layout: NsightLayout
    product_version: str | None
    schema_version: str | None
    session_start_unix_ns: int
    start_unix_ns: int
    end_unix_ns: int
    duration_s: float
    interval_ms: float
    metrics: list[MetricSummary]

    def metric(self, name: str, gpu_id: str | None = None) -> MetricSummary:
        """The summary of ``name`` (short "SM Issue" or full "SM Issue [Throughput %]")."""
        for m in self.metrics:
            if name in (m.name, m.metric) and (gpu_id is None or m.gpu_id == gpu_id):
                return m
        raise KeyError(name)


@dataclass(frozen=True)
class SeriesPoint:
    unix_ns: int
    value: float
    count: int


@dataclass
class NsightCapture:
    """Everything read from one export: the summary and each metric's downsampled series."""

    summary: NsightSummary
    series: dict[tuple[str, str], list[SeriesPoint]] = field(default_factory=dict)
    gpu_names: dict[str, str | None] = field(default_factory=dict)


# -- pure helpers ------------------------------------------------------------------------------------
def split_metric_name(metric: str) -> tuple[str, str]:
    """``"SMs Active [Throughput %]"`` -> ``("SMs Active", "%")``; aliases normalised."""
    match = _NAME_RE.match(metric)
    name, bracket = (match["name"], match["unit"]) if match else (metric.strip(), "")
    return _ALIASES.get(name, name), _UNITS.get(bracket, bracket)


def canonical_metric(metric: str) -> str:
    """The full name with old spellings replaced (``SM Active [Throughput %]`` -> ``SMs Active [...]``)."""
    match = _NAME_RE.match(metric)
    if not match:
        return _ALIASES.get(metric.strip(), metric.strip())
    return f"{_ALIASES.get(match['name'], match['name'])} [{match['unit']}]"


def percentile_from_counts(values: Sequence[float], counts: Sequence[int], q: float) -> float:
    """The q-th percentile (0..100) of a multiset given as sorted distinct values and their counts.

    Uses linear interpolation between closest ranks, exactly as ``numpy.percentile``'s default.
    """
    total = sum(counts)
    if total == 0:
        return math.nan
    position = (q / 100.0) * (total - 1)
    lower_rank = math.floor(position)
    upper_rank = min(lower_rank + 1, total - 1)
    frac = position - lower_rank
    lower = upper = None
    seen = 0
    for value, count in zip(values, counts, strict=True):
        seen += count
        if lower is None and seen > lower_rank:
            lower = value
        if seen > upper_rank:
            upper = value
            break
    if lower is None or upper is None:  # counts do not add up to their total: unreachable
        raise ValueError("percentile rank outside the counts")
    return lower + (upper - lower) * frac


# -- reading -----------------------------------------------------------------------------------------
def _connect(path: Path) -> tuple[sqlite3.Connection, set[str]]:
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
        conn.execute("PRAGMA temp_store=MEMORY")
        conn.execute("PRAGMA cache_size=-65536")
        conn.execute("PRAGMA mmap_size=268435456")
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError as exc:
        raise InputError(f"{path}: not an Nsight Systems SQLite export ({exc})") from exc
    if "TARGET_INFO_SESSION_START_TIME" not in tables and "META_DATA_EXPORT" not in tables:
        conn.close()
        raise InputError(
            f"{path}: an SQLite file but not an Nsight Systems export (no TARGET_INFO_SESSION_START_TIME "
            "or META_DATA_EXPORT table); export one with `nsys export --type sqlite REPORT.nsys-rep`"
        )
    return conn, tables


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


def _layout(conn: sqlite3.Connection, path: Path, tables: set[str], versions: str) -> NsightLayout:
    if "GPU_METRICS" in tables:
        columns = _columns(conn, "GPU_METRICS")
        missing = {"timestamp", "typeId", "metricId", "value"} - columns
        if missing:
            raise InputError(f"{path}: GPU_METRICS lacks column(s) {', '.join(sorted(missing))}")
        if "TARGET_INFO_GPU_METRICS" not in tables:
            raise InputError(
                f"{path}: GPU_METRICS without TARGET_INFO_GPU_METRICS; the metrics cannot be named"
            )
        return NsightLayout.RAW if "rawTimestamp" in columns else NsightLayout.PLAIN
    if "GENERIC_EVENTS" in tables and {"timestamp", "typeId", "data"} <= _columns(conn, "GENERIC_EVENTS"):
        return NsightLayout.GENERIC
    raise NoGpuMetricsError(
        f"{path}: this Nsight Systems export{versions} holds no GPU metrics (no GPU_METRICS table): "
        "it was captured without them. Capture with `nsys profile --gpu-metrics-devices=0 "
        "--gpu-metrics-frequency=10000 ...` (needs profiling permission on the GPU) and export again"
    )


def _meta(conn: sqlite3.Connection, tables: set[str]) -> dict[str, str]:
    if "META_DATA_EXPORT" not in tables:
        return {}
    return {name: value for name, value in conn.execute("SELECT name, value FROM META_DATA_EXPORT")}


def _session_start(conn: sqlite3.Connection, path: Path, tables: set[str]) -> int:
    if "TARGET_INFO_SESSION_START_TIME" in tables:
        row = conn.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1").fetchone()
        if row and row[0] is not None:
            return int(row[0])
    raise InputError(
        f"{path}: no TARGET_INFO_SESSION_START_TIME.utcEpochNs; the samples cannot be placed in time"
    )


def _gpus(conn: sqlite3.Connection, tables: set[str]) -> dict[int, tuple[str, str | None]]:
    """PerfWorks GPU id (and device id as a fallback) -> (gpu id attribute, name)."""
    if "TARGET_INFO_GPU" not in tables:
        return {}
    columns = _columns(conn, "TARGET_INFO_GPU")
    pick = [c for c in ("id", "pwGpuId", "uuid", "name") if c in columns]
    out: dict[int, tuple[str, str | None]] = {}
    by_pw: dict[int, tuple[str, str | None]] = {}
    for row in conn.execute(f"SELECT {', '.join(pick)} FROM TARGET_INFO_GPU"):
        record = dict(zip(pick, row, strict=True))
        ident = (str(record.get("uuid") or record.get("id")), record.get("name"))
        if record.get("id") is not None:
            out[int(record["id"])] = ident
        if record.get("pwGpuId") is not None:
            by_pw[int(record["pwGpuId"])] = ident
    out.update(by_pw)  # pwGpuId first, then id
    return out


def _grouped_rows(
    conn: sqlite3.Connection, layout: NsightLayout, interval_ns: int
) -> tuple[list[tuple[Any, ...]], tuple[int | None, int | None], dict[tuple[int, int], str]]:
    """(typeId, metric key, bucket, value, count) rows, the first and last sample times (session ns),
    and metric key -> raw metric name."""
    if layout is NsightLayout.GENERIC:
        rows = conn.execute(
            "SELECT e.typeId, j.key, e.timestamp / ? AS b, j.value, COUNT(*) "
            "FROM GENERIC_EVENTS e, json_each(e.data) j "
            "WHERE e.timestamp IS NOT NULL AND j.type IN ('integer', 'real') "
            "GROUP BY e.typeId, j.key, b, j.value",
            (interval_ns,),
        ).fetchall()
        span = conn.execute("SELECT MIN(timestamp), MAX(timestamp) FROM GENERIC_EVENTS").fetchone()
        return rows, span, {}
    names = {
        (int(t), int(m)): str(n)
        for t, m, n in conn.execute("SELECT typeId, metricId, metricName FROM TARGET_INFO_GPU_METRICS")
    }
    rows, span = _gpu_metrics_rows(conn, interval_ns, {m for _, m in names})
    return rows, span, names


def _gpu_metrics_rows(
    conn: sqlite3.Connection, interval_ns: int, metric_ids: set[int]
) -> tuple[list[tuple[Any, ...]], tuple[int | None, int | None]]:
    """GPU_METRICS grouped by (typeId, metricId, bucket, value), and the first and last sample time.

    GROUP BY sorts its whole input, and the sort is the cost. Two things make it cheap: rows are
    grouped in cache-sized rowid ranges whose small results merge by adding (sums and counts),
    and the leading sort key is one integer packing (metric, bucket), which SQLite's sorter
    compares fastest. The exact first and last times are then read from only the ranges that
    hold the first and last bucket, instead of scanning the table again.
    """
    nullable = not next(
        (row[3] for row in conn.execute("PRAGMA table_info(GPU_METRICS)") if row[1] == "timestamp"), 0
    )
    not_null = "timestamp IS NOT NULL AND " if nullable else ""
    try:
        lo, hi = conn.execute("SELECT MIN(rowid), MAX(rowid) FROM GPU_METRICS").fetchone()
    except sqlite3.OperationalError:  # a WITHOUT ROWID table
        lo = hi = None
    packable = interval_ns >= 1000 and all(abs(m) < _MAX_METRIC_ID for m in metric_ids)
    if lo is None or hi is None or not packable:
        every = conn.execute(
            "SELECT typeId, metricId, timestamp / ? AS b, value, COUNT(*) FROM GPU_METRICS "
            f"WHERE {not_null}1 GROUP BY typeId, metricId, b, value",
            (interval_ns,),
        ).fetchall()
        return every, conn.execute("SELECT MIN(timestamp), MAX(timestamp) FROM GPU_METRICS").fetchone()

    sql = (
        f"SELECT metricId * {_KEY_SHIFT} + (timestamp / ? + {_BUCKET_OFFSET}) AS k, value, typeId, COUNT(*) "
        f"FROM GPU_METRICS WHERE {not_null}rowid >= ? AND rowid < ? GROUP BY k, value, typeId"
    )
    rows: list[tuple[Any, ...]] = []
    ranges: list[tuple[int, int, int]] = []  # (first rowid, lowest bucket, highest bucket)
    for first in range(lo, hi + 1, _CHUNK_ROWS):
        low = high = None
        for k, value, type_id, count in conn.execute(sql, (interval_ns, first, first + _CHUNK_ROWS)):
            metric_id, rest = divmod(k, _KEY_SHIFT)
            bucket = rest - _BUCKET_OFFSET
            rows.append((type_id, metric_id, bucket, value, count))
            low = bucket if low is None else min(low, bucket)
            high = bucket if high is None else max(high, bucket)
        if low is not None and high is not None:
            ranges.append((first, low, high))
    if not ranges:
        return rows, (None, None)
    first_bucket = min(r[1] for r in ranges)
    last_bucket = max(r[2] for r in ranges)

    def extreme(fn: str, bucket: int, pick: int) -> int:
        values = [
            conn.execute(
                f"SELECT {fn}(timestamp) FROM GPU_METRICS WHERE rowid >= ? AND rowid < ?",
                (r[0], r[0] + _CHUNK_ROWS),
            ).fetchone()[0]
            for r in ranges
            if r[pick] == bucket
        ]
        return min(values) if fn == "MIN" else max(values)

    return rows, (extreme("MIN", first_bucket, 1), extreme("MAX", last_bucket, 2))


def capture_uid(path: Path, session_start_unix_ns: int) -> str:
    """Stable per capture, so ingesting the same file again replaces its summary."""
    return hashlib.sha256(f"{path.resolve()}|{session_start_unix_ns}".encode()).hexdigest()[:24]


def read_capture(path: str | Path, *, interval_ms: float = DEFAULT_INTERVAL_MS) -> NsightCapture:
    """Read one export: its summary and its series downsampled to ``interval_ms`` means.

    Raises `NoGpuMetricsError` for an export captured without GPU metrics and `InputError` for
    a file that is not a readable Nsight export (the message names the file and the problem).
    """
    if not interval_ms > 0:
        raise ConfigError(f"interval must be positive, got {interval_ms} ms")
    path = Path(path)
    conn, tables = _connect(path)
    try:
        meta = _meta(conn, tables)
        product, schema = meta.get("EXPORT_PRODUCT_VERSION"), meta.get("EXPORT_SCHEMA_VERSION")
        versions = f" (Nsight Systems {product}, schema {schema})" if product else ""
        layout = _layout(conn, path, tables, versions)
        session_start = _session_start(conn, path, tables)
        gpus = _gpus(conn, tables)
        interval_ns = max(1, round(interval_ms * _NS_PER_MS))
        rows, span, names = _grouped_rows(conn, layout, interval_ns)
    except sqlite3.DatabaseError as exc:
        raise InputError(f"{path}: cannot read the export ({exc}); is the file complete?") from exc
    finally:
        conn.close()
    if not rows:
        raise NoGpuMetricsError(f"{path}: the export{versions} has a GPU metrics table but no samples in it")
    export = _Export(path, layout, session_start, product, schema, gpus, names, span, rows)
    return _assemble(export, interval_ns, interval_ms)


@dataclass(frozen=True)
class _Export:
    """What the SQL pass read from one file, before folding."""

    path: Path
    layout: NsightLayout
    session_start: int
    product: str | None
    schema: str | None
    gpus: dict[int, tuple[str, str | None]]
    names: dict[tuple[int, int], str]
    span: tuple[int | None, int | None]
    rows: list[tuple[Any, ...]]


def _assemble(export: _Export, interval_ns: int, interval_ms: float) -> NsightCapture:
    """Fold the grouped rows into per-metric value counts and per-bucket sums (pure)."""
    path, names, gpus, session_start = export.path, export.names, export.gpus, export.session_start
    rows, span = export.rows, export.span
    value_counts: dict[tuple[int, Any], dict[float, int]] = defaultdict(lambda: defaultdict(int))
    buckets: dict[tuple[int, Any], dict[int, list[float]]] = defaultdict(dict)
    for type_id, metric_key, bucket, raw_value, count in rows:
        key = (type_id, metric_key)
        value = float(raw_value)
        value_counts[key][value] += count
        acc = buckets[key].get(bucket)
        if acc is None:
            buckets[key][bucket] = [value * count, count]
        else:
            acc[0] += value * count
            acc[1] += count

    summaries: list[MetricSummary] = []
    series: dict[tuple[str, str], list[SeriesPoint]] = {}
    gpu_names: dict[str, str | None] = {}
    for key, counts in value_counts.items():
        type_id, metric_key = key
        raw = names.get(key, f"metric {metric_key}") if isinstance(metric_key, int) else str(metric_key)
        metric = canonical_metric(raw)
        short, unit = split_metric_name(raw)
        gpu_id, gpu_name = gpus.get(int(type_id) & 0xFF, (str(int(type_id) & 0xFF), None))
        gpu_names[gpu_id] = gpu_name
        distinct = sorted(counts)
        weights = [counts[v] for v in distinct]
        n = sum(weights)
        p50 = percentile_from_counts(distinct, weights, 50)
        # Raw values near 1e9 under an [MHz] name are Hz (observed in real captures): rescale.
        # Decided on the maximum: an idle-heavy clock reads 0 most of the time, so its p50 is 0.
        scale = 1e-6 if unit == "MHz" and distinct[-1] > 1e6 else 1.0
        summaries.append(
            MetricSummary(
                metric=metric,
                name=short,
                unit=unit,
                gpu_id=gpu_id,
                gpu_name=gpu_name,
                samples=n,
                mean=sum(v * c for v, c in zip(distinct, weights, strict=True)) / n * scale,
                p50=p50 * scale,
                p95=percentile_from_counts(distinct, weights, 95) * scale,
                min=distinct[0] * scale,
                max=distinct[-1] * scale,
                scaled_from_hz=scale != 1.0,
            )
        )
        series[(gpu_id, metric)] = [
            SeriesPoint(session_start + b * interval_ns, total / cnt * scale, int(cnt))
            for b, (total, cnt) in sorted(buckets[key].items())
        ]
    summaries.sort(key=_summary_order)
    start = session_start + int(span[0] or 0)
    end = session_start + int(span[1] or 0)
    summary = NsightSummary(
        capture=path.name,
        path=str(path.resolve()),
        uid=capture_uid(path, session_start),
        layout=export.layout,
        product_version=export.product,
        schema_version=export.schema,
        session_start_unix_ns=session_start,
        start_unix_ns=start,
        end_unix_ns=end,
        duration_s=(end - start) / NS_PER_S,
        interval_ms=interval_ms,
        metrics=summaries,
    )
    return NsightCapture(summary=summary, series=series, gpu_names=gpu_names)


def _summary_order(m: MetricSummary) -> tuple[str, int, str]:
    rank = _PREFERRED.index(m.name) if m.name in _PREFERRED and m.unit == "%" else len(_PREFERRED)
    return (m.gpu_id, rank, m.metric)


# -- outputs -----------------------------------------------------------------------------------------
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
