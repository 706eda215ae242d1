"""OTEL_* batch and export settings that would lose data are replaced by their defaults with one
warning, never a traceback, and the cell still reaches the store and the collector (issue 40)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from tests.support.otlp import OtlpSink

from spark_otel import ConfigError
from spark_otel.store import Store
from spark_otel.telemetry import configure
from spark_otel.telemetry.settings import BatchSettings, ExportSettings, export_settings

ONE_CELL = (
    "import spark_otel\n"
    "with spark_otel.cell('settings', 'c1', engine='test') as c:\n"
    "    c.add_tokens(completion=5)\n"
)
DEFAULTS = ExportSettings(
    batch=BatchSettings(5000, 2048, 512, 30_000),
    metric_interval_millis=60_000,
    metric_timeout_millis=30_000,
    traces_timeout_s=10,
    metrics_timeout_s=10,
)


@pytest.fixture(autouse=True)
def _no_otel_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)


def _one_cell(tmp_path: Path, **settings: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(SPARK_OTEL_STORE=str(tmp_path / "store.sqlite"), **settings)
    return subprocess.run(
        [sys.executable, "-c", ONE_CELL], capture_output=True, text=True, timeout=60, env=env, check=False
    )


def _span_names(sink: OtlpSink) -> list[str]:
    names = []
    for body in sink.bodies_to("/v1/traces"):
        request = ExportTraceServiceRequest.FromString(body)
        names += [s.name for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    return names


def test_unset_settings_are_the_sdk_defaults() -> None:
    assert export_settings() == DEFAULTS


def test_usable_settings_are_taken_as_given(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "OTEL_BSP_SCHEDULE_DELAY": "250",
        "OTEL_BSP_MAX_QUEUE_SIZE": "100",
        "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "50",
        "OTEL_BSP_EXPORT_TIMEOUT": "1500.5",
        "OTEL_METRIC_EXPORT_INTERVAL": "inf",
        "OTEL_METRIC_EXPORT_TIMEOUT": "700",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "3",
        "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT": "4.5",
    }.items():
        monkeypatch.setenv(name, value)
    assert export_settings() == ExportSettings(
        batch=BatchSettings(250, 100, 50, 1500.5),
        metric_interval_millis=math.inf,
        metric_timeout_millis=700,
        traces_timeout_s=3,
        metrics_timeout_s=4.5,
    )


@pytest.mark.parametrize(
    ("name", "value", "unit", "default"),
    [
        ("OTEL_BSP_SCHEDULE_DELAY", "-1", "ms", "5000"),
        ("OTEL_BSP_SCHEDULE_DELAY", "0", "ms", "5000"),
        ("OTEL_BSP_SCHEDULE_DELAY", "inf", "ms", "5000"),
        ("OTEL_BSP_MAX_QUEUE_SIZE", "0", "spans", "2048"),
        ("OTEL_BSP_MAX_QUEUE_SIZE", "12.5", "spans", "2048"),
        ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "-5", "spans", "512"),
        ("OTEL_BSP_EXPORT_TIMEOUT", "nan", "ms", "30000"),
        ("OTEL_METRIC_EXPORT_INTERVAL", "-1", "ms", "60000"),
        ("OTEL_METRIC_EXPORT_TIMEOUT", "abc", "ms", "30000"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "-5", "s", "10"),
    ],
)
def test_an_unusable_setting_is_its_default_with_one_warning_naming_it(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    name: str,
    value: str,
    unit: str,
    default: str,
) -> None:
    monkeypatch.setenv(name, value)
    first = export_settings()
    assert export_settings() == first == DEFAULTS
    kind = "a whole number above 0" if unit == "spans" else "a number above 0"
    assert caplog.messages == [
        f"spark_otel: {name}={value!r} is not {kind} ({unit}); "
        f"spark-otel uses the default, {default} {unit}, so nothing is lost"
    ]


def test_a_signal_timeout_comes_before_the_general_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "-1")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "2")
    settings = export_settings()
    assert (settings.traces_timeout_s, settings.metrics_timeout_s) == (2, 10)


def test_a_batch_larger_than_its_queue_is_cut_to_the_queue(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "100")
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "1000")
    assert export_settings().batch == BatchSettings(5000, 100, 100, 30_000)
    assert caplog.messages == [
        "spark_otel: OTEL_BSP_MAX_EXPORT_BATCH_SIZE=1000 is larger than OTEL_BSP_MAX_QUEUE_SIZE=100; "
        "spark-otel exports batches of 100 spans"
    ]


def test_the_store_keeps_its_deep_queue_and_a_batch_that_fits_it() -> None:
    assert BatchSettings(5000, 100, 100, 30_000).with_queue(65_536, 500) == BatchSettings(
        500, 65_536, 100, 30_000
    )
    assert BatchSettings(5000, 100_000, 100_000, 30_000).with_queue(65_536, 500) == BatchSettings(
        500, 65_536, 65_536, 30_000
    )


@pytest.mark.parametrize(
    "setting",
    [
        {"OTEL_BSP_SCHEDULE_DELAY": "-1"},
        {"OTEL_BSP_MAX_QUEUE_SIZE": "0"},
        {"OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "100000"},
        {"OTEL_METRIC_EXPORT_INTERVAL": "-1"},
        {"OTEL_EXPORTER_OTLP_TIMEOUT": "-5"},
    ],
)
def test_a_cell_under_an_unusable_setting_reaches_the_store_and_the_collector(
    tmp_path: Path, setting: dict[str, str]
) -> None:
    sink = OtlpSink()
    try:
        done = _one_cell(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=sink.url, **setting)
    finally:
        sink.server.shutdown()
    assert done.returncode == 0
    assert "Traceback" not in done.stderr
    ((name, value),) = setting.items()
    warned = [line for line in done.stderr.splitlines() if line.startswith("spark_otel:")]
    assert len(warned) == 1
    assert f"{name}={value!r}" in warned[0] or f"{name}={value} " in warned[0]
    (stored,) = Store(tmp_path / "store.sqlite").cells()
    assert (stored.cell_id, stored.completion_tokens) == ("c1", 5)
    assert _span_names(sink) == ["cell settings"]


def test_an_otlp_exporter_that_cannot_be_built_leaves_the_cell_in_the_store(tmp_path: Path) -> None:
    done = _one_cell(
        tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9", OTEL_EXPORTER_OTLP_PROTOCOL="grpcx"
    )
    assert (done.returncode, done.stderr) == (
        0,
        "spark_otel: OTLP export is off: OTEL_EXPORTER_OTLP_PROTOCOL='grpcx': use 'http/protobuf' or 'grpc'; "
        "spans and metrics go to the embedded store instead\n",
    )
    (stored,) = Store(tmp_path / "store.sqlite").cells()
    assert stored.cell_id == "c1"


def test_otlp_alone_that_cannot_be_built_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpcx")
    with pytest.raises(ConfigError, match="OTEL_EXPORTER_OTLP_PROTOCOL='grpcx'"):
        configure(otlp=True, store=False, set_global=False)
