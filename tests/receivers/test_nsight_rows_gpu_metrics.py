"""GPU_METRICS scans at their edges: times at 2000 and 2100, tables the packed scan cannot read.

The bad-input tests damage one row of a rowid table read by the packed, chunked scan. These pin
what that leaves open: which message a time just outside 2000-2100 gets, a table WITHOUT ROWID
(no chunks, no "row N"), a metric id too large for the packed key (the plain GROUP BY answers),
bad rows spread over several groups (all counted), and first and last times taken from the
right chunks when chunks overlap in time and rowids jump to 2**62.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from tests.support.nsight import SESSION_START_UNIX_NS, TYPE_ID, WITHOUT_ROWID

from spark_otel._validate import EARLIEST_NS, LATEST_NS
from spark_otel.receivers.nsight import read_capture

SM_ISSUE = "SM Issue [Throughput %]"  # metricId 2
AT_2000 = EARLIEST_NS - SESSION_START_UNIX_NS  # session times of 2000-01-01 and 2100-01-01
AT_2100 = LATEST_NS - SESSION_START_UNIX_NS
MS = 1_000_000


def with_rows(
    captures: dict[str, Path], tmp_path: Path, rows: list[tuple[object, ...]], sql: str = ""
) -> Path:
    """A copy of the plain capture, ``sql`` run, ``rows`` (timestamp, typeId, metricId, value) added."""
    path = tmp_path / "capture.sqlite"
    shutil.copy(captures["plain"], path)
    with sqlite3.connect(path) as conn:
        conn.executescript(sql)
        conn.executemany(
            "INSERT INTO GPU_METRICS (timestamp, typeId, metricId, value) VALUES (?, ?, ?, ?)", rows
        )
    conn.close()
    return path


def test_a_sample_at_the_first_instant_of_2000_is_read(captures: dict[str, Path], tmp_path: Path) -> None:
    path = with_rows(captures, tmp_path, [(AT_2000, TYPE_ID, 2, 77)])
    capture = read_capture(path)
    assert capture.skipped == []
    assert capture.summary.start_unix_ns == EARLIEST_NS
    assert capture.summary.metric(SM_ISSUE).samples == 51
    first = next(v for (_, metric), v in capture.series.items() if metric == SM_ISSUE)[0]
    assert (first.unix_ns, first.value, first.count) == (EARLIEST_NS, 77.0, 1)


@pytest.mark.parametrize(
    ("timestamp", "interval_ms", "problem"),
    [
        (AT_2100, 100, f"timestamp {AT_2100} reads as the year 2100, outside 2000-2100"),
        (AT_2000 - 1, 100, f"timestamp {AT_2000 - 1} reads as the year 1999, outside 2000-2100"),
        # 7 ms intervals do not divide the time from 2000 to the session start: the interval
        # that holds 2000-01-01 starts in 1999, and a point is placed at its interval's start
        (AT_2000, 7, f"timestamp {AT_2000} falls in a downsampling interval that starts before 2000"),
    ],
)
def test_a_time_just_outside_2000_to_2100_is_named_and_left_out(
    captures: dict[str, Path], tmp_path: Path, timestamp: int, interval_ms: float, problem: str
) -> None:
    path = with_rows(captures, tmp_path, [(timestamp, TYPE_ID, 2, 77)])
    capture = read_capture(path, interval_ms=interval_ms)
    assert capture.skipped == [f"{path}: GPU_METRICS row 951: {problem} (1 row of 951 left out)"]
    assert capture.summary.metric(SM_ISSUE).samples == 50


def test_bad_rows_in_several_groups_are_all_counted(captures: dict[str, Path], tmp_path: Path) -> None:
    rows = [(None, TYPE_ID, 2, 1), (None, TYPE_ID, 2, 2), (AT_2100, TYPE_ID, 2, 3)]
    path = with_rows(captures, tmp_path, rows)
    assert read_capture(path).skipped == [
        f"{path}: GPU_METRICS row 951: timestamp is NULL, not an integer (3 rows of 953 left out)"
    ]


def test_a_table_without_rowid_is_read_by_the_plain_group_by(
    captures: dict[str, Path], tmp_path: Path
) -> None:
    """No rowid: no chunks, and the left-out line names the table without a row. Each bad row
    fails a different check: the value, the metric id, the time, the type id."""
    bad = (
        f"INSERT INTO GPU_METRICS VALUES (951, {25 * MS}, {TYPE_ID}, 2, 'abc'), "
        f"(952, {30 * MS}, {TYPE_ID}, 'x', 5), (953, {AT_2100}, {TYPE_ID}, 2, 5), "
        f"(954, {35 * MS}, 'gpu', 2, 5)"
    )
    big = f"; INSERT INTO GPU_METRICS VALUES (955, {40 * MS}, {TYPE_ID}, 0, {10**12})"  # a good row
    path = with_rows(captures, tmp_path, [], WITHOUT_ROWID + bad + big)
    capture = read_capture(path)
    assert capture.skipped == [f"{path}: GPU_METRICS: value is 'abc', not a number (4 rows of 955 left out)"]
    assert [(m.metric, m.samples, m.max) for m in capture.summary.metrics if m.samples != 50] == [
        ("GR Active [Throughput %]", 51, 1e12)
    ]
    assert len(capture.summary.metrics) == 19
    assert (capture.summary.start_unix_ns, capture.summary.end_unix_ns) == (
        SESSION_START_UNIX_NS + 1 * MS,
        SESSION_START_UNIX_NS + 50 * MS,
    )


def test_a_metric_id_too_large_for_the_packed_key_is_read_by_the_plain_group_by(
    captures: dict[str, Path], tmp_path: Path
) -> None:
    """metricId * 2**40 overflows to a REAL in SQLite: the packed scan gives up on the first key."""
    huge = 2**62
    sql = (
        "DELETE FROM GPU_METRICS; DELETE FROM TARGET_INFO_GPU_METRICS; "
        f"INSERT INTO TARGET_INFO_GPU_METRICS VALUES ({TYPE_ID}, 1, 'GPU', {huge}, 'Huge [Throughput %]')"
    )
    path = with_rows(captures, tmp_path, [(t * MS, TYPE_ID, huge, 10 * t) for t in (1, 2, 3)], sql)
    capture = read_capture(path)
    assert capture.skipped == []
    [metric] = capture.summary.metrics
    assert (metric.metric, metric.samples, metric.mean, metric.min, metric.max) == (
        "Huge [Throughput %]",
        3,
        20.0,
        10.0,
        30.0,
    )
    assert (capture.summary.start_unix_ns, capture.summary.end_unix_ns) == (
        SESSION_START_UNIX_NS + 1 * MS,
        SESSION_START_UNIX_NS + 3 * MS,
    )


def test_first_and_last_times_come_from_every_chunk_that_holds_the_first_and_last_bucket(
    captures: dict[str, Path], tmp_path: Path
) -> None:
    """Three chunks (4,096 rowids each at most): 1-4096, 4097-4098 and the lone rowid 2**62.

    The first two both hold bucket 0 (0-100 ms) and bucket 9 (900-1000 ms), each with its lowest
    and highest bucket in a metric that is not the last in the chunk's group order; the earliest
    time (5 ms) is in the first, the latest (990 ms) in the second.
    """
    rows = [
        (1, 0, 5, 1),
        *((rowid, 0, 500, 2) for rowid in range(2, 4096)),
        (4096, 1, 950, 3),
        (4097, 0, 990, 4),
        (4098, 1, 10, 5),
        (2**62, 1, 20, 6),
    ]
    path = tmp_path / "chunks.sqlite"
    shutil.copy(captures["plain"], path)
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM GPU_METRICS")
        conn.executemany(
            "INSERT INTO GPU_METRICS (rowid, timestamp, typeId, metricId, value) VALUES (?, ?, ?, ?, ?)",
            [(rowid, ms * MS, TYPE_ID, metric, value) for rowid, metric, ms, value in rows],
        )
    conn.close()
    capture = read_capture(path)
    assert capture.skipped == []
    assert (capture.summary.start_unix_ns, capture.summary.end_unix_ns) == (
        SESSION_START_UNIX_NS + 5 * MS,
        SESSION_START_UNIX_NS + 990 * MS,
    )
    gr, sms = capture.summary.metric("GR Active"), capture.summary.metric("SMs Active")
    assert (gr.samples, gr.mean) == (4096, (1 + 4094 * 2 + 4) / 4096)
    assert (sms.samples, sms.mean) == (3, (3 + 5 + 6) / 3)  # the row at rowid 2**62 is read


def test_a_bucket_past_the_packed_keys_reach_stays_with_its_metric(
    captures: dict[str, Path], tmp_path: Path
) -> None:
    """At 1 µs a bucket past 2**39 (6.4 days into the session) would carry into the metric id;
    the scan sees that the bounds reach that far and hands such a capture to the plain GROUP BY."""
    week = 7 * 86_400 * 1_000_000_000
    path = with_rows(captures, tmp_path, [(week, TYPE_ID, 2, 77)])
    capture = read_capture(path, interval_ms=0.001)
    assert capture.skipped == []
    counts = {m.metric: (m.samples, m.max) for m in capture.summary.metrics}
    assert counts[SM_ISSUE] == (51, 77.0)
    assert counts["Tensor Active [Throughput %]"][0] == 50  # metricId 3, the next one
    assert capture.summary.end_unix_ns == SESSION_START_UNIX_NS + week
