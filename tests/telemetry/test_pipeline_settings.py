"""The settings `configure()` hands on: the interval each metric reader exports at (real or model
time), the service name, an explicit ``otlp=False``; what a flush and a second shutdown answer;
and the instruments every provider gets, with each spec's name, kind, unit, description and
scope as the SDK exports them."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, Sum
from opentelemetry.sdk.trace import SpanProcessor
from tests.support.metric_points import CapturingExporter

from spark_otel import __version__
from spark_otel import _semconv as sc
from spark_otel._clock import CLOCK_ENV
from spark_otel.store import STORE_ENV
from spark_otel.telemetry import build_providers, configure
from spark_otel.telemetry.bulk_histogram import bulk_histograms_of
from spark_otel.telemetry.instruments import SPECS, instruments
from spark_otel.telemetry.pipeline import TIME_SCALE_ENV, Telemetry
from spark_otel.telemetry.providers import set_global_providers

ENDPOINTS = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
)


@pytest.fixture(autouse=True)
def _nothing_set(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        *ENDPOINTS,
        STORE_ENV,
        TIME_SCALE_ENV,
        CLOCK_ENV,
        "SPARK_OTEL_MODEL_CLOCK",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "OTEL_METRIC_EXPORT_INTERVAL",
        "OTEL_SERVICE_NAME",
        "OTEL_RESOURCE_ATTRIBUTES",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def made() -> Iterator[list[Telemetry]]:
    telemetries: list[Telemetry] = []
    yield telemetries
    for telemetry in telemetries:
        telemetry.shutdown()


def _configure(made: list[Telemetry], **kwargs: Any) -> Telemetry:
    made.append(configure(set_global=False, **kwargs))
    return made[-1]


def intervals_ms(telemetry: Telemetry) -> list[float]:
    """Each metric reader's export interval, store's first (the SDK's own field)."""
    return [r._export_interval_millis for r in telemetry.meter_provider._metric_readers]  # type: ignore[attr-defined]


@pytest.mark.parametrize(("model_s", "want_ms"), [(20.0, 2000), (55.55, 5555), (5.0, 1000)])
def test_a_model_time_interval_is_real_time_at_the_clocks_scale_never_under_a_second(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, made: list[Telemetry], model_s: float, want_ms: int
) -> None:
    monkeypatch.setenv(CLOCK_ENV, "10")
    telemetry = _configure(made, store=tmp_path / "s.sqlite", metric_export_interval_model_s=model_s)
    assert intervals_ms(telemetry) == [want_ms]


def test_a_real_interval_goes_to_every_reader(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, made: list[Telemetry], free_port: int
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{free_port}")
    telemetry = _configure(made, store=tmp_path / "s.sqlite", metric_export_interval_ms=250)
    assert (telemetry.otlp, intervals_ms(telemetry)) == (True, [250, 250])


def test_without_an_interval_the_store_exports_every_10_s_and_otlp_as_the_settings_say(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, made: list[Telemetry], free_port: int
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{free_port}")
    monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", "7000")
    telemetry = _configure(made, store=tmp_path / "s.sqlite")
    assert intervals_ms(telemetry) == [10_000, 7000]


def test_otlp_false_wins_over_an_endpoint_in_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, made: list[Telemetry], free_port: int
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{free_port}")
    telemetry = _configure(made, store=tmp_path / "s.sqlite", otlp=False)
    assert (telemetry.otlp, len(intervals_ms(telemetry))) == (False, 1)


def test_the_service_name_given_names_both_providers(tmp_path: Path, made: list[Telemetry]) -> None:
    telemetry = _configure(made, store=tmp_path / "s.sqlite", service_name="eval-runner")
    names = {
        telemetry.tracer_provider.resource.attributes["service.name"],
        telemetry.meter_provider._sdk_config.resource.attributes["service.name"],  # type: ignore[attr-defined]
    }
    assert names == {"eval-runner"}


class _Processor(SpanProcessor):
    def __init__(self, flushed: bool) -> None:
        self.flushed = flushed

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.flushed


class _MetricsUnflushed(CapturingExporter):
    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return False


@pytest.mark.parametrize(("spans", "metrics", "want"), [(True, True, True), (False, True, False)])
def test_a_flush_succeeds_only_when_spans_and_metrics_both_flush(
    spans: bool, metrics: bool, want: bool
) -> None:
    exporter = CapturingExporter() if metrics else _MetricsUnflushed()
    telemetry = Telemetry(*build_providers([_Processor(spans)], [(exporter, math.inf)]), store=None)
    try:
        assert telemetry.force_flush() is want
    finally:
        telemetry.shutdown()


def test_a_second_shutdown_does_nothing(
    tmp_path: Path, made: list[Telemetry], caplog: pytest.LogCaptureFixture
) -> None:
    telemetry = _configure(made, store=tmp_path / "s.sqlite")
    telemetry.shutdown()
    with caplog.at_level(logging.DEBUG, logger="opentelemetry"):
        telemetry.shutdown()
    assert [r.getMessage() for r in caplog.records] == []


def test_every_instrument_is_exported_with_its_specs_kind_unit_description_and_scope() -> None:
    """Through the SDK, one value at a time, as on a provider spark-otel did not build."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    try:
        made = instruments(provider)
        assert instruments(provider) is made
        for spec in SPECS:
            instrument = getattr(made, spec.field)
            if spec.kind == "histogram":
                instrument.record(1.0)
            else:
                instrument.add(1)
        data = reader.get_metrics_data()
        assert data is not None
        [scoped] = data.resource_metrics[0].scope_metrics
        assert (scoped.scope.name, scoped.scope.version, scoped.scope.schema_url) == (
            sc.SCOPE_NAME,
            __version__,
            sc.SCHEMA_URL,
        )
        exported = {m.name: m for m in scoped.metrics}
        assert sorted(exported) == sorted(spec.name for spec in SPECS)
        for spec in SPECS:
            metric = exported[spec.name]
            assert (metric.unit, metric.description) == (spec.unit, spec.description), spec.name
            kind = (
                "histogram"
                if not isinstance(metric.data, Sum)
                else "counter"
                if metric.data.is_monotonic
                else "up_down_counter"
            )
            assert kind == spec.kind, spec.name
            if spec.kind == "histogram":
                assert tuple(metric.data.data_points[0].explicit_bounds) == spec.buckets, spec.name
    finally:
        provider.shutdown()


def test_the_bulk_histograms_go_out_under_spark_otels_scope_with_their_specs_unit_and_description() -> None:
    exporter = CapturingExporter()
    tracer_provider, meter_provider = build_providers([], [(exporter, math.inf)])
    try:
        bulk = bulk_histograms_of(meter_provider)
        assert bulk is not None
        for histogram in bulk.all():
            histogram.record(1.0, {})
        meter_provider.force_flush()
        [scoped] = exporter.exports[-1].resource_metrics[0].scope_metrics
        assert (scoped.scope.name, scoped.scope.version, scoped.scope.schema_url) == (
            sc.SCOPE_NAME,
            __version__,
            sc.SCHEMA_URL,
        )
        got = {
            m.name: (m.unit, m.description, tuple(m.data.data_points[0].explicit_bounds))
            for m in scoped.metrics
        }
        want = {spec.name: (spec.unit, spec.description, spec.buckets) for spec in SPECS if spec.bulk}
        assert got == want
    finally:
        tracer_provider.shutdown()
        meter_provider.shutdown()


@pytest.fixture
def no_global_providers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The API's globals as in a fresh process (they can be set once per process)."""
    from opentelemetry import trace
    from opentelemetry.metrics import _internal as metrics_internal
    from opentelemetry.util._once import Once

    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    monkeypatch.setattr(trace, "_TRACER_PROVIDER_SET_ONCE", Once())
    monkeypatch.setattr(metrics_internal, "_METER_PROVIDER", None)
    monkeypatch.setattr(metrics_internal, "_METER_PROVIDER_SET_ONCE", Once())
    monkeypatch.setattr(metrics_internal, "_PROXY_METER_PROVIDER", metrics_internal._ProxyMeterProvider())
    monkeypatch.delenv("OTEL_PYTHON_TRACER_PROVIDER", raising=False)
    monkeypatch.delenv("OTEL_PYTHON_METER_PROVIDER", raising=False)


@pytest.mark.usefixtures("no_global_providers")
def test_spark_otels_providers_become_global_only_where_the_user_set_none() -> None:
    from opentelemetry import metrics, trace

    ours = build_providers([], [(CapturingExporter(), math.inf)])
    users_meter = MeterProvider(shutdown_on_exit=False)
    try:
        metrics.set_meter_provider(users_meter)
        set_global_providers(*ours)
        assert (trace.get_tracer_provider(), metrics.get_meter_provider()) == (ours[0], users_meter)
    finally:
        for provider in (*ours, users_meter):
            provider.shutdown()


@pytest.mark.usefixtures("no_global_providers")
def test_with_no_global_providers_spark_otels_become_both() -> None:
    from opentelemetry import metrics, trace

    ours = build_providers([], [(CapturingExporter(), math.inf)])
    try:
        set_global_providers(*ours)
        assert (trace.get_tracer_provider(), metrics.get_meter_provider()) == ours
    finally:
        for provider in ours:
            provider.shutdown()
