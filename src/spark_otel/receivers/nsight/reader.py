"""`read_capture`: one export opened, scanned and folded into an `NsightCapture`."""

from __future__ import annotations

import hashlib
import logging
import math
import sqlite3
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..._clock import NS_PER_S
from ..._exceptions import ConfigError, InputError, NoGpuMetricsError
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
from .rows import grouped_rows
from .tables import open_export, read_gpus, read_layout, read_meta, read_session_start

__all__ = ["DEFAULT_INTERVAL_MS", "MAX_INTERVAL_MS", "capture_uid", "check_interval_ms", "read_capture"]

_logger = logging.getLogger(__name__)
DEFAULT_INTERVAL_MS = 100.0
MAX_INTERVAL_MS = 3_600_000.0  # an hour: a capture spans seconds to minutes
_NS_PER_MS = 1_000_000
# The compute metrics the article's Appendix B reports, listed first in summaries.
_PREFERRED = ("GR Active", "SMs Active", "SM Issue", "Tensor Active", "Compute Warps in Flight")


def capture_uid(path: Path, session_start_unix_ns: int) -> str:
    """Stable per capture, so ingesting the same file again replaces its summary."""
    return hashlib.sha256(f"{path.resolve()}|{session_start_unix_ns}".encode()).hexdigest()[:24]


def check_interval_ms(interval_ms: Any) -> float:
    """The downsampling interval: a finite number of milliseconds, above 0 and at most an hour."""
    if (
        isinstance(interval_ms, bool)
        or not isinstance(interval_ms, int | float)
        or not math.isfinite(interval_ms)
        or not 0 < interval_ms <= MAX_INTERVAL_MS
    ):
        raise ConfigError(
            f"interval must be a finite number of milliseconds above 0 and at most {MAX_INTERVAL_MS:,.0f} "
            f"(an hour), got {interval_ms!r}"
        )
    return float(interval_ms)


def read_capture(path: str | Path, *, interval_ms: float = DEFAULT_INTERVAL_MS) -> NsightCapture:
    """Read one export: its summary and its series downsampled to ``interval_ms`` means.

    Raises `NoGpuMetricsError` for an export captured without GPU metrics and `InputError` for
    a file that is not a readable Nsight export (the message names the file and the problem).
    Rows that do not fit (a NULL or text where a number belongs, a time outside 2000-2100) are
    left out, and `NsightCapture.skipped` says which (``FILE: TABLE row N: why``).
    """
    interval_ms = check_interval_ms(interval_ms)
    path = Path(path)
    conn, tables = open_export(path)
    skipped: list[str] = []
    try:
        meta = read_meta(conn, tables)
        product, schema = meta.get("EXPORT_PRODUCT_VERSION"), meta.get("EXPORT_SCHEMA_VERSION")
        versions = f" (Nsight Systems {product}, schema {schema})" if product else ""
        layout = read_layout(conn, path, tables, versions)
        session_start = read_session_start(conn, path, tables)
        gpus = read_gpus(conn, path, tables, skipped)
        interval_ns = max(1, round(interval_ms * _NS_PER_MS))
        rows, span, names = grouped_rows(conn, path, layout, interval_ns, session_start, skipped=skipped)
    except sqlite3.DatabaseError as exc:
        raise InputError(f"{path}: cannot read the export ({exc}); is the file complete?") from exc
    finally:
        conn.close()
    if not rows:
        if skipped:
            raise InputError(f"{skipped[-1]}; no sample is left to read")
        raise NoGpuMetricsError(f"{path}: the export{versions} has a GPU metrics table but no samples in it")
    for line in skipped:
        _logger.debug("%s", line)
    export = _Export(path, layout, session_start, product, schema, gpus, names, span, rows)
    capture = _assemble(export, interval_ns, interval_ms)
    capture.skipped = skipped
    return capture


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
