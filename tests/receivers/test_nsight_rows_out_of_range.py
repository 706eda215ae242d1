"""Two reader bugs fixed (issue 18): rows that every scan must read alike, whichever scan runs.

- A sample just past 2100 whose downsampling interval starts before 2100 (the session start is
  not a whole number of intervals from 2100) was read by the plain GROUP BY (a table WITHOUT
  ROWID, an interval under 1 µs), which checked the bucket, not the time: counted, placed in
  2099, and missing from the capture's end time. The packed scan left it out; now both do.
- A value of -2**63, a valid SQLite integer, failed the whole read ("integer overflow": abs()
  of it overflows); it is read as the number it is.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from tests.support.nsight import SESSION_START_UNIX_NS, TYPE_ID, WITHOUT_ROWID, damaged

from spark_otel._validate import LATEST_NS
from spark_otel.receivers.nsight import read_capture

SM_ISSUE = "SM Issue [Throughput %]"  # metricId 2
START = SESSION_START_UNIX_NS - 7  # 7 ns before a whole number of 100 ms (and of 500 ns) from 2100
AT_2100 = LATEST_NS - START  # its bucket starts 7 ns before 2100


@pytest.mark.parametrize(
    ("table", "interval_ms", "where"),
    [
        ("rowid", 100, "GPU_METRICS row 951"),  # the packed, chunked scan
        ("rowid", 0.0005, "GPU_METRICS row 951"),  # the plain GROUP BY: interval under 1 µs
        ("without rowid", 100, "GPU_METRICS"),  # the plain GROUP BY: no rowids to chunk by
    ],
)
def test_a_sample_past_2100_in_a_bucket_that_starts_before_it_is_left_out_by_every_scan(
    captures: dict[str, Path], tmp_path: Path, table: str, interval_ms: float, where: str
) -> None:
    path = tmp_path / "capture.sqlite"
    shutil.copy(captures["plain"], path)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = ?", (START,))
        if table == "without rowid":
            conn.executescript(WITHOUT_ROWID)
            conn.execute("INSERT INTO GPU_METRICS VALUES (951, ?, ?, 2, 77)", (AT_2100, TYPE_ID))
        else:
            conn.execute("INSERT INTO GPU_METRICS VALUES (?, ?, 2, 77)", (AT_2100, TYPE_ID))
    conn.close()
    capture = read_capture(path, interval_ms=interval_ms)
    assert capture.skipped == [
        f"{path}: {where}: timestamp {AT_2100} reads as the year 2100, outside 2000-2100 "
        "(1 row of 951 left out)"
    ]
    issue = capture.summary.metric(SM_ISSUE)
    assert (issue.samples, issue.max) == (50, 7.0)
    assert capture.summary.end_unix_ns == START + 50_000_000


def test_the_lowest_integer_value_is_read_in_gpu_metrics(captures: dict[str, Path], tmp_path: Path) -> None:
    path = tmp_path / "capture.sqlite"
    shutil.copy(captures["plain"], path)
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO GPU_METRICS VALUES (25000000, ?, 2, ?)", (TYPE_ID, -(2**63)))
    conn.close()
    capture = read_capture(path)
    assert capture.skipped == []
    issue = capture.summary.metric(SM_ISSUE)
    assert (issue.samples, issue.min) == (51, float(-(2**63)))


def test_the_lowest_integer_value_is_read_in_generic_events(
    captures: dict[str, Path], tmp_path: Path
) -> None:
    sql = (
        "UPDATE GENERIC_EVENTS SET data = json_set(data, '$.\"SM Issue\"', json('-9223372036854775808')) "
        "WHERE rowid = 2"
    )
    capture = read_capture(damaged(captures, tmp_path, "generic", sql))
    assert capture.skipped == []
    issue = capture.summary.metric("SM Issue")
    assert (issue.samples, issue.min) == (50, float(-(2**63)))
