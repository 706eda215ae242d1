"""The metadata tables, message for message: layout, export versions, session start, GPUs, metric names.

The other tests read well-formed metadata or damage one column with NULL; these pin what the
rest of the readers' branches say: several missing columns listed in order, a GPU_METRICS table
nobody can name, a GENERIC_EVENTS table with exactly (or fewer than) the columns it needs, the
whole no-GPU-metrics advice, metadata of another shape left out, the session start's bounds
(2000 in, 2100 out), and a bad TARGET_INFO_GPU or TARGET_INFO_GPU_METRICS row named by column.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.support.nsight import damaged

from spark_otel import InputError, NoGpuMetricsError
from spark_otel._validate import EARLIEST_NS, LATEST_NS
from spark_otel.receivers.nsight import NsightLayout, read_capture

START_TABLE = "TARGET_INFO_SESSION_START_TIME"
NO_GPU_METRICS_ADVICE = (
    "holds no GPU metrics (no GPU_METRICS table): it was captured without them. Capture with "
    "`nsys profile --gpu-metrics-devices=0 --gpu-metrics-frequency=10000 ...` (needs profiling "
    "permission on the GPU) and export again"
)
NO_GPU_METRICS = "DROP TABLE GPU_METRICS; DROP TABLE TARGET_INFO_GPU_METRICS;"


def read_error(path: Path, error: type[Exception] = InputError) -> str:
    with pytest.raises(error) as caught:
        read_capture(path)
    return str(caught.value)


def test_gpu_metrics_lacking_columns_lists_them_sorted(captures: dict[str, Path], tmp_path: Path) -> None:
    path = damaged(
        captures,
        tmp_path,
        "plain",
        "ALTER TABLE GPU_METRICS DROP COLUMN value; ALTER TABLE GPU_METRICS DROP COLUMN metricId",
    )
    assert read_error(path) == f"{path}: GPU_METRICS lacks column(s) metricId, value"


def test_gpu_metrics_without_their_names_table_is_refused(captures: dict[str, Path], tmp_path: Path) -> None:
    path = damaged(captures, tmp_path, "plain", "DROP TABLE TARGET_INFO_GPU_METRICS")
    assert read_error(path) == (
        f"{path}: GPU_METRICS without TARGET_INFO_GPU_METRICS; the metrics cannot be named"
    )


def test_metric_names_lacking_two_columns_lists_both(captures: dict[str, Path], tmp_path: Path) -> None:
    path = damaged(
        captures,
        tmp_path,
        "plain",
        "ALTER TABLE TARGET_INFO_GPU_METRICS DROP COLUMN metricName; "
        "ALTER TABLE TARGET_INFO_GPU_METRICS DROP COLUMN metricId",
    )
    assert read_error(path) == (
        f"{path}: TARGET_INFO_GPU_METRICS lacks column(s) metricId, metricName; is this an Nsight export?"
    )


def test_no_gpu_metrics_names_the_versions_and_gives_the_whole_advice(
    captures: dict[str, Path], tmp_path: Path
) -> None:
    path = damaged(captures, tmp_path, "plain", NO_GPU_METRICS)
    assert read_error(path, NoGpuMetricsError) == (
        f"{path}: this Nsight Systems export (Nsight Systems 2026.1.3.425, schema 3.24.18) "
        + NO_GPU_METRICS_ADVICE
    )


def test_no_gpu_metrics_without_versions_names_none(captures: dict[str, Path], tmp_path: Path) -> None:
    path = damaged(captures, tmp_path, "plain", NO_GPU_METRICS + "DROP TABLE META_DATA_EXPORT")
    assert (
        read_error(path, NoGpuMetricsError) == f"{path}: this Nsight Systems export " + NO_GPU_METRICS_ADVICE
    )


def test_generic_events_without_their_data_column_are_no_gpu_metrics(
    captures: dict[str, Path], tmp_path: Path
) -> None:
    path = damaged(captures, tmp_path, "generic", "ALTER TABLE GENERIC_EVENTS DROP COLUMN data")
    assert read_error(path, NoGpuMetricsError) == (
        f"{path}: this Nsight Systems export (Nsight Systems 2026.1.3.425, schema 3.24.18) "
        + NO_GPU_METRICS_ADVICE
    )


def test_generic_events_with_exactly_the_columns_needed_read(
    captures: dict[str, Path], tmp_path: Path
) -> None:
    path = damaged(captures, tmp_path, "generic", "ALTER TABLE GENERIC_EVENTS DROP COLUMN rawTimestamp")
    summary = read_capture(path).summary
    assert summary.layout is NsightLayout.GENERIC
    assert summary.metric("SM Issue").samples == 50


def test_meta_data_of_another_shape_is_ignored(captures: dict[str, Path], tmp_path: Path) -> None:
    path = damaged(captures, tmp_path, "plain", "ALTER TABLE META_DATA_EXPORT RENAME COLUMN name TO key")
    capture = read_capture(path)
    assert (capture.summary.product_version, capture.summary.schema_version) == (None, None)
    assert capture.skipped == []


def test_a_version_stored_as_a_blob_is_not_a_version(captures: dict[str, Path], tmp_path: Path) -> None:
    path = damaged(
        captures,
        tmp_path,
        "plain",
        "UPDATE META_DATA_EXPORT SET value = CAST('2026.1' AS BLOB) WHERE name = 'EXPORT_PRODUCT_VERSION'",
    )
    summary = read_capture(path).summary
    assert (summary.product_version, summary.schema_version) == (None, "3.24.18")


def test_a_session_start_table_without_its_column_is_named(captures: dict[str, Path], tmp_path: Path) -> None:
    path = damaged(
        captures, tmp_path, "plain", f"ALTER TABLE {START_TABLE} RENAME COLUMN utcEpochNs TO epoch"
    )
    assert read_error(path) == f"{path}: {START_TABLE} lacks column(s) utcEpochNs; is this an Nsight export?"


@pytest.mark.parametrize(
    "sql",
    [f"UPDATE {START_TABLE} SET utcEpochNs = NULL", f"DELETE FROM {START_TABLE}"],
    ids=["null", "empty"],
)
def test_a_null_or_absent_session_start_is_missing(
    captures: dict[str, Path], tmp_path: Path, sql: str
) -> None:
    path = damaged(captures, tmp_path, "plain", sql)
    assert read_error(path) == (f"{path}: no {START_TABLE}.utcEpochNs; the samples cannot be placed in time")


def test_a_session_starting_at_2000_exactly_is_read(captures: dict[str, Path], tmp_path: Path) -> None:
    path = damaged(captures, tmp_path, "plain", f"UPDATE {START_TABLE} SET utcEpochNs = {EARLIEST_NS}")
    summary = read_capture(path).summary
    assert summary.session_start_unix_ns == EARLIEST_NS
    assert summary.start_unix_ns == EARLIEST_NS + 1_000_000  # the first sample, 1 ms in


def test_a_session_starting_at_2100_exactly_is_refused(captures: dict[str, Path], tmp_path: Path) -> None:
    path = damaged(captures, tmp_path, "plain", f"UPDATE {START_TABLE} SET utcEpochNs = {LATEST_NS}")
    assert read_error(path) == (
        f"{path}: {START_TABLE}.utcEpochNs {LATEST_NS} reads as the year 2100, outside 2000-2100; "
        "the samples cannot be placed in time"
    )


def test_a_gpu_row_with_a_text_perfworks_id_is_left_out(captures: dict[str, Path], tmp_path: Path) -> None:
    path = damaged(captures, tmp_path, "plain", "UPDATE TARGET_INFO_GPU SET pwGpuId = 'x'")
    capture = read_capture(path)
    assert capture.skipped == [
        f"{path}: TARGET_INFO_GPU row 1: pwGpuId is 'x', not an integer (1 row of 1 left out)"
    ]
    # no GPU is known, so the samples are placed on the type id's low byte, unnamed
    assert capture.gpu_names == {"0": None}
    assert {m.gpu_id for m in capture.summary.metrics} == {"0"}


@pytest.mark.parametrize(
    ("column", "value", "problem"),
    [
        ("typeId", "'x'", "typeId is 'x', not an integer"),
        ("metricId", "'y'", "metricId is 'y', not an integer"),
        ("metricName", "'  '", "metricName is '  ', not a name"),
    ],
)
def test_a_metric_name_row_that_cannot_name_says_which_column(
    captures: dict[str, Path], tmp_path: Path, column: str, value: str, problem: str
) -> None:
    path = damaged(
        captures,
        tmp_path,
        "plain",
        f"UPDATE TARGET_INFO_GPU_METRICS SET {column} = {value} WHERE metricName = 'SM Issue [Throughput %]'",
    )
    capture = read_capture(path)
    assert capture.skipped == [f"{path}: TARGET_INFO_GPU_METRICS row 3: {problem} (1 row of 19 left out)"]
    assert capture.summary.metric("metric 2").samples == 50  # SM Issue's samples, read by id
