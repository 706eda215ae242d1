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
from .._validate import EARLIEST_NS, LATEST_NS, year_of
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
MAX_INTERVAL_MS = 3_600_000.0  # an hour: a capture spans seconds to minutes
_MAX_REAL = 1.7976931348623157e308  # past it a REAL is infinite

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
    skipped: list[str] = field(default_factory=list)
    """Rows left out, one line per table: ``FILE: TABLE row N: what is wrong (k rows of n left out)``."""


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


def _require_columns(conn: sqlite3.Connection, path: Path, table: str, columns: Sequence[str]) -> None:
    missing = [c for c in columns if c not in _columns(conn, table)]
    if missing:
        raise InputError(f"{path}: {table} lacks column(s) {', '.join(missing)}; is this an Nsight export?")


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
    if "META_DATA_EXPORT" not in tables or not {"name", "value"} <= _columns(conn, "META_DATA_EXPORT"):
        return {}
    rows = conn.execute("SELECT name, value FROM META_DATA_EXPORT").fetchall()
    return {name: value for name, value in rows if isinstance(name, str) and isinstance(value, str)}


def _shown(value: Any) -> str:
    """A database value as a message quotes it: NULL, a blob's size, text cut short."""
    if value is None:
        return "NULL"
    if isinstance(value, bytes):
        return f"a {len(value)}-byte blob"
    if isinstance(value, str):
        return repr(value if len(value) <= 40 else value[:40] + "...")
    return repr(value)


def _not_integer(column: str, value: Any) -> str | None:
    return None if isinstance(value, int) else f"{column} is {_shown(value)}, not an integer"


def _left_out(path: Path, table: str, rowid: Any, problem: str, *, bad: int, total: int | None) -> str:
    """``FILE: TABLE row N: what is wrong (k rows of n left out)``: one line for all the rows."""
    where = f"{table} row {rowid}" if rowid is not None else table
    of = f" of {total:,}" if total is not None else ""
    return f"{path}: {where}: {problem} ({bad:,} row{'s' if bad != 1 else ''}{of} left out)"


def _session_start(conn: sqlite3.Connection, path: Path, tables: set[str]) -> int:
    if "TARGET_INFO_SESSION_START_TIME" in tables:
        _require_columns(conn, path, "TARGET_INFO_SESSION_START_TIME", ("utcEpochNs",))
        row = conn.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1").fetchone()
        if row and row[0] is not None:
            where = f"{path}: TARGET_INFO_SESSION_START_TIME.utcEpochNs"
            value = row[0]
            if not isinstance(value, int):
                raise InputError(
                    f"{where} is {_shown(value)}, not a whole number of nanoseconds; "
                    "the samples cannot be placed in time"
                )
            if not EARLIEST_NS <= value < LATEST_NS:
                raise InputError(
                    f"{where} {value} reads as the year {year_of(value)}, outside 2000-2100; "
                    "the samples cannot be placed in time"
                )
            return value
    raise InputError(
        f"{path}: no TARGET_INFO_SESSION_START_TIME.utcEpochNs; the samples cannot be placed in time"
    )


def _gpus(
    conn: sqlite3.Connection, path: Path, tables: set[str], skipped: list[str]
) -> dict[int, tuple[str, str | None]]:
    """PerfWorks GPU id (and device id as a fallback) -> (gpu id attribute, name)."""
    if "TARGET_INFO_GPU" not in tables:
        return {}
    columns = _columns(conn, "TARGET_INFO_GPU")
    pick = [c for c in ("id", "pwGpuId", "uuid", "name") if c in columns]
    if not pick:
        return {}
    out: dict[int, tuple[str, str | None]] = {}
    by_pw: dict[int, tuple[str, str | None]] = {}
    bad: list[tuple[Any, str]] = []
    rows = conn.execute(f"SELECT rowid, {', '.join(pick)} FROM TARGET_INFO_GPU").fetchall()
    for rowid, *values in rows:
        record = dict(zip(pick, values, strict=True))
        problem = next(
            (
                p
                for c in ("id", "pwGpuId")
                if record.get(c) is not None
                for p in [_not_integer(c, record[c])]
                if p
            ),
            None,
        )
        if problem:
            bad.append((rowid, problem))
            continue
        name = record.get("name")
        ident = (str(record.get("uuid") or record.get("id")), name if isinstance(name, str) else None)
        if record.get("id") is not None:
            out[record["id"]] = ident
        if record.get("pwGpuId") is not None:
            by_pw[record["pwGpuId"]] = ident
    if bad:
        skipped.append(_left_out(path, "TARGET_INFO_GPU", *bad[0], bad=len(bad), total=len(rows)))
    out.update(by_pw)  # pwGpuId first, then id
    return out


def _metric_names(conn: sqlite3.Connection, path: Path, skipped: list[str]) -> dict[tuple[int, int], str]:
    """(typeId, metricId) -> metric name; a row that cannot name a metric is reported, and the
    samples of that metric read as ``metric N``."""
    _require_columns(conn, path, "TARGET_INFO_GPU_METRICS", ("typeId", "metricId", "metricName"))
    rows = conn.execute("SELECT rowid, typeId, metricId, metricName FROM TARGET_INFO_GPU_METRICS").fetchall()
    names: dict[tuple[int, int], str] = {}
    bad: list[tuple[Any, str]] = []
    for rowid, type_id, metric_id, name in rows:
        problem = _not_integer("typeId", type_id) or _not_integer("metricId", metric_id)
        if problem is None and (not isinstance(name, str) or not name.strip()):
            problem = f"metricName is {_shown(name)}, not a name"
        if problem:
            bad.append((rowid, problem))
        else:
            names[(type_id, metric_id)] = name
    if bad:
        skipped.append(_left_out(path, "TARGET_INFO_GPU_METRICS", *bad[0], bad=len(bad), total=len(rows)))
    return names


# A GPU_METRICS row that can be read: whole-number time and ids, a finite value, a time in
# 2000-2100 (:lo and :hi are those bounds less the session start). The grouping query checks
# only the types of time and metric id per row (`_GOOD_KEYS`: a text id or time would count as
# 0 there); value, typeId and the time bucket are what it groups on, so `_fits` checks each
# group instead, which costs nothing per row.
_GOOD_KEYS = "(typeof(metricId) = 'integer' AND typeof(timestamp) = 'integer')"
_GOOD_ROW = (
    f"({_GOOD_KEYS[1:-1]} AND timestamp >= :lo AND timestamp < :hi AND typeof(typeId) = 'integer' "
    f"AND typeof(value) IN ('integer', 'real') AND abs(value) <= {_MAX_REAL!r})"
)


def _fits(value: Any, type_id: Any, bucket: int, bounds: dict[str, int]) -> bool:
    return (
        isinstance(type_id, int)
        and isinstance(value, int | float)
        and math.isfinite(value)
        and bounds["lo"] <= bucket * bounds["interval"] < bounds["hi"]
    )


# GENERIC_EVENTS: the row's data, or an empty object where it is not a JSON object.
_GENERIC_DATA = (
    "CASE WHEN json_valid(e.data) THEN CASE WHEN json_type(e.data) = 'object' THEN e.data ELSE '{}' END "
    "ELSE '{}' END"
)
_GOOD_EVENT = (
    "(typeof(e.timestamp) = 'integer' AND typeof(e.typeId) = 'integer' AND e.timestamp >= :lo "
    "AND e.timestamp < :hi AND CASE WHEN json_valid(e.data) THEN json_type(e.data) = 'object' "
    "ELSE 0 END)"
)
_GOOD_VALUE = f"(j.type IN ('integer', 'real') AND abs(j.value) <= {_MAX_REAL!r})"


def _row_problem(timestamp: Any, type_id: Any, metric_id: Any, value: Any, session_start: int) -> str:
    """What keeps one GPU_METRICS row out (the Python side of `_GOOD_ROW`)."""
    for column, v in (("timestamp", timestamp), ("typeId", type_id), ("metricId", metric_id)):
        problem = _not_integer(column, v)
        if problem:
            return problem
    if not isinstance(value, int | float):
        return f"value is {_shown(value)}, not a number"
    if not math.isfinite(value):
        return f"value is {value!r}, not a finite number"
    return f"timestamp {timestamp} reads as the year {year_of(session_start + timestamp)}, outside 2000-2100"


def _bounds(session_start: int, interval_ns: int) -> dict[str, int]:
    return {"lo": EARLIEST_NS - session_start, "hi": LATEST_NS - session_start, "interval": interval_ns}


def _grouped_rows(
    conn: sqlite3.Connection,
    path: Path,
    layout: NsightLayout,
    interval_ns: int,
    session_start: int,
    *,
    skipped: list[str],
) -> tuple[list[tuple[Any, ...]], tuple[int | None, int | None], dict[tuple[int, int], str]]:
    """(typeId, metric key, bucket, value, count) rows, the first and last sample times (session ns),
    and metric key -> raw metric name. Rows that do not fit are left out and reported in ``skipped``."""
    bounds = _bounds(session_start, interval_ns)
    if layout is NsightLayout.GENERIC:
        return (*_generic_rows(conn, path, bounds, skipped), {})
    names = _metric_names(conn, path, skipped)
    rows, span, bad, total = _gpu_metrics_rows(conn, bounds)
    if bad:
        has_rowid = _has_rowid(conn, "GPU_METRICS")
        example = conn.execute(
            f"SELECT {'rowid' if has_rowid else 'NULL'}, timestamp, typeId, metricId, value "
            f"FROM GPU_METRICS WHERE NOT {_GOOD_ROW} LIMIT 1",
            bounds,
        ).fetchone()
        rowid, timestamp, type_id, metric_id, value = example or (None,) * 5
        problem = (
            _row_problem(timestamp, type_id, metric_id, value, session_start) if example else "does not fit"
        )
        skipped.append(_left_out(path, "GPU_METRICS", rowid, problem, bad=bad, total=total))
    return rows, span, names


def _has_rowid(conn: sqlite3.Connection, table: str) -> bool:
    try:
        conn.execute(f"SELECT rowid FROM {table} LIMIT 1").fetchall()
    except sqlite3.OperationalError:  # a WITHOUT ROWID table
        return False
    return True


def _generic_rows(
    conn: sqlite3.Connection, path: Path, bounds: dict[str, int], skipped: list[str]
) -> tuple[list[tuple[Any, ...]], tuple[int | None, int | None]]:
    """GENERIC_EVENTS values grouped as `_gpu_metrics_rows` groups them; rows whose time, type or
    JSON does not fit, and values that are not finite numbers, are left out and reported."""
    rows = conn.execute(
        "SELECT e.typeId, j.key, e.timestamp / :interval AS b, j.value, COUNT(*) "
        f"FROM GENERIC_EVENTS e, json_each({_GENERIC_DATA}) j "
        f"WHERE {_GOOD_EVENT} AND {_GOOD_VALUE} GROUP BY e.typeId, j.key, b, j.value",
        bounds,
    ).fetchall()
    span = conn.execute(
        f"SELECT MIN(e.timestamp), MAX(e.timestamp) FROM GENERIC_EVENTS e WHERE {_GOOD_EVENT}", bounds
    ).fetchone()
    total, bad = conn.execute(
        f"SELECT COUNT(*), COALESCE(SUM(NOT {_GOOD_EVENT}), 0) FROM GENERIC_EVENTS e", bounds
    ).fetchone()
    if bad:
        rowid, timestamp, type_id, kind = conn.execute(
            "SELECT e.rowid, e.timestamp, e.typeId, CASE WHEN json_valid(e.data) THEN json_type(e.data) END "
            f"FROM GENERIC_EVENTS e WHERE NOT {_GOOD_EVENT} LIMIT 1",
            bounds,
        ).fetchone()
        problem = _not_integer("timestamp", timestamp) or _not_integer("typeId", type_id)
        if problem is None and kind is None:
            problem = "data is not valid JSON"
        elif problem is None and kind != "object":
            problem = f"data is a JSON {kind}, not an object of metric values"
        elif problem is None:
            start = EARLIEST_NS - bounds["lo"]  # lo is 2000 less the session start
            problem = (
                f"timestamp {timestamp} reads as the year {year_of(start + timestamp)}, outside 2000-2100"
            )
        skipped.append(_left_out(path, "GENERIC_EVENTS", rowid, problem, bad=bad, total=total))
    values_bad = conn.execute(
        f"SELECT COUNT(*), MIN(e.rowid) FROM GENERIC_EVENTS e, json_each({_GENERIC_DATA}) j "
        f"WHERE {_GOOD_EVENT} AND NOT {_GOOD_VALUE}",
        bounds,
    ).fetchone()
    if values_bad[0]:
        key, kind, atom = conn.execute(
            f"SELECT j.key, j.type, j.atom FROM GENERIC_EVENTS e, json_each({_GENERIC_DATA}) j "
            f"WHERE e.rowid = :row AND NOT {_GOOD_VALUE} LIMIT 1",
            {**bounds, "row": values_bad[1]},
        ).fetchone()
        what = f"{kind} {_shown(atom)}" if kind not in ("object", "array") else f"a JSON {kind}"
        skipped.append(
            f"{path}: GENERIC_EVENTS row {values_bad[1]}: {key!r} is {what}, not a finite number "
            f"({values_bad[0]:,} value{'s' if values_bad[0] != 1 else ''} left out)"
        )
    return rows, span


def _gpu_metrics_rows(
    conn: sqlite3.Connection, bounds: dict[str, int]
) -> tuple[list[tuple[Any, ...]], tuple[int | None, int | None], int, int]:
    """GPU_METRICS grouped by (typeId, metricId, bucket, value), the first and last sample time,
    and how many rows did not fit (`_GOOD_ROW`) of how many.

    GROUP BY sorts its whole input, and the sort is the cost. Two things make it cheap: rows are
    grouped in cache-sized rowid ranges whose small results merge by adding (sums and counts),
    and the leading sort key is one integer packing (metric, bucket), which SQLite's sorter
    compares fastest. The exact first and last times are then read from only the ranges that
    hold the first and last bucket, instead of scanning the table again. A row that does not
    fit gets a NULL key (one group per range), so checking every row costs no extra scan.
    """
    interval_ns = bounds["interval"]
    try:
        lo, hi = conn.execute("SELECT MIN(rowid), MAX(rowid) FROM GPU_METRICS").fetchone()
    except sqlite3.OperationalError:  # a WITHOUT ROWID table
        lo = hi = None
    packable = interval_ns >= 1000
    if lo is not None and hi is not None and packable:
        packed = _packed_rows(conn, bounds, lo, hi)
        if packed is not None:
            return packed
    every = conn.execute(
        f"SELECT CASE WHEN {_GOOD_KEYS} THEN 1 END AS ok, typeId, metricId, timestamp / :interval AS b, "
        "value, COUNT(*) FROM GPU_METRICS GROUP BY ok, typeId, metricId, b, value",
        bounds,
    ).fetchall()
    rows = [row[1:] for row in every if row[0] is not None and _fits(row[4], row[1], row[3], bounds)]
    total = sum(row[-1] for row in every)
    bad = total - sum(row[-1] for row in rows)
    span = conn.execute(f"SELECT MIN(timestamp), MAX(timestamp) FROM GPU_METRICS WHERE {_GOOD_ROW}", bounds)
    return rows, span.fetchone(), bad, total


def _packed_rows(
    conn: sqlite3.Connection, bounds: dict[str, int], lo: int, hi: int
) -> tuple[list[tuple[Any, ...]], tuple[int | None, int | None], int, int] | None:
    """`_gpu_metrics_rows` over rowid ranges with the packed key; None when some good row's
    metric id or bucket does not fit the packing (then the plain GROUP BY answers). A metric id
    too large for the key makes SQLite's integer overflow to a REAL, which says so; a bucket
    past the key's 2**39 can only come from times this far from the session start."""
    reach = _BUCKET_OFFSET * bounds["interval"]
    in_reach = (
        ""
        if max(abs(bounds["lo"]), abs(bounds["hi"])) < reach
        else f" WHEN abs(timestamp / :interval) >= {_BUCKET_OFFSET} THEN 'unpackable'"
    )
    sql = (
        f"SELECT CASE WHEN NOT {_GOOD_KEYS} THEN NULL{in_reach} "
        f"ELSE metricId * {_KEY_SHIFT} + (timestamp / :interval + {_BUCKET_OFFSET}) END AS k, "
        "value, typeId, COUNT(*) "
        "FROM GPU_METRICS WHERE rowid >= :first AND rowid < :last GROUP BY k, value, typeId"
    )
    rows: list[tuple[Any, ...]] = []
    ranges: list[tuple[int, int, int]] = []  # (first rowid, lowest bucket, highest bucket)
    bad = total = 0
    for first in range(lo, hi + 1, _CHUNK_ROWS):
        low = high = None
        params = {**bounds, "first": first, "last": first + _CHUNK_ROWS}
        for k, value, type_id, count in conn.execute(sql, params):
            total += count
            if k is None:
                bad += count
                continue
            if not isinstance(k, int):
                return None
            metric_id, rest = divmod(k, _KEY_SHIFT)
            bucket = rest - _BUCKET_OFFSET
            if not _fits(value, type_id, bucket, bounds):
                bad += count
                continue
            rows.append((type_id, metric_id, bucket, value, count))
            low = bucket if low is None else min(low, bucket)
            high = bucket if high is None else max(high, bucket)
        if low is not None and high is not None:
            ranges.append((first, low, high))
    if not ranges:
        return rows, (None, None), bad, total
    first_bucket = min(r[1] for r in ranges)
    last_bucket = max(r[2] for r in ranges)

    def extreme(fn: str, bucket: int, pick: int) -> int:
        values = [
            conn.execute(
                f"SELECT {fn}(timestamp) FROM GPU_METRICS "
                f"WHERE rowid >= :first AND rowid < :last AND {_GOOD_ROW}",
                {**bounds, "first": r[0], "last": r[0] + _CHUNK_ROWS},
            ).fetchone()[0]
            for r in ranges
            if r[pick] == bucket
        ]
        return min(values) if fn == "MIN" else max(values)

    return rows, (extreme("MIN", first_bucket, 1), extreme("MAX", last_bucket, 2)), bad, total


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
    conn, tables = _connect(path)
    skipped: list[str] = []
    try:
        meta = _meta(conn, tables)
        product, schema = meta.get("EXPORT_PRODUCT_VERSION"), meta.get("EXPORT_SCHEMA_VERSION")
        versions = f" (Nsight Systems {product}, schema {schema})" if product else ""
        layout = _layout(conn, path, tables, versions)
        session_start = _session_start(conn, path, tables)
        gpus = _gpus(conn, path, tables, skipped)
        interval_ns = max(1, round(interval_ms * _NS_PER_MS))
        rows, span, names = _grouped_rows(conn, path, layout, interval_ns, session_start, skipped=skipped)
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
