"""The grouped SQL scans of an export's samples, one per layout, and which rows fit.

A capture holds millions of rows, so each layout is read by one grouping scan (no per-row Python
object); the rows that do not fit are counted in the same scan and one example is described.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..._validate import EARLIEST_NS, LATEST_NS, year_of
from .capture import NsightLayout
from .problems import left_out, not_integer, shown
from .tables import read_metric_names

__all__ = ["grouped_rows"]

_CHUNK_ROWS = 4096
_KEY_SHIFT = 1 << 40  # (metric id, bucket) packed as metricId * 2**40 + bucket + 2**39
_BUCKET_OFFSET = 1 << 39
_MAX_REAL = 1.7976931348623157e308  # past it a REAL is infinite


# A GPU_METRICS row that can be read: whole-number time and ids, a finite value, a time in
# 2000-2100 (:lo and :hi are those bounds less the session start). The grouping queries check
# the types of time and metric id per row (`_GOOD_KEYS`: a text id or time would count as 0
# there) and the time itself (a bucket that starts before 2100 can hold a time after it); value
# and typeId are what they group on, so `_fits` checks each group instead, which costs nothing
# per row. Values are bounded with BETWEEN, not abs(): abs(-2**63) is an SQLite integer overflow,
# which failed the whole read.
_GOOD_KEYS = "(typeof(metricId) = 'integer' AND typeof(timestamp) = 'integer')"
_GOOD_ROW = (
    f"({_GOOD_KEYS[1:-1]} AND timestamp >= :lo AND timestamp < :hi AND typeof(typeId) = 'integer' "
    f"AND typeof(value) IN ('integer', 'real') AND value BETWEEN -{_MAX_REAL!r} AND {_MAX_REAL!r})"
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
_GOOD_VALUE = f"(j.type IN ('integer', 'real') AND j.value BETWEEN -{_MAX_REAL!r} AND {_MAX_REAL!r})"


def _bucket(timestamp: str) -> str:
    """The time bucket of ``timestamp`` as SQL: floor division, so a time before the session start
    falls in the interval that starts at or before it. SQLite's ``/`` truncates toward zero, which
    made bucket 0 span two intervals (-interval, +interval) and put a sample before the session
    start in the point after it. ``timestamp + 1`` cannot overflow where it is negative."""
    t = timestamp
    return f"(CASE WHEN {t} >= 0 THEN {t} / :interval ELSE ({t} + 1) / :interval - 1 END)"


def _time_problem(timestamp: int, session_start: int) -> str:
    year = year_of(session_start + timestamp)
    if EARLIEST_NS <= session_start + timestamp < LATEST_NS:  # in 2000, in an interval that starts before
        return f"timestamp {timestamp} falls in a downsampling interval that starts before 2000"
    return f"timestamp {timestamp} reads as the year {year}, outside 2000-2100"


def _row_problem(timestamp: Any, type_id: Any, metric_id: Any, value: Any, session_start: int) -> str:
    """What keeps one GPU_METRICS row out (the Python side of `_GOOD_ROW`)."""
    for column, v in (("timestamp", timestamp), ("typeId", type_id), ("metricId", metric_id)):
        problem = not_integer(column, v)
        if problem:
            return problem
    if not isinstance(value, int | float):
        return f"value is {shown(value)}, not a number"
    if not math.isfinite(value):
        return f"value is {value!r}, not a finite number"
    return _time_problem(timestamp, session_start)


def _bounds(session_start: int, interval_ns: int) -> dict[str, int]:
    """The SQL bounds of a row's session time: ``:lo`` is 2000 less the session start, raised to the
    next interval start (a point is its interval's start, and none is placed before 2000)."""
    lo = -(-(EARLIEST_NS - session_start) // interval_ns) * interval_ns
    return {"lo": lo, "hi": LATEST_NS - session_start, "interval": interval_ns, "start": session_start}


def grouped_rows(
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
    names = read_metric_names(conn, path, skipped)
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
        skipped.append(left_out(path, "GPU_METRICS", rowid, problem, bad=bad, total=total))
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
        f"SELECT e.typeId, j.key, {_bucket('e.timestamp')} AS b, j.value, COUNT(*) "
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
        problem = not_integer("timestamp", timestamp) or not_integer("typeId", type_id)
        if problem is None and kind is None:
            problem = "data is not valid JSON"
        elif problem is None and kind != "object":
            problem = f"data is a JSON {kind}, not an object of metric values"
        elif problem is None:
            problem = _time_problem(timestamp, bounds["start"])
        skipped.append(left_out(path, "GENERIC_EVENTS", rowid, problem, bad=bad, total=total))
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
        what = f"{kind} {shown(atom)}" if kind not in ("object", "array") else f"a JSON {kind}"
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
        f"SELECT CASE WHEN {_GOOD_KEYS} AND timestamp >= :lo AND timestamp < :hi THEN 1 END AS ok, typeId, "
        f"metricId, {_bucket('timestamp')} AS b, "
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
    past the key's 2**39 can only come from times this far from the session start. A time outside
    2000-2100 gets a NULL key before it is packed: its bucket could carry into the metric id (a time
    in 2160 at 5 ms read as a sample of the next metric, in 2042)."""
    reach = _BUCKET_OFFSET * bounds["interval"]
    in_reach = (
        ""
        if max(abs(bounds["lo"]), abs(bounds["hi"])) < reach
        else f" WHEN abs({_bucket('timestamp')}) >= {_BUCKET_OFFSET} THEN 'unpackable'"
    )
    lo_bucket = bounds["lo"] // bounds["interval"]  # exact: `_bounds` aligns :lo to an interval
    sql = (
        f"SELECT CASE WHEN NOT {_GOOD_KEYS} OR timestamp < :lo OR timestamp >= :hi THEN NULL{in_reach} "
        # Past the WHEN, timestamp >= :lo, a multiple of the interval: truncating division of
        # the offset from it is floor division, without `_bucket`'s CASE on every row.
        f"ELSE metricId * {_KEY_SHIFT} + ((timestamp - :lo) / :interval + {lo_bucket + _BUCKET_OFFSET}) "
        "END AS k, "
        "value, typeId, COUNT(*) "
        "FROM GPU_METRICS WHERE rowid >= :first AND rowid <= :last GROUP BY k, value, typeId"
    )
    rows: list[tuple[Any, ...]] = []
    ranges: list[tuple[int, int, int, int]] = []  # (first rowid, last rowid, lowest bucket, highest bucket)
    bad = total = 0
    for first, last in _rowid_ranges(conn, lo, hi):
        low = high = None
        params = {**bounds, "first": first, "last": last}
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
            ranges.append((first, last, low, high))
    if not ranges:
        return rows, (None, None), bad, total
    first_bucket = min(r[2] for r in ranges)
    last_bucket = max(r[3] for r in ranges)

    def extreme(fn: str, bucket: int, pick: int) -> int:
        values = [
            conn.execute(
                f"SELECT {fn}(timestamp) FROM GPU_METRICS "
                f"WHERE rowid >= :first AND rowid <= :last AND {_GOOD_ROW}",
                {**bounds, "first": r[0], "last": r[1]},
            ).fetchone()[0]
            for r in ranges
            if r[pick] == bucket
        ]
        return int(min(values) if fn == "MIN" else max(values))

    return rows, (extreme("MIN", first_bucket, 2), extreme("MAX", last_bucket, 3)), bad, total


def _rowid_ranges(conn: sqlite3.Connection, lo: int, hi: int) -> Iterator[tuple[int, int]]:
    """Inclusive rowid ranges of at most `_CHUNK_ROWS` rowids that each hold a row, lo to hi. Each
    next range starts at the next rowid there is, so sparse rowids (one row at 2**62) cost one
    range per row at most, never one per 4096 rowids between them; no bound passes 2**63 - 1."""
    first: int | None = lo
    while first is not None and first <= hi:
        last = min(first + _CHUNK_ROWS - 1, hi)
        yield first, last
        first = conn.execute("SELECT MIN(rowid) FROM GPU_METRICS WHERE rowid > ?", (last,)).fetchone()[0]
