"""Nsight exports with bad rows: each is named by table and row, left out, and the rest still read."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import pytest
from tests.support.nsight import SESSION_START_UNIX_NS, SM_ISSUE, damaged

from spark_otel import ConfigError, InputError
from spark_otel.receivers.nsight import read_capture

ROWS = 19 * 50  # 19 metrics, 50 samples each (0.05 s at 1 kHz)


def sm_issue_row(conn_path: Path) -> int:
    with sqlite3.connect(conn_path) as conn:
        metric_id = conn.execute(
            "SELECT metricId FROM TARGET_INFO_GPU_METRICS WHERE metricName = ?", (SM_ISSUE,)
        ).fetchone()[0]
        rowid = conn.execute(
            "SELECT MIN(rowid) FROM GPU_METRICS WHERE metricId = ?", (metric_id,)
        ).fetchone()[0]
    conn.close()
    return int(rowid)


@pytest.mark.parametrize(
    ("column", "value", "problem"),
    [
        ("value", None, "value is NULL, not a number"),
        ("value", "'abc'", "value is 'abc', not a number"),
        ("value", "9e999", "value is inf, not a finite number"),
        ("timestamp", None, "timestamp is NULL, not an integer"),
        ("timestamp", "'soon'", "timestamp is 'soon', not an integer"),
        (
            "timestamp",
            "9000000000000000000",
            "timestamp 9000000000000000000 reads as the year 2311, outside 2000-2100",
        ),
        ("typeId", None, "typeId is NULL, not an integer"),
        ("metricId", "'x'", "metricId is 'x', not an integer"),
        ("metricId", "2.5", "metricId is 2.5, not an integer"),
    ],
)
def test_a_bad_gpu_metrics_row_is_named_and_left_out(
    captures: dict[str, Path], tmp_path: Path, column: str, value: str | None, problem: str
) -> None:
    rowid = sm_issue_row(captures["plain"])
    path = damaged(
        captures,
        tmp_path,
        "plain",
        f"UPDATE GPU_METRICS SET {column} = {value or 'NULL'} WHERE rowid = {rowid}",
    )
    capture = read_capture(path)
    assert capture.skipped == [f"{path}: GPU_METRICS row {rowid}: {problem} (1 row of {ROWS:,} left out)"]
    # The metric keeps its other 49 samples, every other metric all 50.
    counts = {m.metric: m.samples for m in capture.summary.metrics}
    assert counts.pop(SM_ISSUE) == 49
    assert set(counts.values()) == {50}
    assert all(math.isfinite(m.mean) for m in capture.summary.metrics)


def test_many_bad_rows_are_one_line_with_their_count(captures: dict[str, Path], tmp_path: Path) -> None:
    path = damaged(captures, tmp_path, "plain", "UPDATE GPU_METRICS SET value = NULL WHERE rowid % 10 = 0")
    [line] = read_capture(path).skipped
    assert line == f"{path}: GPU_METRICS row 10: value is NULL, not a number (95 rows of {ROWS:,} left out)"


def test_a_capture_whose_every_row_is_bad_is_an_input_error(
    captures: dict[str, Path], tmp_path: Path
) -> None:
    path = damaged(captures, tmp_path, "plain", "UPDATE GPU_METRICS SET value = 'x'")
    with pytest.raises(InputError) as caught:
        read_capture(path)
    assert str(caught.value) == (
        f"{path}: GPU_METRICS row 1: value is 'x', not a number ({ROWS} rows of {ROWS} left out); "
        "no sample is left to read"
    )


@pytest.mark.parametrize(
    ("sql", "problem"),
    [
        (
            "UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = 'x'",
            "is 'x', not a whole number of nanoseconds",
        ),
        (
            "UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = 1.5",
            "is 1.5, not a whole number of nanoseconds",
        ),
        (
            "UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = 5",
            "5 reads as the year 1970, outside 2000-2100",
        ),
    ],
)
def test_a_session_start_that_cannot_place_the_samples_is_an_input_error(
    captures: dict[str, Path], tmp_path: Path, sql: str, problem: str
) -> None:
    path = damaged(captures, tmp_path, "plain", sql)
    with pytest.raises(InputError) as caught:
        read_capture(path)
    assert str(caught.value) == (
        f"{path}: TARGET_INFO_SESSION_START_TIME.utcEpochNs {problem}; the samples cannot be placed in time"
    )


def test_a_metric_name_row_that_cannot_name_is_reported_and_its_samples_read_by_id(
    captures: dict[str, Path], tmp_path: Path
) -> None:
    path = damaged(
        captures,
        tmp_path,
        "plain",
        f"UPDATE TARGET_INFO_GPU_METRICS SET metricName = NULL WHERE metricName = '{SM_ISSUE}'",
    )
    capture = read_capture(path)
    assert capture.skipped == [
        f"{path}: TARGET_INFO_GPU_METRICS row 3: metricName is NULL, not a name (1 row of 19 left out)"
    ]
    assert capture.summary.metric("metric 2").samples == 50


def test_a_table_without_the_columns_it_needs_is_named(captures: dict[str, Path], tmp_path: Path) -> None:
    path = damaged(
        captures,
        tmp_path,
        "plain",
        "DROP TABLE TARGET_INFO_GPU_METRICS; CREATE TABLE TARGET_INFO_GPU_METRICS (typeId, metricId)",
    )
    with pytest.raises(InputError) as caught:
        read_capture(path)
    assert (
        str(caught.value)
        == f"{path}: TARGET_INFO_GPU_METRICS lacks column(s) metricName; is this an Nsight export?"
    )


@pytest.mark.parametrize(
    ("sql", "problem"),
    [
        (
            "UPDATE GENERIC_EVENTS SET data = '{bad' WHERE rowid = 2",
            "data is not valid JSON (1 row of 50 left out)",
        ),
        (
            "UPDATE GENERIC_EVENTS SET data = '[1, 2]' WHERE rowid = 2",
            "data is a JSON array, not an object of metric values (1 row of 50 left out)",
        ),
        (  # nested past SQLite's JSON depth: not valid JSON, never a crash
            "UPDATE GENERIC_EVENTS SET data = '{\"a\": ' || replace(hex(zeroblob(3000)), '00', '[') || "
            "replace(hex(zeroblob(3000)), '00', ']') || '}' WHERE rowid = 2",
            "data is not valid JSON (1 row of 50 left out)",
        ),
        (
            "UPDATE GENERIC_EVENTS SET timestamp = NULL WHERE rowid = 2",
            "timestamp is NULL, not an integer (1 row of 50 left out)",
        ),
        (
            "UPDATE GENERIC_EVENTS SET data = json_set(data, '$.\"SM Issue\"', 'high') WHERE rowid = 2",
            "'SM Issue' is text 'high', not a finite number (1 value left out)",
        ),
    ],
)
def test_a_bad_generic_event_is_named_and_left_out(
    captures: dict[str, Path], tmp_path: Path, sql: str, problem: str
) -> None:
    path = damaged(captures, tmp_path, "generic", sql)
    capture = read_capture(path)
    assert capture.skipped == [f"{path}: GENERIC_EVENTS row 2: {problem}"]
    assert capture.summary.metric("SM Issue").samples == 49


@pytest.mark.parametrize("interval", [0, -1, math.nan, math.inf, 3_600_001, True])
def test_an_interval_outside_its_bounds_is_a_config_error(captures: dict[str, Path], interval: float) -> None:
    with pytest.raises(ConfigError) as caught:
        read_capture(captures["plain"], interval_ms=interval)
    assert str(caught.value) == (
        "interval must be a finite number of milliseconds above 0 and at most 3,600,000 (an hour), "
        f"got {interval!r}"
    )


def test_the_longest_interval_reads_the_capture_as_one_bucket(captures: dict[str, Path]) -> None:
    capture = read_capture(captures["plain"], interval_ms=3_600_000)
    assert {len(points) for points in capture.series.values()} == {1}
    assert capture.summary.start_unix_ns == SESSION_START_UNIX_NS + 1_000_000
