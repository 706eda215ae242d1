"""`read_capture` on a capture small enough to work out by hand: the whole summary and series.

The other tests compare means and percentiles with numpy on thousands of samples, where p50 and
p51 of integer percentages are the same number. Here one metric has four samples (1, 2, 4, 10),
so every figure is an interpolation checked exactly; and the branches those tests never take:
a type id whose GPU TARGET_INFO_GPU does not list, a first or last sample at the session start
itself, an [MHz] clock on either side of the Hz threshold (1e6 exactly is MHz, one more is Hz),
a 1 ns interval, a page SQLite cannot read, a non-number interval, and the debug log of
left-out rows.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
from pathlib import Path

import pytest
from tests.support.nsight import SESSION_START_UNIX_NS, TYPE_ID, damaged

from spark_otel import ConfigError, InputError
from spark_otel.receivers.nsight import NsightLayout, SeriesPoint, read_capture
from spark_otel.receivers.nsight.reader import check_interval_ms

S = SESSION_START_UNIX_NS
MS = 1_000_000
GPU = "fa2a1d7d-0000-4000-8000-0000000000b1"
SM_ISSUE = "SM Issue [Throughput %]"
# The first four samples of each metric (1-4 ms); SM Issue (metricId 2) reads 1, 2, 4, 10.
FOUR_SAMPLES = (
    f"DELETE FROM GPU_METRICS WHERE timestamp > {4 * MS};"
    f"UPDATE GPU_METRICS SET value = CASE timestamp WHEN {MS} THEN 1 WHEN {2 * MS} THEN 2 "
    f"WHEN {3 * MS} THEN 4 ELSE 10 END WHERE metricId = 2;"
)


def test_four_samples_give_every_figure_worked_out_by_hand(captures: dict[str, Path], tmp_path: Path) -> None:
    path = damaged(captures, tmp_path, "plain", FOUR_SAMPLES)
    capture = read_capture(path, interval_ms=2)
    summary = capture.summary
    assert summary.model_dump(exclude={"metrics"}) == {
        "capture": path.name,
        "path": str(path.resolve()),
        "uid": hashlib.sha256(f"{path.resolve()}|{S}".encode()).hexdigest()[:24],
        "layout": NsightLayout.PLAIN,
        "product_version": "2026.1.3.425",
        "schema_version": "3.24.18",
        "session_start_unix_ns": S,
        "start_unix_ns": S + MS,
        "end_unix_ns": S + 4 * MS,
        "duration_s": 0.003,
        "interval_ms": 2.0,
    }
    # p50: rank 1.5 of 3, halfway from 2 to 4; p95: rank 2.85, 0.85 of the way from 4 to 10
    assert summary.metric(SM_ISSUE).model_dump() == pytest.approx(
        {
            "metric": SM_ISSUE,
            "name": "SM Issue",
            "unit": "%",
            "gpu_id": GPU,
            "gpu_name": "NVIDIA GB10",
            "samples": 4,
            "mean": 4.25,
            "p50": 3.0,
            "p95": 9.1,
            "min": 1.0,
            "max": 10.0,
            "scaled_from_hz": False,
        }
    )
    # 2 ms buckets: [0, 2) holds 1 ms, [2, 4) holds 2 and 3 ms, [4, 6) holds 4 ms
    assert capture.series[(GPU, SM_ISSUE)] == [
        SeriesPoint(S, 1.0, 1),
        SeriesPoint(S + 2 * MS, 3.0, 2),
        SeriesPoint(S + 4 * MS, 10.0, 1),
    ]
    assert capture.skipped == []


def test_a_gpu_that_target_info_gpu_does_not_list_is_named_by_its_low_byte(
    captures: dict[str, Path], tmp_path: Path
) -> None:
    third = TYPE_ID | 3  # PerfWorks GPU 3; TARGET_INFO_GPU lists only GPU 0
    path = damaged(
        captures,
        tmp_path,
        "plain",
        f"UPDATE GPU_METRICS SET typeId = {third}; UPDATE TARGET_INFO_GPU_METRICS SET typeId = {third}",
    )
    capture = read_capture(path)
    assert capture.gpu_names == {"3": None}
    issue = capture.summary.metric(SM_ISSUE)
    assert (issue.gpu_id, issue.gpu_name, issue.samples) == ("3", None, 50)


def test_a_capture_whose_last_sample_is_at_the_session_start_ends_there(
    captures: dict[str, Path], tmp_path: Path
) -> None:
    path = damaged(
        captures, tmp_path, "plain", FOUR_SAMPLES + f"UPDATE GPU_METRICS SET timestamp = timestamp - {4 * MS}"
    )
    summary = read_capture(path).summary
    assert (summary.start_unix_ns, summary.end_unix_ns) == (S - 3 * MS, S)
    assert summary.duration_s == 0.003


def test_a_capture_whose_first_sample_is_at_the_session_start_starts_there(
    captures: dict[str, Path], tmp_path: Path
) -> None:
    path = damaged(
        captures, tmp_path, "plain", FOUR_SAMPLES + f"UPDATE GPU_METRICS SET timestamp = timestamp - {MS}"
    )
    summary = read_capture(path).summary
    assert (summary.start_unix_ns, summary.end_unix_ns) == (S, S + 3 * MS)
    assert summary.duration_s == 0.003


GPC_CLOCK = "GPC Clock Frequency [MHz]"


@pytest.mark.parametrize(
    ("raw", "mean", "scaled"),
    [(1_000_000, 1_000_000.0, False), (1_000_001, 1.000001, True)],
    ids=["1e6-is-MHz", "above-1e6-is-Hz"],
)
def test_an_mhz_clock_is_rescaled_from_hz_only_above_a_million(
    captures: dict[str, Path], tmp_path: Path, raw: int, mean: float, scaled: bool
) -> None:
    path = damaged(
        captures,
        tmp_path,
        "plain",
        f"UPDATE GPU_METRICS SET value = {raw} WHERE metricId = "
        f"(SELECT metricId FROM TARGET_INFO_GPU_METRICS WHERE metricName = '{GPC_CLOCK}')",
    )
    clock = read_capture(path).summary.metric(GPC_CLOCK)
    figures = (clock.mean, clock.p50, clock.p95, clock.min, clock.max)
    assert figures == pytest.approx((mean,) * 5, rel=1e-12)
    assert (clock.unit, clock.samples, clock.scaled_from_hz) == ("MHz", 50, scaled)


def test_a_one_nanosecond_interval_gives_each_sample_its_own_point(
    captures: dict[str, Path], tmp_path: Path
) -> None:
    path = damaged(
        captures,
        tmp_path,
        "plain",
        FOUR_SAMPLES + f"UPDATE GPU_METRICS SET timestamp = {MS + 1} WHERE metricId = 2 AND timestamp = {MS}",
    )
    capture = read_capture(path, interval_ms=0.000001)
    assert capture.summary.interval_ms == 0.000001
    assert capture.series[(GPU, SM_ISSUE)] == [
        SeriesPoint(S + MS + 1, 1.0, 1),  # an odd nanosecond keeps its own time
        SeriesPoint(S + 2 * MS, 2.0, 1),
        SeriesPoint(S + 3 * MS, 4.0, 1),
        SeriesPoint(S + 4 * MS, 10.0, 1),
    ]


def test_a_page_sqlite_cannot_read_is_an_input_error_naming_the_file(
    captures: dict[str, Path], tmp_path: Path
) -> None:
    path = damaged(captures, tmp_path, "plain", FOUR_SAMPLES)
    with sqlite3.connect(path) as conn:  # GPU_METRICS' root page: the header and schema stay whole
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'GPU_METRICS'").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    data = bytearray(path.read_bytes())
    data[(root - 1) * size : root * size] = b"\xff" * size
    path.write_bytes(bytes(data))
    with pytest.raises(InputError) as caught:
        read_capture(path)
    assert str(caught.value) == (
        f"{path}: cannot read the export (database disk image is malformed); is the file complete?"
    )


@pytest.mark.parametrize("interval", ["100", None])
def test_an_interval_that_is_not_a_number_is_a_config_error(interval: object) -> None:
    with pytest.raises(ConfigError) as caught:
        check_interval_ms(interval)
    assert str(caught.value) == (
        "interval must be a finite number of milliseconds above 0 and at most 3,600,000 (an hour), "
        f"got {interval!r}"
    )


def test_each_left_out_line_is_logged_at_debug_as_it_reads(
    captures: dict[str, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = damaged(captures, tmp_path, "plain", "UPDATE TARGET_INFO_GPU SET pwGpuId = 'x'")
    caplog.set_level(logging.DEBUG, logger="spark_otel.receivers.nsight.reader")
    capture = read_capture(path)
    line = f"{path}: TARGET_INFO_GPU row 1: pwGpuId is 'x', not an integer (1 row of 1 left out)"
    assert capture.skipped == [line]
    logged = [r for r in caplog.records if r.name == "spark_otel.receivers.nsight.reader"]
    assert [(r.levelno, r.getMessage()) for r in logged] == [(logging.DEBUG, line)]
